"""torch.UntypedStorage (runtime/memory.py: the base of host and CUDA storages), Tensor.set_ and is_set_to, and
Tensor.module_load (core/ops/tensor_odds.py): which memory a tensor views after
set_ over a tensor, a storage or nothing, against NumPy views of the same bytes, with torch 2.13's errors
(messages printed by torch 2.13)."""
import numpy as np
import pytest

import tritensor as tt
from layouts import LAYOUTS, check_layout, make
from tolerances import NP

rng = np.random.default_rng(9)


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64, tt.float16, tt.bfloat16, tt.int32])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_set_to_a_tensor_shares_its_view(dtype, layout):
    src, ref = make((2, 3), dtype, layout, lambda shape: rng.integers(-8, 8, shape).astype(np.float64))
    check_layout(src, layout)
    x = tt.zeros(5, dtype=dtype)
    assert x.set_(src) is x
    assert x.is_set_to(src) and x.shape == src.shape and x.stride() == src.stride()
    assert x.storage_offset() == src.storage_offset() and x.data_ptr() == src.data_ptr()
    np.testing.assert_array_equal(x.numpy().astype(np.float64), ref)
    if layout == "expanded":  # an expanded view has one element per row behind it: not writable
        return
    before = src._version
    x.add_(1)  # one memory, one version counter
    assert src._version > before
    np.testing.assert_array_equal(src.numpy().astype(np.float64), ref + 1)


@pytest.mark.parametrize("dtype", [tt.float32, tt.int64, tt.float16])
def test_set_to_a_storage(dtype):
    a = tt.arange(12, dtype=dtype)
    host = a.numpy().astype(np.float64)
    x = tt.empty(0, dtype=dtype)
    x.set_(a.untyped_storage(), 1, (2, 3), (4, 1))
    expected = np.lib.stride_tricks.as_strided(host[1:], (2, 3), (4 * 8, 8))
    np.testing.assert_array_equal(x.numpy().astype(np.float64), expected)
    x.set_(a.untyped_storage(), 2, (2, 2))  # contiguous strides by default
    assert x.stride() == (2, 1)
    np.testing.assert_array_equal(x.numpy().astype(np.float64), host[2:6].reshape(2, 2))
    x.set_(a.untyped_storage())  # the whole storage as 1-D
    np.testing.assert_array_equal(x.numpy().astype(np.float64), host)
    x.set_()
    assert x.shape == (0,) and x.numel() == 0


def test_set_errors():
    a = tt.arange(6.0)
    with pytest.raises(RuntimeError, match="Could not set tensor of type float to a tensor of type int64_t"):
        tt.zeros(2).set_(a.long())
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation"):
        tt.zeros(2, requires_grad=True).set_(a)
    with pytest.raises(TypeError, match=r"set_\(\) received an invalid combination of arguments - got \(int\)"):
        tt.zeros(2).set_(3)
    with pytest.raises(RuntimeError, match="Tensor: invalid storage offset -1"):
        tt.zeros(2).set_(a.untyped_storage(), -1, (2,))
    with pytest.raises(RuntimeError, match=r"unequal size length \(1\) and stride length \(2\)"):
        tt.zeros(2).set_(a.untyped_storage(), 0, (2,), (1, 2))
    with pytest.raises(RuntimeError, match=r"requiring a storage size of 40 are out of bounds for storage of size 24"):
        tt.zeros(2).set_(a.untyped_storage(), 0, (10,))
    x = tt.zeros(2)
    assert not x.is_set_to(a) and not a.is_set_to(a[1:])


def test_module_load():
    dst = tt.zeros(3)
    other = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    out = dst.module_load(other)
    assert out is not dst and out is not other and not out.requires_grad
    assert dst.tolist() == [1.0, 2.0, 3.0] and out.data_ptr() == dst.data_ptr()
    assigned = dst.module_load(other, assign=True)
    assert assigned.data_ptr() == other.data_ptr() and not assigned.requires_grad
    with pytest.raises(TypeError, match="argument 'other' must be Tensor"):
        dst.module_load(3)


