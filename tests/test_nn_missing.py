"""The nn classes and nn.functional names torch 2.13 has that tritensor lacked until real model code needed them: each
against a float64 NumPy reference written from torch's definition, over dtypes and layouts, with
empty shapes, gradchecks, torch's errors, and the reprs recorded from torch 2.13.

Composites of recorded ops round in the dtype after each op, so low-precision checks name the
``rounded_terms`` profile with the length of their op chain."""
import warnings

import numpy as np
import pytest

import tritensor as tt
import tritensor.nn as nn
import tritensor.nn.functional as F
from layouts import make
from tolerances import FLOAT_DTYPES, assert_close
from tritensor.autograd import gradcheck

RNG = np.random.default_rng(33)


def _normal(shape):
    return RNG.standard_normal(shape)


def _f64(a, grad=True):
    return tt.tensor(np.asarray(a, np.float64), requires_grad=grad)


def _low(dtype):
    return dtype in (tt.float16, tt.bfloat16)


# ----- activations ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_rrelu_leaky_forms_softmin_softmax2d(dtype):
    x, r = make((3, 4, 5), dtype, "transposed", _normal)
    slope = (0.1 + 0.3) / 2
    assert_close(F.rrelu(x, 0.1, 0.3), np.where(r > 0, r, r * slope), dtype)  # eval: torch's mean slope
    assert_close(nn.RReLU(0.1, 0.3).eval()(x), np.where(r > 0, r, r * slope), dtype)
    y = F.rrelu(x, 0.1, 0.3, training=True).numpy().astype(np.float64)
    neg = r < 0
    ratio = y[neg] / r[neg]
    assert (ratio >= 0.1 - 1e-2).all() and (ratio <= 0.3 + 1e-2).all() and np.ptp(ratio) > 0  # drawn per element
    assert_close(y[~neg], r[~neg], dtype)
    c, rc = make((4, 3), dtype, "contiguous", _normal)
    assert F.leaky_relu_(c, 0.2) is c and F.elu_(c) is c
    lr = np.where(rc > 0, rc, 0.2 * rc)
    assert_close(c, np.where(lr > 0, lr, np.expm1(np.minimum(lr, 0))), dtype, "rounded_terms", k=2)
    em = np.exp(-r - (-r).max(1, keepdims=True))
    assert_close(nn.Softmin(dim=1)(x), em / em.sum(1, keepdims=True), dtype)
    s2 = nn.Softmax2d()(x)
    ex = np.exp(r - r.max(-3, keepdims=True))
    assert_close(s2, ex / ex.sum(-3, keepdims=True), dtype)
    assert F.rrelu(x[:0]).shape == (0, 4, 5)


def test_activation_errors_reprs_and_gradcheck():
    with pytest.raises(RuntimeError, match="Lower bound should be less than or equal to the upper bound"):
        F.rrelu(tt.ones(3), 0.5, 0.1)
    with pytest.raises(ValueError, match="Softmax2d: expected input to be 3D or 4D, got 1D instead"):
        nn.Softmax2d()(tt.ones(3))
    assert repr(nn.RReLU()) == "RReLU(lower=0.125, upper=0.3333333333333333)"
    assert repr(nn.RReLU(0.1, 0.3, True)) == "RReLU(lower=0.1, upper=0.3, inplace=True)"
    assert repr(nn.Softmin(1)) == "Softmin(dim=1)" and repr(nn.Softmax2d()) == "Softmax2d()"
    assert repr(nn.ChannelShuffle(2)) == "ChannelShuffle(groups=2)"
    x = _f64(RNG.standard_normal((2, 3)) + 0.1)
    assert gradcheck(lambda t: F.rrelu(t, 0.1, 0.3), (x,), fast_mode=True)


# ----- losses -----------------------------------------------------------------------------------
def _multi_margin_ref(x, y, p, margin, w):
    n, C = x.shape
    out = np.zeros(n)
    for i in range(n):
        for j in range(C):
            if j != y[i]:
                t = max(0.0, margin - x[i, y[i]] + x[i, j]) ** p
                out[i] += (w[y[i]] if w is not None else 1.0) * t
    return out / C


def _multilabel_ref(x, t):
    n, C = x.shape
    out = np.zeros(n)
    for i in range(n):
        tg = []
        for v in t[i]:
            if v < 0:
                break
            tg.append(v)
        for j in tg:
            for k in range(C):
                if k not in tg:
                    out[i] += max(0.0, 1 - (x[i, j] - x[i, k]))
    return out / C


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_margin_losses_match_numpy(dtype):
    x, r = make((3, 5), dtype, "transposed", _normal)
    y = np.array([0, 4, 2])
    w = np.array([1.0, 2.0, 0.5, 1.5, 3.0])
    k = 8 if _low(dtype) else 1  # a chain of elementwise ops and a 5-term sum, each rounded in the dtype
    for p, margin, weight in ((1, 1.0, None), (2, 0.7, w)):
        out = F.multi_margin_loss(x, tt.tensor(y), p=p, margin=margin,
                                  weight=None if weight is None else tt.tensor(weight, dtype=dtype), reduction="none")
        assert_close(out, _multi_margin_ref(r, y, p, margin, weight), dtype, "rounded_terms", k=k)
    mod = nn.MultiMarginLoss(p=2, margin=0.7, weight=tt.tensor(w, dtype=dtype))
    assert_close(mod(x, tt.tensor(y)), _multi_margin_ref(r, y, 2, 0.7, w).mean(), dtype, "rounded_terms", k=k)
    assert_close(F.multi_margin_loss(x[0], tt.tensor(0), reduction="none"), _multi_margin_ref(r[:1], [0], 1, 1.0,
                                                                                              None)[0],
                 dtype, "rounded_terms", k=k)
    t = np.array([[2, 0, -1, 4, 1], [1, -1, 0, 0, 0], [4, 3, 2, 1, 0]])
    assert_close(F.multilabel_margin_loss(x, tt.tensor(t), reduction="none"), _multilabel_ref(r, t), dtype,
                 "rounded_terms", k=2 * k)
    assert_close(nn.MultiLabelMarginLoss(reduction="sum")(x, tt.tensor(t)), _multilabel_ref(r, t).sum(), dtype,
                 "rounded_terms", k=4 * k)
    tgt = np.array([1.0, -1.0, 1.0, -1.0, 1.0])
    h = np.where(tgt == 1, r[0], np.maximum(0, 0.5 - r[0]))
    assert_close(F.hinge_embedding_loss(x[0], tt.tensor(tgt, dtype=dtype), margin=0.5, reduction="none"), h, dtype)
    assert_close(nn.HingeEmbeddingLoss(margin=0.5)(x[0], tt.tensor(tgt, dtype=dtype)), h.mean(), dtype,
                 "rounded_terms", k=k)
    a, ra = make((4, 3), dtype, "contiguous", _normal)
    b, rb = make((4, 3), dtype, "sliced", _normal)
    c, rc = make((4, 3), dtype, "contiguous", _normal)
    l1 = lambda u, v: (u - v).abs().sum(-1)  # noqa: E731  (any callable distance)
    d_ap, d_an, d_pn = (np.abs(ra - rb).sum(-1), np.abs(ra - rc).sum(-1), np.abs(rb - rc).sum(-1))
    ref = np.maximum(0.0, 1.5 + d_ap - np.minimum(d_an, d_pn))
    out = F.triplet_margin_with_distance_loss(a, b, c, distance_function=l1, margin=1.5, swap=True, reduction="none")
    assert_close(out, ref, dtype, "rounded_terms", k=k)
    default = nn.TripletMarginWithDistanceLoss()(a, b, c)
    pd = lambda u, v: np.sqrt(((u - v + 1e-6) ** 2).sum(-1))  # noqa: E731  pairwise_distance's eps
    assert_close(default, np.maximum(0.0, 1.0 + pd(ra, rb) - pd(ra, rc)).mean(), dtype, "rounded_terms", k=k)
    # empty batches
    assert F.multi_margin_loss(x[:0], tt.zeros(0, dtype=tt.int64), reduction="sum").item() == 0
    assert F.multilabel_margin_loss(x[:0], tt.zeros(0, 5, dtype=tt.int64), reduction="none").shape == (0,)


