"""Tensor factories: ``tensor``, ``zeros``, ``ones``, ``empty``, ``full``, ``arange``, ``rand``,
``randn``, ``from_numpy``, the ``*_like`` forms, and the random seed."""
from __future__ import annotations

import math

import numpy as np

from ..triton_kernels import random as _rand
from ..runtime import dtype as dt
from ..runtime import memory
from . import ops as _ops
from ..runtime.device import CPU, device, device_or_default
from .generator import Generator, default_generator, resolve
from .shape import check_layout, contiguous_format, preserve_format, strided
from .tensor import Tensor, _shape_arg, contiguous_strides


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (one Philox stream shared by every device); returns it, as torch."""
    return default_generator.manual_seed(seed)


def initial_seed() -> int:
    """torch.initial_seed: the seed the default generator was last seeded with."""
    return default_generator.initial_seed()


def seed() -> int:
    """Seed the default generator from the operating system's entropy; returns the seed."""
    return default_generator.seed()


def _device(d) -> device:
    return device_or_default(d)


def _dtype(d, default=None) -> dt.dtype:
    if d is None:
        return default or dt.get_default_dtype()
    return dt.to_dtype(d)


def _finish(t: Tensor, requires_grad: bool, pin_memory: bool = False) -> Tensor:
    if pin_memory:  # PyTorch's pin_memory=True: page-locked host memory (a GPU must be there to lend it)
        t = t.pin_memory()
    if requires_grad:
        if not t.dtype.is_floating_point:
            raise RuntimeError("Only Tensors of floating point dtype can require gradients")
        t.requires_grad = True
    return t


def size_arg(args: tuple, size, op: str) -> tuple:
    """A factory's shape, given as ``*size`` (``zeros(2, 3)``, ``zeros((2, 3))``) or as PyTorch's
    keyword ``size=`` (``zeros(size=(2, 3))``), not both."""
    if size is None:
        return _shape_arg(args)
    if args:
        raise TypeError(f"{op}() got multiple values for argument 'size'")
    return _shape_arg((size,))


def empty(*args, size=None, dtype=None, layout=strided, device=None, requires_grad=False, pin_memory=False,
          memory_format=contiguous_format) -> Tensor:
    """torch.empty: an uninitialised tensor of ``size`` (given as ints or one sequence), in ``memory_format``
    for a 4-D size."""
    check_layout(layout, "empty")
    t = Tensor._empty(size_arg(args, size, "empty"), _dtype(dtype), _device(device))
    if memory_format is not contiguous_format:
        t = t.contiguous(memory_format=memory_format) if t.ndim == 4 else t
    return _finish(t, requires_grad, pin_memory)


def full(size, fill_value, dtype=None, device=None, requires_grad=False, *, layout=strided,
         pin_memory=False) -> Tensor:
    """torch.full: a tensor of ``size`` filled with ``fill_value``; its dtype, unless given, is the value's
    (bool, int64, or the default float dtype), as torch infers it."""
    if layout is not strided:  # the checks stay off the common path: full() seeds every backward
        check_layout(layout, "full")
    if dtype is None:
        dtype = dt.bool_ if isinstance(fill_value, bool) else (
            dt.int64 if isinstance(fill_value, (int, np.integer)) else dt.get_default_dtype())
    if not isinstance(fill_value, (bool, int, float, np.number)):
        raise TypeError(f"full(): fill_value must be a number, got {type(fill_value).__name__}")
    d = _dtype(dtype)
    if not d.is_floating_point or d in dt.FLOAT8:  # before any allocation: full((2,), 300, dtype=uint8) raises, as torch
        dt.check_fits(fill_value, d)
    t = Tensor._empty(_shape_arg((size,)), d, _device(device))
    _ops.fill(t, fill_value)  # a fresh tensor: no version bump, unlike fill_()
    return _finish(t, requires_grad, pin_memory)


def zeros(*args, size=None, dtype=None, layout=strided, device=None, requires_grad=False,
          pin_memory=False) -> Tensor:
    """torch.zeros: a tensor of ``size`` filled with 0 (the default float dtype unless given)."""
    return full(_shape_arg(args) if size is None else size_arg(args, size, "zeros"), 0, dtype=_dtype(dtype), device=device, requires_grad=requires_grad,
                layout=layout, pin_memory=pin_memory)


def ones(*args, size=None, dtype=None, layout=strided, device=None, requires_grad=False,
         pin_memory=False) -> Tensor:
    """torch.ones: a tensor of ``size`` filled with 1 (the default float dtype unless given)."""
    return full(_shape_arg(args) if size is None else size_arg(args, size, "ones"), 1, dtype=_dtype(dtype), device=device, requires_grad=requires_grad,
                layout=layout, pin_memory=pin_memory)


