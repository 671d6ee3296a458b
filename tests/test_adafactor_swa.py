"""optim.Adafactor against a float64 NumPy transcription of torch's single-tensor rule (torch 2.5+), and
optim.swa_utils (AveragedModel, the SWA/EMA rules, update_bn, SWALR) against NumPy and torch's numbers."""
import warnings

import ml_dtypes
import numpy as np
import pytest

import tritensor as tt
from tolerances import FLOAT_DTYPES, NP, assert_close
from tritensor import nn, optim
from tritensor.optim import swa_utils

STEPS = 3


# ----- Adafactor --------------------------------------------------------------------------------------
def adafactor_ref(w, grads, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, maximize=False,
                  eps1_dtype=np.float64):
    """torch/optim/_adafactor.py: _single_tensor_adafactor, in float64."""
    p = np.array(w, dtype=np.float64)
    eps1 = float(ml_dtypes.finfo(eps1_dtype).eps) if eps[0] is None else eps[0]
    eps2 = eps[1]
    if p.ndim > 1:
        row = np.zeros(p.shape[:-1] + (1,))
        col = np.zeros(p.shape[:-2] + (1, p.shape[-1]))
    else:
        var = np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        g = -np.asarray(g, np.float64) if maximize else np.asarray(g, np.float64)
        beta = t ** beta2_decay
        rho = min(lr, 1 / np.sqrt(t))
        alpha = max(eps2, np.sqrt((p ** 2).sum()) / np.sqrt(p.size)) * rho
        p = p * (1 - lr * weight_decay) if weight_decay else p
        if p.ndim > 1:
            row = row + beta * ((g ** 2).mean(axis=-1, keepdims=True) - row)
            col = col + beta * ((g ** 2).mean(axis=-2, keepdims=True) - col)
            est = (row @ col) / np.maximum(row.mean(axis=-2, keepdims=True), eps1)
        else:
            var = var + beta * (g ** 2 - var)
            est = var.copy()
        update = g / np.sqrt(np.maximum(est, eps1 * eps1))
        denom = max(1.0, np.sqrt((update ** 2).sum()) / (np.sqrt(update.size) * d))
        p = p - alpha / denom * update
    return p


def _param(shape, dtype, seed, steps=STEPS):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(shape).astype(NP[dtype])
    grads = [rng.standard_normal(shape).astype(NP[dtype]) for _ in range(steps)]
    return nn.Parameter(tt.tensor(w)), w.astype(np.float64), grads


def _run(p, grads, **kw):
    opt = optim.Adafactor([p], **kw)
    for g in grads:
        p.grad = tt.tensor(g)
        opt.step()
    return opt


CASES = {
    "default": dict(),
    "decay_maximize": dict(lr=0.05, weight_decay=0.1, maximize=True),
    "eps_clip": dict(lr=0.3, beta2_decay=-0.5, eps=(1e-4, 1e-2), d=1.0),
}
SHAPES = [(37,), (5, 7), (2, 3, 4), (1, 1), (6, 1)]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_adafactor_matches_reference_over_steps(shape, case):
    p, w, grads = _param(shape, tt.float64, 0)
    opt = _run(p, grads, **CASES[case])
    assert_close(p.detach(), adafactor_ref(w, grads, **CASES[case]), tt.float64)
    state = opt.state[p]
    assert state["step"] == STEPS
    if len(shape) > 1:
        assert set(state) == {"step", "row_var", "col_var"}
        assert list(state["row_var"].shape) == list(shape[:-1]) + [1]
        assert list(state["col_var"].shape) == list(shape[:-2]) + [1, shape[-1]]
    else:
        assert set(state) == {"step", "variance"}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_adafactor_each_dtype(dtype):
    for shape in ((4, 6), (11,)):
        p, w, grads = _param(shape, dtype, 1, steps=2)
        _run(p, grads, lr=0.05, weight_decay=0.1)
        assert p.dtype is dtype
        # eps1 defaults to the parameter dtype's eps; each op of the chain rounds in the dtype
        expected = adafactor_ref(w, grads, lr=0.05, weight_decay=0.1, eps1_dtype=NP[dtype])
        assert_close(p.detach(), expected, dtype, "rounded_terms", k=4)


