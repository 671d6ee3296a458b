"""Losses (``cross_entropy`` on the fused kernels of ``triton_kernels/loss.py``; ``nll_loss``,
``mse_loss``, ``l1_loss``, ``smooth_l1_loss``, ``binary_cross_entropy``, ``kl_div`` and
``cross_entropy`` with class-probability targets written with other ops;
``binary_cross_entropy_with_logits`` one fused stable kernel each way; core entries
``core/ops/loss.py``, derivative ``autograd/functions/loss.py``) against float64 NumPy over
dtypes/odd/empty/non-contiguous inputs and every reduction, their errors, and their gradchecks.
"""
import math
import warnings

import numpy as np
import pytest

import tritensor as tt
from tritensor import nn
from tritensor.nn import functional as F

from grad_inputs import leaf
from tolerances import FLOAT_DTYPES, NP, assert_close
from tritensor.autograd import gradcheck
# ----- cross_entropy (fused kernels), nll_loss, mse_loss against float64 NumPy ---------------
def ce_ref(x, t, ignore=-100):
    x = x - x.max(1, keepdims=True)
    lse = np.log(np.exp(x).sum(1))
    valid = t != ignore
    rows = np.where(valid, lse - x[np.arange(len(t)), np.where(valid, t, 0)], 0.0)
    p = np.exp(x - lse[:, None])
    onehot = np.zeros_like(p)
    onehot[np.arange(len(t))[valid], t[valid]] = 1
    grad_rows = (p - onehot) * valid[:, None]
    return rows, grad_rows, valid.sum()


CE_SHAPES = [(1, 1), (3, 37), (5, 10), (2, 5000)]  # 5000 classes: more than one class tile


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("shape", CE_SHAPES, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_cross_entropy_kernel_vs_numpy(dtype, shape, layout):
    n, c = shape
    rng = np.random.default_rng(n * 100 + c)
    xn = (rng.standard_normal((n, c)) * 3).astype(NP[dtype])
    t = rng.integers(0, c, size=n)
    if n > 2:
        t[1] = -100
    if layout == "transposed":
        x = tt.tensor(np.ascontiguousarray(xn.T)).t()
        assert not x.is_contiguous() or n == 1 or c == 1
    else:
        x = tt.tensor(xn.copy())
    x.requires_grad_()
    rows, grad_rows, count = ce_ref(xn.astype(np.float64), t)
    for reduction, ref, gscale in (("none", rows, 1.0), ("sum", rows.sum(), 1.0), ("mean", rows.sum() / count,
                                                                                       1.0 / count)):
        x.grad = None
        loss = F.cross_entropy(x, tt.tensor(t), reduction=reduction)
        assert loss.dtype is dtype
        # "sum": a sum of n rounded terms
        assert_close(loss.detach(), ref, dtype, "rounded_terms", k=max(n, 1) if reduction == "sum" else 1)
        loss.backward(tt.ones_like(loss) if reduction == "none" else None)
        assert x.grad.dtype is dtype and x.grad.shape == (n, c)
        assert_close(x.grad, grad_rows * gscale, dtype)


def ce_torch_ref(x, t, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """torch's cross_entropy (class indices) in float64, from its definition: nll_loss of
    log_softmax with weights; label smoothing mixes in -sum_c w[c] log p[c] / C; the weighted
    mean divides both parts by the summed weights of the non-ignored targets."""
    n, c = x.shape
    w = np.ones(c) if weight is None else weight
    lp = x - x.max(1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(1, keepdims=True))
    valid = t != ignore_index
    ts = np.where(valid, t, 0)
    nll = np.where(valid, -w[ts] * lp[np.arange(n), ts], 0.0)
    smooth = np.where(valid, -(lp * w).sum(1), 0.0)
    if reduction == "none":
        nll_r, smooth_r = nll, smooth
    elif reduction == "sum":
        nll_r, smooth_r = nll.sum(), smooth.sum()
    else:
        denom = np.where(valid, w[ts], 0.0).sum()
        nll_r, smooth_r = nll.sum() / denom, smooth.sum() / denom
    return (1 - label_smoothing) * nll_r + label_smoothing / c * smooth_r


def ce_torch_grad_ref(x, t, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0, h=1e-6):
    """d sum(loss) / dx of ce_torch_ref by central differences (float64; loss is smooth in x)."""
    g = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        e = np.zeros_like(x)
        e[idx] = h
        f = lambda a: np.sum(ce_torch_ref(a, t, weight, ignore_index, reduction, label_smoothing))  # noqa: E731
        g[idx] = (f(x + e) - f(x - e)) / (2 * h)
    return g


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.3])
def test_cross_entropy_weight_ignore_index_label_smoothing_vs_numpy(dtype, weighted, label_smoothing):
    n, c = 5, 37
    rng = np.random.default_rng(11)
    xn = (rng.standard_normal((n, c)) * 3).astype(NP[dtype])
    t = rng.integers(0, c, size=n)
    t[1] = 7  # ignore_index=7 is a real class: rows targeting it are skipped
    w = rng.uniform(0.1, 2.0, size=c).astype(NP[dtype]) if weighted else None
    x64 = xn.astype(np.float64)
    w64 = None if w is None else w.astype(np.float64)
    x = tt.tensor(xn.copy()).requires_grad_()
    kw = dict(ignore_index=7, label_smoothing=label_smoothing)
    for reduction in ("none", "sum", "mean"):
        x.grad = None
        loss = F.cross_entropy(x, tt.tensor(t), weight=None if w is None else tt.tensor(w, dtype=dtype),
                               reduction=reduction, **kw)
        assert loss.dtype is dtype
        assert_close(loss.detach(), ce_torch_ref(x64, t, w64, reduction=reduction, **kw), dtype,
                     "rounded_terms", k=n if reduction == "sum" else 1)  # "sum": a sum of n rounded terms
        loss.backward(tt.ones_like(loss) if reduction == "none" else None)
        # central differences of the float64 reference: its own error is ~1e-9
        ref = ce_torch_grad_ref(x64, t, w64, reduction=reduction, **kw)
        assert_close(x.grad, ref, dtype, "finite_difference")


