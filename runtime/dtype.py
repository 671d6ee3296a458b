"""tritensor's dtypes and PyTorch's type-promotion rules.

A dtype knows three spellings of itself: its public name (``tritensor.float16``), the NumPy
dtype that holds it on the host (bf16 through ``ml_dtypes.bfloat16``) and the Triton element
type kernels see. ``str(dtype)`` ends in the canonical name (``tritensor.float16``) because
Triton's launcher derives a pointer's element type from that string.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np


class dtype:
    """A tensor element type, as torch.dtype: its name, NumPy dtype, size, whether floating point or signed,
    its rank in type promotion, and the legacy type name (FloatTensor). One object per dtype, compared by
    identity."""
    __slots__ = ("name", "np", "itemsize", "is_floating_point", "is_signed", "_rank", "type_name", "c_name")

    def __init__(self, name: str, np_dtype, is_floating_point: bool, is_signed: bool, rank: int, type_name: str,
                 c_name: str):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize
        self.is_floating_point = is_floating_point
        self.is_signed = is_signed
        self._rank = rank  # order inside its category, for promotion
        self.type_name = type_name  # PyTorch's scalar-type name: "Byte" (ByteTensor, errors' 'Byte')
        self.c_name = c_name  # the C type PyTorch's overflow messages name: "uint8_t"

    @property
    def bits(self) -> int:
        """Bits per element (torch's dtype.itemsize * 8)."""
        return 8 * self.itemsize

    @property
    def is_complex(self) -> bool:
        """False for every tritensor dtype: there are no complex dtypes (torch's dtype.is_complex)."""
        return False

    def __repr__(self) -> str:
        return f"tritensor.{self.name}"

    __str__ = __repr__

    def __reduce__(self):  # pickles as the singleton
        return (_by_name, (self.name,))


bool_ = dtype("bool", np.bool_, False, False, 0, "Bool", "bool")
# Integers rank by width; uint8 holds no negative value, so promote_types treats it apart.
uint8 = dtype("uint8", np.uint8, False, False, 1, "Byte", "uint8_t")
int8 = dtype("int8", np.int8, False, True, 1, "Char", "int8_t")
int16 = dtype("int16", np.int16, False, True, 2, "Short", "int16_t")
int32 = dtype("int32", np.int32, False, True, 3, "Int", "int")
int64 = dtype("int64", np.int64, False, True, 4, "Long", "int64_t")
float16 = dtype("float16", np.float16, True, True, 1, "Half", "c10::Half")
bfloat16 = dtype("bfloat16", ml_dtypes.bfloat16, True, True, 1, "BFloat16", "c10::BFloat16")
float32 = dtype("float32", np.float32, True, True, 2, "Float", "float")
float64 = dtype("float64", np.float64, True, True, 3, "Double", "double")
# torch's "barebones" unsigned types: tensors of them exist (creation, casts, copies, indexing, a few ops),
# but they promote with nothing but a float and most arithmetic refuses them with torch's error (the core entries)
uint16 = dtype("uint16", np.uint16, False, False, 2, "UInt16", "uint16_t")
uint32 = dtype("uint32", np.uint32, False, False, 3, "UInt32", "uint32_t")
uint64 = dtype("uint64", np.uint64, False, False, 4, "UInt64", "uint64_t")
# torch's float8 formats: storage dtypes for scaled matmuls. Tensors of them are made, cast (bit-level kernels,
# triton_kernels/float8.py), copied, indexed and viewed; they promote with nothing and most arithmetic refuses them.
float8_e4m3fn = dtype("float8_e4m3fn", ml_dtypes.float8_e4m3fn, True, True, 0, "Float8_e4m3fn", "c10::Float8_e4m3fn")
float8_e5m2 = dtype("float8_e5m2", ml_dtypes.float8_e5m2, True, True, 0, "Float8_e5m2", "c10::Float8_e5m2")
float8_e4m3fnuz = dtype("float8_e4m3fnuz", ml_dtypes.float8_e4m3fnuz, True, True, 0, "Float8_e4m3fnuz",
                        "c10::Float8_e4m3fnuz")
float8_e5m2fnuz = dtype("float8_e5m2fnuz", ml_dtypes.float8_e5m2fnuz, True, True, 0, "Float8_e5m2fnuz",
                        "c10::Float8_e5m2fnuz")
float8_e8m0fnu = dtype("float8_e8m0fnu", ml_dtypes.float8_e8m0fnu, True, False, 0, "Float8_e8m0fnu",
                       "c10::Float8_e8m0fnu")
FLOAT8 = (float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz, float8_e8m0fnu)

ALL = (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64, uint16, uint32, uint64,
       *FLOAT8)
BAREBONES_UNSIGNED = (uint16, uint32, uint64)
FLOATING = (float16, bfloat16, float32, float64)
INTEGRAL = (uint8, int8, int16, int32, int64)
SMALL_INTEGRAL = (uint8, int8, int16)  # computed in int32 by the kernels, wrapped on store
_NAMES = {d.name: d for d in ALL}
# PyTorch's other spellings (torch.short; torch has no torch.char or torch.byte)
_NAMES.update({"half": float16, "float": float32, "double": float64, "long": int64, "int": int32, "short": int16})
_FROM_NP = {d.np: d for d in ALL}

default_float = float32
default_int = int64


def _by_name(name: str) -> dtype:
    return _NAMES[name]


def get_default_dtype() -> dtype:
    """torch.get_default_dtype: the floating dtype factory functions and Python floats give (float32 unless
    set_default_dtype changed it)."""
    return default_float


def set_default_dtype(d) -> None:
    """torch.set_default_dtype: the dtype Python floats, float factories (``zeros``, ``arange(0.)``)
    and nn layers' parameters get. Every reader asks this module's ``default_float`` at call time,
    so the change reaches them all; integer and bool dtypes are refused, as torch's."""
    global default_float
    d = to_dtype(d)
    if not d.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    default_float = d


def to_dtype(obj, argname: str = "dtype") -> dtype:
    """Accept a tritensor dtype, a NumPy dtype/type, or a name; reject anything else clearly."""
    if isinstance(obj, dtype):
        return obj
    if isinstance(obj, str) and obj in _NAMES:
        return _NAMES[obj]
    if obj is bool:
        return bool_
    if obj is int:
        return int64
    if obj is float:
        return float32
    try:
        npd = np.dtype(obj)
    except TypeError:
        npd = None
    if npd is not None and npd in _FROM_NP:
        return _FROM_NP[npd]
    raise TypeError(
        f"{argname}: unsupported dtype {obj!r}; expected one of "
        + ", ".join(f"tritensor.{d.name}" for d in ALL)
    )


def from_numpy_dtype(npd, argname: str = "array") -> dtype:
    """The tritensor dtype of a NumPy dtype (np.float32 -> float32, ml_dtypes' bfloat16 -> bfloat16); a
    TypeError naming ``argname`` for one tritensor has not."""
    npd = np.dtype(npd)
    if npd in _FROM_NP:
        return _FROM_NP[npd]
    raise TypeError(
        f"{argname}: NumPy dtype {npd} is not supported; expected one of "
        + ", ".join(str(d.np) for d in ALL)
    )


def _category(d: dtype) -> int:
    return 2 if d.is_floating_point else (1 if d is not bool_ else 0)


def promote_types(a: dtype, b: dtype) -> dtype:
    """PyTorch's promote_types: the smallest dtype both values fit in."""
    if a is b:
        return a
    if a in FLOAT8 or b in FLOAT8:
        raise RuntimeError(f"Promotion for Float8 Types is not supported, attempted to promote {a.type_name} and "
                           f"{b.type_name}")
    if (a in BAREBONES_UNSIGNED and not b.is_floating_point) or (b in BAREBONES_UNSIGNED and not a.is_floating_point):
        raise RuntimeError(f"Promotion for uint16, uint32, uint64 types is not supported, attempted to promote "
                           f"{a.type_name} and {b.type_name}")
    ca, cb = _category(a), _category(b)
    if ca != cb:
        return a if ca > cb else b
    if ca == 2 and a._rank == b._rank:  # float16 with bfloat16: neither holds the other
        return float32
    if ca == 1 and a.is_signed != b.is_signed:  # uint8 with a signed integer: the signed one, at least int16
        signed = a if a.is_signed else b
        return signed if signed._rank > int8._rank else int16
    return a if a._rank >= b._rank else b


def _scalar_dtype(x) -> dtype:
    if isinstance(x, (bool, np.bool_)):
        return bool_
    if isinstance(x, (int, np.integer)):
        return int64
    if isinstance(x, (float, np.floating)):
        return float64  # category only: a Python float never widens a float tensor
    raise TypeError(f"expected a tensor or a Python number, got {type(x).__name__}")


def result_type(*operands) -> dtype:
    """PyTorch's result_type: tensors with dims > zero-dim tensors > Python scalars.

    A lower priority class only matters when it brings a higher *category*
    (bool < integer < floating); then the category's default dtype is used for scalars.
    """
    dim_t, zero_t, scal = None, None, None
    for x in operands:
        d = getattr(x, "dtype", None)
        if isinstance(d, dtype):
            if x.ndim > 0:
                dim_t = d if dim_t is None else promote_types(dim_t, d)
            else:
                zero_t = d if zero_t is None else promote_types(zero_t, d)
        else:
            sd = _scalar_dtype(x)
            scal = sd if scal is None else promote_types(scal, sd)
    result = dim_t
    for lower, is_scalar in ((zero_t, False), (scal, True)):
        if lower is None:
            continue
        if result is None:
            result = lower
        elif _category(lower) > _category(result):
            if is_scalar:
                result = default_float if lower.is_floating_point else default_int
            else:
                result = lower
    if result is float64 and dim_t is None and zero_t is None:
        result = default_float  # only Python floats: torch.tensor(1.5) is float32
    return result


def tensor_type_name(d: dtype, device_type: str = "cpu") -> str:
    """PyTorch's legacy type name of a tensor under tritensor's name (``tritensor.ByteTensor``,
    ``tritensor.cuda.FloatTensor``): what ``Tensor.type()`` returns and torch's errors quote."""
    return f"tritensor.{'cuda.' if device_type == 'cuda' else ''}{d.type_name}Tensor"


def wrap_int(value: int, d: dtype) -> int:
    """A Python integer as ``d`` holds it: two's complement wraparound, as PyTorch casts a scalar
    to an integer tensor's dtype (``uint8_tensor < -1`` compares with 255)."""
    bits = d.bits
    v = int(value) & ((1 << bits) - 1)
    return v - (1 << bits) if d.is_signed and v >= 1 << (bits - 1) else v


def check_fits(value, d: dtype, c_type: bool = True) -> None:
    """PyTorch's overflow check of a scalar written into an integer dtype (``full``, ``fill_``,
    ``tensor``): signed types take their range; unsigned ones also take negative integers down to
    ``-max`` (they wrap, as ``a - b`` is ``a + 255 * b`` in uint8) but no negative float."""
    if d in FLOAT8 and not isinstance(value, (bool, np.bool_)):
        _check_fits_float8(float(value), d, c_type)
        return
    if d.is_floating_point or d is bool_ or isinstance(value, (bool, np.bool_)):
        return
    info = np.iinfo(d.np)
    if isinstance(value, (float, np.floating)):
        ok = info.min <= value <= info.max  # NaN and inf fail too, as torch's check
    else:
        value = int(value)
        ok = (info.min <= value <= info.max) if d.is_signed else (-info.max <= value <= info.max)
    if not ok:
        raise RuntimeError(f"value cannot be converted to type {d.c_name if c_type else d.name} without overflow")


def _check_fits_float8(value: float, d: dtype, c_type: bool) -> None:
    """torch's overflow check of a scalar written into a float8 dtype (``full``, ``fill_``): NaN passes,
    inf only into a format with inf (e5m2), and a finite value must lie within [lowest, max] (for the
    unsigned e8m0fnu, lowest is its smallest value, 2**-127, so negatives are refused)."""
    if math.isnan(value) or (math.isinf(value) and d is float8_e5m2) or value == 0:
        return  # (zero is e8m0fnu's code 0, as zeros() and zero_() write it)
    info = finfo(d)
    if not info.min <= value <= info.max:
        raise RuntimeError(f"value cannot be converted to type {d.c_name if c_type else d.name} without overflow")


def refuse_barebones(d: dtype, kernel: str) -> None:
    """torch 2.13 has no kernel named ``kernel`` (``"topk_cpu"``) for its barebones unsigned types: its
    NotImplementedError, raised by a core entry before any allocation."""
    if d in BAREBONES_UNSIGNED:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{d.type_name}'")


class finfo:
    """Numerical properties of a floating dtype, as ``torch.finfo``: ``bits``, ``eps``, ``max``,
    ``min``, ``tiny`` (= ``smallest_normal``), ``resolution``, ``dtype`` (its name)."""

    def __init__(self, type: dtype | None = None):
        d = default_float if type is None else type
        if not isinstance(d, dtype):
            raise TypeError(f"finfo(): argument 'type' (position 1) must be tritensor.dtype, not "
                            f"{builtin_type(d).__name__}")
        if not d.is_floating_point:
            raise TypeError("tritensor.finfo() requires a floating point input type. "
                            "Use tritensor.iinfo to handle 'tritensor.finfo'")
        info = ml_dtypes.finfo(d.np) if d is bfloat16 or d in FLOAT8 else np.finfo(d.np)
        self.bits = d.bits
        self.eps = float(info.eps)
        if d is float8_e5m2fnuz:
            self.eps = 0.125  # torch's numeric_limits give 2**-3 where ml_dtypes gives the true 2**-2: torch wins
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        self.resolution = 10.0 ** -math.floor(-math.log10(self.eps))  # PyTorch's: 10**-digits, in float64
        self.dtype = d.name

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Numerical properties of an integer dtype, as ``torch.iinfo``: ``bits``, ``max``, ``min``,
    ``dtype`` (its name)."""

    def __init__(self, type: dtype):
        if not isinstance(type, dtype):
            raise TypeError(f"iinfo(): argument 'type' (position 1) must be tritensor.dtype, not "
                            f"{builtin_type(type).__name__}")
        if type is bool_:
            raise TypeError("tritensor.bool is not supported by tritensor.iinfo")
        if type.is_floating_point:
            raise TypeError("tritensor.iinfo() requires an integer input type. "
                            "Use tritensor.finfo to handle 'tritensor.iinfo'")
        info = np.iinfo(type.np)
        self.bits = type.bits
        self.max = int(info.max)
        self.min = int(info.min)
        self.dtype = type.name

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


builtin_type = type  # finfo's and iinfo's argument is named ``type``, as torch's
