"""Tensor's odd attributes that are no op and belong to no family: torch's predicates and properties about
what a tensor is (``layout``, ``is_meta``, ``name``, ``output_nr``, ``const_data_ptr``, ``is_set_to``,
``is_distributed``), sharing (``share_memory_``, ``is_shared``), ``as_subclass``, and the host-only
Python-callable maps ``apply_`` / ``map_`` / ``map2_``. The op table lists them in ``COMPOSITE_METHODS``.

``apply_`` and friends call a Python function per element, so they exist for CPU tensors only, as in
torch; they read the elements on the host, call the function, and write the results back with
``copy_``, so views and the version counter see the write as any in-place op's.
"""
from __future__ import annotations

import builtins
import math
import numbers
import warnings

import numpy as np

from ...runtime import dtype as dt
from ...runtime import memory
from . import host_tensor
from ..shape import _shape_arg, strided
from ..storage import TypedStorage, warn_typed_storage
from ..tensor_base import TensorBase, Version

__all__ = ["layout", "is_meta", "name", "output_nr", "const_data_ptr", "is_set_to", "is_distributed",
           "share_memory_", "is_shared", "as_subclass", "apply_", "map_", "map2_", "resize", "resize_as",
           "set_", "module_load", "storage"]


def _layout(self):
    """torch's Tensor.layout: ``torch.strided``, the only layout tritensor has."""
    return strided


def _is_meta(self) -> bool:
    """torch's Tensor.is_meta: False (tritensor has no meta device; every tensor has memory)."""
    return False


def _name(self):
    """torch's Tensor.name: the name autograd's Python bindings give a tensor, None for every tensor a user
    makes (torch sets it only on internal tensors of its graph)."""
    return None


def _output_nr(self) -> int:
    """torch's Tensor.output_nr: which output of its ``grad_fn`` this tensor is (0 for leaves and for
    tensors outside autograd)."""
    meta = self._autograd_meta
    return 0 if meta is None else int(getattr(meta, "output_nr", 0))


layout = property(_layout)
is_meta = property(_is_meta)
name = property(_name)
output_nr = property(_output_nr)


def const_data_ptr(self) -> int:
    """torch's Tensor.const_data_ptr: the address of the first element, for reading (``data_ptr``'s value)."""
    return self.data_ptr()


def is_set_to(self, tensor) -> bool:
    """torch's Tensor.is_set_to(tensor): whether both view the same storage with the same offset, sizes and
    strides."""
    if not isinstance(tensor, TensorBase):
        raise TypeError(f"is_set_to(): argument 'tensor' (position 1) must be Tensor, not {type(tensor).__name__}")
    return (self._storage is tensor._storage and self._offset == tensor._offset and self._shape == tensor._shape
            and self._stride == tensor._stride)


def is_distributed(self) -> bool:
    """torch's Tensor.is_distributed: False, as for every dense tensor in torch."""
    return False


def is_shared(self) -> bool:
    """torch's Tensor.is_shared: whether the memory can be handed to another process without a copy. CUDA
    memory is (torch says True for CUDA tensors); host memory is not until ``share_memory_`` moves it."""
    return self.device.type == "cuda"


def share_memory_(self):
    """torch's Tensor.share_memory_: tritensor's tensors cross processes by value (pickling copies the
    bytes; ``tritensor.multiprocessing`` says so), so there is no shared segment to move the storage
    into. It returns ``self`` unchanged for CUDA tensors, as torch, and refuses host tensors rather than
    claim a sharing that a write in another process would not see."""
    if self.device.type == "cuda":
        return self
    raise RuntimeError("share_memory_: tritensor has no shared-memory host storages: tensors sent to another "
                       "process are copied by value (see tritensor.multiprocessing)")


def as_subclass(self, cls):
    """torch's Tensor.as_subclass(cls): a ``cls`` instance viewing the same memory, still attached to the
    autograd graph (a recorded alias of ``self``)."""
    result_class = TensorBase._result_class
    if not isinstance(cls, type) or not issubclass(cls, result_class):
        raise TypeError("Creating a Tensor subclass from a class that does not inherit from Tensor is not "
                        "possible. Make sure your class inherits from Tensor.")
    alias = self.view_as(self)
    if cls is type(alias):
        return alias
    # A Python subclass adds a __dict__, so the alias cannot change class: a new instance takes its fields
    out = object.__new__(cls)
    for slot in TensorBase.__slots__:
        if slot != "__weakref__":
            setattr(out, slot, getattr(alias, slot))
    return out


def _resize(self, shape: tuple, where: str):
    numel = math.prod(shape)
    if numel != self.numel():
        raise RuntimeError(f"requested resize to {'x'.join(str(n) for n in shape)} ({numel} elements in total), but "
                           f"the given tensor has a size of {'x'.join(str(n) for n in self.shape)} ({self.numel()} "
                           "elements). autograd's resize can only change the shape of a given tensor, while "
                           "preserving the number of elements. ")
    warnings.warn(f"non-inplace {where} is deprecated", UserWarning, stacklevel=3)
    return self.reshape(shape)


