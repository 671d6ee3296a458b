"""The Tensor's bookkeeping: views share storage, factories, host interop, dtypes, devices, errors."""
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import tritensor as tt
from tolerances import NP, assert_close


def test_import_does_not_import_torch():
    code = "import tritensor, sys; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.skipif(tt.cuda.is_available(), reason="checks CPU mode; GPU mode is covered by test_cuda.py")
def test_cpu_mode_is_selected_without_gpu():
    assert tt.cuda.is_available() is False
    assert tt.cuda.device_count() == 0
    assert os.environ["TRITON_INTERPRET"] == "1"
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        tt.cuda.Stream()
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        tt.zeros(2).cuda()
    assert tt.cuda.memory_allocated() == 0


def test_numpy_shares_memory_and_from_numpy_shares_back():
    a = np.zeros((3, 4), dtype=np.float32)
    t = tt.from_numpy(a)
    t[1, 2] = 5.0
    assert a[1, 2] == 5.0
    n = t.numpy()
    n[0, 0] = 7.0
    assert t[0, 0].item() == 7.0
    s = tt.from_numpy(a[:, ::2])
    assert s.stride() == (4, 2)
    with pytest.raises(ValueError, match="negative"):
        tt.from_numpy(a[::-1])
    with pytest.raises(TypeError, match="not supported"):
        tt.from_numpy(np.zeros(2, dtype=np.complex64))


def test_factories_dtypes_and_values():
    assert tt.tensor([1, 2]).dtype is tt.int64
    assert tt.tensor([1.0, 2]).dtype is tt.float32
    assert tt.tensor([True]).dtype is tt.bool
    assert tt.tensor(np.zeros(2)).dtype is tt.float64
    assert tt.tensor(3.5).shape == () and tt.tensor(3.5).item() == 3.5
    np.testing.assert_array_equal(tt.zeros(2, 3).numpy(), np.zeros((2, 3)))
    np.testing.assert_array_equal(tt.ones((2, 3), dtype=tt.int32).numpy(), np.ones((2, 3), np.int32))
    np.testing.assert_array_equal(tt.full((2,), 7).numpy(), [7, 7])
    assert tt.full((2,), 7).dtype is tt.int64 and tt.full((2,), 7.0).dtype is tt.float32
    np.testing.assert_array_equal(tt.arange(5).numpy(), np.arange(5))
    assert_close(tt.arange(0, 1, 0.1), np.arange(0, 1, 0.1, dtype=np.float64), tt.float32, "ulps")
    np.testing.assert_array_equal(tt.arange(10, 0, -3).numpy(), [10, 7, 4, 1])
    z = tt.zeros_like(tt.ones(2, 3, dtype=tt.float16))
    assert z.dtype is tt.float16 and z.shape == (2, 3)
    assert tt.empty(0, 5).numel() == 0 and tt.empty(0, 5).numpy().shape == (0, 5)
    assert tt.tensor([[1, 2], [3, 4]], dtype=tt.bfloat16).numpy().dtype == ml_dtypes.bfloat16
    assert tt.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]


def test_random_is_seeded_and_distributed():
    tt.manual_seed(123)
    a = tt.rand(4000)
    tt.manual_seed(123)
    b = tt.rand(4000)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    c = tt.rand(4000)
    assert not np.array_equal(a.numpy(), c.numpy())
    x = a.numpy()
    assert x.min() >= 0 and x.max() < 1 and abs(x.mean() - 0.5) < 0.02
    n = tt.randn(20000, dtype=tt.float64).numpy()
    assert abs(n.mean()) < 0.03 and abs(n.std() - 1) < 0.03
    assert tt.randn(3, dtype=tt.bfloat16).dtype is tt.bfloat16
    with pytest.raises(TypeError, match="floating point"):
        tt.rand(3, dtype=tt.int64)


