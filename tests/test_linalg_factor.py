"""The factorization family of tritensor.linalg (triton_kernels/linalg_factor.py; core entries in
core/ops/linalg_factor.py; derivatives in autograd/functions/linalg_factor.py) against float64
NumPy: LU, triangular solves, Cholesky, Householder QR and what is built on them.

Tolerances: a factorization of a well-conditioned n x n matrix (here a random one plus a multiple
of I, condition number below about 10) loses O(n) roundings per entry, so results are checked with
the "rounded_terms" profile scaled by 8 n; Q and R of QR and the LU's factors are compared
directly (LAPACK's sign choices are the kernels' too)."""
import numpy as np
import pytest

import tritensor as tt
from tritensor.autograd import gradcheck
from layouts import make
from tolerances import assert_close

L = tt.linalg
F32, F64 = tt.float32, tt.float64  # every test runs fp64 on each shape and fp32 on one or two
NPD = {tt.float32: np.float32, tt.float64: np.float64}


def _k(n):
    return 8 * max(n, 1)


def _well(shape, seed=0):
    """Random matrices with a dominant diagonal: condition numbers of a few."""
    rng = np.random.default_rng(seed)
    n = shape[-1]

    def values(s):
        a = rng.standard_normal(s)
        return a + 2 * np.sqrt(max(n, 1)) * np.eye(s[-2], s[-1]) if len(s) >= 2 else a
    return values


def _spd(n, batch=(), seed=1):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _matrix(batch, n, dtype, layout="contiguous", seed=0):
    shape = tuple(batch) + (n, n)
    if layout == "expanded" and not batch:
        layout = "contiguous"
    return make(shape, dtype, layout, _well(shape, seed))


@pytest.mark.parametrize("dtype,batch,n,layout", [(F64, (), 5, "transposed"), (F64, (2,), 4, "contiguous"),
                                                  (F64, (0,), 3, "contiguous"), (F64, (), 1, "contiguous"),
                                                  (F32, (2,), 3, "transposed")])
def test_lu_factor_and_unpack(dtype, batch, n, layout):
    """LU with partial pivoting: P L U rebuilds A, the pivots are LAPACK's, and torch.lu_unpack/lu agree."""
    A, ref = _matrix(batch, n, dtype, layout)
    LU, piv, info = L.lu_factor_ex(A)
    assert piv.dtype is tt.int32 and info.dtype is tt.int32 and tuple(info.shape) == batch
    P, Lo, U = L.lu(A)
    assert_close(P @ Lo @ U, ref, dtype, "rounded_terms", k=_k(n))
    P2, L2, U2 = tt.lu_unpack(*L.lu_factor(A))
    assert_close(L2, Lo.cpu().numpy(), dtype, "exact")
    assert_close(U2, U.cpu().numpy(), dtype, "exact")
    assert_close(P2, P.cpu().numpy(), dtype, "exact")
    lu2, piv2 = tt.lu(A)
    assert_close(lu2, LU.cpu().numpy(), dtype, "exact")
    assert np.array_equal(piv2.cpu().numpy(), piv.cpu().numpy())
    lu3, piv3, info3 = A.lu(get_infos=True)
    assert info3.cpu().numpy().tolist() == info.cpu().numpy().tolist() == np.zeros(batch, int).tolist()
    if n > 1 and ref.size:  # the pivots NumPy's LAPACK picks (the largest magnitude in each column)
        r = ref.reshape(-1, n, n)[0]
        p0 = piv.cpu().numpy().reshape(-1, n)[0]
        assert p0[0] - 1 == np.argmax(np.abs(r[:, 0]))


@pytest.mark.parametrize("m,n", [(5, 3), (3, 5)])
def test_lu_of_rectangular_and_singular_matrices(m, n):
    """A rectangular LU (L m x k, U k x n) and a singular A: info names the first zero pivot,
    lu_factor raises torch's error, det is 0."""
    A, ref = make((m, n), tt.float64, "contiguous", _well((m, n)))
    P, Lo, U = L.lu(A)
    assert tuple(Lo.shape) == (m, min(m, n)) and tuple(U.shape) == (min(m, n), n)
    assert_close(P @ Lo @ U, ref, tt.float64, "rounded_terms", k=_k(n))
    S = tt.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    _, _, info = L.lu_factor_ex(S)
    assert info.item() == 3
    with pytest.raises(RuntimeError, match=r"U\[3,3\] is zero"):
        L.lu_factor(S)
    assert L.det(S).item() == 0.0


