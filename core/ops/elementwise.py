"""Elementwise ops on Tensors: PyTorch's broadcasting and type promotion, then one kernel.

Every public function here takes tensors or Python numbers, checks them (devices, shapes,
dtypes) before anything runs, and returns a new tensor; ``out=`` writes into an existing one
(that is how the in-place ``*_`` methods work).
"""
from __future__ import annotations

from collections import namedtuple
from typing import TYPE_CHECKING

import math
import numbers

import numpy as np

from ...triton_kernels import elementwise as _k
from ...runtime import dtype as dt
from ...runtime.dtype_policy import COMPUTE as _COMPUTE, FLOAT_COMPUTE as _FLOAT_COMPUTE
from ..shape import broadcast_shapes
from ..tensor_base import TensorBase
from . import _check_writable, _overlaps, float8_bytes, host_tensor
from . import views as _views

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor

# From the ops' records (triton_kernels/elementwise.py: SPECS): unary ops that keep an integer
# input's dtype (the rest turn integers into the default float); binary ops that turn integers into
# the default float, and those that refuse them; PyTorch's kernel names, which its "not implemented
# for 'Float'" errors of the bitwise ops quote.
_INT_PRESERVING = frozenset(s.name for s in _k.SPECS if s.arity == 1 and s.ints == "keep")
_INT_TO_FLOAT = frozenset(s.name for s in _k.SPECS if s.arity == 2 and s.ints == "float")
_INT_REFUSED = frozenset(s.name for s in _k.SPECS if s.ints == "refuse") | frozenset(_k.HIDDEN_BINARY)
_BITWISE_KERNEL = {s.name: s.torch_kernel for s in _k.SPECS if s.torch_kernel}
# ... unary ops with a bool result (logical_not, signbit, isposinf ...); binary ops of integers only (gcd, lcm)
_BOOL_UNARY = frozenset(s.name for s in _k.SPECS if s.arity == 1 and s.ints == "bool")
_INT_ONLY = frozenset(s.name for s in _k.SPECS if s.ints == "only")
# torch 2.13 gives its barebones unsigned types (uint16/32/64) no kernel for these ops: the kernel name
# its NotImplementedError quotes ("{}" is the device type). The rest (mul, div, eq, ne, &, |, ^, the
# ops that compute in the default float) run as for any integer dtype.
_UNSIGNED_REFUSED = {
    **{op: op + "_{}" for op in ("neg", "abs", "sign", "logical_not", "frac", "remainder", "lt", "le", "gt", "ge",
                                 "logical_and", "logical_or", "logical_xor", "hypot", "fmod", "gcd", "lcm", "heaviside",
                                 "logaddexp", "logaddexp2", "nextafter", "igamma", "igammac", "bitwise_not",
                                 "maximum", "minimum")},
    "add": "add_stub", "sub": "add_stub", "pow": "pow", "square": "pow", "relu": "clamp_min_scalar_{}",
    "fmax": "maximum_{}", "fmin": "minimum_{}", "floor_divide": "div_floor_{}",
    "bitwise_left_shift": "lshift_{}", "bitwise_right_shift": "rshift_{}",
}


def _refuse_unsigned(op: str, d: dt.dtype, dev) -> None:
    if op in _UNSIGNED_REFUSED:
        dt.refuse_barebones(d, _UNSIGNED_REFUSED[op].format(dev.type))


def _refuse_unsigned_clamp(input, min, max) -> None:
    """clamp's own kernel names in torch's error (the maximum/minimum it runs here would name theirs)."""
    if isinstance(input, TensorBase) and input.dtype in dt.BAREBONES_UNSIGNED:
        kind = "clamp_min_scalar" if max is None else ("clamp_max_scalar" if min is None else "clamp_scalar")
        dt.refuse_barebones(input.dtype, f"{kind}_{input.device.type}")


# torch 2.13 has no arithmetic on its float8 dtypes (storage formats for scaled matmuls): its NotImplementedError
_FLOAT8 = frozenset(dt.FLOAT8)


def _is_scalar(x) -> bool:
    return isinstance(x, (numbers.Number, np.number, np.bool_)) and not isinstance(x, complex)


def _check_operand(x, name: str, op: str, other=None):
    if isinstance(x, TensorBase):
        if x.dtype in _FLOAT8 and op != "where":  # where only selects bytes; every other op here is arithmetic
            if isinstance(other, TensorBase) and other.dtype is not x.dtype:  # torch's promotion error comes first
                dt.promote_types(*((x.dtype, other.dtype) if name == "input" else (other.dtype, x.dtype)))
            raise NotImplementedError(f"\"{'add_stub' if op in ('add', 'sub') else op + '_' + x.device.type}\" not "
                                      f"implemented for '{x.dtype.type_name}'")
        return
    if _is_scalar(x):
        return
    raise TypeError(f"{op}(): argument '{name}' must be a Tensor or a Python number, not {type(x).__name__}")


def _common_device(op: str, *xs):
    """PyTorch's rule: all tensors on one device, except 0-d CPU tensors (used as scalars)."""
    devs = {x.device for x in xs if isinstance(x, TensorBase) and not (x.ndim == 0 and x.device.type == "cpu")}
    if len(devs) > 1:
        a, b = sorted(devs, key=str)[:2]
        raise RuntimeError(
            f"{op}(): Expected all tensors to be on the same device, but found at least two devices, {a} and {b}!"
        )
    if devs:
        return devs.pop()
    return next(x.device for x in xs if isinstance(x, TensorBase))


