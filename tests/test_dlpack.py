"""DLPack in and out, NumPy's __array__, __cuda_array_interface__: zero-copy both ways, and
capsules that keep the memory alive (a use-after-free here was a past bug in the runtime)."""
from __future__ import annotations

import ctypes
import gc
import sys

import ml_dtypes
import numpy as np
import pytest

import tritensor as tt
from tritensor.core import dlpack

DTYPES = [tt.float32, tt.float64, tt.float16, tt.int32, tt.int64, tt.bool]


@pytest.fixture(autouse=True)
def host_tensors():
    """These tests exchange host memory with NumPy, which consumes only CPU capsules and shares
    only host memory: their tensors are made on the cpu, also in the device-tensor variant
    (TRITENSOR_TEST_DEVICE=cuda). The device side is test_device_capsules_round_trip's."""
    before = tt.get_default_device()
    tt.set_default_device("cpu")
    yield
    tt.set_default_device(before)


@pytest.mark.parametrize("d", DTYPES, ids=str)
def test_numpy_from_tritensor_shares_memory(d):
    t = tt.tensor(np.arange(12).reshape(3, 4) % 2, dtype=d)
    v = t.t()[1:]  # non-contiguous, offset
    a = np.from_dlpack(v)
    assert a.dtype == d.np and a.shape == (3, 3) and a.strides == tuple(s * d.itemsize for s in v.stride())
    np.testing.assert_array_equal(a, v.numpy())
    a[0, 1] = 1 if d is not tt.bool else True
    assert v.numpy()[0, 1] == 1  # writes go through to the tensor...
    t.fill_(0)
    assert not a.any()  # ...and back


def test_tritensor_from_numpy_shares_memory():
    base = np.arange(20, dtype=np.float32).reshape(4, 5)
    n = base[1:, ::2]  # offset and strided
    t = tt.from_dlpack(n)
    assert t.shape == (3, 3) and t.stride() == (5, 2) and t.dtype is tt.float32
    t.fill_(-1.0)
    assert (n == -1).all() and base[0].tolist() == [0, 1, 2, 3, 4]
    n[0, 0] = 9
    assert t[0, 0].item() == 9
    for d in (np.float16, np.float64, np.int32, np.int64, np.bool_):
        a = np.ones((2, 3), d)
        np.testing.assert_array_equal(tt.from_dlpack(a).numpy(), a)
    empty = tt.from_dlpack(np.zeros((0, 4), np.float32))
    assert empty.shape == (0, 4)
    assert tt.from_dlpack(np.array(2.5, np.float32)).shape == ()  # 0-d


def test_readonly_arrays_are_copied_and_errors():
    r = np.ones(3)
    r.flags.writeable = False
    t = tt.from_dlpack(r)
    t.fill_(2.0)
    assert r.tolist() == [1, 1, 1]  # a read-only producer is never written
    with pytest.raises(BufferError, match="unsupported DLPack dtype"):
        tt.from_dlpack(np.ones(2, np.complex64))  # no complex dtypes
    with pytest.raises(TypeError, match="expected an object with __dlpack__ or a DLPack capsule"):
        tt.from_dlpack([1, 2])
    cap = tt.ones(2).__dlpack__()
    tt.from_dlpack(cap)
    with pytest.raises(BufferError, match="already consumed"):
        tt.from_dlpack(cap)
    with pytest.raises(RuntimeError, match="Can't export tensors that require gradient"):
        np.from_dlpack(tt.ones(2, requires_grad=True))
    with pytest.raises(BufferError, match="stream must be None for a CPU tensor"):
        tt.ones(2).__dlpack__(stream=1)
    with pytest.raises(BufferError, match="without a copy"):
        tt.ones(2).__dlpack__(dl_device=(2, 0))
    assert tt.ones(2).__dlpack_device__() == (1, 0)


def test_round_trip_bfloat16_through_a_capsule():
    t = tt.tensor([1.5, -2.0], dtype=tt.bfloat16)
    back = tt.from_dlpack(t.__dlpack__())  # NumPy has no DLPack bfloat16; our own reader does
    assert back.dtype is tt.bfloat16 and back.data_ptr() == t.data_ptr()
    assert back.numpy().view(ml_dtypes.bfloat16).astype(np.float32).tolist() == [1.5, -2.0]