def test_cross_entropy_weighted_smoothed_gradcheck_and_module():
    x, w = tt.tensor(RNG_CE.standard_normal((4, 5)), requires_grad=True), tt.tensor([0.5, 2.0, 1.0, 0.1, 3.0])
    t = tt.tensor([0, 4, -100, 2])
    for red in ("mean", "none"):  # ("sum" is "none" summed; the NumPy test covers all three)
        assert tt.autograd.gradcheck(lambda a: F.cross_entropy(a, t, weight=w, reduction=red, label_smoothing=0.2),
                                     (x,))
    assert tt.autograd.gradcheck(lambda a: F.nll_loss(a, t, weight=w), (x,))
    x4 = tt.tensor(RNG_CE.standard_normal((2, 3, 2)), requires_grad=True)  # (N, C, d1): classes on dim 1
    t4 = tt.tensor([[0, 2], [1, -100]])
    w3 = tt.tensor([1.0, 0.25, 4.0], dtype=tt.float64)
    assert tt.autograd.gradcheck(lambda a: F.cross_entropy(a, t4, weight=w3, label_smoothing=0.1), (x4,))
    flat = x4.detach().numpy().transpose(0, 2, 1).reshape(-1, 3)
    crit = nn.CrossEntropyLoss(weight=w3, label_smoothing=0.1, reduction="none")
    assert_close(crit(x4, t4).detach(), ce_torch_ref(flat, t4.numpy().reshape(-1), w3.numpy(), reduction="none",
                                            label_smoothing=0.1).reshape(2, 2), tt.float64)