def resize(self, *sizes):
    """torch's deprecated Tensor.resize(*sizes): the tensor with a new shape of the same number of elements
    (a recorded reshape, so it stays in the graph); warns as torch does."""
    return _resize(self, tuple(int(n) for n in _shape_arg(sizes, "size")), "resize")


def resize_as(self, tensor):
    """torch's deprecated Tensor.resize_as(tensor): ``resize`` to ``tensor``'s shape."""
    if not isinstance(tensor, TensorBase):
        raise TypeError(f"resize_as(): argument 'tensor' (position 1) must be Tensor, not {type(tensor).__name__}")
    return _resize(self, tuple(tensor.shape), "resize_as")


def storage(self):
    """torch's deprecated Tensor.storage(): the tensor's storage as a TypedStorage of its dtype (warns, as
    torch's; ``untyped_storage()`` is the bytes themselves)."""
    warn_typed_storage()
    return TypedStorage(wrap_storage=self._storage, dtype=self.dtype)


def module_load(self, other, assign=False):
    """torch's Tensor.module_load(other, assign=False): how ``load_state_dict`` turns a state-dict value into
    what replaces ``self``: ``other.detach()`` when assigning, else ``self.copy_(other).detach()``."""
    if not isinstance(other, TensorBase):
        raise TypeError(f"module_load(): argument 'other' must be Tensor, not {type(other).__name__}")
    return other.detach() if assign else self.copy_(other).detach()


_STORAGES = (memory.UntypedStorage, TypedStorage)
_SET_SIGNATURES = (" * ()\n * (torch.Storage source)\n * (torch.Storage source, int storage_offset, tuple of ints size, "
                   "tuple of ints stride = None)\n * (Tensor source)\n * (Tensor source, int storage_offset, tuple of "
                   "ints size, tuple of ints stride = None)")