@pytest.mark.parametrize("dtype,batch,n,layout", [(F64, (), 5, "transposed"), (F64, (2,), 3, "expanded"),
                                                  (F64, (0,), 3, "contiguous"), (F64, (), 1, "sliced"),
                                                  (F32, (2,), 3, "sliced")])
def test_solves_match_numpy(dtype, batch, n, layout):
    """solve_triangular (both triangles, both sides, unit diagonal), solve (matrix and vector
    right-hand sides, broadcast), lu_solve (adjoint, right side), cholesky_solve, triangular_solve."""
    A, ref = _matrix(batch, n, dtype, layout)
    B, bref = make(tuple(batch) + (n, 2), dtype, "contiguous", _well((n, 2), 3))
    k = _k(n)
    for upper in (True, False):
        T = np.triu(ref) if upper else np.tril(ref)
        assert_close(L.solve_triangular(A, B, upper=upper), np.linalg.solve(T, bref), dtype, "rounded_terms", k=k)
        Tu = T.copy()
        idx = np.arange(n)
        Tu[..., idx, idx] = 1.0
        assert_close(L.solve_triangular(A, B, upper=upper, unitriangular=True), np.linalg.solve(Tu, bref), dtype,
                     "rounded_terms", k=k)
        assert_close(L.solve_triangular(A, B.mT, upper=upper, left=False),
                     np.swapaxes(np.linalg.solve(np.swapaxes(T, -1, -2), bref), -1, -2), dtype, "rounded_terms", k=k)
        X, A_clone = tt.triangular_solve(B, A, upper=upper)
        assert_close(X, np.linalg.solve(T, bref), dtype, "rounded_terms", k=k)
        assert_close(A_clone, ref, dtype, "exact")
    assert_close(L.solve(A, B), np.linalg.solve(ref, bref), dtype, "rounded_terms", k=k)
    X, info = L.solve_ex(A, B)
    assert_close(X, np.linalg.solve(ref, bref), dtype, "rounded_terms", k=k)
    assert (info.cpu().numpy() == 0).all()
    assert_close(L.solve(A, B.mT, left=False), np.swapaxes(np.linalg.solve(np.swapaxes(ref, -1, -2), bref), -1, -2),
                 dtype, "rounded_terms", k=k)
    v = B[..., 0]
    assert_close(L.solve(A, v), np.linalg.solve(ref, bref[..., :1])[..., 0], dtype, "rounded_terms", k=k)
    one = B[..., 0, :, :] if batch and batch[0] else B  # one right-hand side broadcast over the batch
    assert_close(L.solve(A, one), np.linalg.solve(ref, one.cpu().numpy().astype(np.float64)), dtype,
                 "rounded_terms", k=k)
    LU, piv = L.lu_factor(A)
    assert_close(L.lu_solve(LU, piv, B), np.linalg.solve(ref, bref), dtype, "rounded_terms", k=k)
    assert_close(tt.lu_solve(B, LU, piv), np.linalg.solve(ref, bref), dtype, "rounded_terms", k=k)
    assert_close(L.lu_solve(LU, piv, B, adjoint=True), np.linalg.solve(np.swapaxes(ref, -1, -2), bref), dtype,
                 "rounded_terms", k=k)
    assert_close(L.lu_solve(LU, piv, B.mT, left=False),
                 np.swapaxes(np.linalg.solve(np.swapaxes(ref, -1, -2), bref), -1, -2), dtype, "rounded_terms", k=k)
    S = _spd(n, tuple(batch))
    Lc = L.cholesky(tt.tensor(S.astype(NPD[dtype])))
    assert_close(tt.cholesky_solve(B, Lc), np.linalg.solve(S, bref), dtype, "rounded_terms", k=k)
    assert_close(tt.cholesky_solve(B, Lc.mT, upper=True), np.linalg.solve(S, bref), dtype, "rounded_terms", k=k)