def test_nll_loss_weight_vs_numpy():
    rng = np.random.default_rng(12)
    lp = rng.standard_normal((6, 4))
    t = np.array([0, 3, 1, -100, 3, 2])
    w = np.array([0.5, 2.0, 1.5, 0.25])
    rows = np.where(t != -100, -w[np.where(t != -100, t, 0)] * lp[np.arange(6), np.where(t != -100, t, 0)], 0.0)
    den = w[t[t != -100]].sum()
    for reduction, ref in (("none", rows), ("sum", rows.sum()), ("mean", rows.sum() / den)):
        got = F.nll_loss(tt.tensor(lp), tt.tensor(t), weight=tt.tensor(w), reduction=reduction)
        assert_close(got, ref, tt.float64)
    # cross_entropy's fused weighted path agrees with nll_loss(log_softmax) (torch's identity)
    x = tt.tensor(lp)
    assert_close(F.cross_entropy(x, tt.tensor(t), weight=tt.tensor(w)),
                 F.nll_loss(x.log_softmax(1), tt.tensor(t), weight=tt.tensor(w)).numpy(), tt.float64)
    # every target ignored: the weighted mean is 0 / 0, as torch
    assert math.isnan(float(F.cross_entropy(x, tt.full((6,), -100, dtype=tt.int64), weight=tt.tensor(w))))


RNG_CE = np.random.default_rng(13)


def test_cross_entropy_empty_batch_and_spatial():
    x = tt.zeros(0, 4, requires_grad=True)
    loss = F.cross_entropy(x, tt.zeros(0, dtype=tt.int64), reduction="sum")
    assert float(loss) == 0.0
    loss.backward()
    assert x.grad.shape == (0, 4)
    assert math.isnan(float(F.cross_entropy(tt.zeros(0, 4), tt.zeros(0, dtype=tt.int64))))  # mean of nothing
    rng = np.random.default_rng(5)
    xn = rng.standard_normal((2, 3, 2, 2))
    tn = rng.integers(0, 3, size=(2, 2, 2))
    got = F.cross_entropy(tt.tensor(xn), tt.tensor(tn), reduction="none")
    flat = xn.transpose(0, 2, 3, 1).reshape(-1, 3)
    assert_close(got, ce_ref(flat, tn.reshape(-1))[0].reshape(2, 2, 2), tt.float32)


def test_cross_entropy_errors_before_any_kernel():
    # Host targets are checked on the host, in the call (device targets: on the device, below).
    xh = tt.randn(3, 4, device="cpu")
    with pytest.raises(IndexError, match="Target 4 is out of bounds"):
        F.cross_entropy(xh, tt.tensor([0, 4, 1], device="cpu"))
    with pytest.raises(IndexError, match="Target -2 is out of bounds"):
        F.cross_entropy(xh, tt.tensor([0, -2, 1], device="cpu"))
    with pytest.raises(IndexError, match="Target 9 is out of bounds"):
        F.nll_loss(xh, tt.tensor([9, 0, 1], device="cpu"))
    x = tt.randn(3, 4)
    with pytest.raises(ValueError, match=r"Expected input batch_size \(3\) to match target batch_size \(2\)"):
        F.cross_entropy(x, tt.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="expected scalar type Long but found bool"):
        F.cross_entropy(x, tt.tensor([True, False, True]))
    with pytest.raises(ValueError, match="bogus is not a valid value for reduction"):
        F.cross_entropy(x, tt.tensor([0, 1, 2]), reduction="bogus")
    with pytest.raises(TypeError, match="argument 'target' must be Tensor"):
        F.cross_entropy(x, [0, 1, 2])
    with pytest.raises(RuntimeError, match="expected a floating point input"):
        F.cross_entropy(tt.tensor([[1, 2]]), tt.tensor([0]))
    t = tt.tensor([0, 1, 2])
    for ls in (1.5, -0.1):
        with pytest.raises(RuntimeError, match=f"label_smoothing must be between 0.0 and 1.0. Got: {ls}"):
            F.cross_entropy(x, t, label_smoothing=ls)
    with pytest.raises(RuntimeError, match=r"defined either for all 4 classes or no classes but got weight tensor "
                                           r"of shape: \[3\]"):
        F.cross_entropy(x, t, weight=tt.ones(3))
    with pytest.raises(RuntimeError, match=r"for all 4 classes .* shape: \[1, 4\]"):
        nn.CrossEntropyLoss(weight=tt.ones(1, 4))(x, t)
    with pytest.raises(RuntimeError, match=r"for all 4 classes .* shape: \[5\]"):
        F.nll_loss(x, t, weight=tt.ones(5))
    with pytest.raises(TypeError, match="argument 'weight' must be Tensor"):
        F.cross_entropy(x, t, weight=[1.0, 1.0, 1.0, 1.0])
    with pytest.raises(RuntimeError, match="floating point 'weight'"):
        F.cross_entropy(x, t, weight=tt.ones(4, dtype=tt.int64))
    with pytest.raises(ValueError, match="dropout probability"):
        nn.Dropout(1.5)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_vs_numpy(reduction):
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal((3, 5)).astype(np.float32)
    d = (a.astype(np.float64) - b.astype(np.float64)) ** 2
    ref = {"mean": d.mean(), "sum": d.sum(), "none": d}[reduction]
    out = nn.functional.mse_loss(tt.tensor(a), tt.tensor(b).T.contiguous().T, reduction=reduction)
    assert_close(out, ref, tt.float32)
    with pytest.raises(ValueError, match="reduction"):
        nn.functional.mse_loss(tt.tensor(a), tt.tensor(b), reduction="avg")


