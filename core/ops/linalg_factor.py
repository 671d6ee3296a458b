"""Core entries of torch.linalg's factorizations and what is solved with them: LU with partial
pivoting, triangular solves, Cholesky, Householder QR, and their composites (solve, inv, det,
slogdet, lu_solve, cholesky_solve ...).

Why it exists: ``tritensor.linalg`` (``core/linalg.py``) and torch's older ``torch.*``/Tensor names
(``inverse``, ``det``, ``triangular_solve``, ``geqrf`` ...) are ops of the table like every other;
this module checks their arguments as torch does (its exception types and messages, before any
kernel runs), allocates, and runs ``triton_kernels/linalg_factor.py``. The device path never calls
NumPy. Matrices are at most ``MAX_SIDE`` (128) on a side (one program holds one matrix); larger ones
are refused with a ``NotImplementedError`` naming the limit. float32/float64 only: Half and BFloat16
are refused with torch's ``not implemented for 'Half'``.

The ops that have a derivative (``linalg_solve_triangular``, ``linalg_cholesky_ex``, ``linalg_qr``,
``det``, ``slogdet``, ``linalg_inv_ex``, ``linalg_solve_ex``) are the core entries their autograd
Functions run (``autograd/functions/linalg_factor.py``); the composites are built in
:func:`composites` from the dispatched ops, so each piece is recorded.
"""
from __future__ import annotations

import math
import numbers
from collections import namedtuple
from typing import TYPE_CHECKING

from ...runtime import dtype as dt
from ...triton_kernels import linalg_factor as _k
from .. import dispatch
from ..shape import broadcast_shapes
from ..tensor_base import TensorBase
from . import copy_into, fill
from . import matmul as _mm

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor


# torch.return_types.*: named tuples
lu_factor_ex_result = namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])
lu_factor_result = namedtuple("linalg_lu_factor", ["LU", "pivots"])
lu_result = namedtuple("linalg_lu", ["P", "L", "U"])
lu_unpack_result = namedtuple("lu_unpack", ["P", "L", "U"])
cholesky_ex_result = namedtuple("linalg_cholesky_ex", ["L", "info"])
inv_ex_result = namedtuple("linalg_inv_ex", ["inverse", "info"])
solve_ex_result = namedtuple("linalg_solve_ex", ["result", "info"])
slogdet_result = namedtuple("slogdet", ["sign", "logabsdet"])
geqrf_result = namedtuple("geqrf", ["a", "tau"])
qr_result = namedtuple("qr", ["Q", "R"])
triangular_solve_result = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])
ldl_factor_ex_result = namedtuple("linalg_ldl_factor_ex", ["LD", "pivots", "info"])
ldl_factor_result = namedtuple("linalg_ldl_factor", ["LD", "pivots"])


class LinAlgError(RuntimeError):
    """torch.linalg.LinAlgError: a factorization failed (a singular matrix, one not positive-definite)."""


TORCH_NAME = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
              "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def torch_name(d) -> str:
    """A dtype as torch's "not implemented for 'Half'" messages spell it."""
    return TORCH_NAME.get(d.name, d.name)


def check_matrix(A, fn: str, kernel: str, name: str = "A", square: bool = True, position: int = 1) -> None:
    """torch's checks of a (batch of) matrix argument, in torch's order: a tensor, at least 2-D,
    square if asked, a float32/float64 dtype, within the one-program size."""
    if not isinstance(A, TensorBase):
        raise TypeError(f"{fn}(): argument '{name}' (position {position}) must be Tensor, not {type(A).__name__}")
    if A.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor {name} must have at least 2 dimensions.")
    m, n = A.shape[-2], A.shape[-1]
    if square and m != n:
        raise RuntimeError(f"{fn}: {name} must be batches of square matrices, but they are {m} by {n} matrices")
    check_dtype(A, fn, kernel)
    if max(m, n) > _k.MAX_SIDE:
        raise NotImplementedError(f"{fn}: tritensor factorizes a matrix in one program, so at most {_k.MAX_SIDE} "
                                  f"rows and columns; got {m} by {n}")


def check_dtype(A, fn: str, kernel: str) -> None:
    """Refuse fp16/bf16 with torch's message: the factorizations run in fp32 and fp64 only."""
    if A.dtype in (dt.float16, dt.bfloat16):
        dev = "cuda" if A.device.type == "cuda" else "cpu"
        raise NotImplementedError(f'"{kernel}_{dev}" not implemented for \'{torch_name(A.dtype)}\'')
    if A.dtype not in (dt.float32, dt.float64):
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. Got {torch_name(A.dtype)}")


