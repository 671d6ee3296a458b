"""torch's root forms of nn ops (nn/functional_root.py): ``tritensor.conv1d``, ``tritensor.embedding``,
``tritensor.dropout`` ... with torch's native signatures.

Each form that calls an nn.functional function is checked to give that function's result with
torch's argument order (the weight first for embedding, the affine before the running statistics for
batch_norm, int ``reduction`` for the losses, int modes for grid_sampler, tuple outputs); the forms
computed here (pdist, channel_shuffle, conv_tbc, the norms, native_* statistics, feature dropout)
against float64 NumPy over dtypes, odd/empty shapes and strided inputs, with gradchecks; bad
arguments raise before any kernel runs.
"""
import zlib

import numpy as np
import pytest

import tritensor as tt
import tritensor.nn.functional as F
from tritensor.autograd import gradcheck
from layouts import check_layout, make
from tolerances import FLOAT_DTYPES, NP, assert_close

F64 = tt.float64


@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def T(rng, *shape, dtype=tt.float32):
    return tt.tensor(rng.standard_normal(shape).astype(NP[dtype]))


def same(a, b):
    """Root and nn.functional forms ran the same computation: the same values, bit for bit."""
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
        return
    assert a.shape == b.shape and a.dtype == b.dtype
    assert_close(a.detach(), b.detach().cpu().numpy(), a.dtype, "exact")