# ----- l1_loss, smooth_l1_loss, binary_cross_entropy(_with_logits), kl_div, NLLLoss,
# cross_entropy with class-probability targets, against float64 NumPy over fp32/fp16/bf16 ------
RED = {"none": lambda d: d, "mean": np.mean, "sum": np.sum}


def _t(a, dtype, transposed=False):
    """A tensor of ``a``'s values (rounded to dtype), optionally a non-contiguous transposed view."""
    a = np.asarray(a).astype(NP[dtype])
    if transposed:
        return tt.tensor(np.ascontiguousarray(a.T)).T, a.astype(np.float64)
    return tt.tensor(a), a.astype(np.float64)


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
    # fp32: 35-term sums accumulated in fp32 (k = 35 leaves fp16/bf16 their default numbers);
    # fp16/bf16 "sum": 35 terms, each rounded to the dtype before the sum.
    profile = "rounded_sum" if reduction == "sum" and dtype is not tt.float32 else "accumulate"
    assert_close(out, expected, dtype, profile, k=35)
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
    got = nn.BCELoss(weight=tt.tensor(w.astype(np.float32)))(tt.tensor(p.astype(np.float32)),
                                                                tt.tensor(y.astype(np.float32)))
    assert_close(got, (-w * (y * np.log(p) + (1 - y) * np.log(1 - p))).mean(), tt.float32)
    ends = F.binary_cross_entropy(tt.tensor([0.0, 1.0]), tt.tensor([1.0, 0.0]), reduction="none")
    assert ends.tolist() == [100.0, 100.0]  # log clamped at -100, as torch
    logq = np.log(rng.dirichlet(np.ones(5), size=3))
    t = rng.dirichlet(np.ones(5), size=3)
    t[0, 1] = 0.0  # a zero target contributes 0 (not nan)
    kl = t * (np.log(np.where(t > 0, t, 1)) - logq)
    X, T = tt.tensor(logq), tt.tensor(t)
    assert_close(nn.KLDivLoss(reduction="batchmean")(X, T), kl.sum() / 3, tt.float64)
    assert_close(F.kl_div(X, T, reduction="sum"), kl.sum(), tt.float64)
    assert_close(F.kl_div(X, tt.tensor(np.log(t + 1e-30)), reduction="none", log_target=True),
                 (t + 1e-30) * (np.log(t + 1e-30) - logq), tt.float64)
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        F.kl_div(X, T)
    logp = np.log(rng.dirichlet(np.ones(4), size=5))
    tgt = np.array([0, 3, 3, 1, 2])
    wt = np.array([1.0, 2.0, 0.5, 1.5])
    got = nn.NLLLoss(weight=tt.tensor(wt), ignore_index=1)(tt.tensor(logp), tt.tensor(tgt))
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
        got = F.cross_entropy(x, T, weight=tt.tensor(w.astype(NP[dtype])), reduction=reduction,
                              label_smoothing=ls)
        # fp32: 60-term sums (15 positions x 4 classes); fp16/bf16: 15 rows of rounded ops, summed.
        profile, k = ("accumulate", 60) if dtype is tt.float32 else ("rounded_rows", 15)
        assert_close(got, expected, dtype, profile, k=k)
    one = F.cross_entropy(tt.tensor([1.0, 2.0, 0.5]), tt.tensor([0.2, 0.8, 0.0]))  # unbatched
    lp = np.log(np.exp([1.0, 2.0, 0.5]) / np.exp([1.0, 2.0, 0.5]).sum())
    assert_close(one, -(np.array([0.2, 0.8, 0.0]) * lp).sum(), tt.float32)


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


