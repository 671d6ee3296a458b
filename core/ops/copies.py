"""The copying ops: ``clone`` (and so ``contiguous``), ``to`` (dtype and device casts), ``copy_`` and
``fill_`` (kernels: ``triton_kernels/copies.py``; the moves they share are in ``core/ops/__init__.py``).
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ...runtime import cuda
from ...runtime import dtype as dt
from ...runtime.device import device
from ..shape import broadcast_shapes, channels_last, contiguous_format, preserve_format
from ..tensor_base import TensorBase
from . import copy_into, fill, move


def clone(input, *, memory_format=None):
    """A copy with its own storage: laid out as ``memory_format`` says (``preserve_format``, the
    default, keeps a channels-last input channels-last; anything else becomes contiguous)."""
    out = _empty_in(input, input._shape, input.dtype, input.device, memory_format, "clone")
    copy_into(out, input)
    return out


def _empty_in(like, shape, dtype_, dev, memory_format, op: str):
    """An output of ``like``'s shape in ``memory_format`` (None: preserve ``like``'s)."""
    if memory_format is None or memory_format is preserve_format:
        return TensorBase._empty_like_format(like, shape, dtype_, dev)
    if memory_format is contiguous_format:
        return TensorBase._empty(shape, dtype_, dev)
    if memory_format is channels_last:
        if len(shape) != 4:
            raise RuntimeError(f"{op}(): required rank 4 tensor to use channels_last format, got {len(shape)}-D")
        return TensorBase._empty_channels_last(shape, dtype_, dev)
    raise TypeError(f"{op}(): memory_format must be a tritensor.memory_format, got {memory_format!r}")


def copy_(input, src, non_blocking=False):
    """Write ``src`` into this tensor in place: broadcasts, casts and crosses devices."""
    if not isinstance(src, TensorBase):
        raise TypeError(f"copy_(): src must be a Tensor, got {type(src).__name__}")
    broadcast_shapes(src.shape, input.shape)  # raises with both shapes
    if src.shape != input.shape:
        if len(src.shape) > input.ndim:
            src = src.reshape(src.shape[len(src.shape) - input.ndim:]) if math.prod(
                src.shape[: len(src.shape) - input.ndim]) == 1 else src
        src = src.expand(input.shape)
    if src.device != input.device:
        src = src.to(input.device)
    copy_into(input, src)
    input._bump_version()
    return input


def to(input, *args, **kwargs):
    """``to(dtype)``, ``to(device)``, ``to(other)``, ``to(memory_format=...)``: ``input`` itself
    when nothing changes."""
    target_dev, target_dt, copy = input.device, input.dtype, bool(kwargs.pop("copy", False))
    kwargs.pop("non_blocking", None)
    fmt = kwargs.pop("memory_format", None)
    if fmt is not None and fmt is not preserve_format:
        out = to(input, *args, copy=copy, **kwargs)
        if out.is_contiguous(memory_format=fmt):
            return out
        return clone(out, memory_format=fmt)
    flags = [a for a in args if isinstance(a, bool)]
    copy = copy or (len(flags) > 1 and flags[1])
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, TensorBase):
            target_dev, target_dt = a.device, a.dtype
        elif isinstance(a, dt.dtype):
            target_dt = a
        elif isinstance(a, (str, device, int)) and not isinstance(a, bool):
            target_dev = device(a)
        elif a is None or isinstance(a, bool):  # positional non_blocking, copy: to(device, dtype, False, True)
            continue
        else:
            target_dt = dt.to_dtype(a, "to(dtype)")
    if target_dev.type == "cuda":
        cuda._require(f"to({target_dev})")
        if target_dev.index is None:
            target_dev = device("cuda", cuda.current_device())
    same_dev = target_dev == input.device
    if same_dev and target_dt is input.dtype:
        return input.clone() if copy else input
    if same_dev:
        out = TensorBase._empty_like_format(input, input._shape, target_dt, input.device)
        copy_into(out, input)
        return out
    return move(input, target_dev, target_dt)


def fill_(input, value):
    """Set every element to ``value`` (a number or a one-element tensor)."""
    if isinstance(value, TensorBase):
        if value.numel() != 1:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions.")
        value = value.item()
    if not isinstance(value, (numbers.Number, np.number, bool)):
        raise TypeError(f"fill_(): value must be a number, got {type(value).__name__}")
    dt.check_fits(value, input.dtype)  # fill_(300) of a uint8 tensor raises, as torch; fill_(-1) wraps to 255
    fill(input, value)
    input._bump_version()
    return input
