"""Reductions on Tensors: PyTorch's signatures, dtype rules and errors, then one kernel.

``sum mean prod amax amin max min argmax argmin var std all any hash_tensor``, and the composites ``std_mean
var_mean aminmax nansum nanmean count_nonzero``. This module decides which
dims are reduced, the result dtype and shape (``keepdim``), checks everything PyTorch checks
before any kernel runs, allocates the output and calls ``triton_kernels/reduce.py``. The
kernel writes the kept dims contiguously; ``keepdim=True`` is a view of that with ones put back.
"""
from __future__ import annotations

import builtins
import math
import warnings
from collections import namedtuple
from typing import TYPE_CHECKING

import numpy as np

from ...triton_kernels import reduce as _k
from ...runtime import dtype as dt
from ..shape import normalize_dim
from ..tensor_base import TensorBase
from . import elementwise as _ew

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor

# torch.return_types.max / .min: a (values, indices) named tuple.
max_result = namedtuple("max", ["values", "indices"])
min_result = namedtuple("min", ["values", "indices"])
aminmax_result = namedtuple("aminmax", ["min", "max"])

# torch's short dtype names in error messages ("Got: Long").
_TORCH_NAME = {d: d.type_name for d in dt.ALL}


def _check_input(x, op: str) -> None:
    if not isinstance(x, TensorBase):
        raise TypeError(f"{op}(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}")


def reduced_dims(x: Tensor, dim, op: str) -> tuple:
    """Normalize ``dim`` (None, an int, or a sequence; empty means all) to sorted dim indices."""
    if dim is None:
        return tuple(range(x.ndim))
    if isinstance(dim, (tuple, list)):
        if len(dim) == 0:
            return tuple(range(x.ndim))
        seen = set()
        for d in dim:
            nd = normalize_dim(d, x.ndim)
            if nd in seen:
                raise RuntimeError(f"dim {nd} appears multiple times in the list of dims")
            seen.add(nd)
        return tuple(sorted(seen)) if x.ndim else ()
    nd = normalize_dim(dim, x.ndim)
    return (nd,) if x.ndim else ()


def _result_shapes(x: Tensor, dims: tuple, keepdim: bool):
    kept = tuple(n for d, n in enumerate(x.shape) if d not in dims)
    full = tuple(1 if d in dims else n for d, n in enumerate(x.shape))
    return kept, (full if keepdim else kept)


def _require_nonempty(x: Tensor, dims: tuple, op: str, dim_given: bool) -> None:
    """max/min/argmax/amax have no identity: PyTorch refuses an empty reduced extent."""
    if x.numel() != 0:
        return
    if not dim_given and op in ("max", "min", "argmax", "argmin"):
        raise RuntimeError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0."
                           + (" Specify the reduction dim with the 'dim' argument." if op in ("max", "min") else ""))
    for d in dims:
        if x.shape[d] == 0:
            raise RuntimeError(f"{op}(): Expected reduction dim {d} to have non-zero size.")


def _run(op: str, x: Tensor, dims: tuple, keepdim: bool, out_dtype, *, values=True, indices=False,
         cast=None, correction=1.0):
    if x.dtype in dt.FLOAT8:  # torch 2.13 has no reduction kernel for its float8 storage formats
        raise NotImplementedError(f"\"{op}_{x.device.type}\" not implemented for '{x.dtype.type_name}'")
    kept, shape = _result_shapes(x, dims, keepdim)
    out = TensorBase._empty(kept, out_dtype, x.device) if values else None
    idx = TensorBase._empty(kept, dt.int64, x.device) if indices else None
    # An empty reduced extent still launches: the kernel writes the identity (0, 1, nan, True/False).
    _k.reduce(op, x, dims, out, idx, cast=cast, correction=correction)
    if keepdim:
        out = out.view(shape) if out is not None else None
        idx = idx.view(shape) if idx is not None else None
    return out, idx


def _refuse_unsigned(d: dt.dtype, kernel: str, dev) -> None:
    """torch 2.13 has no kernel of these reductions for its barebones unsigned types: its error, which names
    the kernel (``{}`` the device type)."""
    if d in dt.BAREBONES_UNSIGNED:
        dt.refuse_barebones(d, kernel.format(dev.type))


