"""nn.functional layers built from recorded ops: instance_norm, dropout1d/2d, alpha_dropout,
adaptive_max_pool1d/2d, adaptive_avg_pool1d, fold, embedding_bag, gumbel_softmax, affine_grid,
grid_sample. Each against a float64 NumPy loop written from torch's documented definition, over
dtypes and layouts, with gradchecks (grid_sample: input and grid) and torch's errors."""
import math

import numpy as np
import pytest

import tritensor as tt
import tritensor.nn.functional as F
from layouts import LAYOUTS, make
from tolerances import FLOAT_DTYPES, NP, assert_close
from tritensor.autograd import gradcheck

RNG = np.random.default_rng(7)


def _normal(shape):
    return np.random.default_rng(len(shape) + sum(shape)).standard_normal(shape)


def _f64(a, grad=False):
    return tt.tensor(np.asarray(a, np.float64), requires_grad=grad)


def _windows(n_in, n_out):
    return [(i * n_in // n_out, -(-(i + 1) * n_in // n_out)) for i in range(n_out)]


def adaptive_max_ref(a, oh, ow):
    H, W = a.shape[-2:]
    out = np.zeros(a.shape[:-2] + (oh, ow))
    idx = np.zeros(a.shape[:-2] + (oh, ow), np.int64)
    for i, (h0, h1) in enumerate(_windows(H, oh)):
        for j, (w0, w1) in enumerate(_windows(W, ow)):
            win = a[..., h0:h1, w0:w1].reshape(a.shape[:-2] + (-1,))
            k = win.argmax(-1)  # the first maximum, as torch
            out[..., i, j] = win.max(-1)
            idx[..., i, j] = (h0 + k // (w1 - w0)) * W + w0 + k % (w1 - w0)
    return out, idx


# ----- pooling -----------------------------------------------------------------------------------------

# every layout in fp32, one each in the other dtypes (each case is a few dozen launches)
DTYPE_LAYOUTS = [(tt.float32, layout) for layout in LAYOUTS] + [
    (tt.float64, "contiguous"), (tt.float16, "transposed"), (tt.bfloat16, "sliced")]


@pytest.mark.parametrize("dtype,layout", DTYPE_LAYOUTS, ids=str)
def test_adaptive_max_pool2d(dtype, layout):
    x, a = make((2, 3, 7, 5), dtype, layout, _normal)
    for size in ((3, 2), (7, 5)) if layout != "contiguous" else ((3, 2), (1, 1), (4, None)):
        y, i = F.adaptive_max_pool2d(x, size, return_indices=True)
        oh, ow = (size[0], size[1] if size[1] is not None else 5)
        ry, ri = adaptive_max_ref(a, oh, ow)
        assert_close(y, ry, dtype, "exact")
        assert i.dtype is tt.int64 and np.array_equal(i.cpu().numpy(), ri)
    assert_close(F.adaptive_max_pool2d(x[0], 2), adaptive_max_ref(a[0], 2, 2)[0], dtype, "exact")  # unbatched


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_adaptive_max_pool1d_and_avg_pool1d(dtype):
    x, a = make((2, 3, 10), dtype, "transposed", _normal)
    for n in ((3, 10) if dtype in (tt.float16, tt.bfloat16) else (3, 4, 1)):
        y, i = F.adaptive_max_pool1d(x, n, return_indices=True)
        ry, ri = adaptive_max_ref(a[:, :, None, :], 1, n)
        assert_close(y, ry[:, :, 0], dtype, "exact")
        assert np.array_equal(i.cpu().numpy(), ri[:, :, 0])
        avg = np.stack([a[..., s:e].mean(-1) for s, e in _windows(10, n)], -1)
        assert_close(F.adaptive_avg_pool1d(x, n), avg, dtype, "accumulate", k=4)
    assert tuple(F.adaptive_avg_pool1d(tt.zeros(3, 5), 0).shape) == (3, 0)


def test_adaptive_max_propagates_nan_and_takes_first_max():
    x = tt.tensor([[[1.0, 3.0, 3.0, float("nan"), 2.0]]])
    y, i = F.adaptive_max_pool1d(x, 2, return_indices=True)
    assert y[0, 0, 0].item() == 3.0 and i[0, 0, 0].item() == 1
    assert math.isnan(y[0, 0, 1].item()) and i[0, 0, 1].item() == 3


def test_adaptive_pool_gradchecks():
    x = _f64(RNG.standard_normal((1, 1, 3, 5)), grad=True)
    assert gradcheck(lambda t: F.adaptive_max_pool2d(t, (2, 3)), (x,), fast_mode=True)
    assert gradcheck(lambda t: F.adaptive_avg_pool1d(t, 3), (_f64(RNG.standard_normal((1, 5)), True),),
                     fast_mode=True)


def test_pool_errors_as_torch():
    with pytest.raises(ValueError, match="Expected 3D or 4D tensor"):
        F.adaptive_max_pool2d(tt.zeros(5), 2)
    with pytest.raises(RuntimeError, match="Expected input to have non-zero size for non-batch dimensions"):
        F.adaptive_max_pool2d(tt.zeros(1, 2, 0, 3), 2)
    with pytest.raises(RuntimeError, match="Expected 2D or 3D tensor"):
        F.adaptive_avg_pool1d(tt.zeros(1, 2, 3, 4), 2)


# ----- fold ---------------------------------------------------------------------------------------------

def fold_ref(cols, out_hw, k, d, p, s):
    N, CK, L = cols.shape
    (H, W), (kh, kw) = out_hw, k
    C = CK // (kh * kw)
    bh = (H + 2 * p[0] - d[0] * (kh - 1) - 1) // s[0] + 1
    bw = (W + 2 * p[1] - d[1] * (kw - 1) - 1) // s[1] + 1
    out = np.zeros((N, C, H + 2 * p[0], W + 2 * p[1]))
    c6 = cols.reshape(N, C, kh, kw, bh, bw)
    for i in range(kh):
        for j in range(kw):
            for u in range(bh):
                for v in range(bw):
                    out[:, :, u * s[0] + i * d[0], v * s[1] + j * d[1]] += c6[:, :, i, j, u, v]
    return out[:, :, p[0]:p[0] + H, p[1]:p[1] + W]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_fold_is_unfolds_adjoint(dtype):
    x, a = make((2, 3 * 2 * 3, 6), dtype, "sliced", _normal)
    got = F.fold(x, (5, 6), (2, 3), dilation=(1, 2), padding=(1, 0), stride=(2, 1))
    assert_close(got, fold_ref(a, (5, 6), (2, 3), (1, 2), (1, 0), (2, 1)), dtype, "accumulate", k=6)
    assert_close(F.fold(x[0], (5, 6), (2, 3), dilation=(1, 2), padding=(1, 0), stride=(2, 1)),
                 fold_ref(a[:1], (5, 6), (2, 3), (1, 2), (1, 0), (2, 1))[0], dtype, "accumulate", k=6)


def test_fold_gradcheck_and_errors():
    c = _f64(RNG.standard_normal((1, 4, 9)), grad=True)
    assert gradcheck(lambda t: F.fold(t, (4, 4), 2, padding=1, stride=2), (c,), fast_mode=True)
    with pytest.raises(RuntimeError, match="calculated number of sliding blocks 3 \\* 3 = 9, but got input.size"):
        F.fold(tt.zeros(1, 6, 10), (4, 5), (2, 3))
    with pytest.raises(RuntimeError, match="divisible by the product of kernel_size"):
        F.fold(tt.zeros(1, 7, 9), (4, 5), (2, 3))


# ----- embedding_bag -----------------------------------------------------------------------------------

def embedding_bag_ref(idx, w, offsets, mode, psw=None, padding_idx=None):
    ends = list(offsets[1:]) + [len(idx)]
    out = np.zeros((len(offsets), w.shape[1]))
    for b, (s, e) in enumerate(zip(offsets, ends)):
        keep = [k for k in range(s, e) if idx[k] != padding_idx]
        if not keep:
            continue
        rows = w[idx[keep]] * (psw[keep][:, None] if psw is not None else 1)
        out[b] = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[mode]
    return out


@pytest.mark.parametrize("dtype,mode", [(tt.float64, "sum"), (tt.float64, "mean"), (tt.float64, "max"),
                                        (tt.float32, "mean"), (tt.float16, "max"), (tt.bfloat16, "sum")], ids=str)
def test_embedding_bag(dtype, mode):
    w = RNG.standard_normal((10, 4)).astype(NP[dtype])
    idx = np.array([1, 2, 4, 5, 4, 3, 2, 9])
    offsets = np.array([0, 2, 2, 5])  # an empty bag too
    wt = tt.tensor(w)
    got = F.embedding_bag(tt.tensor(idx), wt, tt.tensor(offsets), mode=mode)
    prof, k = ("exact", None) if mode == "max" else ("accumulate", 3)
    assert_close(got, embedding_bag_ref(idx, w.astype(np.float64), offsets, mode), dtype, prof, k=k)
    last = F.embedding_bag(tt.tensor(idx), wt, tt.tensor(np.append(offsets, 8)), mode=mode, include_last_offset=True)
    assert_close(last, embedding_bag_ref(idx, w.astype(np.float64), offsets, mode), dtype, prof, k=k)
    fixed = F.embedding_bag(tt.tensor(idx.reshape(2, 4)), wt, mode=mode, padding_idx=4)
    assert_close(fixed, embedding_bag_ref(idx, w.astype(np.float64), [0, 4], mode, padding_idx=4), dtype, prof, k=k)


def test_embedding_bag_per_sample_weights_and_gradcheck():
    w, idx, off = RNG.standard_normal((6, 2)), np.array([0, 5, 5, 2, 1]), np.array([0, 3])
    psw = RNG.standard_normal(5)
    got = F.embedding_bag(tt.tensor(idx), _f64(w), tt.tensor(off), mode="sum", per_sample_weights=_f64(psw))
    assert_close(got, embedding_bag_ref(idx, w, off, "sum", psw), tt.float64)
    for mode in ("mean", "max"):
        assert gradcheck(lambda t: F.embedding_bag(tt.tensor(idx), t, tt.tensor(off), mode=mode),
                         (_f64(w, True),), fast_mode=True)
    assert gradcheck(lambda t, s: F.embedding_bag(tt.tensor(idx), t, tt.tensor(off), mode="sum",
                                                  per_sample_weights=s), (_f64(w, True), _f64(psw, True)),
                     fast_mode=True)


def test_embedding_bag_errors_as_torch():
    w = tt.zeros(3, 2)
    with pytest.raises(ValueError, match="offsets has to be a 1D Tensor but got None"):
        F.embedding_bag(tt.tensor([1, 2]), w)
    with pytest.raises(ValueError, match="if input is 2D, then offsets has to be None"):
        F.embedding_bag(tt.tensor([[1, 2]]), w, tt.tensor([0]))
    with pytest.raises(NotImplementedError, match="per_sample_weights is only supported for mode='sum'"):
        F.embedding_bag(tt.tensor([1, 2]), w, tt.tensor([0]), per_sample_weights=tt.ones(2))
    idx = tt.tensor([1, 2, 0])
    for offs, msg in (([1, 2], "offsets\\[0\\] has to be 0, i.e., the first sequence in the mini-batch has to start "
                               "from position 0. However, got 1"),
                      ([0, 5], "offsets\\[-1\\] can not be greater than input's length 3 but got offsets\\[-1\\] of 5"),
                      ([0, 2, 1], "offsets must be non-decreasing")):
        with pytest.raises(RuntimeError, match=msg):
            F.embedding_bag(idx, w, tt.tensor(offs, device="cpu"))


# ----- affine_grid and grid_sample ----------------------------------------------------------------------

def _unnorm(c, n, align):
    return (c + 1) / 2 * (n - 1) if align else ((c + 1) * n - 1) / 2


def _reflect(x, lo2, hi2):
    if lo2 == hi2:
        return np.zeros_like(x)
    lo, span = lo2 / 2, (hi2 - lo2) / 2
    x = np.abs(x - lo)
    flips, extra = np.floor(x / span), np.fmod(x, span)
    return np.where(flips % 2 == 0, extra + lo, span - extra + lo)


def grid_sample_ref(a, g, mode, padding, align):
    """torch's grid_sampler_2d, one output point at a time."""
    N, C, H, W = a.shape
    out = np.zeros((N, C) + g.shape[1:3])

    def src(c, n):
        x = _unnorm(c, n, align)
        if padding == "border":
            x = np.clip(x, 0, n - 1)
        elif padding == "reflection":
            x = np.clip(_reflect(x, 0, 2 * (n - 1)) if align else _reflect(x, -1, 2 * n - 1), 0, n - 1)
        return x

    def at(b, yy, xx):
        return a[b, :, yy, xx] if 0 <= yy < H and 0 <= xx < W else np.zeros(C)

    for b in range(N):
        for i in range(g.shape[1]):
            for j in range(g.shape[2]):
                x, y = src(g[b, i, j, 0], W), src(g[b, i, j, 1], H)
                if mode == "nearest":
                    out[b, :, i, j] = at(b, int(np.round(y)), int(np.round(x)))
                    continue
                x0, y0 = int(np.floor(x)), int(np.floor(y))
                fx, fy = x - x0, y - y0
                out[b, :, i, j] = (at(b, y0, x0) * (1 - fx) * (1 - fy) + at(b, y0, x0 + 1) * fx * (1 - fy)
                                   + at(b, y0 + 1, x0) * (1 - fx) * fy + at(b, y0 + 1, x0 + 1) * fx * fy)
    return out


GRID = RNG.uniform(-1.4, 1.4, (2, 3, 4, 2))


@pytest.mark.parametrize("mode,padding,align", [("bilinear", pad, align) for pad in ("zeros", "border", "reflection")
                                                for align in (False, True)]
                         + [("nearest", "zeros", True), ("nearest", "border", False), ("nearest", "reflection", False)])
def test_grid_sample_fp64(mode, padding, align):
    a = RNG.standard_normal((2, 3, 4, 5))
    got = F.grid_sample(_f64(a), _f64(GRID), mode=mode, padding_mode=padding, align_corners=align)
    assert_close(got, grid_sample_ref(a, GRID, mode, padding, align), tt.float64)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_grid_sample_dtypes_and_layouts(dtype):
    x, a = make((2, 3, 4, 5), dtype, "transposed", _normal)
    g = GRID.astype(NP[dtype])
    gt = tt.tensor(np.ascontiguousarray(g.transpose(0, 2, 1, 3))).transpose(1, 2)
    got = F.grid_sample(x, gt, align_corners=False)
    assert got.dtype is dtype
    assert_close(got, grid_sample_ref(a, g.astype(np.float64), "bilinear", "zeros", False), dtype, "accumulate", k=4)


@pytest.mark.parametrize("padding", ["zeros", "reflection"])  # reflection's path ends in border's clamp
def test_grid_sample_gradcheck_input_and_grid(padding):
    x = _f64(RNG.standard_normal((1, 1, 3, 4)), True)
    # away from integer source positions, where bilinear's derivative in the grid jumps
    g = _f64(np.array([[[[-1.17, 0.31], [0.52, -0.93]], [[1.13, 1.21], [-0.27, 0.08]]]]), True)
    assert gradcheck(lambda t, u: F.grid_sample(t, u, padding_mode=padding, align_corners=False), (x, g),
                     fast_mode=True)
    n = F.grid_sample(x, g, mode="nearest")
    n.sum().backward()
    assert g.grad is None or float(g.grad.abs().sum().item()) == 0.0


@pytest.mark.parametrize("align", [False, True])
def test_affine_grid(align):
    theta = RNG.standard_normal((2, 2, 3))

    def base(n):
        c = np.linspace(-1, 1, n)
        return c if align else c * (n - 1) / n
    ys, xs = np.meshgrid(base(4), base(5), indexing="ij")
    pts = np.stack([xs, ys, np.ones_like(xs)], -1)
    want = np.einsum("hwk,njk->nhwj", pts, theta)
    assert_close(F.affine_grid(_f64(theta), [2, 3, 4, 5], align_corners=align), want, tt.float64)
    t3 = RNG.standard_normal((1, 3, 4))
    zs, ys, xs = np.meshgrid(base(2), base(3), base(4), indexing="ij")
    want3 = np.einsum("dhwk,njk->ndhwj", np.stack([xs, ys, zs, np.ones_like(xs)], -1), t3)
    assert_close(F.affine_grid(_f64(t3), [1, 1, 2, 3, 4], align_corners=align), want3, tt.float64)
    if align:
        assert gradcheck(lambda t: F.affine_grid(t, [2, 1, 3, 2], align_corners=align), (_f64(theta, True),),
                         fast_mode=True)


def test_grid_errors_as_torch():
    with pytest.raises(ValueError, match="expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: 'x'"):
        F.grid_sample(tt.zeros(1, 1, 3, 3), tt.zeros(1, 2, 2, 2), mode="x")
    with pytest.raises(RuntimeError, match="expected grid and input to have same batch size"):
        F.grid_sample(tt.zeros(1, 1, 3, 3), tt.zeros(2, 2, 2, 2))
    with pytest.raises(NotImplementedError, match="affine_grid only supports 4D and 5D sizes"):
        F.affine_grid(tt.zeros(1, 2, 3), [1, 1, 3])
    with pytest.raises(ValueError, match="Expected a batch of 2D affine matrices of shape Nx2x3"):
        F.affine_grid(tt.zeros(1, 3, 3), [1, 1, 3, 3])


# ----- instance_norm, dropout -----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_instance_norm(dtype):
    x, a = make((2, 3, 5, 4), dtype, "sliced", _normal)
    w, b = RNG.standard_normal(3), RNG.standard_normal(3)
    mean = a.mean((2, 3), keepdims=True)
    var = a.var((2, 3), keepdims=True)
    want = (a - mean) / np.sqrt(var + 1e-5) * w.reshape(1, 3, 1, 1) + b.reshape(1, 3, 1, 1)
    rm, rv = tt.zeros(3, dtype=dtype), tt.ones(3, dtype=dtype)
    got = F.instance_norm(x, rm, rv, tt.tensor(w.astype(NP[dtype])), tt.tensor(b.astype(NP[dtype])), momentum=0.2)
    assert_close(got, want, dtype, "layer")
    unbiased = a.var((2, 3), ddof=1)
    assert_close(rm, 0.2 * a.mean((2, 3)).mean(0), dtype, "layer")
    assert_close(rv, 0.8 + 0.2 * unbiased.mean(0), dtype, "layer")
    # use_input_stats=False: the running statistics normalize
    got = F.instance_norm(x, rm, rv, use_input_stats=False)
    want = (a - rm.cpu().numpy().astype(np.float64).reshape(1, 3, 1, 1)) / np.sqrt(
        rv.cpu().numpy().astype(np.float64).reshape(1, 3, 1, 1) + 1e-5)
    assert_close(got, want, dtype, "layer")


def test_instance_norm_gradcheck_and_errors():
    x = _f64(RNG.standard_normal((2, 2, 5)), True)
    assert gradcheck(lambda t, w, b: F.instance_norm(t, weight=w, bias=b),
                     (x, _f64(RNG.standard_normal(2), True), _f64(RNG.standard_normal(2), True)), fast_mode=True)
    with pytest.raises(ValueError, match="Expected more than 1 spatial element when training"):
        F.instance_norm(tt.zeros(2, 3, 1))


@pytest.mark.parametrize("fn,shape", [(F.dropout1d, (4, 6, 5)), (F.dropout2d, (4, 6, 3, 2)),
                                      (F.dropout1d, (6, 5)), (F.dropout2d, (6, 3, 2))])
def test_channel_dropout_zeroes_whole_channels(fn, shape):
    tt.manual_seed(0)
    a = RNG.uniform(1.0, 2.0, shape)
    y = fn(tt.tensor(a), p=0.4).cpu().numpy()
    lead = 2 if len(shape) == (3 if fn is F.dropout1d else 4) else 1  # (N, C) planes, or C unbatched
    planes = y.reshape(shape[:lead] + (-1,))
    src = a.reshape(shape[:lead] + (-1,))
    kept = (planes != 0).all(-1)
    dropped = (planes == 0).all(-1)
    assert (kept | dropped).all() and kept.any() and dropped.any()
    assert_close(tt.tensor(planes[kept]), (src / 0.6)[kept], tt.float64)
    assert fn(tt.tensor(a), p=0.4, training=False).cpu().numpy().tolist() == tt.tensor(a).cpu().numpy().tolist()
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        fn(tt.tensor(a), p=1.5)


def test_alpha_dropout_keeps_mean_and_variance():
    tt.manual_seed(1)
    x = tt.randn(20000)
    y = F.alpha_dropout(x, 0.3, training=True)
    yn, xn = y.cpu().numpy(), x.cpu().numpy()
    assert abs(yn.mean()) < 0.05 and abs(yn.std() - 1) < 0.05
    alpha = 1.7580993408473766
    a = 1 / math.sqrt((alpha ** 2 * 0.3 + 1) * 0.7)
    dropped = np.isclose(yn, -alpha * a + alpha * a * 0.3)
    assert 0.25 < dropped.mean() < 0.35
    assert_close(tt.tensor(yn[~dropped]), (xn.astype(np.float64) * a + alpha * a * 0.3)[~dropped], tt.float32)
    assert F.alpha_dropout(x, 0.3) is x  # training defaults to False, as torch


def test_gumbel_softmax_is_softmax_of_perturbed_logits():
    logits = RNG.standard_normal((3, 5))
    tt.manual_seed(3)
    u = tt.rand((3, 5), dtype=tt.float64).cpu().numpy()
    tt.manual_seed(3)
    y = F.gumbel_softmax(_f64(logits), tau=0.5)
    z = (logits - np.log(-np.log(u))) / 0.5
    want = np.exp(z - z.max(-1, keepdims=True))
    assert_close(y, want / want.sum(-1, keepdims=True), tt.float64)
    tt.manual_seed(3)
    leaf = _f64(logits, True)
    h = F.gumbel_softmax(leaf, tau=0.5, hard=True)
    assert np.array_equal(h.detach().cpu().numpy(), np.eye(5)[want.argmax(-1)])
    (h * _f64(RNG.standard_normal((3, 5)))).sum().backward()
    assert float(leaf.grad.abs().sum().item()) > 0  # straight-through: the soft sample's gradient


# ----- conv3d, max_pool3d, avg_pool3d over the 2-D kernels ----------------------------------------------

def conv3d_ref(a, w, b, s, p, d, groups):
    a = np.pad(a, ((0, 0), (0, 0)) + tuple((q, q) for q in p))
    N, C = a.shape[:2]
    O, Cg, *k = w.shape
    out_sz = [(a.shape[2 + i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(3)]
    out = np.zeros((N, O, *out_sz))
    og = O // groups
    for o in range(O):
        g = o // og
        for z, y, x in np.ndindex(*out_sz):
            patch = a[:, g * Cg:(g + 1) * Cg, z * s[0]:z * s[0] + d[0] * (k[0] - 1) + 1:d[0],
                      y * s[1]:y * s[1] + d[1] * (k[1] - 1) + 1:d[1], x * s[2]:x * s[2] + d[2] * (k[2] - 1) + 1:d[2]]
            out[:, o, z, y, x] = (patch * w[o]).sum((1, 2, 3, 4)) + (b[o] if b is not None else 0)
    return out


def pool3d_ref(a, k, s, p, reduce, count_include_pad=True):
    pad_val = -np.inf if reduce == "max" else 0.0
    ap = np.pad(a, ((0, 0), (0, 0)) + tuple((q, q) for q in p), constant_values=pad_val)
    real = np.pad(np.ones(a.shape[2:]), tuple((q, q) for q in p))
    out_sz = [(a.shape[2 + i] + 2 * p[i] - k[i]) // s[i] + 1 for i in range(3)]
    out = np.zeros(a.shape[:2] + tuple(out_sz))
    for z, y, x in np.ndindex(*out_sz):
        sl = (slice(z * s[0], z * s[0] + k[0]), slice(y * s[1], y * s[1] + k[1]), slice(x * s[2], x * s[2] + k[2]))
        win = ap[(slice(None), slice(None)) + sl]
        if reduce == "max":
            out[:, :, z, y, x] = win.max((2, 3, 4))
        else:
            n = np.prod(k) if count_include_pad else real[sl].sum()
            out[:, :, z, y, x] = win.sum((2, 3, 4)) / n
    return out


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_conv3d(dtype):
    x, a = make((2, 4, 4, 3, 5), dtype, "transposed" if dtype is tt.float32 else "contiguous", _normal)
    w = RNG.standard_normal((6, 2, 2, 2, 3)).astype(NP[dtype])
    b = RNG.standard_normal(6).astype(NP[dtype])
    got = F.conv3d(x, tt.tensor(w), tt.tensor(b), stride=(1, 2, 1), padding=(1, 0, 1), dilation=(2, 1, 1), groups=2)
    want = conv3d_ref(a, w.astype(np.float64), b.astype(np.float64), (1, 2, 1), (1, 0, 1), (2, 1, 1), 2)
    assert_close(got, want, dtype, "accumulate", k=24)
    unb = F.conv3d(x[0], tt.tensor(w), None, padding=1, groups=2)
    assert_close(unb, conv3d_ref(a[:1], w.astype(np.float64), None, (1,) * 3, (1,) * 3, (1,) * 3, 2)[0], dtype,
                 "accumulate", k=24)


def test_conv3d_gradcheck_and_module():
    x = _f64(RNG.standard_normal((1, 2, 3, 3, 3)), True)
    w = _f64(RNG.standard_normal((2, 1, 2, 2, 1)), True)
    assert gradcheck(lambda t, u: F.conv3d(t, u, padding=(1, 0, 0), groups=2), (x, w), fast_mode=True)
    m = tt.nn.Conv3d(2, 4, 2, stride=(2, 1, 1)).double()
    got = m(x).detach()
    want = conv3d_ref(x.detach().cpu().numpy(), m.weight.detach().cpu().numpy(), m.bias.detach().cpu().numpy(),
                      (2, 1, 1), (0, 0, 0), (1, 1, 1), 1)
    assert_close(got, want, tt.float64)
    with pytest.raises(RuntimeError, match="Expected 4D \\(unbatched\\) or 5D \\(batched\\) input"):
        F.conv3d(tt.zeros(1, 2, 3), tt.zeros(1, 1, 1, 1, 1))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_pool3d(dtype):
    x, a = make((2, 3, 5, 4, 6), dtype, "sliced" if dtype is tt.float32 else "contiguous", _normal)
    assert_close(F.max_pool3d(x, 3, 2, 1), pool3d_ref(a, (3,) * 3, (2,) * 3, (1,) * 3, "max"), dtype, "exact")
    assert_close(F.avg_pool3d(x, (2, 3, 2), (1, 2, 2), (1, 1, 0)),
                 pool3d_ref(a, (2, 3, 2), (1, 2, 2), (1, 1, 0), "avg"), dtype, "accumulate", k=12)
    assert_close(F.avg_pool3d(x, 3, 2, 1, count_include_pad=False),
                 pool3d_ref(a, (3,) * 3, (2,) * 3, (1,) * 3, "avg", False), dtype, "accumulate", k=27)
    got = tt.nn.AvgPool3d(2, divisor_override=3)(x)
    assert_close(got, pool3d_ref(a, (2,) * 3, (2,) * 3, (0,) * 3, "avg") * 8 / 3, dtype, "accumulate", k=8)
    assert_close(tt.nn.MaxPool3d(2)(x[0]), pool3d_ref(a[:1], (2,) * 3, (2,) * 3, (0,) * 3, "max")[0], dtype, "exact")


def test_pool3d_gradcheck_and_errors():
    x = _f64(RNG.standard_normal((1, 1, 3, 4, 3)), True)
    assert gradcheck(lambda t: F.max_pool3d(t, 2, 1, 1), (x,), fast_mode=True)
    assert gradcheck(lambda t: F.avg_pool3d(t, 2, 1, 1, count_include_pad=False), (x,), fast_mode=True)
    with pytest.raises(NotImplementedError, match="ceil_mode=True"):
        F.max_pool3d(tt.zeros(1, 1, 2, 2, 2), 2, ceil_mode=True)
    with pytest.raises(RuntimeError, match="pad should be at most half of"):
        F.avg_pool3d(tt.zeros(1, 1, 4, 4, 4), 2, padding=2)
