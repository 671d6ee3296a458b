"""Fused optimizers under GradScaler (PyTorch's ``fused=True`` path).

``SGD/Adam/AdamW(fused=True)`` get the scaler's found-inf flag and scale on the device: checked
here against the same optimizer without ``fused`` stepped through ``unscale_`` + host read +
``step``. The comparison is bit for bit: both paths multiply by the same fp32 reciprocal of the
scale and round the unscaled gradient to its dtype before the update, and the fused Adam's
device-side bias corrections (fp64, rounded to fp32) equal the host's at these steps. On inf/NaN
every parameter, state and gradient stays as it was (the gradients still scaled, the step count
not advanced), as torch's fused kernels leave them; after a step the gradients are unscaled in
place, as torch's fused kernels leave them (checked against torch 2.13 on CPU while writing this).
"""
import numpy as np
import pytest

import tritensor as tt
from tritensor import optim
from tritensor.amp import GradScaler
from tritensor.core.ops import optim as optim_ops
from tritensor.core.tensor import Tensor
from tritensor.triton_kernels import amp as amp_k
from tritensor.triton_kernels import optim as optim_k

from tolerances import NP

CASES = {
    "sgd": (optim.SGD, dict(lr=0.1)),
    "sgd_momentum_wd": (optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.2, weight_decay=0.01)),
    "sgd_nesterov_max": (optim.SGD, dict(lr=0.05, momentum=0.8, nesterov=True, maximize=True)),
    "adam": (optim.Adam, dict(lr=0.01)),
    "adam_wd_amsgrad": (optim.Adam, dict(lr=0.01, weight_decay=0.1, amsgrad=True, maximize=True)),
    "adamw": (optim.AdamW, dict(lr=0.01, betas=(0.8, 0.99))),
}
# The scaler lives where the tests' tensors are made (the default device: cuda in the device-tensor variant).
DEV = tt.get_default_device().type
# The multipliers of each step's loss; inf and NaN steps are skipped.
XS = [1.0, -0.5, np.inf, 2.0, np.nan, 0.75]


def _model(dtype, seed=0):
    rng = np.random.default_rng(seed)
    w = tt.nn.Parameter(tt.tensor(rng.standard_normal((3, 5)).astype(NP[dtype]), dtype=dtype))
    b = tt.nn.Parameter(tt.tensor(rng.standard_normal(7).astype(NP[dtype]), dtype=dtype))
    data = [tt.tensor(rng.standard_normal((3, 5)).astype(NP[dtype]), dtype=dtype),
            tt.tensor(rng.standard_normal(7).astype(NP[dtype]), dtype=dtype)]
    return [w, b], data


def _backward(scaler, params, data, x):
    loss = (params[0] * data[0]).sum() * x + (params[1] * data[1] * data[1]).sum()
    scaler.scale(loss).backward()


def _bits(t):
    return t.detach().numpy().copy()


def _state_bits(opt, p):
    return {k: (_bits(v) if isinstance(v, Tensor) else v) for k, v in opt.state.get(p, {}).items()}


def _assert_same(a, b):
    np.testing.assert_array_equal(_bits(a).view(np.uint8), _bits(b).view(np.uint8))


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype,init_scale", [(tt.float32, 2.0 ** 10), (tt.float32, 3.0), (tt.bfloat16, 2.0 ** 8)])
def test_fused_matches_unscale_then_step_bit_for_bit(case, dtype, init_scale):
    cls, kw = CASES[case]
    ref_params, data = _model(dtype)
    params, _ = _model(dtype)
    ref_opt, opt = cls(ref_params, **kw), cls(params, fused=True, **kw)
    assert opt._step_supports_amp_scaling and not hasattr(ref_opt, "_step_supports_amp_scaling")
    ref_scaler, scaler = (GradScaler(DEV, init_scale=init_scale, growth_interval=2) for _ in range(2))
    for x in XS:
        for ps, o, s in ((ref_params, ref_opt, ref_scaler), (params, opt, scaler)):
            o.zero_grad()
            _backward(s, ps, data, x)
        before = [_bits(p) for p in params]
        ref_scaler.step(ref_opt)
        scaler.step(opt)
        for p, rp, b in zip(params, ref_params, before):
            _assert_same(p, rp)
            if np.isfinite(x):
                _assert_same(p.grad, rp.grad)  # both unscaled in place
            else:
                np.testing.assert_array_equal(_bits(p), b)
        ref_scaler.update()
        scaler.update()
        assert scaler.get_scale() == ref_scaler.get_scale()
    for p, rp in zip(params, ref_params):
        for k, v in _state_bits(ref_opt, rp).items():
            mine = _state_bits(opt, p)[k]
            if k == "step":  # an int on the host path, a device fp32 tensor on the fused one
                assert float(mine) == v == 4
            else:
                np.testing.assert_array_equal(mine.view(np.uint8), v.view(np.uint8))


