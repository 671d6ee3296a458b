"""RMSprop and Adagrad: each fused update kernel against a float64 NumPy transcription of
torch's update rule over several steps, dtypes, odd and empty sizes; state keys, state_dict round
trips and torch's argument errors."""
import numpy as np
import pytest

import tritensor as tt
from tritensor import optim

from tolerances import FLOAT_DTYPES, NP, assert_close

SIZES = [1, 37, 0]


def _param(n, dtype, seed):
    rng = np.random.default_rng(seed)
    p = tt.nn.Parameter(tt.tensor(rng.standard_normal(n).astype(NP[dtype]), dtype=dtype))
    return p, [rng.standard_normal(n).astype(NP[dtype]) for _ in range(3)]


def _run(cls, p, grads, **kw):
    opt = cls([p], **kw)
    for g in grads:
        p.grad = tt.tensor(g, dtype=p.dtype)
        opt.step()
    return opt


def rmsprop_ref(w, grads, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False,
                maximize=False):
    w = np.asarray(w, np.float64)
    sq, ga, buf = np.zeros_like(w), np.zeros_like(w), np.zeros_like(w)
    for g in grads:
        d = np.asarray(g, np.float64) * (-1 if maximize else 1) + weight_decay * w
        sq = alpha * sq + (1 - alpha) * d * d
        if centered:
            ga = ga + (1 - alpha) * (d - ga)
            avg = np.sqrt(sq - ga * ga) + eps
        else:
            avg = np.sqrt(sq) + eps
        if momentum > 0:
            buf = momentum * buf + d / avg
            w = w - lr * buf
        else:
            w = w - lr * d / avg
    return w


def adagrad_ref(w, grads, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10,
                maximize=False):
    w = np.asarray(w, np.float64)
    s = np.full_like(w, initial_accumulator_value)
    for t, g in enumerate(grads, 1):
        d = np.asarray(g, np.float64) * (-1 if maximize else 1) + weight_decay * w
        clr = lr / (1 + (t - 1) * lr_decay)
        s = s + d * d
        w = w - clr * d / (np.sqrt(s) + eps)
    return w


RMS_CASES = {"plain": dict(), "momentum": dict(lr=0.02, momentum=0.9), "centered": dict(centered=True, alpha=0.9),
             "all": dict(lr=0.005, momentum=0.5, centered=True, weight_decay=0.1, maximize=True)}
ADA_CASES = {"plain": dict(), "decay": dict(lr=0.1, lr_decay=0.5, weight_decay=0.05),
             "init_acc": dict(initial_accumulator_value=0.3, eps=1e-6, maximize=True)}


@pytest.mark.parametrize("case", sorted(RMS_CASES))
@pytest.mark.parametrize("n", SIZES)
def test_rmsprop_matches_reference_over_steps(case, n):
    p, grads = _param(n, tt.float64, 0)
    w0 = p.detach().numpy().copy()
    opt = _run(optim.RMSprop, p, grads, **RMS_CASES[case])
    assert_close(p.detach(), rmsprop_ref(w0, grads, **RMS_CASES[case]), tt.float64)
    kw = RMS_CASES[case]
    expected = {"step", "square_avg"} | ({"momentum_buffer"} if kw.get("momentum") else set()) | (
        {"grad_avg"} if kw.get("centered") else set())
    assert set(opt.state[p]) == expected and opt.state[p]["step"] == 3


@pytest.mark.parametrize("case", sorted(ADA_CASES))
@pytest.mark.parametrize("n", SIZES)
def test_adagrad_matches_reference_over_steps(case, n):
    p, grads = _param(n, tt.float64, 1)
    w0 = p.detach().numpy().copy()
    opt = _run(optim.Adagrad, p, grads, **ADA_CASES[case])
    assert_close(p.detach(), adagrad_ref(w0, grads, **ADA_CASES[case]), tt.float64)
    assert set(opt.state[p]) == {"step", "sum"} and opt.state[p]["step"] == 3


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_one_step_each_dtype(dtype):
    p, grads = _param(37, dtype, 2)
    w0 = p.detach().numpy().copy()
    _run(optim.RMSprop, p, grads[:1], lr=0.01, momentum=0.9, centered=True)
    assert p.dtype is dtype
    assert_close(p.detach(), rmsprop_ref(w0, grads[:1], lr=0.01, momentum=0.9, centered=True), dtype)
    q, grads = _param(37, dtype, 3)
    w0 = q.detach().numpy().copy()
    _run(optim.Adagrad, q, grads[:1], lr=0.05)
    assert_close(q.detach(), adagrad_ref(w0, grads[:1], lr=0.05), dtype)


def test_state_dict_round_trip_continues_identically():
    p, grads = _param(11, tt.float32, 4)
    q = tt.nn.Parameter(p.detach().clone())
    a = _run(optim.RMSprop, p, grads[:2], lr=0.01, momentum=0.9)
    b = optim.RMSprop([q], lr=0.01, momentum=0.9)
    b.load_state_dict(a.state_dict())
    q.data = p.detach().clone()
    for opt, param in ((a, p), (b, q)):
        param.grad = tt.tensor(grads[2])
        opt.step()
    assert np.array_equal(p.detach().numpy(), q.detach().numpy())
    ada = optim.Adagrad([tt.nn.Parameter(tt.zeros(3))], initial_accumulator_value=0.5)
    sd = ada.state_dict()
    assert sd["state"][0]["sum"].tolist() == [0.5] * 3 and sd["param_groups"][0]["lr_decay"] == 0


def test_errors_as_torch():
    ps = [tt.nn.Parameter(tt.zeros(2))]
    for kw, msg in ((dict(lr=-1), "Invalid learning rate: -1"), (dict(eps=-1), "Invalid epsilon value: -1"),
                    (dict(momentum=-1), "Invalid momentum value: -1"),
                    (dict(weight_decay=-1), "Invalid weight_decay value: -1"),
                    (dict(alpha=-1), "Invalid alpha value: -1")):
        with pytest.raises(ValueError, match=msg):
            optim.RMSprop(ps, **kw)
    for kw, msg in ((dict(lr_decay=-1), "Invalid lr_decay value: -1"),
                    (dict(initial_accumulator_value=-1), "Invalid initial_accumulator_value value: -1")):
        with pytest.raises(ValueError, match=msg):
            optim.Adagrad(ps, **kw)