def set_(self, source=None, storage_offset=None, size=None, stride=None):
    """torch's Tensor.set_: make ``self`` view other memory, in place. ``set_()`` gives it an empty storage;
    ``set_(tensor)`` shares the tensor's storage, offset, sizes and strides (and its version counter);
    ``set_(storage[, storage_offset, size, stride])`` views a storage (all of it as 1-D when only the
    storage is given; contiguous strides when ``stride`` is None). tritensor's storages do not grow in
    place, so a view past the storage's end is refused (torch's message for a storage it cannot resize)."""
    if self.requires_grad:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation."
                           if self.grad_fn is None else
                           "set_: tritensor does not record set_ for autograd; call it on a tensor that does not "
                           "require grad")
    if source is None:
        if storage_offset is not None or size is not None or stride is not None:
            raise TypeError("set_() received an invalid combination of arguments: storage_offset, size and stride "
                            "need a source")
        self._storage = memory.HostStorage(0) if self.device.type == "cpu" else _empty_like_storage(self)
        self._shape, self._stride, self._offset = type(self._shape)((0,)), (1,), 0
    elif isinstance(source, TensorBase) or isinstance(source, _STORAGES):
        if isinstance(source, TensorBase):
            if source.dtype is not self.dtype:
                raise RuntimeError(f"Could not set tensor of type {self.dtype.c_name} to a tensor of type "
                                   f"{source.dtype.c_name}")
            if source.requires_grad:
                raise RuntimeError("set_: the source requires grad; tritensor does not record set_ for autograd "
                                   "(pass source.detach())")
            storage = source._storage
            if storage_offset is None:
                self._storage, self._offset, self._shape, self._stride = (source._storage, source._offset,
                                                                           source._shape, source._stride)
                self.device = source.device
                self._version_counter = source._version_counter
                self._base = None
                self._version_counter.value += 1
                return self
        elif isinstance(source, TypedStorage):
            if source.dtype is not self.dtype:
                raise RuntimeError(f"Expected a Storage of type {self.dtype.c_name} but got type "
                                   f"{source.dtype.c_name} for argument #1 'source'")
            storage = source.untyped()
        else:
            storage = source
        if storage_offset is None:
            storage_offset, size, stride = 0, (storage.nbytes // self.dtype.itemsize,), (1,)
        _view_storage(self, storage, storage_offset, size, stride)
    else:
        raise TypeError(f"set_() received an invalid combination of arguments - got ({type(source).__name__}), but "
                        f"expected one of:\n{_SET_SIGNATURES}")
    self._base = None
    self._version_counter = Version()
    self._version_counter.value += 1
    return self


def _empty_like_storage(self):
    return TensorBase._empty((0,), self.dtype, self.device)._storage


def _view_storage(self, storage, storage_offset, size, stride) -> None:
    if not isinstance(storage_offset, int) or isinstance(storage_offset, bool):
        raise TypeError(f"set_(): argument 'storage_offset' must be int, not {type(storage_offset).__name__}")
    if storage_offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {storage_offset}")
    if size is None:
        raise TypeError("set_(): argument 'size' must be tuple of ints, not NoneType")
    shape = tuple(int(n) for n in _shape_arg((size,), "size"))
    if any(n < 0 for n in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: {list(shape)}")
    if stride is None:
        strides, acc = [], 1
        for n in reversed(shape):
            strides.append(acc)
            acc *= max(n, 1)
        strides = tuple(reversed(strides))
    else:
        strides = tuple(int(n) for n in _shape_arg((stride,), "stride"))
        if len(strides) != len(shape):
            raise RuntimeError(f"unequal size length ({len(shape)}) and stride length ({len(strides)})")
    item = self.dtype.itemsize
    span = 0 if 0 in shape else storage_offset + 1 + sum((n - 1) * st for n, st in zip(shape, strides))
    if span * item > storage.nbytes:
        raise RuntimeError(f"setStorage: sizes {list(shape)}, strides {list(strides)}, storage offset "
                           f"{storage_offset}, and itemsize {item} requiring a storage size of {span * item} are out "
                           f"of bounds for storage of size {storage.nbytes}")
    self._storage, self._offset, self._shape, self._stride = storage, storage_offset, type(self._shape)(shape), strides
    self.device = storage.device


def _host_only(self, where: str) -> None:
    if self.device.type != "cpu":
        raise RuntimeError(f"{where} is only implemented on CPU tensors")
    if self.requires_grad:
        raise RuntimeError(f"Can't call {where}() on Variable that requires grad. Use var.detach().{where}() "
                           "instead.")


def _scalar(value, d):
    if d is dt.bool_:
        return bool(value)
    if not isinstance(value, numbers.Real):
        raise TypeError(f"must be real number, not {type(value).__name__}")
    return float(value) if d.is_floating_point else int(value)


def _same_type(self, other, argname: str, where: str):
    if not isinstance(other, TensorBase):
        raise TypeError(f"{where}(): argument '{argname}' must be Tensor, not {type(other).__name__}")
    if other.dtype is not self.dtype:
        raise TypeError(f"{where}: expected {dt.tensor_type_name(self.dtype)} for '{argname}' (got "
                        f"{dt.tensor_type_name(other.dtype)})")
    host = other._to_host_array()
    try:
        return np.broadcast_to(host, tuple(self.shape))
    except ValueError:
        raise RuntimeError(f"The expanded size of the tensor ({list(self.shape)[-1] if self.dim() else 1}) must "
                           f"match the existing size ({list(other.shape)[-1] if other.dim() else 1}) at non-singleton "
                           f"dimension {self.dim() - 1}.  Target sizes: {list(self.shape)}.  Tensor sizes: "
                           f"{list(other.shape)}") from None


def _write_back(self, values: list):
    host = np.array(values, dtype=self.dtype.np).reshape(tuple(self.shape))
    self.copy_(host_tensor(host, self.device))
    return self


def apply_(self, callable):
    """torch's Tensor.apply_(callable): every element replaced by ``callable(element)``, in place (CPU only,
    slow: one Python call per element)."""
    _host_only(self, "apply_")
    if not builtins.callable(callable):
        raise TypeError(f"'{type(callable).__name__}' object is not callable")
    d = self.dtype
    return _write_back(self, [_scalar(callable(v), d) for v in self._to_host_array().reshape(-1).tolist()])


def map_(self, tensor, callable):
    """torch's Tensor.map_(tensor, callable): ``self[i] = callable(self[i], tensor[i])`` in place, ``tensor``
    broadcast to self's shape (CPU only)."""
    _host_only(self, "map_")
    other = _same_type(self, tensor, "other", "map_")
    if not builtins.callable(callable):
        raise TypeError(f"'{type(callable).__name__}' object is not callable")
    d = self.dtype
    pairs = zip(self._to_host_array().reshape(-1).tolist(), other.reshape(-1).tolist())
    return _write_back(self, [_scalar(callable(a, b), d) for a, b in pairs])


def map2_(self, x, y, callable):
    """torch's Tensor.map2_(x, y, callable): ``self[i] = callable(self[i], x[i], y[i])`` in place, ``x`` and
    ``y`` broadcast to self's shape (CPU only)."""
    _host_only(self, "map2_")
    a = _same_type(self, x, "x", "map2_")
    b = _same_type(self, y, "y", "map2_")
    if not builtins.callable(callable):
        raise TypeError(f"'{type(callable).__name__}' object is not callable")
    d = self.dtype
    triples = zip(self._to_host_array().reshape(-1).tolist(), a.reshape(-1).tolist(), b.reshape(-1).tolist())
    return _write_back(self, [_scalar(callable(s, p, q), d) for s, p, q in triples])