@pytest.mark.parametrize("cls,kw", [(optim.Adam, dict(lr=0.01, amsgrad=True)),
                                    (optim.SGD, dict(lr=0.1, momentum=0.9))])
@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_inf_step_changes_nothing_and_leaves_grads_scaled(cls, kw, bad):
    params, data = _model(tt.float32)
    opt = cls(params, fused=True, **kw)
    scaler = GradScaler(DEV, init_scale=64.0)
    _backward(scaler, params, data, 1.0)
    scaler.step(opt)
    scaler.update()
    opt.zero_grad()
    _backward(scaler, params, data, bad)
    grads = [_bits(p.grad) for p in params]
    before = [(_bits(p), _state_bits(opt, p)) for p in params]
    scaler.step(opt)
    for p, g, (w, st) in zip(params, grads, before):
        np.testing.assert_array_equal(_bits(p.grad), g)  # still scaled: the kernel wrote nothing
        np.testing.assert_array_equal(_bits(p).view(np.uint8), w.view(np.uint8))
        after = _state_bits(opt, p)
        assert after.keys() == st.keys()
        for k in st:
            np.testing.assert_array_equal(np.atleast_1d(after[k]).view(np.uint8), np.atleast_1d(st[k]).view(np.uint8))
    if cls is optim.Adam:
        assert float(opt.state[params[0]]["step"]) == 1.0  # not advanced
    scaler.update()
    assert scaler.get_scale() == 32.0


def test_fused_step_reads_nothing_on_the_host_and_launches(monkeypatch):
    params, data = _model(tt.float32)
    opt = optim.Adam(params, lr=0.01, fused=True)
    scaler = GradScaler(DEV)
    _backward(scaler, params, data, 1.0)
    launches = []
    for mod in (amp_k, optim_k):
        real = mod.launch
        monkeypatch.setattr(mod, "launch", lambda *a, real=real, **k: (launches.append(
            (a[0].fn.__name__, k.get("UNSCALE"))), real(*a, **k)))
    for name in ("item", "tolist", "numpy", "__float__", "__bool__"):
        monkeypatch.setattr(Tensor, name, lambda *a, **k: pytest.fail("host read"), raising=False)
    scaler.step(opt)
    scaler.update()
    monkeypatch.undo()
    # one read-only check over both grads, one launch advancing both step counts, one multi-tensor
    # update of both parameters, the scale update
    assert launches == [("_unscale_kernel", False), ("_advance_steps_kernel", None), ("_adam_multi_kernel", None),
                        ("_update_scale_kernel", None)]
    assert not hasattr(opt, "grad_scale") and not hasattr(opt, "found_inf")


def test_unscale_then_fused_step_and_noncontiguous_grad():
    """unscale_ first (to clip, say): the fused step gets found_inf but no scale; a non-contiguous
    gradient is unscaled in place by a fused step all the same."""
    params, data = _model(tt.float32)
    ref, _ = _model(tt.float32)
    opt, ref_opt = optim.AdamW(params, fused=True), optim.AdamW(ref)
    scaler, ref_scaler = GradScaler(DEV, init_scale=8.0), GradScaler(DEV, init_scale=8.0)
    for ps, o, s in ((params, opt, scaler), (ref, ref_opt, ref_scaler)):
        _backward(s, ps, data, 1.0)
        s.unscale_(o)
        s.step(o)
        s.update()
    for p, r in zip(params, ref):
        _assert_same(p, r)
    g = np.arange(15, dtype=np.float32).reshape(5, 3)
    params[0].grad = tt.tensor(g * 8.0).t()  # scaled, non-contiguous
    params[1].grad = None
    scaler.scale(tt.ones(1))
    scaler.step(opt)
    assert not params[0].grad.is_contiguous()
    np.testing.assert_array_equal(params[0].grad.numpy(), g.T)