def test_adafactor_non_contiguous_grad_foreach_and_no_grad():
    """A transposed gradient is read as laid out as its parameter; foreach=True is the same rule; a parameter
    without a gradient is left alone and gets no state."""
    rng = np.random.default_rng(5)
    w, g = rng.standard_normal((3, 4)), rng.standard_normal((4, 3))
    p, q = nn.Parameter(tt.tensor(w)), nn.Parameter(tt.tensor(w))
    opt = optim.Adafactor([p, q], lr=0.1, foreach=True)
    p.grad = tt.tensor(g).t()
    opt.step()
    assert_close(p.detach(), adafactor_ref(w, [g.T], lr=0.1), tt.float64)
    assert np.array_equal(q.detach().cpu().numpy(), w) and q not in opt.state


def test_adafactor_empty_parameter_and_closure():
    p = nn.Parameter(tt.zeros(0, 3, dtype=tt.float64))
    opt = optim.Adafactor([p])
    p.grad = tt.zeros(0, 3, dtype=tt.float64)
    assert opt.step(closure=lambda: 7.0) == 7.0
    assert list(p.shape) == [0, 3] and opt.state[p]["step"] == 1


def test_adafactor_state_dict_round_trip_continues_identically():
    p, w, grads = _param((3, 5), tt.float64, 4)
    q = nn.Parameter(p.detach().clone())
    a = _run(p, grads[:2], lr=0.05)
    b = optim.Adafactor([q], lr=0.05)
    b.load_state_dict(a.state_dict())
    q.data = p.detach().clone()
    for opt, param in ((a, p), (b, q)):
        param.grad = tt.tensor(grads[2])
        opt.step()
    assert np.array_equal(p.detach().cpu().numpy(), q.detach().cpu().numpy())
    assert_close(p.detach(), adafactor_ref(w, grads, lr=0.05), tt.float64)


@pytest.mark.parametrize("kw, err, msg", [
    (dict(lr=-1.0), ValueError, "Learning rate should be >= 0 but is: -1.0"),
    (dict(beta2_decay=0.5), ValueError, "beta2_decay should be <= 0 but is: 0.5"),
    (dict(eps=(-1.0, 1e-3)), ValueError, "epsilon1 should be >= 0 but is: -1.0"),
    (dict(eps=(None, -1.0)), ValueError, "epsilon2 should be >= 0 but is: -1.0"),
    (dict(d=0.5), ValueError, "Clipping threshold d should be >= 1 but is: 0.5"),
    (dict(weight_decay=-0.1), ValueError, "weight_decay should be >= 0 but is: -0.1"),
    (dict(lr=tt.ones(2)), ValueError, "Tensor lr must be 1-element"),
    (dict(fused=True), TypeError, "fused"),
])
def test_adafactor_bad_arguments(kw, err, msg):
    with pytest.raises(err, match=msg.replace("(", r"\(").replace(")", r"\)")):
        optim.Adafactor([nn.Parameter(tt.ones(2))], **kw)


def test_adafactor_tensor_lr():
    p, w, grads = _param((4, 3), tt.float64, 6)
    _run(p, grads, lr=tt.tensor(0.05, dtype=tt.float64))
    assert_close(p.detach(), adafactor_ref(w, grads, lr=0.05), tt.float64)


