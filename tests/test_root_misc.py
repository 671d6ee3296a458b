"""torch's odd root names and Tensor attributes (core/root_odds.py, core/ops/tensor_odds.py, core/vmap.py,
the autocast state functions of amp/autocast_mode.py, set_anomaly_enabled): values, state round trips and
torch 2.13's errors (messages printed by torch 2.13). vmap is checked against the same function applied
slice by slice in NumPy, over in_dims/out_dims, float dtypes and layouts, with its gradient."""
import io
import os
import pathlib
import warnings

import numpy as np
import pytest

import tritensor as tt
from layouts import LAYOUTS, check_layout, make
from tolerances import NP, assert_close

rng = np.random.default_rng(5)


# ----- build flags, threads, predicates --------------------------------------------------------
def test_build_flags_say_what_tritensor_has():
    assert tt.has_lapack is True  # tritensor.linalg's factorizations
    assert (tt.has_mkl, tt.has_openmp, tt.has_spectral) == (False, False, False)
    assert tt.init_num_threads() is None


def test_exceptions_are_torchs():
    assert issubclass(tt.AcceleratorError, RuntimeError) and issubclass(tt.FatalError, Exception)
    assert not issubclass(tt.FatalError, RuntimeError)


def test_is_inference_and_is_distributed_functions():
    x = tt.ones(2)
    with tt.inference_mode():
        y = tt.ones(2)
    assert tt.is_inference(y) and not tt.is_inference(x)
    assert tt.is_distributed(x) is False and x.is_distributed() is False
    with pytest.raises(TypeError, match=r"is_inference\(\): argument 'input' \(position 1\) must be Tensor, not int"):
        tt.is_inference(3)


def test_get_device_module():
    assert tt.get_device_module("cuda") is tt.cuda and tt.get_device_module(tt.device("cuda")) is tt.cuda
    if tt.cuda.is_available():  # no device given: the accelerator's module
        assert tt.get_device_module() is tt.cuda
    else:  # the CPU's, which tritensor has no module for
        with pytest.raises(RuntimeError, match="Device 'cpu' does not have a corresponding module"):
            tt.get_device_module()
    with pytest.raises(RuntimeError, match="Invalid value of device '1', expect torch.device, str, or None"):
        tt.get_device_module(1)
    with pytest.raises(RuntimeError, match="does not have a corresponding module"):
        tt.get_device_module("cpu")  # tritensor has no tritensor.cpu module


def test_thread_safe_generator_is_none_outside_thread_workers():
    assert tt.thread_safe_generator() is None


def test_from_file(tmp_path):
    path = str(tmp_path / "data.bin")
    np.arange(6, dtype=np.float32).tofile(path)
    x = tt.from_file(path, shared=False, size=6)
    assert x.device.type == "cpu" and x.dtype is tt.float32
    np.testing.assert_array_equal(x.numpy(), np.arange(6, dtype=np.float32))
    x[0] = 42.0  # private mapping: the file keeps its bytes
    assert np.fromfile(path, dtype=np.float32)[0] == 0.0
    y = tt.from_file(path, shared=True, size=6)
    y[1] = 7.0
    assert np.fromfile(path, dtype=np.float32)[1] == 7.0
    new = str(tmp_path / "new.bin")
    z = tt.from_file(new, shared=True, size=3, dtype=tt.int32)  # created to fit, zero-filled
    assert os.path.getsize(new) == 12 and z.tolist() == [0, 0, 0]
    assert tt.from_file(path).numel() == 0
    with pytest.raises(RuntimeError, match=r"size <24> is smaller than the required mapping size <32>"):
        tt.from_file(path, size=8)
    with pytest.raises(RuntimeError, match="unable to open file"):
        tt.from_file(str(tmp_path / "missing.bin"), shared=False, size=2)
    with pytest.raises(TypeError, match=r"argument 'filename' \(position 1\) must be str, not int"):
        tt.from_file(3)


# ----- anomaly and autocast state --------------------------------------------------------------
def test_set_anomaly_enabled():
    try:
        tt.set_anomaly_enabled(True, False)
        assert tt.is_anomaly_enabled() and not tt.is_anomaly_check_nan_enabled()
    finally:
        tt.set_anomaly_enabled(False)
    assert not tt.is_anomaly_enabled() and tt.is_anomaly_check_nan_enabled()
    with pytest.raises(TypeError, match=r"argument 'enabled' \(position 1\) must be bool, not str"):
        tt.set_anomaly_enabled("x")


