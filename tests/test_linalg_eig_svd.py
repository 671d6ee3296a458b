"""eigh and svd of tritensor.linalg (cyclic Jacobi kernels, triton_kernels/linalg_eig_svd.py; core
entries in core/ops/linalg_eig_svd.py; derivatives in autograd/functions/linalg_eig_svd.py) and what
is computed from them, against float64 NumPy.

Eigenvectors and singular vectors are defined only up to sign (torch's too), so they are checked by
reconstruction and orthonormality, the values against NumPy. Tolerances: Jacobi's method is
accurate to a few roundings per entry; "rounded_terms" scaled by 8 n."""
import numpy as np
import pytest

import tritensor as tt
from tritensor.autograd import gradcheck
from layouts import make
from tolerances import assert_close

L = tt.linalg
F32, F64 = tt.float32, tt.float64  # every test runs fp64 on each shape and fp32 on one


def _k(n):
    return 8 * max(n, 1)


def _normal(seed):
    rng = np.random.default_rng(seed)
    return lambda s: rng.standard_normal(s)


def _orthonormal_columns(Q, dtype, n):
    q = Q.cpu().numpy().astype(np.float64)
    assert_close(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(q.shape[-1]), q.shape[:-2] + (q.shape[-1],) * 2),
                 dtype, "rounded_terms", k=_k(n))


@pytest.mark.parametrize("dtype,shape,layout", [(F64, (5, 5), "transposed"), (F64, (2, 4, 4), "contiguous"),
                                                (F64, (0, 3, 3), "contiguous"), (F64, (1, 1), "contiguous"),
                                                (F32, (2, 3, 3), "sliced")])
def test_eigh_matches_numpy(dtype, shape, layout):
    """eigh/eigvalsh: ascending eigenvalues as NumPy's; V diag(w) V^T rebuilds the symmetric matrix
    the chosen triangle holds; V orthonormal."""
    A, ref = make(shape, dtype, layout, _normal(sum(shape)))
    n = shape[-1]
    for uplo in ("L", "U"):
        tri = np.tril(ref) if uplo == "L" else np.triu(ref)
        sym = tri + np.swapaxes(tri, -1, -2) - tri * np.eye(n)
        w, V = L.eigh(A, UPLO=uplo)
        assert_close(w, np.linalg.eigvalsh(sym) if sym.size else w.cpu().numpy(), dtype, "rounded_terms", k=_k(n))
        v = V.cpu().numpy().astype(np.float64)
        rebuilt = v @ (w.cpu().numpy()[..., :, None] * np.swapaxes(v, -1, -2))
        assert_close(rebuilt, sym, dtype, "rounded_terms", k=_k(n))
        _orthonormal_columns(V, dtype, n)
    assert_close(L.eigvalsh(A, UPLO="U"), w.cpu().numpy(), dtype, "exact")
    assert tuple(w.shape) == shape[:-1] and tuple(V.shape) == shape


@pytest.mark.parametrize("dtype,shape,layout", [(F64, (5, 3), "transposed"), (F64, (3, 5), "contiguous"),
                                                (F64, (2, 3, 3), "contiguous"), (F64, (0, 3, 2), "contiguous"),
                                                (F64, (1, 1), "contiguous"), (F32, (2, 3, 2), "sliced")])
def test_svd_matches_numpy(dtype, shape, layout):
    """svd (full_matrices both ways), svdvals and torch.svd: descending singular values as NumPy's,
    U diag(S) Vh rebuilds A, U and V orthonormal (full ones too)."""
    A, ref = make(shape, dtype, layout, _normal(sum(shape) + 1))
    m, n = shape[-2:]
    k = min(m, n)
    s_ref = np.linalg.svd(ref, compute_uv=False) if ref.size else np.zeros(shape[:-2] + (k,))
    for full in (False, True):
        U, S, Vh = L.svd(A, full_matrices=full)
        assert tuple(U.shape) == shape[:-2] + (m, m if full else k)
        assert tuple(Vh.shape) == shape[:-2] + (n if full else k, n)
        assert_close(S, s_ref, dtype, "rounded_terms", k=_k(max(m, n)))
        u, vh = U.cpu().numpy().astype(np.float64), Vh.cpu().numpy().astype(np.float64)
        rebuilt = (u[..., :, :k] * S.cpu().numpy()[..., None, :]) @ vh[..., :k, :]
        assert_close(rebuilt, ref, dtype, "rounded_terms", k=_k(max(m, n)))
        _orthonormal_columns(U, dtype, max(m, n))
        _orthonormal_columns(Vh.mT, dtype, max(m, n))
    assert_close(L.svdvals(A), s_ref, dtype, "rounded_terms", k=_k(max(m, n)))
    U2, S2, V2 = tt.svd(A)
    assert_close(U2 @ S2.diag_embed() @ V2.mT, ref, dtype, "rounded_terms", k=_k(max(m, n)))
    U3, S3, V3 = A.svd(compute_uv=False)
    assert_close(S3, s_ref, dtype, "rounded_terms", k=_k(max(m, n)))
    assert float(U3.abs().sum().item()) == 0.0