# ----- the forms that translate arguments and call nn.functional --------------------------------
def _cases(rng):
    x3, x4, x5 = T(rng, 2, 4, 7), T(rng, 2, 4, 5, 6), T(rng, 1, 2, 3, 4, 5)
    w1, w3 = T(rng, 3, 4, 2), T(rng, 3, 2, 2, 2, 2)
    a, b, t01 = T(rng, 3, 5), T(rng, 3, 5), tt.tensor(rng.integers(0, 2, (3, 5)).astype(np.float32))
    sign = tt.tensor(np.array([1.0, -1.0, 1.0], np.float32))
    rm, rv = tt.zeros(4), tt.ones(4)
    wt, bs = T(rng, 4), T(rng, 4)
    theta = T(rng, 2, 2, 3)
    grid = T(rng, 2, 3, 3, 2).tanh()
    lp = T(rng, 6, 2, 4).log_softmax(2)
    tg = tt.tensor(np.array([[1, 2, 1], [3, 1, 0]], np.int64))
    return {
        "celu": (lambda: tt.celu(a, 0.7), lambda: F.celu(a, 0.7)),
        "selu": (lambda: tt.selu(a), lambda: F.selu(a)),
        "rrelu": (lambda: tt.rrelu(a, 0.1, 0.3), lambda: F.rrelu(a, 0.1, 0.3)),
        "threshold": (lambda: tt.threshold(a, 0.1, -2.0), lambda: F.threshold(a, 0.1, -2.0)),
        "hardshrink": (lambda: tt.hardshrink(a, 0.3), lambda: F.hardshrink(a, 0.3)),
        "prelu": (lambda: tt.prelu(x3, wt), lambda: F.prelu(x3, wt)),
        "adaptive_avg_pool1d": (lambda: tt.adaptive_avg_pool1d(x3, 3), lambda: F.adaptive_avg_pool1d(x3, 3)),
        "adaptive_max_pool1d": (lambda: tt.adaptive_max_pool1d(x3, [3]), lambda: F.adaptive_max_pool1d(x3, 3, True)),
        "avg_pool1d": (lambda: tt.avg_pool1d(x3, [3], [], 1, True, False),
                       lambda: F.avg_pool1d(x3, 3, None, 1, True, False)),
        "max_pool1d": (lambda: tt.max_pool1d(x3, 3, 2, 1, 1, True), lambda: F.max_pool1d(x3, 3, 2, 1, 1, True)),
        "max_pool1d_with_indices": (lambda: tt.max_pool1d_with_indices(x3, 2),
                                    lambda: F.max_pool1d(x3, 2, return_indices=True)),
        "max_pool3d": (lambda: tt.max_pool3d(x5, 2, []), lambda: F.max_pool3d(x5, 2)),
        "conv1d": (lambda: tt.conv1d(x3, w1, None, 2, 1), lambda: F.conv1d(x3, w1, None, 2, 1)),
        "conv3d": (lambda: tt.conv3d(x5, w3, None, 1, 1), lambda: F.conv3d(x5, w3, None, 1, 1)),
        "conv_transpose1d": (lambda: tt.conv_transpose1d(x3, w1.transpose(0, 1), None, 2, 1, 1),
                             lambda: F.conv_transpose1d(x3, w1.transpose(0, 1), None, 2, 1, 1)),
        "conv_transpose3d": (lambda: tt.conv_transpose3d(x5, w3.transpose(0, 1), None, 2),
                             lambda: F.conv_transpose3d(x5, w3.transpose(0, 1), None, 2)),
        "convolution": (lambda: tt.convolution(x3, w1, None, [1], [1], [2], False, [0], 1),
                        lambda: F.conv1d(x3, w1, None, 1, 1, 2)),
        "convolution_transposed": (lambda: tt.convolution(x5, w3.transpose(0, 1), None, [2] * 3, [0] * 3, [1] * 3,
                                                          True, [1] * 3, 1),
                                   lambda: F.conv_transpose3d(x5, w3.transpose(0, 1), None, 2, 0, 1)),
        "bilinear": (lambda: tt.bilinear(a, b, T(rng, 2, 5, 5)), None),
        "batch_norm": (lambda: tt.batch_norm(x4, wt, bs, rm, rv, False, 0.1, 1e-5, True),
                       lambda: F.batch_norm(x4, rm, rv, wt, bs, False, 0.1, 1e-5)),
        "instance_norm": (lambda: tt.instance_norm(x3, wt, bs, None, None, True, 0.1, 1e-5, False),
                          lambda: F.instance_norm(x3, None, None, wt, bs, True, 0.1, 1e-5)),
        "group_norm": (lambda: tt.group_norm(x4, 2, wt, bs, 1e-3, False), lambda: F.group_norm(x4, 2, wt, bs, 1e-3)),
        "rms_norm": (lambda: tt.rms_norm(x3, [7], None, 1e-4), lambda: F.rms_norm(x3, [7], None, 1e-4)),
        "cosine_similarity": (lambda: tt.cosine_similarity(a, b, 0), lambda: F.cosine_similarity(a, b, 0)),
        "pairwise_distance": (lambda: tt.pairwise_distance(a, b, 1.5, 1e-6, True),
                              lambda: F.pairwise_distance(a, b, 1.5, 1e-6, True)),
        "pixel_shuffle": (lambda: tt.pixel_shuffle(x4, 2), lambda: F.pixel_shuffle(x4, 2)),
        "pixel_unshuffle": (lambda: tt.pixel_unshuffle(x4[:, :, :4], 2), lambda: F.pixel_unshuffle(x4[:, :, :4], 2)),
        "constant_pad_nd": (lambda: tt.constant_pad_nd(x3, [1, 2, 0, 1], 3.5),
                            lambda: F.pad(x3, (1, 2, 0, 1), value=3.5)),
        "grid_sampler": (lambda: tt.grid_sampler(x4[:, :, :3], grid, 0, 2, False),
                         lambda: F.grid_sample(x4[:, :, :3], grid, "bilinear", "reflection", False)),
        "grid_sampler_2d": (lambda: tt.grid_sampler_2d(x4[:, :, :3], grid, 1, 1, True),
                            lambda: F.grid_sample(x4[:, :, :3], grid, "nearest", "border", True)),
        "affine_grid_generator": (lambda: tt.affine_grid_generator(theta, [2, 1, 3, 4], False),
                                  lambda: F.affine_grid(theta, [2, 1, 3, 4], False)),
        "kl_div": (lambda: tt.kl_div(a, b, 2, log_target=True),
                   lambda: F.kl_div(a, b, reduction="sum", log_target=True)),
        "binary_cross_entropy_with_logits": (
            lambda: tt.binary_cross_entropy_with_logits(a, t01, None, b.exp(), 0),
            lambda: F.binary_cross_entropy_with_logits(a, t01, reduction="none", pos_weight=b.exp())),
        "cosine_embedding_loss": (lambda: tt.cosine_embedding_loss(a, b, sign, 0.2, 2),
                                  lambda: F.cosine_embedding_loss(a, b, sign, 0.2, reduction="sum")),
        "hinge_embedding_loss": (lambda: tt.hinge_embedding_loss(a, t01 * 2 - 1, 0.5, 0),
                                 lambda: F.hinge_embedding_loss(a, t01 * 2 - 1, 0.5, reduction="none")),
        "margin_ranking_loss": (lambda: tt.margin_ranking_loss(a[:, 0], b[:, 0], sign, 0.1),
                                lambda: F.margin_ranking_loss(a[:, 0], b[:, 0], sign, 0.1)),
        "poisson_nll_loss": (lambda: tt.poisson_nll_loss(a, t01, True, True, 1e-6, 2),
                             lambda: F.poisson_nll_loss(a, t01, True, True, eps=1e-6, reduction="sum")),
        "triplet_margin_loss": (lambda: tt.triplet_margin_loss(a, b, a.flip(0), 0.5, 1.0, 1e-6, True, 0),
                                lambda: F.triplet_margin_loss(a, b, a.flip(0), 0.5, 1.0, 1e-6, True,
                                                              reduction="none")),
        "ctc_loss": (lambda: tt.ctc_loss(lp, tg, [6, 5], [3, 2], 0, 0, True),
                     lambda: F.ctc_loss(lp, tg, [6, 5], [3, 2], 0, "none", True)),
    }


