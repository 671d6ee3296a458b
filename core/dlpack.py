"""DLPack in and out, ``__cuda_array_interface__``: zero-copy exchange with NumPy, PyTorch, CuPy,
JAX ...

Out: ``Tensor.__dlpack__`` builds a ``DLManagedTensor`` (ctypes) describing the tensor's memory
and wraps it in a ``"dltensor"`` PyCapsule. The struct's ``manager_ctx`` is an entry in
:data:`_exported`, which holds the *tensor* (so its storage) until the consumer calls the
deleter, or until the capsule is abandoned unconsumed: a consumer's array stays valid after the
tensor and every other reference to its memory are gone (the use-after-free the runtime's
``_Borrowed`` keep-alive exists to prevent).

The capsule has no destructor, and the entry holds a reference to it until then. A destructor
would have to be Python (a ctypes callback), and a consumer often drops the capsule with its own
error set (NumPy refusing bf16): Python run there loses that error (the consumer then returns NULL
with none set, a ``SystemError``) and fails itself, releasing nothing. C producers save and restore
the error around the deleter; Python cannot. So no Python runs when a consumer drops a capsule:
:func:`_sweep` finds capsules only the entry still holds and never consumed, and releases them,
at the next export or import and after each garbage collection.

In: :func:`from_dlpack` takes an object with ``__dlpack__`` or a capsule, renames the capsule
``"used_dltensor"`` (the protocol's "consumed" mark) and wraps the memory in a storage whose owner
calls the producer's deleter when the last tensor or view of it is collected. Host memory
becomes a ``HostStorage`` borrowing it (``runtime/memory.py``'s ``_Borrowed``); device memory a
:class:`_ForeignCudaStorage`.
"""
from __future__ import annotations

import ctypes
import gc
import itertools
import math
import sys
import threading

import numpy as np

from ..runtime import cuda, memory
from ..runtime import dtype as dt
from ..runtime.device import device
from .tensor_base import TensorBase

kDLCPU, kDLCUDA, kDLCUDAHost = 1, 2, 3
kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLBool = 0, 1, 2, 4, 6


class DLDevice(ctypes.Structure):
    """DLPack's ``DLDevice``: a device type (kDLCPU, kDLCUDA ...) and its index, as dlpack.h lays it out."""
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    """DLPack's ``DLDataType``: a type code (int, uint, float, bfloat, bool), its bits and lanes."""
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    """DLPack's ``DLTensor``: a data pointer, device, dtype, shape and strides (in elements) and a byte
    offset."""
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    """DLPack's legacy (unversioned) capsule payload: a DLTensor, its owner's context and the deleter that
    releases it."""
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter)]


class DLPackVersion(ctypes.Structure):
    """DLPack's ``DLPackVersion``: the major and minor version a versioned capsule was made for."""
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    """DLPack 1.x's capsule payload: a version, its owner's context, the deleter, flags (read-only, copied)
    and a DLTensor."""
    pass


_DeleterV = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", _DeleterV), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]
DLPACK_FLAG_BITMASK_READ_ONLY = 1
# capsule name -> (struct, name once consumed); 1.0 capsules carry flags (read-only ...), legacy ones do not,
# so NumPy makes arrays from legacy capsules read-only: we export 1.0 whenever the consumer takes it.
_KINDS = {b"dltensor": (DLManagedTensor, b"used_dltensor"),
          b"dltensor_versioned": (DLManagedTensorVersioned, b"used_dltensor_versioned")}

_CODES = {dt.float32: (kDLFloat, 32), dt.float64: (kDLFloat, 64), dt.float16: (kDLFloat, 16),
          dt.bfloat16: (kDLBfloat, 16), dt.int32: (kDLInt, 32), dt.int64: (kDLInt, 64), dt.bool_: (kDLBool, 8),
          dt.uint8: (kDLUInt, 8), dt.int8: (kDLInt, 8), dt.int16: (kDLInt, 16),
          dt.uint16: (kDLUInt, 16), dt.uint32: (kDLUInt, 32), dt.uint64: (kDLUInt, 64)}
_DTYPES = {v: k for k, v in _CODES.items()}

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = (ctypes.py_object, ctypes.c_char_p)
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = (ctypes.py_object, ctypes.c_char_p)
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = (ctypes.py_object, ctypes.c_char_p)

_lock = threading.Lock()
# manager_ctx -> (tensor, managed struct, shape/stride arrays, capsule name, capsule): the keep-alive
_exported: dict[int, tuple] = {}
_ids = itertools.count(1)


def _release(managed) -> None:
    """The producer's deleter: the consumer is done, the tensor may go."""
    with _lock:
        _exported.pop(managed.contents.manager_ctx, None)


_delete_exported = _Deleter(_release)
_delete_exported_v = _DeleterV(_release)