@pytest.mark.parametrize("versioned", [True, False], ids=["dlpack1", "legacy"])
def test_a_consumer_refusing_bfloat16_raises_its_error_and_releases_the_tensor(monkeypatch, versioned):
    """np.from_dlpack of a bf16 tensor used to give SystemError (NULL without an exception) and an
    "Exception ignored" traceback: the capsule's destructor ran Python inside NumPy's Py_DECREF with
    NumPy's error in flight, lost it, and never released the tensor. Now NumPy's own error comes
    back (torch's behaviour), nothing is reported unraisable, the tensor is released once."""
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    gc.collect()
    before = dlpack.live_exports()
    t = tt.tensor([1.5, -2.0], dtype=tt.bfloat16)
    # NumPy's own error, whose type is NumPy's choice: RuntimeError from NumPy 2.4 here, BufferError
    # from the NumPy of the H100 machine.
    with pytest.raises((RuntimeError, BufferError), match="Unsupported dtype in DLTensor"):
        np.from_dlpack(t if versioned else _LegacyOnly(t))
    gc.collect()
    assert len(dlpack._exported) == before  # a collection releases the refused capsule's tensor
    assert unraisable == [] and dlpack.live_exports() == before
    assert t.float().tolist() == [1.5, -2.0]  # still the tensor's own memory, intact
    a = np.from_dlpack(tt.tensor([1.0, 2.0]))  # the next exchange works
    assert a.tolist() == [1.0, 2.0] and dlpack.live_exports() == before + 1
    del a
    gc.collect()
    assert dlpack.live_exports() == before and unraisable == []