def test_repr_is_readable():
    # torch's printing of CPU tensors (tests/test_printing.py; a device tensor adds device='cuda:0')
    assert repr(tt.tensor([1.0, 2.5], device="cpu")) == "tensor([1.0000, 2.5000])"
    assert "dtype=tritensor.float16" in repr(tt.tensor([1.0], dtype=tt.float16))
    assert repr(tt.tensor([1, 2], device="cpu")) == "tensor([1, 2])"
    assert repr(tt.zeros(2).shape) == "tritensor.Size([2])"
    assert repr(tt.tensor(3.0, device="cpu")) == "tensor(3.)"  # 0-d stays 0-d on the host
    assert tt.tensor(np.array(3.0)).shape == () and tt.tensor(np.array(3.0)).item() == 3.0


def test_to_and_dtype_shortcuts():
    x = tt.tensor([1.7, -2.2])
    assert x.to(tt.float32) is x
    assert x.to(tt.float32, copy=True) is not x
    assert x.half().dtype is tt.float16 and x.bfloat16().dtype is tt.bfloat16
    assert x.double().float().dtype is tt.float32
    assert x.to(x.device) is x  # already there: no copy
    h = x.cpu()  # x itself on the cpu; a host copy of a device tensor
    assert h.to("cpu") is h and h.cpu() is h and (h is x) == (x.device.type == "cpu")
    np.testing.assert_array_equal(x.long().numpy(), [1, -2])
    assert x.to(tt.zeros(1, dtype=tt.float64)).dtype is tt.float64


def test_item_and_scalars():
    assert tt.tensor([[4]]).item() == 4
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        tt.zeros(2).item()
    assert float(tt.tensor(2.5)) == 2.5 and int(tt.tensor(3)) == 3
    assert bool(tt.tensor([1.0]))


def test_devices_parse_like_torch():
    assert str(tt.device("cuda:1")) == "cuda:1" and tt.device("cuda", 0).index == 0
    assert tt.device("cpu") == "cpu" and tt.zeros(1, device="cpu").device == tt.device("cpu")
    assert tt.zeros(1).device.type == tt.get_default_device().type
    with pytest.raises(ValueError, match="unknown device type"):
        tt.device("tpu")


def test_errors_name_what_was_wrong():
    x = tt.zeros(2, 3)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"):
        x.transpose(0, 2)
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 1 with size 3"):
        x[0, 5]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(RuntimeError, match="shape '\\[4, 2\\]' is invalid for input of size 6"):
        x.view(4, 2)
    with pytest.raises(RuntimeError, match="expanded size of the tensor \\(4\\) must match the existing size \\(3\\)"):
        x.expand(2, 4)
    with pytest.raises(TypeError, match="unsupported dtype"):
        tt.zeros(2, dtype="complex64")
    with pytest.raises(RuntimeError, match="negative dimension"):
        tt.empty(-1)
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[::-1]
    with pytest.raises(TypeError, match="integer or bool tensors/lists are supported, got str"):
        x["a"]
    with pytest.raises(TypeError, match="got bool"):  # bool scalar indices (x[True]) are not implemented
        x[True]
    if os.environ.get("TRITENSOR_TEST_DEVICE", "cpu").strip().lower() != "cuda":
        # the device-tensor variant's conftest makes .numpy() of a device tensor copy it back, so the
        # refusal torch makes can only be seen in the host variant
        with pytest.raises(TypeError, match="can't convert cuda"):
            tt.core.tensor.Tensor.numpy(_fake_cuda_tensor())
    with pytest.raises(ValueError, match="ragged|rectangular"):
        tt.tensor([[1, 2], [3]])


def _fake_cuda_tensor():
    t = tt.zeros(1, device="cpu")  # host memory that claims to be on cuda: nothing may launch on it
    object.__setattr__(t, "device", tt.device("cuda:0"))
    return t


def test_tensors_on_different_devices_raise_before_launch():
    a, b = tt.zeros(2, device="cpu"), _fake_cuda_tensor()
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + b


