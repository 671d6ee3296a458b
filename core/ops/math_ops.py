"""Everyday math and comparison ops: ``round``, ``isnan``/``isinf``/``isfinite``, ``nan_to_num``,
``isclose``/``allclose``/``equal``, ``logsumexp``, ``dot``, ``outer``, ``trace``, ``norm`` and
``linalg.vector_norm``/``linalg.matrix_norm``.

The elementwise ones run ``triton_kernels/math_ops.py``; ``dot`` runs the matmul kernel (fp32
accumulation, one launch). The rest are composites written with Tensor methods (each a
dispatched, recorded op), so autograd records them piece by piece and autocast sees the pieces:
``logsumexp`` (amax, exp, sum, log, computed in fp32 for fp16/bf16 as PyTorch's opmath does),
``outer`` (a broadcast mul), ``trace`` (``diag`` + ``sum``) and the norms (abs/pow/sum/amax).
Derivatives of the kernel-backed ones: ``autograd/functions/math_ops.py``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import math
import numbers
import warnings

import ml_dtypes
import numpy as np

from ...triton_kernels import math_ops as _k
from ...runtime import dtype as dt
from ..shape import broadcast_shapes, normalize_dim
from ..tensor_base import TensorBase
from . import _check_writable, copy_into
from . import elementwise as _ew
from . import matmul as _mm
from .reduce import _TORCH_NAME, reduced_dims

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor


def _check(input, op: str, name: str = "input") -> None:
    if not isinstance(input, TensorBase):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(input).__name__}")


def _number(v, name: str, op: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (numbers.Real, np.number)):
        raise TypeError(f"{op}(): argument '{name}' must be a number, not {type(v).__name__}")
    return float(v)


def _compute(d: dt.dtype) -> str:
    return "float64" if d in (dt.float64, dt.int64, dt.int32) else "float32"


def _unary(op: str, input, result: dt.dtype, params=(0.0, 0.0, 0.0), out=None):
    out = TensorBase._empty(input.shape, result, input.device) if out is None else out
    _k.unary(op, out, input, _compute(input.dtype), params)
    return out


# ----- round / isnan / isinf / isfinite / nan_to_num -------------------------------------------------
def round(input, *, decimals=0) -> Tensor:
    """Round half to even (as torch and NumPy), to ``decimals`` places; integers are returned as a copy."""
    _check(input, "round")
    if isinstance(decimals, bool) or not isinstance(decimals, (int, np.integer)):
        raise TypeError(f"round(): argument 'decimals' must be int, not {type(decimals).__name__}")
    if not input.dtype.is_floating_point:
        if decimals != 0:
            raise RuntimeError(f"round_decimals not implemented for '{_TORCH_NAME[input.dtype]}'")
        return input.clone()
    return _unary("round", input, input.dtype, (10.0 ** int(decimals), 0.0, 0.0))


def round_(input, *, decimals=0) -> Tensor:
    """``Tensor.round_``: round half to even in place, to ``decimals`` places."""
    _check(input, "round_")
    _check_writable(input, "round_")
    if input.dtype.is_floating_point:
        tmp = round(input, decimals=decimals)
        copy_into(input, tmp)
    elif decimals != 0:
        raise RuntimeError(f"round_decimals not implemented for '{_TORCH_NAME[input.dtype]}'")
    input._bump_version()
    return input


def isnan(input) -> Tensor:
    """True where ``input`` is NaN (never for integer and bool tensors)."""
    _check(input, "isnan")
    if input.dtype in dt.FLOAT8:
        input = _float8_decoded("isnan", input)
    return _unary("isnan", input, dt.bool_)


def isinf(input) -> Tensor:
    """torch.isinf: a bool tensor, True where an element is +inf or -inf (never for integers)."""
    _check(input, "isinf")
    if input.dtype in dt.FLOAT8:
        input = _float8_decoded("isinf", input)
    return _unary("isinf", input, dt.bool_)


def isfinite(input) -> Tensor:
    """torch.isfinite: a bool tensor, True where an element is neither inf nor NaN (always for integers)."""
    _check(input, "isfinite")
    if input.dtype in dt.FLOAT8:
        input = _float8_decoded("isfinite", input)
    return _unary("isfinite", input, dt.bool_)


# torch 2.13 classifies float8 values with isnan in every format, isinf in e5m2 (the one with inf) and isfinite
# in e5m2 and e8m0fnu; the others raise its NotImplementedError
_FLOAT8_CLASSIFY = {"isnan": dt.FLOAT8, "isinf": (dt.float8_e5m2,), "isfinite": (dt.float8_e5m2, dt.float8_e8m0fnu)}


def _float8_decoded(op: str, input):
    """A float8 tensor's values as float32 (the cast kernel decodes them exactly), for a classifying op."""
    if input.dtype not in _FLOAT8_CLASSIFY[op]:
        raise NotImplementedError(f"\"{op}\" not implemented for '{input.dtype.type_name}'")
    out = TensorBase._empty(input.shape, dt.float32, input.device)
    copy_into(out, input)
    return out