def _dtype_arg(dtype, op):
    return None if dtype is None else dt.to_dtype(dtype, f"{op}(): argument 'dtype'")


# --------------------------------------------------------------------------------------------
# sum, mean, prod
# --------------------------------------------------------------------------------------------
def sum(input, dim=None, keepdim=False, *, dtype=None) -> Tensor:
    """Integer and bool sums are int64; fp16/bf16 sums stay fp16/bf16 but accumulate in fp32."""
    _check_input(input, "sum")
    dtype = _dtype_arg(dtype, "sum")
    dims = reduced_dims(input, dim, "sum")
    if dtype is None:
        dtype = input.dtype if input.dtype.is_floating_point else dt.int64
    if dtype in dt.BAREBONES_UNSIGNED:  # tested here, not by a call: sum is on every step's hot path
        _refuse_unsigned(dtype, "sum_{}", input.device)
    return _run("sum", input, dims, keepdim, dtype, cast=dtype)[0]


def mean(input, dim=None, keepdim=False, *, dtype=None) -> Tensor:
    """torch.mean: the mean over ``dim`` (all dims by default), accumulated per the dtype policy; floating (or
    given ``dtype``) inputs only, as torch."""
    _check_input(input, "mean")
    dtype = _dtype_arg(dtype, "mean")
    target = dtype or input.dtype
    if not target.is_floating_point:
        raise RuntimeError(
            "mean(): could not infer output dtype. "
            + ("Input" if dtype is None else "Optional")
            + f" dtype must be either a floating point or complex dtype. Got: {_TORCH_NAME[target]}"
        )
    dims = reduced_dims(input, dim, "mean")
    return _run("mean", input, dims, keepdim, target, cast=target)[0]


def prod(input, dim=None, keepdim=False, *, dtype=None) -> Tensor:
    """torch.prod: the product over ``dim`` (all dims by default); integers and bool give int64, as torch."""
    _check_input(input, "prod")
    dtype = _dtype_arg(dtype, "prod")
    if dim is not None and not isinstance(dim, (int, np.integer)):
        raise TypeError(f"prod(): argument 'dim' must be int, not {type(dim).__name__}")
    dims = reduced_dims(input, dim, "prod")
    if dtype is None:
        dtype = input.dtype if input.dtype.is_floating_point else dt.int64
    _refuse_unsigned(dtype, "prod_out_{}", input.device)
    return _run("prod", input, dims, keepdim, dtype, cast=dtype)[0]


# --------------------------------------------------------------------------------------------
# extremes
# --------------------------------------------------------------------------------------------
def amax(input, dim=(), keepdim=False) -> Tensor:
    """torch.amax: the maximum over ``dim`` (all dims when empty), without indices; NaN propagates."""
    _check_input(input, "amax")
    dims = reduced_dims(input, dim, "amax")
    _refuse_unsigned(input.dtype, "max_values_{}", input.device)
    _require_nonempty(input, dims, "amax", True)
    return _run("max", input, dims, keepdim, input.dtype)[0]


def amin(input, dim=(), keepdim=False) -> Tensor:
    """torch.amin: the minimum over ``dim`` (all dims when empty), without indices; NaN propagates."""
    _check_input(input, "amin")
    dims = reduced_dims(input, dim, "amin")
    _refuse_unsigned(input.dtype, "min_values_{}", input.device)
    _require_nonempty(input, dims, "amin", True)
    return _run("min", input, dims, keepdim, input.dtype)[0]


def _extreme(op: str, input, dim, keepdim, other):
    _check_input(input, op)
    if isinstance(dim, TensorBase) or other is not None:  # torch.max(a, b): the elementwise maximum
        if other is not None and dim is not None:
            raise TypeError(f"{op}(): pass either 'dim' or 'other', not both")
        return _ew.binary("maximum" if op == "max" else "minimum", input, dim if other is None else other)
    _refuse_unsigned(input.dtype, op + ("_all" if dim is None else "_{}"), input.device)
    if dim is None:
        if keepdim:
            raise TypeError(f"{op}(): keepdim=True needs a 'dim'")
        dims = reduced_dims(input, None, op)
        _require_nonempty(input, dims, op, False)
        return _run(op, input, dims, False, input.dtype)[0]
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"{op}(): argument 'dim' must be int, not {type(dim).__name__} (use amax/amin for several dims)")
    dims = reduced_dims(input, dim, op)
    _require_nonempty(input, dims, op, True)
    values, indices = _run(op, input, dims, keepdim, input.dtype, indices=True)
    return (max_result if op == "max" else min_result)(values, indices)