def _empty(shape, dtype_, like) -> Tensor:
    return TensorBase._empty(tuple(shape), dtype_, like.device)


def _batched(A) -> tuple:
    """A contiguous (batch, m, n) copy of ``A`` (never ``A`` itself: kernels write in place), and batch."""
    m, n = A.shape[-2], A.shape[-1]
    batch = math.prod(A.shape[:-2])
    out = _empty((batch, m, n), A.dtype, A)
    if out.numel():
        copy_into(out.view(A.shape), A)
    return out, batch


def eye_like(A, n: int, batch_shape=()) -> Tensor:
    """The n x n identity (broadcast over ``batch_shape``) in ``A``'s dtype and device."""
    out = _empty(tuple(batch_shape) + (n, n), A.dtype, A)
    fill(out, 0.0)
    if out.numel():
        fill(out.diagonal(0, -2, -1), 1.0)
    return out


def _raise_info(info, fn: str, message) -> None:
    """torch's error for the first nonzero ``info`` (a host read, as torch's checks)."""
    codes = info.reshape(-1).tolist()
    for i, c in enumerate(codes):
        if c > 0:
            where = f"(Batch element {i}): " if info.ndim > 0 else ""
            raise LinAlgError(f"{fn}: {where}{message(c)}")


# ----- LU --------------------------------------------------------------------------------------
def linalg_lu_factor_ex(A, *, pivot: bool = True, check_errors: bool = False) -> tuple:
    """``torch.linalg.lu_factor_ex``: (LU, pivots, info), pivots 1-based int32 as LAPACK's, info
    the first zero pivot (1-based) per matrix or 0."""
    check_matrix(A, "torch.linalg.lu_factor_ex", "lu", square=False)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    m, n = A.shape[-2:]
    lu, batch = _batched(A)
    piv = _empty((batch, min(m, n)), dt.int32, A)
    info = _empty((batch,), dt.int32, A)
    _k.lu_factor(lu, piv, info, batch, m, n)
    shape = A.shape[:-2]
    lu, piv, info = lu.view(A.shape), piv.view(tuple(shape) + (min(m, n),)), info.view(tuple(shape))
    if check_errors:
        _raise_info(info, "linalg.lu_factor_ex", lambda c: f"U[{c},{c}] is zero and using it on lu_solve would result "
                    "in a division by zero.")
    return lu_factor_ex_result(lu, piv, info)


def lu_permutation(pivots, n: int) -> tuple:
    """(perm, sign) of LAPACK pivots (..., k): ``perm[..., i]`` the input row at row i (int64),
    ``sign`` the permutation's parity (int32, +1 or -1)."""
    k = pivots.shape[-1]
    batch = math.prod(pivots.shape[:-1])
    piv = pivots.contiguous()
    perm = _empty(tuple(pivots.shape[:-1]) + (n,), dt.int64, pivots)
    sign = _empty(tuple(pivots.shape[:-1]), dt.int32, pivots)
    _k.permutation(piv, perm, sign, batch, n, k)
    return perm, sign


# ----- triangular solve ------------------------------------------------------------------------
def _solve_shapes(A, B, fn: str, left: bool) -> tuple:
    """The broadcast batch shape of A (..., n, n) and B (..., n, k) (or (..., k, n) when not left)."""
    n = A.shape[-1]
    rows = B.shape[-2] if left else B.shape[-1]
    if rows != n:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"{fn}: Incompatible shapes of A and B for the equation {eq} "
                           f"({A.shape[-2]}x{A.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})")
    return broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2]))


def linalg_solve_triangular(A, B, *, upper, left: bool = True, unitriangular: bool = False) -> Tensor:
    """``torch.linalg.solve_triangular``: X with A X = B (or X A = B with ``left=False``), reading
    only A's ``upper`` (or lower) triangle, its diagonal taken as ones with ``unitriangular``."""
    fn = "linalg.solve_triangular"
    check_matrix(A, fn, "triangular_solve")
    check_matrix(B, fn, "triangular_solve", name="B", square=False, position=2)
    if not isinstance(upper, bool):
        raise TypeError(f"linalg_solve_triangular(): argument 'upper' must be bool, not {type(upper).__name__}")
    if A.dtype is not B.dtype:
        raise RuntimeError(f"{fn}: Expected A and B to have the same dtype, but found A of type "
                           f"{torch_name(A.dtype)} and B of type {torch_name(B.dtype)} instead")
    batch = _solve_shapes(A, B, fn, left)
    n = A.shape[-1]
    X = _empty(tuple(batch) + tuple(B.shape[-2:]), B.dtype, B)
    if X.numel():
        copy_into(X, B.expand(*X.shape))
    T = A.expand(*batch, n, n)
    if not left:  # X A = B  <=>  A^T X^T = B^T
        T, X_view, upper = T.mT, X.mT, not upper
    else:
        X_view = X
    b = math.prod(batch)
    if b and n and X_view.shape[-1]:
        try:  # A read in place where its batch is one stride (contiguous, broadcast, transposed)
            ts = _batch_strides(T, batch)
        except ValueError:
            T = T.contiguous()
            ts = _batch_strides(T, batch)
        _k.triangular_solve(T, X_view, b, n, X_view.shape[-1], ts, _batch_strides(X_view, batch), upper,
                            unitriangular)
    return X


