"""``tritensor.nn.grad`` (torch.nn.grad): conv{1,2,3}d_input and conv{1,2,3}d_weight against a
float64 NumPy adjoint of the convolution, written tap by tap over N-d index tuples, so it shares no
index math with the transposed-convolution and backward-weight kernels they run."""
import itertools

import numpy as np
import pytest

import tritensor as tt
from tolerances import FLOAT_DTYPES, NP, assert_close
from layouts import LAYOUTS, make

rng = np.random.default_rng(11)


pytestmark = pytest.mark.usefixtures("ieee_fp32_conv")


def ref_grads(x_shape, w, gy, stride, padding, dilation, groups, x=None):
    """(dX, dW) of y = conv(x, w) for d(loss)/dy = gy: every (output position, tap) pair adds its
    product where the tap lands inside the unpadded input."""
    k = w.ndim - 2
    N, C = x_shape[:2]
    O, Cg = w.shape[:2]
    og = O // groups
    dx = np.zeros(x_shape)
    dw = np.zeros(w.shape)
    for out_pos in itertools.product(*(range(s) for s in gy.shape[2:])):
        for tap in itertools.product(*(range(s) for s in w.shape[2:])):
            pos = tuple(out_pos[d] * stride[d] - padding[d] + tap[d] * dilation[d] for d in range(k))
            if any(p < 0 or p >= x_shape[2 + d] for d, p in enumerate(pos)):
                continue
            for g in range(groups):
                gsl = gy[(slice(None), slice(g * og, (g + 1) * og)) + out_pos]        # (N, og)
                wsl = w[(slice(g * og, (g + 1) * og), slice(None)) + tap]             # (og, Cg)
                dx[(slice(None), slice(g * Cg, (g + 1) * Cg)) + pos] += gsl @ wsl
                if x is not None:
                    xsl = x[(slice(None), slice(g * Cg, (g + 1) * Cg)) + pos]         # (N, Cg)
                    dw[(slice(g * og, (g + 1) * og), slice(None)) + tap] += gsl.T @ xsl
    return dx, dw


def _out(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


# (k, x_shape, w_shape, stride, padding, dilation, groups): odd sizes, strides that leave input
# rows unread (so input_size is more than the smallest the output allows), grouped, dilated
CASES = [
    (1, (2, 3, 7), (4, 3, 3), (2,), (1,), (1,), 1),
    (1, (1, 4, 9), (2, 2, 2), (3,), (0,), (2,), 2),
    (2, (2, 2, 5, 6), (3, 2, 3, 2), (2, 1), (1, 0), (1, 2), 1),
    (2, (1, 4, 7, 5), (4, 2, 2, 3), (3, 2), (0, 1), (1, 1), 2),
    (3, (1, 2, 4, 5, 3), (2, 2, 2, 3, 2), (2, 1, 1), (1, 1, 0), (1, 1, 1), 1),
]
FNS = {1: (tt.nn.grad.conv1d_input, tt.nn.grad.conv1d_weight), 2: (tt.nn.grad.conv2d_input, tt.nn.grad.conv2d_weight),
       3: (tt.nn.grad.conv3d_input, tt.nn.grad.conv3d_weight)}


def _case(case, dtype, layout="contiguous"):
    k, xs, ws, s, p, d, g = case
    ys = (xs[0], ws[0]) + tuple(_out(xs[2 + i], ws[2 + i], s[i], p[i], d[i]) for i in range(k))
    x, xr = make(xs, dtype, layout, lambda sh: rng.standard_normal(sh))
    w, wr = make(ws, dtype, "contiguous", lambda sh: rng.standard_normal(sh))
    gy, gr = make(ys, dtype, layout, lambda sh: rng.standard_normal(sh))
    return x, xr, w, wr, gy, gr


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}d-{c[1]}-{c[2]}-s{c[3]}-g{c[6]}")
def test_input_and_weight_gradients_match_the_adjoint(case, dtype):
    k, xs, ws, s, p, d, g = case
    layout = "transposed" if dtype == tt.float32 else "contiguous"
    x, xr, w, wr, gy, gr = _case(case, dtype, layout)
    dx_ref, dw_ref = ref_grads(xs, wr, gr, s, p, d, g, xr)
    fin, fw = FNS[k]
    taps = int(np.prod(ws[1:]))
    dx = fin(xs, w, gy, s, p, d, g)
    assert dx.shape == xs and dx.dtype == dtype
    assert_close(dx, dx_ref, dtype, "accumulate", k=taps)
    dw = fw(x, ws, gy, s, p, d, g)
    assert dw.shape == ws and dw.dtype == dtype
    assert_close(dw, dw_ref, dtype, "accumulate", k=int(np.prod(gr.shape)) // ws[0])


def test_int_arguments_and_the_default_geometry():
    x, xr, w, wr, gy, gr = _case((2, (1, 2, 4, 4), (3, 2, 2, 2), (1, 1), (0, 0), (1, 1), 1), tt.float64)
    dx_ref, dw_ref = ref_grads(x.shape, wr, gr, (1, 1), (0, 0), (1, 1), 1, xr)
    assert_close(tt.nn.grad.conv2d_input(x.shape, w, gy), dx_ref, tt.float64)
    assert_close(tt.nn.grad.conv2d_weight(x, w.shape, gy), dw_ref, tt.float64)
    x, xr, w, wr, gy, gr = _case((2, (1, 2, 5, 5), (2, 2, 1, 1), (2, 2), (0, 0), (1, 1), 1), tt.float64)
    dx_ref, _ = ref_grads(x.shape, wr, gr, (2, 2), (0, 0), (1, 1), 1)
    assert_close(tt.nn.grad.conv2d_input(x.shape, w, gy, stride=2), dx_ref, tt.float64)


def test_bad_arguments_name_what_is_wrong():
    x = tt.zeros(1, 2, 5)
    w = tt.zeros(3, 2, 2)
    gy = tt.zeros(1, 3, 4)
    with pytest.raises(ValueError, match=r"requested an input grad size of \[9\], but valid sizes range from \[5\]"):
        tt.nn.grad.conv1d_input((1, 2, 9), w, gy)
    with pytest.raises(ValueError, match="input_size must have 3 elements"):
        tt.nn.grad.conv1d_input((2, 5), w, gy)
    with pytest.raises(TypeError, match="'grad_output'"):
        tt.nn.grad.conv1d_input((1, 2, 5), w, np.zeros((1, 3, 4)))
    with pytest.raises(TypeError, match="'stride'"):
        tt.nn.grad.conv1d_weight(x, (3, 2, 2), gy, stride=(1, 1))
    with pytest.raises(RuntimeError, match="expected grad_output of 3 dimensions"):
        tt.nn.grad.conv1d_weight(x, (3, 2, 2), gy[0])
