"""``TensorBase``: what a tensor *is* (storage, shape, strides, offset, dtype, version), with no ops.

The op entries in ``core/ops`` check, allocate and launch kernels on tensors; ``core/tensor.py``
builds the public :class:`~tritensor.core.tensor.Tensor` from the op table, which imports those
entries. So the entries cannot import ``Tensor`` (that would be a cycle): they import this base
instead, test ``isinstance(x, TensorBase)`` and allocate with ``TensorBase._empty``, which makes
a ``Tensor`` (the class that subclasses this one in ``core/tensor.py`` registers itself as the
class results are made of, when it is created).

Views share the version counter of the storage they see, so in-place writes through any view are
visible to whoever saved the tensor (autograd checks this).
"""
from __future__ import annotations

import math
import operator
import threading

import numpy as np

from ..runtime import cuda, memory
from ..runtime.device import device
from .shape import (Size, channels_last, channels_last_strides, contiguous_format, contiguous_strides,
                    is_channels_last, normalize_dim)


class Version:
    """A storage's version counter, shared by all views of it (bumped by every in-place write).

    It starts at the class's 0 and has no ``__init__``: every new tensor makes one, and a call
    of a Python ``__init__`` would cost more than the rest of it."""

    value = 0


class _InferenceState(threading.local):
    """Whether ``tritensor.inference_mode`` is on in this thread (autograd/grad_mode.py sets it):
    tensors made while it is are inference tensors. Kept here because tensors are made here."""

    enabled = False


inference_state = _InferenceState()


_cuda_local = cuda._local  # per thread: ``current``, the current device's current stream once asked
_new_tensor = object.__new__
_contiguous: dict = {}  # shape (as given) -> (Size, contiguous strides, numel)
_CONTIGUOUS_KEPT = 4096


def _contiguous_layout(shape):
    """Check a shape for ``_empty`` and lay it out contiguously; remember it (hashable shapes)."""
    size = Size(int(s) for s in shape)
    for s in size:
        if s < 0:
            raise RuntimeError(f"negative dimension {s} in shape {list(size)}")
    layout = (size, contiguous_strides(size), math.prod(size))
    if isinstance(shape, tuple) and all(type(s) is int for s in shape):
        if len(_contiguous) >= _CONTIGUOUS_KEPT:
            _contiguous.clear()
        _contiguous[shape] = layout
    return layout


_LEGACY = object()  # an argument torch.Tensor(...) left out
# What a legacy constructor call passes first (data, a size, a tensor to alias); core passes a storage.
_LEGACY_ARGS = (list, tuple, int, np.integer, np.ndarray)
# The legacy constructor, FloatTensor's rules for the default dtype: core/tensor_types.py, above this
# module, registers it (register_legacy_constructor), as the layers above core register theirs.
_legacy_constructor = [None]


def register_legacy_constructor(fn) -> None:
    """Sets what ``Tensor(data)`` / ``Tensor(*sizes)`` / ``Tensor()`` build (``core/tensor_types.py``)."""
    _legacy_constructor[0] = fn