# ----- derivatives ---------------------------------------------------------------------------
def test_cross_entropy_and_friends_gradcheck():
    x = leaf(4, 5)
    t = tt.tensor([0, 4, -100, 2])
    for red in ("mean", "sum", "none"):
        assert gradcheck(lambda a: nn.functional.cross_entropy(a, t, reduction=red), (x,))
    x4, t4 = leaf(2, 3, 2, 2), tt.tensor([[[0, 1], [2, 1]], [[1, 1], [0, 2]]])
    assert gradcheck(lambda a: nn.functional.cross_entropy(a, t4), (x4,), fast_mode=True)
    assert gradcheck(lambda a: nn.functional.nll_loss(a.log_softmax(1), t4), (x4,), fast_mode=True)
    assert gradcheck(lambda a: nn.functional.cross_entropy(a, tt.tensor(3)), (leaf(5),))
    y = leaf(4, 5)
    assert gradcheck(lambda a, b: nn.functional.mse_loss(a, b), (x, y))


def test_loss_gradchecks():
    rng = np.random.default_rng(3)
    x = tt.tensor(rng.standard_normal((2, 3)) * 2).requires_grad_()
    y = tt.tensor(rng.random((2, 3))).requires_grad_()
    w = tt.tensor(rng.random((1, 3)) + 0.5)
    pw = tt.tensor(rng.random(3) + 0.5)
    g = tt.autograd.gradcheck
    assert g(lambda x, y: F.binary_cross_entropy_with_logits(x, y, w, pos_weight=pw), (x, y))
    assert g(lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction="none"), (x, y))
    assert g(lambda x, y: F.l1_loss(x, y), (x, y))
    assert g(lambda x, y: F.smooth_l1_loss(x, y, beta=0.7, reduction="sum"), (x, y))
    p = tt.tensor(rng.random((2, 3)) * 0.8 + 0.1).requires_grad_()
    assert g(lambda p, y: F.binary_cross_entropy(p, y), (p, y))
    logq = tt.tensor(rng.standard_normal((2, 3))).requires_grad_()
    assert g(lambda a, b: F.kl_div(a, b, reduction="batchmean"), (logq, y))
    probs = tt.tensor(rng.dirichlet(np.ones(3), size=2))
    assert g(lambda x: F.cross_entropy(x, probs, label_smoothing=0.1), (x,))
    assert tt.autograd.gradgradcheck(lambda x: F.cross_entropy(x, probs), (x,))


# ----- class targets in device memory: checked on the device, counted on the device -----------------
# (core/ops/loss.py, runtime/device_asserts.py.) A host copy of the targets, or a host count of the
# non-ignored ones, would make every classification step wait for the device and keep it out of a
# CUDA graph. The simulator faults on any read past a tensor, so a bad target that were read
# through (x[i, t], weight[t]) would end these tests with IllegalAddress, not IndexError.
from tritensor.runtime import mode  # noqa: E402