# ----- swa_utils: the averaging rules -----------------------------------------------------------
def test_avg_fns_match_numpy():
    rng = np.random.default_rng(7)
    a, c = rng.standard_normal(9), rng.standard_normal(9)
    ta, tc = tt.tensor(a), tt.tensor(c)
    assert_close(swa_utils.get_ema_avg_fn(0.9)(ta, tc, 3), 0.9 * a + 0.1 * c, tt.float64)
    assert_close(swa_utils.get_swa_avg_fn()(ta, tc, 3), a + (c - a) / 4, tt.float64)
    lists = [tt.tensor(a), tt.tensor(a[:4])], [tt.tensor(c), tt.tensor(c[:4])]
    swa_utils.get_ema_multi_avg_fn(0.75)(*lists, None)
    assert_close(lists[0][1], 0.75 * a[:4] + 0.25 * c[:4], tt.float64)
    lists = [tt.tensor(a)], [tt.tensor(c)]
    swa_utils.get_swa_multi_avg_fn()(*lists, tt.tensor(2))
    assert_close(lists[0][0], a + (c - a) / 3, tt.float64)
    ints = [tt.tensor([4, 8])], [tt.tensor([10, 2])]
    swa_utils.get_swa_multi_avg_fn()(*ints, 1)
    assert ints[0][0].tolist() == [7, 5]
    for make in (swa_utils.get_ema_avg_fn, swa_utils.get_ema_multi_avg_fn):
        with pytest.raises(ValueError, match=r"Invalid decay value 1.5 provided. Please provide a value in \[0,1\]"):
            make(1.5)


def _linear(seed):
    model = nn.Linear(3, 2).double()
    rng = np.random.default_rng(seed)
    with tt.no_grad():
        model.weight.copy_(tt.tensor(rng.standard_normal((2, 3))))
        model.bias.copy_(tt.tensor(rng.standard_normal(2)))
    return model


def test_averaged_model_swa_ema_and_custom_rule():
    snapshots = [_linear(s) for s in range(4)]
    ws = [m.weight.detach().cpu().numpy() for m in snapshots]
    swa = swa_utils.AveragedModel(snapshots[0])
    ema = swa_utils.AveragedModel(snapshots[0], multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.5))
    custom = swa_utils.AveragedModel(snapshots[0], avg_fn=lambda avg, cur, n: avg + 2 * cur)
    for m in snapshots:
        for averaged in (swa, ema, custom):
            averaged.update_parameters(m)
    assert swa.n_averaged.item() == 4 and swa.n_averaged.dtype is tt.int64
    assert_close(swa.module.weight.detach(), np.mean(ws, axis=0), tt.float64)
    e = ws[0]
    for w in ws[1:]:
        e = 0.5 * e + 0.5 * w
    assert_close(ema.module.weight.detach(), e, tt.float64)
    assert_close(custom.module.weight.detach(), ws[0] + 2 * (ws[1] + ws[2] + ws[3]), tt.float64)
    x = tt.ones(1, 3, dtype=tt.float64)
    assert_close(swa(x).detach(), swa.module(x).detach(), tt.float64)
    assert swa.module is not snapshots[0]  # a copy, which the model's later training leaves alone
    with pytest.raises(AssertionError, match="Only one of avg_fn and multi_avg_fn should be provided"):
        swa_utils.AveragedModel(snapshots[0], avg_fn=swa_utils.get_swa_avg_fn(),
                                multi_avg_fn=swa_utils.get_swa_multi_avg_fn())


def test_averaged_model_buffers():
    """Without use_buffers the copy's buffers follow the model's; with it they are averaged too."""
    bns = []
    for s in range(2):
        bn = nn.BatchNorm1d(3).double()
        bn.running_mean.copy_(tt.tensor([float(s), 2.0 * s, 3.0]))
        bn.num_batches_tracked.fill_(4 * s + 2)
        bns.append(bn)
    follow, average = swa_utils.AveragedModel(bns[0]), swa_utils.AveragedModel(bns[0], use_buffers=True)
    for bn in bns:
        follow.update_parameters(bn)
        average.update_parameters(bn)
    assert follow.module.running_mean.tolist() == [1.0, 2.0, 3.0]
    assert average.module.running_mean.tolist() == [0.5, 1.0, 3.0]
    assert average.module.num_batches_tracked.item() == 4 and follow.module.num_batches_tracked.item() == 6