class _LegacyOnly:
    """A producer as seen by a consumer that asks for legacy (pre-1.0) capsules."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None, **kwargs):
        return self.t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


def test_capsule_keeps_the_storage_alive():
    gc.collect()
    before = dlpack.live_exports()
    t = tt.full((1000,), 3.0)
    a = np.from_dlpack(t)
    ptr = t.data_ptr()
    del t
    gc.collect()
    junk = [tt.full((1000,), 7.0) for _ in range(20)]  # would reuse freed memory
    assert a.ctypes.data == ptr and (a == 3.0).all()
    assert dlpack.live_exports() == before + 1
    del a, junk
    gc.collect()
    assert dlpack.live_exports() == before  # the consumer's release reached the deleter
    cap = tt.ones(4).__dlpack__()  # a capsule dropped unconsumed releases its tensor too
    assert dlpack.live_exports() == before + 1
    del cap
    gc.collect()
    assert dlpack.live_exports() == before
    # the other way: a tensor viewing NumPy memory keeps the array alive
    t = tt.from_dlpack(np.full(1000, 5.0, np.float32))
    gc.collect()
    _ = [np.full(1000, 1.0, np.float32) for _ in range(20)]
    assert (t.numpy() == 5.0).all()


def test_array_protocol():
    t = tt.arange(6).reshape(2, 3)
    a = np.asarray(t)
    assert a.dtype == np.int64 and np.shares_memory(a, t.numpy())
    assert np.array(t, dtype=np.float32).dtype == np.float32
    assert not np.shares_memory(np.array(t, copy=True), t.numpy())
    with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires grad"):
        np.asarray(tt.ones(2, requires_grad=True))


def test_cuda_array_interface_and_cuda_capsules_with_a_fake_pointer():
    """The GPU path, checked without a GPU: a CUDA DLPack tensor at a fake address is imported
    (never dereferenced), exported again, and described by __cuda_array_interface__."""
    assert not hasattr(tt.ones(1), "__cuda_array_interface__")  # AttributeError on CPU tensors, as torch
    released = []
    m = dlpack.DLManagedTensor()
    shape, strides = (ctypes.c_int64 * 2)(2, 3), (ctypes.c_int64 * 2)(1, 2)
    m.dl_tensor.data = 0x7F0000001000
    m.dl_tensor.device = dlpack.DLDevice(dlpack.kDLCUDA, 0)
    m.dl_tensor.ndim = 2
    m.dl_tensor.dtype = dlpack.DLDataType(dlpack.kDLFloat, 32, 1)
    m.dl_tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    m.dl_tensor.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
    m.dl_tensor.byte_offset = 16
    deleter = dlpack._Deleter(lambda p: released.append(True))
    m.deleter = deleter
    cap = ctypes.pythonapi.PyCapsule_New(ctypes.addressof(m), b"dltensor", None)
    t = tt.from_dlpack(cap)
    assert t.device == tt.device("cuda", 0) and t.shape == (2, 3) and t.stride() == (1, 2)
    assert t.data_ptr() == 0x7F0000001000 + 16 and not released
    assert t.__dlpack_device__() == (dlpack.kDLCUDA, 0)
    assert t.__cuda_array_interface__ == {"typestr": "<f4", "shape": (2, 3), "strides": (4, 8),
                                          "data": (0x7F0000001000 + 16, False), "version": 2}
    assert t.t().__cuda_array_interface__["strides"] is None  # contiguous: None, as torch
    again = tt.from_dlpack(t.__dlpack__(stream=-1, max_version=(1, 0)))  # stream=-1: no sync asked
    assert again.data_ptr() == t.data_ptr() and again.device == t.device
    del t, again
    gc.collect()
    assert released == [True]  # the producer's deleter ran once the last view was gone


def test_torch_interop_if_torch_is_installed():
    torch = pytest.importorskip("torch")
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    t = tt.from_dlpack(x)
    t.fill_(1.0)
    assert x.sum().item() == 6.0
    y = torch.from_dlpack(tt.arange(4).float())
    assert y.tolist() == [0.0, 1.0, 2.0, 3.0]
    b = torch.from_dlpack(tt.tensor([1.5], dtype=tt.bfloat16))
    assert b.dtype == torch.bfloat16 and b.item() == 1.5


def test_numpy_operands_and_ufuncs_give_tensors_as_torch():
    t = tt.tensor([1.0, 2.0, 3.0])
    a = np.array([0.5, 0.25, 2.0])
    r = t + a  # the array is taken as a (float64) tensor: the result is a tensor, promoted
    assert isinstance(r, tt.Tensor) and r.dtype is tt.float64
    np.testing.assert_array_equal(r.numpy(), t.numpy() + a)
    q = t * np.arange(3, dtype=np.int64)
    assert isinstance(q, tt.Tensor) and q.dtype is tt.float32
    e = np.exp(t)  # NumPy computes on __array__'s host array; __array_wrap__ hands back a tensor
    assert isinstance(e, tt.Tensor) and e.dtype is tt.float32
    np.testing.assert_array_equal(e.numpy(), np.exp(t.numpy()))
    assert isinstance(np.maximum(t, a), tt.Tensor)
    h = np.exp(tt.tensor([1.0, 2.0], dtype=tt.float16))
    assert h.dtype is tt.float16


def test_utils_dlpack_is_torchs_older_spelling():
    from tritensor.utils import dlpack as tud

    t = tt.arange(6, dtype=tt.float32).reshape(2, 3)
    back = tud.from_dlpack(tud.to_dlpack(t))
    assert back.data_ptr() == t.data_ptr() and back.shape == t.shape  # the same memory, no copy
    with pytest.raises(TypeError, match="argument 'tensor' must be Tensor"):
        tud.to_dlpack(np.zeros(3))


@pytest.mark.skipif(not tt.cuda.is_available(), reason="needs a CUDA device (a GPU, or TRITENSOR_DEVICE=sim)")
def test_device_capsules_round_trip():
    """A device tensor's capsule names its device and its device address; importing it gives a
    tensor over the same device memory (writes through one are seen through the other), released
    once the last view is gone."""
    gc.collect()
    before = dlpack.live_exports()
    t = tt.arange(6, dtype=tt.float32, device="cuda").reshape(2, 3)
    assert t.__dlpack_device__() == (dlpack.kDLCUDA, t.device.index or 0)
    assert t.__cuda_array_interface__["data"] == (t.data_ptr(), False)
    v = t.t()[1:]
    back = tt.from_dlpack(v.__dlpack__(max_version=(1, 0)))
    assert back.device == t.device and back.data_ptr() == v.data_ptr() and back.stride() == v.stride()
    back.fill_(-1.0)
    assert t.cpu().tolist() == [[0.0, -1.0, -1.0], [3.0, -1.0, -1.0]]
    assert dlpack.live_exports() == before + 1
    del back
    gc.collect()
    assert dlpack.live_exports() == before
