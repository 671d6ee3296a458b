"""``nn.functional.linear_cross_entropy``, ``nn.LinearCrossEntropyOptions`` and
``nn.LinearCrossEntropyLoss`` against a float64 NumPy reference of linear + cross entropy (class
weights, ignore_index, label smoothing, the three reductions) and its analytic gradients; the
chunked path (``options``) and the reference path (``options=None``) both, and on a device the
chunked path's peak memory below the full logits'."""
import numpy as np
import pytest

import tritensor as tt
import tritensor.nn.functional as F
from layouts import make
from tolerances import FLOAT_DTYPES, NP, assert_close

rng = np.random.default_rng(5)
Options = tt.nn.LinearCrossEntropyOptions


pytestmark = pytest.mark.usefixtures("ieee_fp32_matmul")


def ref(x, W, b, t, w, reduction, ignore_index, ls):
    """(loss, dlogits-maker): torch's cross entropy of x W^T + b in float64, and the gradient of the
    loss with respect to (x, W, b) given the output's gradient g."""
    C = W.shape[0]
    z = x @ W.T + (0 if b is None else b)
    m = z.max(1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(z - m).sum(1))
    logp = z - lse[:, None]
    p = np.exp(logp)
    w = np.ones(C) if w is None else w
    valid = t != ignore_index
    ts = np.where(valid, t, 0)
    wt = np.where(valid, w[ts], 0.0)
    nll = -wt * logp[np.arange(len(t)), ts]
    smooth = np.where(valid, -(logp * w).sum(1) / C, 0.0)
    rows = (1 - ls) * nll + ls * smooth
    onehot = np.eye(C)[ts]
    drow = ((1 - ls) * wt[:, None] * (p - onehot) + ls * valid[:, None] * (p * w.sum() / C - w / C))
    denom = wt.sum()
    out = {"none": rows, "sum": rows.sum(), "mean": rows.sum() / denom}[reduction]

    def grads(g):
        scale = {"none": g, "sum": np.full(len(t), g), "mean": np.full(len(t), g / denom)}[reduction]
        dz = drow * scale[:, None]
        return dz @ W, dz.T @ x, dz.sum(0)
    return out, grads


def _data(N, D, C, dtype, layout="contiguous", ignore=True):
    x, xr = make((N, D), dtype, layout, lambda s: rng.standard_normal(s))
    W, Wr = make((C, D), dtype, "contiguous", lambda s: rng.standard_normal(s) * 0.5)
    b, br = make((C,), dtype, "contiguous", lambda s: rng.standard_normal(s))
    t = rng.integers(0, C, N)
    if ignore and N > 2:
        t[1] = -100
    return x, xr, W, Wr, b, br, t


# (reduction, class weights, label smoothing, chunk size): chunks that do not divide N
CASES = [("mean", False, 0.0, 3), ("sum", True, 0.0, 4), ("none", False, 0.1, 3), ("mean", True, 0.2, 16),
         ("mean", False, 0.0, None)]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-w{int(c[1])}-ls{c[2]}-chunk{c[3]}")
def test_forward_and_gradients_match_numpy(case, dtype):
    reduction, weighted, ls, chunk = case
    N, D, C = 10, 6, 13
    layout = "transposed" if dtype == tt.float32 else "contiguous"
    x, xr, W, Wr, b, br, t = _data(N, D, C, dtype, layout)
    cw = rng.uniform(0.5, 2.0, C) if weighted else None
    options = None if chunk is None else Options(batch_chunk_size=chunk)
    for leaf in (x, W, b):
        leaf.requires_grad_(True)
    out = F.linear_cross_entropy(x, W, tt.tensor(t), linear_bias=b, reduction=reduction, label_smoothing=ls,
                                 weight=None if cw is None else tt.tensor(cw.astype(NP[dtype])), options=options)
    cwr = None if cw is None else cw.astype(NP[dtype]).astype(np.float64)
    expected, grads = ref(xr, Wr, br, t, cwr, reduction, -100, ls)
    assert out.dtype == dtype and out.shape == np.shape(expected)
    assert_close(out.detach(), expected, dtype, "accumulate", k=D)
    g = rng.standard_normal(np.shape(expected)).astype(NP[dtype])
    gx, gW, gb = tt.autograd.grad(out, (x, W, b), tt.tensor(g))
    ex, eW, eb = grads(g.astype(np.float64))
    assert_close(gx, ex, dtype, "accumulate", k=C)
    assert_close(gW, eW, dtype, "accumulate", k=N)
    assert_close(gb, eb, dtype, "accumulate", k=N)