def can_cast(frm: dt.dtype, to: dt.dtype) -> bool:
    """torch.can_cast: no float -> integral, no non-bool -> bool."""
    if frm.is_floating_point and not to.is_floating_point:
        return False
    if frm is not dt.bool_ and to is dt.bool_:
        return False
    return True


def _prepare_out(out, shape, result: dt.dtype, dev, op: str):
    if out is None:
        return TensorBase._empty(shape, result, dev)
    if not isinstance(out, TensorBase):
        raise TypeError(f"{op}(): argument 'out' must be a Tensor, not {type(out).__name__}")
    if out.device is not dev and out.device != dev:  # devices are one object each: identity first
        raise RuntimeError(f"{op}(): out is on {out.device} but the inputs are on {dev}")
    if out._shape != shape and tuple(out._shape) != tuple(shape):
        raise RuntimeError(f"{op}(): output with shape {list(out.shape)} doesn't match the broadcast shape {list(shape)}")
    if result is not out.dtype and not can_cast(result, out.dtype):
        raise RuntimeError(f"{op}(): result type {result.name} can't be cast to the desired output type {out.dtype.name}")
    if 0 in out._stride:  # only an expanded (stride-0) output can write one element twice
        _check_writable(out, op)
    return out


def _unalias(out, *xs):
    """Inputs that partly overlap the output (x.add_(x.T)) are read from a copy first (only another
    tensor over the output's own storage can: the common cases are answered without a call)."""
    st = out._storage
    return [x.clone() if isinstance(x, TensorBase) and x._storage is st and x is not out and _overlaps(out, x) else x
            for x in xs]


def unary(op: str, x, out=None) -> Tensor:
    """The core entry of every unary elementwise op named ``op``: checks ``x``, picks the output dtype (floats
    stay, integers go to the default float for the ops that need it), allocates or checks ``out``, one
    kernel launch."""
    _check_operand(x, "input", op)
    if not isinstance(x, TensorBase):
        raise TypeError(f"{op}(): argument 'input' must be a Tensor, not {type(x).__name__}")
    if x.dtype in dt.BAREBONES_UNSIGNED:
        _refuse_unsigned(op, x.dtype, x.device)
    if op == "bitwise_not":
        _check_bitwise(op, x.dtype, x.device)
        if x.dtype is dt.bool_:
            op = "logical_not"  # ~True is False, not the int32 ~1 == -2 a kernel would compute
    if op in _BOOL_UNARY:
        result = dt.bool_
        compute = _COMPUTE[x.dtype].name
    elif x.dtype.is_floating_point or op in _INT_PRESERVING:
        if op == "neg" and x.dtype is dt.bool_:
            raise RuntimeError("neg(): negation, the `-` operator, on a bool tensor is not supported. "
                               "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.")
        result = x.dtype
        compute = _COMPUTE[x.dtype].name
    else:
        if op in _INT_REFUSED:
            raise NotImplementedError(f"\"{op}_{x.device.type}\" not implemented for '{x.dtype.type_name}'")
        result = dt.get_default_dtype()
        compute = "float32"
    if out is None:
        out = TensorBase._empty(x._shape, result, x.device) if len(x._shape) != 4 else \
            TensorBase._empty_like_format(x, x._shape, result, x.device)  # channels-last stays so
    else:
        out = _prepare_out(out, x.shape, result, x.device, op)
        (x,) = _unalias(out, x)
    _k.elementwise(op, out, x, compute=compute)
    return out


_SWAPPABLE = frozenset(s.name for s in _k.SPECS if s.swappable)
_INT_DIVISOR_OPS = frozenset(("floor_divide", "remainder", "fmod", "div_trunc"))  # an integer divisor is checked at every call
_binary_plans: dict = {}  # signature of (op, operands, default dtype) -> _BinaryPlan
_PLANS_KEPT = 4096


class _BinaryPlan:
    """What a binary op's checks decide from its operands' signature (dtypes, shapes, devices,
    scalar types), kept per signature so a repeated call skips straight to allocating and launching."""

    __slots__ = ("dev", "result", "compute", "shape", "scalar_first", "swap", "narrow")

    def __init__(self, dev, result, compute, shape, scalar_first, swap, narrow=None):
        self.dev, self.result, self.compute, self.shape = dev, result, compute, shape
        self.scalar_first, self.swap = scalar_first, swap
        # uint8/int8/int16 operands (computed in int32): the dtype a scalar or 0-d tensor is cast to
        # first, as PyTorch casts it, so it wraps (uint8_tensor < -1 compares with 255)
        self.narrow = narrow