gpu_only = pytest.mark.skipif(not mode.GPU, reason="class targets in device memory need a (simulated) GPU")
sim_only = pytest.mark.skipif(not mode.SIM, reason="counts driver calls: the simulated device's counters")

_C = 4
_W = [0.5, 2.0, 1.0, 0.25]
DEVICE_TARGET_OPS = {  # name -> loss of (logits (3, C) or (1, C, 3), targets (3,) or (1, 3)), forward and backward
    "cross_entropy": lambda x, t: F.cross_entropy(x, t),
    "cross_entropy_weighted": lambda x, t: F.cross_entropy(x, t, weight=tt.tensor(_W, device="cuda")),
    "cross_entropy_smoothed": lambda x, t: F.cross_entropy(x, t, label_smoothing=0.2),
    "cross_entropy_sum": lambda x, t: F.cross_entropy(x, t, reduction="sum"),
    "cross_entropy_none": lambda x, t: F.cross_entropy(x, t, reduction="none").sum(),
    "cross_entropy_spatial": lambda x, t: F.cross_entropy(x.reshape(3, _C).t().unsqueeze(0), t.reshape(1, 3)),
    "nll_loss": lambda x, t: F.nll_loss(x.log_softmax(1), t),
    "nll_loss_weighted": lambda x, t: F.nll_loss(x.log_softmax(1), t, weight=tt.tensor(_W, device="cuda")),
}


@gpu_only
@pytest.mark.parametrize("name", list(DEVICE_TARGET_OPS))
@pytest.mark.parametrize("bad", [1000, -7])
def test_a_bad_device_target_is_raised_at_the_next_sync_and_reads_nothing(name, bad):
    x = tt.randn(3, _C, device="cuda", requires_grad=True)
    t = tt.tensor([0, bad, 1], device="cuda")
    loss = DEVICE_TARGET_OPS[name](x, t)
    loss.backward()  # queued: nothing waits for the device, so nothing is raised yet
    with pytest.raises(IndexError, match=rf"^Target {bad} is out of bounds\."):
        loss.item()  # the next sync reports it, in torch's words
    tt.cuda.synchronize()  # reported once: the flag is clear again
    good = DEVICE_TARGET_OPS[name](x, tt.tensor([0, 3, 1], device="cuda"))
    assert math.isfinite(good.item())


@gpu_only
def test_the_largest_bad_device_target_is_reported_and_ignore_index_lanes_are_not_checked():
    x = tt.randn(4, _C, device="cuda")
    F.cross_entropy(x, tt.tensor([9, -100, 5, -3], device="cuda"))  # -100: the default ignore_index
    with pytest.raises(IndexError, match=r"^Target 9 is out of bounds\."):
        tt.cuda.synchronize()
    F.nll_loss(x, tt.tensor([-3, -100, 0, -8], device="cuda"))  # none too large: the smallest negative one
    with pytest.raises(IndexError, match=r"^Target -8 is out of bounds\."):
        tt.cuda.synchronize()
    for ignore in (-1, 50):  # an ignore_index outside [0, C) is never checked, wherever it appears
        for op in (F.cross_entropy, F.nll_loss):
            op(x, tt.tensor([ignore, 2, ignore, 0], device="cuda"), ignore_index=ignore)
            tt.cuda.synchronize()


def _targets_with_ignored(rng, n, c, ignore):
    t = rng.integers(0, c, size=n)
    t[::3] = ignore
    return t