def _finfo(d: dt.dtype):
    return ml_dtypes.finfo(d.np) if d is dt.bfloat16 else np.finfo(d.np)


def _nan_to_num_params(input, nan, posinf, neginf, op):
    nan = _number(nan, "nan", op) if nan is not None else 0.0
    fi = _finfo(input.dtype)
    posinf = _number(posinf, "posinf", op) if posinf is not None else float(fi.max)
    neginf = _number(neginf, "neginf", op) if neginf is not None else float(fi.min)
    return nan, posinf, neginf


def nan_to_num(input, nan=0.0, posinf=None, neginf=None) -> Tensor:
    """NaN -> ``nan``, +inf -> ``posinf``, -inf -> ``neginf`` (default: the dtype's largest/lowest finite value)."""
    _check(input, "nan_to_num")
    if not input.dtype.is_floating_point:
        return input.clone()
    return _unary("nan_to_num", input, input.dtype, _nan_to_num_params(input, nan, posinf, neginf, "nan_to_num"))


def nan_to_num_(input, nan=0.0, posinf=None, neginf=None) -> Tensor:
    """``Tensor.nan_to_num_``: NaN, +inf and -inf replaced in place (by 0 and the dtype's largest and smallest
    finite values unless given)."""
    _check(input, "nan_to_num_")
    _check_writable(input, "nan_to_num_")
    if input.dtype.is_floating_point:
        params = _nan_to_num_params(input, nan, posinf, neginf, "nan_to_num_")
        _k.unary("nan_to_num", input, input, _compute(input.dtype), params)  # lane-wise: in place is safe
    input._bump_version()
    return input


