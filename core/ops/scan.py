"""``cumsum``, ``cumprod``, ``logcumsumexp``, ``cummax``, ``cummin``: PyTorch's checks and result dtypes, then
the scan kernel (``triton_kernels/scan.py``). Derivatives: ``autograd/functions/scan.py``."""
from __future__ import annotations

from typing import TYPE_CHECKING

import math

from collections import namedtuple

from ...triton_kernels import scan as _k
from ...runtime import dtype as dt
from ...runtime.dtype_policy import COMPUTE, reduce_accumulator
from ..shape import contiguous_strides, normalize_dim, view_strides
from ..tensor_base import TensorBase
from .reduce import _TORCH_NAME

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor

cummax_result = namedtuple("cummax", ["values", "indices"])
cummin_result = namedtuple("cummin", ["values", "indices"])


def _scan(op: str, input, dim, result: dt.dtype, acc: str, reverse: bool = False, idx=None):
    d = normalize_dim(dim, input.ndim)
    x = input
    out = TensorBase._empty(input.shape, result, input.device)
    shape = tuple(input.shape) or (1,)
    dims = (math.prod(shape[:d]), shape[d], math.prod(shape[d + 1:]))
    xs = view_strides(x.shape, x.stride(), dims) if x.ndim else (1, 1, 1)
    if xs is None:  # the dims around ``dim`` do not merge into one stride each: read a copy
        x = x.contiguous()
        xs = contiguous_strides(dims)
    _k.scan(op, out, x, dims, xs, contiguous_strides(dims), acc, reverse, idx)
    return out


def _check(input, op: str, dtype):
    if not isinstance(input, TensorBase):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(input).__name__}")
    if dtype is not None and not isinstance(dtype, dt.dtype):
        raise TypeError(f"{op}(): argument 'dtype' must be a tritensor dtype, not {type(dtype).__name__}")


def _acc(result: dt.dtype) -> str:
    """What the kernel loads, combines and carries in: fp64, fp32 (fp16/bf16/fp32) or int64."""
    return reduce_accumulator("sum", result).name


def cumsum(input, dim, *, dtype=None) -> Tensor:
    """Inclusive cumulative sum along ``dim``. Integer and bool inputs sum to int64 (as torch);
    with ``dtype`` the input is cast to it first."""
    return scan_sum(input, dim, dtype=dtype)


def scan_sum(input, dim, *, dtype=None, reverse: bool = False) -> Tensor:
    """cumsum, or with ``reverse`` the sums from each position to the end of ``dim``."""
    return _sum_or_prod("sum", input, dim, dtype, reverse)


def cumprod(input, dim, *, dtype=None) -> Tensor:
    """Inclusive cumulative product along ``dim``. Integer and bool inputs multiply in int64 (as torch);
    with ``dtype`` the input is cast to it first."""
    return scan_prod(input, dim, dtype=dtype)


def scan_prod(input, dim, *, dtype=None, reverse: bool = False) -> Tensor:
    """cumprod, or with ``reverse`` the products from each position to the end of ``dim``."""
    return _sum_or_prod("prod", input, dim, dtype, reverse)


def _sum_or_prod(op: str, input, dim, dtype, reverse: bool):
    """Integer and bool inputs sum or multiply in int64 (as torch); ``dtype`` casts the input first."""
    _check(input, "cum" + op, dtype)
    if dtype is not None:
        dt.refuse_barebones(dtype, f"cum{op}_out_{input.device.type}")
    normalize_dim(dim, input.ndim)
    x = input if dtype is None or dtype is input.dtype else input.to(dtype)
    if op == "sum" and x.dtype is dt.bool_:
        x = x.to(dt.int64)
    result = dtype or (x.dtype if x.dtype.is_floating_point else dt.int64)
    return _scan(op, x, dim, result, _acc(result), reverse)


def logcumsumexp(input, dim) -> Tensor:
    """``log(cumsum(exp(input)))`` along ``dim`` without overflow (floating point inputs only, as torch)."""
    return scan_logaddexp(input, dim)


def scan_logaddexp(input, dim, *, reverse: bool = False) -> Tensor:
    """logcumsumexp, or with ``reverse`` taken from each position to the end of ``dim``."""
    _check(input, "logcumsumexp", None)
    normalize_dim(dim, input.ndim)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"\"logcumsumexp_out_cpu\" not implemented for '{_TORCH_NAME[input.dtype]}'")
    return _scan("logcumsumexp", input, dim, input.dtype, _acc(input.dtype), reverse)


def _extreme(op: str, input, dim):
    _check(input, op, None)
    dt.refuse_barebones(input.dtype, f"{op}_{input.device.type}")
    d = normalize_dim(dim, input.ndim)
    idx = TensorBase._empty(input.shape, dt.int64, input.device)
    acc = COMPUTE[input.dtype].name
    values = _scan(op, input, d, input.dtype, acc, idx=idx)
    return (cummax_result if op == "cummax" else cummin_result)(values, idx)


def cummax(input, dim):
    """The running maximum along ``dim`` and where it is (a later equal element, or a NaN, takes
    over: torch's indices)."""
    return _extreme("cummax", input, dim)


def cummin(input, dim):
    """The running minimum along ``dim`` and where it is."""
    return _extreme("cummin", input, dim)

