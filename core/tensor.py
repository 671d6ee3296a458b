"""The Tensor: a typed, strided view of a storage on one device, with every op of the op table.

What a tensor *is* (storage, shape, strides, offset, dtype, version counter) lives in
``core/tensor_base.py``. This module adds the ops: every op method, in-place form and Python
operator is generated from the op table (``core/ops/table.py``) when the class is created, as
``dispatch.call(op, self, ...)`` (``core/dispatch.py``: autocast -> autograd -> core -> kernel);
nothing rebinds them later. The methods written out below are composites of those ops (flatten,
split, cuda(), half() ...) and host interop (numpy, item, repr).
"""
from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from . import composites, dispatch, dlpack, printing
from ..runtime import cuda, memory
from ..runtime import dtype as dt
from ..runtime.device import CPU, device
from .ops import fill, host_tensor, table
from .shape import (Size, _shape_arg, broadcast_shapes, contiguous_format, contiguous_strides,  # noqa: F401  (re-exported)
                    infer_size, normalize_dim, preserve_format, view_strides)
from .tensor_base import TensorBase


def _method(op, name: str):
    """``Tensor.<name>``: the op with ``self`` as its argument ``op.self_arg`` (and NumPy's names for
    ``dim``/``keepdim`` where the op has them, as torch's native methods)."""
    k = op.self_arg
    aliases = table.numpy_names(op.impl, op.name)
    if aliases:
        def method(self, *args, **kwargs):
            if kwargs:
                kwargs = table.rename_numpy_keywords(kwargs, aliases, name)
            return dispatch.call(op, self, *args, **kwargs)
    elif k == 0:
        def method(self, *args, **kwargs):
            return dispatch.call(op, self, *args, **kwargs)
    else:
        def method(self, *args, **kwargs):
            return dispatch.call(op, *args[:k], self, *args[k:], **kwargs)
    return _named(method, op, name)


def _reflected(op, name: str):
    """``__radd__`` and friends: ``other + self``."""
    def method(self, other):
        return dispatch.call(op, other, self)
    return _named(method, op, name)


def _named(fn, op, name: str):
    functools.update_wrapper(fn, op.impl)  # the core entry's signature and docstring
    fn.__name__, fn.__qualname__, fn.__module__ = name, f"Tensor.{name}", __name__
    return fn


def _api(name: str):
    """The accessor of a Tensor autograd API property (data, retains_grad): the autograd layer
    answers it (the API *methods*, backward, register_hook ..., come from the table like any op)."""
    op = table.OPS[name]

    def method(self, *args, **kwargs):
        return dispatch.call(op, self, *args, **kwargs)
    method.__name__, method.__qualname__ = name, f"Tensor.{name}"
    return method


def _op_methods(ops) -> dict:
    """Every method and operator the table declares for Tensor, by attribute name."""
    out = {}
    for op in ops.values():
        names = ((op.name,) + op.aliases) if op.method else ()
        for name in names + op.dunders:
            out[name] = _method(op, name)
        for name in op.rdunders:
            out[name] = _reflected(op, name)
    return out


# The generated methods, as a mixin class Tensor derives from (made once, here; never changed).
TensorOps = type("TensorOps", (), {"__slots__": (), "__module__": __name__, "__doc__":
                                   "Tensor's op methods and operators, generated from core/ops/table.py.",
                                   **_op_methods(table.OPS)})


