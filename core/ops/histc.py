"""``histc``: torch's checks and range rule, then the counting kernel (``triton_kernels/histc.py``).

With ``min == max`` (the default 0, 0) the range is the data's own minimum and maximum (one host
read, as torch), widened by 1 on each side when those are equal too.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import math
import numbers

from ...triton_kernels import histc as _k
from ...runtime import dtype as dt
from ...runtime.dtype_policy import FLOAT_COMPUTE
from ..tensor_base import TensorBase
from . import copy_into, fill

if TYPE_CHECKING:
    from ..tensor import Tensor

_NAME = {dt.int64: "Long", dt.int32: "Int", dt.bool_: "Bool"}


def histc(input, bins=100, min=0, max=0) -> Tensor:
    """Counts of ``input``'s elements in ``bins`` equal bins over [min, max], in ``input``'s dtype."""
    if not isinstance(input, TensorBase):
        raise TypeError(f"histc(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    dt.refuse_barebones(input.dtype, f"aminmax_{input.device.type}")  # torch's histc asks aminmax first for them
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"histogram_{input.device.type}\" not implemented for "
                                  f"'{_NAME.get(input.dtype, input.dtype.name)}'")
    for v, name in ((bins, "bins"), (min, "min"), (max, "max")):
        ok = isinstance(v, numbers.Integral) if name == "bins" else isinstance(v, numbers.Real)
        if not ok or isinstance(v, bool):
            raise TypeError(f"histc(): argument '{name}' must be {'int' if name == 'bins' else 'Number'}, "
                            f"not {type(v).__name__}")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    lo, hi = float(min), float(max)
    if lo > hi:
        raise RuntimeError("torch.histc: max must be larger than min")
    if lo == hi and input.numel():
        lo, hi = float(input.min().item()), float(input.max().item())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"torch.histc: range of [{lo:g}, {hi:g}] is not finite")
    counts = TensorBase._empty((int(bins),), dt.int32, input.device)
    fill(counts, 0)
    _k.histc(counts, input.contiguous(), int(bins), lo, hi, FLOAT_COMPUTE[input.dtype].name)
    out = TensorBase._empty((int(bins),), input.dtype, input.device)
    copy_into(out, counts)
    return out
