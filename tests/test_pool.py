"""max_pool2d / avg_pool2d forward and backward (triton_kernels/pool.py) against float64 NumPy; the
derivatives (autograd/functions/pool.py) by gradcheck in float64.

The references pad explicitly (-inf for max, 0 for avg, extra room on the right for
``ceil_mode``) and walk the kernel taps as strided slices; max pooling's tie and NaN rules are
PyTorch's (a strictly greater value or a NaN replaces the current pick, so ties keep the first
position). Backward references scatter with ``np.add.at``; the kernels gather, so they share no
index math. Max pooling is exact in every dtype (it only selects), so its forward is compared
exactly; averages use the ``accumulate`` profile of tests/tolerances.py.
"""
import numpy as np
import pytest

import tritensor as tt
from tolerances import FLOAT_DTYPES, NP, assert_close
from grad_inputs import F64, RNG, leaf
from tritensor.autograd import gradcheck
from tritensor.core.ops import pool as _ops_pool

rng = np.random.default_rng(11)
# conftest.py: fresh float outputs start as NaN, so an element a kernel forgets to write fails.
pytestmark = pytest.mark.usefixtures("poison_allocations")




def _out(size, k, s, p, d, ceil):
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)) // s + 1
    return out - 1 if ceil and (out - 1) * s >= size + p else out


def _geometry(shape, k, s, p, d, ceil):
    _, _, H, W = shape
    OH, OW = _out(H, k[0], s[0], p[0], d[0], ceil), _out(W, k[1], s[1], p[1], d[1], ceil)
    # Right/bottom room so every window (ceil_mode may overhang the padding) is a full slice.
    extra = (max(0, (OH - 1) * s[0] + d[0] * (k[0] - 1) + 1 - (H + 2 * p[0])),
             max(0, (OW - 1) * s[1] + d[1] * (k[1] - 1) + 1 - (W + 2 * p[1])))
    return (OH, OW), ((0, 0), (0, 0), (p[0], p[0] + extra[0]), (p[1], p[1] + extra[1]))


def _tap_slices(k, s, d, OH, OW):
    for kh in range(k[0]):
        for kw in range(k[1]):
            yield (slice(None), slice(None), slice(kh * d[0], kh * d[0] + s[0] * (OH - 1) + 1, s[0]),
                   slice(kw * d[1], kw * d[1] + s[1] * (OW - 1) + 1, s[1]))


def ref_max_pool(x, k, s, p, d, ceil):
    N, C, H, W = x.shape
    (OH, OW), pads = _geometry(x.shape, k, s, p, d, ceil)
    xp = np.pad(x, pads, constant_values=-np.inf)
    pos = np.pad(np.arange(H * W).reshape(H, W), pads[2:], constant_values=-1)
    best = np.full((N, C, OH, OW), -np.inf)
    idx = np.full((N, C, OH, OW), -1, np.int64)
    for sl in _tap_slices(k, s, d, OH, OW):
        v, at = xp[sl], np.broadcast_to(pos[sl[2:]], (N, C, OH, OW))
        take = (at >= 0) & ((v > best) | np.isnan(v) | (idx < 0))
        best, idx = np.where(take, v, best), np.where(take, at, idx)
    return best, idx


def ref_max_pool_backward(shape, idx, g):
    N, C, H, W = shape
    dx = np.zeros((N * C, H * W))
    np.add.at(dx, (np.arange(N * C)[:, None], idx.reshape(N * C, -1)), g.reshape(N * C, -1))
    return dx.reshape(shape)


def _divisor(shape, k, s, p, ceil, include_pad, override):
    """PyTorch's divisor per output: the override, or the window's count of padded (or real) positions."""
    N, C, H, W = shape
    (OH, OW), pads = _geometry(shape, k, s, p, (1, 1), ceil)
    if override:
        return np.full((OH, OW), float(override))
    mask = np.zeros((H + sum(pads[2]), W + sum(pads[3])))
    if include_pad:
        mask[: H + 2 * p[0], : W + 2 * p[1]] = 1  # padding counts; a ceil_mode overhang does not
    else:
        mask[p[0]: p[0] + H, p[1]: p[1] + W] = 1
    return sum(mask[sl[2:]] for sl in _tap_slices(k, s, (1, 1), OH, OW))