class Tensor(TensorOps, TensorBase, results=True):
    __slots__ = ()

    # ----- autograd API (answered by the autograd layer; see core/dispatch.py) ------------------
    data = property(_api("get_data"), _api("set_data"))
    retains_grad = property(_api("retains_grad"))

    # ----- Python protocol ------------------------------------------------------------------------
    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._shape[0]))

    def __hash__(self):  # by identity, as torch (TensorOps' generated __eq__ would leave it None)
        return id(self)

    def __reduce_ex__(self, proto):
        """Pickle by value: the bytes, dtype, device and requires_grad. (The default would copy the
        storage's raw pointer, so the unpickled tensor would alias, or outlive, the original's memory.)"""
        raw = self._to_host_array().reshape(-1).view(np.uint8)
        return (_rebuild_tensor, (raw, tuple(self._shape), self.dtype.name, str(self.device),
                                  bool(self._requires_grad and self.grad_fn is None)))

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(f"Boolean value of Tensor with {self.numel()} elements is ambiguous")
        return bool(self.item())

    def __index__(self) -> int:
        if self.dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __float__(self) -> float:
        return float(self.item())

    # ----- composite views (made of view ops, so autograd records them) -------------------
    def view_as(self, other) -> "Tensor":
        return self.view(other.shape)

    def reshape_as(self, other) -> "Tensor":
        return self.reshape(other.shape)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> "Tensor":
        if self.ndim == 0:
            return self.reshape(1)
        s, e = normalize_dim(start_dim, self.ndim, "start_dim"), normalize_dim(end_dim, self.ndim, "end_dim")
        if s > e:
            raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
        shape = self._shape[:s] + (math.prod(self._shape[s : e + 1]),) + self._shape[e + 1 :]
        return self.reshape(shape)

    def unflatten(self, dim: int, sizes) -> "Tensor":
        d = normalize_dim(dim, self.ndim)
        sizes = tuple(sizes)
        if not sizes:
            raise RuntimeError("unflatten: sizes must be non-empty")
        if -1 not in sizes and math.prod(sizes) != self._shape[d]:
            raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {dim} "
                               f"({self._shape[d]}) in the input tensor")
        sizes = infer_size(sizes, self._shape[d])
        return self.view(self._shape[:d] + tuple(sizes) + self._shape[d + 1 :])

    # ----- composite shape ops: core/composites.py, made of recorded ops --------------------------
    @table.accepts_numpy_names
    def repeat_interleave(self, repeats, dim=None, *, output_size=None) -> "Tensor":
        return composites.repeat_interleave(self, repeats, dim, output_size)

    @table.accepts_numpy_names
    def tensor_split(self, indices_or_sections, dim: int = 0):
        return composites.tensor_split(self, indices_or_sections, dim)

    @table.accepts_numpy_names
    def diff(self, n: int = 1, dim: int = -1, prepend=None, append=None) -> "Tensor":
        return composites.diff(self, n, dim, prepend, append)

    def rot90(self, k: int = 1, dims=(0, 1)) -> "Tensor":
        return composites.rot90(self, k, dims)

    def t(self) -> "Tensor":
        if self.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
        return self.transpose(0, 1) if self.ndim == 2 else self


    @property
    def T(self) -> "Tensor":
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self) -> "Tensor":
        if self.ndim < 2:
            raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices")
        return self.transpose(-2, -1)


    def expand_as(self, other) -> "Tensor":
        return self.expand(other.shape)

    def broadcast_to(self, shape) -> "Tensor":
        return self.expand(shape)


    @table.accepts_numpy_names
    def unbind(self, dim: int = 0):
        d = normalize_dim(dim, self.ndim)
        return tuple(self.select(d, i) for i in range(self._shape[d]))

    def split(self, split_size, dim: int = 0):
        d = normalize_dim(dim, self.ndim)
        n = self._shape[d]
        if isinstance(split_size, int):
            if split_size <= 0:
                raise ValueError(f"split_size: expected a positive int, got {split_size}")
            sizes = [min(split_size, n - i) for i in range(0, n, split_size)] or [0]
        else:
            sizes = list(split_size)
            if sum(sizes) != n:
                raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n}, got {sizes}")
        out, start = [], 0
        for s in sizes:
            out.append(self.narrow(d, start, s))
            start += s
        return tuple(out)

    @table.accepts_numpy_names
    def chunk(self, chunks: int, dim: int = 0):
        d = normalize_dim(dim, self.ndim)
        return self.split(max(1, -(-self._shape[d] // chunks)), d)

    # ----- host interop -----------------------------------------------------------------------
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """A NumPy view that shares this CPU tensor's memory (PyTorch's semantics)."""
        if self.device.type != "cpu":
            if force:
                return self.cpu().numpy()
            raise TypeError(
                f"can't convert {self.device} device type tensor to numpy. "
                "Use Tensor.cpu() to copy the tensor to host memory first."
            )
        if self.requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        isz = self.dtype.itemsize
        buf = self._storage.bytes_view()
        if self.numel() == 0:
            return np.empty(self._shape, dtype=self.dtype.np)
        return np.ndarray(
            self._shape, dtype=self.dtype.np, buffer=buf, offset=self._offset * isz,
            strides=tuple(s * isz for s in self._stride),
        )

    def _to_host_array(self) -> np.ndarray:
        """A fresh, C-contiguous host copy (works on any device)."""
        if self.device.type == "cpu":
            return np.array(self.numpy(force=True), order="C")  # (ascontiguousarray makes 0-d arrays 1-d)
        src = self.contiguous()
        out = np.empty(self._shape, dtype=self.dtype.np)
        memory.device_to_host(out.reshape(-1).view(np.uint8), src.data_ptr(), cuda.current_stream(self.device.index))
        return out

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        return self._to_host_array().reshape(-1)[0].item()

    def tolist(self):
        a = self._to_host_array()
        if self.dtype is dt.bfloat16:
            a = a.astype(np.float32)
        return a.tolist()

    # ----- printing (torch's print rules live in core/printing.py) ---------------------------
    def __repr__(self) -> str:
        a = self._to_host_array()
        return printing.tensor_repr(self, a.astype(np.float32) if self.dtype is dt.bfloat16 else a)

    def __format__(self, format_spec: str) -> str:
        """A 0-d tensor formats as its number (``f"{loss:.4f}"``); others as ``object`` does, as torch."""
        if self.ndim == 0 and type(self) is Tensor:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    __str__ = __repr__

    # ----- interop (DLPack, NumPy's __array__, __cuda_array_interface__; core/dlpack.py) ----------------
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return dlpack.to_dlpack(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> tuple:
        return dlpack.dlpack_device(self)

    def __array__(self, dtype=None, copy=None):
        return dlpack.as_array(self, dtype, copy)

    def __array_wrap__(self, array, context=None, return_scalar=False):
        """A NumPy ufunc applied to a tensor (``np.exp(t)``) gives a tensor back, on this tensor's
        device, as torch's does (NumPy computed it from ``__array__``'s host array)."""
        return host_tensor(np.ascontiguousarray(np.asarray(array)), self.device)

    @property
    def __cuda_array_interface__(self) -> dict:
        return dlpack.cuda_array_interface(self)

    def pin_memory(self) -> "Tensor":
        """A copy of this CPU tensor in page-locked host memory (GPU mode), as torch."""
        if self.device.type != "cpu":
            raise RuntimeError(f"cannot pin '{self.device.type}' memory: only dense CPU tensors can be pinned")
        if not cuda.is_available():
            raise RuntimeError("Cannot access accelerator device when none is available.")
        if self.is_pinned():
            return self
        out = Tensor(memory.pinned_host_storage(self.nbytes), self._shape, contiguous_strides(self._shape), 0,
                     self.dtype)
        out.numpy(force=True)[...] = self.numpy(force=True)
        return out

    def is_pinned(self) -> bool:
        return self.device.type == "cpu" and self._storage.pinned

    # ----- copies, devices and dtypes (to/clone are ops; these compose them) ---------------
    def contiguous(self, memory_format=contiguous_format) -> "Tensor":
        """Itself when dense in ``memory_format``'s order (row-major by default), else a copy that is."""
        if self.is_contiguous(memory_format=memory_format):
            return self
        return self.clone(memory_format=memory_format)

    def cuda(self, device=None, non_blocking=False, memory_format=preserve_format) -> "Tensor":
        """A copy in device memory (itself when already there); ``non_blocking`` is accepted as
        PyTorch's: copies are ordered on the current stream either way."""
        return self.to(_cuda_device(device), non_blocking=non_blocking, memory_format=memory_format)

    def cpu(self) -> "Tensor":
        return self.to(CPU)

    def type(self, dtype=None, non_blocking=False, **kwargs):
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

    def half(self):
        return self.to(dt.float16)

    def bfloat16(self):
        return self.to(dt.bfloat16)

    def float(self):
        return self.to(dt.float32)

    def double(self):
        return self.to(dt.float64)

    def int(self):
        return self.to(dt.int32)

    def long(self):
        return self.to(dt.int64)

    def bool(self):
        return self.to(dt.bool_)

    def byte(self):
        return self.to(dt.uint8)

    def char(self):
        return self.to(dt.int8)

    def short(self):
        return self.to(dt.int16)

    def new_empty(self, *size, dtype=None, device=None):
        return Tensor._empty(_shape_arg(size), dtype or self.dtype, _dev(device, self.device))

    def new_zeros(self, *size, dtype=None, device=None):
        return self.new_full(_shape_arg(size), 0, dtype=dtype, device=device)

    def new_ones(self, *size, dtype=None, device=None):
        return self.new_full(_shape_arg(size), 1, dtype=dtype, device=device)

    def new_empty(self, *size, dtype=None, device=None):
        return TensorBase._empty(_shape_arg(size), dtype or self.dtype, _dev(device, self.device))

    def new_zeros(self, *size, dtype=None, device=None):
        return self.new_full(_shape_arg(size), 0, dtype=dtype, device=device)

    def new_ones(self, *size, dtype=None, device=None):
        return self.new_full(_shape_arg(size), 1, dtype=dtype, device=device)

    def new_full(self, size, fill_value, dtype=None, device=None):
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
        return self.fill_(0)


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


def _rebuild_tensor(raw, shape, dtype_name, device_str, requires_grad):
    """Unpickle a tensor (see ``Tensor.__reduce_ex__``): a fresh tensor owning a copy of the bytes."""
    arr = np.frombuffer(raw, dtype=np.uint8).view(dt._by_name(dtype_name).np).reshape(shape)
    out = host_tensor(arr, device(device_str))
    if requires_grad:
        out.requires_grad_(True)
    return out