def test_autocast_state_functions_round_trip():
    assert tt.autocast_increment_nesting() == 1 and tt.autocast_increment_nesting() == 2
    assert tt.autocast_decrement_nesting() == 1 and tt.autocast_decrement_nesting() == 0
    try:
        tt.set_autocast_dtype("cpu", tt.float16)
        assert tt.get_autocast_dtype("cpu") is tt.float16
        tt.set_autocast_enabled("cpu", True)
        assert tt.is_autocast_enabled("cpu")
        tt.set_autocast_enabled(True)  # the legacy one-argument form steers cuda
        assert tt.is_autocast_enabled("cuda")
        tt.set_autocast_cache_enabled(False)
        assert not tt.is_autocast_cache_enabled()
    finally:
        tt.set_autocast_dtype("cpu", tt.bfloat16)
        tt.set_autocast_enabled("cpu", False)
        tt.set_autocast_enabled("cuda", False)
        tt.set_autocast_cache_enabled(True)
    assert not tt.is_autocast_enabled("cpu") and tt.is_autocast_cache_enabled()
    tt.clear_autocast_cache()


def test_autocast_state_enables_the_dispatch_layer():
    a = tt.ones(2, 2, device="cpu")
    tt.set_autocast_enabled("cpu", True)
    try:
        assert (a @ a).dtype is tt.bfloat16  # matmul lowers in an enabled cpu region
    finally:
        tt.set_autocast_enabled("cpu", False)
    assert (a @ a).dtype is tt.float32


def test_deprecated_autocast_forms_warn_and_forward():
    with pytest.warns(DeprecationWarning, match=r"get_autocast_cpu_dtype\(\) is deprecated"):
        assert tt.get_autocast_cpu_dtype() is tt.bfloat16
    with pytest.warns(DeprecationWarning, match=r"get_autocast_gpu_dtype\(\) is deprecated"):
        assert tt.get_autocast_gpu_dtype() is tt.float16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            tt.set_autocast_cpu_enabled(True)
            assert tt.is_autocast_cpu_enabled()
            tt.set_autocast_cpu_dtype(tt.float16)
            tt.set_autocast_gpu_dtype(tt.bfloat16)
            assert tt.get_autocast_dtype("cpu") is tt.float16 and tt.get_autocast_dtype("cuda") is tt.bfloat16
        finally:
            tt.set_autocast_cpu_enabled(False)
            tt.set_autocast_cpu_dtype(tt.bfloat16)
            tt.set_autocast_gpu_dtype(tt.float16)


def test_autocast_state_errors():
    with pytest.raises(TypeError, match=r"argument 'enabled' \(position 2\) must be bool, not str"):
        tt.set_autocast_enabled("cpu", "x")
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda, ipu.* device type at start of device string: foo"):
        tt.set_autocast_dtype("foo", tt.float16)
    with pytest.raises(TypeError, match=r"dtype must be a torch.dtype \(got int\)"):
        tt.set_autocast_dtype("cpu", 1)
    with pytest.raises(TypeError, match=r"enabled must be a bool \(got int\)"):
        tt.set_autocast_cache_enabled(1)


# ----- Tensor attributes -----------------------------------------------------------------------
def test_tensor_predicates():
    x = tt.ones(3)
    assert x.layout is tt.strided and x.is_meta is False and x.name is None and x.output_nr == 0
    assert x.const_data_ptr() == x.data_ptr()
    assert x.is_set_to(x[:]) and x.is_set_to(x.view(3)) and not x.is_set_to(x[1:]) and not x.is_set_to(x.clone())
    with pytest.raises(TypeError, match="argument 'tensor'"):
        x.is_set_to(3)
    assert x.is_shared() is (x.device.type == "cuda")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_resize_and_resize_as_are_deprecated_reshapes(layout):
    x, ref = make((2, 3), tt.float32, layout, lambda shape: rng.standard_normal(shape))
    with pytest.warns(UserWarning, match="non-inplace resize is deprecated"):
        got = x.resize(3, 2)
    np.testing.assert_array_equal(got.numpy(), ref.reshape(3, 2))
    with pytest.warns(UserWarning, match="non-inplace resize_as is deprecated"):
        assert x.resize_as(tt.ones(6)).shape == (6,)
    with pytest.raises(RuntimeError, match=r"requested resize to 4 \(4 elements in total\), but the given tensor "
                                           r"has a size of 2x3 \(6 elements\)"):
        x.resize(4)
    w = tt.ones(2, 3, requires_grad=True)
    with pytest.warns(UserWarning):
        (w.resize(6) * tt.arange(6.0)).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.arange(6.0).reshape(2, 3))