def test_margin_loss_errors_reprs_gradcheck():
    x = tt.randn(3, 4)
    with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
        F.multi_margin_loss(x, tt.tensor([0, 1, 2]), p=3)
    with pytest.raises(RuntimeError, match="target tensor should be 1-D with size equal to the number of input"):
        F.multi_margin_loss(x, tt.tensor([0, 1]))
    with pytest.raises(ValueError, match="weight must be one-dimensional"):
        F.multi_margin_loss(x, tt.tensor([0, 1, 2]), weight=tt.ones(2, 2))
    with pytest.raises(RuntimeError, match=r"inconsistent weight size, expected 4 but got \[3\]"):
        F.multi_margin_loss(x, tt.tensor([0, 1, 2]), weight=tt.ones(3))
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 1 with size 4"):
        # a class past C: the gather's bounds check, never a silent read (on a device, at the next synchronisation)
        F.multi_margin_loss(x, tt.tensor([0, 1, 5])).cpu()
    with pytest.raises(RuntimeError, match=r"Expected non-empty vector or matrix with optional 0-dim batch size, "
                                           r"but got: \[2, 3, 4\]"):
        F.multi_margin_loss(tt.randn(2, 3, 4), tt.tensor([0, 1]))
    with pytest.raises(RuntimeError, match=r"inconsistent target size: \[3, 3\] for input of size: \[3, 4\]"):
        F.multilabel_margin_loss(x, tt.tensor([[0, 1, -1]] * 3))
    with pytest.raises(ValueError, match="bad is not a valid value for reduction"):
        F.hinge_embedding_loss(x, tt.ones(3, 4), reduction="bad")
    with pytest.raises(ValueError, match="margin must be greater than 0, got -1"):
        F.triplet_margin_with_distance_loss(x, x, x, margin=-1)
    with pytest.raises(ValueError, match="TripletMarginWithDistanceLoss: expected margin to be greater than 0"):
        nn.TripletMarginWithDistanceLoss(margin=0)
    with pytest.raises(ValueError, match="MultiMarginLoss: expected weight to be None or 1D tensor, got 2D"):
        nn.MultiMarginLoss(weight=tt.ones(2, 2))
    assert [repr(m) for m in (nn.MultiMarginLoss(), nn.HingeEmbeddingLoss(), nn.MultiLabelMarginLoss())] == \
        ["MultiMarginLoss()", "HingeEmbeddingLoss()", "MultiLabelMarginLoss()"]
    assert repr(nn.TripletMarginWithDistanceLoss()) == \
        "TripletMarginWithDistanceLoss(\n  (distance_function): PairwiseDistance()\n)"
    assert list(nn.MultiMarginLoss(weight=tt.ones(3)).state_dict()) == ["weight"]  # a buffer, as torch's
    with pytest.warns(FutureWarning, match="`NLLLoss2d` has been deprecated"):
        m = nn.NLLLoss2d()
    lp = tt.randn(2, 3, 2, 2).log_softmax(1)
    tg = tt.tensor([[[0, 1], [2, 0]], [[1, 1], [0, 2]]])
    assert_close(m(lp, tg), F.nll_loss(lp, tg).numpy(), tt.float32)
    xg = _f64(RNG.standard_normal((2, 4)))
    assert gradcheck(lambda t: F.multi_margin_loss(t, tt.tensor([0, 3]), p=2, weight=tt.tensor(
        [1.0, 2.0, 0.5, 1.0], dtype=tt.float64)), (xg,), fast_mode=True)
    assert gradcheck(lambda t: F.multilabel_margin_loss(t, tt.tensor([[3, 0, -1, 1]] * 2)), (xg,), fast_mode=True)
    assert gradcheck(lambda t: F.hinge_embedding_loss(t, tt.tensor([[1.0, -1, 1, -1]] * 2)), (xg,), fast_mode=True)
    assert gradcheck(lambda a, b: F.triplet_margin_with_distance_loss(a, b, b.flip(0), swap=True),
                     (xg, _f64(RNG.standard_normal((2, 4)))), fast_mode=True)


