"""PyTorch's legacy tensor type names: ``LongTensor``, ``FloatTensor`` ... ``BoolTensor``.

Code written for PyTorch still constructs tensors with them (``tritensor.LongTensor([1, 2])``,
``tritensor.FloatTensor(2, 3)`` uninitialised of that shape), annotates with them
(``def f(x: tritensor.LongTensor)``) and asks ``isinstance(t, tritensor.LongTensor)``. As in
PyTorch, they are not subclasses of Tensor: each is an instance of a metaclass whose call makes an
ordinary Tensor and whose instance check compares dtype and device (a CPU tensor of that dtype).
"""
from __future__ import annotations

import numbers

import numpy as np

from ..runtime import dtype as dt
from ..runtime.device import CPU, device, get_default_device
from .factories import empty, tensor
from .shape import Size
from .tensor import Tensor
from .tensor_base import register_legacy_constructor


class tensortype(type):
    """The metaclass of the tensor type names (PyTorch's ``torch.tensortype``)."""

    dtype: dt.dtype
    is_cuda: bool

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and (obj.device.type == "cuda") == cls.is_cuda

    def __call__(cls, *args, device=None) -> Tensor:
        """``T()`` an empty tensor, ``T(*sizes)`` or ``T(Size)`` an uninitialised one of that shape,
        ``T(data)`` a copy of a sequence or array, ``T(tensor)`` that tensor when its type is ``T``."""
        dev = _device_of(cls, device)
        if not args:
            return empty(0, dtype=cls.dtype, device=dev)
        if len(args) == 1 and isinstance(args[0], Size) or all(_is_int(a) for a in args):
            shape = tuple(args[0]) if isinstance(args[0], Size) else tuple(int(a) for a in args)
            if any(s < 0 for s in shape):
                bad = next(s for s in shape if s < 0)
                raise RuntimeError(f"Trying to create tensor with negative dimension {bad}: {list(shape)}")
            return empty(shape, dtype=cls.dtype, device=dev)
        if len(args) > 1:
            raise TypeError(f"{cls.__name__}(): expected sizes (ints), one sequence of data or a tensor, got "
                            f"{', '.join(type(a).__name__ for a in args)}")
        data = args[0]
        if isinstance(data, Tensor):
            if data.dtype is not cls.dtype or data.device.type != dev.type:
                raise TypeError(f"expected {_name(cls)} (got {data.type()})")
            return data.detach()
        if not isinstance(data, (list, tuple, np.ndarray)):
            raise TypeError(f"new(): data must be a sequence (got {type(data).__name__})")
        return tensor(data, dtype=cls.dtype, device=dev)

    def __repr__(cls) -> str:
        return f"<class '{_name(cls)}'>"


def _is_int(a) -> bool:
    return isinstance(a, (numbers.Integral, np.integer)) and not isinstance(a, (bool, np.bool_))


def _name(cls) -> str:
    return f"tritensor.{'cuda.' if cls.is_cuda else ''}{cls.__name__}"


def _device_of(cls, d) -> device:
    want = "cuda" if cls.is_cuda else "cpu"
    if d is None:
        return device("cuda") if cls.is_cuda else CPU
    dev = device(d)
    if dev.type != want:
        raise RuntimeError(f"legacy constructor expects device type: {want} but device type: {dev.type} was passed")
    return dev


def _make(d: dt.dtype, is_cuda: bool) -> tensortype:
    return tensortype(f"{d.type_name}Tensor", (), {"dtype": d, "is_cuda": is_cuda, "__slots__": (),
                                                     "__module__": "tritensor.cuda" if is_cuda else "tritensor",
                                                     "__doc__": f"{d} tensors in {'device' if is_cuda else 'host'} "
                                                                "memory (PyTorch's legacy type name)."})


CPU_TYPES = {d: _make(d, False) for d in dt.ALL}
CUDA_TYPES = {d: _make(d, True) for d in dt.ALL}

ByteTensor, CharTensor, ShortTensor, IntTensor, LongTensor = (CPU_TYPES[d] for d in dt.INTEGRAL)
HalfTensor, BFloat16Tensor, FloatTensor, DoubleTensor = (CPU_TYPES[d] for d in dt.FLOATING)
BoolTensor = CPU_TYPES[dt.bool_]


def _legacy_tensor(*args, **kwargs) -> Tensor:
    """``tritensor.Tensor(...)`` called as a constructor, as torch's: the legacy type of the default dtype
    (FloatTensor; DoubleTensor after ``set_default_dtype(float64)``) on the device's type."""
    dev = kwargs.pop("device", None)
    if kwargs:
        raise TypeError(f"Tensor(): got an unexpected keyword argument '{next(iter(kwargs))}'")
    if dev is None:  # torch's legacy constructor follows set_default_device, as its factories do
        dev = get_default_device()
    types = CUDA_TYPES if device(dev).type == "cuda" else CPU_TYPES
    return types[dt.get_default_dtype()](*args, device=dev)


register_legacy_constructor(_legacy_tensor)

__all__ = ["tensortype", "ByteTensor", "CharTensor", "ShortTensor", "IntTensor", "LongTensor", "HalfTensor",
           "BFloat16Tensor", "FloatTensor", "DoubleTensor", "BoolTensor"]