def ref_avg_pool(x, k, s, p, ceil, include_pad, override):
    (OH, OW), pads = _geometry(x.shape, k, s, p, (1, 1), ceil)
    xp = np.pad(x, pads)
    return sum(xp[sl] for sl in _tap_slices(k, s, (1, 1), OH, OW)) / _divisor(x.shape, k, s, p, ceil, include_pad,
                                                                              override)


def ref_avg_pool_backward(shape, g, k, s, p, ceil, include_pad, override):
    N, C, H, W = shape
    (OH, OW), pads = _geometry(shape, k, s, p, (1, 1), ceil)
    dxp = np.zeros((N, C, H + sum(pads[2]), W + sum(pads[3])))
    share = g / _divisor(shape, k, s, p, ceil, include_pad, override)
    for sl in _tap_slices(k, s, (1, 1), OH, OW):
        dxp[sl] += share
    return dxp[:, :, p[0]: p[0] + H, p[1]: p[1] + W]


# (N, C, H, W), kernel, stride, padding, dilation, ceil_mode
CASES = [
    ((2, 3, 7, 9), (2, 2), (2, 2), (0, 0), (1, 1), False),
    ((1, 2, 9, 8), (3, 3), (2, 2), (1, 1), (1, 1), False),
    ((1, 2, 9, 8), (3, 3), (2, 2), (1, 1), (1, 1), True),       # ceil_mode: a last, partial window
    ((2, 2, 5, 6), (2, 3), (1, 2), (1, 1), (1, 1), True),       # overlapping rows, per-axis geometry
    ((1, 2, 6, 9), (3, 2), (2, 1), (1, 1), (1, 1), True),       # ceil_mode window overhangs the bottom padding
    ((1, 3, 11, 10), (3, 3), (1, 1), (1, 0), (1, 1), False),    # stride 1: every input in up to 9 windows
    ((2, 4, 70, 66), (2, 2), (1, 1), (0, 0), (1, 1), False),    # more than one block of lanes
]
DILATED = [((1, 3, 11, 10), (3, 3), (2, 1), (1, 1), (2, 3), False), ((1, 2, 9, 9), (2, 2), (2, 2), (1, 0), (3, 2), True)]


def _ids(c):
    return f"x{c[0]}-k{c[1]}-s{c[2]}-p{c[3]}-d{c[4]}-{'ceil' if c[5] else 'floor'}".replace(" ", "")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES + DILATED, ids=_ids)
def test_max_pool2d(dtype, case):
    shape, k, s, p, d, ceil = case
    x = rng.standard_normal(shape).astype(NP[dtype])
    y, idx = tt.max_pool2d(tt.tensor(x), k, s, p, d, ceil, return_indices=True)
    y_ref, idx_ref = ref_max_pool(x.astype(np.float64), k, s, p, d, ceil)
    assert y.dtype is dtype and idx.dtype is tt.int64 and y.shape == y_ref.shape
    np.testing.assert_array_equal(y.numpy().astype(np.float64), y_ref)  # max only selects: exact
    np.testing.assert_array_equal(idx.numpy(), idx_ref)
    g = rng.standard_normal(y_ref.shape).astype(NP[dtype])
    dx = _ops_pool.max_pool2d_backward(tt.tensor(g), shape, idx, k, s, p, d, ceil)
    assert dx.dtype is dtype and dx.shape == shape
    windows = -(-k[0] // s[0]) * -(-k[1] // s[1])  # most outputs one input can win
    assert_close(dx, ref_max_pool_backward(shape, idx_ref, g.astype(np.float64)), dtype, "accumulate", k=windows)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=_ids)
@pytest.mark.parametrize("include_pad,override", [(True, None), (False, None), (True, 5)],
                         ids=["count_pad", "no_pad", "divisor5"])
def test_avg_pool2d(dtype, case, include_pad, override):
    shape, k, s, p, _, ceil = case
    x = rng.standard_normal(shape).astype(NP[dtype])
    y = tt.avg_pool2d(tt.tensor(x), k, s, p, ceil, include_pad, override)
    y_ref = ref_avg_pool(x.astype(np.float64), k, s, p, ceil, include_pad, override)
    assert y.dtype is dtype and y.shape == y_ref.shape
    assert_close(y, y_ref, dtype, "accumulate", k=k[0] * k[1])
    g = rng.standard_normal(y_ref.shape).astype(NP[dtype])
    dx = _ops_pool.avg_pool2d_backward(tt.tensor(g), shape, k, s, p, ceil, include_pad, override)
    assert dx.dtype is dtype and dx.shape == shape
    assert_close(dx, ref_avg_pool_backward(shape, g.astype(np.float64), k, s, p, ceil, include_pad, override), dtype,
                 "accumulate", k=k[0] * k[1])