# ----- normalization ----------------------------------------------------------------------------
def _lrn_ref(x, size, alpha, beta, k):
    sq = x ** 2
    C = x.shape[1]
    div = np.zeros_like(x)
    for c in range(C):
        lo, hi = max(0, c - size // 2), min(C, c + (size - 1) // 2 + 1)
        div[:, c] = sq[:, lo:hi].sum(1)
    return x / (k + alpha / size * div) ** beta


def _cross_map_ref(x, size, alpha, beta, k):
    """torch's legacy CrossMapLRN2d loop, transcribed."""
    sq = x ** 2
    C = x.shape[1]
    pre = int((size - 1) / 2 + 1)
    scale = np.zeros_like(x)
    scale[:, 0] = sq[:, :min(pre, C)].sum(1)
    for c in range(1, C):
        scale[:, c] = scale[:, c - 1]
        if c < C - pre + 1:
            scale[:, c] += sq[:, c + pre - 1]
        if c > pre:
            scale[:, c] -= sq[:, c - pre]
    return x * (scale * alpha / size + k) ** -beta


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_local_response_norm_matches_numpy(dtype):
    k = 6 if _low(dtype) else 1
    for shape, size in (((2, 5, 4), 3), ((2, 7, 3, 2), 4), ((1, 3, 2, 2, 2), 5)):
        x, r = make(shape, dtype, "transposed", _normal)
        assert_close(F.local_response_norm(x, size, 0.1, 0.75, 2.0), _lrn_ref(r, size, 0.1, 0.75, 2.0), dtype,
                     "rounded_terms", k=k)
    x, r = make((2, 7, 3, 2), dtype, "sliced", _normal)
    assert_close(nn.LocalResponseNorm(3, 0.1)(x), _lrn_ref(r, 3, 0.1, 0.75, 1.0), dtype, "rounded_terms", k=k)
    for size in (3, 4):
        assert_close(nn.CrossMapLRN2d(size, 0.1, 0.75, 2)(x), _cross_map_ref(r, size, 0.1, 0.75, 2), dtype,
                     "rounded_terms", k=k)
    assert F.local_response_norm(x[:0], 3).shape == (0, 7, 3, 2)


def test_lrn_errors_reprs_gradcheck():
    with pytest.raises(ValueError, match=r"Expected 3D or higher dimensionality input \(got 2 dimensions\)"):
        F.local_response_norm(tt.ones(2, 3), 2)
    with pytest.raises(ValueError, match="CrossMapLRN2d: Expected input to be 4D, got 3D instead."):
        nn.CrossMapLRN2d(3)(tt.ones(2, 3, 4))
    assert repr(nn.LocalResponseNorm(3)) == "LocalResponseNorm(3, alpha=0.0001, beta=0.75, k=1.0)"
    assert repr(nn.CrossMapLRN2d(3, 1e-4, 0.75, 1)) == "CrossMapLRN2d(3, alpha=0.0001, beta=0.75, k=1)"
    x = _f64(RNG.standard_normal((2, 4, 3)))
    assert gradcheck(lambda t: F.local_response_norm(t, 3, 0.5), (x,), fast_mode=True)
    x4 = _f64(RNG.standard_normal((1, 5, 2, 2)))
    assert gradcheck(lambda t: nn.CrossMapLRN2d(3, 0.5)(t), (x4,), fast_mode=True)


# ----- pooling ----------------------------------------------------------------------------------
def _windows(n_in, n_out):
    return [(i * n_in // n_out, -(-(i + 1) * n_in // n_out)) for i in range(n_out)]


def _max_pool3d_ref(x, k, s, p):
    N, C, D, H, W = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p), (p, p)), constant_values=-np.inf)
    o = [(n + 2 * p - k) // s + 1 for n in (D, H, W)]
    val = np.zeros((N, C, *o))
    idx = np.zeros((N, C, *o), np.int64)
    for a in range(o[0]):
        for b in range(o[1]):
            for c in range(o[2]):
                win = xp[:, :, a * s:a * s + k, b * s:b * s + k, c * s:c * s + k].reshape(N, C, -1)
                j = win.argmax(-1)
                val[:, :, a, b, c] = win.max(-1)
                d, h, w = np.unravel_index(j, (k, k, k))
                idx[:, :, a, b, c] = ((a * s + d - p) * H + (b * s + h - p)) * W + (c * s + w - p)
    return val, idx


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_3d_and_lp_pools_match_numpy(dtype):
    x, r = make((2, 3, 5, 4, 5), dtype, "transposed", _normal)
    v, i = F.max_pool3d_with_indices(x, 2, 1, 1)
    rv, ri = _max_pool3d_ref(r, 2, 1, 1)
    assert_close(v, rv, dtype, "exact")
    np.testing.assert_array_equal(i.numpy(), ri)
    # unpooling puts each maximum back at its index
    up = F.max_unpool3d(v, i, 2, 1, 1)
    ref_up = np.zeros((2, 3, 5 * 4 * 5))
    np.put_along_axis(ref_up, ri.reshape(2, 3, -1), rv.reshape(2, 3, -1), -1)
    assert_close(up, ref_up.reshape(2, 3, 5, 4, 5), dtype, "exact")
    assert_close(nn.MaxUnpool3d(2, 1, 1)(v, i), ref_up.reshape(2, 3, 5, 4, 5), dtype, "exact")
    # adaptive pools
    ov, oi = F.adaptive_max_pool3d_with_indices(x, (2, 3, 2))
    av = F.adaptive_avg_pool3d(x, (2, 3, 2))
    rv, ri, ra = np.zeros((2, 3, 2, 3, 2)), np.zeros((2, 3, 2, 3, 2), np.int64), np.zeros((2, 3, 2, 3, 2))
    for a, (d0, d1) in enumerate(_windows(5, 2)):
        for b, (h0, h1) in enumerate(_windows(4, 3)):
            for c, (w0, w1) in enumerate(_windows(5, 2)):
                win = r[..., d0:d1, h0:h1, w0:w1]
                flat = win.reshape(2, 3, -1)
                rv[..., a, b, c], ra[..., a, b, c] = flat.max(-1), flat.mean(-1)
                dd, hh, ww = np.unravel_index(flat.argmax(-1), win.shape[-3:])
                ri[..., a, b, c] = ((d0 + dd) * 4 + h0 + hh) * 5 + w0 + ww
    assert_close(ov, rv, dtype, "exact")
    np.testing.assert_array_equal(oi.numpy(), ri)
    assert_close(av, ra, dtype)
    assert_close(nn.AdaptiveAvgPool3d((2, 3, 2))(x), ra, dtype)
    # sizes that divide: the avg_pool3d path
    assert_close(F.adaptive_avg_pool3d(x, (1, 2, 5)), r.reshape(2, 3, 1, 5, 2, 2, 5, 1).mean((3, 5, 7)), dtype)
    assert_close(nn.AdaptiveMaxPool3d((2, 3, 2))(x), rv, dtype, "exact")
    # power-average pools: (sum over the window of x^p)^(1/p)
    a = abs(r) + 0.5
    xa = tt.tensor(a, dtype=dtype)
    k = 6 if _low(dtype) else 1
    l1 = F.lp_pool1d(xa.flatten(2), 2, 3)
    L = a.reshape(2, 3, -1)
    n1 = L.shape[-1] // 3
    assert_close(l1, np.sqrt((L[..., :n1 * 3].reshape(2, 3, n1, 3) ** 2).sum(-1)), dtype, "rounded_terms", k=k)
    l2 = nn.LPPool2d(3, (2, 2))(xa[:, :, 0])
    p2 = a[:, :, 0, :4, :4].reshape(2, 3, 2, 2, 2, 2)
    assert_close(l2, ((p2 ** 3).sum((3, 5))) ** (1 / 3), dtype, "rounded_terms", k=k)
    l3 = F.lp_pool3d(xa, 1.5, 2)
    p3 = a[:, :, :4, :4, :4].reshape(2, 3, 2, 2, 2, 2, 2, 2)
    assert_close(l3, ((p3 ** 1.5).sum((3, 5, 7))) ** (1 / 1.5), dtype, "rounded_terms", k=k)
    assert F.adaptive_max_pool3d(x[:0], 2).shape == (0, 3, 2, 2, 2)


def _intervals(u, n_in, n_out, k):
    """torch's generate_intervals."""
    if n_out == 1:
        return [n_in - k]
    alpha = (n_in - k) / (n_out - 1)
    return [int((i + u) * alpha) - int(u * alpha) for i in range(n_out - 1)] + [n_in - k]


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64], ids=str)
def test_fractional_max_pools_match_numpy(dtype):
    x, r = make((2, 3, 7, 6), dtype, "sliced", _normal)
    u = RNG.uniform(size=(2, 3, 2))
    v, i = F.fractional_max_pool2d(x, (2, 3), output_size=(4, 3), return_indices=True,
                                   _random_samples=tt.tensor(u, dtype=dtype))
    rv, ri = np.zeros((2, 3, 4, 3)), np.zeros((2, 3, 4, 3), np.int64)
    for n in range(2):
        for c in range(3):
            us = np.asarray(u[n, c], dtype=np.float32 if dtype is tt.float32 else np.float64)
            hs, ws = _intervals(us[1], 7, 4, 2), _intervals(us[0], 6, 3, 3)
            for a, h0 in enumerate(hs):
                for b, w0 in enumerate(ws):
                    win = r[n, c, h0:h0 + 2, w0:w0 + 3]
                    j = win.argmax()
                    rv[n, c, a, b] = win.max()
                    ri[n, c, a, b] = (h0 + j // 3) * 6 + w0 + j % 3
    assert_close(v, rv, dtype, "exact")
    np.testing.assert_array_equal(i.numpy(), ri)
    x3, r3 = make((1, 2, 5, 6, 5), dtype, "contiguous", _normal)
    u3 = RNG.uniform(size=(1, 2, 3))
    v3, i3 = F.fractional_max_pool3d_with_indices(x3, 2, output_ratio=0.5, _random_samples=tt.tensor(u3, dtype=dtype))
    assert v3.shape == (1, 2, 2, 3, 2)
    for c in range(2):
        us = np.asarray(u3[0, c], dtype=np.float32 if dtype is tt.float32 else np.float64)
        ts_, hs, ws = _intervals(us[0], 5, 2, 2), _intervals(us[1], 6, 3, 2), _intervals(us[2], 5, 2, 2)
        for a, t0 in enumerate(ts_):
            for b, h0 in enumerate(hs):
                for d, w0 in enumerate(ws):
                    win = r3[0, c, t0:t0 + 2, h0:h0 + 2, w0:w0 + 2]
                    assert_close(v3[0, c, a, b, d], win.max(), dtype, "exact")
                    dd, hh, ww = np.unravel_index(win.argmax(), win.shape)
                    assert i3[0, c, a, b, d].item() == ((t0 + dd) * 6 + h0 + hh) * 5 + w0 + ww
    # the module draws its own samples: every output is a maximum of some window of its plane
    m = nn.FractionalMaxPool2d(2, output_ratio=0.5)
    out = m(x)
    assert out.shape == (2, 3, 3, 3) and np.isin(out.numpy(), r).all()


def test_pool_errors_reprs_gradcheck():
    v, i = F.max_pool2d(tt.arange(16.0).reshape(1, 1, 4, 4), 2, return_indices=True)
    with pytest.raises(ValueError, match=r'invalid output_size "\(9, 9\)" \(dim 0 must be between 2 and 6\)'):
        F.max_unpool2d(v, i, 2, output_size=(9, 9))
    with pytest.raises(ValueError, match="output_size should be a sequence containing 2 or 4 elements, but it has a "
                                         "length of '3'"):
        F.max_unpool2d(v, i, 2, output_size=(1, 1, 5))
    with pytest.raises(IndexError, match="index 150 is out of bounds"):  # the scatter's bounds check
        F.max_unpool2d(v, i * 10, 2).cpu()
    out = F.max_unpool2d(v, i, 2, output_size=(5, 5))
    ref = np.zeros(25)
    ref[i.numpy().ravel()] = v.numpy().ravel()
    assert_close(out, ref.reshape(1, 1, 5, 5), tt.float32, "exact")
    assert_close(nn.MaxUnpool1d(2)(*F.max_pool1d_with_indices(tt.tensor([[1.0, 3.0, 2.0, 0.5]]), 2)),
                 np.array([[0.0, 3.0, 2.0, 0.0]]), tt.float32, "exact")
    with pytest.raises(ValueError, match="FractionalMaxPool2d requires specifying either an output size, or a "
                                         "pooling ratio"):
        nn.FractionalMaxPool2d(2)
    with pytest.raises(ValueError, match="only one of output_size and output_ratio may be specified"):
        nn.FractionalMaxPool2d(2, output_size=2, output_ratio=0.5)
    with pytest.raises(ValueError, match=r"output_ratio must be between 0 and 1 \(got 1.5\)"):
        nn.FractionalMaxPool2d(2, output_ratio=1.5)
    with pytest.raises(RuntimeError, match="fractional_max_pool2d\\(\\): pool height 2 too large relative to input "
                                           "height 5"):
        F.fractional_max_pool2d(tt.randn(1, 1, 5, 5), 2, output_size=5)
    with pytest.raises(ValueError, match="fractional_max_pool2d requires specifying either an output_size or an "
                                         "output_ratio"):
        F.fractional_max_pool2d(tt.randn(1, 1, 5, 5), 2)
    assert repr(nn.MaxUnpool2d(2)) == "MaxUnpool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))"
    assert repr(nn.MaxUnpool1d(2, stride=1, padding=1)) == "MaxUnpool1d(kernel_size=(2,), stride=(1,), padding=(1,))"
    assert repr(nn.LPPool2d(2, 3, stride=2, ceil_mode=True)) == \
        "LPPool2d(norm_type=2, kernel_size=3, stride=2, ceil_mode=True)"
    assert repr(nn.LPPool3d(1.5, 2)) == "LPPool3d(norm_type=1.5, kernel_size=2, stride=None, ceil_mode=False)"
    assert repr(nn.FractionalMaxPool3d(2, output_size=3)) == "FractionalMaxPool3d()"
    assert repr(nn.AdaptiveAvgPool3d((2, None, 3))) == "AdaptiveAvgPool3d(output_size=(2, None, 3))"
    assert repr(nn.AdaptiveMaxPool3d(2, return_indices=True)) == "AdaptiveMaxPool3d(output_size=2)"
    assert list(nn.FractionalMaxPool2d(2, output_ratio=0.5, _random_samples=tt.rand(1, 1, 2)).state_dict()) == \
        ["_random_samples"]
    # random projections (fast_mode): two forward differences and one backward per check
    x = _f64(RNG.standard_normal((1, 2, 3, 4, 3)))
    assert gradcheck(lambda t: F.max_pool3d_with_indices(t, 2, 1, 1)[0], (x,), fast_mode=True)
    assert gradcheck(lambda t: F.adaptive_avg_pool3d(t, (2, 3, 2)), (x,), fast_mode=True)
    assert gradcheck(lambda t: F.adaptive_max_pool3d(t, (2, 3, 2)), (x,), fast_mode=True)
    x2 = _f64(RNG.standard_normal((2, 5, 4)))
    assert gradcheck(lambda t: F.lp_pool2d(t.abs() + 0.5, 2, 2), (x2,), fast_mode=True)
    vv, ii = F.max_pool2d(x2.detach(), 2, return_indices=True)
    assert gradcheck(lambda t: F.max_unpool2d(t, ii, 2, output_size=(5, 4)), (_f64(vv.numpy()),), fast_mode=True)
    samples = tt.tensor([[[0.3, 0.6], [0.8, 0.1]]], dtype=tt.float64)  # unbatched: one sample row per channel
    assert gradcheck(lambda t: F.fractional_max_pool2d(t, 2, output_size=(3, 2), _random_samples=samples), (x2,),
                     fast_mode=True)


# ----- dropout ----------------------------------------------------------------------------------
def test_dropout3d_and_feature_alpha_dropout():
    x = tt.ones(3, 4, 2, 2, 2)
    y = F.dropout3d(x, 0.5).numpy().reshape(3, 4, -1)
    assert set(np.unique(y)) <= {0.0, 2.0} and (y.min(-1) == y.max(-1)).all()  # whole channels
    assert F.dropout3d(x, 0.5, training=False) is x
    with pytest.warns(UserWarning, match="dropout3d: Received a 3-D input to dropout3d"):
        F.dropout3d(tt.ones(2, 3, 4), 0.5)
    z = F.feature_alpha_dropout(x, 0.3, training=True).numpy().reshape(3, 4, -1)
    assert (z.min(-1) == z.max(-1)).all() and len(np.unique(z)) <= 2
    alpha = 1.7580993408473766
    a = 1.0 / np.sqrt((alpha * alpha * 0.3 + 1) * 0.7)
    kept_or_dropped = np.array([a + alpha * a * 0.3, -alpha * a + alpha * a * 0.3])
    assert (np.abs(np.unique(z)[:, None] - kept_or_dropped[None, :]).min(1) < 1e-5).all()
    with pytest.raises(RuntimeError, match="Feature dropout requires at least 2 dimensions in the input"):
        F.feature_alpha_dropout(tt.ones(3), 0.5, training=True)
    assert repr(nn.Dropout3d()) == "Dropout3d(p=0.5, inplace=False)"
    assert repr(nn.FeatureAlphaDropout(0.2, inplace=True)) == "FeatureAlphaDropout(p=0.2, inplace=True)"
    assert nn.Dropout3d().eval()(x) is x


# ----- convolution, instance norm, padding, shuffling ------------------------------------------------
def _conv_transpose3d_ref(x, w, s, p, op, d):
    N, Ci, D, H, W = x.shape
    _, Co, kd, kh, kw = w.shape
    full = [(n - 1) * st + dl * (k - 1) + 1 + o for n, st, dl, k, o in zip((D, H, W), s, d, (kd, kh, kw), op)]
    out = np.zeros((N, Co, *full))
    for a in range(D):
        for b in range(H):
            for c in range(W):
                for i in range(kd):
                    for j in range(kh):
                        for k in range(kw):
                            out[:, :, a * s[0] + i * d[0], b * s[1] + j * d[1], c * s[2] + k * d[2]] += \
                                x[:, :, a, b, c] @ w[:, :, i, j, k]
    return out[:, :, p[0]:full[0] - p[0], p[1]:full[1] - p[1], p[2]:full[2] - p[2]]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_conv_transpose3d_and_instance_norm3d_match_numpy(dtype):
    x, r = make((2, 3, 3, 2, 3), dtype, "transposed", _normal)
    w, rw = make((3, 2, 2, 3, 2), dtype, "contiguous", _normal)
    out = F.conv_transpose3d(x, w, None, (2, 1, 2), (1, 0, 1), (1, 0, 0), 1, (1, 2, 1))
    ref = _conv_transpose3d_ref(r, rw, (2, 1, 2), (1, 0, 1), (1, 0, 0), (1, 2, 1))
    assert out.shape == ref.shape
    # each output sums up to 3 * 12 products, accumulated in fp32 (fp64)
    assert_close(out, ref, dtype, "accumulate", k=36)
    m = nn.ConvTranspose3d(3, 4, 2, stride=2, groups=1, bias=True).to(dtype)
    y = m(x, output_size=(7, 5, 7)).detach()
    ref = _conv_transpose3d_ref(r, m.weight.detach().float().numpy().astype(np.float64), (2, 2, 2), (0, 0, 0),
                                (1, 1, 1), (1, 1, 1)) + m.bias.detach().float().numpy().reshape(1, 4, 1, 1, 1)
    assert y.shape == (2, 4, 7, 5, 7)
    assert_close(y, ref, dtype, "accumulate", k=24)
    n = nn.InstanceNorm3d(3, affine=True).to(dtype)
    mean, var = r.mean((2, 3, 4), keepdims=True), r.var((2, 3, 4), keepdims=True)
    assert_close(n(x).detach(), (r - mean) / np.sqrt(var + 1e-5), dtype, "rounded_terms", k=4 if _low(dtype) else 1)
    assert F.conv_transpose3d(x[:0], w).shape == (0, 2, 4, 4, 4)


def test_conv_transpose3d_errors_gradcheck_and_reprs():
    with pytest.raises(RuntimeError, match="output padding must be smaller than either stride or dilation"):
        F.conv_transpose3d(tt.ones(1, 2, 2, 2, 2), tt.ones(2, 1, 2, 2, 2), output_padding=1)
    with pytest.raises(RuntimeError, match="expected input\\[1, 3, 2, 2, 2\\] to have 2 channels"):
        F.conv_transpose3d(tt.ones(1, 3, 2, 2, 2), tt.ones(2, 1, 2, 2, 2))
    assert repr(nn.ConvTranspose3d(2, 4, 3)) == "ConvTranspose3d(2, 4, kernel_size=(3, 3, 3), stride=(1, 1, 1))"
    assert repr(nn.InstanceNorm3d(3)) == \
        "InstanceNorm3d(3, eps=1e-05, momentum=0.1, affine=False, bias=False, track_running_stats=False)"
    x = _f64(RNG.standard_normal((1, 4, 2, 2, 2)))
    w = _f64(RNG.standard_normal((4, 1, 2, 1, 2)))
    assert gradcheck(lambda a, b: F.conv_transpose3d(a, b, None, (2, 1, 1), (0, 0, 1), 0, 2), (x, w),
                     fast_mode=True)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_3d_and_circular_pads_and_channel_shuffle(dtype):
    x, r = make((2, 3, 3, 4, 3), dtype, "sliced", _normal)
    pads = (1, 2, 0, 1, 2, 1)
    np_pad = ((0, 0), (0, 0), (2, 1), (0, 1), (1, 2))
    assert_close(nn.ConstantPad3d(pads, 2.5)(x), np.pad(r, np_pad, constant_values=2.5), dtype, "exact")
    assert_close(nn.ZeroPad3d(1)(x), np.pad(r, ((0, 0), (0, 0)) + ((1, 1),) * 3), dtype, "exact")
    assert_close(nn.ReflectionPad3d(pads)(x), np.pad(r, np_pad, mode="reflect"), dtype, "exact")
    assert_close(nn.ReplicationPad3d(pads)(x), np.pad(r, np_pad, mode="edge"), dtype, "exact")
    assert_close(nn.CircularPad3d(pads)(x), np.pad(r, np_pad, mode="wrap"), dtype, "exact")
    assert_close(nn.CircularPad2d((1, 0, 2, 1))(x[0]), np.pad(r[0], ((0, 0), (0, 0), (2, 1), (1, 0)), mode="wrap"),
                 dtype, "exact")
    assert_close(nn.CircularPad1d(2)(x[0, 0]), np.pad(r[0, 0], ((0, 0), (0, 0), (2, 2)), mode="wrap"), dtype,
                 "exact")
    with pytest.raises(ValueError, match=r"expected 3D or 4D input \(got 1D input\)"):
        nn.CircularPad2d(1)(tt.ones(3))
    y, ry = make((2, 6, 2), dtype, "transposed", _normal)
    assert_close(nn.ChannelShuffle(3)(y), ry.reshape(2, 3, 2, 2).transpose(0, 2, 1, 3).reshape(2, 6, 2), dtype,
                 "exact")
    with pytest.raises(RuntimeError, match="Number of channels must be divisible by groups. Got 6 channels and 4 "
                                           "groups."):
        nn.ChannelShuffle(4)(y)
    assert [repr(m) for m in (nn.CircularPad1d(2), nn.CircularPad3d((1, 2, 3, 4, 5, 6)), nn.ConstantPad3d(1, 2.5),
                              nn.ZeroPad3d(1), nn.ReflectionPad3d(1), nn.ReplicationPad3d(2))] == \
        ["CircularPad1d((2, 2))", "CircularPad3d((1, 2, 3, 4, 5, 6))",
         "ConstantPad3d(padding=(1, 1, 1, 1, 1, 1), value=2.5)", "ZeroPad3d((1, 1, 1, 1, 1, 1))",
         "ReflectionPad3d((1, 1, 1, 1, 1, 1))", "ReplicationPad3d((2, 2, 2, 2, 2, 2))"]
    assert nn.ZeroPad3d(1)(x[:0]).shape == (0, 3, 5, 6, 5)


# ----- the deprecated and small names -----------------------------------------------------------
def test_upsample_names_grid_sample_tables_and_container():
    x = tt.randn(1, 2, 3, 3)
    with pytest.warns(UserWarning, match="`nn.functional.upsample` is deprecated"):
        a = F.upsample(x, scale_factor=2)
    assert_close(a, F.interpolate(x, scale_factor=2).numpy(), tt.float32, "exact")
    with pytest.warns(UserWarning, match="`nn.functional.upsample_nearest` is deprecated"):
        b = F.upsample_nearest(x, size=(5, 5))
    assert_close(b, F.interpolate(x, size=(5, 5)).numpy(), tt.float32, "exact")
    with pytest.warns(UserWarning, match="`nn.functional.upsample_bilinear` is deprecated"):
        c = F.upsample_bilinear(x, size=(4, 4))
    assert_close(c, F.interpolate(x, size=(4, 4), mode="bilinear", align_corners=True).numpy(), tt.float32, "exact")
    assert F.GRID_SAMPLE_INTERPOLATION_MODES == {"bilinear": 0, "nearest": 1, "bicubic": 2}
    assert F.GRID_SAMPLE_PADDING_MODES == {"zeros": 0, "border": 1, "reflection": 2}
    F.assert_int_or_pair(3, "k", "{} bad")
    F.assert_int_or_pair((1, 2), "k", "{} bad")
    with pytest.raises(AssertionError, match="k bad"):
        F.assert_int_or_pair((1, 2, 3), "k", "{} bad")
    with pytest.warns(FutureWarning, match="`nn.Container` is deprecated"):
        c = nn.Container(a=nn.Linear(2, 2))
    assert [n for n, _ in c.named_children()] == ["a"] and repr(nn.Sequential()) == "Sequential()"


def test_init_dirac_eye_sparse_and_deprecated_names():
    w = tt.empty(4, 2, 3, 3)
    nn.init.dirac_(w, groups=2)
    ref = np.zeros((4, 2, 3, 3))
    for g in range(2):
        for d in range(2):
            ref[g * 2 + d, d, 1, 1] = 1
    assert_close(w, ref, tt.float32, "exact")
    e = nn.init.eye_(tt.empty(2, 3))
    assert_close(e, np.eye(2, 3), tt.float32, "exact")
    s = nn.init.sparse_(tt.empty(10, 5), 0.3, std=0.5)
    zeros = (s.numpy() == 0).sum(0)
    assert (zeros == 3).all() and s.numpy().std() > 0.1  # ceil(0.3 * 10) zeros per column
    with pytest.raises(ValueError, match="Only tensors with 3, 4, or 5 dimensions are supported"):
        nn.init.dirac_(tt.empty(2, 2))
    with pytest.raises(ValueError, match="dim 0 must be divisible by groups"):
        nn.init.dirac_(tt.empty(3, 2, 3), groups=2)
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        nn.init.eye_(tt.empty(2, 2, 2))
    for old in ("uniform", "normal", "constant", "eye", "dirac", "xavier_uniform", "xavier_normal", "kaiming_uniform",
                "kaiming_normal", "orthogonal", "sparse"):
        fn = getattr(nn.init, old)
        args = {"constant": (0.5,), "sparse": (0.1,)}.get(old, ())
        t = tt.empty(4, 3, 3) if old == "dirac" else tt.empty(4, 3)
        with pytest.warns(FutureWarning, match=f"`nn.init.{old}` is now deprecated in favor of `nn.init.{old}_`"):
            assert fn(t, *args) is t
        assert fn.__name__ == old
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.init.uniform_(tt.empty(2))  # the underscore forms do not warn


def test_adaptive_log_softmax_with_loss():
    """Against the full softmax it factorises: each class's log-probability is the head's (shortlist) or the
    head's cluster entry plus the cluster's own; the parameter names and errors are torch's."""
    m = nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], div_value=2.0).double()
    assert list(m.state_dict()) == ["head.weight", "tail.0.0.weight", "tail.0.1.weight", "tail.1.0.weight",
                                    "tail.1.1.weight"]
    assert m.head.weight.shape == (5, 8) and m.tail[1][0].weight.shape == (2, 8) and m.tail[1][1].weight.shape == (4, 2)
    x = _f64(RNG.standard_normal((5, 8)))
    t = np.array([0, 4, 9, 2, 7])
    W = {k: v.detach().numpy() for k, v in m.state_dict().items()}
    r = x.detach().numpy()

    def lsm(z):
        return z - z.max(1, keepdims=True) - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True))
    head = lsm(r @ W["head.weight"].T)
    full = np.concatenate([head[:, :3]] + [lsm(r @ W[f"tail.{i}.0.weight"].T @ W[f"tail.{i}.1.weight"].T)
                                           + head[:, 3 + i:4 + i] for i in range(2)], 1)
    out, loss = m(x, tt.tensor(t))
    assert_close(out.detach(), full[np.arange(5), t], tt.float64)
    assert_close(loss.detach(), -full[np.arange(5), t].mean(), tt.float64)
    assert_close(m.log_prob(x).detach(), full, tt.float64)
    np.testing.assert_array_equal(m.predict(x.detach()).numpy(), full.argmax(1))
    one, _ = m(x[1], tt.tensor(4))
    assert one.shape == () and abs(one.item() - full[1, 4]) < 1e-12
    assert gradcheck(lambda a: m(a, tt.tensor(t))[1], (x,), fast_mode=True)
    with pytest.raises(ValueError, match="cutoffs should be a sequence of unique, positive integers sorted"):
        nn.AdaptiveLogSoftmaxWithLoss(8, 10, [6, 3])
    with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 9\], but values in range \[0, 10\]"):
        m(x, tt.tensor([0, 4, 10, 2, 7]))
    with pytest.raises(RuntimeError, match="0D or 1D target tensor expected, multi-target not supported"):
        m(x, tt.zeros(5, 1, dtype=tt.int64))