def _sweep(blocking: bool = True) -> None:
    """Release the tensors of capsules nobody but :data:`_exported` holds and nobody consumed: no one
    can consume them any more (a consumed capsule's tensor waits for the consumer's deleter call)."""
    if not _lock.acquire(blocking):
        return  # a collection while this thread exports: the next sweep does it
    try:
        # getrefcount: the entry's reference and the call's own argument
        dead = [ctx for ctx, entry in _exported.items()
                if sys.getrefcount(entry[5]) <= 2 and _api.PyCapsule_IsValid(entry[5], entry[4])]
        gone = [_exported.pop(ctx) for ctx in dead]
    finally:
        _lock.release()
    del gone  # tensors and capsules (no destructor) freed outside the lock


def _after_collection(phase, info) -> None:
    if phase == "stop" and _exported:
        _sweep(blocking=False)


gc.callbacks.append(_after_collection)


def live_exports() -> int:
    """How many exported capsules still hold their tensor (for lifetime tests)."""
    _sweep()
    return len(_exported)


def dlpack_device(t: TensorBase) -> tuple[int, int]:
    """``Tensor.__dlpack_device__``: (kDLCPU, 0) for a CPU tensor, (kDLCUDA, index) for a device tensor."""
    if t.device.type == "cpu":
        return (kDLCPU, 0)
    return (kDLCUDA, t.device.index if t.device.index is not None else cuda.current_device())


def to_dlpack(t: TensorBase, *, stream=None, max_version=None, dl_device=None, copy=None):
    """The capsule ``Tensor.__dlpack__`` returns: DLPack 1.0 (``"dltensor_versioned"``, writable) when
    the consumer's ``max_version`` allows, else a legacy ``"dltensor"``."""
    if t.requires_grad:
        raise RuntimeError("Can't export tensors that require gradient, use tensor.detach()")
    if t.dtype not in _CODES:
        raise BufferError(f"__dlpack__: dtype {t.dtype} has no DLPack type")
    if dl_device is not None and tuple(dl_device) != dlpack_device(t):
        raise BufferError(f"__dlpack__: cannot export a {t.device} tensor to DLPack device {tuple(dl_device)} "
                          "without a copy; move it first (tensor.to(...))")
    if copy:
        t = t.clone()
    if t.device.type == "cpu":
        if stream is not None and stream != -1:
            raise BufferError(f"__dlpack__: stream must be None for a CPU tensor, got {stream!r}")
    elif stream != -1:
        # The consumer reads on its own stream: the work queued on ours must be done first.
        cuda.current_stream(t.device.index).synchronize()
    _sweep()
    ctx = next(_ids)
    versioned = max_version is not None and tuple(max_version)[0] >= 1
    managed = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    shape = (ctypes.c_int64 * max(t.ndim, 1))(*t.shape)
    strides = (ctypes.c_int64 * max(t.ndim, 1))(*t.stride())
    tensor = managed.dl_tensor
    tensor.data = t.data_ptr() if t.numel() else t.untyped_storage().data_ptr()
    tensor.device = DLDevice(*dlpack_device(t))
    tensor.ndim = t.ndim
    tensor.dtype = DLDataType(*_CODES[t.dtype], 1)
    tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    tensor.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
    tensor.byte_offset = 0
    managed.manager_ctx = ctx
    if versioned:
        managed.version = DLPackVersion(1, 0)
        managed.flags = 0  # writable, not a copy
        managed.deleter = _delete_exported_v
    else:
        managed.deleter = _delete_exported
    name = b"dltensor_versioned" if versioned else b"dltensor"
    capsule = _api.PyCapsule_New(ctypes.addressof(managed), name, None)  # no destructor: see the module's doc
    with _lock:
        _exported[ctx] = (t, managed, shape, strides, name, capsule)
    return capsule


class _DLPackOwner:
    """Holds a consumed ``DLManagedTensor``; calls its producer's deleter when collected."""

    __slots__ = ("managed", "capsule", "__weakref__")

    def __init__(self, managed, capsule):
        self.managed, self.capsule = managed, capsule

    def __del__(self):
        deleter = self.managed.contents.deleter
        if deleter:
            deleter(self.managed)


class _ForeignCudaStorage:
    """Device memory another library allocated (imported through DLPack): never freed here; its
    owner releases it to the producer when the last tensor viewing it is gone."""

    __slots__ = ("nbytes", "device", "_ptr", "_owner", "__weakref__")

    def __init__(self, nbytes: int, dev: device, ptr: int, owner):
        self.nbytes, self.device, self._ptr, self._owner = int(nbytes), dev, int(ptr), owner

    def data_ptr(self) -> int:
        return self._ptr

    def record_stream(self, stream) -> None:  # the producer orders its own frees
        pass

    def __reduce__(self):
        raise TypeError("a CUDA storage cannot be pickled or copied on its own (it is a device address); "
                        "pickle or deepcopy the tensor, which copies its values")


