"""NAdam, RAdam, Adamax, Adadelta, ASGD and Rprop (torch's single-tensor rules written with tensor
ops), each against a float64 NumPy transcription of torch's documented update rule over several
steps, dtypes and odd/empty sizes; state keys, state_dict round trips, torch's argument errors;
and the ``foreach``/``differentiable``/``capturable``/``decoupled_weight_decay`` flags of every
optimizer."""
import math

import numpy as np
import pytest

import tritensor as tt
from tritensor import optim

from tolerances import FLOAT_DTYPES, NP, assert_close

SIZES = [1, 37, 0]
STEPS = 4


def _param(n, dtype, seed):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(n).astype(NP[dtype])
    return tt.nn.Parameter(tt.tensor(w, dtype=dtype)), [rng.standard_normal(n).astype(NP[dtype]) for _ in range(STEPS)]


def _run(cls, p, grads, **kw):
    opt = cls([p], **kw)
    for g in grads:
        p.grad = tt.tensor(g, dtype=p.dtype)
        opt.step()
    return opt


def _d(g, w, maximize, weight_decay, coupled=True):
    d = -np.asarray(g, np.float64) if maximize else np.asarray(g, np.float64)
    return d + weight_decay * w if coupled else d


def nadam_ref(w, grads, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, momentum_decay=4e-3,
              decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas
    w = np.asarray(w, np.float64)
    m, v, mu_product = np.zeros_like(w), np.zeros_like(w), 1.0
    for t, g in enumerate(grads, 1):
        d = _d(g, w, maximize, weight_decay, not decoupled_weight_decay)
        if decoupled_weight_decay:
            w = w * (1 - lr * weight_decay)
        mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
        mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
        mu_product *= mu
        m = b1 * m + (1 - b1) * d
        v = b2 * v + (1 - b2) * d * d
        denom = np.sqrt(v / (1 - b2 ** t)) + eps
        w = w - lr * (1 - mu) / (1 - mu_product) * d / denom - lr * mu_next / (1 - mu_product * mu_next) * m / denom
    return w


def radam_ref(w, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled_weight_decay=False,
              maximize=False):
    b1, b2 = betas
    w = np.asarray(w, np.float64)
    m, v = np.zeros_like(w), np.zeros_like(w)
    rho_inf = 2 / (1 - b2) - 1
    for t, g in enumerate(grads, 1):
        d = _d(g, w, maximize, weight_decay, not decoupled_weight_decay)
        if decoupled_weight_decay:
            w = w * (1 - lr * weight_decay)
        m = b1 * m + (1 - b1) * d
        v = b2 * v + (1 - b2) * d * d
        m_hat = m / (1 - b1 ** t)
        rho_t = rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
        if rho_t > 5:
            r = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            w = w - lr * m_hat * r * math.sqrt(1 - b2 ** t) / (np.sqrt(v) + eps)
        else:
            w = w - lr * m_hat
    return w


def adamax_ref(w, grads, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, maximize=False):
    b1, b2 = betas
    w = np.asarray(w, np.float64)
    m, u = np.zeros_like(w), np.zeros_like(w)
    for t, g in enumerate(grads, 1):
        d = _d(g, w, maximize, weight_decay)
        m = b1 * m + (1 - b1) * d
        u = np.maximum(b2 * u, np.abs(d) + eps)
        w = w - lr / (1 - b1 ** t) * m / u
    return w


def adadelta_ref(w, grads, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, maximize=False):
    w = np.asarray(w, np.float64)
    v, u = np.zeros_like(w), np.zeros_like(w)
    for g in grads:
        d = _d(g, w, maximize, weight_decay)
        v = rho * v + (1 - rho) * d * d
        delta = np.sqrt(u + eps) / np.sqrt(v + eps) * d
        u = rho * u + (1 - rho) * delta * delta
        w = w - lr * delta
    return w


def asgd_ref(w, grads, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0.0, maximize=False):
    """Returns (param, ax): the parameter and its running average."""
    w = np.asarray(w, np.float64)
    ax, eta, mu = np.zeros_like(w), lr, 1.0
    for t, g in enumerate(grads, 1):
        d = _d(g, w, maximize, weight_decay)
        w = w * (1 - lambd * eta) - eta * d
        ax = w.copy() if mu == 1 else ax + (w - ax) * mu
        eta = lr / (1 + lambd * lr * t) ** alpha
        mu = 1 / max(1, t - t0)
    return w, ax


def rprop_ref(w, grads, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), maximize=False):
    w = np.asarray(w, np.float64)
    prev, size = np.zeros_like(w), np.full_like(w, lr)
    for g in grads:
        d = _d(g, w, maximize, 0.0)
        s = np.sign(d * prev)
        size = np.clip(size * np.where(s > 0, etas[1], np.where(s < 0, etas[0], 1.0)), *step_sizes)
        d = np.where(s < 0, 0.0, d)
        w = w - np.sign(d) * size
        prev = d
    return w


