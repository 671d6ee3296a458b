"""The copying ops: ``clone`` (and so ``contiguous``), ``to`` (dtype and device casts), ``copy_`` and
``fill_`` (kernels: ``triton_kernels/copies.py``; the moves they share are in ``core/ops/__init__.py``).
The Tensor methods composed of them follow at the end: ``contiguous``, ``cuda``, ``cpu``, ``type``,
``type_as``, ``half`` and the other dtype shortcuts, ``new_empty`` and the other ``new_*``, ``zero_``,
``pin_memory``.
"""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from ...runtime import cuda, memory
from ...runtime import dtype as dt
from ...runtime.device import CPU, device
from ..shape import (_shape_arg, broadcast_shapes, channels_last, contiguous_format, contiguous_strides,
                     preserve_format)
from ..tensor_base import TensorBase
from . import copy_into, fill, host_tensor, move


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


# ----- composites: Tensor methods written with the ops above (``to``, ``clone``, ``fill_``),
# each reached through the dispatcher as a method call, so autograd records them. The op table
# lists them (``COMPOSITE_METHODS``); core/tensor.py puts them on Tensor. Named ``to_cuda``,
# ``to_cpu``, ``to_type`` here (Tensor.cuda, .cpu, .type) so as not to hide this module's
# ``cuda`` and Python's ``type``.
def contiguous(self, memory_format=contiguous_format) -> "Tensor":
    """Itself when dense in ``memory_format``'s order (row-major by default), else a copy that is."""
    if self.is_contiguous(memory_format=memory_format):
        return self
    return self.clone(memory_format=memory_format)


def to_cuda(self, device=None, non_blocking=False, memory_format=preserve_format) -> "Tensor":
    """A copy in device memory (itself when already there); ``non_blocking`` is accepted as
    PyTorch's: copies are ordered on the current stream either way."""
    return self.to(_cuda_device(device), non_blocking=non_blocking, memory_format=memory_format)


def to_cpu(self) -> "Tensor":
    """``Tensor.cpu``: a copy in host memory (itself when already there)."""
    return self.to(CPU)


def to_type(self, dtype=None, non_blocking=False, **kwargs):
    """With no argument, the type's name as PyTorch spells it under tritensor's name
    (``'tritensor.LongTensor'``, ``'tritensor.cuda.FloatTensor'``); else this tensor as that
    type: a dtype, a tensor type (``tritensor.LongTensor``) or its name (``'torch.IntTensor'``
    too)."""
    if dtype is None:
        return dt.tensor_type_name(self.dtype, self.device.type)
    target_dt, target_dev = _tensor_type(dtype, self.device)
    return self.to(target_dev, target_dt, non_blocking=non_blocking)


def type_as(self, other) -> "Tensor":
    """This tensor in ``other``'s dtype (itself when they agree)."""
    if not isinstance(other, TensorBase):
        raise TypeError(f"type_as(): argument 'other' (position 1) must be Tensor, not {type(other).__name__}")
    return self.to(other.dtype)


def _to_dtype(dtype_):
    def method(self):
        return self.to(dtype_)
    return method


# Tensor.half() ... Tensor.short(): ``to`` a fixed dtype (made here, not written out as module
# functions: three of the names are Python's float, int and bool)
DTYPE_METHODS = {name: _to_dtype(d) for name, d in (
    ("half", dt.float16), ("bfloat16", dt.bfloat16), ("float", dt.float32), ("double", dt.float64),
    ("int", dt.int32), ("long", dt.int64), ("bool", dt.bool_), ("byte", dt.uint8), ("char", dt.int8),
    ("short", dt.int16))}


def new_empty(self, *size, dtype=None, device=None):
    """``Tensor.new_empty``: an uninitialised tensor of ``size`` with this tensor's dtype and device unless
    given."""
    return TensorBase._empty(_shape_arg(size), dtype or self.dtype, _dev(device, self.device))