@pytest.mark.parametrize("dtype,batch,n,layout", [(F64, (), 5, "sliced"), (F64, (2,), 3, "contiguous"),
                                                  (F64, (0,), 3, "contiguous"), (F64, (), 1, "contiguous"),
                                                  (F64, (2,), 0, "contiguous"), (F32, (2,), 3, "transposed")])
def test_inverse_and_determinants(dtype, batch, n, layout):
    """inv/inv_ex/inverse, det/slogdet/logdet, matrix_power (negative too), matrix_exp, cholesky_inverse."""
    A, ref = _matrix(batch, n, dtype, layout)
    k = _k(n)
    inv = np.linalg.inv(ref) if ref.size else ref.copy()
    assert_close(L.inv(A), inv, dtype, "rounded_terms", k=k)
    assert_close(tt.inverse(A), inv, dtype, "rounded_terms", k=k)
    X, info = L.inv_ex(A)
    assert_close(X, inv, dtype, "rounded_terms", k=k)
    assert_close(A.det(), np.linalg.det(ref), dtype, "rounded_terms", k=k)
    assert_close(L.det(A), np.linalg.det(ref), dtype, "rounded_terms", k=k)
    s, logabs = tt.slogdet(A)
    S_ref, l_ref = np.linalg.slogdet(ref)
    assert_close(s, S_ref, dtype, "exact")
    assert_close(logabs, l_ref, dtype, "rounded_terms", k=k)
    s2, l2 = L.slogdet(A)
    assert_close(l2, l_ref, dtype, "rounded_terms", k=k)
    expected = np.where(S_ref > 0, l_ref, np.nan)
    assert_close(tt.logdet(A), expected, dtype, "rounded_terms", k=k)
    for p in (0, 1, 3, -2):
        assert_close(L.matrix_power(A, p), np.linalg.matrix_power(ref, p) if ref.size else ref, dtype,
                     "rounded_terms", k=k * 4)
    assert_close(A.matrix_power(2), ref @ ref, dtype, "rounded_terms", k=k * 4)
    if ref.size:
        import scipy.linalg
        small = ref / (2 * n)
        expm = np.stack([scipy.linalg.expm(m) for m in small.reshape(-1, n, n)]).reshape(small.shape)
        assert_close(L.matrix_exp(A / (2 * n)), expm, dtype, "rounded_terms", k=k)
        assert_close(tt.matrix_exp(A * (8.0 / n)), np.stack([scipy.linalg.expm(m) for m in (ref * 8.0 / n).reshape(
            -1, n, n)]).reshape(ref.shape), dtype, "rounded_terms", k=k * 20)
    S = _spd(n, tuple(batch)).astype(NPD[dtype])
    Lc = L.cholesky(tt.tensor(S))
    assert_close(tt.cholesky_inverse(Lc), np.linalg.inv(S.astype(np.float64)) if S.size else S, dtype,
                 "rounded_terms", k=k)


@pytest.mark.parametrize("dtype,batch,n", [(F64, (), 5), (F64, (2,), 3), (F64, (0,), 3), (F64, (), 1), (F32, (2,), 4)])
def test_cholesky(dtype, batch, n):
    """cholesky/cholesky_ex/torch.cholesky against NumPy, reading the lower triangle only; the
    upper factor; a matrix that is not positive-definite: info, and torch's LinAlgError."""
    S = _spd(n, tuple(batch))
    junk = np.triu(np.full(S.shape, 7.0), 1)  # the strict upper triangle is not read
    A = tt.tensor((np.tril(S) + junk).astype(NPD[dtype]))
    ref = np.linalg.cholesky(S) if S.size else S
    assert_close(L.cholesky(A), ref, dtype, "rounded_terms", k=_k(n))
    Lx, info = L.cholesky_ex(A)
    assert_close(Lx, ref, dtype, "rounded_terms", k=_k(n))
    assert (info.cpu().numpy() == 0).all() and info.dtype is tt.int32
    assert_close(L.cholesky(A, upper=True), np.swapaxes(ref, -1, -2), dtype, "rounded_terms", k=_k(n))
    assert_close(tt.cholesky(A), ref, dtype, "rounded_terms", k=_k(n))
    assert_close(A.cholesky(upper=True), np.swapaxes(ref, -1, -2), dtype, "rounded_terms", k=_k(n))
    bad = tt.tensor(np.diag([1.0, 2.0, -1.0, 3.0]).astype(NPD[dtype]))
    _, info = L.cholesky_ex(bad)
    assert info.item() == 3
    with pytest.raises(L.LinAlgError, match=r"the leading minor of order 3 is not positive-definite"):
        L.cholesky(bad)
    with pytest.raises(RuntimeError, match=r"\(Batch element 1\): The factorization could not be completed"):
        L.cholesky(tt.stack([bad.abs(), bad]))
    with pytest.raises(L.LinAlgError, match="order 3"):
        L.cholesky_ex(bad, check_errors=True)