# name -> (class, reference, {case: kwargs}, state keys)
RULES = {
    "NAdam": (optim.NAdam, nadam_ref, {
        "plain": dict(), "l2": dict(lr=0.05, weight_decay=0.1, momentum_decay=0.01, maximize=True),
        "decoupled": dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True, betas=(0.8, 0.9))},
        {"step", "mu_product", "exp_avg", "exp_avg_sq"}),
    "RAdam": (optim.RAdam, radam_ref, {
        # beta2 = 0.5 makes rho_t > 5 from the first step: the rectified branch; 0.999 the plain one
        "plain": dict(lr=0.1), "rectified": dict(lr=0.1, betas=(0.9, 0.5), weight_decay=0.1, maximize=True),
        "decoupled": dict(lr=0.1, betas=(0.9, 0.5), weight_decay=0.2, decoupled_weight_decay=True)},
        {"step", "exp_avg", "exp_avg_sq"}),
    "Adamax": (optim.Adamax, adamax_ref, {
        "plain": dict(), "decay": dict(lr=0.1, weight_decay=0.1, betas=(0.5, 0.7), eps=1e-3, maximize=True)},
        {"step", "exp_avg", "exp_inf"}),
    "Adadelta": (optim.Adadelta, adadelta_ref, {
        "plain": dict(), "decay": dict(lr=0.5, rho=0.5, eps=1e-3, weight_decay=0.1, maximize=True)},
        {"step", "square_avg", "acc_delta"}),
    "ASGD": (optim.ASGD, lambda *a, **k: asgd_ref(*a, **k)[0], {
        "plain": dict(), "averaging": dict(lr=0.1, lambd=0.1, alpha=0.5, t0=2, weight_decay=0.1, maximize=True)},
        {"step", "eta", "mu", "ax"}),
    "Rprop": (optim.Rprop, rprop_ref, {
        "plain": dict(), "clamped": dict(lr=0.1, etas=(0.3, 1.5), step_sizes=(0.05, 0.12), maximize=True)},
        {"step", "prev", "step_size"}),
}
CASES = [(name, case) for name, (_, _, cases, _) in RULES.items() for case in cases]


# every case on a prime size; the one-element and empty sizes on each optimizer's last case
SIZED_CASES = [(name, case, 37) for name, case in CASES] + [
    (name, sorted(cases)[-1], n) for name, (_, _, cases, _) in RULES.items() for n in SIZES if n != 37]


@pytest.mark.parametrize("name,case,n", SIZED_CASES)
def test_matches_reference_over_steps(name, case, n):
    cls, ref, cases, keys = RULES[name]
    p, grads = _param(n, tt.float64, 0)
    w0 = p.detach().cpu().numpy().copy()
    opt = _run(cls, p, grads, **cases[case])
    assert_close(p.detach(), ref(w0, grads, **cases[case]), tt.float64)
    assert set(opt.state[p]) == keys and opt.state[p]["step"] == STEPS


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(RULES))
def test_one_step_each_dtype(name, dtype):
    cls, ref, cases, _ = RULES[name]
    kw = cases[sorted(cases)[-1]]
    p, grads = _param(37, dtype, 2)
    w0 = p.detach().cpu().numpy().astype(np.float64)
    _run(cls, p, grads[:1], **kw)
    assert p.dtype is dtype
    # a chain of a few elementwise ops, each rounding in the dtype
    assert_close(p.detach(), ref(w0, grads[:1], **kw), dtype, "rounded_terms", k=4)