def _batch_strides(t, batch) -> tuple:
    """(batch stride, row stride, col stride) for a tensor whose batch dims collapse to one stride
    (a broadcast is stride 0; a contiguous batch its matrix size); refused otherwise."""
    st = t.stride()
    nb = len(batch)
    dims = [(s, st[i]) for i, s in enumerate(t.shape[:nb]) if s != 1]
    if not dims:
        bs = 0
    else:
        bs = dims[-1][1]
        expected = bs
        for size, stride in reversed(dims):
            if stride != expected:
                raise ValueError("uncollapsible batch")
            expected = stride * size
    return bs, st[-2], st[-1]


# ----- Cholesky --------------------------------------------------------------------------------
def linalg_cholesky_ex(A, *, upper: bool = False, check_errors: bool = False) -> tuple:
    """``torch.linalg.cholesky_ex``: (L, info) with A = L L^T from A's lower triangle (U = L^T with
    ``upper``); info is the order of the first leading minor that is not positive-definite, or 0."""
    check_matrix(A, "linalg.cholesky", "cholesky")
    n = A.shape[-1]
    a, batch = _batched(A)
    out = _empty((batch, n, n), A.dtype, A)
    info = _empty((batch,), dt.int32, A)
    _k.cholesky(a, out, info, batch, n)
    L, info = out.view(A.shape), info.view(tuple(A.shape[:-2]))
    if check_errors:
        _raise_info(info, "linalg.cholesky", _not_pd)
    return cholesky_ex_result(L.mT.contiguous() if upper else L, info)


def _not_pd(c) -> str:
    return (f"The factorization could not be completed because the input is not positive-definite "
            f"(the leading minor of order {c} is not positive-definite).")


# ----- QR --------------------------------------------------------------------------------------
def geqrf(input) -> tuple:
    """``torch.geqrf``: LAPACK's compact QR (a, tau): R on and above the diagonal, the Householder
    vectors below it (unit heads implied), tau (..., min(m, n))."""
    check_matrix(input, "geqrf", "geqrf", name="input", square=False)
    m, n = input.shape[-2:]
    a, batch = _batched(input)
    tau = _empty((batch, min(m, n)), input.dtype, input)
    _k.geqrf(a, tau, batch, m, n)
    return geqrf_result(a.view(input.shape), tau.view(tuple(input.shape[:-2]) + (min(m, n),)))


def linalg_householder_product(A, tau) -> Tensor:
    """``torch.linalg.householder_product`` (``torch.orgqr``): the first n columns of the product
    of the k Householder reflectors stored in A (m x n, m >= n >= k) and tau."""
    fn = "torch.linalg.householder_product"
    check_matrix(A, fn, "orgqr", square=False)
    if not isinstance(tau, TensorBase):
        raise TypeError(f"linalg_householder_product(): argument 'tau' (position 2) must be Tensor, not "
                        f"{type(tau).__name__}")
    m, n = A.shape[-2:]
    if m < n:
        raise RuntimeError(f"{fn}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    if tau.ndim < 1 or tau.shape[-1] > n:
        raise RuntimeError(f"{fn}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    if tau.ndim != A.ndim - 1:
        raise RuntimeError(f"{fn}: Expected tau to have one dimension less than input, but got tau.ndim equal to "
                           f"{tau.ndim} and input.ndim is equal to {A.ndim}")
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise RuntimeError(f"{fn}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
                           f"{tuple(tau.shape[:-1])}")
    if tau.dtype is not A.dtype:
        raise RuntimeError(f"{fn}: tau dtype {torch_name(tau.dtype)} does not match input dtype "
                           f"{torch_name(A.dtype)}")
    return _orgqr(A, tau, n)


def _orgqr(A, tau, ncols: int) -> Tensor:
    m, n = A.shape[-2:]
    k = tau.shape[-1]
    v, batch = _batched(A)
    t = tau.contiguous()
    q = _empty((batch, m, ncols), A.dtype, A)
    _k.householder_product(v, t, q, batch, m, n, ncols, k)
    return q.view(tuple(A.shape[:-2]) + (m, ncols))


_QR_MODES = ("reduced", "complete", "r")


def linalg_qr(A, mode: str = "reduced") -> tuple:
    """``torch.linalg.qr``: (Q, R) by Householder reflections (LAPACK's signs: R's diagonal may be
    negative); ``mode='r'`` gives an empty Q."""
    check_matrix(A, "linalg.qr", "geqrf", square=False)
    if mode not in _QR_MODES:
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), "
                           "'r', or 'complete'")
    m, n = A.shape[-2:]
    k = min(m, n)
    a, tau = geqrf(A)
    rows = m if mode == "complete" else k
    R = a.narrow(-2, 0, rows).triu()
    if mode == "r":
        return qr_result(_empty((0,), A.dtype, A), R)
    Q = _orgqr(a.narrow(-1, 0, k), tau, m if mode == "complete" else k)
    return qr_result(Q, R)


