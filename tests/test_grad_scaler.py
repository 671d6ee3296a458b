"""GradScaler (tritensor.amp.GradScaler) against a float64 NumPy model of PyTorch's scaler rules."""
import numpy as np
import pytest

import tritensor as tt
from tritensor.amp import GradScaler
from tritensor.core.tensor import Tensor
from tritensor.triton_kernels import amp as amp_k

# The scaler lives where the tests' tensors are made (the default device: cuda in the device-tensor variant).
DEV = tt.get_default_device().type


class NumpyScaler:
    """PyTorch's rules in float64: skip on inf/NaN, back off, grow after growth_interval clean steps."""

    def __init__(self, scale, gf, bf, gi):
        self.scale, self.tracker, self.gf, self.bf, self.gi = float(scale), 0, gf, bf, gi

    def update(self, found):
        if found:
            self.scale *= self.bf
            self.tracker = 0
        elif self.tracker + 1 == self.gi:
            self.scale *= self.gf
            self.tracker = 0
        else:
            self.tracker += 1


def _param(vals):
    return tt.nn.Parameter(tt.tensor(np.asarray(vals, dtype=np.float32)))


def _backward(scaler, p, x):
    loss = (p * tt.tensor(np.asarray(x, dtype=np.float32))).sum()
    scaler.scale(loss).backward()


STEPS = [[1.0, 2.0, -3.0], [0.5, 0.25, 1.0], [np.inf, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 2.0, 4.0],
         [1.0, np.nan, 1.0], [2.0, 2.0, 2.0], [-1.0, 0.5, 0.5], [1.0, 1.0, 1.0]]


def test_several_steps_with_inf_and_nan_against_numpy_model():
    p = _param([0.1, 0.2, 0.3])
    opt = tt.optim.SGD([p], lr=0.125)
    scaler = GradScaler(DEV, init_scale=16.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=2)
    ref, p64 = NumpyScaler(16.0, 2.0, 0.5, 2), np.array([0.1, 0.2, 0.3], dtype=np.float32).astype(np.float64)
    for x in STEPS:
        opt.zero_grad()
        _backward(scaler, p, x)
        g = np.asarray(x, dtype=np.float64)
        np.testing.assert_array_equal(p.grad.numpy(), (g * ref.scale).astype(np.float32))  # scaled grads
        before = p.detach().numpy().copy()
        scaler.step(opt)
        found = not np.all(np.isfinite(g))
        if found:
            np.testing.assert_array_equal(p.detach().numpy(), before)  # bit for bit unchanged
        else:
            p64 = p64 - 0.125 * g
            np.testing.assert_allclose(p.detach().numpy(), p64, rtol=1e-6, atol=1e-7)
            np.testing.assert_array_equal(p.grad.numpy(), g.astype(np.float32))  # unscaled in place
        scaler.update()
        ref.update(found)
        assert scaler.get_scale() == ref.scale and scaler._get_growth_tracker() == ref.tracker


def test_unscale_then_clip_then_step_and_accumulation():
    p = _param([1.0, 1.0])
    opt = tt.optim.SGD([p], lr=1.0)
    scaler = GradScaler(DEV, init_scale=1024.0)
    _backward(scaler, p, [1.0, 2.0])
    _backward(scaler, p, [1.0, 2.0])  # accumulated over two micro-batches
    scaler.unscale_(opt)
    np.testing.assert_array_equal(p.grad.numpy(), [2.0, 4.0])
    with tt.no_grad():
        p.grad.mul_(0.5)  # "clipping" on the true gradients
    scaler.step(opt)  # no second unscale
    np.testing.assert_array_equal(p.detach().numpy(), [0.0, -1.0])
    scaler.update()


def test_several_optimizers_one_scaler():
    a, b = _param([1.0]), _param([1.0])
    oa, ob = tt.optim.SGD([a], lr=1.0), tt.optim.SGD([b], lr=1.0)
    scaler = GradScaler(DEV, init_scale=8.0, growth_interval=1)
    loss = (a * 2.0).sum() + (b * float("inf")).sum()
    scaler.scale(loss).backward()
    scaler.step(oa)
    scaler.step(ob)
    assert a.detach().numpy()[0] == -1.0 and b.detach().numpy()[0] == 1.0  # each optimizer its own flag
    scaler.update()
    assert scaler.get_scale() == 4.0  # the combined flags back off


