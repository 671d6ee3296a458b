"""Losses of issue 15: L1Loss, SmoothL1Loss, NLLLoss, BCELoss, BCEWithLogitsLoss (fused kernel),
KLDivLoss and cross_entropy with class-probability targets, against float64 NumPy over
fp32/fp16/bf16, every reduction, non-contiguous and empty inputs; gradchecks in float64; errors."""
import warnings

import numpy as np
import pytest

import tritensor as tt
from tritensor import nn
from tritensor.nn import functional as F

from tolerances import NP, TOL, assert_close, sum_tol

RED = {"none": lambda d: d, "mean": np.mean, "sum": np.sum}


def _t(a, dtype, transposed=False):
    """A tensor of ``a``'s values (rounded to dtype), optionally a non-contiguous transposed view."""
    a = np.asarray(a).astype(NP[dtype])
    if transposed:
        return tt.from_numpy(np.ascontiguousarray(a.T)).T, a.astype(np.float64)
    return tt.from_numpy(a), a.astype(np.float64)


def _softplus(z):
    return np.logaddexp(0, z)


REFS = {
    "l1_loss": lambda x, y: np.abs(x - y),
    "smooth_l1_loss": lambda x, y: np.where(np.abs(x - y) < 0.5, 0.5 * (x - y) ** 2 / 0.5, np.abs(x - y) - 0.25),
    "binary_cross_entropy_with_logits": lambda x, y: (1 - y) * x + _softplus(-x),
}
KW = {"smooth_l1_loss": dict(beta=0.5)}


@pytest.mark.parametrize("name", sorted(REFS))
@pytest.mark.parametrize("dtype", [tt.float32, tt.float16, tt.bfloat16])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_pointwise_losses_vs_numpy(name, dtype, reduction):
    rng = np.random.default_rng(0)
    x, xr = _t(rng.standard_normal((5, 7)) * 3, dtype, transposed=True)
    y, yr = _t(rng.random((5, 7)) if "cross" in name else rng.standard_normal((5, 7)), dtype)
    out = getattr(F, name)(x, y, reduction=reduction, **KW.get(name, {}))
    assert out.dtype is dtype
    expected = RED[reduction](REFS[name](xr, yr))
    tol = sum_tol(dtype, 35) if dtype is tt.float32 else {}
    if reduction == "sum" and dtype is not tt.float32:
        tol = dict(rtol=TOL[dtype]["rtol"], atol=TOL[dtype]["atol"] * 35)  # 35 terms, each rounded to dtype
    assert_close(out, expected, dtype, **tol)
    empty = getattr(F, name)(tt.zeros(0, 3, dtype=dtype), tt.zeros(0, 3, dtype=dtype), reduction=reduction)
    assert empty.numel() == 0 if reduction == "none" else (np.isnan(empty.item()) if reduction == "mean"
                                                         else empty.item() == 0)


def test_bce_with_logits_is_stable_for_huge_logits_and_weights():
    x = tt.tensor([-1000.0, -50.0, 0.0, 50.0, 1000.0])
    y = tt.tensor([1.0, 0.0, 0.5, 1.0, 0.0])
    w = tt.tensor([0.5, 1.0, 2.0, 1.0, 3.0])
    pw = tt.tensor(2.0)  # a 0-d pos_weight broadcasts
    xr, yr, wr = (np.array(t.tolist(), dtype=np.float64) for t in (x, y, w))
    expected = wr * ((1 - yr) * xr + (1 + (2.0 - 1) * yr) * _softplus(-xr))
    out = F.binary_cross_entropy_with_logits(x, y, w, reduction="none", pos_weight=pw)
    assert np.isfinite(out.numpy()).all()
    assert_close(out, expected, tt.float32)
    xg = x.clone().requires_grad_()
    F.binary_cross_entropy_with_logits(xg, y, w, pos_weight=pw).backward()
    with np.errstate(over="ignore"):  # exp(1000) = inf gives sigmoid 0, as it should
        sig = 1 / (1 + np.exp(-xr))
    dx = wr * ((1 - yr) - (1 + yr) * (1 - sig)) / 5
    assert_close(xg.grad, dx, tt.float32)
    pos = tt.tensor([[1.0, 4.0, 0.5]])  # per-class pos_weight over (N, C)
    m = nn.BCEWithLogitsLoss(pos_weight=pos)
    assert list(m.state_dict()) == ["pos_weight"]
    xx, yy = tt.randn(4, 3), (tt.rand(4, 3) > 0.5).float()
    a, b = xx.numpy().astype(np.float64), yy.numpy().astype(np.float64)
    lw = 1 + (np.array([1.0, 4.0, 0.5]) - 1) * b
    assert_close(m(xx, yy), ((1 - b) * a + lw * _softplus(-a)).mean(), tt.float32)