CASES = list(_cases(np.random.default_rng(0)))


@pytest.mark.parametrize("name", CASES)
def test_root_form_is_the_functional_form(name, rng):
    root, functional = _cases(rng)[name]
    if name == "bilinear":  # three tensors and a weight: check the order by NumPy's einsum
        a, b, w, bias = T(rng, 3, 5, dtype=F64), T(rng, 3, 4, dtype=F64), T(rng, 2, 5, 4, dtype=F64), T(rng, 2,
                                                                                                      dtype=F64)
        expect = np.einsum("ni,kij,nj->nk", a.cpu().numpy(), w.cpu().numpy(), b.cpu().numpy()) + bias.cpu().numpy()
        assert_close(tt.bilinear(a, b, w, bias), expect, F64)
        same(tt.bilinear(a, b, w), F.bilinear(a, b, w))
        return
    tt.manual_seed(7)
    r = root()
    tt.manual_seed(7)
    same(r, functional())


@pytest.mark.parametrize("name,call", [
    ("kl_div", lambda a, b: tt.kl_div(a, b, 3)),
    ("binary_cross_entropy_with_logits", lambda a, b: tt.binary_cross_entropy_with_logits(a, b, reduction="mean")),
    ("margin_ranking_loss", lambda a, b: tt.margin_ranking_loss(a, b, b, 0.0, -1)),
    ("poisson_nll_loss", lambda a, b: tt.poisson_nll_loss(a, b, True, False, 1e-8, True)),
])
def test_root_losses_refuse_a_reduction_that_is_not_0_1_2(name, call, rng):
    a, b = T(rng, 4), T(rng, 4).sigmoid()
    with pytest.raises((ValueError, TypeError), match=f"{name}\\(\\).*reduction"):
        call(a, b)


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")
def test_root_losses_take_reduction_as_an_int(rng):
    a, b = T(rng, 4), T(rng, 4).sigmoid()
    for r, s in enumerate(("none", "mean", "sum")):  # 0, 1, 2: ATen's Reduction enum
        same(tt.kl_div(a, b, r), F.kl_div(a, b, reduction=s))
        same(tt.margin_ranking_loss(a, b, b.sign(), 0.1, r), F.margin_ranking_loss(a, b, b.sign(), 0.1, reduction=s))
    same(tt.kl_div(a, b), F.kl_div(a, b))  # torch's default, 1: mean