def _like(t: Tensor, dtype, device_, layout=None, op: str = "empty_like", memory_format=preserve_format):
    if not isinstance(t, Tensor):
        raise TypeError(f"input: expected a Tensor, got {type(t).__name__}")
    if layout is not None and layout is not strided:
        check_layout(layout, op)
    if memory_format is not preserve_format and memory_format is not contiguous_format:
        raise NotImplementedError(f"{op}(): memory_format={memory_format} is not supported; the result is "
                                  "row-major (contiguous_format)")
    return t.shape, (t.dtype if dtype is None else dt.to_dtype(dtype)), (t.device if device_ is None else device(device_))


def empty_like(t, dtype=None, device=None, requires_grad=False, *, layout=None, pin_memory=False,
               memory_format=preserve_format):
    """torch.empty_like: an uninitialised tensor with ``t``'s shape, dtype and device unless given, laid out
    as ``t`` by default (preserve_format)."""
    shape, d, dev = _like(t, dtype, device, layout, "empty_like", memory_format)
    return empty(shape, dtype=d, device=dev, requires_grad=requires_grad, pin_memory=pin_memory)


def zeros_like(t, dtype=None, device=None, requires_grad=False, *, layout=None, memory_format=preserve_format):
    """torch.zeros_like: zeros with ``t``'s shape, dtype and device unless given."""
    shape, d, dev = _like(t, dtype, device, layout, "zeros_like", memory_format)
    return zeros(shape, dtype=d, device=dev, requires_grad=requires_grad)


def ones_like(t, dtype=None, device=None, requires_grad=False, *, layout=None, memory_format=preserve_format):
    """torch.ones_like: ones with ``t``'s shape, dtype and device unless given."""
    shape, d, dev = _like(t, dtype, device, layout, "ones_like", memory_format)
    return ones(shape, dtype=d, device=dev, requires_grad=requires_grad)


def full_like(t, fill_value, dtype=None, device=None, requires_grad=False, *, layout=strided,
              memory_format=preserve_format):
    """torch.full_like: ``fill_value`` everywhere, with ``t``'s shape, dtype and device unless given."""
    shape, d, dev = _like(t, dtype, device, layout, "full_like", memory_format)
    return full(shape, fill_value, dtype=d, device=dev, requires_grad=requires_grad)


def rand_like(t, dtype=None, device=None, requires_grad=False, *, generator=None, layout=None,
              memory_format=preserve_format):
    """torch.rand_like: uniform samples in [0, 1) with ``t``'s shape, dtype and device unless given."""
    shape, d, dev = _like(t, dtype, device, layout, "rand_like", memory_format)
    return rand(shape, dtype=d, device=dev, requires_grad=requires_grad, generator=generator)


def randn_like(t, dtype=None, device=None, requires_grad=False, *, generator=None, layout=None,
               memory_format=preserve_format):
    """torch.randn_like: standard normal samples with ``t``'s shape, dtype and device unless given."""
    shape, d, dev = _like(t, dtype, device, layout, "randn_like", memory_format)
    return randn(shape, dtype=d, device=dev, requires_grad=requires_grad, generator=generator)


def _random(size, dtype, device_, normal: bool, requires_grad: bool, generator=None) -> Tensor:
    d = _dtype(dtype)
    gen = resolve(generator, "randn" if normal else "rand")
    if not d.is_floating_point:
        raise TypeError(f"{'randn' if normal else 'rand'}: dtype must be floating point, got {d}")
    t = Tensor._empty(_shape_arg(size), d, _device(device_))
    seed, off = gen._take(t.numel())
    _rand.random_(t, seed, off, normal)
    return _finish(t, requires_grad)


def rand(*args, size=None, generator=None, dtype=None, layout=strided, device=None, requires_grad=False,
         pin_memory=False) -> Tensor:
    """torch.rand: uniform samples in [0, 1) of ``size``, from ``generator`` (the default one unless given)."""
    check_layout(layout, "rand")
    return _finish(_random(size_arg(args, size, "rand"), dtype, device, False, requires_grad, generator), False,
                   pin_memory)


