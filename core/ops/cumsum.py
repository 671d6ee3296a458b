"""cumsum: PyTorch's argument checks and result dtype, then the scan kernel
(``triton_kernels/cumsum.py``). Derivative: ``autograd/functions/cumsum.py``."""
from __future__ import annotations

from typing import TYPE_CHECKING

import math

from ...triton_kernels import cumsum as _k
from ...runtime import dtype as dt
from ..shape import contiguous_strides, normalize_dim, view_strides
from ..tensor_base import TensorBase

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor


def cumsum(input, dim, *, dtype=None) -> Tensor:
    """Inclusive cumulative sum along ``dim``. Integer and bool inputs sum to int64 (as torch);
    with ``dtype`` the input is cast to it first."""
    return scan(input, dim, dtype=dtype)


def scan(input, dim, *, dtype=None, reverse: bool = False) -> Tensor:
    """cumsum, or with ``reverse`` the sums from each position to the end of ``dim``."""
    if not isinstance(input, TensorBase):
        raise TypeError(f"cumsum(): argument 'input' must be Tensor, not {type(input).__name__}")
    d = normalize_dim(dim, input.ndim)
    if dtype is not None and not isinstance(dtype, dt.dtype):
        raise TypeError(f"cumsum(): argument 'dtype' must be a tritensor dtype, not {type(dtype).__name__}")
    x = input if dtype is None or dtype is input.dtype else input.to(dtype)
    if x.dtype is dt.bool_:
        x = x.to(dt.int64)
    result = dtype or (x.dtype if x.dtype.is_floating_point else dt.int64)
    if result.is_floating_point:
        acc = "float64" if result is dt.float64 else "float32"
    else:
        acc = "int64"
    out = TensorBase._empty(input.shape, result, input.device)
    shape = tuple(input.shape) or (1,)
    dims = (math.prod(shape[:d]), shape[d], math.prod(shape[d + 1:]))
    xs = view_strides(x.shape, x.stride(), dims) if x.ndim else (1, 1, 1)
    if xs is None:  # the dims around ``dim`` do not merge into one stride each: read a copy
        x = x.contiguous()
        xs = contiguous_strides(dims)
    _k.cumsum(out, x, dims, xs, contiguous_strides(dims), acc, reverse)
    return out