@pytest.mark.parametrize("ignore", [-1, 2], ids=["outside", "a_class"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_ignored_targets_are_skipped_and_the_mean_divides_by_the_rest(ignore, weighted):
    # Runs with the default device's targets: on the host in CPU mode, in device memory in the
    # device run, where the count (or the weights' sum) of the kept targets stays on the device.
    rng = np.random.default_rng(21)
    n, c = 7, 5
    xn = rng.standard_normal((n, c))
    t = _targets_with_ignored(rng, n, c, ignore)
    w = rng.uniform(0.1, 2.0, size=c) if weighted else None
    kw = dict(ignore_index=ignore, weight=None if w is None else tt.tensor(w))
    x = tt.tensor(xn, requires_grad=True)
    loss = F.cross_entropy(x, tt.tensor(t), **kw)
    loss.backward()
    assert_close(loss.detach(), ce_torch_ref(xn, t, w, reduction="mean", ignore_index=ignore), tt.float64)
    assert_close(x.grad, ce_torch_grad_ref(xn, t, w, reduction="mean", ignore_index=ignore), tt.float64,
                 "finite_difference")
    lp = tt.tensor(xn).log_softmax(1)
    assert_close(F.nll_loss(lp, tt.tensor(t), **kw), ce_torch_ref(xn, t, w, reduction="mean", ignore_index=ignore),
                 tt.float64)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_every_target_ignored_gives_a_nan_mean_and_a_zero_gradient(weighted):
    x = tt.randn(3, _C, requires_grad=True)
    t = tt.full((3,), -100, dtype=tt.int64)
    w = tt.tensor(_W) if weighted else None
    loss = F.cross_entropy(x, t, weight=w)
    loss.backward()
    assert math.isnan(loss.item())  # 0 / 0, as torch
    np.testing.assert_array_equal(x.grad.cpu().numpy(), np.zeros((3, _C), np.float32))
    assert math.isnan(F.nll_loss(x.detach(), t, weight=w).item())


@sim_only
def test_a_cross_entropy_step_on_device_targets_makes_no_host_copy_and_no_sync():
    from tritensor.runtime import sim

    x = tt.randn(8, 5, device="cuda", requires_grad=True)
    t = tt.tensor([0, 4, 1, -100, 3, 2, 2, 0], device="cuda")
    w = tt.tensor([0.5, 2.0, 1.0, 0.25, 1.5], device="cuda")
    cases = {"plain": lambda: F.cross_entropy(x, t), "weighted": lambda: F.cross_entropy(x, t, weight=w),
             "smoothed": lambda: F.cross_entropy(x, t, label_smoothing=0.1),
             "nll_loss": lambda: F.nll_loss(x.log_softmax(1), t, weight=w)}
    for name, step in cases.items():
        for _ in range(2):  # the second time: every kernel loaded, the device's error flag made
            with sim.counting() as c:
                step().backward()
        assert "dtoh" not in c and "sync" not in c, (name, dict(c))


@gpu_only
def test_a_captured_cross_entropy_replays_and_reports_a_bad_target_after_the_replay():
    x = tt.randn(4, _C, device="cuda")
    t = tt.tensor([0, 3, -100, 1], device="cuda")
    s = tt.cuda.Stream()
    with tt.cuda.stream(s):
        for _ in range(2):  # warm up: kernels loaded, the device's error flag made
            F.cross_entropy(x, t)
    tt.cuda.synchronize()
    g = tt.cuda.CUDAGraph()
    with tt.cuda.graph(g):
        out = F.cross_entropy(x, t)
    for rows in ([0, 3, -100, 1], [2, 2, 1, -100]):
        t.copy_(tt.tensor(rows, device="cuda"))
        g.replay()
        assert out.item() == F.cross_entropy(x, t).item()  # the captured mean divides by the count replayed
    t.copy_(tt.tensor([0, 4, 1, 2], device="cuda"))
    g.replay()  # the replayed kernel sets the flag; the next sync reports it
    with pytest.raises(IndexError, match=r"^Target 4 is out of bounds\."):
        tt.cuda.synchronize()
    if mode.SIM:  # no replay since that report: a sync has nothing to read
        from tritensor.runtime import sim
        with sim.counting() as c:
            x.sum().item()
        assert c["dtoh"] == 1 and c["sync"] == 1, dict(c)
