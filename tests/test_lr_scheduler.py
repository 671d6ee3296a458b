"""optim.lr_scheduler: every scheduler's rates against PyTorch's closed forms (or, for OneCycleLR,
SequentialLR and ReduceLROnPlateau, sequences recorded from torch 2.13's schedulers on the same
settings), state_dict round trips, chaining, and torch's errors."""
import math
import warnings

import pytest

import tritensor as tt
from tritensor import optim
from tritensor.optim import lr_scheduler as S


def _opt(lr=0.1, kind="sgd", groups=1):
    ps = [tt.zeros(2, requires_grad=True) for _ in range(groups)]
    if kind == "sgd":
        return optim.SGD([{"params": [p], "lr": lr * (i + 1)} for i, p in enumerate(ps)], lr=lr, momentum=0.9)
    return optim.Adam([{"params": [p], "lr": lr * (i + 1)} for i, p in enumerate(ps)], lr=lr)


def _run(opt, sched, n, metrics=None):
    lrs = [sched.get_last_lr()]
    for i in range(n):
        opt.step()
        sched.step() if metrics is None else sched.step(metrics[i])
        lrs.append(sched.get_last_lr())
    return lrs


def _close(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-15), (a, b)


CLOSED = {  # name -> (factory, closed form of the epoch for base rate b)
    "StepLR": (lambda o: S.StepLR(o, step_size=3, gamma=0.5), lambda b, e: b * 0.5 ** (e // 3)),
    "MultiStepLR": (lambda o: S.MultiStepLR(o, [2, 5, 5, 9], 0.3),
                    lambda b, e: b * 0.3 ** sum(m <= e for m in [2, 5, 5, 9])),
    "ExponentialLR": (lambda o: S.ExponentialLR(o, 0.8), lambda b, e: b * 0.8 ** e),
    "CosineAnnealingLR": (lambda o: S.CosineAnnealingLR(o, T_max=4, eta_min=0.01),
                          lambda b, e: 0.01 + (b - 0.01) * (1 + math.cos(math.pi * e / 4)) / 2),
    "LinearLR": (lambda o: S.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=6),
                 lambda b, e: b * (0.25 + 0.65 * min(e, 6) / 6)),
    "LambdaLR": (lambda o: S.LambdaLR(o, lambda e: 1 / (e + 1)), lambda b, e: b / (e + 1)),
}


@pytest.mark.parametrize("name", sorted(CLOSED))
def test_schedulers_follow_torch_closed_forms(name):
    make, closed = CLOSED[name]
    o = _opt(groups=2)
    sched = make(o)
    lrs = _run(o, sched, 14)  # past T_max (cosine goes back up: the recurrence must keep the closed form)
    for e, got in enumerate(lrs):
        assert len(got) == 2
        for b, lr in zip((0.1, 0.2), got):
            assert math.isclose(lr, closed(b, e), rel_tol=1e-9, abs_tol=1e-15), (name, e, lr, closed(b, e))
    assert [g["lr"] for g in o.param_groups] == lrs[-1]


# Recorded from torch 2.13 (torch.optim.lr_scheduler), SGD(lr=0.1, momentum=0.9) / Adam(lr=0.1).
TORCH_ONECYCLE = [0.040000000000000036, 0.253326288150591, 0.703688047535243, 0.9907769345935507, 0.9836474969297887,
                  0.9190443762697106, 0.8117456539497631, 0.6726838364805451, 0.5160277246826726, 0.35773877573965707,
                  0.21394481417223551, 0.0992967918932656, 0.025476024606159702, 4e-06, 0.02547602460615959]
TORCH_ONECYCLE_MOM = [0.92777851165098, 0.8808658283817454, 0.8509607359798385, 0.8516352568480485, 0.858095594755408,
                      0.8688255099070633, 0.8827317472789346, 0.8983974211214172, 0.9142263793315516,
                      0.9286058330061084, 0.9400706810933978, 0.9474527873505334, 0.95, 0.9474527873505334]
TORCH_ONECYCLE3 = [0.04, 0.33999999999999997, 0.64, 0.94, 0.76, 0.4600000000000001, 0.16000000000000014, 0.036364,
                   0.030304, 0.024244, 0.018184, 0.012124, 0.006064, 3.9999999999970615e-06, -0.006056000000000006]
TORCH_ONECYCLE3_BETA1 = [0.91875, 0.8875, 0.85625, 0.875, 0.90625, 0.9375, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95,
                         0.95]
TORCH_SEQ = [0.010000000000000002, 0.04, 0.07, 0.1, 0.09000000000000001, 0.08100000000000002, 0.07290000000000002,
             0.1, 0.1, 0.05, 0.05, 0.025, 0.025, 0.0125, 0.0125]
TORCH_PLATEAU = [0.1, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.025, 0.0125, 0.0125]


def test_one_cycle_matches_torch_and_cycles_momentum():
    o = _opt()
    s = S.OneCycleLR(o, max_lr=1.0, total_steps=14)
    lrs, mom = [s.get_last_lr()[0]], []
    for _ in range(14):
        o.step()
        s.step()
        lrs.append(s.get_last_lr()[0])
        mom.append(o.param_groups[0]["momentum"])
    _close(lrs, TORCH_ONECYCLE)
    _close(mom, TORCH_ONECYCLE_MOM)
    with pytest.raises(ValueError, match="Tried to step 15 times. The specified number of total steps is 14"):
        s.step()
    o = _opt(kind="adam")  # three phases, linear annealing, Adam's beta1 cycled
    s = S.OneCycleLR(o, max_lr=1.0, total_steps=14, three_phase=True, anneal_strategy="linear")
    lrs, b1 = [s.get_last_lr()[0]], []
    for _ in range(14):
        o.step()
        s.step()
        lrs.append(s.get_last_lr()[0])
        b1.append(o.param_groups[0]["betas"][0])
    _close(lrs, TORCH_ONECYCLE3)
    _close(b1, TORCH_ONECYCLE3_BETA1)
    assert o.param_groups[0]["betas"][1] == 0.999


def test_sequential_lr_switches_at_milestones():
    o = _opt()
    s = S.SequentialLR(o, [S.LinearLR(o, 0.1, 1.0, 3), S.ExponentialLR(o, 0.9), S.StepLR(o, 2, 0.5)],
                       milestones=[3, 7])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's own epoch-deprecation warning at each switch
        _close([lr[0] for lr in _run(o, s, 14)], TORCH_SEQ)


def test_reduce_lr_on_plateau_patience_cooldown_and_min_lr():
    o = _opt()
    s = S.ReduceLROnPlateau(o, patience=2, factor=0.5, cooldown=1, min_lr=0.01)
    metrics = [5, 4, 4, 4, 4, 4, 3.9999, 4, 4, 4, 4, 4, 4, 4]
    _close([lr[0] for lr in _run(o, s, 14, metrics)], TORCH_PLATEAU)
    s2 = S.ReduceLROnPlateau(_opt(), mode="max", threshold_mode="abs", threshold=0.5, patience=0, factor=0.1,
                             min_lr=0.05)
    for m in [1.0, 1.4, 1.2]:  # 1.4 is not better than 1.0 + 0.5
        s2.step(tt.tensor(m))  # a 0-d tensor metric, as torch accepts
    assert s2.get_last_lr() == [0.05]  # floored at min_lr
    with pytest.raises(ValueError, match="Factor should be < 1.0."):
        S.ReduceLROnPlateau(_opt(), factor=1.0)
    with pytest.raises(ValueError, match="mode sideways is unknown!"):
        S.ReduceLROnPlateau(_opt(), mode="sideways")


def test_state_dict_round_trip_resumes_the_schedule():
    o = _opt()
    s = S.CosineAnnealingLR(o, T_max=5)
    _run(o, s, 3)
    sd = s.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 3 and sd["T_max"] == 5 and sd["base_lrs"] == [0.1]
    o2 = _opt()
    s2 = S.CosineAnnealingLR(o2, T_max=5)
    s2.load_state_dict(sd)
    o2.param_groups[0]["lr"] = o.param_groups[0]["lr"]
    _close(_run(o, s, 4)[-1], _run(o2, s2, 4)[-1])
    lam = S.LambdaLR(_opt(), lambda e: 0.5)
    assert lam.state_dict()["lr_lambdas"] == [None]  # functions are not saved, as torch
    seq_o = _opt()
    seq = S.SequentialLR(seq_o, [S.ExponentialLR(seq_o, 1.0), S.StepLR(seq_o, 2)], milestones=[2])
    assert len(seq.state_dict()["_schedulers"]) == 2
    p = S.ReduceLROnPlateau(_opt())
    p.step(1.0)
    assert p.state_dict()["best"] == 1.0


def test_chained_schedulers_compose():
    o = _opt()
    a, b = S.ExponentialLR(o, 0.9), S.StepLR(o, 2, 0.5)
    for e in range(1, 6):
        o.step()
        a.step()
        b.step()
        assert math.isclose(o.param_groups[0]["lr"], 0.1 * 0.9 ** e * 0.5 ** (e // 2), rel_tol=1e-12)


def test_scheduler_errors():
    o = _opt()
    with pytest.raises(TypeError, match="is not an Optimizer"):
        S.StepLR(object(), 2)
    with pytest.raises(ValueError, match="Starting multiplicative factor expected to be greater than 0"):
        S.LinearLR(o, start_factor=0)
    with pytest.raises(ValueError, match="Ending multiplicative factor expected to be between 0 and 1."):
        S.LinearLR(o, end_factor=2)
    with pytest.raises(ValueError, match="You must define either total_steps OR"):
        S.OneCycleLR(o, max_lr=1.0)
    with pytest.raises(ValueError, match="Expected positive integer total_steps, but got 0"):
        S.OneCycleLR(o, max_lr=1.0, total_steps=0)
    with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear'"):
        S.OneCycleLR(o, max_lr=1.0, total_steps=5, anneal_strategy="step")
    with pytest.raises(ValueError, match="expects number of schedulers provided to be one more"):
        S.SequentialLR(o, [S.StepLR(o, 2), S.StepLR(o, 3)], milestones=[])
    with pytest.raises(KeyError, match="param 'initial_lr' is not specified in param_groups\\[0\\]"):
        S.StepLR(_opt(), 2, last_epoch=3)
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas, but got 1"):
        S.LambdaLR(_opt(groups=2), [lambda e: 1.0])