@pytest.mark.parametrize("dtype,shape", [(F64, (5, 3)), (F64, (3, 5)), (F64, (2, 4, 3)), (F64, (0, 3, 2)),
                                         (F64, (1, 1)), (F32, (5, 3)), (F32, (3, 5))])
def test_qr_family(dtype, shape):
    """qr (reduced, complete, r) and torch.qr against NumPy's (the same LAPACK signs), geqrf with
    householder_product/orgqr rebuilding Q, ormqr applying it from either side."""
    A, ref = make(shape, dtype, "transposed" if len(shape) == 2 else "contiguous", _well(shape, 5))
    m, n = shape[-2:]
    kk = min(m, n)
    k = _k(max(m, n))
    for mode in ("reduced", "complete"):
        Q, R = L.qr(A, mode=mode)
        q_cols = m if mode == "complete" else kk
        Qr, Rr = (np.linalg.qr(ref, mode=mode) if ref.size else
                  (np.zeros(shape[:-2] + (m, q_cols)), np.zeros(shape[:-2] + (q_cols, n))))
        assert_close(Q, Qr, dtype, "rounded_terms", k=k)
        assert_close(R, Rr, dtype, "rounded_terms", k=k)
    Q0, R0 = L.qr(A, mode="r")
    assert Q0.numel() == 0
    assert_close(R0, np.linalg.qr(ref, mode="r") if ref.size else np.zeros(shape[:-2] + (kk, n)), dtype,
                 "rounded_terms", k=k)
    Q1, R1 = tt.qr(A)
    assert_close(Q1 @ R1, ref, dtype, "rounded_terms", k=k)
    Q2, _ = A.qr(some=False)
    assert tuple(Q2.shape) == shape[:-2] + (m, m)
    a, tau = tt.geqrf(A)
    a2, tau2 = A.geqrf()
    assert_close(a2, a.cpu().numpy(), dtype, "exact")
    Qr = np.linalg.qr(ref)[0] if ref.size else np.zeros(shape[:-2] + (m, kk))
    assert_close(L.householder_product(a.narrow(-1, 0, kk), tau), Qr, dtype, "rounded_terms", k=k)
    assert_close(tt.orgqr(a.narrow(-1, 0, kk), tau), Qr, dtype, "rounded_terms", k=k)
    Qc = np.linalg.qr(ref, mode="complete")[0] if ref.size else np.zeros(shape[:-2] + (m, m))
    C, cref = make(shape[:-2] + (m, 2), dtype, "contiguous", _well((m, 2), 6))
    assert_close(tt.ormqr(a, tau, C), Qc @ cref, dtype, "rounded_terms", k=k)
    assert_close(tt.ormqr(a, tau, C, transpose=True), np.swapaxes(Qc, -1, -2) @ cref, dtype, "rounded_terms", k=k)
    assert_close(a.ormqr(tau, C.mT, left=False), np.swapaxes(cref, -1, -2) @ Qc, dtype, "rounded_terms", k=k)


def test_a_33_by_33_system():
    """One odd size past a power of two: LU solve, inverse, Cholesky and QR of a 33 x 33 matrix."""
    A, ref = _matrix((), 33, tt.float64, "contiguous", seed=7)
    B, bref = make((33, 3), tt.float64, "contiguous", _well((33, 3), 8))
    assert_close(L.solve(A, B), np.linalg.solve(ref, bref), tt.float64, "rounded_terms", k=_k(33))
    assert_close(L.inv(A), np.linalg.inv(ref), tt.float64, "rounded_terms", k=_k(33))
    S = _spd(33)
    assert_close(L.cholesky(tt.tensor(S)), np.linalg.cholesky(S), tt.float64, "rounded_terms", k=_k(33))
    Q, R = L.qr(A)
    Qr, Rr = np.linalg.qr(ref)
    assert_close(Q, Qr, tt.float64, "rounded_terms", k=_k(33))
    assert_close(R, Rr, tt.float64, "rounded_terms", k=_k(33))


