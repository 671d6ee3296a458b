"""The composite nn.functional entries and their modules (nn/functional_*.py, grouped by kind; the modules in nn/modules/)
against float64 NumPy: 1-D convolution and pooling, pixel (un)shuffle, unfold, cosine similarity,
pairwise distance, bilinear; gradchecks through the ops they are made of; torch's reprs and errors."""
import numpy as np
import pytest

import tritensor as tt
import tritensor.nn.functional as F
from grad_inputs import leaf
from test_conv import ref_conv2d
from tolerances import NP, assert_close
from tritensor import nn
from tritensor.autograd import gradcheck

rng = np.random.default_rng(24)
FLOATS = [tt.float32, tt.float64, tt.float16, tt.bfloat16]


def _x(shape, dtype=tt.float32):
    a = rng.standard_normal(shape).astype(NP[dtype])
    return a, tt.tensor(a)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 0, 1, 1), (2, 1, 2, 1), (1, "same", 1, 2)])
def test_conv1d_matches_conv_over_one_row(dtype, stride, padding, dilation, groups):
    x, xt = _x((2, 4, 11), dtype)
    w, wt = _x((6, 4 // groups, 3), dtype)
    b, bt = _x((6,), dtype)
    y = F.conv1d(xt, wt, bt, stride, padding, dilation, groups)
    pad = padding if isinstance(padding, str) else (0, padding)
    ref = ref_conv2d(x[:, :, None].astype(np.float64), w[:, :, None].astype(np.float64), b.astype(np.float64),
                     (1, stride), pad, (1, dilation), groups)[:, :, 0]
    assert_close(y, ref, dtype, "accumulate", k=12)
    unbatched = F.conv1d(xt[0], wt, bt, stride, padding, dilation, groups)
    assert unbatched.shape == y.shape[1:]
    with pytest.raises(RuntimeError, match="Expected 2D \\(unbatched\\) or 3D"):
        F.conv1d(tt.zeros(1, 1, 2, 2), wt)
    with pytest.raises(TypeError, match="stride must be an int"):
        F.conv1d(xt, wt, stride=1.5)


def test_pool1d_against_numpy():
    x, xt = _x((2, 3, 10))
    assert np.array_equal(F.max_pool1d(xt, 3, 2).numpy(), np.stack([x[..., i:i + 3].max(-1) for i in (0, 2, 4, 6)], -1))
    values, idx = F.max_pool1d(xt, 2, return_indices=True)
    np.testing.assert_array_equal(values.numpy(), x.reshape(2, 3, 5, 2).max(-1))
    np.testing.assert_array_equal(idx.numpy(), np.arange(0, 10, 2) + x.reshape(2, 3, 5, 2).argmax(-1))
    assert_close(F.avg_pool1d(xt, 4, 3, padding=1), np.stack(
        [np.pad(x, ((0, 0), (0, 0), (1, 1)))[..., i:i + 4].astype(np.float64).mean(-1) for i in (0, 3, 6)], -1),
        tt.float32)


@pytest.mark.parametrize("dtype", [tt.float32, tt.int64], ids=str)
def test_pixel_shuffle_and_unshuffle(dtype):
    x = np.arange(2 * 3 * 8 * 2 * 3).reshape(2, 3, 8, 2, 3).astype(NP[dtype])
    y = F.pixel_shuffle(tt.tensor(x), 2)
    ref = x.reshape(2, 3, 2, 2, 2, 2, 3).transpose(0, 1, 2, 5, 3, 6, 4).reshape(2, 3, 2, 4, 6)
    np.testing.assert_array_equal(y.numpy(), ref)
    np.testing.assert_array_equal(F.pixel_unshuffle(y, 2).numpy(), x)
    with pytest.raises(RuntimeError, match="divisible by the square of upscale_factor"):
        F.pixel_shuffle(tt.zeros(1, 3, 2, 2), 2)
    with pytest.raises(RuntimeError, match="at least 3 dimensions"):
        F.pixel_unshuffle(tt.zeros(4, 4), 2)


def test_unfold_is_im2col():
    x, xt = _x((2, 3, 5, 6))
    y = F.unfold(xt, (2, 3), dilation=1, padding=1, stride=2)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = []
    for i in range(0, xp.shape[2] - 2 + 1, 2):
        for j in range(0, xp.shape[3] - 3 + 1, 2):
            cols.append(xp[:, :, i:i + 2, j:j + 3].reshape(2, -1))
    np.testing.assert_array_equal(y.numpy(), np.stack(cols, -1))
    assert F.unfold(xt[0], 2).shape == (12, 20)
    assert gradcheck(lambda a: F.unfold(a, 2, padding=1), (leaf(1, 2, 3, 3),), fast_mode=True)


def test_distances_against_numpy():
    a, at = _x((4, 5), tt.float64)
    b, bt = _x((4, 5), tt.float64)
    cos = (a * b).sum(1) / (np.maximum(np.linalg.norm(a, axis=1), 1e-8) * np.maximum(np.linalg.norm(b, axis=1), 1e-8))
    assert_close(F.cosine_similarity(at, bt), cos, tt.float64)
    assert_close(F.pairwise_distance(at, bt, p=3.0), (np.abs(a - b + 1e-6) ** 3).sum(-1) ** (1 / 3), tt.float64)
    assert F.pairwise_distance(at, bt, keepdim=True).shape == (4, 1)
    assert_close(F.cosine_similarity(at[:1], bt, dim=1), (a[:1] * b).sum(1) / (np.linalg.norm(a[:1], axis=1)
                 * np.linalg.norm(b, axis=1)), tt.float64)  # broadcast
    assert gradcheck(lambda u, v: F.cosine_similarity(u, v, dim=0), (leaf(3, 2), leaf(3, 2)))


def test_bilinear_against_einsum():
    x1, x1t = _x((3, 4), tt.float64)
    x2, x2t = _x((3, 5), tt.float64)
    m = nn.Bilinear(4, 5, 2, dtype=tt.float64)
    ref = np.einsum("ni,oij,nj->no", x1, m.weight.detach().numpy(), x2) + m.bias.detach().numpy()
    assert_close(m(x1t, x2t).detach(), ref, tt.float64)
    bound = 1 / np.sqrt(4)
    assert np.abs(m.weight.detach().numpy()).max() <= bound
    with pytest.raises(RuntimeError, match="in1_features, in2_features"):
        F.bilinear(x1t, x2t, tt.zeros(2, 5, 4, dtype=tt.float64))


def test_modules_reprs_and_parameters_as_torch():
    assert repr(nn.Conv1d(2, 3, 3)) == "Conv1d(2, 3, kernel_size=(3,), stride=(1,))"
    assert repr(nn.Conv1d(2, 4, 3, padding=1, groups=2, bias=False)) == \
        "Conv1d(2, 4, kernel_size=(3,), stride=(1,), padding=(1,), groups=2, bias=False)"
    assert repr(nn.MaxPool2d(2)) == "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
    assert repr(nn.Flatten()) == "Flatten(start_dim=1, end_dim=-1)"
    assert repr(nn.PixelShuffle(2)) == "PixelShuffle(upscale_factor=2)"
    assert repr(nn.Unfold(2)) == "Unfold(kernel_size=2, dilation=1, padding=0, stride=1)"
    assert repr(nn.Bilinear(2, 3, 4)) == "Bilinear(in1_features=2, in2_features=3, out_features=4, bias=True)"
    conv = nn.Conv1d(4, 6, 5, groups=2)
    assert conv.weight.shape == (6, 2, 5) and conv.bias.shape == (6,)
    assert np.abs(conv.weight.detach().numpy()).max() <= 1 / np.sqrt(10)
    y = conv(tt.randn(2, 4, 9))
    assert y.shape == (2, 6, 5)
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv1d(3, 6, 3, groups=2)
    assert nn.CosineSimilarity(dim=0)(tt.ones(3), tt.ones(3)).item() == pytest.approx(1.0)
    assert nn.PairwiseDistance()(tt.zeros(1, 3), tt.zeros(1, 3)).shape == (1,)