# ----- LDL^T (Bunch-Kaufman) ---------------------------------------------------------------------
def linalg_ldl_factor_ex(A, *, hermitian: bool = False, check_errors: bool = False) -> tuple:
    """``torch.linalg.ldl_factor_ex``: (LD, pivots, info) of LAPACK's sytrf on A's lower triangle:
    L below the diagonal, D's 1x1 and 2x2 blocks on and beside it, pivots 1-based (negative twice
    for a 2x2 block), info the first exactly zero block of D. Real matrices: ``hermitian`` changes nothing."""
    check_matrix(A, "torch.linalg.ldl_factor_ex", "ldl_factor_kernel")
    n = A.shape[-1]
    a, batch = _batched(A)
    ld = _empty((batch, n, n), A.dtype, A)
    piv = _empty((batch, n), dt.int32, A)
    info = _empty((batch,), dt.int32, A)
    fill(info, 0)
    if n:
        _k.ldl_factor(a, ld, piv, info, batch, n)
    shape = tuple(A.shape[:-2])
    ld, piv, info = ld.view(A.shape), piv.view(shape + (n,)), info.view(shape)
    if check_errors:
        _raise_info(info, "torch.linalg.ldl_factor_ex", _ldl_singular)
    return ldl_factor_ex_result(ld, piv, info)


def _ldl_singular(c) -> str:
    return (f"The factorization completed, but the block diagonal matrix D is exactly singular: its block at "
            f"{c} is zero.")


def linalg_ldl_solve(LD, pivots, B, *, hermitian: bool = False) -> Tensor:
    """``torch.linalg.ldl_solve``: X with A X = B from ``ldl_factor``'s (LD, pivots) (sytrs)."""
    fn = "torch.linalg.ldl_solve"
    check_matrix(LD, fn, "ldl_solve", name="LD")
    check_matrix(B, fn, "ldl_solve", name="B", square=False, position=3)
    if not isinstance(pivots, TensorBase) or pivots.dtype is not dt.int32:
        got = torch_name(pivots.dtype) if isinstance(pivots, TensorBase) else type(pivots).__name__
        raise RuntimeError(f"{fn}: Expected pivots to be integers. Got {got}")
    if LD.dtype is not B.dtype:
        raise RuntimeError(f"{fn}: Expected LD and B to have the same dtype, but got LD with dtype "
                           f"{torch_name(LD.dtype)} and B with dtype {torch_name(B.dtype)}")
    n = LD.shape[-1]
    if tuple(pivots.shape) != tuple(LD.shape[:-1]):
        raise RuntimeError(f"{fn}: Expected LD.shape[:-1] and pivots.shape to be the same, but got pivots with "
                           f"shape {tuple(pivots.shape)} instead")
    batch = _solve_shapes(LD, B, fn, True)
    b = math.prod(batch)
    X = _empty(tuple(batch) + tuple(B.shape[-2:]), B.dtype, B)
    if X.numel():
        copy_into(X, B.expand(*X.shape))
        ld = LD.expand(*batch, n, n).contiguous()
        piv = pivots.expand(*batch, n).contiguous()
        _k.ldl_solve(ld, piv, X, b, n, B.shape[-1])
    return X


