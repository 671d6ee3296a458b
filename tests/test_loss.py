"""Losses (``cross_entropy`` on the fused kernels of ``triton_kernels/loss.py``, ``nll_loss`` and
``mse_loss`` written with other ops; core entries ``core/ops/loss.py``, derivative
``autograd/functions/loss.py``) against float64 NumPy over dtypes/odd/empty/non-contiguous
inputs, their errors, and their gradchecks.
"""
import math

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
        x = tt.from_numpy(np.ascontiguousarray(xn.T)).t()
        assert not x.is_contiguous() or n == 1 or c == 1
    else:
        x = tt.from_numpy(xn.copy())
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
    x = tt.from_numpy(xn.copy()).requires_grad_()
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
    x = tt.randn(3, 4)
    with pytest.raises(IndexError, match="Target 4 is out of bounds"):
        F.cross_entropy(x, tt.tensor([0, 4, 1]))
    with pytest.raises(IndexError, match="Target -2 is out of bounds"):
        F.cross_entropy(x, tt.tensor([0, -2, 1]))
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
    out = nn.functional.mse_loss(tt.from_numpy(a), tt.from_numpy(b).T.contiguous().T, reduction=reduction)
    assert_close(out, ref, tt.float32)
    with pytest.raises(ValueError, match="reduction"):
        nn.functional.mse_loss(tt.from_numpy(a), tt.from_numpy(b), reduction="avg")


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