# ----- UntypedStorage ----------------------------------------------------------------------------
def test_untyped_storage_is_what_tensors_view():
    a = tt.tensor(np.array([1.5, -2.0, 3.25], dtype=np.float32))
    s = a.untyped_storage()
    assert isinstance(s, tt.UntypedStorage)
    assert s.size() == len(s) == s.nbytes() == s.nbytes == 12 and s.element_size() == 1
    raw = np.array([1.5, -2.0, 3.25], dtype=np.float32).view(np.uint8)
    assert s.tolist() == raw.tolist() and s[4] == raw[4] and s[-1] == raw[-1]
    assert s.is_cuda is (a.device.type == "cuda") and s.data_ptr() == a.data_ptr()
    assert s.is_shared() is s.is_cuda
    c = s.clone()
    assert c.data_ptr() != s.data_ptr() and c.tolist() == s.tolist()
    s[0:4] = 0  # the first float's bytes
    assert a.tolist()[0] == 0.0
    s.fill_(0)
    assert a.tolist() == [0.0, 0.0, 0.0]
    s.copy_(c)
    assert a.tolist() == [1.5, -2.0, 3.25]
    with pytest.raises(IndexError, match="index 12 out of range for storage of size 12"):
        s[12]
    with pytest.raises(RuntimeError, match="size mismatch"):
        s.copy_(tt.UntypedStorage(3))
    with pytest.raises(TypeError, match=r"a byte value is an int in \[0, 256\)"):
        s[0] = 256


def test_host_storage_construction_slices_and_resize():
    s = tt.UntypedStorage(4)
    assert isinstance(s, tt.UntypedStorage) and s.device.type == "cpu" and s.size() == 4
    assert tt.UntypedStorage([1, 2, 255]).tolist() == [1, 2, 255]
    assert tt.UntypedStorage.from_buffer(b"abc", offset=1).tolist() == [98, 99]
    s.fill_(7)
    view = s[1:3]  # shares the bytes
    view[0] = 1
    assert s.tolist() == [7, 1, 7, 7] and view.tolist() == [1, 7]
    t = tt.empty(0, dtype=tt.uint8, device="cpu").set_(s)
    s.resize_(6)  # new memory, the old bytes first; the tensor over it sees the new memory
    assert s.size() == 6 and s.tolist()[:4] == [7, 1, 7, 7]
    s[5] = 3
    assert t.set_(s).tolist()[5] == 3
    assert s.cpu() is s and s.is_pinned() is False
    with pytest.raises(RuntimeError, match="no shared-memory host storages"):
        s.share_memory_()
    with pytest.raises(RuntimeError, match="Storage size must be non-negative"):
        tt.UntypedStorage(-1)
    with pytest.raises(RuntimeError, match="a CUDA storage comes from a CUDA tensor"):
        tt.UntypedStorage(2, device="cuda")


# ----- TypedStorage: Tensor.storage() ---------------------------------------------------------------
@pytest.mark.parametrize("dtype", [tt.float32, tt.float64, tt.float16, tt.bfloat16, tt.int32, tt.bool])
def test_typed_storage_reads_and_writes_elements(dtype):
    values = np.array([1, 0, 3, 4]).astype(NP[dtype])
    a = tt.tensor(values)
    with pytest.warns(UserWarning, match="TypedStorage is deprecated"):
        s = a[1:].storage()  # the whole storage, as torch's
    assert isinstance(s, tt.TypedStorage) and s.dtype is dtype and s.device == a.device
    assert s.size() == len(s) == 4 and s.element_size() == dtype.itemsize and s.nbytes() == 4 * dtype.itemsize
    assert s.untyped() is a.untyped_storage() and s.data_ptr() == a.data_ptr()
    np.testing.assert_array_equal(np.array(s.tolist(), dtype=NP[dtype]), values)
    assert s[2] == values[2] and s[-1] == values[-1]
    s[0] = values[2]
    assert a.tolist()[0] == values[2].item()
    s.fill_(values[3])
    np.testing.assert_array_equal(a.numpy(), np.full(4, values[3]))
    with pytest.raises(IndexError, match="index 4 out of range for storage of size 4"):
        s[4]


def test_set_over_a_typed_storage():
    a = tt.arange(6.0)
    with pytest.warns(UserWarning):
        s = a.storage()
    x = tt.zeros(1).set_(s, 1, (2, 2))
    np.testing.assert_array_equal(x.numpy(), [[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(RuntimeError, match="Expected a Storage of type int64_t but got type float"):
        tt.zeros(1, dtype=tt.int64).set_(s, 0, (2,))