def test_root_signatures_are_positional_as_torchs(rng):
    # torch.dropout(input, p, train): all three required; train=False is the input itself
    x = T(rng, 3, 4)
    assert tt.dropout(x, 0.5, False) is x and tt.alpha_dropout(x, 0.5, False) is x
    with pytest.raises(TypeError):
        tt.dropout(x, 0.5)
    with pytest.raises(TypeError):
        tt.poisson_nll_loss(x, x, True, False, 1e-8)  # torch's reduction has no default here
    # embedding(weight, indices, padding_idx=-1): the weight first, a negative padding_idx is none
    w, idx = T(rng, 5, 3), tt.tensor(np.array([[0, 4], [2, 2]], np.int64))
    same(tt.embedding(w, idx), F.embedding(idx, w))
    wg = w.detach().requires_grad_()
    tt.embedding(wg, idx, 2).sum().backward()
    assert_close(wg.grad, np.array([[1.0] * 3, [0] * 3, [0] * 3, [0] * 3, [1] * 3]), tt.float32, "exact")
    wg.grad = None
    tt.embedding(wg, idx, -1).sum().backward()
    assert_close(wg.grad[2], np.full(3, 2.0), tt.float32, "exact")
    # in-place forms write into their input and return it
    for fn, args, ref in [(tt.celu_, (0.5,), lambda v: F.celu(v, 0.5)), (tt.selu_, (), F.selu),
                          (tt.threshold_, (0.0, 9.0), lambda v: F.threshold(v, 0.0, 9.0)),
                          (tt.rrelu_, (0.2, 0.2), lambda v: F.rrelu(v, 0.2, 0.2)),
                          (tt.dropout_, (0.0, True), lambda v: v), (tt.alpha_dropout_, (0.5, False), lambda v: v),
                          (tt.feature_alpha_dropout_, (0.0, True), lambda v: v),
                          (tt.feature_dropout_, (0.5, False), lambda v: v)]:
        y = x.clone()
        assert fn(y, *args) is y
        same(y, ref(x))
    same(tt.feature_alpha_dropout(x, 0.0, True), x)


def test_hardshrink_and_prelu_are_tensor_methods_too(rng):
    x, w = T(rng, 2, 3, 4), T(rng, 3)
    ref = x.cpu().numpy()
    assert_close(x.hardshrink(0.3), np.where(np.abs(ref) > 0.3, ref, 0.0), tt.float32, "exact")
    assert_close(x.hardshrink(), np.where(np.abs(ref) > 0.5, ref, 0.0), tt.float32, "exact")
    wn = w.cpu().numpy()[None, :, None]
    assert_close(x.prelu(w), np.where(ref > 0, ref, ref * wn), tt.float32)
    same(x.prelu(w), tt.prelu(x, w))
    with pytest.raises(TypeError, match="argument 'lambd'"):
        x.hardshrink("0.5")
    with pytest.raises(RuntimeError, match="Mismatch of parameter numbers and input channel size"):
        x.prelu(T(rng, 4))


def test_clone_detach_at_the_root(rng):
    x = T(rng, 2, 3).requires_grad_()
    y = tt.clone(x * 2, memory_format=tt.contiguous_format)
    assert type(y.grad_fn).__name__ == "CloneBackward0"
    same(y, x * 2)
    d = tt.detach(y)
    assert not d.requires_grad and d.data_ptr() == y.data_ptr()
    z = x * 3
    assert tt.detach_(z) is z and not z.requires_grad and z.grad_fn is None


# ----- the forms computed here, against NumPy ----------------------------------------------------
def _np_pdist(x, p):
    n = x.shape[0]
    i, j = np.triu_indices(n, 1)
    d = np.abs(x[i] - x[j])
    if p == 0:
        return (d != 0).sum(-1).astype(np.float64)
    if np.isinf(p):
        return d.max(-1, initial=0.0)
    return (d ** p).sum(-1) ** (1.0 / p)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_pdist_against_numpy(dtype, layout, rng):
    x, ref = make((5, 3), dtype, layout, rng.standard_normal)
    check_layout(x, layout)
    for p in (2.0, 1.0, 0.5, float("inf")):
        out = tt.pdist(x, p)
        assert out.shape == (10,) and out.dtype == dtype
        assert_close(out, _np_pdist(ref, p), dtype, "accumulate", k=3)
    for n in (0, 1):  # no pairs: empty
        assert tt.pdist(tt.zeros((n, 3), dtype=dtype)).shape == (0,)