def test_known_values_and_shapes():
    # Hand-checked against PyTorch's documented formulas.
    x = tt.arange(25, dtype=tt.float32).reshape(1, 1, 5, 5)
    assert tt.max_pool2d(x, 2).shape == (1, 1, 2, 2)
    assert tt.max_pool2d(x, 2, ceil_mode=True).shape == (1, 1, 3, 3)
    np.testing.assert_array_equal(tt.max_pool2d(x, 2, ceil_mode=True).numpy()[0, 0],
                                  [[6, 8, 9], [16, 18, 19], [21, 23, 24]])
    np.testing.assert_array_equal(tt.avg_pool2d(x, 2).numpy()[0, 0], [[3, 5], [13, 15]])
    # count_include_pad: the corner window sees 1 real value out of 4 padded positions.
    assert tt.avg_pool2d(x, 2, 2, 1).numpy()[0, 0, 0, 0] == 0.0 / 4
    assert tt.avg_pool2d(tt.ones(1, 1, 3, 3), 2, 2, 1).numpy()[0, 0, 0, 0] == 0.25
    assert tt.avg_pool2d(tt.ones(1, 1, 3, 3), 2, 2, 1, count_include_pad=False).numpy()[0, 0, 0, 0] == 1.0


def test_nan_propagates_and_ties_keep_first():
    x = np.array([[[[1.0, np.nan, 3.0, 3.0], [0.0, 2.0, 3.0, 3.0]]]], np.float32)
    y, idx = tt.max_pool2d(tt.tensor(x), 2, return_indices=True)
    assert np.isnan(y.numpy()[0, 0, 0, 0]) and idx.numpy()[0, 0, 0, 0] == 1
    assert y.numpy()[0, 0, 0, 1] == 3.0 and idx.numpy()[0, 0, 0, 1] == 2


@pytest.mark.parametrize("dtype", [tt.float32, tt.bfloat16], ids=str)
def test_non_contiguous_unbatched_and_empty(dtype):
    shape, k, s, p, d, ceil = CASES[3]
    x = rng.standard_normal(shape).astype(NP[dtype])
    x_cl = tt.tensor(np.ascontiguousarray(x.transpose(0, 2, 3, 1))).permute(0, 3, 1, 2)
    assert not x_cl.is_contiguous()
    y, idx = tt.max_pool2d(x_cl, k, s, p, d, ceil, return_indices=True)
    y_ref, idx_ref = ref_max_pool(x.astype(np.float64), k, s, p, d, ceil)
    np.testing.assert_array_equal(y.numpy().astype(np.float64), y_ref)
    big = rng.standard_normal(y_ref.shape[:3] + (2 * y_ref.shape[3],)).astype(NP[dtype])
    g, g64 = tt.tensor(big)[..., ::2], big[..., ::2].astype(np.float64)
    assert_close(_ops_pool.max_pool2d_backward(g, shape, idx, k, s, p, d, ceil),
                 ref_max_pool_backward(shape, idx_ref, g64), dtype, "accumulate", k=4)
    assert_close(tt.avg_pool2d(x_cl, k, s, p, ceil), ref_avg_pool(x.astype(np.float64), k, s, p, ceil, True, None),
                 dtype, "accumulate", k=6)
    assert_close(_ops_pool.avg_pool2d_backward(g, shape, k, s, p, ceil),
                 ref_avg_pool_backward(shape, g64, k, s, p, ceil, True, None), dtype, "accumulate", k=6)
    # Unbatched (C, H, W) input, and an empty batch.
    y3 = tt.max_pool2d(tt.tensor(x[0]), k, s, p, d, ceil)
    np.testing.assert_array_equal(y3.numpy().astype(np.float64), y_ref[0])
    assert tt.avg_pool2d(tt.zeros(0, 2, 5, 6, dtype=dtype), 2).shape == (0, 2, 2, 3)
    assert _ops_pool.avg_pool2d_backward(tt.zeros(0, 2, 2, 3, dtype=dtype), (0, 2, 5, 6), 2).shape == (0, 2, 5, 6)