def test_share_memory_refuses_host_tensors():
    x = tt.ones(2)
    if x.device.type == "cuda":
        assert x.share_memory_() is x
    else:
        with pytest.raises(RuntimeError, match="no shared-memory host storages"):
            x.share_memory_()


def test_as_subclass_aliases_and_keeps_the_graph():
    class Sub(tt.Tensor):
        pass

    x = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.as_subclass(Sub)
    assert type(y) is Sub and y.data_ptr() == x.data_ptr()
    (y * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(TypeError, match="does not inherit from Tensor"):
        x.as_subclass(int)


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64, tt.int32, tt.bool])
def test_apply_map_map2(dtype):
    a = np.array([[1, 0, 3], [4, 5, 0]]).astype(NP[dtype])
    x = tt.tensor(a, device="cpu")
    if dtype is tt.bool:
        np.testing.assert_array_equal(x.clone().apply_(lambda v: not v).numpy(), ~a)
        return
    got = x.clone().apply_(lambda v: v * 2 + 1)
    np.testing.assert_array_equal(got.numpy(), a * 2 + 1)
    other = tt.tensor(np.array([1, 2, 3]).astype(NP[dtype]), device="cpu")  # broadcast over rows
    np.testing.assert_array_equal(x.clone().map_(other, lambda p, q: p - q).numpy(), a - np.array([1, 2, 3]))
    scale = tt.tensor(np.array(2).astype(NP[dtype]), device="cpu")
    np.testing.assert_array_equal(x.clone().map2_(other, scale, lambda p, q, r: p + q * r).numpy(),
                                  a + np.array([1, 2, 3]) * 2)
    view = x.clone()
    view.t().apply_(lambda v: v + 1)  # a transposed view writes through to its base
    np.testing.assert_array_equal(view.numpy(), a + 1)


def test_apply_errors():
    x = tt.tensor([1.0, 2.0, 3.0], device="cpu")
    with pytest.raises(TypeError, match="'int' object is not callable"):
        x.apply_(3)
    with pytest.raises(TypeError, match="must be real number, not str"):
        x.clone().apply_(lambda v: "a")
    with pytest.raises(TypeError, match=r"expected tritensor.FloatTensor for 'other' \(got tritensor.IntTensor\)"):
        x.map_(x.int(), lambda a, b: a + b)
    with pytest.raises(RuntimeError, match="The expanded size of the tensor"):
        x.map_(tt.tensor([1.0, 2.0], device="cpu"), lambda a, b: a + b)
    with pytest.raises(RuntimeError, match=r"Can't call apply_\(\) on Variable that requires grad"):
        x.clone().requires_grad_().apply_(lambda v: v)
    if tt.cuda.is_available():
        with pytest.raises(RuntimeError, match="apply_ is only implemented on CPU tensors"):
            tt.ones(2, device="cuda").apply_(lambda v: v)


# ----- vmap ------------------------------------------------------------------------------------
def _np_fn(a, b):
    return np.sin(a) * b + a.sum()


def _tt_fn(a, b):
    return a.sin() * b + a.sum()


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64, tt.float16, tt.bfloat16])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_vmap_matches_a_loop_of_slices(dtype, layout):
    x, xa = make((3, 4), dtype, layout, lambda shape: rng.standard_normal(shape))
    check_layout(x, layout)
    y = tt.tensor(rng.standard_normal(4), dtype=dtype)
    got = tt.vmap(_tt_fn, in_dims=(0, None))(x, y)
    ya = y.double().numpy()
    expected = np.stack([_np_fn(xa[i], ya) for i in range(3)])
    assert got.shape == (3, 4) and got.dtype is dtype
    assert_close(got, expected, dtype)
    # mapped over dim 1 with the result's batch put last: the transpose of mapping over rows
    got_t = tt.vmap(_tt_fn, in_dims=(1, None), out_dims=1)(x.t(), y)
    assert_close(got_t, expected.T, dtype)