# ----- LU-based solves, inverse, determinants (the forwards of their derivatives) ----------------
def _lu_solve_core(lu, perm, B) -> Tensor:
    """X with A X = B from A's LU (row permutation ``perm``), B (..., n, k) broadcast with lu: one
    kernel (the row order, both substitutions) per matrix."""
    n, k = lu.shape[-1], B.shape[-1]
    batch = broadcast_shapes(tuple(lu.shape[:-2]), tuple(B.shape[:-2]))
    b = math.prod(batch)
    X = _empty(tuple(batch) + (n, k), B.dtype, B)
    if b and n and k:
        lu3 = lu.expand(*batch, n, n)
        if lu.shape[:-2] != tuple(batch) or not lu.is_contiguous():  # a broadcast A: its one LU, stride 0
            lu3 = lu3 if lu.is_contiguous() and math.prod(lu.shape[:-2]) == 1 else lu3.contiguous()
        p3 = perm.expand(*batch, n)
        p3 = p3 if math.prod(perm.shape[:-1]) == 1 or tuple(perm.shape[:-1]) == tuple(batch) else p3.contiguous()
        Bb = B.expand(*batch, n, k)
        try:
            bs = _batch_strides(Bb, batch)
        except ValueError:
            Bb = Bb.contiguous()
            bs = _batch_strides(Bb, batch)
        _k.lu_solve(lu3, p3, Bb, X, b, n, k, _batch_strides(lu3, batch)[0], _batch_strides(p3.unsqueeze(-1), batch)[0],
                    bs)
    return X


def _vector_rhs(A, B) -> bool:
    """torch.linalg.solve's rule: B is a batch of vectors when it is 1-D or has A's batch shape
    with one dimension less."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def linalg_solve_ex(A, B, *, left: bool = True, check_errors: bool = False) -> tuple:
    """``torch.linalg.solve_ex``: (X, info) with A X = B (X A = B when not ``left``); B may be a
    (batch of) vector(s). info > 0 marks a singular A (X is then not finite)."""
    fn = "linalg.solve"
    check_matrix(A, fn, "linalg_solve")
    if not isinstance(B, TensorBase):
        raise TypeError(f"linalg_solve(): argument 'B' (position 2) must be Tensor, not {type(B).__name__}")
    check_dtype(B, fn, "linalg_solve")
    if A.dtype is not B.dtype:
        raise RuntimeError(f"{fn}: Expected A and B to have the same dtype, but found A of type "
                           f"{torch_name(A.dtype)} and B of type {torch_name(B.dtype)} instead")
    vector = _vector_rhs(A, B)
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor B must have at least 2 dimensions.")
    if not left:
        A, Bm = A.mT, Bm.mT
    _solve_shapes(A, Bm, fn, True)
    lu, piv, info = linalg_lu_factor_ex(A)
    perm, _ = lu_permutation(piv, A.shape[-1])
    X = _lu_solve_core(lu, perm, Bm)
    if not left:
        X = X.mT
    X = X.squeeze(-1) if vector else X
    if check_errors:
        _raise_info(info, "torch.linalg.solve", lambda c: "The solver failed because the input matrix is singular.")
    return solve_ex_result(X, info)


def linalg_inv_ex(A, *, check_errors: bool = False) -> tuple:
    """``torch.linalg.inv_ex``: (inverse, info), the inverse solved from the LU against I."""
    if isinstance(A, TensorBase) and A.dtype in (dt.float16, dt.bfloat16):
        raise RuntimeError(f"linalg.inv: Low precision dtypes not supported. Got {torch_name(A.dtype)}")
    check_matrix(A, "linalg.inv", "linalg_inv")
    n = A.shape[-1]
    lu, piv, info = linalg_lu_factor_ex(A)
    perm, _ = lu_permutation(piv, n)
    X = _lu_solve_core(lu, perm, eye_like(A, n))
    if check_errors:
        _raise_info(info, "linalg.inv", lambda c: f"The diagonal element {c} is zero, the inversion could not be "
                    "completed because the input matrix is singular.")
    return inv_ex_result(X, info)


def det(A) -> Tensor:
    """``torch.linalg.det`` (``torch.det``): the product of U's diagonal times the pivots' sign."""
    check_matrix(A, "linalg.det", "lu")
    if A.shape[-1] == 0:
        return eye_like(A, 0, A.shape[:-2]).sum((-2, -1)).add(1.0)
    lu, piv, _ = linalg_lu_factor_ex(A)
    _, sign = lu_permutation(piv, A.shape[-1])
    return lu.diagonal(0, -2, -1).prod(-1).mul(sign.to(A.dtype))


def slogdet(A) -> tuple:
    """``torch.linalg.slogdet`` (``torch.slogdet``): (sign, log|det|); sign 0 and -inf for a
    singular matrix."""
    check_matrix(A, "linalg.slogdet", "lu")
    if A.shape[-1] == 0:
        one = eye_like(A, 0, A.shape[:-2]).sum((-2, -1)).add(1.0)
        return slogdet_result(one, one.sub(1.0))
    lu, piv, _ = linalg_lu_factor_ex(A)
    _, sign = lu_permutation(piv, A.shape[-1])
    d = lu.diagonal(0, -2, -1)
    s = d.sign().prod(-1).mul(sign.to(A.dtype))
    return slogdet_result(s, d.abs().log().sum(-1))


def matrix_exp(A) -> Tensor:
    """``torch.linalg.matrix_exp``: scaling and squaring with a [13/13] Pade approximant (Higham 2005).
    Its products are matmul's core entry, not the dispatched op: torch's matrix_exp is one native
    op, so autocast leaves it in the input's dtype (its derivative is its own, in autograd)."""
    check_matrix(A, "linalg.matrix_exp", "matrix_exp")
    n = A.shape[-1]
    if A.numel() == 0:
        return A.clone()
    b = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800., 129060195264000.,
         10559470521600., 670442572800., 33522128640., 1323241920., 40840800., 960960., 16380., 182., 1.)
    norm1 = A.abs().sum(-2).amax(-1)
    # one scaling for the whole batch (the largest 1-norm's): a host read, as torch's CPU kernel makes
    theta = 5.371920351148152
    top = float(norm1.amax().item())
    s = max(0, int(math.ceil(math.log2(top / theta)))) if top > theta and math.isfinite(top) else 0
    X = A.mul(2.0 ** -s) if s else A
    I = eye_like(A, n)
    mm = _mm.matmul
    X2 = mm(X, X)
    X4 = mm(X2, X2)
    X6 = mm(X4, X2)
    U = mm(X, mm(X6, X6.mul(b[13]).add(X4.mul(b[11])).add(X2.mul(b[9])))
           .add(X6.mul(b[7])).add(X4.mul(b[5])).add(X2.mul(b[3])).add(I.mul(b[1])))
    V = mm(X6, X6.mul(b[12]).add(X4.mul(b[10])).add(X2.mul(b[8]))).add(X6.mul(b[6])).add(
        X4.mul(b[4])).add(X2.mul(b[2])).add(I.mul(b[0]))
    P = V.sub(U)
    lu, piv, _ = linalg_lu_factor_ex(P)
    perm, _ = lu_permutation(piv, n)
    R = _lu_solve_core(lu, perm, V.add(U))
    for _ in range(s):
        R = mm(R, R)
    return R