def test_pdist_gradcheck_and_errors(rng):
    x = T(rng, 3, 2, dtype=F64).requires_grad_()
    assert gradcheck(lambda v: tt.pdist(v, 3.0), (x,), fast_mode=True)
    with pytest.raises(RuntimeError, match="pdist only supports 2D tensors, got: 3D"):
        tt.pdist(tt.zeros((2, 2, 2)))
    with pytest.raises(RuntimeError, match="non-negative p"):
        tt.pdist(tt.zeros((2, 2)), -1.0)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_channel_shuffle_against_numpy(dtype, rng):
    for shape, g, layout in [((2, 6, 3), 3, "contiguous"), ((1, 4, 2, 3), 2, "sliced"), ((3, 6, 1, 1, 2), 6,
                                                                                       "transposed"),
                             ((0, 4, 2), 2, "contiguous")]:
        x, ref = make(shape, dtype, layout, rng.standard_normal)
        n, c = shape[:2]
        expect = ref.reshape((n, g, c // g) + shape[2:]).swapaxes(1, 2).reshape(shape)
        assert_close(tt.channel_shuffle(x, g), expect, dtype, "exact")
        assert_close(tt.native_channel_shuffle(x, g), expect, dtype, "exact")
    with pytest.raises(RuntimeError, match="Number of channels must be divisible by groups. Got 6 channels and 4"):
        tt.channel_shuffle(tt.zeros((1, 6, 2)), 4)
    with pytest.raises(RuntimeError, match="must be positive"):
        tt.channel_shuffle(tt.zeros((1, 6, 2)), 0)
    with pytest.raises(RuntimeError, match="at least 3 dimensions"):
        tt.channel_shuffle(tt.zeros((1, 6)), 2)


def _np_conv_tbc(x, w, b, pad):
    T_, B, _ = x.shape
    K = w.shape[0]
    xp = np.pad(x, ((pad, pad), (0, 0), (0, 0)))
    out = np.stack([sum(xp[t + k] @ w[k] for k in range(K)) for t in range(T_ + 2 * pad - K + 1)])
    return out + b


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_conv_tbc_against_numpy(dtype, rng):
    x, rx = make((5, 2, 3), dtype, "transposed", rng.standard_normal)
    w, rw = make((3, 3, 4), dtype, "contiguous", rng.standard_normal)
    b, rb = make((4,), dtype, "contiguous", rng.standard_normal)
    for pad in (0, 2):
        out = tt.conv_tbc(x, w, b, pad)
        assert out.shape == (5 + 2 * pad - 2, 2, 4)
        assert_close(out, _np_conv_tbc(rx, rw, rb, pad), dtype, "accumulate", k=9)


def test_conv_tbc_gradcheck_and_errors(rng):
    args = [T(rng, 3, 1, 2, dtype=F64).requires_grad_(), T(rng, 2, 2, 2, dtype=F64).requires_grad_(),
            T(rng, 2, dtype=F64).requires_grad_()]
    assert gradcheck(lambda x, w, b: tt.conv_tbc(x, w, b, 1), args, fast_mode=True)
    x, w, b = (a.detach() for a in args)
    with pytest.raises(RuntimeError, match="Input must have 3 dims"):
        tt.conv_tbc(x[0], w, b)
    with pytest.raises(RuntimeError, match="input channels"):
        tt.conv_tbc(x, w[:, :1], b)
    with pytest.raises(RuntimeError, match="Bias size"):
        tt.conv_tbc(x, w, b[:1])
    with pytest.raises(TypeError, match="'bias'"):
        tt.conv_tbc(x, w, None)


def test_convolution_gradcheck_and_errors(rng):
    x, w = T(rng, 1, 2, 3, dtype=F64).requires_grad_(), T(rng, 2, 1, 2, dtype=F64).requires_grad_()
    assert gradcheck(lambda a, b: tt.convolution(a, b, None, [1], [1], [1], True, [0], 1), (x, w))
    with pytest.raises(RuntimeError, match="weight of size \\[1, 2\\]"):
        tt.convolution(x, w[0], None, [1], [0], [1], False, [0], 1)


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64])
def test_norm_forms_against_numpy(dtype, rng):
    v, ref = make((3, 4, 2), dtype, "sliced", rng.standard_normal)
    assert_close(tt.norm_except_dim(v, 2, 1), np.sqrt((ref ** 2).sum((0, 2), keepdims=True)), dtype, "accumulate",
                 k=6)
    assert_close(tt.norm_except_dim(v, 3, 0), (np.abs(ref) ** 3).sum((1, 2), keepdims=True) ** (1 / 3), dtype,
                 "accumulate", k=8)
    assert tt.norm_except_dim(v, 2, -1).shape == ()
    assert_close(tt.norm_except_dim(v, 2, -1), np.sqrt((ref ** 2).sum()), dtype, "accumulate", k=24)
    assert_close(tt.frobenius_norm(v, [0, 2], True), np.sqrt((ref ** 2).sum((0, 2), keepdims=True)), dtype,
                 "accumulate", k=6)
    assert_close(tt.native_norm(v), np.sqrt((ref ** 2).sum()), dtype, "accumulate", k=24)
    assert_close(tt.native_norm(v, 1, [1], True, None), np.abs(ref).sum(1, keepdims=True), dtype, "accumulate", k=4)
    m = ref[:, :, 0]
    nuc = np.linalg.svd(m, compute_uv=False).sum()
    assert_close(tt.nuclear_norm(v[:, :, 0]), nuc, dtype, "accumulate", k=12)
    assert_close(tt.nuclear_norm(v[:, :, 0], True), np.full((1, 1), nuc), dtype, "accumulate", k=12)
    per = np.stack([np.linalg.svd(ref[:, :, i], compute_uv=False).sum() for i in range(2)])
    assert_close(tt.nuclear_norm(v, [0, 1], True), per.reshape(1, 1, 2), dtype, "accumulate", k=12)
    with pytest.raises(RuntimeError, match="Expected a tensor with 2 dimensions, but got a tensor with 3"):
        tt.nuclear_norm(v)
    with pytest.raises(TypeError):
        tt.frobenius_norm(v)  # torch's only overload takes dim
    with pytest.raises(IndexError, match="Dimension out of range"):
        tt.norm_except_dim(v, 2, 3)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_native_batch_norm_returns_torchs_statistics(dtype, rng):
    x, ref = make((3, 2, 4), dtype, "transposed", rng.standard_normal)
    rm, rv = tt.zeros(2, dtype=dtype), tt.ones(2, dtype=dtype)
    out, mean, invstd = tt.native_batch_norm(x, None, None, rm, rv, True, 0.5, 1e-5)
    same(out, F.batch_norm(x, tt.zeros(2, dtype=dtype), tt.ones(2, dtype=dtype), training=True, momentum=0.5))
    sd = F64 if dtype is F64 else tt.float32
    assert mean.dtype == sd and invstd.dtype == sd and mean.shape == (2,)
    assert_close(mean, ref.mean((0, 2)), sd, "accumulate", k=12)
    assert_close(invstd, 1 / np.sqrt(ref.var((0, 2)) + 1e-5), sd, "accumulate", k=12)
    assert_close(rm, 0.5 * ref.mean((0, 2)), dtype, "accumulate", k=12)  # the running statistics moved
    out, mean, invstd = tt.native_batch_norm(x, None, None, rm, rv, False, 0.1, 1e-5)
    assert mean.shape == (0,) and invstd.shape == (0,)  # evaluation: no statistics of the batch, as torch


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_native_group_norm_returns_torchs_statistics(dtype, rng):
    x, ref = make((2, 4, 3), dtype, "sliced", rng.standard_normal)
    out, mean, rstd = tt.native_group_norm(x, None, None, 2, 4, 3, 2, 1e-5)
    same(out, F.group_norm(x, 2))
    g = ref.reshape(2, 2, 6)
    assert mean.shape == (2, 2) and mean.dtype == dtype and rstd.dtype == dtype
    assert_close(mean, g.mean(2), dtype, "accumulate", k=6)
    assert_close(rstd, 1 / np.sqrt(g.var(2) + 1e-5), dtype, "accumulate", k=6)
    with pytest.raises(RuntimeError, match="Expected input to have"):
        tt.native_group_norm(x, None, None, 2, 4, 4, 2, 1e-5)


