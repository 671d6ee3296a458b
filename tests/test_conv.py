"""conv2d forward, grad-input and grad-weight (triton_kernels/conv.py) against a float64 NumPy reference;
the derivative (autograd/functions/conv.py) by gradcheck (fast mode: v^T J u) in float64.

The reference pads explicitly and sums one strided slice per kernel tap, so it shares no index
math with the kernels; its backward is the exact adjoint, checked by the dot-product identity
<conv(x, w), g> == <x, dX(g)> == <w, dW(g)>. Both the implicit-GEMM kernels (GEMM sides >= 16)
and the direct kernel (depthwise and other thin convolutions) are covered. TF32 is switched off
so a GPU run checks IEEE fp32 like the interpreter does.
"""
import numpy as np
import pytest

import tritensor as tt
from tolerances import FLOAT_DTYPES, NP, assert_close
from grad_inputs import leaf, noncontig
from tritensor.autograd import gradcheck
from tritensor.core.ops import conv as _ops_conv

rng = np.random.default_rng(7)
# conftest.py: fresh float outputs start as NaN, so an element a kernel forgets to write fails; convs
# run in IEEE fp32, not a GPU's default TF32.
pytestmark = pytest.mark.usefixtures("poison_allocations", "ieee_fp32_conv")


# ----- float64 reference -------------------------------------------------------------------------
def _pads(H, W, KH, KW, stride, padding, dilation):
    """(top, bottom, left, right) padding and output size, PyTorch's rules."""
    span = (dilation[0] * (KH - 1) + 1, dilation[1] * (KW - 1) + 1)
    if padding == "same":
        th, tw = span[0] - 1, span[1] - 1
        return (th // 2, th - th // 2, tw // 2, tw - tw // 2), (H, W)
    p = (0, 0) if padding == "valid" else padding
    out = ((H + 2 * p[0] - span[0]) // stride[0] + 1, (W + 2 * p[1] - span[1]) // stride[1] + 1)
    return (p[0], p[0], p[1], p[1]), out


def _taps(xp, KH, KW, OH, OW, stride, dilation):
    for kh in range(KH):
        for kw in range(KW):
            h0, w0 = kh * dilation[0], kw * dilation[1]
            yield kh, kw, (slice(None), slice(None), slice(h0, h0 + stride[0] * (OH - 1) + 1, stride[0]),
                           slice(w0, w0 + stride[1] * (OW - 1) + 1, stride[1]))


def ref_conv2d(x, w, b, stride, padding, dilation, groups):
    N, C, H, W = x.shape
    OC, Cg, KH, KW = w.shape
    (pt, pb, pl, pr), (OH, OW) = _pads(H, W, KH, KW, stride, padding, dilation)
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    wg = w.reshape(groups, OC // groups, Cg, KH, KW)
    y = np.zeros((N, groups, OC // groups, OH, OW))
    for kh, kw, sl in _taps(xp, KH, KW, OH, OW, stride, dilation):
        xs = xp[sl].reshape(N, groups, Cg, OH, OW)
        y += np.einsum("ngchw,goc->ngohw", xs, wg[:, :, :, kh, kw])
    y = y.reshape(N, OC, OH, OW)
    return y if b is None else y + b[None, :, None, None]


def ref_conv2d_backward(x_shape, x, w, g, stride, padding, dilation, groups):
    """(grad_input, grad_weight): the adjoint of ref_conv2d applied to g."""
    N, C, H, W = x_shape
    OC, Cg, KH, KW = w.shape
    (pt, pb, pl, pr), (OH, OW) = _pads(H, W, KH, KW, stride, padding, dilation)
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    dxp = np.zeros_like(xp)
    wg = w.reshape(groups, OC // groups, Cg, KH, KW)
    gg = g.reshape(N, groups, OC // groups, OH, OW)
    dw = np.zeros((groups, OC // groups, Cg, KH, KW))
    for kh, kw, sl in _taps(xp, KH, KW, OH, OW, stride, dilation):
        dxp[sl] += np.einsum("ngohw,goc->ngchw", gg, wg[:, :, :, kh, kw]).reshape(N, C, OH, OW)
        dw[:, :, :, kh, kw] = np.einsum("ngohw,ngchw->goc", gg, xp[sl].reshape(N, groups, Cg, OH, OW))
    return dxp[:, :, pt: pt + H, pl: pl + W], dw.reshape(w.shape)


# (N, C, H, W), (OC, KH, KW), stride, padding, dilation, groups  --  path taken
CASES = [
    ((2, 4, 9, 11), (18, 3, 3), (1, 1), (1, 1), (1, 1), 1),          # GEMM
    ((2, 5, 13, 12), (17, 3, 2), (2, 1), (1, 2), (2, 1), 1),         # GEMM: stride, pad, dilation per axis
    ((1, 6, 8, 7), (34, 3, 3), (1, 2), (0, 1), (1, 1), 2),           # GEMM: groups
    ((2, 8, 12, 12), (20, 3, 3), (1, 1), (1, 1), (1, 1), 1),         # GEMM: M and K over one block
    ((1, 16, 5, 6), (16, 1, 1), (1, 1), (0, 0), (1, 1), 1),          # GEMM: 1x1
    ((1, 20, 7, 6), (24, 3, 3), (2, 1), (1, 1), (2, 1), 1),          # channel chunks: stride, dilation, masked chunk
    ((1, 70, 4, 5), (16, 3, 3), (1, 1), (1, 1), (1, 1), 1),          # channel chunks: more than one
    ((1, 34, 5, 5), (32, 3, 3), (1, 1), (1, 1), (1, 1), 2),          # channel chunks: groups of 17
    ((2, 5, 9, 8), (5, 3, 3), (2, 2), (1, 1), (1, 1), 5),            # direct: depthwise
    ((1, 3, 7, 9), (6, 3, 3), (1, 1), (2, 0), (2, 2), 3),            # direct: depthwise x2 multiplier
    ((2, 2, 10, 7), (3, 2, 2), (3, 2), (0, 0), (1, 1), 1),           # direct: thin conv
    ((1, 4, 7, 6), (16, 4, 4), (1, 1), "same", (1, 1), 1),           # 'same', even kernel: asymmetric pad
    ((1, 4, 9, 8), (16, 3, 3), (1, 1), "same", (2, 3), 2),           # 'same' with dilation and groups
    ((1, 4, 9, 8), (16, 3, 5), (1, 1), "valid", (1, 1), 1),          # 'valid'
    ((2, 16, 9, 8), (16, 3, 3), (1, 1), (1, 1), (1, 1), 1),          # NHWC: grad-weight split over pixel chunks
]


def _ids(c):
    return f"x{c[0]}-w{c[1]}-s{c[2]}-p{c[3]}-d{c[4]}-g{c[5]}".replace(" ", "")


def _data(case, dtype, bias=True):
    xs, (OC, KH, KW), stride, padding, dilation, groups = case
    x = rng.standard_normal(xs).astype(NP[dtype])
    w = rng.standard_normal((OC, xs[1] // groups, KH, KW)).astype(NP[dtype])
    b = rng.standard_normal(OC).astype(NP[dtype]) if bias else None
    return x, w, b


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_conv2d_forward_and_backward(dtype, case):
    xs, (OC, KH, KW), stride, padding, dilation, groups = case
    x, w, b = _data(case, dtype)
    x64, w64, b64 = x.astype(np.float64), w.astype(np.float64), b.astype(np.float64)
    kg = (xs[1] // groups) * KH * KW
    y = tt.conv2d(tt.tensor(x), tt.tensor(w), tt.tensor(b), stride, padding, dilation, groups)
    y_ref = ref_conv2d(x64, w64, b64, stride, padding, dilation, groups)
    assert y.dtype is dtype and y.shape == y_ref.shape
    assert_close(y, y_ref, dtype, "accumulate", k=kg)

    g = rng.standard_normal(y_ref.shape).astype(NP[dtype])
    g64 = g.astype(np.float64)
    dx_ref, dw_ref = ref_conv2d_backward(xs, x64, w64, g64, stride, padding, dilation, groups)
    # The reference is the true adjoint: <conv(x), g> == <x, dx> == <w, dw>.
    lhs = np.vdot(ref_conv2d(x64, w64, None, stride, padding, dilation, groups), g64)
    assert np.vdot(x64, dx_ref) == pytest.approx(lhs, rel=1e-12, abs=1e-9)
    assert np.vdot(w64, dw_ref) == pytest.approx(lhs, rel=1e-12, abs=1e-9)

    dx = _ops_conv.conv2d_backward_input(tt.tensor(g), tt.tensor(w), xs, stride, padding, dilation, groups)
    assert dx.dtype is dtype and dx.shape == xs
    assert_close(dx, dx_ref, dtype, "accumulate", k=OC // groups * KH * KW)
    dw = _ops_conv.conv2d_backward_weight(tt.tensor(g), tt.tensor(x), w.shape, stride, padding, dilation,
                                          groups)
    assert dw.dtype is dtype and dw.shape == w.shape
    assert_close(dw, dw_ref, dtype, "accumulate", k=xs[0] * y_ref.shape[2] * y_ref.shape[3])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("case", [CASES[1], CASES[5], CASES[8]], ids=["gemm", "chunks", "direct"])
def test_non_contiguous_operands(dtype, case):
    """Channels-last storage, a transposed-storage weight and a sliced grad_output, read in place."""
    xs, (OC, KH, KW), stride, padding, dilation, groups = case
    x, w, b = _data(case, dtype, bias=False)
    x_cl = tt.tensor(np.ascontiguousarray(x.transpose(0, 2, 3, 1))).permute(0, 3, 1, 2)
    w_t = tt.tensor(np.ascontiguousarray(w.transpose(3, 2, 1, 0))).permute(3, 2, 1, 0)
    assert not x_cl.is_contiguous() and not w_t.is_contiguous()
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    kg = (xs[1] // groups) * KH * KW
    y_ref = ref_conv2d(x64, w64, None, stride, padding, dilation, groups)
    assert_close(tt.conv2d(x_cl, w_t, None, stride, padding, dilation, groups), y_ref, dtype, "accumulate", k=kg)
    big = rng.standard_normal(y_ref.shape[:3] + (2 * y_ref.shape[3],)).astype(NP[dtype])
    g = tt.tensor(big)[..., ::2]
    g64 = big[..., ::2].astype(np.float64)
    dx_ref, dw_ref = ref_conv2d_backward(xs, x64, w64, g64, stride, padding, dilation, groups)
    dx = _ops_conv.conv2d_backward_input(g, w_t, xs, stride, padding, dilation, groups)
    assert_close(dx, dx_ref, dtype, "accumulate", k=OC // groups * KH * KW)
    dw = _ops_conv.conv2d_backward_weight(g, x_cl, w.shape, stride, padding, dilation, groups)
    assert_close(dw, dw_ref, dtype, "accumulate", k=xs[0] * y_ref.shape[2] * y_ref.shape[3])


def test_unbatched_and_empty():
    x = rng.standard_normal((4, 6, 5)).astype(np.float32)
    w = rng.standard_normal((16, 4, 3, 3)).astype(np.float32)
    y = tt.conv2d(tt.tensor(x), tt.tensor(w), padding=1)
    assert y.shape == (16, 6, 5)
    assert_close(y, ref_conv2d(x[None].astype(np.float64), w.astype(np.float64), None, (1, 1), (1, 1), (1, 1), 1)[0],
                 tt.float32, "accumulate", k=36)
    empty = tt.zeros(0, 4, 6, 5)
    assert tt.conv2d(empty, tt.tensor(w)).shape == (0, 16, 4, 3)
    dw = _ops_conv.conv2d_backward_weight(tt.zeros(0, 16, 4, 3), empty, w.shape)
    np.testing.assert_array_equal(dw.numpy(), np.zeros(w.shape, np.float32))  # an empty batch contributes nothing
    assert _ops_conv.conv2d_backward_input(tt.zeros(0, 16, 4, 3), tt.tensor(w), (0, 4, 6, 5)).shape == (0, 4, 6, 5)


# ----- bad input: clear errors before any launch --------------------------------------------------
def test_bad_input(no_launch):
    x, w = tt.zeros(2, 3, 9, 9), tt.zeros(8, 4, 3, 3)
    with pytest.raises(RuntimeError, match=r"groups=1, weight of size \[8, 4, 3, 3\], expected input\[2, 3, 9, 9\] "
                                           r"to have 4 channels, but got 3 channels"):
        tt.conv2d(x, w)
    with pytest.raises(RuntimeError, match=r"groups=3, expected weight to be divisible by 3 at dimension 0"):
        tt.conv2d(tt.zeros(2, 6, 9, 9), tt.zeros(8, 2, 3, 3), groups=3)
    with pytest.raises(RuntimeError, match=r"Calculated padded input size per channel: \(2 x 2\)\. Kernel size: "
                                           r"\(3 x 3\)"):
        tt.conv2d(tt.zeros(1, 1, 2, 2), tt.zeros(1, 1, 3, 3))
    with pytest.raises(RuntimeError, match=r"padded input size per channel: \(5 x 5\)\. Kernel size: \(7 x 7\)"):
        tt.conv2d(tt.zeros(1, 1, 5, 5), tt.zeros(1, 1, 3, 3), dilation=3)
    with pytest.raises(RuntimeError, match="non-positive stride is not supported"):
        tt.conv2d(tt.zeros(1, 1, 5, 5), tt.zeros(1, 1, 3, 3), stride=0)
    with pytest.raises(RuntimeError, match="negative padding is not supported"):
        tt.conv2d(tt.zeros(1, 1, 5, 5), tt.zeros(1, 1, 3, 3), padding=(1, -1))
    with pytest.raises(RuntimeError, match="padding='same' is not supported for strided convolutions"):
        tt.conv2d(tt.zeros(1, 1, 5, 5), tt.zeros(1, 1, 3, 3), stride=2, padding="same")
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        tt.conv2d(tt.zeros(1, 1, 5, 5), tt.zeros(1, 1, 3, 3), padding="full")
    with pytest.raises(RuntimeError, match=r"input type \(float32\) and weight type \(float16\) should be the same"):
        tt.conv2d(tt.zeros(1, 1, 5, 5), tt.zeros(1, 1, 3, 3, dtype=tt.float16))
    with pytest.raises(RuntimeError, match=r"floating-point input.*int64"):
        tt.conv2d(tt.zeros(1, 1, 5, 5, dtype=tt.int64), tt.zeros(1, 1, 3, 3, dtype=tt.int64))
    with pytest.raises(RuntimeError, match=r"bias must have shape \[8\]"):
        tt.conv2d(tt.zeros(2, 4, 9, 9), w, tt.zeros(7))
    with pytest.raises(RuntimeError, match="Expected 3D \\(unbatched\\) or 4D \\(batched\\) input"):
        tt.conv2d(tt.zeros(9, 9), w)
    with pytest.raises(TypeError, match=r"stride must be an int or a pair of ints, got \(1, 2, 3\)"):
        tt.conv2d(tt.zeros(1, 1, 5, 5), tt.zeros(1, 1, 3, 3), stride=(1, 2, 3))
    with pytest.raises(RuntimeError, match=r"grad_output has shape \[2, 8, 9, 9\] but the convolution's output has "
                                           r"shape \[2, 8, 7, 7\]"):
        _ops_conv.conv2d_backward_input(tt.zeros(2, 8, 9, 9), w, (2, 4, 9, 9))
    with pytest.raises(RuntimeError, match=r"grad_output type \(float32\) and input type \(float64\)"):
        _ops_conv.conv2d_backward_weight(tt.zeros(2, 8, 7, 7), tt.zeros(2, 4, 9, 9, dtype=tt.float64), w.shape)



def test_empty_kernel_and_bad_module_arguments_raise():
    """A kernel of size 0 once made a map of zeros (Conv2d(1, 1, 0) on 3x3 gave 4x4) instead of raising."""
    x = tt.zeros(1, 1, 3, 3)
    with pytest.raises(RuntimeError, match="kernel size should be greater than zero, but got kernel_height: 0 "
                                           "kernel_width: 0"):
        tt.nn.Conv2d(1, 1, 0)(x)
    with pytest.raises(ValueError, match="groups must be a positive integer"):
        tt.nn.Conv2d(2, 2, 3, groups=0)
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        tt.nn.Conv2d(1, 1, 3, padding="full")
    with pytest.raises(ValueError, match="padding='same' is not supported for strided convolutions"):
        tt.nn.Conv2d(1, 1, 3, stride=(1, 2), padding="same")


def test_empty_kernel_raises_before_any_launch(no_launch):
    x = tt.zeros(1, 1, 3, 3)
    with pytest.raises(RuntimeError, match="kernel_height: 0 kernel_width: 2"):
        tt.conv2d(x, tt.zeros(1, 1, 0, 2))
    with pytest.raises(RuntimeError, match="kernel_height: 0 kernel_width: 0"):
        _ops_conv.conv2d_backward_weight(tt.zeros(1, 1, 4, 4), x, (1, 1, 0, 0))
    with pytest.raises(RuntimeError, match=r"Given groups=1, expected weight to be at least 1 at dimension 0, but got "
                                           r"weight of size \[0, 1, 1, 1\] instead"):
        tt.conv2d(x, tt.zeros(0, 1, 1, 1))
    with pytest.raises(RuntimeError, match="non-positive dilation is not supported"):
        tt.conv2d(x, tt.zeros(1, 1, 1, 1), dilation=0)
    with pytest.raises(RuntimeError, match="non-positive groups is not supported"):
        tt.conv2d(x, tt.zeros(1, 1, 1, 1), groups=0)


# ----- derivatives (fast mode: v^T J u, one backward per check) ------------------------------
CONVS = {
    "plain": dict(), "stride_pad": dict(stride=2, padding=1), "dilation": dict(dilation=2, padding=2),
    "groups": dict(groups=2, padding=1), "depthwise": dict(groups=4, stride=(1, 2)),
    "asym": dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2)),
}


@pytest.mark.parametrize("name", sorted(CONVS))
def test_conv2d_gradcheck(name):
    kw = CONVS[name]
    g = kw.get("groups", 1)
    x, w, b = leaf(2, 4, 6, 5), leaf(4, 4 // g, 3, 3), leaf(4)
    assert gradcheck(lambda a, ww, bb: tt.conv2d(a, ww, bb, **kw), (x, w, b), fast_mode=True)


def test_conv2d_full_jacobian_small_and_noncontiguous_and_unbatched():
    # the full Jacobian once, on a tiny case, besides the projections above
    assert gradcheck(lambda a, ww: tt.conv2d(a, ww, stride=2, padding=1), (leaf(1, 1, 3, 3), leaf(2, 1, 2, 2)))
    x = noncontig(5, 4, 2, 1).permute(3, 2, 1, 0)  # (1, 2, 4, 5) non-contiguous
    assert gradcheck(lambda a, ww: tt.conv2d(a, ww, padding=1), (x, leaf(3, 2, 3, 3)), fast_mode=True)
    assert gradcheck(lambda a, ww: tt.conv2d(a, ww), (leaf(2, 4, 4), leaf(3, 2, 2, 2)), fast_mode=True)


def test_conv_double_backward_raises():
    x, w = leaf(1, 1, 3, 3), leaf(1, 1, 2, 2)
    (g,) = tt.autograd.grad(tt.conv2d(x, w).sum(), x, create_graph=False)
    with pytest.raises(NotImplementedError, match="double backward"):
        tt.autograd.grad(tt.conv2d(x, w).sum(), x, create_graph=True)


# ----- conv_transpose2d: conv2d's grad-input kernel used as a layer ----------------------------------
def ref_conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation):
    """Scatter each input pixel through each tap into a full output, then crop the padding: shares
    no index math with the kernels (nor with ref_conv2d_backward)."""
    N, C, H, W = x.shape
    _, Cgo, KH, KW = w.shape
    out = [(n - 1) * s - 2 * p + d * (k - 1) + o + 1
           for n, s, p, d, k, o in zip((H, W), stride, padding, dilation, (KH, KW), output_padding)]
    full = [max((n - 1) * s + d * (k - 1) + 1, p + o) for n, s, d, k, p, o in zip((H, W), stride, dilation, (KH, KW),
                                                                                  padding, out)]
    y = np.zeros((N, groups, Cgo, *full))
    xg = x.reshape(N, groups, C // groups, H, W)
    wg = w.reshape(groups, C // groups, Cgo, KH, KW)
    for kh in range(KH):
        for kw in range(KW):
            h0, w0 = kh * dilation[0], kw * dilation[1]
            y[:, :, :, h0: h0 + stride[0] * (H - 1) + 1: stride[0], w0: w0 + stride[1] * (W - 1) + 1: stride[1]] += \
                np.einsum("ngchw,gco->ngohw", xg, wg[:, :, :, kh, kw])
    y = y[:, :, :, padding[0]: padding[0] + out[0], padding[1]: padding[1] + out[1]].reshape(N, groups * Cgo, *out)
    return y if b is None else y + b[None, :, None, None]


# (N, C_in, H, W), (C_out, KH, KW), stride, padding, output_padding, groups, dilation  --  path of the kernel
TCASES = [
    ((2, 4, 5, 6), (18, 3, 3), (1, 1), (0, 0), (0, 0), 1, (1, 1)),   # GEMM (grad-input of a 18->4 conv)
    ((2, 5, 4, 5), (17, 3, 2), (2, 1), (1, 0), (1, 0), 1, (1, 2)),   # stride, padding, output padding, dilation
    ((1, 6, 4, 3), (34, 3, 3), (2, 2), (1, 1), (1, 1), 2, (1, 1)),   # groups
    ((1, 3, 4, 4), (5, 2, 3), (1, 1), (0, 1), (1, 1), 1, (2, 3)),    # output padding >= stride (< dilation)
    ((2, 5, 4, 4), (5, 3, 3), (2, 2), (1, 1), (0, 1), 5, (1, 1)),    # direct: depthwise
    ((1, 16, 3, 3), (16, 1, 1), (1, 1), (0, 0), (0, 0), 1, (1, 1)),  # 1x1
]


def _tids(c):
    return f"x{c[0]}-w{c[1]}-s{c[2]}-p{c[3]}-op{c[4]}-g{c[5]}-d{c[6]}".replace(" ", "")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("case", TCASES, ids=_tids)
def test_conv_transpose2d_forward(dtype, case):
    xs, (OC, KH, KW), stride, padding, output_padding, groups, dilation = case
    x = rng.standard_normal(xs).astype(NP[dtype])
    w = rng.standard_normal((xs[1], OC // groups, KH, KW)).astype(NP[dtype])
    b = rng.standard_normal(OC).astype(NP[dtype])
    x64, w64, b64 = x.astype(np.float64), w.astype(np.float64), b.astype(np.float64)
    y_ref = ref_conv_transpose2d(x64, w64, b64, stride, padding, output_padding, groups, dilation)
    k = xs[1] // groups * KH * KW
    y = tt.conv_transpose2d(tt.tensor(x), tt.tensor(w), tt.tensor(b), stride, padding, output_padding,
                            groups, dilation)
    assert y.dtype is dtype and y.shape == y_ref.shape
    assert_close(y, y_ref, dtype, "accumulate", k=k)
    # the same through nn.functional, strided operands (channels-last input, a sliced weight)
    x_cl = tt.tensor(np.ascontiguousarray(x.transpose(0, 2, 3, 1))).permute(0, 3, 1, 2)
    w_big = np.concatenate([w, w], axis=3)
    y2 = tt.nn.functional.conv_transpose2d(x_cl, tt.tensor(w_big)[..., :KW], None, stride, padding,
                                           output_padding, groups, dilation)
    assert_close(y2, y_ref - b64[None, :, None, None], dtype, "accumulate", k=k)
    # the gradients against float64: dx is conv2d of dy, dw the grad-weight map with the roles swapped;
    # checked by the adjoint identity <convT(x), g> == <x, dx> == <w, dw> (float64, exact up to rounding)
    if dtype is tt.float64:
        xt, wt = tt.tensor(x64, requires_grad=True), tt.tensor(w64, requires_grad=True)
        g = rng.standard_normal(y_ref.shape)
        (tt.conv_transpose2d(xt, wt, None, stride, padding, output_padding, groups, dilation)
         * tt.tensor(g)).sum().backward()
        lhs = np.vdot(y_ref - b64[None, :, None, None], g)
        assert np.vdot(x64, xt.grad.numpy()) == pytest.approx(lhs, rel=1e-12, abs=1e-9)
        assert np.vdot(w64, wt.grad.numpy()) == pytest.approx(lhs, rel=1e-12, abs=1e-9)


TCONVS = {
    "plain": dict(), "stride_pad_outpad": dict(stride=2, padding=1, output_padding=1),
    "groups_dilation": dict(groups=2, dilation=2, padding=1), "outpad_below_dilation": dict(dilation=2, output_padding=1),
}


@pytest.mark.parametrize("name", sorted(TCONVS))
def test_conv_transpose2d_gradcheck(name):
    kw = TCONVS[name]
    g = kw.get("groups", 1)
    x, w, b = leaf(2, 4, 3, 4), leaf(4, 6 // g, 3, 2), leaf(6)
    assert gradcheck(lambda a, ww, bb: tt.conv_transpose2d(a, ww, bb, **kw), (x, w, b), fast_mode=True)
    x = noncontig(4, 3, 2).permute(2, 1, 0)  # unbatched (2, 3, 4), non-contiguous
    assert gradcheck(lambda a, ww: tt.conv_transpose2d(a, ww, None, **kw), (x, leaf(2, 4 // g if g <= 2 else 2, 2, 2)),
                     fast_mode=True)


def test_conv_transpose_unbatched_empty_1d_and_modules():
    x = rng.standard_normal((3, 4, 5))
    w = rng.standard_normal((3, 2, 3, 3))
    y = tt.conv_transpose2d(tt.tensor(x), tt.tensor(w), stride=2)
    assert_close(y, ref_conv_transpose2d(x[None], w, None, (2, 2), (0, 0), (0, 0), 1, (1, 1))[0], tt.float64,
                 "accumulate", k=27)
    assert tt.conv_transpose2d(tt.zeros(0, 3, 4, 5), tt.zeros(3, 2, 3, 3)).shape == (0, 2, 6, 7)
    # 1-D: conv_transpose2d over a height of one
    x1, w1, b1 = rng.standard_normal((2, 4, 7)), rng.standard_normal((4, 3, 3)), rng.standard_normal(6)
    y1 = tt.nn.functional.conv_transpose1d(tt.tensor(x1), tt.tensor(w1), tt.tensor(b1), 2, 1, 1, 2, 1)
    ref1 = ref_conv_transpose2d(x1[:, :, None], w1[:, :, None], b1, (1, 2), (0, 1), (0, 1), 2, (1, 1))[:, :, 0]
    assert y1.shape == (2, 6, 14)
    assert_close(y1, ref1, tt.float64, "accumulate", k=6)
    # modules: torch's parameter shapes, repr, output_size, a learning step's gradients
    m = tt.nn.ConvTranspose2d(16, 33, 3, stride=2)
    assert m.weight.shape == (16, 33, 3, 3) and m.bias.shape == (33,)
    assert repr(m) == "ConvTranspose2d(16, 33, kernel_size=(3, 3), stride=(2, 2))"
    bound = 1 / np.sqrt(33 * 9)  # kaiming_uniform(a=sqrt(5)): fan-in is dim 1 (out_channels / groups) x kernel
    assert np.abs(m.weight.detach().numpy()).max() <= bound and np.abs(m.bias.detach().numpy()).max() <= bound
    xi = tt.randn(2, 16, 5, 5)
    assert m(xi).shape == (2, 33, 11, 11) and m(xi, output_size=[12, 12]).shape == (2, 33, 12, 12)
    assert m(xi, output_size=(2, 33, 12, 11)).shape == (2, 33, 12, 11)
    with pytest.raises(ValueError, match=r"requested an output size of \[20, 20\], but valid sizes range from "
                                         r"\[11, 11\] to \[12, 12\] \(for an input of tritensor.Size\(\[5, 5\]\)\)"):
        m(xi, output_size=[20, 20])
    m1 = tt.nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, bias=False)
    assert repr(m1) == ("ConvTranspose1d(4, 6, kernel_size=(3,), stride=(2,), padding=(1,), output_padding=(1,), "
                        "groups=2, bias=False)")
    assert m1.weight.shape == (4, 3, 3) and m1(tt.randn(4, 7)).shape == (6, 14)
    out = m(xi.requires_grad_())
    out.sum().backward()
    assert xi.grad.shape == xi.shape and m.weight.grad.shape == m.weight.shape
    assert_close(m.bias.grad, np.full(33, 2 * 11 * 11.0), tt.float32, "exact")


def test_conv_transpose_bad_input(no_launch):
    x = tt.zeros(2, 16, 5, 5)
    with pytest.raises(RuntimeError, match=r"Given transposed=1, weight of size \[3, 2, 3, 3\], expected "
                                           r"input\[2, 16, 5, 5\] to have 3 channels, but got 16 channels instead"):
        tt.conv_transpose2d(x, tt.zeros(3, 2, 3, 3))
    with pytest.raises(RuntimeError, match="output padding must be smaller than either stride or dilation, but got "
                                           "output_padding_height: 1 output_padding_width: 1 stride_height: 1"):
        tt.conv_transpose2d(x, tt.zeros(16, 2, 3, 3), output_padding=1)
    with pytest.raises(RuntimeError, match=r"Given input size per channel: \(1 x 1\)\. Calculated output size per "
                                           r"channel: \(-3 x -3\)\. Output size is too small"):
        tt.conv_transpose2d(tt.zeros(1, 1, 1, 1), tt.zeros(1, 1, 3, 3), padding=3)
    with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv_transpose2d"):
        tt.conv_transpose2d(tt.zeros(5, 5), tt.zeros(1, 1, 3, 3))
    with pytest.raises(RuntimeError, match="kernel size should be greater than zero"):
        tt.conv_transpose2d(x, tt.zeros(16, 1, 0, 3))
    with pytest.raises(RuntimeError, match=r"bias must have shape \[4\]"):
        tt.conv_transpose2d(x, tt.zeros(16, 2, 3, 3), tt.zeros(3), groups=2)
    with pytest.raises(RuntimeError, match=r"input type \(float32\) and weight type \(float64\)"):
        tt.conv_transpose2d(x, tt.zeros(16, 2, 3, 3, dtype=tt.float64))
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for ConvTranspose2d'):
        tt.nn.ConvTranspose2d(1, 1, 3, padding_mode="reflect")


# ----- NHWC inside: the repack, the output's layout, the weight cache --------------------------------
from layouts import LAYOUTS, check_layout, make  # noqa: E402
from tritensor.triton_kernels import conv as _k_conv  # noqa: E402
from tritensor.triton_kernels import conv_repack  # noqa: E402

# (N, C, H, W), (OC, KH, KW), stride, padding, dilation, groups: 16 channels a group each side, so
# the NHWC kernels run (a strided, dilated, padded and grouped geometry).
NHWC_CASE = ((2, 32, 6, 7), (32, 3, 3), (2, 1), (1, 1), (1, 2), 2)


def test_nhwc_case_takes_the_nhwc_kernels_and_splits_grad_weight():
    xs, (OC, KH, KW), _, _, _, groups = NHWC_CASE
    assert _k_conv.nhwc(xs[1] // groups, OC // groups)
    assert not _k_conv.nhwc(1, 16) and not _k_conv.nhwc(3, 64)  # depthwise, the stem: read in place
    assert _k_conv.wgrad_split(16, 16, 9, 1, 2 * 9 * 8) > 1  # CASES' last row runs the split-K path


@pytest.mark.parametrize("layout, dtype", [(lay, tt.float32) for lay in LAYOUTS + ("channels_last",)]
                         + [("channels_last", tt.float16), ("channels_last", tt.bfloat16)], ids=str)
def test_nhwc_path_every_layout(layout, dtype):
    """Forward and both backward maps on every input layout (the gradient in the same layout)
    against float64 NumPy; the result comes back in the caller's layout, as torch returns it.
    (Every dtype on NCHW: test_conv2d_forward_and_backward.)"""
    xs, (OC, KH, KW), stride, padding, dilation, groups = NHWC_CASE
    values = lambda shape: rng.standard_normal(shape)  # noqa: E731
    if layout == "channels_last":
        x64 = rng.standard_normal(xs).astype(NP[dtype]).astype(np.float64)
        x = tt.tensor(x64.astype(NP[dtype])).contiguous(memory_format=tt.channels_last)
    else:
        x, x64 = make(xs, dtype, layout, values)
        check_layout(x, layout)
    w64 = rng.standard_normal((OC, xs[1] // groups, KH, KW)).astype(NP[dtype]).astype(np.float64)
    w = tt.tensor(w64.astype(NP[dtype]))
    y = tt.conv2d(x, w, None, stride, padding, dilation, groups)
    y_ref = ref_conv2d(x64, w64, None, stride, padding, dilation, groups)
    assert_close(y, y_ref, dtype, "accumulate", k=xs[1] // groups * KH * KW)
    assert y.is_contiguous(memory_format=tt.channels_last if layout == "channels_last" else tt.contiguous_format)
    g, g64 = make(y_ref.shape, dtype, layout if layout in ("transposed", "sliced") else "contiguous", values)
    if layout == "channels_last":
        g = g.contiguous(memory_format=tt.channels_last)
    dx_ref, dw_ref = ref_conv2d_backward(xs, x64, w64, g64, stride, padding, dilation, groups)
    dx = _ops_conv.conv2d_backward_input(g, w, xs, stride, padding, dilation, groups)
    assert_close(dx, dx_ref, dtype, "accumulate", k=OC // groups * KH * KW)
    dw = _ops_conv.conv2d_backward_weight(g, x, w.shape, stride, padding, dilation, groups)
    assert dw.is_contiguous()
    assert_close(dw, dw_ref, dtype, "accumulate", k=xs[0] * y_ref.shape[2] * y_ref.shape[3])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(2, 24, 7, 7), (1, 16, 14, 14), (3, 40, 4, 4), (0, 16, 3, 3), (2, 16, 1, 5)],
                         ids=lambda s: "x".join(map(str, s)))
def test_repack_kernel_both_ways(dtype, shape):
    """NCHW -> NHWC -> NCHW through the repack kernel, exactly (a copy), at odd and aligned H*W."""
    x, x64 = make(shape, dtype, "contiguous", lambda s: rng.standard_normal(s))
    h = _ops_conv.nhwc(x)
    assert h.is_contiguous(memory_format=tt.channels_last) and h.shape == x.shape
    assert_close(h, x64, dtype, "exact")
    back = tt.empty(*shape, dtype=dtype)
    _ops_conv._restore(back, h)
    assert_close(back, x64, dtype, "exact")


class _Count:
    """Counts the launches of one kernel module (the launch function it imported)."""

    def __init__(self, monkeypatch, module):
        self.n = 0
        real = module.launch

        def counted(*args, **kwargs):
            self.n += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, "launch", counted)


def test_repack_once_per_call_and_none_on_channels_last(monkeypatch):
    xs, (OC, KH, KW), stride, padding, dilation, groups = NHWC_CASE
    x = tt.randn(*xs)
    w = tt.randn(OC, xs[1] // groups, KH, KW)
    tt.conv2d(x, w, None, stride, padding, dilation, groups)  # packs the weight
    repacks = _Count(monkeypatch, conv_repack)
    tt.conv2d(x, w, None, stride, padding, dilation, groups)
    assert repacks.n == 2  # the input in, the output out; the weight's pack is reused
    repacks.n = 0
    y = tt.conv2d(x.contiguous(memory_format=tt.channels_last), w, None, stride, padding, dilation, groups)
    assert repacks.n == 0 and y.is_contiguous(memory_format=tt.channels_last)


@pytest.mark.parametrize("dtype", [tt.float16, tt.float32], ids=str)
def test_pointwise_nchw_runs_in_place(dtype, monkeypatch):
    """A 1x1 stride-1 convolution without bias on NCHW, whose pixel rows are whole 16-byte vectors,
    is one batched GEMM on the NCHW tensors: no repack (it would cost more than the GEMM)."""
    x, x64 = make((2, 16, 2, 4), dtype, "contiguous", lambda s: rng.standard_normal(s))
    w, w64 = make((24, 16, 1, 1), dtype, "contiguous", lambda s: rng.standard_normal(s))
    repacks = _Count(monkeypatch, conv_repack)
    y = tt.conv2d(x, w)
    assert repacks.n == 0 and y.is_contiguous()
    assert_close(y, ref_conv2d(x64, w64, None, (1, 1), (0, 0), (1, 1), 1), dtype, "accumulate", k=16)


def test_weight_cache_follows_versions_data_and_autograd(monkeypatch):
    """The packed weight is reused while the weight is unchanged, and repacked after an in-place
    update (an optimizer's step, under no_grad), a ``.data`` swap, or a new weight; gradients still
    reach the original parameter."""
    xs, (OC, KH, KW), stride, padding, dilation, groups = NHWC_CASE
    x64 = rng.standard_normal(xs)
    x = tt.tensor(x64, requires_grad=True)
    conv = tt.nn.Conv2d(xs[1], OC, (KH, KW), stride, padding, dilation, groups, bias=False).double()
    packs = {"n": 0}
    real = dict(_ops_conv._PACKERS)

    def counting(kind):
        def pack(weight, g):
            packs["n"] += 1
            return real[kind](weight, g)
        return pack

    for kind in real:
        monkeypatch.setitem(_ops_conv._PACKERS, kind, counting(kind))

    def expect(out, weight64):
        assert_close(out.detach(), ref_conv2d(x64, weight64, None, stride, padding, dilation, groups), tt.float64,
                     "accumulate", k=xs[1] // groups * KH * KW)

    w0 = conv.weight.detach().numpy().copy()
    expect(conv(x), w0)
    expect(conv(x), w0)
    with tt.no_grad():
        expect(conv(x), w0)
    assert packs["n"] == 1  # one pack for three calls, with and without grad mode
    out = conv(x)
    g64 = rng.standard_normal(out.shape)
    (out * tt.tensor(g64)).sum().backward()
    dx_ref, dw_ref = ref_conv2d_backward(xs, x64, w0, g64, stride, padding, dilation, groups)
    assert_close(x.grad, dx_ref, tt.float64, "accumulate", k=OC // groups * KH * KW)
    assert_close(conv.weight.grad, dw_ref, tt.float64, "accumulate", k=xs[0] * out.shape[2] * out.shape[3])
    tt.optim.SGD(conv.parameters(), lr=0.1).step()  # in place, under no_grad: the version moves
    w1 = w0 - 0.1 * dw_ref
    expect(conv(x), w1)
    with tt.no_grad():
        conv.weight.mul_(2.0)
    expect(conv(x), 2 * w1)
    w3 = rng.standard_normal(w0.shape)
    conv.weight.data = tt.tensor(w3)  # a new storage, the version counter untouched
    expect(conv(x), w3)
    assert packs["n"] == 5  # the input-grad pack of backward, then one pack per change


def test_weight_cache_keeps_no_dead_weight():
    import gc

    xs, (OC, KH, KW), stride, padding, dilation, groups = NHWC_CASE
    x = tt.randn(*xs)
    gc.collect()  # earlier tests' weights: gone before counting
    before = len(_ops_conv._PACKS)
    w = tt.randn(OC, xs[1] // groups, KH, KW)
    tt.conv2d(x, w, None, stride, padding, dilation, groups)
    assert id(w) in _ops_conv._PACKS and len(_ops_conv._PACKS) == before + 1
    key = id(w)
    del w
    gc.collect()
    assert key not in _ops_conv._PACKS and len(_ops_conv._PACKS) == before  # held by weak reference only