def test_fused_without_scaler_and_state_dict_between_paths():
    params, _ = _model(tt.float32)
    ref, _ = _model(tt.float32)
    opt, ref_opt = optim.Adam(params, lr=0.1, fused=True), optim.Adam(ref, lr=0.1)
    rng = np.random.default_rng(1)
    for _ in range(3):
        for p, r in zip(params, ref):
            g = rng.standard_normal(p.shape).astype(np.float32)
            p.grad, r.grad = tt.tensor(g), tt.tensor(g)
        opt.step()
        ref_opt.step()
    for p, r in zip(params, ref):
        _assert_same(p, r)
    assert isinstance(opt.state[params[0]]["step"], Tensor) and opt.state[params[0]]["step"].dtype is tt.float32
    # a fused state loads into a plain optimizer and back; the count converts on the next step
    plain = optim.Adam(ref, lr=0.1)
    plain.load_state_dict(opt.state_dict())
    for r in ref:
        r.grad = tt.ones(*r.shape)
    plain.step()
    assert plain.state[ref[0]]["step"] == 4
    fused = optim.Adam(params, lr=0.1, fused=True)
    fused.load_state_dict(ref_opt.state_dict())
    for p in params:
        p.grad = tt.ones(*p.shape)
    fused.step()
    assert float(fused.state[params[0]]["step"]) == 4.0


def test_multi_program_and_empty_params_advance_the_count_once():
    """A parameter spanning several programs reads the count advanced once; an empty one still
    counts the step (the host path does)."""
    n = 2 * optim_k.elementwise_block(1 << 30) + 3  # three programs in either mode
    rng = np.random.default_rng(2)
    w0 = rng.standard_normal(n).astype(np.float32)
    big, ref = tt.nn.Parameter(tt.tensor(w0)), tt.nn.Parameter(tt.tensor(w0))
    empty, ref_empty = tt.nn.Parameter(tt.empty(0)), tt.nn.Parameter(tt.empty(0))
    opt, ref_opt = optim.Adam([big, empty], lr=0.01, fused=True), optim.Adam([ref, ref_empty], lr=0.01)
    scaler, ref_scaler = GradScaler(DEV, init_scale=4.0), GradScaler(DEV, init_scale=4.0)
    for bad in (False, True, False):
        g = rng.standard_normal(n).astype(np.float32) * 4.0
        if bad:
            g[-1] = np.inf
        for p, e, o, s in ((big, empty, opt, scaler), (ref, ref_empty, ref_opt, ref_scaler)):
            p.grad, e.grad = tt.tensor(g), tt.empty(0)
            s.scale(tt.ones(1))
            s.step(o)
            s.update()
        _assert_same(big, ref)
    assert float(opt.state[big]["step"]) == float(opt.state[empty]["step"]) == ref_opt.state[ref]["step"] == 2


def test_advance_steps_one_launch_for_many_counts(monkeypatch):
    steps = [tt.full((), float(i)) for i in range(1100)]  # two programs of the advance kernel
    launches = []
    real = optim_k.launch
    monkeypatch.setattr(optim_k, "launch", lambda *a, **k: (launches.append(a[0].fn.__name__), real(*a, **k)))
    optim_ops.advance_steps_(steps, tt.zeros(()))
    optim_ops.advance_steps_(steps, tt.ones(()))  # found_inf: unchanged
    optim_ops.advance_steps_(steps[::2])
    assert launches == ["_advance_steps_kernel"] * 3
    np.testing.assert_array_equal([float(t) for t in steps], [i + 1 + (i % 2 == 0) for i in range(1100)])