def test_unbatched_input_no_bias_explicit_ignore_index_and_empty():
    x, xr, W, Wr, _, _, t = _data(1, 5, 7, tt.float64, ignore=False)
    for options in (None, Options(batch_chunk_size=1)):
        out = F.linear_cross_entropy(x[0], W, tt.tensor(t[0]), options=options)
        assert_close(out, ref(xr, Wr, None, t, None, "mean", -100, 0.0)[0], tt.float64)
    x, xr, W, Wr, _, _, t = _data(6, 5, 7, tt.float64, ignore=False)
    t[2] = 3
    out = F.linear_cross_entropy(x, W, tt.tensor(t), ignore_index=3, reduction="sum",
                                 options=Options(batch_chunk_size=4))
    assert_close(out, ref(xr, Wr, None, t, None, "sum", 3, 0.0)[0], tt.float64)
    empty = F.linear_cross_entropy(tt.zeros(0, 5, dtype=tt.float64), W, tt.zeros(0, dtype=tt.int64),
                                   reduction="none", options=Options(batch_chunk_size=2))
    assert empty.shape == (0,)


def test_probability_targets_and_k_dimensional_heads_fall_back_to_the_reference_with_a_warning():
    x, xr, W, Wr, b, br, _ = _data(4, 3, 5, tt.float64)
    probs = rng.dirichlet(np.ones(5), 4)
    with pytest.warns(UserWarning, match="options.. ignored"):
        out = F.linear_cross_entropy(x, W, tt.tensor(probs), linear_bias=b, options=Options())
    z = xr @ Wr.T + br
    logp = z - (z.max(1, keepdims=True) + np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True)))
    assert_close(out, -(probs * logp).sum(1).mean(), tt.float64)
    # (C, K, D) weight: K-dimensional loss over logits (N, C, K)
    W3, W3r = make((5, 2, 3), tt.float64, "contiguous", lambda s: rng.standard_normal(s))
    t2 = rng.integers(0, 5, (4, 2))
    out = F.linear_cross_entropy(x, W3, tt.tensor(t2), reduction="none")
    z = np.einsum("nd,ckd->nck", xr, W3r)
    lse = np.log(np.exp(z).sum(1))
    assert_close(out, lse - np.take_along_axis(z, t2[:, None, :], 1)[:, 0], tt.float64)


def test_chunked_gradcheck_and_no_double_backward():
    x = tt.randn(3, 2, dtype=tt.float64, requires_grad=True)
    W = tt.randn(4, 2, dtype=tt.float64, requires_grad=True)
    b = tt.randn(4, dtype=tt.float64, requires_grad=True)
    t = tt.tensor(np.array([0, -100, 3]))
    fn = lambda x, W, b: F.linear_cross_entropy(x, W, t, linear_bias=b, reduction="none",  # noqa: E731
                                                options=Options(batch_chunk_size=2))
    assert tt.autograd.gradcheck(fn, (x, W, b), fast_mode=True)
    out = F.linear_cross_entropy(x, W, t, options=Options(batch_chunk_size=2))
    with pytest.raises(NotImplementedError, match="double backward"):
        tt.autograd.grad(out, x, create_graph=True)


def test_errors_name_the_argument():
    x, W, t = tt.zeros(4, 3), tt.zeros(5, 3), tt.zeros(4, dtype=tt.int64)
    with pytest.raises(RuntimeError, match="expected input with dimensionality 1 or 2, got 3"):
        F.linear_cross_entropy(tt.zeros(1, 4, 3), W, t)
    with pytest.raises(RuntimeError, match="expected linear_weight with dimensionality at least 2, got 1"):
        F.linear_cross_entropy(x, tt.zeros(3), t)
    with pytest.raises(RuntimeError, match="got 3 and 2, respectively"):
        F.linear_cross_entropy(x, tt.zeros(5, 2), t)
    with pytest.raises(RuntimeError, match=r"expected linear_bias shape \(5,\), got \(4,\)"):
        F.linear_cross_entropy(x, W, t, linear_bias=tt.zeros(4))
    with pytest.raises(RuntimeError, match="ignore_index cannot be specified when target contains probabilities"):
        F.linear_cross_entropy(x, W, tt.zeros(4, 5), ignore_index=1)
    with pytest.raises(TypeError, match="'target'"):
        F.linear_cross_entropy(x, W, [0, 1, 2, 3])
    with pytest.raises(IndexError, match="Target 7 is out of bounds"):
        # a device target is checked on the device: reported at the next synchronisation, as torch's
        F.linear_cross_entropy(x, W, tt.tensor(np.array([0, 7, 1, 2])), options=Options(batch_chunk_size=2)).item()
    with pytest.raises(ValueError, match="not a valid value for reduction"), pytest.warns(UserWarning):
        F.linear_cross_entropy(x, W, t, reduction="avg", options=Options())


