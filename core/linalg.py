"""``tritensor.linalg`` (PyTorch's ``torch.linalg``): its functions are the op table's
``linalg_*`` ops (``core/ops/table.py``), each ``dispatch.call(op, ...)`` like every
``tritensor.*`` function, named without the prefix (``det``, ``slogdet``, ``inv``, ``matrix_power``,
``matrix_exp`` and ``matmul`` are the ops ``torch.*`` has too); ``norm`` picks one of them as torch's
does, and the few functions below that only reshape, multiply and sum (``multi_dot``, ``vecdot``,
``vander``, ``diagonal``, ``tensorinv``, ``tensorsolve``) are written here with those ops.

The factorizations run Triton kernels holding one matrix per program, so matrices are at most 128
on a side (larger ones raise ``NotImplementedError``), in float32/float64. ``eig``/``eigvals``
(complex results) are not provided: tritensor has no complex dtype."""
from __future__ import annotations

import math

from .functional import function
from .ops import table
from .ops.linalg_factor import LinAlgError

vector_norm = function(table.OPS["linalg_vector_norm"], "vector_norm")
matrix_norm = function(table.OPS["linalg_matrix_norm"], "matrix_norm")
cross = function(table.OPS["linalg_cross"], "cross")
_LINALG = ("lu_factor_ex", "lu_factor", "lu", "lu_solve", "solve_triangular", "solve", "solve_ex", "inv_ex",
           "cholesky", "cholesky_ex", "qr", "householder_product", "eigh", "eigvalsh", "svd", "svdvals", "pinv",
           "matrix_rank", "cond", "lstsq", "ldl_factor", "ldl_factor_ex", "ldl_solve")
lu_factor_ex, lu_factor, lu, lu_solve, solve_triangular, solve, solve_ex, inv_ex, cholesky, cholesky_ex, qr, \
    householder_product, eigh, eigvalsh, svd, svdvals, pinv, matrix_rank, cond, lstsq, ldl_factor, ldl_factor_ex, \
    ldl_solve = (
        function(table.OPS["linalg_" + _n], _n) for _n in _LINALG)
det = function(table.OPS["det"], "det")
slogdet = function(table.OPS["slogdet"], "slogdet")
inv = function(table.OPS["inverse"], "inv")
matrix_power = function(table.OPS["matrix_power"], "matrix_power")
matrix_exp = function(table.OPS["matrix_exp"], "matrix_exp")
matmul = function(table.OPS["matmul"], "matmul")
_cat = function(table.OPS["cat"], "cat")


def multi_dot(tensors):
    """``torch.linalg.multi_dot``: the product of the matrices left to right; a 1-D first (last)
    argument is a row (column) vector, and its dimension is dropped from the result."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    first, last = tensors[0].ndim == 1, tensors[-1].ndim == 1
    mats = [tensors[0].unsqueeze(0) if first else tensors[0]] + tensors[1:-1] + [
        tensors[-1].unsqueeze(-1) if last else tensors[-1]]
    for i, t in enumerate(mats):
        if t.ndim != 2:
            which = "first" if i == 0 else "last" if i == len(mats) - 1 else None
            raise RuntimeError(f"multi_dot(): the {which} tensor must be 1D or 2D but got {t.ndim}D" if which else
                               f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
    out = mats[0]
    for t in mats[1:]:
        out = matmul(out, t)
    if first:
        out = out.squeeze(0)
    if last:
        out = out.squeeze(-1)
    return out


def vecdot(x, y, *, dim=-1):
    """``torch.linalg.vecdot``: sum(x * y) over ``dim`` (broadcasting; real dtypes, so no conjugate)."""
    return x.mul(y).sum(dim)


def vander(x, *, N=None):
    """``torch.linalg.vander``: the powers x^0 .. x^(N-1) along a new last dimension (N = x's last size)."""
    if x.ndim < 1:
        raise RuntimeError("linalg.vander: x must have at least one dimension")
    n = x.shape[-1] if N is None else N
    if n < 0:
        raise RuntimeError(f"N must be non-negative.")
    ones = x.unsqueeze(-1).mul(0).add(1)
    if n <= 1:
        return ones.narrow(-1, 0, n)
    return _cat([ones, x.unsqueeze(-1).expand(*x.shape, n - 1)], -1).cumprod(-1)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """``torch.linalg.diagonal``: ``A.diagonal`` with torch.linalg's defaults (the last two dims)."""
    return A.diagonal(offset, dim1, dim2)


def tensorinv(A, ind=2):
    """``torch.linalg.tensorinv``: the inverse of A seen as a matrix (its first ``ind`` dims by the rest)."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = A.shape[:ind], A.shape[ind:]
    if math.prod(rows) != math.prod(cols):
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {math.prod(cols)} != {math.prod(rows)}")
    return inv(A.reshape(math.prod(rows), math.prod(cols))).reshape(*cols, *rows)


def tensorsolve(A, B, dims=None):
    """``torch.linalg.tensorsolve``: X with tensordot(A, X, X.ndim) = B (``dims`` of A moved last first)."""
    if dims is not None:
        dims = [d % A.ndim for d in dims]
        A = A.permute(*[d for d in range(A.ndim) if d not in dims], *dims)
    rest = A.shape[B.ndim:]
    if math.prod(rest) != B.numel():
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                           f"prod(self.shape[:other.ndim]), but got {math.prod(rest)} != {B.numel()}")
    return solve(A.reshape(B.numel(), math.prod(rest)), B.reshape(-1)).reshape(*rest)



def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """``torch.linalg.norm``: a vector norm over an int ``dim`` (or a 1-D input), a matrix norm
    over a pair of dims (or a 2-D input); with neither ``ord`` nor ``dim``, the 2-norm of all
    elements. ``ord`` given without ``dim`` needs a 1-D or 2-D input, as in torch."""
    if isinstance(dim, int) and not isinstance(dim, bool):
        dim = (dim,)
    if dim is not None:
        dim = tuple(dim)
        if len(dim) == 1:
            return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
        if len(dim) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dim)}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got {A.ndim}D.")


__all__ = ["vector_norm", "matrix_norm", "norm", "cross", "LinAlgError", *_LINALG, "det", "slogdet", "inv",
           "matrix_power", "matrix_exp", "matmul", "multi_dot", "vecdot", "vander", "diagonal", "tensorinv",
           "tensorsolve"]
