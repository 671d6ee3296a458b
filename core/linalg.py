"""``tritensor.linalg`` (PyTorch's ``torch.linalg``): its functions are the op table's
``linalg_*`` ops (``core/ops/table.py``), each ``dispatch.call(op, ...)`` like every
``tritensor.*`` function, named without the prefix."""
from __future__ import annotations

from .functional import function
from .ops import table

vector_norm = function(table.OPS["linalg_vector_norm"], "vector_norm")
matrix_norm = function(table.OPS["linalg_matrix_norm"], "matrix_norm")

__all__ = ["vector_norm", "matrix_norm"]