def test_no_host_read_in_unscale_and_update(monkeypatch):
    p = _param([1.0, 2.0])
    opt = tt.optim.SGD([p], lr=1.0)
    scaler = GradScaler(DEV)
    _backward(scaler, p, [1.0, 1.0])
    launches = []
    real = amp_k.launch
    monkeypatch.setattr(amp_k, "launch", lambda *a, **k: (launches.append(a[0].fn.__name__), real(*a, **k)))
    for name in ("item", "tolist", "numpy", "__float__", "__bool__"):
        monkeypatch.setattr(Tensor, name, lambda *a, **k: pytest.fail("host read"), raising=False)
    scaler.unscale_(opt)
    monkeypatch.undo()
    scaler.step(opt)
    monkeypatch.setattr(amp_k, "launch", lambda *a, **k: (launches.append(a[0].fn.__name__), real(*a, **k)))
    monkeypatch.setattr(Tensor, "item", lambda *a, **k: pytest.fail("host read"))
    scaler.update()
    assert launches == ["_unscale_kernel", "_update_scale_kernel"]


def test_update_new_scale_getters_setters_and_disabled():
    scaler = GradScaler(DEV, init_scale=4.0)
    assert scaler.get_scale() == 4.0 and scaler.is_enabled()
    scaler.scale(tt.ones(1))
    scaler.update(32.0)
    assert scaler.get_scale() == 32.0
    scaler.update(tt.tensor([8.0]))
    assert scaler.get_scale() == 8.0
    scaler.set_growth_factor(3.0)
    scaler.set_backoff_factor(0.25)
    scaler.set_growth_interval(7)
    assert (scaler.get_growth_factor(), scaler.get_backoff_factor(), scaler.get_growth_interval()) == (3.0, 0.25, 7)
    off = GradScaler(DEV, enabled=False)
    x = tt.ones(2)
    assert off.scale(x) is x and off.get_scale() == 1.0 and off.state_dict() == {} and not off.is_enabled()
    if not tt.cuda.is_available():
        with pytest.warns(UserWarning, match="CUDA is not available"):
            assert not GradScaler().is_enabled()


def test_scale_nested_outputs():
    scaler = GradScaler(DEV, init_scale=4.0)
    out = scaler.scale([tt.ones(2), (tt.full((1,), 2.0), [tt.ones(1).bfloat16()])])
    assert isinstance(out, list) and isinstance(out[1], tuple) and isinstance(out[1][1], list)
    assert out[0].tolist() == [4.0, 4.0] and out[1][0].tolist() == [8.0] and out[1][1][0].float().tolist() == [4.0]


def test_state_dict_round_trip():
    p = _param([1.0])
    opt = tt.optim.SGD([p], lr=0.1)
    s = GradScaler(DEV, init_scale=64.0, growth_factor=4.0, backoff_factor=0.25, growth_interval=3)
    for x in ([1.0], [1.0], [np.inf], [1.0]):
        opt.zero_grad()
        _backward(s, p, x)
        s.step(opt)
        s.update()
    sd = s.state_dict()
    assert sd == {"scale": 16.0, "growth_factor": 4.0, "backoff_factor": 0.25, "growth_interval": 3,
                  "_growth_tracker": 1}
    fresh = GradScaler(DEV)
    fresh.load_state_dict(sd)
    assert fresh.state_dict() == sd
    used = GradScaler(DEV)
    used.scale(tt.ones(1))  # already holds device scale/tracker tensors
    used.load_state_dict(sd)
    assert used.state_dict() == sd and used._scale.item() == 16.0
    with pytest.raises(RuntimeError, match="empty"):
        fresh.load_state_dict({})


def test_errors_before_any_kernel(monkeypatch):
    p = _param([1.0])
    opt = tt.optim.SGD([p], lr=0.1)
    scaler = GradScaler(DEV)
    with pytest.raises(TypeError, match="floating"):
        scaler.scale([tt.ones(1), tt.ones(1, dtype=tt.int64)])
    assert scaler._scale is None  # nothing was scaled, nothing allocated
    with pytest.raises(TypeError, match="Tensor"):
        scaler.scale(3.0)
    with pytest.raises(RuntimeError, match="unsupported device"):
        GradScaler("xpu")
    with pytest.raises(ValueError, match="growth_factor"):
        GradScaler(DEV, growth_factor=1.0)
    with pytest.raises(AssertionError, match="_scale is None"):
        scaler.unscale_(opt)
    _backward(scaler, p, [1.0])
    scaler.unscale_(opt)
    monkeypatch.setattr(amp_k, "launch", lambda *a, **k: pytest.fail("a kernel ran"))
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    monkeypatch.undo()
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called since the last update"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="Closure"):
        scaler.step(opt, closure=lambda: None)
    scaler.update()
    half = tt.nn.Parameter(tt.ones(2).half())
    oh = tt.optim.SGD([half], lr=0.1)
    scaler.scale((half * 1.0).sum()).backward()
    with pytest.raises(ValueError, match="FP16 gradients"):
        scaler.unscale_(oh)