def test_native_and_feature_dropout_masks(rng):
    x = T(rng, 4, 3, 2, 5)
    out, mask = tt.native_dropout(x, 0.4, True)
    assert mask.dtype == tt.bool and mask.shape == x.shape
    m = mask.cpu().numpy()
    assert 0 < m.sum() < m.size
    assert_close(out, x.cpu().numpy() * m / 0.6, tt.float32)
    out, mask = tt.native_dropout(x, 0.4, False)
    assert mask.cpu().numpy().all() and out.data_ptr() != x.data_ptr()
    same(out, x)
    assert tt.native_dropout(x, 0.4, None)[1].cpu().numpy().sum() < x.numel()  # None: training
    y = tt.feature_dropout(x, 0.5, True).cpu().numpy()
    kept = (y != 0).reshape(4, 3, -1)
    assert (kept.all(2) | ~kept.any(2)).all() and 0 < kept.all(2).sum() < 12  # whole (N, C) channels
    k = kept.all(2)[:, :, None, None]
    assert_close(y, x.cpu().numpy() * k * 2.0, tt.float32)
    with pytest.raises(RuntimeError, match="Feature dropout requires at least 2 dimensions"):
        tt.feature_dropout(x[0, 0, 0], 0.5, True)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        tt.native_dropout(x, 1.5, True)