def test_asgd_average():
    p, grads = _param(9, tt.float64, 3)
    w0 = p.detach().cpu().numpy().copy()
    opt = _run(optim.ASGD, p, grads, lr=0.1, lambd=0.1, t0=2)
    w, ax = asgd_ref(w0, grads, lr=0.1, lambd=0.1, t0=2)
    assert_close(opt.state[p]["ax"], ax, tt.float64)
    assert opt.state[p]["mu"] == 1 / (STEPS - 2)


def test_non_contiguous_grad_and_no_grad_skipped():
    """A transposed gradient is read as laid out as its parameter; a parameter without one is left alone."""
    rng = np.random.default_rng(5)
    w, g = rng.standard_normal((3, 4)), rng.standard_normal((4, 3))
    p, q = tt.nn.Parameter(tt.tensor(w)), tt.nn.Parameter(tt.tensor(w))
    opt = optim.NAdam([p, q], lr=0.1)
    p.grad = tt.tensor(g).t()
    opt.step()
    assert_close(p.detach(), nadam_ref(w, [g.T], lr=0.1), tt.float64)
    assert np.array_equal(q.detach().cpu().numpy(), w) and q not in opt.state


@pytest.mark.parametrize("name", sorted(RULES))
def test_state_dict_round_trip_continues_identically(name):
    cls, _, cases, _ = RULES[name]
    kw = cases[sorted(cases)[-1]]
    p, grads = _param(11, tt.float32, 4)
    q = tt.nn.Parameter(p.detach().clone())
    a = _run(cls, p, grads[:2], **kw)
    b = cls([q], **kw)
    b.load_state_dict(a.state_dict())
    q.data = p.detach().clone()
    for opt, param in ((a, p), (b, q)):
        param.grad = tt.tensor(grads[2])
        opt.step()
    assert np.array_equal(p.detach().cpu().numpy(), q.detach().cpu().numpy())
    assert b.state_dict()["param_groups"] == a.state_dict()["param_groups"]


# torch 2.13's param_groups keys, in its order (which its state_dict and repr carry)
GROUP_KEYS = {
    "NAdam": ["lr", "betas", "eps", "weight_decay", "momentum_decay", "decoupled_weight_decay", "maximize", "foreach",
              "capturable", "differentiable"],
    "RAdam": ["lr", "betas", "eps", "weight_decay", "maximize", "foreach", "capturable", "decoupled_weight_decay",
              "differentiable"],
    "Adamax": ["lr", "betas", "eps", "weight_decay", "foreach", "maximize", "differentiable", "capturable"],
    "Adadelta": ["lr", "rho", "eps", "weight_decay", "maximize", "capturable", "foreach", "differentiable"],
    "ASGD": ["lr", "lambd", "alpha", "t0", "weight_decay", "foreach", "maximize", "differentiable", "capturable"],
    "Rprop": ["lr", "etas", "step_sizes", "foreach", "maximize", "differentiable", "capturable"],
    "SGD": ["lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize", "foreach", "differentiable",
            "fused"],
    "Adam": ["lr", "betas", "eps", "weight_decay", "amsgrad", "maximize", "foreach", "capturable", "differentiable",
             "fused", "decoupled_weight_decay"],
    "AdamW": ["lr", "betas", "eps", "weight_decay", "amsgrad", "maximize", "foreach", "capturable", "differentiable",
              "fused", "decoupled_weight_decay"],
}


@pytest.mark.parametrize("name", sorted(GROUP_KEYS))
def test_param_group_keys_and_foreach_accepted(name):
    cls = getattr(optim, name)
    p = tt.nn.Parameter(tt.zeros(2))
    opt = cls([p], foreach=True)
    assert [k for k in opt.param_groups[0] if k != "params"] == GROUP_KEYS[name]
    assert opt.param_groups[0]["foreach"] is True
    with pytest.raises(NotImplementedError, match="differentiable=True is not supported"):
        cls([p], differentiable=True)


def test_foreach_changes_nothing():
    for cls, kw in ((optim.SGD, dict(lr=0.1, momentum=0.9)), (optim.Adam, dict(lr=0.1)), (optim.NAdam, {}),
                    (optim.Rprop, {}), (optim.RMSprop, {}), (optim.Adagrad, {})):
        p, grads = _param(5, tt.float32, 6)
        q = tt.nn.Parameter(p.detach().clone())
        _run(cls, p, grads, foreach=False, **kw)
        _run(cls, q, grads, foreach=True, **kw)
        assert np.array_equal(p.detach().cpu().numpy(), q.detach().cpu().numpy()), cls.__name__