def test_vmap_structures_and_sizes():
    x = tt.tensor(rng.standard_normal((2, 3)))
    out = tt.vmap(lambda d: {"s": d["a"] * 2, "t": (d["a"].sum(), d["a"][0])})({"a": x})
    np.testing.assert_allclose(out["s"].numpy(), x.numpy() * 2)
    np.testing.assert_allclose(out["t"][0].numpy(), x.numpy().sum(1))
    assert tt.vmap(tt.sin, in_dims=-1)(x).shape == (3, 2)
    assert tt.vmap(tt.sin, out_dims=-1)(x).shape == (3, 2)
    a, s = tt.vmap(lambda v: (v, tt.ones(())), out_dims=(0, None))(x)
    assert a.shape == (2, 3) and s.shape == ()
    empty = tt.vmap(tt.sin)(tt.ones(0, 2))
    assert empty.shape == (0, 2)
    assert tt.vmap(tt.sin, chunk_size=1)(x).shape == (2, 3)


def test_vmap_gradient_flows_through_every_slice():
    x = tt.tensor(rng.standard_normal((3, 2)), requires_grad=True)
    tt.vmap(lambda v: (v * v).sum())(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy())


def test_vmap_randomness():
    x = tt.ones(3, 2)
    with pytest.raises(RuntimeError, match="vmap: called random operation while in randomness error mode"):
        tt.vmap(lambda v: v + tt.rand(()))(x)
    same = tt.vmap(lambda v: v + tt.rand(2), randomness="same")(x)
    assert (same[0] == same[1]).all() and (same[1] == same[2]).all()
    different = tt.vmap(lambda v: v + tt.rand(2), randomness="different")(x)
    assert not (different[0] == different[1]).all()


def test_vmap_errors():
    x, y = tt.ones(2, 3), tt.ones(3, 3)
    with pytest.raises(ValueError, match=r"got sizes \[2, 3\] for the mapped dimension"):
        tt.vmap(tt.add)(x, y)
    with pytest.raises(ValueError, match="in_dims is not compatible with the structure of `inputs`"):
        tt.vmap(tt.sin, in_dims=(0, 1))(x)
    with pytest.raises(ValueError, match=r"Got in_dim=2 for some input, but that input is a Tensor of dimensionality 2"):
        tt.vmap(tt.sin, in_dims=2)(x)
    with pytest.raises(ValueError, match=r"expected `in_dims` to be int or a \(potentially nested\) tuple"):
        tt.vmap(tt.sin, in_dims=0.5)(x)
    with pytest.raises(RuntimeError, match="Only allowed values for randomness are 'error', 'different', or 'same'. Got foo"):
        tt.vmap(tt.sin, randomness="foo")
    with pytest.raises(ValueError, match=r"must only return Tensors, got type <class 'int'>"):
        tt.vmap(lambda a: 3)(x)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"):
        tt.vmap(tt.sin, out_dims=2)(x)
    with pytest.raises(ValueError, match=r"chunk_size should be None or greater than 0. \(got 0\)"):
        tt.vmap(tt.sin, chunk_size=0)
    with pytest.raises(ValueError, match="got no inputs"):
        tt.vmap(tt.sin)()
    with pytest.raises(ValueError, match="We cannot vmap over non-Tensor arguments"):
        tt.vmap(tt.sin)(3)
    with pytest.raises(ValueError, match="can not return a BatchedTensor when out_dim is None"):
        tt.vmap(lambda a: a, out_dims=None)(x + tt.arange(2.0).unsqueeze(1))


# ----- torch.save's zip container --------------------------------------------------------------
TORCH_FILE = pathlib.Path(__file__).parent / "fixtures" / "torch_files" / "dtype_float32.pt"  # torch.save's