def _mha_ref(q, k, v, w, b, ow, ob, H, bias_kv=None, zero_attn=False, mask=None, static=None):
    """torch's multi_head_attention_forward in float64 NumPy, weights per head: (out, weights)."""
    L, N, E = q.shape
    Dh = E // H
    pq, pk, pv = (x @ w[i * E:(i + 1) * E].T + (b[i * E:(i + 1) * E] if b is not None else 0)
                  for i, x in enumerate((q, k, v)))
    if bias_kv is not None:
        pk = np.concatenate([pk, np.broadcast_to(bias_kv[0], (1, N, E))])
        pv = np.concatenate([pv, np.broadcast_to(bias_kv[1], (1, N, E))])
    heads = lambda x: x.reshape(x.shape[0], N * H, Dh).transpose(1, 0, 2)  # noqa: E731
    qh = heads(pq)
    kh, vh = (heads(pk), heads(pv)) if static is None else static
    if zero_attn:
        kh = np.concatenate([kh, np.zeros((N * H, 1, Dh))], 1)
        vh = np.concatenate([vh, np.zeros((N * H, 1, Dh))], 1)
    s = qh @ kh.transpose(0, 2, 1) / np.sqrt(Dh)
    if mask is not None:
        s = s + mask  # (N * H, L, S) or broadcastable, 0 / -inf / float
    p = np.exp(s - s.max(-1, keepdims=True))
    p = p / p.sum(-1, keepdims=True)
    out = (p @ vh).transpose(1, 0, 2).reshape(L, N, E) @ ow.T + (ob if ob is not None else 0)
    return out, p.reshape(N, H, L, -1)


