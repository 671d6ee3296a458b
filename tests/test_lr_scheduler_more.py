"""ConstantLR, PolynomialLR, CyclicLR (three modes, momentum cycling), CosineAnnealingWarmRestarts
(T_mult, fractional epochs), MultiplicativeLR and ChainedScheduler: rates against closed forms
written here from torch's documentation, state_dict round trips, torch's errors."""
import math
import warnings

import pytest

import tritensor as tt
from tritensor import optim
from tritensor.optim import lr_scheduler as S


def _opt(lr=0.1, kind="sgd", groups=2):
    ps = [tt.zeros(2, requires_grad=True) for _ in range(groups)]
    gs = [{"params": [p], "lr": lr * (i + 1)} for i, p in enumerate(ps)]
    return optim.SGD(gs, lr=lr, momentum=0.9) if kind == "sgd" else optim.Adam(gs, lr=lr)


def _run(opt, sched, n):
    lrs = [sched.get_last_lr()]
    for _ in range(n):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr())
    return lrs


def _close(got, want):
    assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-15), (got, want)


def _warm_restarts(b, e, T0, Tm, eta_min):
    """The rate at (possibly fractional) epoch e: T_i = T0 Tm^i, restarting when a period ends."""
    T_i, start = T0, 0
    while e >= start + T_i:
        start, T_i = start + T_i, T_i * Tm
    return eta_min + (b - eta_min) * (1 + math.cos(math.pi * (e - start) / T_i)) / 2


def _cyclic(base, top, e, up, down, mode, gamma=1.0):
    """Triangular wave from base to top in ``up`` steps and back in ``down``, amplitude per mode."""
    cycle, pos = divmod(e, up + down)
    frac = pos / up if pos <= up else 1 - (pos - up) / down
    scale = {"triangular": 1.0, "triangular2": 0.5 ** cycle, "exp_range": gamma ** e}[mode]
    return frac * scale


CLOSED = {  # name -> (factory, closed form of the epoch for base rate b)
    "ConstantLR": (lambda o: S.ConstantLR(o, factor=0.25, total_iters=3), lambda b, e: b * (0.25 if e < 3 else 1)),
    "PolynomialLR": (lambda o: S.PolynomialLR(o, total_iters=6, power=2.5),
                     lambda b, e: b * (1 - min(e, 6) / 6) ** 2.5),
    "MultiplicativeLR": (lambda o: S.MultiplicativeLR(o, lambda e: 0.9 + 0.01 * e),
                         lambda b, e: b * math.prod(0.9 + 0.01 * k for k in range(1, e + 1))),
    "CosineAnnealingWarmRestarts": (lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3, eta_min=0.01),
                                    lambda b, e: _warm_restarts(b, e, 3, 1, 0.01)),
    "CosineAnnealingWarmRestarts_Tmult": (lambda o: S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2),
                                          lambda b, e: _warm_restarts(b, e, 2, 2, 0.0)),
}


@pytest.mark.parametrize("name", sorted(CLOSED))
def test_schedulers_follow_closed_forms(name):
    make, closed = CLOSED[name]
    o = _opt()
    sched = make(o)
    lrs = _run(o, sched, 13)
    for e, got in enumerate(lrs):
        assert len(got) == 2
        for b, lr in zip((0.1, 0.2), got):
            _close(lr, closed(b, e))
    assert [g["lr"] for g in o.param_groups] == lrs[-1]


@pytest.mark.parametrize("name", sorted(CLOSED))
def test_state_dict_round_trip_continues_identically(name):
    make, _ = CLOSED[name]
    o1, o2 = _opt(), _opt()
    a = make(o1)
    _run(o1, a, 4)
    b = make(o2)
    b.load_state_dict(a.state_dict())
    for g1, g2 in zip(o1.param_groups, o2.param_groups):
        g2["lr"] = g1["lr"]
    assert _run(o1, a, 5) == _run(o2, b, 5)


@pytest.mark.parametrize("mode,gamma", [("triangular", 1.0), ("triangular2", 1.0), ("exp_range", 0.9)])
@pytest.mark.parametrize("down", [None, 2])
def test_cyclic_lr_and_momentum(mode, gamma, down):
    o = _opt()
    sched = S.CyclicLR(o, base_lr=[0.01, 0.02], max_lr=0.1, step_size_up=3, step_size_down=down, mode=mode,
                       gamma=gamma, base_momentum=0.7, max_momentum=0.95)
    up, dn = 3, down or 3
    assert o.param_groups[0]["momentum"] == 0.95  # set at construction, then cycled at each step
    for e in range(15):
        for g, base in zip(o.param_groups, (0.01, 0.02)):
            f = _cyclic(base, 0.1, e, up, dn, mode, gamma)
            _close(g["lr"], base + (0.1 - base) * f)
            _close(g["momentum"], 0.95 - (0.95 - 0.7) * f)
        o.step()
        sched.step()
    sd = sched.state_dict()
    assert "_scale_fn_ref" not in sd and sd["_scale_fn_custom"] is None