def max(input, dim=None, keepdim=False, *, other=None):
    """``max(x)`` -> 0-d value; ``max(x, dim)`` -> (values, indices); ``max(x, y)`` -> maximum."""
    return _extreme("max", input, dim, keepdim, other)


def min(input, dim=None, keepdim=False, *, other=None):
    """``min(x)`` -> 0-d value; ``min(x, dim)`` -> (values, indices); ``min(x, y)`` -> minimum."""
    return _extreme("min", input, dim, keepdim, other)


def _arg(op: str, input, dim, keepdim):
    _check_input(input, op)
    if dim is not None and (isinstance(dim, bool) or not isinstance(dim, (int, np.integer))):
        raise TypeError(f"{op}(): argument 'dim' must be int, not {type(dim).__name__}")
    _refuse_unsigned(input.dtype, op + "_{}", input.device)
    dims = reduced_dims(input, dim, op)
    _require_nonempty(input, dims, op, dim is not None)
    if dim is None:
        # The index into the flattened tensor; keepdim keeps every dim as size 1.
        idx = _run(op[3:], input, dims, False, None, values=False, indices=True)[1]
        return idx.view((1,) * input.ndim) if keepdim else idx
    return _run(op[3:], input, dims, keepdim, None, values=False, indices=True)[1]


def argmax(input, dim=None, keepdim=False) -> Tensor:
    """First index of the maximum (NaN counts as the maximum, like PyTorch)."""
    return _arg("argmax", input, dim, keepdim)


def argmin(input, dim=None, keepdim=False) -> Tensor:
    """First index of the minimum (NaN counts as the minimum, like PyTorch)."""
    return _arg("argmin", input, dim, keepdim)


# --------------------------------------------------------------------------------------------
# var, std
# --------------------------------------------------------------------------------------------
def _correction(op, dim, unbiased, correction):
    if isinstance(dim, bool):  # var(x, False): the legacy positional ``unbiased``
        if unbiased is not None:
            raise TypeError(f"{op}(): got 'unbiased' twice")
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise RuntimeError(f"{op}: can't specify both the unbiased and correction arguments")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    if isinstance(correction, bool) or not isinstance(correction, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}(): argument 'correction' must be a number, not {type(correction).__name__}")
    return dim, float(correction)


def _variance(op, input, dim, unbiased, keepdim, correction):
    _check_input(input, op)
    dim, corr = _correction(op, dim, unbiased, correction)
    if not input.dtype.is_floating_point:
        raise RuntimeError("std and var only support floating point and complex dtypes")
    dims = reduced_dims(input, dim, op)
    n = math.prod(input.shape[d] for d in dims)
    if n - corr <= 0:
        warnings.warn(f"{op}(): degrees of freedom is <= 0. Correction should be strictly less than the "
                      "reduction factor (input numel divided by output numel).", RuntimeWarning, stacklevel=3)
    return _run(op, input, dims, keepdim, input.dtype, correction=corr)[0]


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None) -> Tensor:
    """Variance with ``correction`` (Bessel's by default); stable (chunk two-pass + Chan merge)."""
    return _variance("var", input, dim, unbiased, keepdim, correction)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None) -> Tensor:
    """torch.std: the standard deviation over ``dim``, with ``correction`` (Bessel's by default;
    ``unbiased=False`` is correction 0)."""
    return _variance("std", input, dim, unbiased, keepdim, correction)


# --------------------------------------------------------------------------------------------
# all, any
# --------------------------------------------------------------------------------------------
def all(input, dim=None, keepdim=False) -> Tensor:
    """torch.all: whether every element over ``dim`` (all dims by default) is nonzero, as bool."""
    _check_input(input, "all")
    return _run("all", input, reduced_dims(input, dim, "all"), keepdim, dt.bool_)[0]