def binary(op: str, a, b, out=None, alpha=1) -> Tensor:
    """``op(a, b)`` with broadcasting and torch's type promotion; ``alpha`` is add/sub's keyword:
    ``a + alpha * b``, ``b`` scaled inside the same kernel."""
    if type(b) is np.ndarray or type(a) is np.ndarray:  # torch takes an array operand as a tensor
        a, b = (_from_array(x, b if x is a else a) if type(x) is np.ndarray else x for x in (a, b))
    scale = None
    if type(alpha) is not int or alpha != 1:  # torch checks any alpha given, even 1.0
        b, scale = _alpha_operand(op, a, b, alpha)
    if op == "pow" and isinstance(b, numbers.Integral) and b < 0:  # a value check: at every call, not planned
        _check_integer_exponent(a)
    # Each operand's signature: a tensor's dtype, shape and device by its type and index (what device
    # equality compares: hashing the device object itself would be a Python call), else its type.
    key = (op, (a.dtype, a._shape, a.device.type, a.device.index) if isinstance(a, TensorBase) else type(a),
           (b.dtype, b._shape, b.device.type, b.device.index) if isinstance(b, TensorBase) else type(b),
           dt.default_float)
    plan = _binary_plans.get(key)
    if plan is None:
        plan, a, b, cacheable = _plan_binary(op, a, b)
        if cacheable:
            if len(_binary_plans) >= _PLANS_KEPT:
                _binary_plans.clear()
            _binary_plans[key] = plan
    compute, shape = plan.compute, plan.shape
    if plan.narrow is not None:
        a, b = _narrow_operand(a, plan.narrow), _narrow_operand(b, plan.narrow)
    if plan.scalar_first:  # scalar op tensor: swap where the op allows, else materialise
        a, b = (b, a) if plan.swap else (full_like_scalar(a, b, getattr(dt, compute)), b)
    if op in _INT_DIVISOR_OPS and not compute.startswith("float"):
        _check_integer_divisor(b)
    if out is None:
        out = TensorBase._empty(shape, plan.result, plan.dev) if len(shape) != 4 else _new_4d(shape, plan, a, b)
    else:
        out = _prepare_out(out, shape, plan.result, plan.dev, op)
        a, b = _unalias(out, a, b)
    scalar = None
    if isinstance(b, TensorBase):
        if b._shape != shape:  # a broadcast operand: read through its stride-0 view
            b = _views.broadcast_view(b, shape)
    else:
        scalar = float(b) if compute.startswith("float") else int(b)
        b = None
    if scale is not None:
        scale = float(scale) if compute.startswith("float") else int(scale)
    _k.elementwise(op, out, a if a._shape == shape else _views.broadcast_view(a, shape), b, scalar=scalar,
                   compute=compute, alpha=scale)
    return out


def _alpha_operand(op: str, a, b, alpha):
    """add/sub's ``alpha``, checked as torch checks it: ``(b, kernel scale)``. A number ``b`` is
    scaled here; a number ``a`` gets ``alpha * b`` first (the op can't swap its operands then);
    otherwise the kernel scales ``b`` as it loads it."""
    if op not in ("add", "sub"):
        raise TypeError(f"{op}() got an unexpected keyword argument 'alpha'")
    if not isinstance(alpha, numbers.Number) or isinstance(alpha, complex):
        raise TypeError(f"{op}(): argument 'alpha' must be Number, not {type(alpha).__name__}")
    result = dt.result_type(a, b)
    if isinstance(alpha, bool) and result is not dt.bool_:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if not result.is_floating_point and not isinstance(alpha, numbers.Integral):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    if not isinstance(b, TensorBase):
        return (b and alpha) if isinstance(b, bool) else b * alpha, None  # bool * bool stays bool
    if not isinstance(a, TensorBase):
        return binary("mul", b, alpha), None
    return b, alpha


def _from_array(arr: np.ndarray, other):
    """A NumPy array operand as a tensor on the other operand's device (a copy)."""
    if not isinstance(other, TensorBase):
        raise TypeError("elementwise op: at least one argument must be a Tensor")
    return host_tensor(np.ascontiguousarray(arr), other.device)


def _new_4d(shape, plan, a, b):
    """A 4-D result laid out as the first operand of its full shape (channels-last stays so)."""
    like = a if isinstance(a, TensorBase) and a._shape == shape else b
    if isinstance(like, TensorBase) and like._shape == shape:
        return TensorBase._empty_like_format(like, shape, plan.result, plan.dev)
    return TensorBase._empty(shape, plan.result, plan.dev)


def _plan_binary(op: str, a, b):
    """The checks and decisions of a binary op: (plan, a, b, cacheable). 0-d CPU tensors beside
    tensors on another device become Python scalars (``a``/``b`` as returned); such a call is not
    cacheable, its operands' values decide."""
    _check_operand(a, "input", op, b)
    _check_operand(b, "other", op, a)
    if not isinstance(a, TensorBase) and not isinstance(b, TensorBase):
        raise TypeError(f"{op}(): at least one argument must be a Tensor")
    dev = _common_device(op, a, b)
    cacheable = True
    if isinstance(a, TensorBase) and a.device != dev:
        a, cacheable = a.item(), False
    if isinstance(b, TensorBase) and b.device != dev:
        b, cacheable = b.item(), False
    promoted = dt.result_type(a, b)
    if promoted in dt.BAREBONES_UNSIGNED:
        _refuse_unsigned(op, promoted, dev)
    if op in _INT_REFUSED and not promoted.is_floating_point:
        raise NotImplementedError(f"\"{op}_{dev.type}\" not implemented for '{_TYPE_NAME.get(promoted, promoted.name)}'")
    if op in _INT_ONLY and (promoted.is_floating_point or promoted is dt.bool_):
        raise NotImplementedError(f"\"{op}_{dev.type}\" not implemented for '{promoted.type_name}'")
    if op in _INT_TO_FLOAT and not promoted.is_floating_point:
        compute_in, result = dt.get_default_dtype(), dt.get_default_dtype()
    elif op == "pow" and not promoted.is_floating_point:
        compute_in, result = dt.float64, promoted  # exact for |result| < 2**53, then rounded back
    elif op in _k.COMPARISONS:
        compute_in, result = promoted, dt.bool_
    else:
        compute_in, result = promoted, promoted
    if op in _BITWISE_KERNEL:
        _check_bitwise(op, promoted, dev)
    if op == "sub" and promoted is dt.bool_:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. "
                           "Use the `^` or `logical_xor()` operator instead.")
    compute = _COMPUTE[compute_in].name
    scalar_first = not isinstance(a, TensorBase)
    tensor_a = b if scalar_first else a
    other = a if scalar_first else b
    shape = broadcast_shapes(tensor_a.shape, other.shape) if isinstance(other, TensorBase) else tuple(tensor_a.shape)
    # Python ints and 0-d tensors beside a small or unsigned integer tensor are cast to its dtype first (they wrap)
    narrow = compute_in if compute_in in dt.SMALL_INTEGRAL or compute_in in dt.BAREBONES_UNSIGNED else None
    return _BinaryPlan(dev, result, compute, shape, scalar_first, op in _SWAPPABLE, narrow), a, b, cacheable