def test_repr_as_torch():
    assert repr(optim.Rprop([tt.nn.Parameter(tt.zeros(2))])) == (
        "Rprop (\nParameter Group 0\n    capturable: False\n    differentiable: False\n    etas: (0.5, 1.2)\n"
        "    foreach: None\n    lr: 0.01\n    maximize: False\n    step_sizes: (1e-06, 50)\n)")


def test_capturable_refused_where_the_step_reads_host_scalars():
    p = tt.nn.Parameter(tt.zeros(2))
    for cls in (optim.NAdam, optim.RAdam, optim.Adamax, optim.Adadelta, optim.ASGD, optim.Rprop):
        with pytest.raises(NotImplementedError, match="capturable=True"):
            cls([p], capturable=True)
    optim.RMSprop([p], capturable=True)  # its rule reads no step count


def test_adam_decoupled_weight_decay_is_adamw():
    p, grads = _param(13, tt.float32, 7)
    q = tt.nn.Parameter(p.detach().clone())
    _run(optim.Adam, p, grads, lr=0.1, weight_decay=0.3, decoupled_weight_decay=True)
    _run(optim.AdamW, q, grads, lr=0.1, weight_decay=0.3)
    assert np.array_equal(p.detach().cpu().numpy(), q.detach().cpu().numpy())
    r, _ = _param(13, tt.float32, 7)
    _run(optim.Adam, r, grads, lr=0.1, weight_decay=0.3)
    assert not np.array_equal(p.detach().cpu().numpy(), r.detach().cpu().numpy())
    assert optim.AdamW([q]).defaults["decoupled_weight_decay"] is True


def test_errors_as_torch():
    ps = [tt.nn.Parameter(tt.zeros(2))]
    common = ((dict(lr=-1), "Invalid learning rate: -1"), (dict(eps=-1), "Invalid epsilon value: -1"),
              (dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
              (dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
              (dict(weight_decay=-1), "Invalid weight_decay value: -1"))
    for cls in (optim.NAdam, optim.RAdam, optim.Adamax):
        for kw, msg in common:
            with pytest.raises(ValueError, match=msg):
                cls(ps, **kw)
    for cls, kw, msg in ((optim.NAdam, dict(momentum_decay=-1), "Invalid momentum_decay value: -1"),
                         (optim.Adadelta, dict(rho=1.5), "Invalid rho value: 1.5"),
                         (optim.Adadelta, dict(eps=-1), "Invalid epsilon value: -1"),
                         (optim.ASGD, dict(weight_decay=-1), "Invalid weight_decay value: -1"),
                         (optim.Rprop, dict(etas=(1.5, 1.2)), "Invalid eta values: 1.5, 1.2"),
                         (optim.Rprop, dict(lr=-1), "Invalid learning rate: -1")):
        with pytest.raises(ValueError, match=msg):
            cls(ps, **kw)
    with pytest.raises(TypeError, match="params argument given to the optimizer should be an iterable"):
        optim.NAdam(ps[0])


@pytest.mark.parametrize("name", sorted(RULES))
def test_state_with_tensor_scalars_as_torch_saves_them(name):
    """torch keeps step (and NAdam's mu_product, ASGD's eta and mu) as 0-d tensors; a state dict in
    that form (a torch checkpoint read with tt.load) continues as the host-number one does."""
    cls, _, cases, _ = RULES[name]
    kw = cases[sorted(cases)[-1]]
    p, grads = _param(7, tt.float64, 8)
    q = tt.nn.Parameter(p.detach().clone())
    a = _run(cls, p, grads[:2], **kw)
    sd = a.state_dict()
    sd["state"] = {i: {k: (tt.tensor(float(v), dtype=tt.float64) if isinstance(v, (int, float)) else v)
                       for k, v in s.items()} for i, s in sd["state"].items()}
    b = cls([q], **kw)
    b.load_state_dict(sd)
    q.data = p.detach().clone()
    for opt, param in ((a, p), (b, q)):
        param.grad = tt.tensor(grads[2])
        opt.step()
    assert_close(q.detach(), p.detach().cpu().numpy(), tt.float64)
    assert b.state[q]["step"] == 3 and isinstance(b.state[q]["step"], int)