def test_file_reader_reads_a_torch_checkpoint():
    r = tt.PyTorchFileReader(str(TORCH_FILE))
    records = r.get_all_records()
    assert {"data.pkl", "data/0", "version", "byteorder", ".data/serialization_id"} <= set(records)
    assert r.has_record("data/0") and not r.has_record("nope")
    assert r.get_record("byteorder") == b"little" and len(r.serialization_id()) > 0
    for name in records:  # torch's writer aligns every record to 64 bytes
        offset = r.get_record_offset(name)
        assert offset % 64 == 0
        assert offset == r.get_record_offset_no_read(r.get_record_header_offset(name), name, r.get_record_size(name), 64)
    t = r.get_storage_from_record("data/0", 6, tt.float32)
    np.testing.assert_array_equal(t.numpy(), [0.5, -1.25, 3.0, 7.0, -0.0, 96.0])
    with pytest.raises(RuntimeError, match=r"record size \(24 bytes\) does not match expected size \(8 bytes = 2 "
                                           r"elements \* 4 bytes/element\) for dtype Float"):
        r.get_storage_from_record("data/0", 2, tt.float32)
    with pytest.raises(RuntimeError, match="PytorchStreamReader failed locating file nope: file not found"):
        r.get_record("nope")
    with pytest.raises(RuntimeError, match="failed finding central directory"):
        tt.PyTorchFileReader(io.BytesIO(b"notzip"))


def test_file_writer_round_trip(tmp_path):
    buf = io.BytesIO()
    w = tt.PyTorchFileWriter(buf)
    assert w.archive_name() == "archive" and w.serialization_id() == ""
    payload = np.arange(5, dtype=np.int32)
    w.write_record("data.pkl", b"abc", 3)
    w.write_record("data/0", payload.tobytes(), payload.nbytes)
    with pytest.raises(RuntimeError, match="Tried to serialize file twice: archive/data/0"):
        w.write_record("data/0", b"x", 1)
    w.write_end_of_file()
    assert w.get_all_written_records() == {"data.pkl", "data/0", "version", "byteorder", ".data/serialization_id"}
    r = tt.PyTorchFileReader(io.BytesIO(buf.getvalue()))
    assert r.get_record("version") == b"3\n" and r.serialization_id() == w.serialization_id() != ""
    assert r.get_record_offset("data/0") % 64 == 0
    np.testing.assert_array_equal(r.get_storage_from_record("data/0", 5, tt.int32).numpy(), payload)
    path = tmp_path / "ckpt.pt"
    w = tt.PyTorchFileWriter(str(path))
    assert w.archive_name() == "ckpt"
    w.write_end_of_file()
    assert tt.PyTorchFileReader(str(path)).has_record("byteorder")


# ----- Tensor.grad_dtype -----------------------------------------------------------------------
@pytest.mark.parametrize("dtype, grad_dtype", [(tt.float32, tt.float64), (tt.bfloat16, tt.float32),
                                               (tt.float16, tt.float32), (tt.float64, tt.float32)])
def test_grad_dtype_casts_accumulated_gradients(dtype, grad_dtype):
    values = rng.standard_normal(3)
    x = tt.tensor(values, dtype=dtype, requires_grad=True)
    assert x.grad_dtype is dtype  # the default: the leaf's own dtype
    x.grad_dtype = grad_dtype
    assert x.grad_dtype is grad_dtype
    (x * x).sum().backward()
    assert x.grad.dtype is grad_dtype
    expected = 2 * x.detach().double().numpy()
    # computed in the leaf's dtype, then cast: the coarser of the two dtypes bounds the error
    coarser = dtype if dtype.itemsize <= grad_dtype.itemsize else grad_dtype
    assert_close(x.grad, expected, coarser)
    (x * x).sum().backward()  # a second backward adds in grad_dtype
    assert x.grad.dtype is grad_dtype
    assert_close(x.grad, 2 * expected, coarser)


def test_grad_dtype_none_and_errors():
    y = tt.ones(2, requires_grad=True)
    y.grad_dtype = None
    assert y.grad_dtype is None
    (y * 2).sum().backward()
    assert y.grad.dtype is tt.float32 and y.grad.tolist() == [2.0, 2.0]
    w = tt.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="grad_dtype can only be set on leaf tensors."):
        w.grad_dtype = tt.float64
    with pytest.raises(RuntimeError, match="grad_dtype can only be accessed on leaf tensors."):
        w.grad_dtype
    with pytest.raises(RuntimeError, match="grad_dtype must be a torch.dtype or None, but got int"):
        y.grad_dtype = 3
    assert tt.ones(2, dtype=tt.int64).grad_dtype is tt.int64