def _check_bitwise(op: str, d: dt.dtype, dev) -> None:
    """Bitwise ops take integers and bools (shifts integers only), as PyTorch, whose error this is."""
    if d.is_floating_point or (d is dt.bool_ and op in ("bitwise_left_shift", "bitwise_right_shift")):
        raise NotImplementedError(f'"{_BITWISE_KERNEL[op]}_{dev.type}" not implemented for \'{d.type_name}\'')


def _narrow_operand(x, d: dt.dtype):
    """A Python integer or a 0-d integer tensor of a wider dtype as ``d`` holds it (wrapped)."""
    if isinstance(x, TensorBase):
        return x.to(d) if x.dtype is not d and x.ndim == 0 else x
    return dt.wrap_int(x, d) if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) else x


def _check_integer_divisor(b) -> None:
    """Integer ``//`` and ``%`` by zero raise, as PyTorch's (CPU) kernels do, before any output is
    written (a tensor divisor costs one reduction and a host sync)."""
    if isinstance(b, TensorBase):
        zero = b.numel() and bool(binary("eq", b, 0).any().item())
    else:
        zero = b == 0
    if zero:
        raise RuntimeError("ZeroDivisionError")


def _check_integer_exponent(a) -> None:
    """An integer (or bool) tensor to a negative Python integer power raises, as in PyTorch (a tensor
    of exponents is computed: 0 unless the base is 1 or -1)."""
    if isinstance(a, TensorBase) and not a.dtype.is_floating_point:
        raise RuntimeError("Integers to negative integer powers are not allowed.")


def full_like_scalar(value, like: Tensor, d: dt.dtype) -> Tensor:
    """A 0-d tensor of dtype ``d`` on ``like``'s device holding ``value``: a scalar operand broadcast by the
    kernel."""
    t = TensorBase._empty((), d, like.device)
    return t.fill_(value)


def where(condition, input=None, other=None, *, out=None) -> Tensor:
    """``input`` where ``condition`` holds, else ``other`` (either may be a Python number); with
    ``condition`` alone, ``condition.nonzero(as_tuple=True)``, as torch."""
    cond, x, y = condition, input, other
    if x is None and y is None and out is None:
        if not isinstance(cond, TensorBase):
            raise TypeError(f"where(): argument 'condition' must be a Tensor, not {type(cond).__name__}")
        return cond.nonzero(as_tuple=True)
    if x is None or y is None:
        raise TypeError("where() takes a condition alone, or a condition, input and other: "
                        f"missing {'input' if x is None else 'other'}")
    if not isinstance(cond, TensorBase):
        raise TypeError(f"where(): argument 'condition' must be a Tensor, not {type(cond).__name__}")
    if cond.dtype is not dt.bool_:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype {cond.dtype.name}")
    _check_operand(x, "input", "where")
    _check_operand(y, "other", "where")
    dev = _common_device("where", cond, x, y)
    result = dt.result_type(x, y)
    x, y = [v if isinstance(v, TensorBase) else full_like_scalar(v, cond, result) for v in (x, y)]
    shape = broadcast_shapes(cond.shape, x.shape, y.shape)
    out = _prepare_out(out, shape, result, dev, "where")
    cond, x, y = _unalias(out, cond, x, y)
    dst = out
    if result in _FLOAT8:  # a float8 selection moves bytes: the kernel sees them as uint8
        dst, x, y, result = float8_bytes(out), float8_bytes(x), float8_bytes(y), dt.uint8
    _k.elementwise("where", dst, _views.broadcast_view(cond, shape), _views.broadcast_view(x, shape), _views.broadcast_view(y, shape),
                   compute=_COMPUTE[result].name)
    return out


# ----- the table's entries: one function per op, named as the op (core/ops/table.py) ---------
def _unary_entries(op: str):
    def entry(input, *, out=None) -> Tensor:
        return unary(op, input, out=out)

    def entry_(input) -> Tensor:
        unary(op, input, out=input)
        input._bump_version()
        return input

    entry.__name__ = entry.__qualname__ = op
    entry_.__name__ = entry_.__qualname__ = op + "_"
    entry.__doc__ = f"Elementwise ``{op}`` (kernel: triton_kernels/elementwise.py)."
    entry_.__doc__ = f"In-place elementwise ``{op}``."
    return entry, entry_


def _binary_entries(op: str):
    if op in ("add", "sub"):  # torch's alpha: input + alpha * other
        def entry(input, other, *, alpha=1, out=None) -> Tensor:
            return binary(op, input, other, out=out, alpha=alpha)

        def entry_(input, other, *, alpha=1) -> Tensor:
            binary(op, input, other, out=input, alpha=alpha)
            input._bump_version()
            return input
    else:
        def entry(input, other, *, out=None) -> Tensor:
            return binary(op, input, other, out=out)

        def entry_(input, other) -> Tensor:
            binary(op, input, other, out=input)
            input._bump_version()
            return input

    entry.__name__ = entry.__qualname__ = op
    entry_.__name__ = entry_.__qualname__ = op + "_"
    entry.__doc__ = f"Elementwise ``{op}`` with broadcasting and type promotion (kernel: triton_kernels/elementwise.py)."
    entry_.__doc__ = f"In-place elementwise ``{op}``."
    return entry, entry_