def test_linalg_composites():
    """multi_dot, vecdot, vander, diagonal, matmul, tensorinv and tensorsolve of tritensor.linalg."""
    rng = np.random.default_rng(11)
    a, b, c = rng.standard_normal((3, 4)), rng.standard_normal((4, 5)), rng.standard_normal((5,))
    T = lambda x: tt.tensor(x)  # noqa: E731
    assert_close(L.multi_dot([T(a), T(b), T(c)]), a @ b @ c, tt.float64, "accumulate", k=20)
    assert_close(L.multi_dot([T(c[:4]), T(b)]), c[:4] @ b, tt.float64, "accumulate", k=4)
    assert_close(L.vecdot(T(a), T(a[1])), (a * a[1]).sum(-1), tt.float64, "accumulate", k=4)
    x = rng.standard_normal((2, 4))
    assert_close(L.vander(T(x)), np.stack([np.vander(r, increasing=True) for r in x]), tt.float64,
                 "rounded_terms", k=4)
    assert_close(L.vander(T(x[0]), N=6), np.vander(x[0], 6, increasing=True), tt.float64, "rounded_terms", k=6)
    assert_close(L.diagonal(T(rng.standard_normal((2, 3, 3))), offset=1).cpu().numpy().shape, (2, 2), tt.int64,
                 "exact")
    assert_close(L.matmul(T(a), T(b)), a @ b, tt.float64, "accumulate", k=4)
    M = (rng.standard_normal((6, 6)) + 4 * np.eye(6)).reshape(6, 2, 3)
    assert_close(L.tensorinv(T(M), ind=1), np.linalg.tensorinv(M, ind=1), tt.float64, "rounded_terms", k=48)
    A4 = (rng.standard_normal((6, 6)) + 4 * np.eye(6)).reshape(2, 3, 6)
    B2 = rng.standard_normal((2, 3))
    assert_close(L.tensorsolve(T(A4), T(B2)), np.linalg.tensorsolve(A4, B2), tt.float64, "rounded_terms", k=48)
    with pytest.raises(RuntimeError, match="at least 2 tensors"):
        L.multi_dot([T(a)])


def test_errors_name_the_argument_as_torch():
    """torch's exception types and messages, before any kernel runs."""
    h = tt.ones(3, 3, dtype=tt.float16)
    with pytest.raises(NotImplementedError, match=r"not implemented for 'Half'"):
        L.lu_factor(h)
    with pytest.raises(NotImplementedError, match=r"\"cholesky_cpu\" not implemented for 'BFloat16'|"
                                                  r"\"cholesky_cuda\" not implemented for 'BFloat16'"):
        L.cholesky(tt.ones(3, 3, dtype=tt.bfloat16))
    with pytest.raises(RuntimeError, match="Low precision dtypes not supported. Got Half"):
        L.inv(h)
    with pytest.raises(RuntimeError, match="A must be batches of square matrices, but they are 2 by 3 matrices"):
        L.inv(tt.ones(2, 3))
    with pytest.raises(RuntimeError, match="The input tensor A must have at least 2 dimensions"):
        L.det(tt.ones(3))
    with pytest.raises(RuntimeError, match="Expected a floating point or complex tensor as input. Got Long"):
        L.inv(tt.ones(3, 3, dtype=tt.int64))
    with pytest.raises(RuntimeError, match=r"Incompatible shapes of A and B for the equation AX = B \(3x3 and 4x1\)"):
        L.solve(tt.eye(3), tt.ones(4))
    with pytest.raises(TypeError, match="argument 'A'"):
        L.solve([[1.0]], tt.ones(1))
    with pytest.raises(NotImplementedError, match="at most 128 rows and columns"):
        L.lu_factor(tt.ones(129, 129))
    sing = tt.zeros(2, 3, 3)
    with pytest.raises(L.LinAlgError, match=r"linalg.inv: \(Batch element 0\): The diagonal element 1 is zero"):
        L.inv(sing)
    with pytest.raises(L.LinAlgError, match="The solver failed because the input matrix is singular"):
        L.solve(tt.zeros(3, 3), tt.ones(3))
    assert issubclass(L.LinAlgError, RuntimeError)
    _, info = L.inv_ex(sing)
    assert info.tolist() == [1, 1]
    with pytest.raises(RuntimeError, match="qr received unrecognized mode 'x'"):
        L.qr(tt.eye(2), mode="x")