# ----- isclose / allclose / equal --------------------------------------------------------------------
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> Tensor:
    """``|input - other| <= atol + rtol * |other|`` elementwise (or exactly equal), broadcast."""
    _check(input, "isclose")
    _check(other, "isclose", "other")
    if input.dtype is not other.dtype:
        raise RuntimeError(f"{_TORCH_NAME[input.dtype]} did not match {_TORCH_NAME[other.dtype]}")
    rtol, atol = _number(rtol, "rtol", "isclose"), _number(atol, "atol", "isclose")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    if input.device != other.device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{input.device} and {other.device}!")
    shape = broadcast_shapes(input.shape, other.shape)
    out = TensorBase._empty(shape, dt.bool_, input.device)
    _k.isclose(out, input.expand(shape), other.expand(shape), rtol, atol, bool(equal_nan), _compute(input.dtype))
    return out


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    """``isclose(...).all()`` as a Python bool (one host sync)."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all().item())


def equal(input, other) -> bool:
    """True when both have the same shape and the same elements (NaN is unequal to itself)."""
    _check(input, "equal")
    _check(other, "equal", "other")
    if input.shape != other.shape:
        return False
    if input.numel() == 0:
        return True
    return bool(_ew.binary("eq", input, other).all().item())


# ----- logsumexp / dot / outer / trace -----------------------------------------------------------
def logsumexp(input, dim, keepdim=False) -> Tensor:
    """``log(sum(exp(input), dim))`` without overflow: the max is taken out first (a constant for autograd)."""
    _check(input, "logsumexp")
    dims = reduced_dims(input, dim, "logsumexp")
    x = input if input.dtype.is_floating_point else input.to(dt.get_default_dtype())
    low = x.dtype in (dt.float16, dt.bfloat16)
    xc = x.float() if low else x
    if input.numel() == 0:
        out = xc.sum(dims, keepdim=True).log()  # log(0) = -inf, the empty sum's logsumexp
    else:
        m = xc.detach().amax(dims, keepdim=True)
        m = _ew.where(isinf(m), 0.0, m)  # all -inf (or an inf) along the dims: no shift
        out = (xc - m).exp().sum(dims, keepdim=True).log() + m
    if not keepdim:
        out = out.squeeze(dims) if dims else out
    return out.to(x.dtype) if low else out


def dot(input, other) -> Tensor:
    """The inner product of two 1-D tensors of one dtype (floats: the matmul kernel, fp32 accumulation)."""
    _check(input, "dot")
    _check(other, "dot", "tensor")
    dt.refuse_barebones(input.dtype, "dot")
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    if input.dtype is not other.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{_TORCH_NAME[input.dtype]} and {_TORCH_NAME[other.dtype]}")
    if input.shape[0] != other.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{input.shape[0]}] and src [{other.shape[0]}] "
                           f"to have the same number of elements, but got {input.shape[0]} and {other.shape[0]} "
                           "elements respectively")
    if input.device != other.device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{input.device} and {other.device}!")
    if input.dtype.is_floating_point:
        return _mm.mm(input.unsqueeze(0), other.unsqueeze(1)).reshape(())
    return _ew.binary("mul", input, other).sum().to(input.dtype)


def outer(input, vec2) -> Tensor:
    """``input[:, None] * vec2[None, :]`` for 1-D tensors (dtypes promote). Alias: ``ger``."""
    _check(input, "outer")
    _check(vec2, "outer", "vec2")
    for t, name in ((input, "self"), (vec2, "vec2")):
        if t.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {t.ndim}-D")
    return input.unsqueeze(1) * vec2.unsqueeze(0)


def trace(input) -> Tensor:
    """The sum of a matrix's main diagonal (integers sum to int64)."""
    _check(input, "trace")
    dt.refuse_barebones(input.dtype, "trace")
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return input.diag().sum()


# ----- norms -------------------------------------------------------------------------------------
def _float_input(input, dtype, op: str):
    _check(input, op)
    if dtype is not None:
        input = input.to(dt.to_dtype(dtype, f"{op}(): argument 'dtype'"))
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. "
                           f"Got {_TORCH_NAME[input.dtype]}")
    return input


def _vector_norm(x, ord, dims, keepdim, op):
    """The p-norm over ``dims`` in fp32 for fp16/bf16 (the result keeps x's dtype)."""
    low = x.dtype in (dt.float16, dt.bfloat16)
    xc = x.float() if low else x
    if ord == math.inf or ord == -math.inf:
        if xc.numel() == 0:
            raise RuntimeError(f"{op} cannot compute the {ord} norm on an empty tensor because the operation "
                               "does not have an identity")
        a = xc.abs()
        out = a.amax(dims, keepdim=keepdim) if ord > 0 else a.amin(dims, keepdim=keepdim)
    elif ord == 0:
        out = _ew.binary("ne", xc, 0).sum(dims, keepdim=keepdim).to(xc.dtype)
    elif ord == 1:
        out = xc.abs().sum(dims, keepdim=keepdim)
    elif ord == 2:
        out = (xc * xc).sum(dims, keepdim=keepdim).sqrt()
    else:
        out = xc.abs().pow(ord).sum(dims, keepdim=keepdim).pow(1.0 / ord)
    return out.to(x.dtype) if low else out