def _np_bags(idx, offsets, n_bags):
    """Each index's bag: the last offset at or before its position (include_last_offset's extra
    indices join the last bag)."""
    return np.minimum(np.searchsorted(offsets, np.arange(idx.size), side="right") - 1, n_bags - 1)


@pytest.mark.parametrize("last,pad", [(False, 1), (True, None)])
def test_embedding_bag_returns_torchs_four_tensors(last, pad, rng):
    w = T(rng, 6, 3, dtype=F64)
    # with include_last_offset the last offset closes the last bag: torch leaves indices past it undefined
    idx_np, off_np = np.array([0, 1, 2, 3, 4, 5, 1]), np.array([0, 2, 2, 7 if last else 5])
    idx, off = tt.tensor(idx_np), tt.tensor(off_np)
    B = 3 if last else 4
    bag = _np_bags(idx_np, off_np, B)
    valid = idx_np != pad if pad is not None else np.ones(idx_np.size, bool)
    size = np.bincount(bag[valid], minlength=B)
    rows = w.cpu().numpy()[idx_np]
    for mode, name in enumerate(("sum", "mean", "max")):
        out, o2b, bag_size, max_idx = tt.embedding_bag(w, idx, off, False, mode, False, None, last, pad)
        same(out, F.embedding_bag(idx, w, off, mode=name, include_last_offset=last, padding_idx=pad))
        assert o2b.dtype == bag_size.dtype == max_idx.dtype == tt.int64
        if mode == 0:  # torch's CPU sum keeps no bookkeeping (offset2bag only with a padding_idx)
            assert_close(o2b, bag if pad is not None else np.zeros(0), tt.int64)
            assert_close(bag_size, np.zeros(B), tt.int64)
            assert_close(max_idx, np.zeros(B), tt.int64)
            continue
        assert_close(o2b, bag, tt.int64)
        assert_close(bag_size, size, tt.int64)
        if mode == 1:
            assert_close(max_idx, size, tt.int64)
            continue
        expect = np.zeros((B, 3), np.int64)
        for b in range(B):
            members = np.flatnonzero((bag == b) & valid)
            if members.size:
                expect[b] = idx_np[members[rows[members].argmax(0)]]
        assert_close(max_idx, expect, tt.int64)
    with pytest.raises(ValueError, match="mode must be 0 \\(sum\\), 1 \\(mean\\) or 2 \\(max\\)"):
        tt.embedding_bag(w, idx, off, False, "sum")


def test_embedding_renorm_(rng):
    w = T(rng, 5, 3, dtype=F64) * 3
    ref = w.cpu().numpy().copy()
    idx = tt.tensor(np.array([[1, 3], [3, 0]], np.int64))
    assert tt.embedding_renorm_(w, idx, 1.5, 2.0) is w
    for r in (0, 1, 3):
        n = np.linalg.norm(ref[r])
        if n > 1.5:
            ref[r] *= 1.5 / (n + 1e-7)
    assert_close(w, ref, F64)
    with pytest.raises(IndexError, match="index out of range"):
        tt.embedding_renorm_(w, tt.tensor(np.array([5], np.int64)), 1.0, 2.0)