def test_sgd_skipped_first_step_then_momentum():
    """A skipped first step leaves a zero momentum buffer; with dampening 0 the next step is the
    first step unskipped would have been (b = d)."""
    (p,), (q,) = [tt.nn.Parameter(tt.tensor([1.0, -2.0]))], [tt.nn.Parameter(tt.tensor([1.0, -2.0]))]
    opt, ref = optim.SGD([p], lr=0.1, momentum=0.9, fused=True), optim.SGD([q], lr=0.1, momentum=0.9)
    scaler = GradScaler(DEV, init_scale=4.0)
    p.grad = tt.tensor([np.inf, 4.0])
    scaler.scale(tt.ones(1))
    scaler.step(opt)
    scaler.update()
    np.testing.assert_array_equal(opt.state[p]["momentum_buffer"].numpy(), [0.0, 0.0])
    p.grad, q.grad = tt.tensor([2.0, 4.0]), tt.tensor([1.0, 2.0])  # scale is now 2
    scaler.step(opt)
    ref.step()
    _assert_same(p, q)


def test_errors():
    p = tt.nn.Parameter(tt.ones(3))
    opt = optim.SGD([p], lr=0.1)
    p.grad = tt.ones(3)
    opt.found_inf = tt.zeros(())
    with pytest.raises(AssertionError, match="Expected grad_scale and found_inf to be None"):
        opt.step()
    g, buf = tt.ones(3), tt.zeros(3)
    with pytest.raises(ValueError, match="'found_inf' must be a one-element float32 tensor"):
        optim_ops.sgd_step_(p.detach(), g, buf, lr=0.1, weight_decay=0, momentum=0, dampening=0, nesterov=False,
                            maximize=False, first=True, found_inf=tt.zeros(2))
    with pytest.raises(TypeError, match="'grad_scale' must be a tensor"):
        optim_ops.adam_step_(p.detach(), g, buf, tt.zeros(3), step=1, lr=0.1, beta1=0.9, beta2=0.9, eps=1e-8,
                             weight_decay=0, decoupled=False, maximize=False, grad_scale=2.0)
    with pytest.raises(ValueError, match="'step' must be a one-element float32"):
        optim_ops.adam_step_(p.detach(), g, buf, tt.zeros(3), step=tt.ones((), dtype=tt.int32), lr=0.1, beta1=0.9,
                             beta2=0.9, eps=1e-8, weight_decay=0, decoupled=False, maximize=False)
    with pytest.raises(ValueError, match="'step' must be an int counting from 1"):
        optim_ops.adam_step_(p.detach(), g, buf, tt.zeros(3), step=0, lr=0.1, beta1=0.9, beta2=0.9, eps=1e-8,
                             weight_decay=0, decoupled=False, maximize=False)
    with pytest.raises(ValueError, match="'steps\\[1\\]' must be a one-element float32"):
        optim_ops.advance_steps_([tt.zeros(()), tt.zeros((), dtype=tt.int32)])
    with pytest.raises(TypeError, match="'steps\\[0\\]' must be a tensor"):
        optim_ops.advance_steps_([1.0])
    np.testing.assert_array_equal(p.detach().numpy(), np.ones(3))  # nothing ran


@pytest.mark.parametrize("cls", [optim.Adam, optim.AdamW])
def test_capturable_keeps_the_count_on_the_device_and_reads_nothing(cls, monkeypatch):
    """capturable=True (torch's, for CUDA graphs): the same updates bit for bit as the host-count
    path, the count a float32 device tensor advanced by a kernel, no host read in a step."""
    params, _ = _model(tt.float32)
    ref, _ = _model(tt.float32)
    opt, ref_opt = cls(params, lr=0.05, amsgrad=True, capturable=True), cls(ref, lr=0.05, amsgrad=True)
    assert opt.param_groups[0]["capturable"] is True and ref_opt.param_groups[0]["capturable"] is False
    rng = np.random.default_rng(2)
    for i in range(3):
        for p, r in zip(params, ref):
            g = rng.standard_normal(p.shape).astype(np.float32)
            p.grad, r.grad = tt.tensor(g), tt.tensor(g)
        if i == 2:  # the third step (state made): no host read at all
            for name in ("item", "tolist", "numpy", "__float__", "__bool__"):
                monkeypatch.setattr(Tensor, name, lambda *a, **k: pytest.fail("host read"), raising=False)
        opt.step()
        monkeypatch.undo()
        ref_opt.step()
    for p, r in zip(params, ref):
        _assert_same(p, r)
    step = opt.state[params[0]]["step"]
    assert isinstance(step, Tensor) and step.dtype is tt.float32 and float(step) == 3.0