class TensorBase:
    """What a tensor is, without its ops: a storage, shape, strides (in elements), offset, dtype and device, a
    version counter shared by views, and autograd's per-tensor fields; the class ops allocate (Tensor) is
    set when core/tensor.py creates it."""
    __slots__ = (
        "_storage", "_shape", "_stride", "_offset", "dtype", "device", "_version_counter",
        "_base", "_requires_grad", "grad", "grad_fn", "_hooks", "_post_acc_hooks", "_autograd_meta", "_inference",
        "__weakref__",
    )
    _result_class = None  # the class ops allocate: Tensor, set when core/tensor.py creates it

    def __init_subclass__(cls, results: bool = False, **kwargs):
        super().__init_subclass__(**kwargs)
        if results:
            if TensorBase._result_class is not None:
                raise TypeError(f"{cls.__name__}: ops already allocate {TensorBase._result_class.__name__}")
            TensorBase._result_class = cls

    def __init__(self, storage=_LEGACY, shape=_LEGACY, stride=_LEGACY, offset=_LEGACY, dtype_=_LEGACY, base=None,
                 *sizes, device=None):
        # _empty makes most tensors without this call: a slot added here is set there too.
        if storage is _LEGACY or isinstance(storage, _LEGACY_ARGS) or isinstance(storage, TensorBase):
            # torch.Tensor(data), Tensor(*sizes), Tensor(): torch's legacy constructor, never one of core's
            # own constructions (they pass a storage), answered by the legacy type of the default dtype
            args = [a for a in (storage, shape, stride, offset, dtype_) if a is not _LEGACY]
            args += [] if base is None and not sizes else [base, *sizes]
            src = _legacy_constructor[0](*args, device=device)
            storage, shape, stride, offset, dtype_, base = src._storage, src._shape, src._stride, src._offset, \
                src.dtype, src._base
        self._storage = storage
        self._shape = shape if type(shape) is Size else Size(shape)
        self._stride = stride if type(stride) is tuple else tuple(stride)
        self._offset = offset if type(offset) is int else int(offset)
        self.dtype = dtype_
        self.device = storage.device
        self._base = base
        self._version_counter = base._version_counter if base is not None else Version()
        self._requires_grad = False
        self._autograd_meta = None  # autograd's per-tensor extras (output_nr, grad accumulator, retain_grad)
        self.grad = None
        self.grad_fn = None
        self._hooks = None
        self._post_acc_hooks = None
        self._inference = inference_state.enabled

    # ----- construction -----------------------------------------------------------------------
    @staticmethod
    def _empty(shape, dtype_, dev):
        """A new, uninitialised, contiguous Tensor of ``shape`` on ``dev``."""
        layout = _contiguous.get(shape) if isinstance(shape, tuple) else None  # seen before: checked, laid out
        if layout is None:
            layout = _contiguous_layout(shape)
        size, strides, numel = layout
        nbytes = numel * dtype_.itemsize
        if dev.type == "cpu":
            storage = memory.HostStorage(nbytes)
        else:
            idx = dev.index
            if idx is None:  # "cuda": the current device
                idx = cuda.current_device()
                dev = device("cuda", idx)
            # The current stream as cuda.current_stream reads it first (its thread-local), without its call.
            stream = getattr(_cuda_local, "current", None)
            if stream is None or stream.device.index != idx:
                stream = cuda.current_stream(idx)
            storage = memory.CudaStorage(nbytes, dev, stream)
        # __init__'s assignments without its call (every op's output comes here); a new tensor's
        # layout is already a Size and a tuple of ints, and it has no base.
        t = _new_tensor(TensorBase._result_class)
        t._storage, t._shape, t._stride, t._offset = storage, size, strides, 0
        t.dtype, t.device = dtype_, storage.device
        t._base = t._autograd_meta = t.grad = t.grad_fn = t._hooks = t._post_acc_hooks = None
        t._version_counter, t._requires_grad, t._inference = Version(), False, inference_state.enabled
        return t

    @staticmethod
    def _empty_channels_last(shape, dtype_, dev):
        """A new, uninitialised 4-D Tensor of ``shape`` (NCHW) laid out channels-last (NHWC)."""
        t = TensorBase._empty(shape, dtype_, dev)
        t._stride = channels_last_strides(t._shape)
        return t

    @staticmethod
    def _empty_like_format(like, shape, dtype_, dev):
        """A new tensor laid out as ``like`` is when that is channels-last (PyTorch's
        ``suggest_memory_format``: an op's output keeps its input's format), else contiguous."""
        if len(shape) == 4 and like._stride != like._contiguous_strides() and is_channels_last(like._shape, like._stride):
            return TensorBase._empty_channels_last(shape, dtype_, dev)
        return TensorBase._empty(shape, dtype_, dev)

    def _contiguous_strides(self) -> tuple:
        layout = _contiguous.get(self._shape)
        return layout[1] if layout is not None else contiguous_strides(self._shape)

    # Where the kernel-buffer protocol's storage, offset and dtype are kept: the GPU launch path reads
    # them directly (``runtime/launch.py``), without a call per tensor argument.
    __kernel_pointer__ = ("_storage", "_offset", "dtype")

    def __kernel_buffer__(self):
        """The kernel-buffer protocol ``runtime.launch.launch`` passes by pointer (see its docstring)."""
        return self._storage, self._offset, self._shape, self._stride, self.dtype

    def _view(self, shape, stride, offset=None):
        """A tensor of the result class over the same storage (and version counter), made as
        ``_empty`` makes one: ``__init__``'s assignments without its call (every view op comes here)."""
        base = self._base if self._base is not None else self
        offset = self._offset if offset is None else offset
        storage = self._storage
        t = _new_tensor(TensorBase._result_class)
        t._storage, t._shape = storage, shape if type(shape) is Size else Size(shape)
        t._stride = stride if type(stride) is tuple else tuple(stride)
        t._offset = offset if type(offset) is int else int(offset)
        t.dtype, t.device, t._base, t._version_counter = self.dtype, storage.device, base, base._version_counter
        t._autograd_meta = t.grad = t.grad_fn = t._hooks = t._post_acc_hooks = None
        t._requires_grad, t._inference = False, inference_state.enabled
        return t

    # ----- autograd flags (the engine is tritensor/autograd) ---------------------------------
    @property
    def requires_grad(self) -> bool:
        """torch's Tensor.requires_grad: whether autograd records ops on this tensor; set only on leaves, and
        only for floating dtypes."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value) -> None:
        """torch's Tensor.requires_grad: whether autograd records ops on this tensor; set only on leaves, and
        only for floating dtypes."""
        if not value and self.grad_fn is not None:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a computed "
                "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach()."
            )
        if value and not self.dtype.is_floating_point:
            raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")
        if value and self._inference and not inference_state.enabled:
            raise RuntimeError("Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.")
        self._requires_grad = bool(value)

    @property
    def is_leaf(self) -> bool:
        """True for tensors no recorded op made: user-created ones and those that need no grad."""
        return self.grad_fn is None

    def is_inference(self) -> bool:
        """True for a tensor made inside ``tritensor.inference_mode()``."""
        return self._inference

    def requires_grad_(self, requires_grad: bool = True):
        """torch's Tensor.requires_grad_: set requires_grad in place and return the tensor."""
        self.requires_grad = requires_grad  # the property checks leaf-ness and dtype
        return self

    # ----- metadata ---------------------------------------------------------------------------
    # The most read attribute of all: a property whose getter is C code (no Python call). The
    # annotation gives the type a C getter cannot declare (tools/stubs.py reads it).
    shape: Size = property(operator.attrgetter("_shape"), doc="The tensor's size, a ``Size``.")

    def size(self, dim=None):
        """torch's Tensor.size: the shape (a Size), or the size of dim ``dim``."""
        return self._shape if dim is None else self._shape[normalize_dim(dim, self.ndim)]

    def stride(self, dim=None):
        """torch's Tensor.stride: the strides in elements, or the stride of dim ``dim``."""
        return self._stride if dim is None else self._stride[normalize_dim(dim, self.ndim)]

    def storage_offset(self) -> int:
        """torch's Tensor.storage_offset: the first element's offset in the storage, in elements."""
        return self._offset

    @property
    def ndim(self) -> int:
        """torch's Tensor.ndim: the number of dims."""
        return len(self._shape)

    def dim(self) -> int:
        """torch's Tensor.dim: the number of dims."""
        return len(self._shape)

    def numel(self) -> int:
        """torch's Tensor.numel: the number of elements."""
        return math.prod(self._shape)

    nelement = numel

    def element_size(self) -> int:
        """torch's Tensor.element_size: bytes per element."""
        return self.dtype.itemsize

    @property
    def itemsize(self) -> int:
        """torch's Tensor.itemsize: bytes per element."""
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """torch's Tensor.nbytes: bytes the elements take (numel times itemsize; a view's, not its storage's)."""
        return self.numel() * self.dtype.itemsize

    @property
    def is_cuda(self) -> bool:
        """torch's Tensor.is_cuda: whether the tensor is on a CUDA device."""
        return self.device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        """torch's Tensor.is_cpu: whether the tensor is in host memory."""
        return self.device.type == "cpu"

    def get_device(self) -> int:
        """The CUDA device index, -1 on the CPU (torch's)."""
        return -1 if self.device.type == "cpu" else int(self.device.index or 0)

    def is_floating_point(self) -> bool:
        """torch's Tensor.is_floating_point: whether the dtype is a floating one."""
        return self.dtype.is_floating_point

    def data_ptr(self) -> int:
        """torch's Tensor.data_ptr: the address of the first element (host or device)."""
        return self._storage.data_ptr() + self._offset * self.dtype.itemsize

    def untyped_storage(self):
        """torch's Tensor.untyped_storage: the storage (bytes) this tensor views."""
        return self._storage

    def record_stream(self, stream) -> None:
        """Mark the memory as in use by ``stream``: its free waits for work queued there."""
        self._storage.record_stream(stream)

    # Read by every saved tensor and every gradient edge: a C getter (no Python call), as ``shape``.
    _version: int = property(operator.attrgetter("_version_counter.value"),
                             doc="How many in-place writes the memory has seen (shared by all views).")

    def _bump_version(self) -> None:
        self._version_counter.value += 1

    def is_contiguous(self, memory_format=contiguous_format) -> bool:
        """Whether the elements are dense in ``memory_format``'s order (row-major by default)."""
        if memory_format is channels_last:
            return is_channels_last(self._shape, self._stride) if self.ndim == 4 else False
        if memory_format is not contiguous_format:
            raise RuntimeError(f"is_contiguous(): memory_format must be tritensor.contiguous_format or "
                               f"tritensor.channels_last, got {memory_format!r}")
        expected = 1
        for n, s in zip(reversed(self._shape), reversed(self._stride)):
            if n == 0:
                return True
            if n != 1 and s != expected:
                return False
            expected *= n
        return True
