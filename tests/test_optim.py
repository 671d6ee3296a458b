"""Optimisers: each fused update kernel (triton_kernels/optim.py) against a float64 NumPy
reference of PyTorch's update rule, over dtypes, odd and empty sizes and several steps;
argument errors; zero_grad and state dicts."""
import numpy as np
import pytest

import tritensor as tt
from tritensor import optim

from tolerances import FLOAT_DTYPES, NP, assert_close

SIZES = [1, 37, 0, 2 * 3 * 5]


def make_param(n, dtype, seed):
    rng = np.random.default_rng(seed)
    p = tt.nn.Parameter(tt.tensor(rng.standard_normal(n).astype(NP[dtype]), dtype=dtype))
    grads = [rng.standard_normal(n).astype(NP[dtype]) for _ in range(3)]
    return p, grads


def f64(a):
    return np.asarray(a).astype(np.float64)


def sgd_ref(w, grads, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
    w, buf = f64(w), None
    for g in grads:
        d = f64(g) * (-1 if maximize else 1) + weight_decay * w
        if momentum:
            buf = d if buf is None else momentum * buf + (1 - dampening) * d
            d = d + momentum * buf if nesterov else buf
        w = w - lr * d
    return w


def adam_ref(w, grads, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled=False, amsgrad=False,
             store=None):
    """PyTorch's Adam/AdamW step in float64. ``store``: the NumPy dtype the parameter and states are
    kept in between steps (the kernel rounds each on store), so several low-precision steps can be
    compared at the dtype's own tolerance."""
    rnd = (lambda a: f64(a.astype(store))) if store is not None else (lambda a: a)
    w = f64(w)
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    vmax = np.zeros_like(w)
    for t, g in enumerate(grads, 1):
        d = f64(g)
        if decoupled:
            w = w * (1 - lr * weight_decay)
        else:
            d = d + weight_decay * w
        m = rnd(betas[0] * m + (1 - betas[0]) * d)
        v = rnd(betas[1] * v + (1 - betas[1]) * d * d)
        if amsgrad:  # torch: torch.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq); denom uses it
            vmax = np.maximum(vmax, v)
        w = rnd(w - lr / (1 - betas[0] ** t) * m / (np.sqrt(vmax if amsgrad else v) / np.sqrt(1 - betas[1] ** t)
                                                    + eps))
    return w


def run(opt_cls, p, grads, **kw):
    opt = opt_cls([p], **kw)
    for g in grads:
        p.grad = tt.tensor(g, dtype=p.dtype)
        opt.step()
    return opt


SGD_CASES = {
    "plain": dict(lr=0.1), "momentum": dict(lr=0.1, momentum=0.9), "dampening": dict(lr=0.1, momentum=0.9, dampening=0.3),
    "nesterov": dict(lr=0.05, momentum=0.8, nesterov=True), "weight_decay": dict(lr=0.1, momentum=0.5, weight_decay=0.1),
    "maximize": dict(lr=0.1, maximize=True),
}


@pytest.mark.parametrize("case", sorted(SGD_CASES))
@pytest.mark.parametrize("n", SIZES)
def test_sgd_matches_reference_over_steps(case, n):
    p, grads = make_param(n, tt.float64, 0)
    w0 = p.detach().numpy().copy()
    opt = run(optim.SGD, p, grads, **SGD_CASES[case])
    assert_close(p.detach(), sgd_ref(w0, grads, **SGD_CASES[case]), tt.float64)
    assert p.is_leaf and p.grad_fn is None
    if SGD_CASES[case].get("momentum"):
        assert "momentum_buffer" in opt.state[p]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_sgd_one_step_each_dtype(dtype):
    p, grads = make_param(37, dtype, 1)
    w0 = p.detach().numpy().copy()
    run(optim.SGD, p, grads[:1], lr=0.1, momentum=0.9, weight_decay=0.01)
    assert p.dtype is dtype
    assert_close(p.detach(), sgd_ref(w0, grads[:1], lr=0.1, momentum=0.9, weight_decay=0.01), dtype)


ADAM_CASES = {
    "adam": (optim.Adam, dict(lr=0.01), False), "adam_wd": (optim.Adam, dict(lr=0.01, weight_decay=0.1), False),
    "adamw": (optim.AdamW, dict(lr=0.01), True), "adamw_betas": (optim.AdamW, dict(lr=0.02, betas=(0.8, 0.9),
                                                                                 weight_decay=0.05), True),
}


@pytest.mark.parametrize("case", sorted(ADAM_CASES))
@pytest.mark.parametrize("n", SIZES)
def test_adam_matches_reference_over_steps(case, n):
    cls, kw, decoupled = ADAM_CASES[case]
    p, grads = make_param(n, tt.float64, 2)
    w0 = p.detach().numpy().copy()
    opt = run(cls, p, grads, **kw)
    ref_kw = dict(kw)
    if decoupled:
        ref_kw.setdefault("weight_decay", 1e-2)  # AdamW's default
    assert_close(p.detach(), adam_ref(w0, grads, decoupled=decoupled, **ref_kw), tt.float64)
    if n:
        assert opt.state[p]["step"] == 3


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_adam_one_step_each_dtype(dtype):
    p, grads = make_param(37, dtype, 3)
    w0 = p.detach().numpy().copy()
    run(optim.AdamW, p, grads[:1], lr=0.01)
    # one step moves each weight by ~lr: compare the change, not just the (much larger) weight
    ref = adam_ref(w0, grads[:1], lr=0.01, weight_decay=1e-2, decoupled=True)
    assert_close(p.detach(), ref, dtype)


@pytest.mark.parametrize("cls", [optim.Adam, optim.AdamW], ids=lambda c: c.__name__)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_amsgrad_matches_reference_over_steps(cls, dtype):
    rng = np.random.default_rng(7)
    n = 37
    w0 = rng.standard_normal(n).astype(NP[dtype])
    g = rng.standard_normal(n)
    # shrinking then growing gradients: v falls below its running max, so amsgrad changes the update
    grads = [(g * s).astype(NP[dtype]) for s in (3.0, 0.3, 0.1, 0.5)]
    kw = dict(lr=0.1, betas=(0.8, 0.9), weight_decay=0.05)
    p = tt.nn.Parameter(tt.tensor(w0, dtype=dtype))
    opt = run(cls, p, grads, amsgrad=True, **kw)
    decoupled = cls is optim.AdamW
    store = None if dtype is tt.float64 else NP[dtype]
    ref = adam_ref(w0, grads, decoupled=decoupled, amsgrad=True, store=store, **kw)
    assert_close(p.detach(), ref, dtype)
    plain = adam_ref(w0, grads, decoupled=decoupled, amsgrad=False, store=store, **kw)
    with pytest.raises(AssertionError):  # the case really exercises the max
        assert_close(ref, plain, dtype)
    st = opt.state[p]
    assert set(st) == {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"} and st["max_exp_avg_sq"].dtype is dtype
    v = st["exp_avg_sq"].numpy().astype(np.float64)
    assert (st["max_exp_avg_sq"].numpy().astype(np.float64) >= v).all()
    assert opt.param_groups[0]["amsgrad"] is True


def test_amsgrad_state_dict_round_trip():
    rng = np.random.default_rng(8)
    w0 = rng.standard_normal(5)
    grads = [rng.standard_normal(5) * s for s in (2.0, 0.2, 0.1, 1.0)]
    kw = dict(lr=0.05, amsgrad=True)
    p = tt.nn.Parameter(tt.tensor(w0))
    opt = run(optim.Adam, p, grads[:2], **kw)
    sd = opt.state_dict()
    assert "max_exp_avg_sq" in sd["state"][0] and sd["param_groups"][0]["amsgrad"] is True
    p2 = tt.nn.Parameter(p.detach().clone())
    opt2 = optim.Adam([p2], lr=0.05)  # amsgrad=False here: the loaded group turns it on
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["amsgrad"] is True
    assert_close(opt2.state[p2]["max_exp_avg_sq"], opt.state[p]["max_exp_avg_sq"].numpy(), tt.float64)
    for g in grads[2:]:
        p2.grad = tt.tensor(g)
        opt2.step()
    assert_close(p2.detach(), adam_ref(w0, grads, lr=0.05, amsgrad=True), tt.float64)


def test_params_without_grad_are_skipped_and_noncontiguous_grad_is_fine():
    a = tt.nn.Parameter(tt.ones(4))
    b = tt.nn.Parameter(tt.ones(2, 3))
    opt = optim.SGD([a, b], lr=1.0)
    b.grad = tt.ones(3, 2).t()  # non-contiguous gradient
    opt.step()
    assert_close(a.detach(), np.ones(4), tt.float32)
    assert_close(b.detach(), np.zeros((2, 3)), tt.float32)


def test_param_groups_and_zero_grad_and_state_dict():
    a, b = tt.nn.Parameter(tt.ones(3)), tt.nn.Parameter(tt.ones(2))
    opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1, momentum=0.9)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[1]["lr"] == 0.5
    a.grad, b.grad = tt.ones(3), tt.ones(2)
    opt.step()
    sd = opt.state_dict()
    assert set(sd["state"]) == {0, 1} and sd["param_groups"][1]["params"] == [1]
    opt.zero_grad()
    assert a.grad is None and b.grad is None
    a.grad = tt.ones(3)
    opt.zero_grad(set_to_none=False)
    assert_close(a.grad, np.zeros(3), tt.float32)
    a2, b2 = tt.nn.Parameter(tt.ones(3)), tt.nn.Parameter(tt.ones(2))
    opt2 = optim.SGD([{"params": [a2]}, {"params": [b2]}], lr=0.1, momentum=0.9)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[1]["lr"] == 0.5
    assert_close(opt2.state[b2]["momentum_buffer"], opt.state[b]["momentum_buffer"].numpy(), tt.float32)


def test_optimizer_errors():
    p = tt.nn.Parameter(tt.ones(2))
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.SGD([p], lr=-1)
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum and zero dampening"):
        optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1"):
        optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.Adam([])
    with pytest.raises(TypeError, match="iterable of Tensors"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([p * 2], lr=0.1)
    opt = optim.SGD([p], lr=0.1)
    p.grad = tt.ones(3)
    with pytest.raises(RuntimeError, match="doesn't match its parameter"):
        opt.step()
    assert_close(p.detach(), np.ones(2), tt.float32)  # nothing written


def test_step_closure():
    p = tt.nn.Parameter(tt.tensor([2.0]))
    opt = optim.SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert float(loss) == 4.0
    assert_close(p.detach(), [1.0], tt.float32)
