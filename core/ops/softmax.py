"""Core entries of ``softmax`` and ``log_softmax``: PyTorch's checks, the result dtype, the kernel.

The kernel is ``triton_kernels/softmax.py``, the derivative ``autograd/functions/softmax.py``
(softmax's output is its own saved tensor, so nothing is recomputed there).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...triton_kernels import softmax as _sm
from ...runtime import dtype as dt
from ..shape import normalize_dim
from ..tensor_base import TensorBase

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor


def _check_tensor(x, op: str, argname: str = "input") -> None:
    if not isinstance(x, TensorBase):
        raise TypeError(f"{op}(): argument '{argname}' must be Tensor, not {type(x).__name__}")


def _softmax(op: str, input, dim, dtype, log: bool) -> Tensor:
    _check_tensor(input, op)
    if input.dtype in dt.FLOAT8:  # torch 2.13 has no softmax kernel for its float8 storage formats
        raise NotImplementedError(f"\"{op}_lastdim_kernel_impl\" not implemented for '{input.dtype.type_name}'")
    if dim is None or isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{op}(): argument 'dim' must be int, not {type(dim).__name__}")
    d = normalize_dim(dim, input.ndim)
    cast = None if dtype is None else dt.to_dtype(dtype, f"{op}(): argument 'dtype'")
    target = cast or input.dtype
    if not target.is_floating_point:
        raise RuntimeError(f"{op}(): expected a floating point input, but got {target.name}; "
                           "pass dtype= to compute in a floating point dtype")
    out = TensorBase._empty(input.shape, target, input.device)
    _sm.softmax(out, input, d, log=log, cast=cast)
    return out


def softmax(input, dim, dtype=None) -> Tensor:
    """exp(x - max) / sum(exp(x - max)) along ``dim``; ``dtype`` casts the input first."""
    return _softmax("softmax", input, dim, dtype, log=False)


def log_softmax(input, dim, dtype=None) -> Tensor:
    """x - max - log(sum(exp(x - max))) along ``dim``; ``dtype`` casts the input first."""
    return _softmax("log_softmax", input, dim, dtype, log=True)
