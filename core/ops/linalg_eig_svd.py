"""Core entries of torch.linalg's symmetric eigendecomposition and SVD (``triton_kernels/linalg_eig_svd.py``,
cyclic Jacobi sweeps) and of what is computed from them: ``eigvalsh``, ``svdvals``, ``pinv``,
``matrix_rank``, ``cond``, ``torch.svd``, and ``lstsq`` (from QR).

Why it exists: the spectral half of ``tritensor.linalg``, on the GPU path without NumPy. Results are
sorted as torch's (eigenvalues ascending, singular values descending). Eigenvectors and singular
vectors are defined only up to sign (and up to rotation within a repeated value), in torch as
here: the signs may differ from torch's/LAPACK's; ``A = V diag(w) V^T`` and ``A = U diag(S) Vh``
hold and the vectors are orthonormal (U's columns for zero singular values completed by a QR).
Matrices are at most 128 on a side.
"""
from __future__ import annotations

import math
import numbers
from collections import namedtuple
from typing import TYPE_CHECKING

from ...runtime import dtype as dt
from ...triton_kernels import linalg_eig_svd as _k
from .. import dispatch
from ..tensor_base import TensorBase
from . import copy_into
from .linalg_factor import check_matrix, exact_product, linalg_qr as _qr

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor

# torch.return_types.*: named tuples
eigh_result = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
svd_result = namedtuple("linalg_svd", ["U", "S", "Vh"])
torch_svd_result = namedtuple("svd", ["U", "S", "V"])
lstsq_result = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])

_EPS = {"float32": 1.1920928955078125e-07, "float64": 2.220446049250313e-16}


def _empty(shape, dtype_, like):
    return TensorBase._empty(tuple(shape), dtype_, like.device)


def _contiguous3(A, m: int, n: int):
    batch = math.prod(A.shape[:-2])
    out = _empty((batch, m, n), A.dtype, A)
    if out.numel():
        copy_into(out.view(tuple(A.shape[:-2]) + (m, n)), A)
    return out, batch


def linalg_eigh(A, UPLO: str = "L") -> tuple:
    """``torch.linalg.eigh``: (eigenvalues ascending, eigenvectors as columns) of the symmetric
    matrix that A's lower (``UPLO='L'``) or upper triangle holds; vectors up to sign."""
    check_matrix(A, "linalg.eigh", "linalg_eigh")
    if UPLO not in ("L", "U", "l", "u"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    n = A.shape[-1]
    a, batch = _contiguous3(A, n, n)
    w = _empty((batch, n), A.dtype, A)
    v = _empty((batch, n, n), A.dtype, A)
    _k.eigh(a, w, v, batch, n, UPLO in ("L", "l"), True)
    return eigh_result(w.view(tuple(A.shape[:-1])), v.view(tuple(A.shape)))


def linalg_svd(A, full_matrices: bool = True, *, driver=None) -> tuple:
    """``torch.linalg.svd``: (U, S, Vh) with A = U diag(S) Vh, S descending; U and Vh up to sign.
    ``full_matrices`` completes U (or Vh) of a non-square A from a complete QR of A."""
    check_matrix(A, "linalg.svd", "linalg_svd", square=False)
    if driver is not None:
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with "
                           "cuSOLVER backend.")
    m, n = A.shape[-2:]
    if m < n:  # A^T = V S U^T
        U, S, Vh = linalg_svd(A.mT, full_matrices)
        return svd_result(Vh.mT, S, U.mT)
    k = n
    a, batch = _contiguous3(A, m, n)
    u = _empty((batch, m, k), A.dtype, A)
    s = _empty((batch, k), A.dtype, A)
    v = _empty((batch, k, k), A.dtype, A)
    _k.svd(a, u, s, v, batch, m, n, True)
    bshape = tuple(A.shape[:-2])
    U, S, V = u.view(bshape + (m, k)), s.view(bshape + (k,)), v.view(bshape + (k, k))
    if U.numel():
        # the kernel leaves zero the columns of negligible singular values (the last ones); U's QR keeps
        # the others (up to R's diagonal signs) and fills those with directions orthogonal to them
        Q, R = _qr(U, "complete" if full_matrices and m > n else "reduced")
        signs = R.diagonal(0, -2, -1).lt(0).to(U.dtype).mul(-2.0).add(1.0)
        Qk = Q.narrow(-1, 0, k)
        U = Qk.mul(signs.unsqueeze(-2))
        if full_matrices and m > n:
            full = _empty(bshape + (m, m), A.dtype, A)
            copy_into(full.narrow(-1, 0, k), U)
            copy_into(full.narrow(-1, k, m - k), Q.narrow(-1, k, m - k))
            return svd_result(full, S, V.mT)
    if full_matrices and m > n:  # an empty batch
        Q = _qr(A, "complete")[0]
        full = _empty(bshape + (m, m), A.dtype, A)
        copy_into(full.narrow(-1, 0, k), U)
        copy_into(full.narrow(-1, k, m - k), Q.narrow(-1, k, m - k))
        U = full
    return svd_result(U, S, V.mT)