def test_bad_input(no_launch):
    x = tt.zeros(1, 3, 4, 4)
    with pytest.raises(RuntimeError, match="kernel size should be greater than zero, but got kH: 0 kW: 2"):
        tt.max_pool2d(x, (0, 2))
    with pytest.raises(RuntimeError, match="stride should be greater than zero, but got dH: 0 dW: 0"):
        tt.avg_pool2d(x, 2, 0)
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel size, but got pad=2, "
                                           "kernel_size=3 and dilation=1"):
        tt.max_pool2d(x, 3, padding=2)
    with pytest.raises(RuntimeError, match=r"Given input size: \(3x4x4\)\. Calculated output size: \(3x0x0\)\. "
                                           r"Output size is too small"):
        tt.max_pool2d(x, 3, dilation=2)
    with pytest.raises(RuntimeError, match=r"Expected 3D or 4D \(batch mode\) tensor.*\[4, 4\]"):
        tt.max_pool2d(tt.zeros(4, 4), 2)
    with pytest.raises(RuntimeError, match="floating-point input.*int64"):
        tt.avg_pool2d(tt.zeros(1, 1, 4, 4, dtype=tt.int64), 2)
    with pytest.raises(RuntimeError, match="divisor must be not zero"):
        tt.avg_pool2d(x, 2, divisor_override=0)
    with pytest.raises(RuntimeError, match="kernel_size must either be a single int, or a tuple of two ints"):
        tt.max_pool2d(x, (2, 2, 2))
    with pytest.raises(RuntimeError, match=r"grad_output has shape \[1, 3, 3, 3\] but the pooling's output has "
                                           r"shape \[1, 3, 2, 2\]"):
        _ops_pool.avg_pool2d_backward(tt.zeros(1, 3, 3, 3), (1, 3, 4, 4), 2)
    with pytest.raises(TypeError, match="indices must be the int64 Tensor"):
        _ops_pool.max_pool2d_backward(tt.zeros(1, 3, 2, 2), (1, 3, 4, 4), tt.zeros(1, 3, 2, 2), 2)



def test_negative_arguments_and_empty_adaptive_windows_raise(no_launch):
    """torch's checks and wording; an adaptive pool over an empty plane averaged nothing (NaN) before."""
    x = tt.zeros(1, 3, 4, 4)
    for f in (lambda: tt.max_pool2d(x, 2, padding=-1), lambda: tt.avg_pool2d(x, 2, padding=(0, -1))):
        with pytest.raises(RuntimeError, match="pad must be non-negative, but got pad: -1"):
            f()
    with pytest.raises(RuntimeError, match="kernel size should be greater than zero, but got kH: -1 kW: -1"):
        tt.max_pool2d(x, -1)
    with pytest.raises(RuntimeError, match="stride should be greater than zero, but got dH: -1 dW: -1"):
        tt.avg_pool2d(x, 2, -1)
    with pytest.raises(RuntimeError, match="dilation should be greater than zero, but got dilationH: 0 dilationW: 0"):
        tt.nn.MaxPool2d(2, dilation=0)(x)
    with pytest.raises(RuntimeError, match=r"Expected input to have non-zero size for non-batch dimensions, but input "
                                           r"has sizes \[1, 1, 3, 0\] with dimension 3 being empty"):
        tt.nn.functional.adaptive_avg_pool2d(tt.zeros(1, 1, 3, 0), 2)


# ----- derivatives (fast mode: v^T J u, one backward per check) ------------------------------
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=2, stride=1, dilation=2, ceil_mode=True)])
def test_max_pool2d_gradcheck(kw):
    x = tt.tensor(RNG.permutation(2 * 2 * 5 * 5).reshape(2, 2, 5, 5) / 10.0, dtype=F64, requires_grad=True)  # no ties
    assert gradcheck(lambda a: tt.max_pool2d(a, **kw), (x,), fast_mode=True)
    small = tt.tensor(RNG.permutation(9).reshape(1, 1, 3, 3) / 10.0, dtype=F64, requires_grad=True)
    assert gradcheck(lambda a: tt.max_pool2d(a, **{**kw, "kernel_size": 2}), (small,))
    assert gradcheck(lambda a: tt.max_pool2d_with_indices(a, **kw)[0], (x,), fast_mode=True)


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, padding=1, count_include_pad=False, ceil_mode=True)])
def test_avg_pool2d_gradcheck(kw):
    assert gradcheck(lambda a: tt.avg_pool2d(a, **kw), (leaf(1, 2, 5, 5),), fast_mode=True)
    assert gradcheck(lambda a: tt.avg_pool2d(a, **kw), (leaf(1, 1, 3, 3),))