def linalg_vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None) -> Tensor:
    """``tritensor.linalg.vector_norm``: ``sum(|x|**ord) ** (1/ord)`` over ``dim`` (all dims when None);
    ``ord`` = inf/-inf is the max/min of ``|x|``, 0 counts the nonzeros."""
    x = _float_input(x, dtype, "linalg.vector_norm")
    if isinstance(ord, bool) or not isinstance(ord, (numbers.Real, np.number)):
        raise TypeError(f"linalg.vector_norm(): argument 'ord' must be a number, not {type(ord).__name__}")
    dims = reduced_dims(x, dim, "linalg.vector_norm")
    return _vector_norm(x, float(ord), dims, keepdim, "linalg.vector_norm")


def linalg_matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None) -> Tensor:
    """``tritensor.linalg.matrix_norm``: ``'fro'``, or 1/-1 (max/min column abs sum), inf/-inf (rows).
    ``2``, ``-2`` and ``'nuc'`` need singular values (no SVD in tritensor yet): NotImplementedError."""
    A = _float_input(A, dtype, "linalg.matrix_norm")
    if A.ndim < 2:
        raise RuntimeError(f"linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dim}")
    d0, d1 = (normalize_dim(d, A.ndim) for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({d0}, {d1})")
    if ord == "fro":
        return _vector_norm(A, 2.0, tuple(sorted((d0, d1))), keepdim, "linalg.matrix_norm")
    if ord in (2, -2, "nuc"):
        raise NotImplementedError(f"linalg.matrix_norm: ord={ord!r} needs singular values; tritensor has no SVD yet")
    if isinstance(ord, str) or ord not in (1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    summed, reduced = (d0, d1) if abs(ord) == 1 else (d1, d0)  # 1: column sums (over rows), inf: row sums
    low = A.dtype in (dt.float16, dt.bfloat16)
    a = (A.float() if low else A).abs().sum(summed, keepdim=True)
    out = a.amax(reduced, keepdim=True) if ord > 0 else a.amin(reduced, keepdim=True)
    if not keepdim:
        out = out.squeeze((d0, d1))
    return out.to(A.dtype) if low else out


def norm(input, p="fro", dim=None, keepdim=False, dtype=None) -> Tensor:
    """``torch.norm``: ``'fro'`` (or a number p) is the vector p-norm over ``dim`` (all dims when None);
    ``'nuc'`` needs an SVD (NotImplementedError)."""
    _check(input, "norm")
    if p == "nuc":
        raise NotImplementedError("norm: p='nuc' needs singular values; tritensor has no SVD yet")
    if p == "fro":
        p = 2
    if isinstance(p, str):
        raise RuntimeError(f"norm: p must be 'fro', 'nuc' or a number, got {p!r}")
    x = _float_input(input, dtype, "norm")
    dims = reduced_dims(x, dim, "norm")
    return _vector_norm(x, float(p), dims, keepdim, "norm")


# ----- cross, tensordot, kron: composites of dispatched ops (recorded, so no derivative of their own) -----
_CROSS_DEFAULT_DIM = ("Using torch.cross without specifying the dim arg is deprecated.\n"
                      "Please either pass the dim explicitly or simply use torch.linalg.cross.\n"
                      "The default value of dim will change to agree with that of linalg.cross in a future release.")


def _cross(input, other, dim) -> Tensor:
    _check(input, "cross")
    _check(other, "cross", "other")
    if input.dtype is not other.dtype:
        raise RuntimeError(f"expected scalar type {_TORCH_NAME[input.dtype]} but found {_TORCH_NAME[other.dtype]}")
    if input.ndim != other.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    shape = broadcast_shapes(input.shape, other.shape)
    d = normalize_dim(dim, len(shape))
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. "
                           f"Got {input.shape[d]} and {other.shape[d]}")
    a, b = input.expand(*shape), other.expand(*shape)
    # c_i = a_(i+1) b_(i+2) - a_(i+2) b_(i+1), indices mod 3: rolls bring each factor into place
    return a.roll(-1, d) * b.roll(-2, d) - a.roll(-2, d) * b.roll(-1, d)


def cross(input, other, dim=None) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (broadcast); without ``dim``, the first dim of size 3,
    with torch's deprecation warning."""
    if dim is None:
        _check(input, "cross")
        _check(other, "cross", "other")
        warnings.warn(_CROSS_DEFAULT_DIM, UserWarning, stacklevel=3)
        dims = [i for i, s in enumerate(broadcast_shapes(input.shape, other.shape)) if s == 3]
        if not dims:
            raise RuntimeError("no dimension of size 3 in input")
        dim = dims[0]
    return _cross(input, other, dim)


def linalg_cross(input, other, *, dim=-1) -> Tensor:
    """``tritensor.linalg.cross``: the cross product along ``dim`` (last by default)."""
    return _cross(input, other, dim)


def tensordot(a, b, dims=2, out=None) -> Tensor:
    """Contract ``dims`` (the last n of ``a`` with the first n of ``b``, or two lists of dims): both
    permuted and reshaped to matrices, one ``mm``."""
    _check(a, "tensordot", "a")
    _check(b, "tensordot", "b")
    if out is not None:
        raise TypeError("tensordot(): out= is not supported")
    if isinstance(dims, numbers.Integral) and not isinstance(dims, bool):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > a.ndim or dims > b.ndim:
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        da, db = list(range(-dims, 0)) if dims else [], list(range(dims))
    elif isinstance(dims, (list, tuple)) and len(dims) == 2:
        da, db = ([x] if isinstance(x, numbers.Integral) else list(x) for x in dims)
    else:
        raise TypeError(f"tensordot(): argument 'dims' must be an int or a pair of lists of dims, not {dims!r}")
    if len(da) != len(db):
        raise RuntimeError("both dimension lists should have same length")
    if a.dtype is not b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    na = [normalize_dim(x, a.ndim) for x in da]
    nb = [normalize_dim(x, b.ndim) for x in db]
    for x, y, i, j in zip(da, db, na, nb):
        if a.shape[i] != b.shape[j]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[i]} in dim {x} and "
                               f"second has size {b.shape[j]} in dim {y}")
    free_a = [i for i in range(a.ndim) if i not in na]
    free_b = [j for j in range(b.ndim) if j not in nb]
    k = math.prod(a.shape[i] for i in na)
    shape_a, shape_b = [a.shape[i] for i in free_a], [b.shape[j] for j in free_b]
    am = a.permute(*free_a, *na).reshape(math.prod(shape_a), k)
    bm = b.permute(*nb, *free_b).reshape(k, math.prod(shape_b))
    return am.mm(bm).reshape(*shape_a, *shape_b)


def kron(input, other) -> Tensor:
    """The Kronecker product: block (i, j, ...) is ``input[i, j, ...] * other`` (dtypes promote)."""
    _check(input, "kron")
    _check(other, "kron", "other")
    nd = max(input.ndim, other.ndim)
    sa = (1,) * (nd - input.ndim) + tuple(input.shape)
    sb = (1,) * (nd - other.ndim) + tuple(other.shape)
    # interleave: a as (a0, 1, a1, 1, ...), b as (1, b0, 1, b1, ...); the broadcast product is the blocks
    a = input.reshape(*[s for x in sa for s in (x, 1)])
    b = other.reshape(*[s for y in sb for s in (1, y)])
    return (a * b).reshape(*[x * y for x, y in zip(sa, sb)])