def new_zeros(self, *size, dtype=None, device=None):
    """``Tensor.new_zeros``: zeros of ``size`` with this tensor's dtype and device unless given."""
    return self.new_full(_shape_arg(size), 0, dtype=dtype, device=device)


def new_ones(self, *size, dtype=None, device=None):
    """``Tensor.new_ones``: ones of ``size`` with this tensor's dtype and device unless given."""
    return self.new_full(_shape_arg(size), 1, dtype=dtype, device=device)


def new_full(self, size, fill_value, dtype=None, device=None):
    """``Tensor.new_full``: ``fill_value`` everywhere, of ``size``, with this tensor's dtype and device unless
    given."""
    if not isinstance(fill_value, (bool, int, float, np.number)):
        raise TypeError(f"full(): fill_value must be a number, got {type(fill_value).__name__}")
    t = TensorBase._empty(_shape_arg((size,)), dtype or self.dtype, _dev(device, self.device))
    fill(t, fill_value)  # a fresh tensor: no version bump, unlike fill_()
    return t


def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    """A copy of ``data`` with this tensor's dtype and device unless given (never a view)."""
    d, dev = dtype or self.dtype, _dev(device, self.device)
    if isinstance(data, TensorBase):
        warnings.warn("To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() or "
                      "sourceTensor.detach().clone().requires_grad_(True), rather than "
                      "tensor.new_tensor(sourceTensor).", UserWarning, stacklevel=2)
        out = data.detach().to(device=dev, dtype=d, copy=True)
    else:
        a = np.array(data)
        a = a.astype(np.bool_ if d is dt.bool_ else (np.float64 if d.is_floating_point else np.int64))
        out = host_tensor(a, CPU).to(dev).to(d)
    return out.requires_grad_(True) if requires_grad else out


def zero_(self) -> "Tensor":
    """``Tensor.zero_``: fill with 0 in place (a dispatched fill_, so recorded and version-bumped)."""
    return self.fill_(0)


def pin_memory(self) -> "Tensor":
    """A copy of this CPU tensor in page-locked host memory (GPU mode), as torch."""
    if self.device.type != "cpu":
        raise RuntimeError(f"cannot pin '{self.device.type}' memory: only dense CPU tensors can be pinned")
    if not cuda.is_available():
        raise RuntimeError("Cannot access accelerator device when none is available.")
    if self.is_pinned():
        return self
    out = TensorBase._result_class(memory.pinned_host_storage(self.nbytes), self._shape,
                                   contiguous_strides(self._shape), 0, self.dtype)
    out.numpy(force=True)[...] = self.numpy(force=True)
    return out


def is_pinned(self) -> bool:
    """``Tensor.is_pinned``: whether this is a CPU tensor in page-locked host memory."""
    return self.device.type == "cpu" and self._storage.pinned


def _dev(d, default):
    return default if d is None else device(d)


def _cuda_device(d) -> device:
    return device("cuda", d) if isinstance(d, int) else device(d or "cuda")


_TYPE_NAMES = {d.type_name + "Tensor": d for d in dt.ALL}


def _tensor_type(obj, current: device):
    """``Tensor.type``'s argument as (dtype, device): a dtype keeps the device; a tensor type or its
    name (``tritensor.LongTensor``, ``'torch.cuda.IntTensor'``) says CPU or CUDA too."""
    if isinstance(obj, str):
        prefix, _, name = obj.rpartition(".")
        if prefix not in ("tritensor", "torch", "tritensor.cuda", "torch.cuda") or name not in _TYPE_NAMES:
            raise ValueError(f"invalid type: {obj!r}")
        return _TYPE_NAMES[name], _cuda_device(None) if prefix.endswith("cuda") else CPU
    if isinstance(getattr(obj, "dtype", None), dt.dtype) and isinstance(getattr(obj, "is_cuda", None), bool):
        return obj.dtype, _cuda_device(None) if obj.is_cuda else CPU
    d = dt.to_dtype(obj, "type(dtype)")
    return d, current
