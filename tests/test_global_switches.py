"""torch's global switches (core/switches.py, runtime/dtype.set_default_dtype): each is kept and read
back, the ones that steer something steer it (the default dtype reaches factories and nn layers,
the fp32 matmul precision reaches the matmul launcher and is backends.cuda.matmul.allow_tf32), and
bad values get torch's errors."""
import warnings

import pytest

import tritensor as tt
from tritensor.core.ops import matmul as core_matmul


@pytest.fixture
def restore():
    saved = (tt.get_default_dtype(), tt.get_float32_matmul_precision(), tt.get_deterministic_debug_mode(),
             tt.get_num_threads(), tt.get_num_interop_threads(), tt.is_warn_always_enabled(),
             tt.get_default_device())
    yield
    tt.set_default_dtype(saved[0])
    tt.set_float32_matmul_precision(saved[1])
    tt.set_deterministic_debug_mode(saved[2])
    tt.set_num_threads(saved[3])
    tt.set_num_interop_threads(saved[4])
    tt.set_warn_always(saved[5])
    tt.set_default_device(saved[6])


def test_set_default_dtype_reaches_every_factory_and_layer(restore):
    assert tt.get_default_dtype() is tt.float32
    tt.set_default_dtype(tt.float64)
    assert tt.get_default_dtype() is tt.float64
    for t in (tt.tensor([1.0]), tt.tensor(1.5), tt.zeros(2), tt.ones(2, 1), tt.empty(3), tt.arange(0., 1.),
              tt.randn(2), tt.rand(2), tt.full((2,), 1.5), tt.hann_window(3), tt.linspace(0, 1, 3), tt.eye(2),
              tt.as_tensor([1.5]), tt.Tensor([1.0]), tt.scalar_tensor(2), tt.tensor([1, 2]) / 2):
        assert t.dtype is tt.float64, t
    for layer in (tt.nn.Linear(2, 3), tt.nn.Conv2d(1, 2, 3), tt.nn.LayerNorm(3), tt.nn.Embedding(4, 2),
                  tt.nn.BatchNorm2d(2), tt.nn.LSTM(2, 3)):
        for t in list(layer.parameters()) + [b for b in layer.buffers() if b.dtype.is_floating_point]:
            assert t.dtype is tt.float64, (type(layer).__name__, t.dtype)
    assert tt.arange(3).dtype is tt.int64 and tt.tensor([1]).dtype is tt.int64
    tt.set_default_dtype(tt.float16)
    assert tt.zeros(1).dtype is tt.float16
    for bad in (tt.int32, tt.int64, tt.bool):
        with pytest.raises(TypeError, match="only floating-point types are supported as the default type"):
            tt.set_default_dtype(bad)
    assert tt.get_default_dtype() is tt.float16


def test_float32_matmul_precision_is_allow_tf32_and_steers_matmul(restore, monkeypatch):
    assert tt.get_float32_matmul_precision() == "highest" and tt.backends.cuda.matmul.allow_tf32 is False
    seen = []
    real = core_matmul._k.matmul

    def spy(*args, **kwargs):
        seen.append(kwargs.get("allow_tf32"))
        return real(*args, **kwargs)

    monkeypatch.setattr(core_matmul._k, "matmul", spy)
    a = tt.ones(2, 2)
    for precision, tf32 in (("high", True), ("medium", True), ("highest", False)):
        tt.set_float32_matmul_precision(precision)
        assert tt.get_float32_matmul_precision() == precision
        assert tt.backends.cuda.matmul.allow_tf32 is tf32
        seen.clear()
        (a @ a).cpu()
        assert seen == [tf32]
    tt.backends.cuda.matmul.allow_tf32 = True
    assert tt.get_float32_matmul_precision() == "high"
    tt.backends.cuda.matmul.allow_tf32 = False
    assert tt.get_float32_matmul_precision() == "highest"
    with pytest.warns(UserWarning, match="foo is not one of 'highest', 'high', or 'medium'"):
        tt.set_float32_matmul_precision("foo")
    assert tt.get_float32_matmul_precision() == "highest"


def test_deterministic_threads_warnings_and_types(restore):
    assert not tt.are_deterministic_algorithms_enabled() and tt.get_deterministic_debug_mode() == 0
    tt.use_deterministic_algorithms(True, warn_only=True)
    assert tt.are_deterministic_algorithms_enabled() and tt.is_deterministic_algorithms_warn_only_enabled()
    assert tt.get_deterministic_debug_mode() == 1
    tt.set_deterministic_debug_mode("error")
    assert tt.get_deterministic_debug_mode() == 2 and not tt.is_deterministic_algorithms_warn_only_enabled()
    tt.set_deterministic_debug_mode(0)
    assert not tt.are_deterministic_algorithms_enabled()
    with pytest.raises(TypeError, match="argument 'mode' \\(position 1\\) must be bool, not int"):
        tt.use_deterministic_algorithms(1)
    with pytest.raises(RuntimeError, match="invalid value of debug_mode, expected one of `default`, `warn`, `error`, "
                                           "but got foo"):
        tt.set_deterministic_debug_mode("foo")
    with pytest.raises(RuntimeError, match="invalid value of debug_mode, expected 0, 1, or 2, but got 5"):
        tt.set_deterministic_debug_mode(5)
    assert tt.get_num_threads() >= 1 and tt.get_num_interop_threads() >= 1
    tt.set_num_threads(3)
    tt.set_num_interop_threads(2)
    assert tt.get_num_threads() == 3 and tt.get_num_interop_threads() == 2
    with pytest.raises(RuntimeError, match="set_num_threads expects a positive integer"):
        tt.set_num_threads(0)
    tt.set_warn_always(True)
    assert tt.is_warn_always_enabled()
    with pytest.raises(RuntimeError, match="setWarnOnlyOnce expects a bool, but got int"):
        tt.set_warn_always(1)
    assert tt.set_flush_denormal(True) is False
    x = tt.ones(2)
    want = "tritensor.cuda.FloatTensor" if x.is_cuda else "tritensor.FloatTensor"
    assert tt.typename(x) == x.type() == want and tt.typename(3) == "int"
    assert tt.is_storage(x.untyped_storage()) and not tt.is_storage(x)


def test_set_default_tensor_type(restore):
    with pytest.warns(UserWarning, match="set_default_tensor_type\\(\\) is deprecated"):
        tt.set_default_tensor_type(tt.DoubleTensor)
    assert tt.get_default_dtype() is tt.float64 and tt.get_default_device() == tt.device("cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tt.set_default_tensor_type("torch.FloatTensor")
        assert tt.zeros(1).dtype is tt.float32
        with pytest.raises(TypeError, match="only floating-point types are supported as the default type"):
            tt.set_default_tensor_type(tt.LongTensor)
        with pytest.raises(TypeError, match="invalid type: 'torch.NoSuchTensor'"):
            tt.set_default_tensor_type("torch.NoSuchTensor")