def from_dlpack(ext) -> TensorBase:
    """A tensor sharing the memory of ``ext`` (an object with ``__dlpack__``, or a DLPack capsule):
    ``tritensor.from_dlpack(np_array)`` writes through to the array and back."""
    _sweep()
    if hasattr(ext, "__dlpack__"):
        dev_type, dev_id = ext.__dlpack_device__() if hasattr(ext, "__dlpack_device__") else (kDLCPU, 0)
        kwargs = {"stream": cuda.current_stream(int(dev_id)).cuda_stream} if int(dev_type) == kDLCUDA else {}
        try:
            capsule = ext.__dlpack__(max_version=(1, 0), **kwargs)
        except TypeError:  # a producer from before DLPack 1.0
            capsule = ext.__dlpack__(**kwargs)
    else:
        capsule = ext
    kind = None
    if type(capsule).__name__ == "PyCapsule":
        kind = next((n for n in _KINDS if _api.PyCapsule_IsValid(capsule, n)), None)
        if kind is None and any(_api.PyCapsule_IsValid(capsule, used) for _, used in _KINDS.values()):
            raise BufferError("from_dlpack: this DLPack capsule was already consumed")
    if kind is None:
        raise TypeError(f"from_dlpack: expected an object with __dlpack__ or a DLPack capsule, "
                        f"got {type(ext).__name__}")
    struct, used_name = _KINDS[kind]
    managed = ctypes.cast(_api.PyCapsule_GetPointer(capsule, kind), ctypes.POINTER(struct))
    if kind == b"dltensor_versioned" and managed.contents.version.major > 1:
        raise BufferError(f"from_dlpack: DLPack version {managed.contents.version.major}."
                          f"{managed.contents.version.minor} is newer than the 1.x this reads")
    readonly = kind == b"dltensor_versioned" and bool(managed.contents.flags & DLPACK_FLAG_BITMASK_READ_ONLY)
    t = managed.contents.dl_tensor
    key = (t.dtype.code, t.dtype.bits)
    if t.dtype.lanes != 1 or key not in _DTYPES:
        raise BufferError(f"from_dlpack: unsupported DLPack dtype (code={t.dtype.code}, bits={t.dtype.bits}, "
                          f"lanes={t.dtype.lanes}); tritensor takes {sorted(str(d) for d in _CODES)}")
    d = _DTYPES[key]
    ndim = t.ndim
    shape = tuple(t.shape[i] for i in range(ndim))
    if t.strides:
        strides = tuple(t.strides[i] for i in range(ndim))
    else:  # NULL strides: C-contiguous
        strides, acc = [], 1
        for n in reversed(shape):
            strides.insert(0, acc)
            acc *= max(n, 1)
        strides = tuple(strides)
    if any(s < 0 for s in strides):
        raise BufferError("from_dlpack: negative strides are not supported; make the array contiguous first")
    ptr = (t.data or 0) + t.byte_offset
    nelem = math.prod(shape)
    span = (sum((n - 1) * s for n, s in zip(shape, strides)) + 1) * d.itemsize if nelem else 0
    dev_type, dev_id = t.device.device_type, t.device.device_id
    _api.PyCapsule_SetName(capsule, used_name)  # consumed: its destructor no longer deletes
    owner = _DLPackOwner(managed, capsule)
    if dev_type in (kDLCPU, kDLCUDAHost):
        storage = memory.HostStorage(span, owner=owner, ptr=ptr) if span else memory.HostStorage(0)
    elif dev_type == kDLCUDA:
        storage = _ForeignCudaStorage(span, device("cuda", dev_id), ptr, owner)
    else:
        del owner
        raise BufferError(f"from_dlpack: unsupported DLPack device type {dev_type}")
    out = TensorBase._result_class(storage, shape, strides, 0, d)
    # A read-only producer (a non-writeable NumPy array): tritensor tensors are always writable, so copy.
    return out.clone() if readonly else out


def cuda_array_interface(t: TensorBase) -> dict:
    """``Tensor.__cuda_array_interface__`` (version 2), as torch builds it."""
    if t.device.type != "cuda":
        raise AttributeError(f"Can't get __cuda_array_interface__ on non-CUDA tensor type: tritensor.{t.dtype.name} "
                             "If CUDA data is required use tensor.cuda() to copy tensor to device memory.")
    if t.requires_grad:
        raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad. If gradients aren't "
                           "required, use var.detach() to get Variable that doesn't require grad.")
    typestr = {dt.float16: "<f2", dt.float32: "<f4", dt.float64: "<f8", dt.int32: "<i4", dt.int64: "<i8",
               dt.bool_: "|b1", dt.uint8: "|u1", dt.int8: "|i1", dt.int16: "<i2", dt.uint16: "<u2", dt.uint32: "<u4",
               dt.uint64: "<u8"}.get(t.dtype)
    if typestr is None:
        raise TypeError(f"dtype {t.dtype} is not supported by __cuda_array_interface__")
    itemsize = t.dtype.itemsize
    strides = None if t.is_contiguous() else tuple(s * itemsize for s in t.stride())
    return dict(typestr=typestr, shape=tuple(t.shape), strides=strides,
                data=(t.data_ptr() if t.numel() > 0 else 0, False), version=2)


def as_array(t: TensorBase, dtype=None, copy=None) -> np.ndarray:
    """``Tensor.__array__``: the NumPy view ``numpy()`` gives (torch's rule), cast if asked."""
    a = t.numpy()
    if dtype is not None and np.dtype(dtype) != a.dtype:
        return a.astype(dtype)
    return np.array(a, copy=True) if copy else a