def randn(*args, size=None, generator=None, dtype=None, layout=strided, device=None, requires_grad=False,
          pin_memory=False) -> Tensor:
    """torch.randn: standard normal samples of ``size``, from ``generator`` (the default one unless given)."""
    check_layout(layout, "randn")
    return _finish(_random(size_arg(args, size, "randn"), dtype, device, True, requires_grad, generator), False,
                   pin_memory)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False, *, layout=strided) -> Tensor:
    """torch.arange: ``start, start + step, ...`` up to ``end`` (excluded); int64 when every bound is an
    integer, else the default float dtype, as torch infers it."""
    check_layout(layout, "arange")
    if end is None:
        start, end = 0, start
    for name, v in (("start", start), ("end", end), ("step", step)):
        if isinstance(v, Tensor):
            v = v.item()
        if not isinstance(v, (int, float, np.number)) or isinstance(v, bool):
            raise TypeError(f"arange: {name} must be a number, got {type(v).__name__}")
    if step == 0:
        raise RuntimeError("arange: step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(f"arange: upper bound and larger bound inconsistent with step sign (start={start}, end={end}, step={step})")
    if dtype is None:
        dtype = dt.int64 if all(isinstance(v, (int, np.integer)) for v in (start, end, step)) else dt.get_default_dtype()
    dt.refuse_barebones(_dtype(dtype), f"arange_{_device(device).type}")
    n = max(0, math.ceil((end - start) / step))
    t = Tensor._empty((n,), _dtype(dtype), _device(device))
    _rand.arange(t, start, step)
    return _finish(t, requires_grad)


def from_numpy(a: np.ndarray) -> Tensor:
    """A CPU tensor sharing ``a``'s memory, as ``torch.from_numpy``."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"from_numpy: expected np.ndarray, got {type(a).__name__}")
    d = dt.from_numpy_dtype(a.dtype, "from_numpy")
    if any(s < 0 for s in a.strides):
        raise ValueError("from_numpy: at least one stride in the given numpy array is negative; "
                         "copy it first (np.ascontiguousarray)")
    if any(s % a.itemsize for s in a.strides):
        raise ValueError(f"from_numpy: strides {a.strides} are not multiples of the element size {a.itemsize}")
    span = (sum((n - 1) * s for n, s in zip(a.shape, a.strides)) + a.itemsize) if a.size else 0
    storage = memory.HostStorage(span, owner=a, ptr=a.ctypes.data)
    return Tensor(storage, a.shape, tuple(s // a.itemsize for s in a.strides), 0, d)


def _infer_dtype(obj) -> dt.dtype:
    flat = list(_flatten(obj))
    if flat and all(isinstance(v, (bool, np.bool_)) for v in flat):
        return dt.bool_
    if all(isinstance(v, (bool, int, np.integer, np.bool_)) for v in flat) and flat:
        return dt.int64
    return dt.get_default_dtype()


def _flatten(obj):
    if isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _flatten(o)
    else:
        yield obj


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested lists, numbers, NumPy arrays, Tensors)."""
    if isinstance(data, Tensor):
        src = data.detach() if hasattr(data, "detach") else data
        out = src.to(device=_device(device) if device is not None else src.device, dtype=_dtype(dtype, src.dtype), copy=True)
        return _finish(out, requires_grad)
    if isinstance(data, np.ndarray):
        d = _dtype(dtype, dt.from_numpy_dtype(data.dtype, "data"))
        arr = np.array(data, order="C")  # a copy; keeps 0-d arrays 0-d
    else:
        for v in _flatten(data):
            if isinstance(v, Tensor):
                v = v.item()
            if not isinstance(v, (bool, int, float, np.number, np.bool_)):
                raise TypeError(f"tensor(): could not infer dtype of {type(v).__name__}")
        d = _dtype(dtype, _infer_dtype(data))
        if not d.is_floating_point and d is not dt.bool_:  # PyTorch's overflow check, before the cast
            for v in _flatten(data):
                v = v.item() if isinstance(v, Tensor) else v
                if d is dt.uint64 and isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
                    # Python ints go to uint64 whole (an int64 holds only half its range), as torch's
                    if v < 0 or v >= 2**64:
                        raise OverflowError("can't convert negative int to unsigned" if v < 0 else
                                            "int too big to convert")
                else:
                    dt.check_fits(v, d, c_type=False)
        host = np.float64 if d.is_floating_point else (np.bool_ if d is dt.bool_ else np.int64)
        if d is dt.uint64 and not any(isinstance(v, (float, np.floating)) for v in _flatten(data)):
            host = np.uint64
        try:
            arr = np.array(data, dtype=host)
        except ValueError as e:
            raise ValueError(f"tensor(): data is not rectangular (ragged nested sequence): {e}") from None
    if arr.dtype != d.np:
        arr = _host_cast(arr, d)
    out = Tensor._empty(arr.shape, d, CPU)
    out.numpy(force=True)[...] = arr
    if _device(device) != CPU:
        out = out.to(_device(device))
    return _finish(out, requires_grad, pin_memory)


def _host_cast(arr: np.ndarray, d: dt.dtype) -> np.ndarray:
    """Convert host data to ``d`` through the cast kernel, so conversions match the GPU's."""
    src = from_numpy(np.array(arr, order="C")) if arr.dtype in [x.np for x in dt.ALL] else from_numpy(arr.astype(np.float64))
    dst = Tensor._empty(arr.shape, d, CPU)
    _ops.copy_into(dst, src)
    return dst.numpy(force=True)