def test_cyclic_beta1_custom_scale_fn_and_state_dict():
    class Halve:
        def __init__(self):
            self.k = 0.5

        def __call__(self, x):
            return self.k ** x
    o = _opt(kind="adam", groups=1)
    fn = Halve()
    sched = S.CyclicLR(o, 0.01, 0.1, step_size_up=2, scale_fn=fn, scale_mode="iterations", max_momentum=0.9,
                       base_momentum=0.8)
    for e in range(6):
        f = _cyclic(0.01, 0.1, e, 2, 2, "triangular") * 0.5 ** e
        _close(o.param_groups[0]["lr"], 0.01 + 0.09 * f)
        _close(o.param_groups[0]["betas"][0], 0.9 - 0.1 * f)
        assert o.param_groups[0]["betas"][1] == 0.999
        o.step()
        sched.step()
    assert sched.state_dict()["_scale_fn_custom"] == {"k": 0.5}
    fn2 = Halve()
    fn2.k = 0.1
    other = S.CyclicLR(_opt(kind="adam", groups=1), 0.01, 0.1, step_size_up=2, scale_fn=fn2)
    other.load_state_dict(sched.state_dict())
    assert fn2.k == 0.5 and other.last_epoch == sched.last_epoch


def test_warm_restarts_fractional_epochs():
    o = _opt(groups=1)
    sched = S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=3, eta_min=0.001)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch documents step(epoch + i / iters): no deprecation warning
        for e in [0.25, 0.5, 1.75, 2.0, 3.5, 7.9, 8.0, 9.25, 30.5]:
            sched.step(e)
            _close(o.param_groups[0]["lr"], _warm_restarts(0.1, e, 2, 3, 0.001))
            assert sched.last_epoch == math.floor(e)
    with pytest.raises(ValueError, match="Expected non-negative epoch, but got -1"):
        sched.step(-1)


def test_chained_scheduler():
    o = _opt()
    sched = S.ChainedScheduler([S.ConstantLR(o, factor=0.1, total_iters=2), S.ExponentialLR(o, gamma=0.9)])
    lrs = _run(o, sched, 6)
    for e, got in enumerate(lrs):
        for b, lr in zip((0.1, 0.2), got):
            _close(lr, b * 0.9 ** e * (0.1 if e < 2 else 1))
    sd = sched.state_dict()
    assert len(sd["_schedulers"]) == 2 and "optimizer" not in sd
    o2 = _opt()
    other = S.ChainedScheduler([S.ConstantLR(o2, factor=0.1, total_iters=2), S.ExponentialLR(o2, gamma=0.9)], o2)
    other.load_state_dict(sd)
    assert other._schedulers[1].last_epoch == 6 and other.get_last_lr() == lrs[-1]


def test_resumed_polynomial_keeps_its_rate():
    """Constructed with last_epoch given (resuming), the initial step keeps the rate: torch's _is_initial."""
    o = _opt(groups=1)
    o.param_groups[0]["initial_lr"] = 0.1
    o.param_groups[0]["lr"] = 0.05
    sched = S.PolynomialLR(o, total_iters=4, last_epoch=1)
    assert sched.get_last_lr() == [0.05] and sched.last_epoch == 2
    m = S.MultiplicativeLR(_opt(groups=1), lambda e: 0.5)
    assert m.get_last_lr() == [0.1]


def test_errors_as_torch():
    o = _opt()
    for make, exc, msg in (
            (lambda: S.ConstantLR(o, factor=1.5), ValueError, "Constant multiplicative factor expected to be between"),
            (lambda: S.CyclicLR(o, 0.1, 1.0, mode="bad"), ValueError, "mode is invalid and scale_fn is None"),
            (lambda: S.CyclicLR(o, [0.1], 1.0), ValueError, "base_lr must have the same length as "
                                                              "optimizer.param_groups. base_lr has 1 values"),
            (lambda: S.CyclicLR(optim.Adagrad([tt.zeros(1, requires_grad=True)]), 0.1, 1.0), ValueError,
             "optimizer must support momentum or beta1 with `cycle_momentum` option enabled"),
            (lambda: S.CosineAnnealingWarmRestarts(o, T_0=0), ValueError, "Expected positive integer T_0, but got 0"),
            (lambda: S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=1.5), ValueError,
             "Expected integer T_mult >= 1, but got 1.5"),
            (lambda: S.CosineAnnealingWarmRestarts(o, T_0=2, eta_min="x"), ValueError,
             "Expected float or int eta_min, but got x"),
            (lambda: S.MultiplicativeLR(o, [lambda e: 1.0]), ValueError, "Expected 2 lr_lambdas, but got 1"),
            (lambda: S.MultiplicativeLR(o, 3), TypeError, "lr_lambda should be a function, but got int"),
            (lambda: S.ChainedScheduler([]), ValueError, "ChainedScheduler expects at least one scheduler"),
            (lambda: S.ChainedScheduler([S.ReduceLROnPlateau(o)]), ValueError,
             "ChainedScheduler does not support `ReduceLROnPlateau`"),
            (lambda: S.ChainedScheduler([S.StepLR(o, 2), S.StepLR(_opt(), 2)]), ValueError,
             "ChainedScheduler expects all schedulers to belong to the same optimizer")):
        with pytest.raises(exc, match=msg):
            make()


def test_get_lr_outside_step_warns_as_torch():
    o = _opt()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # stepping never warns
        scheds = [S.ConstantLR(o), S.PolynomialLR(o), S.MultiplicativeLR(o, lambda e: 0.9),
                  S.CosineAnnealingWarmRestarts(o, 2), S.CyclicLR(o, 0.01, 0.1), S.StepLR(o, 2)]
        for s in scheds:
            s.step()
    for s in scheds:
        with pytest.warns(UserWarning, match="To get the last learning rate computed by the scheduler, please use "
                                             "`get_last_lr\\(\\)`."):
            s.get_lr()
        assert s.state_dict()["_get_lr_called_within_step"] is False