def _spd_leaf(n, seed=2):
    return tt.tensor(_spd(n, (), seed), requires_grad=True)


def test_linalg_factor_gradcheck():
    """torch's formulas, fp64, well-conditioned inputs (the derivatives' own tensors are recorded:
    a non-contiguous leaf too)."""
    rng = np.random.default_rng(4)
    A = tt.tensor(rng.standard_normal((2, 2)) + 2 * np.eye(2), requires_grad=True)
    At = tt.tensor(rng.standard_normal((2, 2)) + 2 * np.eye(2), requires_grad=True)
    B = tt.tensor(rng.standard_normal((2, 2, 1)), requires_grad=True)
    W = tt.tensor(rng.standard_normal((3, 2)), requires_grad=True)
    S = _spd_leaf(2)
    sym = lambda s: (s + s.mT) * 0.5  # noqa: E731
    checks = [  # several ops per check where they share inputs: each numerical Jacobian costs launches
        (lambda a, b: (L.solve_triangular(a, b, upper=True),  # A broadcast over B's batch
                       L.solve_triangular(a.mT, b.mT, upper=False, left=False, unitriangular=True),
                       tt.triangular_solve(b, a, upper=False, transpose=True)[0]), (A, B)),
        (lambda a, b: (L.solve(a, b), L.solve_ex(a, b[..., 0])[0]), (At, B)),  # a vector per batch too
        (lambda a: (L.inv_ex(a)[0], tt.inverse(a.mT), tt.det(a), tt.slogdet(a)[1], tt.logdet(a @ a.mT)), (A,)),
        (lambda s: (L.cholesky_ex(sym(s))[0], L.cholesky(sym(s), upper=True), tt.cholesky(sym(s))), (S,)),
        (lambda s, b: (tt.cholesky_solve(b[0], L.cholesky(sym(s))), tt.cholesky_inverse(L.cholesky(sym(s)))), (S, B)),
        (lambda w: (L.qr(w), tt.qr(w.mT)), (W,)),  # tall and wide
        (lambda b: (L.lu_solve(*L.lu_factor(At.detach()), b), tt.lu_solve(b, *L.lu_factor(At.detach()))), (B,)),
        (lambda a: (L.matrix_power(a, -2), tt.matrix_exp(a * 0.3)), (A,)),
        (lambda a: (lambda lu_, piv, info: (lu_, tt.lu_unpack(lu_, piv)[1], L.lu(a)[2], tt.lu(a)[0]))(
            *L.lu_factor_ex(a)), (At,)),
    ]
    for f, args in checks:
        assert gradcheck(f, args)
    singular = tt.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=tt.float64, requires_grad=True)
    tt.det(singular).backward()  # the cofactor matrix, as torch's SVD-based formula gives
    assert_close(singular.grad, np.array([[4.0, -2.0], [-2.0, 1.0]]), F64, "rounded_terms", k=_k(2))
    with pytest.raises(NotImplementedError, match="rectangular LU"):
        L.lu_factor(W)[0].sum().backward()
    with pytest.raises(RuntimeError, match="mode='r'"):
        L.qr(W, mode="r")[1].sum().backward()


# Bunch-Kaufman needs 2x2 blocks on these (small diagonals); LD and pivots as torch 2.13 (LAPACK's
# dsytrf) gives them, rounded to 12 digits
LDL_A = [[[-0.001, -0.16, 0.72, 2.5, 2.28], [-0.16, -0.063, -0.82, 0.78, 0.66], [0.72, -0.82, -0.191, 1.1, -1.41],
          [2.5, 0.78, 1.1, -0.006, 0.5], [2.28, 0.66, -1.41, 0.5, -0.061]],
         [[-0.059, 0.54, -0.98, 1.18, -0.99], [0.54, -0.063, -0.36, -1.92, -0.53], [-0.98, -0.36, -0.053, 1.04, -0.11],
          [1.18, -1.92, 1.04, -0.013, 0.24], [-0.99, -0.53, -0.11, 0.24, 0.055]]]