def composites(ops: dict) -> dict:
    """The composite core entries (name -> function) over the dispatched ops of ``ops``."""
    def op(name):
        def call(*args, **kwargs):
            return dispatch.call(ops[name], *args, **kwargs)
        return call

    eigh, svd_op, qr_op, solve_tri, matmul = (op("linalg_eigh"), op("linalg_svd"), op("linalg_qr"),
                                              op("linalg_solve_triangular"), op("matmul"))

    def linalg_eigvalsh(A, UPLO: str = "L") -> Tensor:
        """``torch.linalg.eigvalsh``: eigh's eigenvalues (ascending)."""
        return eigh(A, UPLO)[0]

    def linalg_svdvals(A, *, driver=None) -> Tensor:
        """``torch.linalg.svdvals``: the singular values, descending."""
        return svd_op(A, False, driver=driver)[1]

    def svd(input, some: bool = True, compute_uv: bool = True) -> tuple:
        """``torch.svd`` (deprecated): (U, S, V) -- V, not Vh; with ``compute_uv=False`` U and V are zeros."""
        U, S, Vh = svd_op(input, not some)
        if not compute_uv:
            return torch_svd_result(U.mul(0.0), S, Vh.mT.mul(0.0))
        return torch_svd_result(U, S, Vh.mT)

    def _tolerance(S, atol, rtol, fn, A):
        """torch's cutoff max(atol, rtol * largest singular value), per matrix; rtol's default is
        eps * max(m, n) when atol is not given (or 0), else 0."""
        if atol is not None and not isinstance(atol, (numbers.Real, TensorBase)):
            raise TypeError(f"{fn}(): argument 'atol' must be float or Tensor, not {type(atol).__name__}")
        smax = S.amax(-1, keepdim=True) if S.shape[-1] else S.sum(-1, keepdim=True)
        if rtol is None:
            rtol = 0.0 if (atol is not None and (not isinstance(atol, numbers.Real) or atol > 0)) else (
                _EPS[S.dtype.name] * max(A.shape[-2:]))
        tol = smax.mul(rtol)
        if atol is not None:
            tol = tol.clamp_min(atol) if isinstance(atol, numbers.Real) else tol.maximum(
                atol.unsqueeze(-1) if atol.ndim else atol)
        return tol

    def linalg_pinv(A, *, atol=None, rtol=None, hermitian: bool = False) -> Tensor:
        """``torch.linalg.pinv``: V diag(1/S) U^T over the singular values above torch's cutoff."""
        check_matrix(A, "linalg.pinv", "linalg_pinv", square=False)
        if hermitian:
            w, V = eigh(A)
            tol = _tolerance(w.abs(), atol, rtol, "linalg_pinv", A)
            inv = w.reciprocal().where(w.abs().gt(tol), 0.0)
            return matmul(V.mul(inv.unsqueeze(-2)), V.mT)
        U, S, Vh = svd_op(A, False)
        tol = _tolerance(S, atol, rtol, "linalg_pinv", A)
        inv = S.reciprocal().where(S.gt(tol), 0.0)
        return matmul(Vh.mT.mul(inv.unsqueeze(-2)), U.mT)

    def pinverse(input, rcond: float = 1e-15) -> Tensor:
        """``torch.pinverse``: ``linalg.pinv`` with ``rtol=rcond``."""
        return linalg_pinv(input, rtol=rcond)

    def linalg_matrix_rank(A, *, atol=None, rtol=None, hermitian: bool = False) -> Tensor:
        """``torch.linalg.matrix_rank``: how many singular values exceed torch's cutoff (int64)."""
        check_matrix(A, "linalg.matrix_rank", "linalg_matrix_rank", square=False)
        S = eigh(A)[0].abs() if hermitian else svd_op(A, False)[1]
        tol = _tolerance(S, atol, rtol, "linalg_matrix_rank", A)
        return S.gt(tol).sum(-1)

    def linalg_cond(A, p=None) -> Tensor:
        """``torch.linalg.cond``: ||A||_p ||A^-1||_p; p None/2/-2 from the singular values, the
        other norms ('fro', 'nuc', inf, -inf, 1, -1) from the inverse."""
        check_matrix(A, "linalg.cond", "linalg_cond", square=p not in (None, 2, -2))
        if p in (None, 2, -2):
            S = svd_op(A, False)[1]
            hi, lo = S.narrow(-1, 0, 1).squeeze(-1), S.narrow(-1, S.shape[-1] - 1, 1).squeeze(-1)
            return hi.div(lo) if p in (None, 2) else lo.div(hi)
        inv = ops_inverse(A)
        if p == "nuc":
            return svd_op(A, False)[1].sum(-1).mul(svd_op(inv, False)[1].sum(-1))
        norm = op("linalg_matrix_norm")
        return norm(A, p).mul(norm(inv, p))

    ops_inverse = op("inverse")

    def linalg_lstsq(A, B, rcond=None, *, driver=None) -> tuple:
        """``torch.linalg.lstsq`` with the 'gels' semantics (torch's only CUDA driver): the least
        squares solution of a full-rank A by QR; residuals, rank and singular_values are empty,
        as torch's gels gives them."""
        check_matrix(A, "torch.linalg.lstsq", "linalg_lstsq", square=False)
        if not isinstance(B, TensorBase):
            raise TypeError(f"linalg_lstsq(): argument 'b' (position 2) must be Tensor, not {type(B).__name__}")
        if B.ndim != A.ndim - 1:
            check_matrix(B, "torch.linalg.lstsq", "linalg_lstsq", name="B", square=False, position=2)
        if B.dtype is not A.dtype:
            raise RuntimeError(f"torch.linalg.lstsq: Expected input and other to have the same dtype, but got "
                               f"input's dtype {A.dtype} and other's dtype {B.dtype}")
        if driver not in (None, "gels"):
            raise RuntimeError(f"torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)"
                               if driver not in ("gelsy", "gelsd", "gelss") else
                               f"torch.linalg.lstsq: only the 'gels' driver is implemented in tritensor, got {driver}")
        vector = B.ndim == A.ndim - 1
        Bm = B.unsqueeze(-1) if vector else B
        m, n = A.shape[-2:]
        if Bm.shape[-2] != m:
            raise RuntimeError(f"torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
        if m >= n:
            Q, R = qr_op(A, "reduced")
            X = solve_tri(R, exact_product(Q.mT, Bm), upper=True)  # torch's lstsq is one op: no autocast inside
        else:  # minimum-norm solution of the underdetermined system: A^T = Q R, X = Q R^-T B
            Q, R = qr_op(A.mT, "reduced")
            X = exact_product(Q, solve_tri(R.mT, Bm, upper=False))
        X = X.squeeze(-1) if vector else X
        empty = _empty((0,), A.dtype, A)
        return lstsq_result(X, empty, _empty((0,), dt.int64, A), empty)

    return {f.__name__: f for f in (linalg_eigvalsh, linalg_svdvals, svd, linalg_pinv, pinverse, linalg_matrix_rank,
                                    linalg_cond, linalg_lstsq)}