UNARY = {op: _unary_entries(op) for op in _k.UNARY}  # name -> (entry, in-place entry)
BINARY = {op: _binary_entries(op) for op in _k.BINARY}


# ----- elementwise ops with arguments of their own -----------------------------------------
_ROUNDING = {None: "div", "trunc": _k.DIV_TRUNC, "floor": "floor_divide"}


def _rounding_op(rounding_mode) -> str:
    if not isinstance(rounding_mode, (str, type(None))) or rounding_mode not in _ROUNDING:
        raise RuntimeError("div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                           f"{rounding_mode!r}")
    return _ROUNDING[rounding_mode]


def div(input, other, *, rounding_mode=None, out=None) -> Tensor:
    """``input / other``; ``rounding_mode="trunc"`` rounds the quotient toward zero, ``"floor"`` down
    (that is ``floor_divide``), both keeping an integer dtype."""
    return binary(_rounding_op(rounding_mode), input, other, out=out)


def div_(input, other, *, rounding_mode=None) -> Tensor:
    """In-place elementwise ``div``."""
    binary(_rounding_op(rounding_mode), input, other, out=input)
    input._bump_version()
    return input


def _tensor_operands(op: str, input, other):
    """atan2 and hypot take two tensors (torch has no Number overload for them); fmod a Number other."""
    for x, name, pos in ((input, "input", 1), (other, "other", 2)):
        if not isinstance(x, TensorBase) and (name == "input" or op != "fmod" or not _is_scalar(x)):
            raise TypeError(f"{op}(): argument '{name}' (position {pos}) must be Tensor, not {type(x).__name__}")


def _two_tensor_entries(op: str):
    def entry(input, other, *, out=None) -> Tensor:
        _tensor_operands(op, input, other)
        return binary(op, input, other, out=out)

    def entry_(input, other) -> Tensor:
        _tensor_operands(op, input, other)
        binary(op, input, other, out=input)
        input._bump_version()
        return input

    entry.__name__ = entry.__qualname__ = op
    entry_.__name__ = entry_.__qualname__ = op + "_"
    entry.__doc__ = f"Elementwise ``{op}`` with broadcasting and type promotion (kernel: triton_kernels/elementwise.py)."
    entry_.__doc__ = f"In-place elementwise ``{op}``."
    return entry, entry_


BINARY["div"] = (div, div_)
for _op in ("atan2", "hypot", "fmod"):
    BINARY[_op] = _two_tensor_entries(_op)


def polygamma(n, input, *, out=None) -> Tensor:
    """The ``n``-th derivative of digamma (``polygamma(0, x)`` is ``digamma(x)``); integers give the
    default float."""
    if not isinstance(n, numbers.Integral) or isinstance(n, bool):
        raise TypeError(f"polygamma(): argument 'n' (position 1) must be int, not {type(n).__name__}")
    if not isinstance(input, TensorBase):
        raise TypeError(f"polygamma(): argument 'input' (position 2) must be Tensor, not {type(input).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    if n == 0:
        return unary("digamma", input, out=out)
    result = input.dtype if input.dtype.is_floating_point else dt.get_default_dtype()
    if out is None:
        out = TensorBase._empty(input._shape, result, input.device)
    else:
        out = _prepare_out(out, input.shape, result, input.device, "polygamma")
        (input,) = _unalias(out, input)
    _k.elementwise(_k.POLYGAMMA, out, input, scalar=int(n), compute=_FLOAT_COMPUTE[result].name)
    return out


def polygamma_(input, n) -> Tensor:
    """``x.polygamma_(n)``: in place (self first, as torch's method)."""
    polygamma(n, input, out=input)
    input._bump_version()
    return input


# PyTorch's names of the dtypes in the errors below: its C++ type (lerp's) and its scalar type
_C_TYPE = {dt.float32: "float", dt.float64: "double", dt.float16: "c10::Half", dt.bfloat16: "c10::BFloat16",
           dt.int64: "long int", dt.int32: "int", dt.bool_: "bool"}
_TYPE_NAME = {dt.int64: "Long", dt.int32: "Int", dt.bool_: "Bool"}


def _ternary(op: str, input, t1, t2, scalar, out, names):
    """lerp(input, end, weight) and addcmul/addcdiv(input, tensor1, tensor2, value): broadcast together,
    one kernel; ``t2`` may be a number (lerp's weight), ``scalar`` is addcmul/addcdiv's value."""
    for x, name in zip((input, t1, t2), names):
        if not isinstance(x, TensorBase) and not (name == "weight" and _is_scalar(x)):
            raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(x).__name__}")
    dev = _common_device(op, input, t1, t2)
    if op == "lerp":
        if not input.dtype.is_floating_point:
            raise NotImplementedError(f"\"lerp_kernel_{'tensor' if isinstance(t2, TensorBase) else 'scalar'}\" "
                                      f"not implemented for '{_TYPE_NAME.get(input.dtype, input.dtype.name)}'")
        for x, name in ((t1, "end"), (t2, "weight")):
            if isinstance(x, TensorBase) and x.dtype is not input.dtype:
                raise RuntimeError(f"expected dtype {_C_TYPE.get(input.dtype, input.dtype.name)} for `{name}` but "
                                   f"got dtype {_C_TYPE.get(x.dtype, x.dtype.name)}")
        result = input.dtype
    else:
        result = dt.result_type(input, t1, t2)
        if op == "addcdiv" and not dt.result_type(t1, t2).is_floating_point:
            raise RuntimeError(
                "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will "
                "perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented "
                "as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
                "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the "
                "latter implementation: (input + value * tensor1 / tensor2), for all dtypes.")
        if not _is_scalar(scalar):
            raise TypeError(f"{op}(): argument 'value' must be Number, not {type(scalar).__name__}")
    compute = _COMPUTE[result].name
    if op == "lerp":  # the weight is the kernel's scalar when it is a number
        scalar, t2 = (None, t2) if isinstance(t2, TensorBase) else (t2, None)
    scalar = None if scalar is None else (float(scalar) if compute.startswith("float") else int(scalar))
    tensors = [x for x in (input, t1, t2) if isinstance(x, TensorBase)]
    shape = broadcast_shapes(*(x.shape for x in tensors))
    if out is None:
        out = TensorBase._empty(shape, result, dev)
    else:
        out = _prepare_out(out, shape, result, dev, op)
        input, t1, t2 = _unalias(out, input, t1, t2)
    views = [None if x is None else _views.broadcast_view(x, shape) for x in (input, t1, t2)]
    _k.elementwise(op, out, views[0], views[1], views[2], scalar=scalar, compute=compute)
    return out


def lerp(input, end, weight, *, out=None) -> Tensor:
    """``input + weight * (end - input)``, ``weight`` a tensor or a number (torch's two-sided formula)."""
    return _ternary("lerp", input, end, weight, None, out, ("input", "end", "weight"))


def lerp_(input, end, weight) -> Tensor:
    """``Tensor.lerp_``: ``input += weight * (end - input)`` in place."""
    _ternary("lerp", input, end, weight, None, input, ("input", "end", "weight"))
    input._bump_version()
    return input


def addcmul(input, tensor1, tensor2, *, value=1, out=None) -> Tensor:
    """``input + value * tensor1 * tensor2`` in one kernel."""
    return _ternary("addcmul", input, tensor1, tensor2, value, out, ("input", "tensor1", "tensor2"))


def addcmul_(input, tensor1, tensor2, *, value=1) -> Tensor:
    """``Tensor.addcmul_``: ``input += value * tensor1 * tensor2`` in place."""
    _ternary("addcmul", input, tensor1, tensor2, value, input, ("input", "tensor1", "tensor2"))
    input._bump_version()
    return input


def addcdiv(input, tensor1, tensor2, *, value=1, out=None) -> Tensor:
    """``input + value * tensor1 / tensor2`` in one kernel (floating tensors only, as torch)."""
    return _ternary("addcdiv", input, tensor1, tensor2, value, out, ("input", "tensor1", "tensor2"))


def addcdiv_(input, tensor1, tensor2, *, value=1) -> Tensor:
    """``Tensor.addcdiv_``: ``input += value * tensor1 / tensor2`` in place."""
    _ternary("addcdiv", input, tensor1, tensor2, value, input, ("input", "tensor1", "tensor2"))
    input._bump_version()
    return input


def clamp(input, min=None, max=None) -> Tensor:
    """Elementwise ``min(max(input, min), max)``; either bound may be a tensor or None."""
    if min is None and max is None:
        raise RuntimeError("clamp: At least one of 'min' or 'max' must not be None")
    _refuse_unsigned_clamp(input, min, max)
    out = input if min is None else binary("maximum", input, min)
    return out if max is None else binary("minimum", out, max)


def clamp_(input, min=None, max=None) -> Tensor:
    """``Tensor.clamp_``: each element limited to [min, max] in place (torch's error when both are None)."""
    if min is None and max is None:
        raise RuntimeError("clamp: At least one of 'min' or 'max' must not be None")
    _refuse_unsigned_clamp(input, min, max)
    if min is not None:
        binary("maximum", input, min, out=input)
    if max is not None:
        binary("minimum", input, max, out=input)
    input._bump_version()
    return input


def clamp_bound(op: str, name: str, value):
    """clamp_min/clamp_max's one bound: a number or a tensor, never None (torch's TypeError; clamp itself
    takes None for the bound it leaves out)."""
    if not (isinstance(value, TensorBase) or _is_scalar(value)):
        raise TypeError(f"{op}(): argument '{name}' (position 2) must be Number or Tensor, not {type(value).__name__}")
    return value


def clamp_min(input, min) -> Tensor:
    """``Tensor.clamp_min``: ``clamp(input, min=min)``."""
    return clamp(input, clamp_bound("clamp_min", "min", min), None)


def clamp_max(input, max) -> Tensor:
    """``Tensor.clamp_max``: ``clamp(input, max=max)``."""
    return clamp(input, None, clamp_bound("clamp_max", "max", max))


def invert(input) -> Tensor:
    """``~x``: bitwise not of an integer tensor, logical not of a bool one; floats raise PyTorch's
    TypeError (``bitwise_not`` itself raises its NotImplementedError)."""
    if not isinstance(input, TensorBase) or input.dtype.is_floating_point:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    return unary("bitwise_not", input)



# ----- torch's further elementwise math: forms with arguments or checks of their own, and composites -----
def logit(input, eps=None, *, out=None) -> Tensor:
    """``log(p / (1 - p))``; with ``eps``, ``input`` clamped to [eps, 1 - eps] first (torch's), so the
    ends stay finite."""
    if eps is not None:
        input = _logit_clamp(input, eps)
    return unary("logit", input, out=out)


def logit_(input, eps=None) -> Tensor:
    """``Tensor.logit_``: ``log(p / (1 - p))`` in place, ``p`` clamped to [eps, 1 - eps] first when ``eps`` is
    given."""
    if eps is not None:
        _logit_clamp(input, eps, inplace=True)
    unary("logit", input, out=input)
    input._bump_version()
    return input


def _logit_clamp(input, eps, inplace=False):
    if not isinstance(input, TensorBase):
        raise TypeError(f"logit(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not isinstance(eps, numbers.Real) or isinstance(eps, bool):
        raise TypeError(f"logit(): argument 'eps' (position 2) must be float, not {type(eps).__name__}")
    if not input.dtype.is_floating_point:  # torch's integer logit clamps in the default float, as it computes
        input = input.to(dt.get_default_dtype())
    # dispatched: under autograd the clamp is recorded, and its gradient is zero outside [eps, 1 - eps] as torch's
    return input.clamp_(eps, 1 - eps) if inplace else input.clamp(eps, 1 - eps)


def _heaviside_checks(input, values):
    for x, name, pos in ((input, "input", 1), (values, "values", 2)):
        if not isinstance(x, TensorBase):
            raise TypeError(f"heaviside(): argument '{name}' (position {pos}) must be Tensor, not {type(x).__name__}")
    if input.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")


def heaviside(input, values, *, out=None) -> Tensor:
    """0 where ``input`` < 0, 1 where it is > 0, ``values`` where it is 0 (one dtype for both, as torch)."""
    _heaviside_checks(input, values)
    return binary("heaviside", input, values, out=out)


def heaviside_(input, values) -> Tensor:
    """``Tensor.heaviside_``: the step function in place: 0 below zero, 1 above, ``values`` at zero."""
    _heaviside_checks(input, values)
    binary("heaviside", input, values, out=input)
    input._bump_version()
    return input


UNARY["logit"] = (logit, logit_)
BINARY["heaviside"] = (heaviside, heaviside_)
# two tensors, as torch's signatures (no Number overload)
for _op in ("fmax", "fmin", "gcd", "lcm", "logaddexp", "logaddexp2", "nextafter", "igamma", "igammac"):
    BINARY[_op] = _two_tensor_entries(_op)


def clamp_min_(input, min) -> Tensor:
    """``Tensor.clamp_min_``: ``clamp_(input, min=min)``."""
    return clamp_(input, clamp_bound("clamp_min_", "min", min), None)


def clamp_max_(input, max) -> Tensor:
    """``Tensor.clamp_max_``: ``clamp_(input, max=max)``."""
    return clamp_(input, None, clamp_bound("clamp_max_", "max", max))


def _tensor(x, op: str, name: str = "input", pos: int = 1):
    if not isinstance(x, TensorBase):
        raise TypeError(f"{op}(): argument '{name}' (position {pos}) must be Tensor, not {type(x).__name__}")
    return x


def positive(input) -> Tensor:
    """``+input``: the tensor itself (torch's), refused for bool."""
    if _tensor(input, "positive").dtype is dt.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


def fill(input, value) -> Tensor:
    """A new tensor of ``input``'s shape, dtype and device filled with ``value``: for a number a clone
    filled in place (a zero gradient to ``input``), for a 0-d tensor that tensor cast and expanded
    (its gradient the sum), each piece dispatched, so recorded, as torch's."""
    if not isinstance(value, TensorBase):
        return _tensor(input, "fill").clone().fill_(value)
    if value.ndim != 0:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions.")
    return value.to(device=_tensor(input, "fill").device, dtype=input.dtype).expand(input.shape).clone()


def zero_(input) -> Tensor:
    """``torch.zero_(input)``: ``input.zero_()``."""
    return _tensor(input, "zero_").zero_()


def isreal(input) -> Tensor:
    """True everywhere: tritensor has no complex dtypes, so every value is real (torch's, for a real
    tensor)."""
    out = TensorBase._empty(_tensor(input, "isreal")._shape, dt.bool_, input.device)
    return out.fill_(True)


def rsub(input, other, *, alpha=1) -> Tensor:
    """``other - alpha * input`` (torch.rsub: sub with its operands swapped)."""
    _tensor(input, "rsub")
    if isinstance(other, TensorBase):
        return other.sub(input, alpha=alpha)
    _check_operand(other, "other", "rsub")
    return (input if alpha == 1 else input.mul(alpha)).__rsub__(other)


def float_power(input, exponent) -> Tensor:
    """``input ** exponent`` in float64, whatever the operands' dtypes (torch's)."""
    if not isinstance(input, TensorBase):
        _check_operand(input, "input", "float_power")
        return _tensor(exponent, "float_power", "exponent", 2).to(dt.float64).__rpow__(input)
    _check_operand(exponent, "exponent", "float_power")
    e = exponent.to(dt.float64) if isinstance(exponent, TensorBase) else exponent
    return input.to(dt.float64).pow(e)


def float_power_(input, exponent) -> Tensor:
    """``Tensor.float_power_``: ``input ** exponent`` in float64, in place; torch's error unless ``input`` is
    float64."""
    if _tensor(input, "float_power_").dtype is not dt.float64:
        raise RuntimeError(f"the base given to float_power_ has dtype {input.dtype.type_name} but the operation's "
                           "result requires dtype Double")
    _check_operand(exponent, "exponent", "float_power_")
    return input.pow_(exponent.to(dt.float64) if isinstance(exponent, TensorBase) else exponent)


def _ldexp_scale(input, other, op):
    """2 ** other in the result's dtype: the operands' promoted one, the default float for integers (torch's)."""
    _tensor(input, op)
    _tensor(other, op, "other", 2)
    result = dt.result_type(input, other)
    return other.__rpow__(2.0).to(result if result.is_floating_point else dt.get_default_dtype())


def ldexp(input, other, *, out=None) -> Tensor:
    """``input * 2 ** other`` (torch's: the product of the two, a float).

    Its gradient is ``2 ** other`` for every ``other``; torch 2.13's is 0 where an integer ``other`` is
    negative (its integer pow)."""
    scale = _ldexp_scale(input, other, "ldexp")
    return input.mul(scale) if out is None else input.mul(scale, out=out)


def ldexp_(input, other) -> Tensor:
    """``Tensor.ldexp_``: ``input * 2 ** other`` in place."""
    return input.mul_(_ldexp_scale(input, other, "ldexp_"))


_LOG_PI = math.log(math.pi)


def _mvlgamma_terms(input, p, op):
    _tensor(input, op)
    if not isinstance(p, numbers.Integral) or isinstance(p, bool):
        raise TypeError(f"{op}(): argument 'p' (position 2) must be int, not {type(p).__name__}")
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    # torch 2.13 no longer refuses x <= (p - 1) / 2: lgamma's values there (inf at its poles) stand
    x = input if input.dtype.is_floating_point else input.to(dt.get_default_dtype())
    # log Gamma_p(x) = p (p - 1) / 4 log(pi) + sum_j lgamma(x - j / 2), the p terms along a new last dim
    offsets = x.new_tensor([-0.5 * j for j in range(p)])
    return (x.unsqueeze(-1) + offsets).lgamma().sum(-1) + p * (p - 1) / 4 * _LOG_PI


def mvlgamma(input, p) -> Tensor:
    """The multivariate log-gamma function of dimension ``p`` (a composite of lgamma and a sum)."""
    return _mvlgamma_terms(input, p, "mvlgamma")


def mvlgamma_(input, p) -> Tensor:
    """``Tensor.mvlgamma_``: the multivariate log-gamma of dimension ``p`` in place."""
    return input.copy_(_mvlgamma_terms(input, p, "mvlgamma_"))


frexp_result = namedtuple("frexp", ["mantissa", "exponent"])  # torch.return_types.frexp


def frexp(input, *, out=None):
    """(mantissa, exponent): ``input = mantissa * 2 ** exponent``, 0.5 <= |mantissa| < 1, the exponent
    int32 (C's frexp, torch's); two passes of the kernel over the bits."""
    if not _tensor(input, "frexp").dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    if out is None:
        m = TensorBase._empty(input._shape, input.dtype, input.device)
        e = TensorBase._empty(input._shape, dt.int32, input.device)
    else:
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError("frexp(): argument 'out' must be a tuple of 2 Tensors")
        m = _prepare_out(out[0], input.shape, input.dtype, input.device, "frexp")
        e = _prepare_out(out[1], input.shape, dt.int32, input.device, "frexp")
        if m.dtype is not input.dtype or e.dtype is not dt.int32:
            raise RuntimeError("torch.frexp() expects mantissa to have dtype " f"{input.dtype.name} and exponent "
                               "to have dtype int32")
        (input,) = _unalias(m, input)
        (input,) = _unalias(e, input)
    compute = _COMPUTE[input.dtype].name
    _k.elementwise(_k.FREXP_EXPONENT, e, input, compute=compute)
    _k.elementwise(_k.FREXP_MANTISSA, m, input, compute=compute)
    return frexp_result(m, e)


def i1(input) -> Tensor:
    """I_1, the derivative of i0 (no public op of its own: torch has it as torch.special.i1)."""
    return unary(_k.I1, input)


def activation_backward(op: str, grad_output, saved) -> Tensor:
    """The fused derivative of the activation ``op`` (gelu, silu, sigmoid, tanh, relu, logit: aten's
    ``*_backward`` ops, no public name; ``triton_kernels/elementwise.py: ACTIVATION_BACKWARD``): dL/dx
    from the incoming gradient and the forward's input or output, in one launch computed in fp32 (fp64
    for fp64). Broadcasting and promotion are binary's; integer operands are refused there."""
    return binary(_k.ACTIVATION_BACKWARD[op][0], grad_output, saved)


# ----- questions about a tensor, as torch's functions (and methods where Tensor lacks them) -----
def is_complex(input) -> bool:
    """False: tritensor has no complex dtypes."""
    return _tensor(input, "is_complex").dtype.is_complex


def is_floating_point(input) -> bool:
    """torch.is_floating_point: whether ``input``'s dtype is a floating one."""
    return _tensor(input, "is_floating_point").dtype.is_floating_point


def is_signed(input) -> bool:
    """Whether the dtype holds negative values (floats and signed integers; not bool or uint8)."""
    return _tensor(input, "is_signed").dtype.is_signed


def is_nonzero(input) -> bool:
    """The value of a one-element tensor as a bool; torch's errors for none or several."""
    n = _tensor(input, "is_nonzero").numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.item() != 0)


def is_same_size(input, other) -> bool:
    """torch.is_same_size: whether ``input`` and ``other`` have the same shape."""
    _tensor(other, "is_same_size", "other", 2)
    return tuple(_tensor(input, "is_same_size").shape) == tuple(other.shape)


def numel(input) -> int:
    """torch.numel: the number of elements of ``input``."""
    return _tensor(input, "numel").numel()