def test_update_bn_recomputes_statistics():
    rng = np.random.default_rng(8)
    batches = [rng.standard_normal((5, 3)) * (i + 1) for i in range(3)]
    model = nn.Sequential(nn.Linear(3, 3).double(), nn.BatchNorm1d(3, momentum=0.3).double())
    with tt.no_grad():
        model[0].weight.copy_(tt.eye(3, dtype=tt.float64))
        model[0].bias.zero_()
    model.eval()
    loader = [tt.tensor(batches[0]), (tt.tensor(batches[1]), "label"), [tt.tensor(batches[2])]]
    swa_utils.update_bn(loader, model)
    bn = model[1]
    # momentum None while it runs: the cumulative average of the batches' statistics
    assert_close(bn.running_mean, np.mean([b.mean(axis=0) for b in batches], axis=0), tt.float64)
    assert_close(bn.running_var, np.mean([b.var(axis=0, ddof=1) for b in batches], axis=0), tt.float64)
    assert bn.momentum == 0.3 and not model.training and bn.num_batches_tracked.item() == 3
    swa_utils.update_bn(loader, nn.Linear(3, 3))  # no BatchNorm: nothing to do


# ----- SWALR: torch 2.13's learning rates (generated with torch) ------------------------------------
@pytest.mark.parametrize("strategy, epochs, expected", [
    ("cos", 3, [1.0, 0.775, 0.325, 0.1, 0.1, 0.1]),
    ("linear", 3, [1.0, 0.7, 0.4, 0.1, 0.1, 0.1]),
    ("cos", 0, [0.1, 0.1, 0.1, 0.1, 0.1, 0.1]),
])
def test_swalr_rates_as_torch(strategy, epochs, expected):
    opt = optim.SGD([nn.Parameter(tt.zeros(1))], lr=1.0)
    sched = swa_utils.SWALR(opt, swa_lr=0.1, anneal_epochs=epochs, anneal_strategy=strategy)
    seq = [opt.param_groups[0]["lr"]]
    for _ in range(5):
        opt.step()
        sched.step()
        seq.append(opt.param_groups[0]["lr"])
    assert_close(np.array(seq), np.array(expected), tt.float64)


def test_swalr_groups_state_dict_and_errors():
    p, q = nn.Parameter(tt.zeros(1)), nn.Parameter(tt.zeros(1))
    opt = optim.SGD([{"params": [p]}, {"params": [q], "lr": 0.5}], lr=1.0)
    sched = swa_utils.SWALR(opt, swa_lr=[0.1, 0.2], anneal_epochs=2, anneal_strategy="linear")
    seq = []
    for _ in range(3):
        opt.step()
        sched.step()
        seq.append([g["lr"] for g in opt.param_groups])
    assert_close(np.array(seq), np.array([[0.55, 0.35], [0.1, 0.2], [0.1, 0.2]]), tt.float64)
    state = sched.state_dict()
    assert "anneal_func" not in state and "optimizer" not in state and state["_anneal_strategy"] == "linear"
    other = swa_utils.SWALR(optim.SGD([nn.Parameter(tt.zeros(1))], lr=1.0), swa_lr=0.3)
    other.load_state_dict(state)
    assert other.anneal_func is swa_utils.SWALR._linear_anneal and other.anneal_epochs == 2
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        sched.get_lr()
    assert "please use `get_last_lr()`" in str(w[0].message)
    one = optim.SGD([nn.Parameter(tt.zeros(1))], lr=1.0)
    for kw, msg in ((dict(swa_lr=[0.1, 0.2]), "swa_lr must have the same length as optimizer.param_groups. swa_lr "
                                              "has 2 values, param_groups has 1."),
                    (dict(swa_lr=0.1, anneal_strategy="exp"),
                     "anneal_strategy must be one of 'cos' or 'linear', instead got exp"),
                    (dict(swa_lr=0.1, anneal_epochs=-1), "anneal_epochs must be equal or greater than 0, got -1"),
                    (dict(swa_lr=0.1, anneal_epochs=1.5), "anneal_epochs must be equal or greater than 0, got 1.5")):
        with pytest.raises(ValueError) as e:
            swa_utils.SWALR(one, **kw)
        assert str(e.value) == msg