def test_options_validate_and_resolve_chunk_sizes_as_torch():
    with pytest.raises(ValueError, match="invalid acc_policy: 'fast'"):
        Options(acc_policy="fast")
    with pytest.raises(ValueError, match="invalid chunking_method: 'square'"):
        Options(chunking_method="square")
    with pytest.raises(ValueError, match="batch_chunk_size must be positive int or None, got 0"):
        Options(batch_chunk_size=0)
    with pytest.raises(ValueError, match="acc_dtype must be one of"):
        Options(acc_dtype=tt.int32)
    # aspect ratio: ceil(C / D) = 8 -> ceil(1000 / 8) = 125 -> 128 rows, halved by ":2"
    assert Options(chunking_method="aspect_ratio")._adjust(1000, 64, 512, tt.float32).batch_chunk_size == 128
    assert Options()._adjust(1000, 64, 512, tt.float32).batch_chunk_size == 64
    assert Options(batch_chunk_size=7)._adjust(1000, 64, 512, tt.float32).batch_chunk_size == 7
    with pytest.raises(ValueError, match="give different chunk sizes"):
        Options(batch_chunk_size=7, chunking_method="aspect_ratio")._adjust(1000, 64, 512, tt.float32)
    assert Options(batch_chunk_size=9)._adjust(4, 64, 512, tt.float32).batch_chunk_size == 4


def test_module_holds_the_head_and_matches_the_functional():
    m = tt.nn.LinearCrossEntropyLoss(3, 5, bias=True, dtype=tt.float64, ignore_index=-1,
                                     options=Options(batch_chunk_size=2))
    x = tt.randn(6, 3, dtype=tt.float64)
    t = tt.tensor(np.array([0, 4, -1, 2, 1, 3]))
    expected, _ = ref(x.numpy(), m.linear.weight.detach().numpy(), m.linear.bias.detach().numpy(), t.numpy(), None,
                      "mean", -1, 0.0)
    out = m(x, t)
    assert_close(out.detach(), expected, tt.float64)
    out.backward()
    assert m.linear.weight.grad.shape == (5, 3) and m.linear.bias.grad.shape == (5,)
    assert "num_classes=5" in repr(m)
    with pytest.raises(RuntimeError, match=r"expected weight shape to be \(5,\), got \(4,\)"):
        tt.nn.LinearCrossEntropyLoss(3, 5, weight=tt.ones(4))
    with pytest.raises(RuntimeError, match="expected label_smoothing to be in range"):
        tt.nn.LinearCrossEntropyLoss(3, 5, label_smoothing=1.5)


@pytest.mark.skipif(not tt.cuda.is_available(), reason="the allocator's peak is a device statistic")
def test_chunked_peak_memory_stays_below_the_full_logits():
    N, D, C = 64, 4, 2048                       # full fp32 logits: 512 KiB; a chunk of 8 rows: 64 KiB
    x = tt.randn(N, D, device="cuda", requires_grad=True)
    W = tt.randn(C, D, device="cuda", requires_grad=True)
    t = tt.randint(0, C, (N,), device="cuda")
    full = N * C * 4

    def peak(options):
        tt.cuda.synchronize()
        base = tt.cuda.memory_allocated()
        tt.cuda.reset_peak_memory_stats()
        out = F.linear_cross_entropy(x, W, t, options=options)
        gx, gW = tt.autograd.grad(out, (x, W))
        tt.cuda.synchronize()
        return tt.cuda.max_memory_allocated() - base, out, gx, gW

    chunked, out_c, gx_c, gW_c = peak(Options(batch_chunk_size=8))
    whole, out_r, gx_r, gW_r = peak(None)
    assert chunked < full / 2 < full <= whole
    assert_close(out_c.detach(), out_r.detach().cpu().numpy(), tt.float32, "accumulate", k=C)
    assert_close(gW_c, gW_r.cpu().numpy(), tt.float32, "accumulate", k=N)