def test_multi_head_attention_forward_matches_numpy():
    L, S, N, E, H = 3, 4, 2, 6, 2
    q, k, v = (RNG.standard_normal((n, N, E)) for n in (L, S, S))
    w, b = RNG.standard_normal((3 * E, E)) * 0.3, RNG.standard_normal(3 * E) * 0.1
    ow, ob = RNG.standard_normal((E, E)) * 0.3, RNG.standard_normal(E) * 0.1
    bk, bv = RNG.standard_normal((1, 1, E)), RNG.standard_normal((1, 1, E))
    am = RNG.standard_normal((L, S))
    kpm = np.array([[False, False, True, False], [False, True, False, False]])
    T = lambda a: tt.tensor(a)  # noqa: E731
    # bias_k/bias_v and add_zero_attn append two keys; the masks get a zero column for each
    full_mask = np.concatenate([am, np.zeros((L, 2))], 1)[None] + np.repeat(
        np.where(np.concatenate([kpm, np.zeros((N, 2), bool)], 1), -np.inf, 0.0)[:, None, None, :], H, 1
    ).reshape(N * H, 1, S + 2)
    ref_o, ref_w = _mha_ref(q, k, v, w, b, ow, ob, H, (bk, bv), True, full_mask)
    o, wts = F.multi_head_attention_forward(T(q), T(k), T(v), E, H, T(w), T(b), T(bk), T(bv), True, 0.0, T(ow), T(ob),
                                            key_padding_mask=T(kpm), attn_mask=T(am), average_attn_weights=False)
    assert_close(o, ref_o, tt.float64)
    assert_close(wts, ref_w, tt.float64)
    # the fused kernel (need_weights=False) gives the same output
    kmask = np.repeat(np.where(kpm, -np.inf, 0.0)[:, None, None, :], H, 1).reshape(N * H, 1, S)
    o2, none = F.multi_head_attention_forward(T(q), T(k), T(v), E, H, T(w), T(b), None, None, False, 0.0, T(ow), T(ob),
                                              key_padding_mask=T(kpm), need_weights=False)
    assert none is None
    assert_close(o2, _mha_ref(q, k, v, w, b, ow, ob, H, mask=kmask)[0], tt.float64, "attention", k=S)
    # unbatched, separate projection weights, no biases: the weights averaged over heads
    o3, w3 = F.multi_head_attention_forward(T(q[:, 0]), T(k[:, 0]), T(v[:, 0]), E, H, None, None, None, None, False,
                                            0.0, T(ow), None, use_separate_proj_weight=True, q_proj_weight=T(w[:E]),
                                            k_proj_weight=T(w[E:2 * E]), v_proj_weight=T(w[2 * E:]))
    r3, rw3 = _mha_ref(q[:, :1], k[:, :1], v[:, :1], w, None, ow, None, H)
    assert_close(o3, r3[:, 0], tt.float64)
    assert_close(w3, rw3.mean(1)[0], tt.float64)
    # static keys and values replace the projected ones
    sk, sv = RNG.standard_normal((N * H, 5, E // H)), RNG.standard_normal((N * H, 5, E // H))
    o4, _ = F.multi_head_attention_forward(T(q), T(k), T(v), E, H, T(w), T(b), None, None, False, 0.0, T(ow), T(ob),
                                           static_k=T(sk), static_v=T(sv))
    assert_close(o4, _mha_ref(q, k, v, w, b, ow, ob, H, static=(sk, sv))[0], tt.float64)
    with pytest.raises(AssertionError, match="was expecting embedding dimension of 8, but got 6"):
        F.multi_head_attention_forward(T(q), T(k), T(v), 8, H, T(w), T(b), None, None, False, 0.0, T(ow), T(ob))
    with pytest.raises(AssertionError, match="bias cannot be added to static key."):
        F.multi_head_attention_forward(T(q), T(k), T(v), E, H, T(w), T(b), T(bk), T(bv), False, 0.0, T(ow), T(ob),
                                       static_k=T(sk), static_v=T(sv))
    with pytest.raises(AssertionError, match=r"expecting key_padding_mask shape of \(2, 5\), but got \(2, 4\)"):
        F.multi_head_attention_forward(T(q), T(k), T(v), E, H, T(w), T(b), T(bk), T(bv), False, 0.0, T(ow), T(ob),
                                       key_padding_mask=T(kpm[:, :3]))
    with pytest.raises(RuntimeError, match=r"The shape of the 2D attn_mask is \(3, 3\), but should be \(3, 4\)."):
        F.multi_head_attention_forward(T(q), T(k), T(v), E, H, T(w), T(b), None, None, False, 0.0, T(ow), T(ob),
                                       attn_mask=T(am[:, :3]))
    with pytest.raises(AssertionError, match="query should be unbatched 2D or batched 3D tensor"):
        F.multi_head_attention_forward(T(q[0, 0]), T(k), T(v), E, H, T(w), T(b), None, None, False, 0.0, T(ow), None)
    x = _f64(q)
    assert gradcheck(lambda a, bb: F.multi_head_attention_forward(a, a, a, E, H, T(w), T(b), bb, bb, True, 0.0, T(ow),
                                                                  T(ob))[0], (x, _f64(bk)), fast_mode=True)