def test_interpreter_launches_are_serialised_across_threads():
    import threading

    x = tt.arange(5000, dtype=tt.float32)
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                results.append(float((x * 2 + 1).numpy().sum()))
        except Exception as e:  # pragma: no cover - the assertion below reports it
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    [t.start() for t in threads]
    [t.join(timeout=120) for t in threads]
    assert not errors and len(results) == 20 and len(set(results)) == 1


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64, tt.float16, tt.bfloat16, tt.int32, tt.int64, tt.bool])
def test_pickle_is_by_value(dtype):
    """A pickled tensor carries its values, not its storage's pointer: the copy is independent of the
    original (before the fix the copy aliased the original's memory, and in another process read garbage)."""
    import pickle

    base = tt.tensor((np.arange(12).reshape(3, 4) % 5).astype(NP[dtype]))
    for x in (base, base.T, base[:, 1:3], tt.empty(0, 4, dtype=dtype)):
        before = x.numpy().copy()
        y = pickle.loads(pickle.dumps(x))
        assert y.dtype is dtype and y.shape == x.shape and y.is_contiguous()
        np.testing.assert_array_equal(y.numpy(), before)
        y.fill_(1)
        np.testing.assert_array_equal(x.numpy(), before)  # the original is untouched


def test_pickle_across_processes_and_requires_grad():
    import pickle
    import subprocess
    import sys

    code = ("import pickle, sys, tritensor as tt; "
            "sys.stdout.buffer.write(pickle.dumps([tt.arange(5, dtype=tt.float32) * 1.5, "
            "tt.nn.Parameter(tt.ones(2, 2))]))")
    raw = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, timeout=120).stdout
    t, p = pickle.loads(raw)
    np.testing.assert_array_equal(t.numpy(), np.arange(5, dtype=np.float32) * 1.5)
    assert type(p).__name__ == "Parameter" and p.requires_grad and p.is_leaf
    w = tt.ones(3, requires_grad=True)
    z = pickle.loads(pickle.dumps(w * 2))  # a non-leaf arrives as a plain tensor, with no history
    assert not z.requires_grad and z.grad_fn is None
    np.testing.assert_array_equal(z.numpy(), np.full(3, 2.0, np.float32))


def test_metadata_methods_of_issue_24():
    """type_as, get_device, is_cpu, new_tensor, element_size, nbytes, itemsize, data_ptr, as torch's."""
    x = tt.ones(2, 3, dtype=tt.float16, device="cpu")  # a CPU tensor's answers; a device tensor's below
    y = x.type_as(tt.zeros(1, dtype=tt.int64))
    assert y.dtype is tt.int64 and y.tolist() == [[1, 1, 1]] * 2 and x.type_as(x) is x
    with pytest.raises(TypeError, match=r"type_as\(\): argument 'other' \(position 1\) must be Tensor, not list"):
        x.type_as([1])
    assert x.get_device() == -1 and tt.get_device(x) == -1 and x.is_cpu and not x.is_cuda
    assert (x.element_size(), x.itemsize, x.nbytes) == (2, 2, 12)
    assert x[:, 1:].nbytes == 8 and x.expand(4, 2, 3).nbytes == 48  # numel * itemsize, as torch
    assert x[1:].data_ptr() == x.data_ptr() + 3 * 2 and isinstance(x.data_ptr(), int)
    n = x.new_tensor([[1, 2]])
    assert n.dtype is tt.float16 and n.tolist() == [[1.0, 2.0]] and not n.requires_grad
    assert x.new_tensor([1.5], dtype=tt.float64, requires_grad=True).requires_grad
    src = tt.tensor([1.5, 2.0], requires_grad=True)
    with pytest.warns(UserWarning, match="To copy construct from a tensor"):
        copy = x.new_tensor(src)
    assert copy.dtype is tt.float16 and not copy.requires_grad and copy.data_ptr() != src.data_ptr()
    if tt.cuda.is_available():
        c = tt.ones(2, 3, dtype=tt.float16, device="cuda")
        assert c.get_device() == 0 and tt.get_device(c) == 0 and c.is_cuda and not c.is_cpu
        assert c[1:].data_ptr() == c.data_ptr() + 3 * 2 and c.new_tensor([1]).device == c.device
