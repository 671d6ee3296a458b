"""tritensor's dtypes and PyTorch's type-promotion rules.

A dtype knows three spellings of itself: its public name (``tritensor.float16``), the NumPy
dtype that holds it on the host (bf16 through ``ml_dtypes.bfloat16``) and the Triton element
type kernels see. ``str(dtype)`` ends in the canonical name (``tritensor.float16``) because
Triton's launcher derives a pointer's element type from that string.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np


class dtype:
    __slots__ = ("name", "np", "itemsize", "is_floating_point", "is_signed", "_rank")

    def __init__(self, name: str, np_dtype, is_floating_point: bool, is_signed: bool, rank: int):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize
        self.is_floating_point = is_floating_point
        self.is_signed = is_signed
        self._rank = rank  # order inside its category, for promotion

    @property
    def is_complex(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"tritensor.{self.name}"

    __str__ = __repr__

    def __reduce__(self):  # pickles as the singleton
        return (_by_name, (self.name,))


bool_ = dtype("bool", np.bool_, False, False, 0)
int32 = dtype("int32", np.int32, False, True, 1)
int64 = dtype("int64", np.int64, False, True, 2)
float16 = dtype("float16", np.float16, True, True, 1)
bfloat16 = dtype("bfloat16", ml_dtypes.bfloat16, True, True, 1)
float32 = dtype("float32", np.float32, True, True, 2)
float64 = dtype("float64", np.float64, True, True, 3)

ALL = (bool_, int32, int64, float16, bfloat16, float32, float64)
FLOATING = (float16, bfloat16, float32, float64)
_NAMES = {d.name: d for d in ALL}
_NAMES.update({"half": float16, "float": float32, "double": float64, "long": int64, "int": int32})
_FROM_NP = {d.np: d for d in ALL}

default_float = float32
default_int = int64


def _by_name(name: str) -> dtype:
    return _NAMES[name]


def get_default_dtype() -> dtype:
    return default_float


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
    ca, cb = _category(a), _category(b)
    if ca != cb:
        return a if ca > cb else b
    if ca == 2 and a._rank == b._rank:  # float16 with bfloat16: neither holds the other
        return float32
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