def test_spectral_composites():
    """pinv/pinverse (hermitian too), matrix_rank (tolerances, rank-deficient; svd's U there), cond (p None, 2, -2,
    'fro', 1, inf), lstsq (tall: least squares; wide: minimum norm); fp64 (fp32 is svd's and eigh's)."""
    dtype = F64
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 4, 3))
    A = tt.tensor(a)
    ref = a.astype(np.float64)
    k = _k(4)
    assert_close(L.pinv(A), np.linalg.pinv(ref), dtype, "rounded_terms", k=k * 4)
    assert_close(tt.pinverse(A[0]), np.linalg.pinv(ref[0]), dtype, "rounded_terms", k=k * 4)
    sym = ref[0].T @ ref[0]
    assert_close(L.pinv(tt.tensor(sym.astype(a.dtype)), hermitian=True), np.linalg.pinv(sym), dtype, "rounded_terms",
                 k=k * 16)
    deficient = ref[0] @ np.diag([1.0, 1.0, 0.0]) @ ref[0, :3].T  # 4 x 3 of rank 2
    assert L.matrix_rank(tt.tensor(deficient.astype(a.dtype))).item() == 2
    for full in (False, True):  # U stays orthonormal where a singular value is 0 (as torch's)
        U, S, Vh = L.svd(tt.tensor(deficient), full_matrices=full)
        _orthonormal_columns(U, dtype, 4)
        u = U.cpu().numpy()[:, :3]
        assert_close(u * S.cpu().numpy() @ Vh.cpu().numpy(), deficient, dtype, "rounded_terms", k=k)
    assert L.matrix_rank(A).tolist() == [3, 3]
    assert L.matrix_rank(A, atol=1e6).tolist() == [0, 0]
    assert L.matrix_rank(tt.tensor(sym.astype(a.dtype)), hermitian=True).item() == 3
    sq = ref[:, :3, :3] + 2 * np.eye(3)
    S = tt.tensor(sq.astype(a.dtype))
    for p in (None, 2, -2, "fro", 1, float("inf")):
        assert_close(L.cond(S, p), np.linalg.cond(sq, p), dtype, "rounded_terms", k=k * 4)
    assert_close(L.cond(A), np.linalg.cond(ref), dtype, "rounded_terms", k=k * 4)  # rectangular: from the SVD
    with pytest.raises(RuntimeError, match="A must be batches of square matrices"):
        L.cond(A, "fro")
    B = rng.standard_normal((2, 4, 2))
    X = L.lstsq(A, tt.tensor(B.astype(a.dtype)))
    assert_close(X.solution, np.stack([np.linalg.lstsq(ref[i], B[i], rcond=None)[0] for i in range(2)]), dtype,
                 "rounded_terms", k=k * 4)
    assert X.residuals.numel() == 0 and X.rank.numel() == 0 and X.singular_values.numel() == 0
    Xw = L.lstsq(A.mT, tt.tensor(B[:, :3].astype(a.dtype)))[0]
    assert_close(Xw, np.stack([np.linalg.lstsq(ref[i].T, B[i, :3], rcond=None)[0] for i in range(2)]), dtype,
                 "rounded_terms", k=k * 4)


def test_a_33_by_33_spectrum():
    """One odd size past a power of two (a zero player pads the round-robin rotations)."""
    A, ref = make((33, 33), tt.float64, "contiguous", _normal(33))
    assert_close(L.svdvals(A), np.linalg.svd(ref, compute_uv=False), tt.float64, "rounded_terms", k=_k(33))
    w, V = L.eigh(A)
    sym = np.tril(ref) + np.tril(ref, -1).T
    assert_close(w, np.linalg.eigvalsh(sym), tt.float64, "rounded_terms", k=_k(33))
    _orthonormal_columns(V, tt.float64, 33)


def test_errors_name_the_argument_as_torch():
    with pytest.raises(NotImplementedError, match=r"\"linalg_eigh_c(pu|uda)\" not implemented for 'Half'"):
        L.eigh(tt.ones(2, 2, dtype=tt.float16))
    with pytest.raises(NotImplementedError, match=r"\"linalg_svd_c(pu|uda)\" not implemented for 'BFloat16'"):
        L.svd(tt.ones(2, 2, dtype=tt.bfloat16))
    with pytest.raises(RuntimeError, match="A must be batches of square matrices, but they are 2 by 3 matrices"):
        L.eigh(tt.ones(2, 3))
    with pytest.raises(RuntimeError, match="Expected UPLO argument to be 'L' or 'U', but got X"):
        L.eigh(tt.eye(2), UPLO="X")
    with pytest.raises(RuntimeError, match="The input tensor A must have at least 2 dimensions"):
        L.svd(tt.ones(3))
    with pytest.raises(NotImplementedError, match="at most 128 rows and columns"):
        L.svdvals(tt.ones(3, 200))


def test_linalg_eig_svd_gradcheck():
    """torch's formulas in fp64 on matrices with distinct eigen/singular values; the losses do not
    depend on the vectors' signs (squares)."""
    rng = np.random.default_rng(6)
    S = tt.tensor(rng.standard_normal((2, 2)), requires_grad=True)
    W = tt.tensor(rng.standard_normal((3, 2)), requires_grad=True)
    W1 = tt.tensor(rng.standard_normal((3, 1)), requires_grad=True)
    b = tt.tensor(rng.standard_normal(3), requires_grad=True)
    assert gradcheck(lambda s: (lambda w, v: (w, v * v, L.eigvalsh(s + s.mT)))(*L.eigh(s + s.mT)), (S,))
    assert gradcheck(lambda w: (lambda u, s, vh: (s, u * u, vh * vh, L.svdvals(w), tt.svd(w)[1]))(
        *L.svd(w, full_matrices=False)), (W,))
    assert gradcheck(lambda w: (lambda u, s, vh: (u * u, vh * vh))(*L.svd(w.mT, full_matrices=False)), (W,))
    assert gradcheck(lambda w: (L.pinv(w), tt.pinverse(w)), (W,))
    assert gradcheck(lambda s: L.cond(s), (S,))
    assert gradcheck(lambda w, b: L.lstsq(w, b)[0], (W1, b))