def exact_product(a, b) -> Tensor:
    """a @ b as a broadcast product summed over the shared dimension: recorded like matmul (each piece
    dispatched), but in the inputs' dtype under autocast, whose "lower" category would otherwise send
    matmul to fp16/bf16 inside ops that are single native ops in torch (ormqr, lstsq). For the small
    matrices of this family."""
    return a.unsqueeze(-1).mul(b.unsqueeze(-3)).sum(-2)


# ----- composites: each piece a dispatched op (recorded), built over the table's ops -------------
def composites(ops: dict) -> dict:
    """The composite core entries (name -> function), written with the dispatched ops of ``ops``
    (the op table's dict, looked up when called)."""
    def op(name):
        def call(*args, **kwargs):
            return dispatch.call(ops[name], *args, **kwargs)
        return call

    lu_factor_ex, solve_tri, cholesky_ex = op("linalg_lu_factor_ex"), op("linalg_solve_triangular"), op(
        "linalg_cholesky_ex")
    solve_ex, inv_ex, qr_op, geqrf_op, hh = (op("linalg_solve_ex"), op("linalg_inv_ex"), op("linalg_qr"), op("geqrf"),
                                            op("linalg_householder_product"))
    slogdet_op, matmul = op("slogdet"), op("matmul")

    def linalg_lu_factor(A, *, pivot: bool = True) -> tuple:
        """``torch.linalg.lu_factor``: (LU, pivots); a zero pivot is an error (``lu_factor_ex`` returns it)."""
        lu, piv, info = lu_factor_ex(A, pivot=pivot)
        _raise_info_rt(info)
        return lu_factor_result(lu, piv)

    def _raise_info_rt(info):
        for c in info.reshape(-1).tolist():
            if c > 0:
                raise RuntimeError(f"torch.linalg.lu_factor: U[{c},{c}] is zero and using it on lu_solve would result "
                                   "in a division by zero. If you still want to perform the factorization, consider "
                                   "calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")

    def linalg_ldl_factor(A, *, hermitian: bool = False) -> tuple:
        """``torch.linalg.ldl_factor``: (LD, pivots); an exactly singular D is a ``LinAlgError`` (torch 2.13
        trips an internal assert there instead)."""
        ld, piv, info = op("linalg_ldl_factor_ex")(A, hermitian=hermitian)
        _raise_info(info, "torch.linalg.ldl_factor", _ldl_singular)
        return ldl_factor_result(ld, piv)

    def lu_unpack(LU_data, LU_pivots, unpack_data: bool = True, unpack_pivots: bool = True) -> tuple:
        """``torch.lu_unpack``: (P, L, U) with A = P L U from ``lu_factor``'s output."""
        if not isinstance(LU_data, TensorBase) or not isinstance(LU_pivots, TensorBase):
            raise TypeError("lu_unpack(): arguments 'LU_data' and 'LU_pivots' must be Tensors")
        if LU_pivots.dtype is not dt.int32:
            raise RuntimeError("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 "
                               f"dtype. Note: this function is intended to be used with the output produced by "
                               f"torch.linalg.lu_factor")
        m, n = LU_data.shape[-2:]
        k = min(m, n)
        empty = _empty((0,), LU_data.dtype, LU_data)
        if unpack_data:
            L = LU_data.narrow(-1, 0, k).tril(-1).add(eye_like(LU_data, m).narrow(-1, 0, k))
            U = LU_data.narrow(-2, 0, k).triu()
        else:
            L = U = empty
        if unpack_pivots:
            perm, _ = lu_permutation(LU_pivots, m)
            # P[perm[i], i] = 1: column i of P is the unit vector at the input row that landed at row i
            eye = eye_like(LU_data, m, LU_pivots.shape[:-1])
            P = eye.gather(-1, perm.unsqueeze(-2).expand(*perm.shape[:-1], m, m))
        else:
            P = empty
        return lu_unpack_result(P, L, U)

    def linalg_lu(A, *, pivot: bool = True) -> tuple:
        """``torch.linalg.lu``: (P, L, U) with A = P L U."""
        lu, piv, _ = lu_factor_ex(A, pivot=pivot)
        return lu_result(*lu_unpack(lu, piv))

    def linalg_lu_solve(LU, pivots, B, *, left: bool = True, adjoint: bool = False) -> Tensor:
        """``torch.linalg.lu_solve``: X with A X = B (A^T with ``adjoint``, X A = B when not ``left``)
        from A's ``lu_factor``."""
        check_matrix(LU, "linalg.lu_solve", "lu_solve", name="LU")
        check_matrix(B, "linalg.lu_solve", "lu_solve", name="B", square=False, position=3)
        n = LU.shape[-1]
        perm, _ = lu_permutation(pivots, n)
        if not left:  # X A = B <=> A^T X^T = B^T (and adjoint flips which of A, A^T)
            return linalg_lu_solve(LU, pivots, B.mT, left=True, adjoint=not adjoint).mT
        if not adjoint:
            batch = broadcast_shapes(tuple(LU.shape[:-2]), tuple(B.shape[:-2]))
            idx = perm.expand(*batch, n).unsqueeze(-1).expand(*batch, n, B.shape[-1])
            PB = B.expand(*batch, *B.shape[-2:]).gather(-2, idx)
            Y = solve_tri(LU, PB, upper=False, unitriangular=True)
            return solve_tri(LU, Y, upper=True)
        # A^T X = B with A = P^T L U (rows permuted by perm): U^T L^T (P X) = B
        Y = solve_tri(LU.mT, B, upper=False)
        Z = solve_tri(LU.mT, Y, upper=True, unitriangular=True)
        batch = tuple(Z.shape[:-2])
        inv_perm = perm.expand(*batch, n).argsort(-1)
        return Z.gather(-2, inv_perm.unsqueeze(-1).expand(*batch, n, Z.shape[-1]))

    def lu_solve(b, LU_data, LU_pivots) -> Tensor:
        """``torch.lu_solve`` (deprecated for ``linalg.lu_solve``): X with A X = b."""
        return linalg_lu_solve(LU_data, LU_pivots, b)

    def lu(A, pivot: bool = True, get_infos: bool = False):
        """``torch.lu`` / ``Tensor.lu``: (LU, pivots) or (LU, pivots, infos)."""
        lu_, piv, info = lu_factor_ex(A, pivot=pivot)
        return (lu_, piv, info) if get_infos else (lu_, piv)

    def triangular_solve(b, A, upper: bool = True, transpose: bool = False, unitriangular: bool = False) -> tuple:
        """``torch.triangular_solve`` (deprecated): (X, A's clone) with op(A) X = b."""
        T = A.mT if transpose else A
        X = solve_tri(T, b, upper=(not upper) if transpose else upper, unitriangular=unitriangular)
        return triangular_solve_result(X, A.clone())

    def linalg_solve(A, B, *, left: bool = True) -> Tensor:
        """``torch.linalg.solve``: X with A X = B; a singular A is a ``LinAlgError``."""
        return solve_ex(A, B, left=left, check_errors=True)[0]

    def inverse(A) -> Tensor:
        """``torch.linalg.inv`` (``torch.inverse``); a singular A is a ``LinAlgError``."""
        return inv_ex(A, check_errors=True)[0]

    def logdet(A) -> Tensor:
        """``torch.logdet``: log det(A); NaN for a negative determinant, -inf for a singular A."""
        s, logabs = slogdet_op(A)
        return logabs.where(s.ge(0), float("nan"))

    def linalg_cholesky(A, *, upper: bool = False) -> Tensor:
        """``torch.linalg.cholesky``: L (or U = L^T); a matrix that is not positive-definite is a ``LinAlgError``."""
        return cholesky_ex(A, upper=upper, check_errors=True)[0]

    def cholesky(input, upper: bool = False) -> Tensor:
        """``torch.cholesky`` (deprecated): ``linalg.cholesky``."""
        return cholesky_ex(input, upper=upper, check_errors=True)[0]

    def cholesky_solve(input, input2, upper: bool = False) -> Tensor:
        """``torch.cholesky_solve``: X with A X = B, given B (``input``) and A's factor (``input2``)."""
        L = input2.mT if upper else input2
        Y = solve_tri(L, input, upper=False)
        return solve_tri(L.mT, Y, upper=True)

    def cholesky_inverse(input, upper: bool = False) -> Tensor:
        """``torch.cholesky_inverse``: A^-1 from A's Cholesky factor."""
        check_matrix(input, "cholesky_inverse", "cholesky_inverse", name="input")
        return cholesky_solve(eye_like(input, input.shape[-1]), input, upper)

    def qr(input, some: bool = True) -> tuple:
        """``torch.qr`` (deprecated): ``linalg.qr`` in mode 'reduced' (``some``) or 'complete'."""
        return qr_op(input, "reduced" if some else "complete")

    def orgqr(input, tau) -> Tensor:
        """``torch.orgqr``: ``linalg.householder_product``."""
        return hh(input, tau)

    def ormqr(input, tau, other, left: bool = True, transpose: bool = False) -> Tensor:
        """``torch.ormqr``: op(Q) @ other (``left``) or other @ op(Q), Q the m x m product of the
        reflectors of ``geqrf``'s (input, tau), op transposing with ``transpose``."""
        check_matrix(input, "torch.ormqr", "ormqr", name="input", square=False)
        m = input.shape[-2]
        k = tau.shape[-1]
        full = _empty(tuple(input.shape[:-2]) + (m, m), input.dtype, input)
        fill(full, 0.0)
        if full.numel() and k:
            copy_into(full.narrow(-1, 0, k), input.narrow(-1, 0, k))
        Q = hh(full, tau)
        Q = Q.mT if transpose else Q
        return exact_product(Q, other) if left else exact_product(other, Q)

    def matrix_power(input, n) -> Tensor:
        """``torch.linalg.matrix_power``: A^n by repeated squaring; a negative n inverts first."""
        check_matrix(input, "linalg.matrix_power", "matrix_power", name="input")
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise TypeError(f"matrix_power(): argument 'n' (position 2) must be int, not {type(n).__name__}")
        n = int(n)
        A = inverse(input) if n < 0 else input
        n = abs(n)
        result = None
        while n:
            if n & 1:
                result = A if result is None else matmul(result, A)
            n >>= 1
            if n:
                A = matmul(A, A)
        return eye_like(input, input.shape[-1], input.shape[:-2]) if result is None else (
            result.clone() if result is input else result)

    return {f.__name__: f for f in (linalg_lu_factor, linalg_ldl_factor, lu_unpack, linalg_lu, linalg_lu_solve,
                                    lu_solve, lu, triangular_solve, linalg_solve, inverse, logdet, linalg_cholesky,
                                    cholesky, cholesky_solve, cholesky_inverse, qr, orgqr, ormqr, matrix_power)}