def _np_grid_sample_3d(a, g, nearest, align):
    """torch's grid_sampler_3d with zero padding, one output point at a time (float64)."""
    N, C, D, H, W = a.shape
    out = np.zeros((N, C) + g.shape[1:4])
    for n in range(N):
        for o in np.ndindex(*g.shape[1:4]):
            src = []
            for c, size in zip(g[n][o][::-1], (D, H, W)):  # the grid holds (x, y, z): z indexes D
                src.append((c + 1) * (size - 1) / 2 if align else ((c + 1) * size - 1) / 2)
            if nearest:
                corners = [(tuple(np.rint(src).astype(int)), 1.0)]
            else:
                lo = np.floor(src).astype(int)
                corners = [(tuple(lo + b), np.prod([f if bb else 1 - f for f, bb in zip(np.subtract(src, lo), b)]))
                           for b in np.ndindex(2, 2, 2)]
            for (z, y, x), w in corners:
                if 0 <= z < D and 0 <= y < H and 0 <= x < W:
                    out[n, :, o[0], o[1], o[2]] += w * a[n, :, z, y, x]
    return out


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_grid_sampler_3d_against_numpy(dtype, rng):
    x, a = make((2, 2, 3, 4, 5), dtype, "transposed", rng.standard_normal)
    g, gr = make((2, 2, 3, 2, 3), dtype, "contiguous", lambda s: rng.uniform(-1.2, 1.2, s))
    # every mode in fp32; the low-precision and fp64 runs check the dtype handling with one
    for mode, align in ((0, False), (0, True), (1, False)) if dtype is tt.float32 else ((0, True),):
        out = tt.grid_sampler_3d(x, g, mode, 0, align)
        assert out.shape == (2, 2, 2, 3, 2) and out.dtype == dtype
        assert_close(out, _np_grid_sample_3d(a, gr, mode == 1, align), dtype, "accumulate", k=8)


def test_grid_sampler_3d_border_and_reflection(rng):
    # identical depth planes: with border or reflection padding every sample is inside, so the
    # trilinear sample is the 2-D (already checked) bilinear sample of the plane
    plane = T(rng, 1, 2, 4, 5, dtype=F64)
    g3 = T(rng, 1, 2, 3, 2, 3, dtype=F64) * 1.3
    vol = plane.unsqueeze(2).expand(1, 2, 3, 4, 5)
    flat = tt.grid_sampler_2d(plane, g3[..., :2].reshape(1, 6, 2, 2), 0, 2, False)  # 2: reflection
    assert_close(tt.grid_sampler_3d(vol, g3, 0, 2, False), flat.reshape(1, 2, 2, 3, 2).cpu().numpy(), F64)
    g3 = g3.clamp(-1, 1)  # border padding: the same clamp as reflection's last step, inside [-1, 1] nothing to fold
    flat = tt.grid_sampler_2d(plane, g3[..., :2].reshape(1, 6, 2, 2), 0, 1, False)
    assert_close(tt.grid_sampler_3d(vol, g3, 0, 1, False), flat.reshape(1, 2, 2, 3, 2).cpu().numpy(), F64)


def test_grid_sampler_3d_gradcheck_and_errors(rng):
    # the input's gradient is the 2-D path's gathers (gradchecked with F.grid_sample); the grid's
    # runs through the third dim's weights
    x = T(rng, 1, 1, 2, 2, 2, dtype=F64)
    g = (T(rng, 1, 1, 1, 1, 3, dtype=F64) * 0.8).requires_grad_()
    assert gradcheck(lambda b: tt.grid_sampler_3d(x, b, 0, 0, False), (g,), fast_mode=True)
    with pytest.raises(RuntimeError, match="expected grid to have size 3 in last dimension"):
        tt.grid_sampler_3d(x, g[..., :2], 0, 0, False)
    with pytest.raises(RuntimeError, match="expected 5D input and grid with same number of dimensions"):
        tt.grid_sampler_3d(x[0], g[0], 0, 0, False)


def test_bad_arguments_name_themselves(rng):
    x = T(rng, 2, 3, 4)
    with pytest.raises(ValueError, match="interpolation_mode"):
        tt.grid_sampler(x[None], tt.zeros((1, 2, 2, 2)), 3, 0, False)
    with pytest.raises(ValueError, match="padding_mode"):
        tt.grid_sampler(x[None], tt.zeros((1, 2, 2, 2)), 0, "zeros", False)
    with pytest.raises(RuntimeError, match="grid_sampler_2d\\(\\): expected 4D input"):
        tt.grid_sampler_2d(x, tt.zeros((1, 2, 2, 2)), 0, 0, False)
    with pytest.raises(TypeError, match="argument 'indices'"):
        tt.embedding(x[0], [1, 2])
    with pytest.raises(NotImplementedError, match="generator"):
        tt.rrelu(x, 0.1, 0.3, True, tt.Generator())
    with pytest.raises(TypeError, match="argument 'input'"):
        tt.feature_dropout([1.0], 0.5, True)