def any(input, dim=None, keepdim=False) -> Tensor:
    """torch.any: whether any element over ``dim`` (all dims by default) is nonzero, as bool."""
    _check_input(input, "any")
    return _run("any", input, reduced_dims(input, dim, "any"), keepdim, dt.bool_)[0]


# --------------------------------------------------------------------------------------------
# hash_tensor
# --------------------------------------------------------------------------------------------
def hash_tensor(input, dim=None, keepdim=False, *, mode=0) -> Tensor:
    """torch.hash_tensor: the xor (mode 0, the only one) of every element over ``dim`` once widened to its
    64-bit kind (float64 for floats, int64 for integers and bool) and read as uint64 bits; a uint64 result."""
    _check_input(input, "hash_tensor")
    if isinstance(mode, bool) or not isinstance(mode, (int, np.integer)):
        raise TypeError(f"hash_tensor(): argument 'mode' must be int, not {type(mode).__name__}")
    if mode != 0:
        raise RuntimeError(f"Unknown hash_tensor mode: {mode}")
    _refuse_unsigned(input.dtype, "xor_sum_{}", input.device)  # torch's xor_sum kernel takes none of them
    dims = reduced_dims(input, dim, "hash_tensor")
    if input.numel() == 0:  # xor has an identity (0), yet torch refuses an empty reduced extent as max does
        if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
            raise RuntimeError("hash_tensor: Expected reduction dim to be specified for input.numel() == 0. "
                               "Specify the reduction dim with the 'dim' argument.")
        for d in dims:
            if input.shape[d] == 0:
                raise IndexError(f"hash_tensor: Expected reduction dim {d} to have non-zero size.")
    wide = dt.float64 if input.dtype.is_floating_point else dt.int64
    return _run("xor", input, dims, keepdim, dt.uint64, cast=wide)[0]


# --------------------------------------------------------------------------------------------
# composites of the reductions above (each piece dispatched, so autograd records it)
# --------------------------------------------------------------------------------------------
def _pair_stat(op, input, dim, unbiased, keepdim, correction):
    _check_input(input, op)
    dim, corr = _correction(op, dim, unbiased, correction)
    spread = input.std if op == "std_mean" else input.var
    return spread(dim, keepdim=keepdim, correction=corr), input.mean(dim, keepdim=keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(std, mean)`` over ``dim`` (a plain tuple, as torch)."""
    return _pair_stat("std_mean", input, dim, unbiased, keepdim, correction)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(var, mean)`` over ``dim``."""
    return _pair_stat("var_mean", input, dim, unbiased, keepdim, correction)


def aminmax(input, *, dim=None, keepdim=False):
    """``(min, max)`` over ``dim`` (all dims without one)."""
    _check_input(input, "aminmax")
    _refuse_unsigned(input.dtype, "aminmax_{}", input.device)
    dims = reduced_dims(input, dim, "aminmax")
    if input.numel() == 0 and (dim is None or builtins.any(input.shape[d] == 0 for d in dims)):
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                           "identity.")
    dims = () if dim is None else dim
    return aminmax_result(input.amin(dims, keepdim=keepdim), input.amax(dims, keepdim=keepdim))


def nansum(input, dim=None, keepdim=False, *, dtype=None) -> Tensor:
    """``sum`` with NaN counted as zero (which is also its gradient there)."""
    _check_input(input, "nansum")
    x = input.masked_fill(input.isnan(), 0) if input.dtype.is_floating_point else input
    return x.sum(dim, keepdim=keepdim, dtype=dtype)


def nanmean(input, dim=None, keepdim=False, *, dtype=None) -> Tensor:
    """``mean`` of the elements that are not NaN (NaN where none is)."""
    _check_input(input, "nanmean")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype but got "
                           f"{_TORCH_NAME[input.dtype]}")
    kept = input.isnan().logical_not()
    return nansum(input, dim, keepdim, dtype=dtype) / kept.sum(dim, keepdim=keepdim)


def count_nonzero(input, dim=None) -> Tensor:
    """How many elements are not zero, over ``dim`` (an int or a tuple; all dims without one): int64."""
    _check_input(input, "count_nonzero")
    _refuse_unsigned(input.dtype, "nonzero_count_{}", input.device)
    return input.ne(0).sum(dim)

