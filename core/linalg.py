"""``tritensor.linalg`` (PyTorch's ``torch.linalg``): its functions are the op table's
``linalg_*`` ops (``core/ops/table.py``), each ``dispatch.call(op, ...)`` like every
``tritensor.*`` function, named without the prefix; ``norm`` picks one of them as torch's does."""
from __future__ import annotations

from .functional import function
from .ops import table

vector_norm = function(table.OPS["linalg_vector_norm"], "vector_norm")
matrix_norm = function(table.OPS["linalg_matrix_norm"], "matrix_norm")
cross = function(table.OPS["linalg_cross"], "cross")



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


__all__ = ["vector_norm", "matrix_norm", "norm", "cross"]