def test_bce_probabilities_kl_div_and_nll_module():
    rng = np.random.default_rng(1)
    p = rng.random((4, 3)) * 0.98 + 0.01
    y = (rng.random((4, 3)) > 0.5).astype(np.float64)
    w = rng.random((4, 3))
    got = nn.BCELoss(weight=tt.from_numpy(w.astype(np.float32)))(tt.from_numpy(p.astype(np.float32)),
                                                                tt.from_numpy(y.astype(np.float32)))
    assert_close(got, (-w * (y * np.log(p) + (1 - y) * np.log(1 - p))).mean(), tt.float32)
    ends = F.binary_cross_entropy(tt.tensor([0.0, 1.0]), tt.tensor([1.0, 0.0]), reduction="none")
    assert ends.tolist() == [100.0, 100.0]  # log clamped at -100, as torch
    logq = np.log(rng.dirichlet(np.ones(5), size=3))
    t = rng.dirichlet(np.ones(5), size=3)
    t[0, 1] = 0.0  # a zero target contributes 0 (not nan)
    kl = t * (np.log(np.where(t > 0, t, 1)) - logq)
    X, T = tt.from_numpy(logq), tt.from_numpy(t)
    assert_close(nn.KLDivLoss(reduction="batchmean")(X, T), kl.sum() / 3, tt.float64)
    assert_close(F.kl_div(X, T, reduction="sum"), kl.sum(), tt.float64)
    assert_close(F.kl_div(X, tt.from_numpy(np.log(t + 1e-30)), reduction="none", log_target=True),
                 (t + 1e-30) * (np.log(t + 1e-30) - logq), tt.float64)
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        F.kl_div(X, T)
    logp = np.log(rng.dirichlet(np.ones(4), size=5))
    tgt = np.array([0, 3, 3, 1, 2])
    wt = np.array([1.0, 2.0, 0.5, 1.5])
    got = nn.NLLLoss(weight=tt.from_numpy(wt), ignore_index=1)(tt.from_numpy(logp), tt.from_numpy(tgt))
    keep = tgt != 1
    assert_close(got, -(wt[tgt] * logp[np.arange(5), tgt])[keep].sum() / wt[tgt][keep].sum(), tt.float64)


@pytest.mark.parametrize("dtype", [tt.float32, tt.float16, tt.bfloat16])
def test_cross_entropy_probability_targets_vs_numpy(dtype):
    rng = np.random.default_rng(2)
    x, xr = _t(rng.standard_normal((3, 4, 5)), dtype)  # (N, C, d1): classes on dim 1
    t = rng.dirichlet(np.ones(4), size=(3, 5)).transpose(0, 2, 1)
    T, tr = _t(t, dtype)
    w = np.array([1.0, 0.5, 2.0, 1.5])
    ls = 0.2
    logp = xr - xr.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    ts = tr * (1 - ls) + ls / 4
    rows = -(logp * ts * w.reshape(1, 4, 1)).sum(1)
    for reduction, expected in (("none", rows), ("sum", rows.sum()), ("mean", rows.sum() / 15)):
        got = F.cross_entropy(x, T, weight=tt.from_numpy(w.astype(NP[dtype])), reduction=reduction,
                              label_smoothing=ls)
        tol = sum_tol(dtype, 60) if dtype is tt.float32 else dict(rtol=2 * TOL[dtype]["rtol"],
                                                                    atol=15 * TOL[dtype]["atol"])
        assert_close(got, expected, dtype, **tol)
    one = F.cross_entropy(tt.tensor([1.0, 2.0, 0.5]), tt.tensor([0.2, 0.8, 0.0]))  # unbatched
    lp = np.log(np.exp([1.0, 2.0, 0.5]) / np.exp([1.0, 2.0, 0.5]).sum())
    assert_close(one, -(np.array([0.2, 0.8, 0.0]) * lp).sum(), tt.float32)


def test_loss_gradchecks():
    rng = np.random.default_rng(3)
    x = tt.from_numpy(rng.standard_normal((2, 3)) * 2).requires_grad_()
    y = tt.from_numpy(rng.random((2, 3))).requires_grad_()
    w = tt.from_numpy(rng.random((1, 3)) + 0.5)
    pw = tt.from_numpy(rng.random(3) + 0.5)
    g = tt.autograd.gradcheck
    assert g(lambda x, y: F.binary_cross_entropy_with_logits(x, y, w, pos_weight=pw), (x, y))
    assert g(lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction="none"), (x, y))
    assert g(lambda x, y: F.l1_loss(x, y), (x, y))
    assert g(lambda x, y: F.smooth_l1_loss(x, y, beta=0.7, reduction="sum"), (x, y))
    p = tt.from_numpy(rng.random((2, 3)) * 0.8 + 0.1).requires_grad_()
    assert g(lambda p, y: F.binary_cross_entropy(p, y), (p, y))
    logq = tt.from_numpy(rng.standard_normal((2, 3))).requires_grad_()
    assert g(lambda a, b: F.kl_div(a, b, reduction="batchmean"), (logq, y))
    probs = tt.from_numpy(rng.dirichlet(np.ones(3), size=2))
    assert g(lambda x: F.cross_entropy(x, probs, label_smoothing=0.1), (x,))
    assert tt.autograd.gradgradcheck(lambda x: F.cross_entropy(x, probs), (x,))


def test_loss_errors():
    x = tt.zeros(2, 3)
    with pytest.raises(ValueError, match=r"Target size .* must be the same as input size"):
        F.binary_cross_entropy_with_logits(x, tt.zeros(3))
    with pytest.raises(RuntimeError, match="does not broadcast to the input's shape"):
        F.binary_cross_entropy_with_logits(x, x, pos_weight=tt.ones(4))
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(tt.tensor([1.5]), tt.tensor([1.0]))
    with pytest.raises(ValueError, match="nope is not a valid value for reduction"):
        F.l1_loss(x, x, reduction="nope")
    with pytest.raises(RuntimeError, match="negative values for beta"):
        F.smooth_l1_loss(x, x, beta=-1.0)
    with pytest.raises(TypeError, match="argument 'target'"):
        F.l1_loss(x, 1.0)
    with pytest.raises(RuntimeError, match="ignore_index is not supported for floating point target"):
        F.cross_entropy(x, x, ignore_index=0)
    with pytest.raises(RuntimeError, match="class probabilities have the input's shape"):
        F.cross_entropy(x, tt.zeros(2, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.l1_loss(x, x)  # same shapes: no broadcasting warning
    with pytest.warns(UserWarning, match="different to the input size"):
        F.l1_loss(x, tt.zeros(3))
