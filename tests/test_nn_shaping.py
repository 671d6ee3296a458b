"""GroupNorm, RMSNorm, F.normalize, F.one_hot, F.pad (constant/reflect/replicate/circular),
F.interpolate / Upsample (nearest, linear, bilinear, align_corners) and AdaptiveAvgPool2d against
float64 NumPy references over fp32/fp16/bf16, non-contiguous and odd shapes, with gradchecks."""
import math

import numpy as np
import pytest

import tritensor as tt
from tritensor import nn
from tritensor.nn import functional as F

from tolerances import NP, assert_close

DTYPES = [tt.float32, tt.float16, tt.bfloat16]


def _t(a, dtype, transposed=False):
    # tt.tensor, not from_numpy: operands follow the default device, as the modules under test do
    a = np.asarray(a).astype(NP[dtype])
    if transposed:  # the same values through a non-contiguous view (last two dims swapped)
        return tt.tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2))).transpose(-1, -2), a.astype(np.float64)
    return tt.tensor(a), a.astype(np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
def test_group_norm_and_rms_norm_vs_numpy(dtype):
    rng = np.random.default_rng(0)
    x, xr = _t(rng.standard_normal((3, 6, 4, 5)) * 2 + 1, dtype, transposed=True)
    w, wr = _t(rng.standard_normal(6), dtype)
    b, br = _t(rng.standard_normal(6), dtype)
    g = xr.reshape(3, 3, -1)
    ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(xr.shape)
    ref = ref * wr.reshape(1, 6, 1, 1) + br.reshape(1, 6, 1, 1)
    # fp32: 40-term statistics accumulated in fp32; fp16/bf16: the normalized value is rounded,
    # then the affine rounds again: two roundings, TOL × 2.
    profile, k = ("accumulate", 40) if dtype is tt.float32 else ("rounded_terms", 2)
    assert_close(F.group_norm(x, 3, w, b), ref, dtype, profile, k=k)
    m = nn.GroupNorm(3, 6)
    assert list(m.state_dict()) == ["weight", "bias"]
    rw, rwr = _t(rng.standard_normal(5), dtype)
    eps = {tt.float32: 1.1920928955078125e-07, tt.float16: 0.0009765625, tt.bfloat16: 0.0078125}[dtype]
    y = xr / np.sqrt((xr ** 2).mean(-1, keepdims=True) + eps)
    y = y.astype(NP[dtype]).astype(np.float64) * rwr  # torch casts back before the weight
    assert_close(F.rms_norm(x, (5,), rw), y, dtype, profile, k=k)
    r = nn.RMSNorm([4, 5], eps=1e-6)
    assert list(r.state_dict()) == ["weight"] and tuple(r.weight.shape) == (4, 5)
    yy = xr / np.sqrt((xr ** 2).mean((-2, -1), keepdims=True) + 1e-6)
    assert_close(r(x).detach(), yy, dtype, profile, k=k)


@pytest.mark.parametrize("dtype", DTYPES)
def test_normalize_and_one_hot(dtype):
    rng = np.random.default_rng(1)
    x, xr = _t(rng.standard_normal((4, 5)), dtype, transposed=True)
    xr[1] = 0.0
    x = tt.tensor(xr.astype(NP[dtype]))
    for p, dim in ((2.0, 1), (1.0, 0), (3.0, -1), (math.inf, 1)):
        n = np.linalg.norm(xr, ord=p, axis=dim, keepdims=True) if p != 3.0 else \
            (np.abs(xr) ** 3).sum(dim, keepdims=True) ** (1 / 3)
        assert_close(F.normalize(x, p, dim), xr / np.maximum(n, 1e-12), dtype)
    oh = F.one_hot(tt.tensor([[0, 3], [2, 2]]), 5)
    assert oh.dtype is tt.int64 and oh.numpy().tolist() == np.eye(5, dtype=np.int64)[[[0, 3], [2, 2]]].tolist()
    assert tuple(F.one_hot(tt.tensor([1, 0])).shape) == (2, 2)
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes."):
        F.one_hot(tt.tensor([5]), 3)
    with pytest.raises(RuntimeError, match="only applicable to index tensor of type LongTensor"):
        F.one_hot(tt.tensor([1], dtype=tt.int32))


@pytest.mark.parametrize("mode,np_mode", [("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")])
@pytest.mark.parametrize("dtype", DTYPES)
def test_pad_modes_vs_numpy(mode, np_mode, dtype):
    rng = np.random.default_rng(2)
    x, xr = _t(rng.standard_normal((2, 3, 4, 5)), dtype, transposed=True)
    out = F.pad(x, (2, 1, 3, 0), mode=mode)
    assert_close(out, np.pad(xr, ((0, 0), (0, 0), (3, 0), (2, 1)), mode=np_mode), dtype)
    x3, xr3 = _t(rng.standard_normal((2, 6)), dtype)  # unbatched 1-d padding of a 2-D input
    assert_close(F.pad(x3, (1, 4), mode=mode), np.pad(xr3, ((0, 0), (1, 4)), mode=np_mode), dtype)


def test_pad_constant_crop_value_and_errors():
    x = tt.tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    ref = np.pad(np.arange(24, dtype=np.float64).reshape(2, 3, 4), ((1, 0), (0, 0), (2, 0)), constant_values=-1.5)
    assert_close(F.pad(x, (2, -1, 0, 0, 1, 0), value=-1.5), ref[:, :, :-1], tt.float32)
    assert_close(F.pad(x, (1, 1)), np.pad(x.numpy(), ((0, 0), (0, 0), (1, 1))), tt.float32)
    assert tuple(F.pad(tt.zeros(0, 2), (1, 1)).shape) == (0, 4)
    with pytest.raises(ValueError, match="Padding length must be divisible by 2"):
        F.pad(x, (1,))
    with pytest.raises(RuntimeError, match="Padding size should be less than the corresponding input dimension"):
        F.pad(x, (4, 0), mode="reflect")
    with pytest.raises(NotImplementedError, match="Unrecognised padding mode"):
        F.pad(x, (1, 1), mode="mirror")
    with pytest.raises(ValueError, match="doesn't take in value argument"):
        F.pad(x, (1, 1), mode="replicate", value=2.0)


def _bilinear_ref(x, oh, ow, align, scale=None):
    """Per output pixel, the four-neighbour blend (not separable by construction)."""
    N, C, H, W = x.shape
    out = np.zeros((N, C, oh, ow))

    def src(o, n_in, n_out, s):
        if align:
            return o * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
        r = 1 / s if s else n_in / n_out
        return max((o + 0.5) * r - 0.5, 0.0)

    for i in range(oh):
        for j in range(ow):
            y, xx = src(i, H, oh, scale), src(j, W, ow, scale)
            y0, x0 = min(int(math.floor(y)), H - 1), min(int(math.floor(xx)), W - 1)
            y1, x1 = min(y0 + 1, H - 1), min(x0 + 1, W - 1)
            ly, lx = y - y0, xx - x0
            out[:, :, i, j] = ((1 - ly) * ((1 - lx) * x[:, :, y0, x0] + lx * x[:, :, y0, x1])
                               + ly * ((1 - lx) * x[:, :, y1, x0] + lx * x[:, :, y1, x1]))
    return out


@pytest.mark.parametrize("dtype", DTYPES)
def test_interpolate_vs_numpy(dtype):
    rng = np.random.default_rng(3)
    x, xr = _t(rng.standard_normal((2, 3, 4, 5)), dtype, transposed=True)
    for size, align in (((7, 3), False), ((7, 3), True), ((4, 5), False), ((1, 9), True)):
        out = F.interpolate(x, size=size, mode="bilinear", align_corners=align)
        assert out.dtype is dtype
        assert_close(out, _bilinear_ref(xr, *size, align), dtype)
    out = nn.Upsample(scale_factor=1.5, mode="bilinear")(x)
    assert_close(out, _bilinear_ref(xr, 6, 7, False, scale=1.5), dtype)
    hi = np.floor(np.arange(9) * 4 / 9).astype(int)
    wi = np.floor(np.arange(2) * 5 / 2).astype(int)
    assert_close(F.interpolate(x, size=(9, 2)), xr[:, :, hi][:, :, :, wi], dtype)
    up = nn.Upsample(scale_factor=2)(x)  # nearest: each pixel repeated
    assert_close(up, xr.repeat(2, axis=2).repeat(2, axis=3), dtype)
    x1, xr1 = _t(rng.standard_normal((2, 3, 4)), dtype)
    ref = _bilinear_ref(xr1[:, :, None, :], 1, 7, True)[:, :, 0]
    assert_close(F.interpolate(x1, size=7, mode="linear", align_corners=True), ref, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_adaptive_avg_pool2d_vs_numpy(dtype):
    rng = np.random.default_rng(4)
    x, xr = _t(rng.standard_normal((2, 3, 7, 10)), dtype, transposed=True)

    def ref(a, oh, ow):
        H, W = a.shape[-2:]
        out = np.zeros(a.shape[:-2] + (oh, ow))
        for i in range(oh):
            for j in range(ow):
                h0, h1 = (i * H) // oh, -((-(i + 1) * H) // oh)
                w0, w1 = (j * W) // ow, -((-(j + 1) * W) // ow)
                out[..., i, j] = a[..., h0:h1, w0:w1].mean((-2, -1))
        return out

    for osz in ((3, 4), (7, 5), 1, (None, 3), (4, 10)):
        o = (osz, osz) if isinstance(osz, int) else (osz[0] or 7, osz[1])
        assert_close(nn.AdaptiveAvgPool2d(osz)(x), ref(xr, *o), dtype)
    assert_close(F.adaptive_avg_pool2d(x[0], (2, 3)), ref(xr[0], 2, 3), dtype)  # unbatched


def test_shaping_gradchecks():
    # Small inputs: gradcheck runs one backward per output element and two forwards per input one.
    rng = np.random.default_rng(5)
    x = tt.tensor(rng.standard_normal((1, 4, 2, 3))).requires_grad_()
    w = tt.tensor(rng.standard_normal(4)).requires_grad_()
    b = tt.tensor(rng.standard_normal(4)).requires_grad_()
    g = tt.autograd.gradcheck
    assert g(lambda x, w, b: F.group_norm(x, 2, w, b), (x, w, b), fast_mode=True)
    assert g(lambda x, w: F.rms_norm(x, (3,), w[:3]), (x, w), fast_mode=True)
    assert g(lambda x: F.normalize(x, 2.0, 1), (x,), fast_mode=True)
    s = tt.tensor(rng.standard_normal((1, 1, 3, 3))).requires_grad_()
    # fast_mode (random projections v^T J u): the full Jacobian of these takes ~10 s each in CPU mode
    assert g(lambda x: F.pad(x, (1, 2, 2, 1), mode="reflect"), (s,), fast_mode=True)
    assert g(lambda x: F.pad(x, (1, -1, 0, 2), value=0.5), (s,))
    assert g(lambda x: F.interpolate(x, size=(4, 2), mode="bilinear", align_corners=False), (s,), fast_mode=True)
    assert g(lambda x: F.adaptive_avg_pool2d(x, (2, 2)), (s,), fast_mode=True)
    z = tt.zeros(1, 3, dtype=tt.float64, requires_grad=True)
    F.normalize(z).sum().backward()
    assert np.isfinite(z.grad.numpy()).all()  # a zero vector: finite gradient, as torch


def test_shaping_errors():
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        F.group_norm(tt.zeros(2, 5, 3), 2)
    with pytest.raises(ValueError, match="num_channels must be divisible by num_groups"):
        nn.GroupNorm(2, 5)
    with pytest.raises(RuntimeError, match="Given normalized_shape=\\[4\\]"):
        F.rms_norm(tt.zeros(2, 3), (4,))
    with pytest.raises(ValueError, match="only one of size or scale_factor should be defined"):
        F.interpolate(tt.zeros(1, 1, 2, 2), size=3, scale_factor=2)
    with pytest.raises(NotImplementedError, match="bilinear mode needs 4D input"):
        F.interpolate(tt.zeros(1, 1, 2), size=3, mode="bilinear")
    with pytest.raises(ValueError, match="align_corners option can only be set with the interpolating modes"):
        F.interpolate(tt.zeros(1, 1, 2, 2), size=3, align_corners=True)
    with pytest.raises(ValueError, match="Expected 3D or 4D tensor"):
        F.adaptive_avg_pool2d(tt.zeros(2, 2), 1)