LDL_LD = [[[-0.001, 0.0, 0.0, 0.0, 0.0], [2.5, -0.006, 0.0, 0.0, 0.0],
           [0.440691623064, 0.288176276649, -0.82529187292, 0.0, 0.0],
           [0.311846699373, -0.06387526132, -2.55886503891, -0.97803134435, 0.0],
           [0.202188994101, 0.912080875598, -0.157484253925, 0.431534017692, -0.108482929115]],
          [[-0.059, 0.0, 0.0, 0.0, 0.0], [1.18, -0.013, 0.0, 0.0, 0.0],
           [0.872686979972, -0.786874125578, 1.620582330974, 0.0, 0.0],
           [-1.622970998819, 0.376478568703, -1.445189945325, -1.848462894516, 0.0],
           [0.19425380111, -0.829270360792, 0.581772294003, 0.467716587443, 0.302203007228]]]
LDL_PIVOTS = [[-4, -4, -5, -5, 5], [-4, -4, 3, 4, 5]]


@pytest.mark.parametrize("dtype", [F64, F32])
def test_ldl_factor_and_solve(dtype):
    """ldl_factor(_ex) as LAPACK's sytrf (torch's LD and pivots, 2x2 blocks included; only the lower
    triangle read), ldl_solve against NumPy's solve, an empty batch, 1 x 1, a singular D."""
    a = np.array(LDL_A)
    junk = np.triu(np.full(a.shape, 9.0), 1)
    A = tt.tensor((np.tril(a) + junk).astype(NPD[dtype]))
    LD, piv, info = L.ldl_factor_ex(A)
    assert_close(LD, np.array(LDL_LD), dtype, "rounded_terms", k=_k(5))
    assert piv.dtype is tt.int32 and piv.tolist() == LDL_PIVOTS and info.tolist() == [0, 0]
    LD2, piv2 = L.ldl_factor(A, hermitian=True)
    assert piv2.tolist() == LDL_PIVOTS
    B, bref = make((2, 5, 3), dtype, "contiguous", _well((5, 3), 9))
    assert_close(L.ldl_solve(LD, piv, B), np.linalg.solve(a, bref), dtype, "rounded_terms", k=_k(5))
    S = _spd(4, (3,))
    Ld, p = L.ldl_factor(tt.tensor(S.astype(NPD[dtype])))
    assert (p.cpu().numpy() == np.arange(1, 5)).all()  # positive definite: 1x1 blocks, no interchange
    assert_close(L.ldl_solve(Ld, p, B[:1, :4]), np.linalg.solve(S, bref[:1, :4]), dtype, "rounded_terms", k=_k(4))
    assert L.ldl_factor(tt.ones(0, 3, 3, dtype=dtype))[1].shape == (0, 3)
    one = L.ldl_factor(tt.tensor([[4.0]], dtype=dtype))
    assert one.pivots.tolist() == [1] and one.LD.item() == 4.0
    _, _, info = L.ldl_factor_ex(tt.zeros(2, 2, dtype=dtype))
    assert info.item() == 1
    with pytest.raises(L.LinAlgError, match="D is exactly singular"):
        L.ldl_factor(tt.zeros(2, 2, dtype=dtype))
    with pytest.raises(NotImplementedError, match="\"ldl_factor_kernel_c(pu|uda)\" not implemented for 'Half'"):
        L.ldl_factor(tt.ones(2, 2, dtype=tt.float16))


def test_native_ops_keep_their_dtype_under_autocast():
    """torch's matrix_exp, ormqr and lstsq are native ops, so autocast leaves them (and their
    products) in fp32, unlike composites such as matrix_power whose matmuls autocast lowers in torch too."""
    A, ref = _matrix((), 3, F32)
    with tt.autocast(A.device.type):
        E = L.matrix_exp(A / 6)
        h, tau = tt.geqrf(A)
        assert tt.ormqr(h, tau, A).dtype is F32 and L.lstsq(A, A).solution.dtype is F32
    assert E.dtype is F32
    import scipy.linalg
    assert_close(E, scipy.linalg.expm(ref / 6), F32, "rounded_terms", k=_k(3))
