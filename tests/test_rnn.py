"""The fused recurrent cells ``_thnn_fused_lstm_cell`` / ``_thnn_fused_gru_cell`` (triton_kernels/rnn.py,
core/ops/rnn.py) against float64 NumPy of PyTorch's formulas, and their derivative
(autograd/functions/rnn.py) by gradcheck and gradgradcheck.

Covered: fp32/fp64/fp16/bf16 (low precision loaded, computed in fp32, rounded once on store), with
and without biases, strided gate and state operands (column slices, transposed views), one-element
and empty batches, the workspace (what the backward reads), the fused backward kernels against the
NumPy gradients (only hy's gradient, only cy's, both), the recorded backward of create_graph=True
against the fused one, and the argument errors (raised before any kernel runs). The layers built on
these cells are tested in tests/test_nn_rnn.py.
"""
import zlib

import numpy as np
import pytest

import tritensor as tt
from grad_inputs import leaf, noncontig
from tolerances import FLOAT_DTYPES, NP, assert_close
from tritensor.autograd import gradcheck, gradgradcheck

RNG = np.random.default_rng(24)


@pytest.fixture(autouse=True)
def _reseed(request):
    """Each test draws the same data whichever xdist worker runs it, in whatever order."""
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def ref_lstm_cell(ig, hg, cx, bi=None, bh=None, ghy=None, gcy=None):
    """PyTorch's fused LSTM cell in float64: (hy, cy, workspace[, grad_gates, grad_cx])."""
    a = ig + hg + (0 if bi is None else bi + bh)
    H = cx.shape[1]
    i, f, g, o = sigmoid(a[:, :H]), sigmoid(a[:, H:2 * H]), np.tanh(a[:, 2 * H:3 * H]), sigmoid(a[:, 3 * H:])
    cy = f * cx + i * g
    hy = o * np.tanh(cy)
    out = (hy, cy, np.concatenate([i, f, g, o], 1))
    if ghy is None and gcy is None:
        return out
    ghy = np.zeros_like(cx) if ghy is None else ghy
    d_c = ghy * o * (1 - np.tanh(cy) ** 2) + (0 if gcy is None else gcy)
    grad = np.concatenate([d_c * g * i * (1 - i), d_c * cx * f * (1 - f), d_c * i * (1 - g * g),
                           ghy * np.tanh(cy) * o * (1 - o)], 1)
    return out + (grad, d_c * f)


def ref_gru_cell(ig, hg, hx, bi=None, bh=None, ghy=None):
    """PyTorch's fused GRU cell in float64: (hy, workspace[, grad_ig, grad_hg, grad_hx])."""
    H = hx.shape[1]
    if bi is not None:
        ig, hg = ig + bi, hg + bh
    r = sigmoid(ig[:, :H] + hg[:, :H])
    z = sigmoid(ig[:, H:2 * H] + hg[:, H:2 * H])
    hn = hg[:, 2 * H:]
    n = np.tanh(ig[:, 2 * H:] + r * hn)
    hy = n + z * (hx - n)
    out = (hy, np.concatenate([r, z, n, hx, hn], 1))
    if ghy is None:
        return out
    d_n = ghy * (1 - z) * (1 - n * n)
    d_r = d_n * hn * r * (1 - r)
    d_z = ghy * (hx - n) * z * (1 - z)
    return out + (np.concatenate([d_r, d_z, d_n], 1), np.concatenate([d_r, d_z, d_n * r], 1), ghy * z)


def operand(shape, dtype, layout):
    """(tensor, float64 reference of the same rounded values): contiguous, a column slice of a wider
    tensor (row stride > columns, nonzero offset), or a transposed view."""
    a = (RNG.standard_normal(shape) * 1.5).astype(NP[dtype])
    ref = a.astype(np.float64)
    if layout == "contiguous" or len(shape) == 1:
        return tt.tensor(a), ref
    if layout == "sliced":
        wide = np.zeros((shape[0], shape[1] + 3), NP[dtype])
        wide[:, 2:2 + shape[1]] = a
        return tt.tensor(wide)[:, 2:2 + shape[1]], ref
    return tt.tensor(np.ascontiguousarray(a.T)).t(), ref


# every dtype on a plain and a strided case; the other layouts and the edge shapes in fp32 and fp64
CASES = ([(d, "contiguous", (3, 5)) for d in FLOAT_DTYPES] + [(d, "sliced", (4, 16)) for d in FLOAT_DTYPES]
         + [(d, layout, shape) for d in (tt.float32, tt.float64)
            for layout, shape in (("transposed", (3, 5)), ("contiguous", (1, 1)), ("sliced", (0, 3)))])


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("dtype,layout,shape", CASES, ids=lambda v: str(v).replace(" ", ""))
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_fused_cells_against_float64(bias, dtype, layout, shape, cell):
    B, H = shape
    G = (4 if cell == "lstm" else 3) * H
    ig, ig_r = operand((B, G), dtype, layout)
    hg, hg_r = operand((B, G), dtype, "contiguous" if layout == "transposed" else layout)
    st, st_r = operand((B, H), dtype, layout)
    bi, bi_r = operand((G,), dtype, layout) if bias else (None, None)
    bh, bh_r = operand((G,), dtype, layout) if bias else (None, None)
    if cell == "lstm":
        hy, cy, ws = tt._thnn_fused_lstm_cell(ig, hg, st, bi, bh)
        ref_h, ref_c, ref_ws = ref_lstm_cell(ig_r, hg_r, st_r, bi_r, bh_r)
        assert_close(cy, ref_c, dtype, err_msg="cy")
    else:
        hy, ws = tt._thnn_fused_gru_cell(ig, hg, st, bi, bh)
        ref_h, ref_ws = ref_gru_cell(ig_r, hg_r, st_r, bi_r, bh_r)
    assert hy.dtype is dtype and tuple(hy.shape) == (B, H) and hy.is_contiguous()
    assert tuple(ws.shape) == (B, (4 if cell == "lstm" else 5) * H) and ws.dtype is dtype
    assert_close(hy, ref_h, dtype, err_msg="hy")
    assert_close(ws, ref_ws, dtype, err_msg="workspace")


def _grad_of(t, dtype, use):
    return (RNG.standard_normal(t.shape).astype(NP[dtype]) if use else None)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("grads", ["hy", "cy", "both"])
def test_fused_lstm_cell_backward_kernel_against_float64(grads, dtype):
    B, H = 3, 4
    ig, ig_r = operand((B, 4 * H), dtype, "contiguous")
    hg, hg_r = operand((B, 4 * H), dtype, "sliced")
    cx, cx_r = operand((B, H), dtype, "transposed")
    bi, bi_r = operand((4 * H,), dtype, "contiguous")
    bh, bh_r = operand((4 * H,), dtype, "contiguous")
    leaves = [t.requires_grad_() for t in (ig, hg, cx, bi, bh)]
    hy, cy, ws = tt._thnn_fused_lstm_cell(*leaves)
    assert type(hy.grad_fn).__name__ == "ThnnFusedLstmCellBackward0" and not ws.requires_grad
    ghy, gcy = _grad_of(hy, dtype, grads != "cy"), _grad_of(cy, dtype, grads != "hy")
    outs = [o for o, g in ((hy, ghy), (cy, gcy)) if g is not None]
    tt.autograd.backward(outs, [tt.tensor(g) for g in (ghy, gcy) if g is not None])
    *_, ref_gates, ref_gcx = ref_lstm_cell(ig_r, hg_r, cx_r, bi_r, bh_r,
                                           None if ghy is None else ghy.astype(np.float64),
                                           None if gcy is None else gcy.astype(np.float64))
    # the gates' gradient is computed from the workspace, which is rounded to the dtype on store
    profile, k = ("default", None) if dtype in (tt.float32, tt.float64) else ("rounded_terms", 4)
    for leaf_, ref in ((ig, ref_gates), (hg, ref_gates), (cx, ref_gcx)):
        assert_close(leaf_.grad, ref, dtype, profile, k=k)
    for b in (bi, bh):
        assert_close(b.grad, ref_gates.sum(0), dtype, "rounded_terms", k=4 * B)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_fused_gru_cell_backward_kernel_against_float64(dtype):
    B, H = 3, 4
    ig, ig_r = operand((B, 3 * H), dtype, "sliced")
    hg, hg_r = operand((B, 3 * H), dtype, "contiguous")
    hx, hx_r = operand((B, H), dtype, "transposed")
    bi, bi_r = operand((3 * H,), dtype, "contiguous")
    bh, bh_r = operand((3 * H,), dtype, "contiguous")
    leaves = [t.requires_grad_() for t in (ig, hg, hx, bi, bh)]
    hy, ws = tt._thnn_fused_gru_cell(*leaves)
    assert type(hy.grad_fn).__name__ == "ThnnFusedGruCellBackward0" and not ws.requires_grad
    ghy = _grad_of(hy, dtype, True)
    hy.backward(tt.tensor(ghy))
    *_, ref_ig, ref_hg, ref_hx = ref_gru_cell(ig_r, hg_r, hx_r, bi_r, bh_r, ghy.astype(np.float64))
    profile, k = ("default", None) if dtype in (tt.float32, tt.float64) else ("rounded_terms", 4)
    assert_close(ig.grad, ref_ig, dtype, profile, k=k)
    assert_close(hg.grad, ref_hg, dtype, profile, k=k)
    assert_close(hx.grad, ref_hx, dtype, profile, k=k)
    assert_close(bi.grad, ref_ig.sum(0), dtype, "rounded_terms", k=4 * B)
    assert_close(bh.grad, ref_hg.sum(0), dtype, "rounded_terms", k=4 * B)


def test_fused_cells_gradcheck():
    """Full Jacobians for the first derivative; random projections (fast mode) for the rest."""
    lstm, gru = tt._thnn_fused_lstm_cell, tt._thnn_fused_gru_cell
    B, H = 1, 2  # full Jacobians of every input, biases included (the strided paths: fast mode below)
    assert gradcheck(lambda *a: lstm(*a)[:2], (leaf(B, 4 * H), leaf(B, 4 * H), leaf(B, H), leaf(4 * H),
                                              leaf(4 * H)))
    assert gradcheck(lambda *a: gru(*a)[0], (leaf(B, 3 * H), leaf(B, 3 * H), leaf(B, H), leaf(3 * H), leaf(3 * H)))
    B = 2
    assert gradcheck(lambda *a: lstm(*a)[:2], (leaf(B, 4 * H), leaf(B, 4 * H), noncontig(B, H)), fast_mode=True)
    assert gradcheck(lambda *a: gru(*a)[0], (leaf(B, 3 * H), leaf(B, 3 * H), noncontig(B, H)), fast_mode=True)
    # only one of hy, cy used: the other's gradient is absent, not zeros (the kernel skips it)
    args = (leaf(B, 4 * H), leaf(B, 4 * H), leaf(B, H))
    assert gradcheck(lambda *a: lstm(*a)[0], args, fast_mode=True)
    assert gradcheck(lambda *a: lstm(*a)[1], args, fast_mode=True)
    # double backward (the recorded formulas), biases as constants
    bias4, bias3 = (leaf(4 * H).detach(), leaf(4 * H).detach()), (leaf(3 * H).detach(), leaf(3 * H).detach())
    assert gradgradcheck(lambda *a: lstm(*a, *bias4)[:2], args, fast_mode=True)
    assert gradgradcheck(lambda *a: gru(*a, *bias3)[0], (leaf(B, 3 * H), noncontig(B, 3 * H), leaf(B, H)),
                         fast_mode=True)


def test_recorded_backward_matches_the_fused_kernel():
    """create_graph=True takes the recorded formulas; their values are the fused kernel's."""
    B, H = 3, 4
    for cell, chunks in ((tt._thnn_fused_lstm_cell, 4), (tt._thnn_fused_gru_cell, 3)):
        args = (leaf(B, chunks * H), leaf(B, chunks * H), leaf(B, H), leaf(chunks * H), leaf(chunks * H))
        hy = cell(*args)[0]
        g = tt.tensor(RNG.standard_normal((B, H)))
        plain = tt.autograd.grad(hy, args, g, retain_graph=True)
        recorded = tt.autograd.grad(hy, args, g, create_graph=True)
        for p, r in zip(plain, recorded):
            assert p.grad_fn is None and r.grad_fn is not None
            assert_close(p, r.detach().numpy(), tt.float64)


def _err(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_fused_cells_errors(no_launch):
    f32 = tt.float32
    ig, hg, cx = tt.zeros(2, 8), tt.zeros(2, 8), tt.zeros(2, 2)
    lstm, gru = tt._thnn_fused_lstm_cell, tt._thnn_fused_gru_cell
    _err(lambda: lstm(ig.numpy(), hg, cx), TypeError, "argument 'input_gates' must be Tensor")
    _err(lambda: lstm(ig, hg, None), TypeError, "argument 'cx' must be Tensor")
    _err(lambda: lstm(tt.zeros(2, 2, 4), hg, cx), RuntimeError, "'input_gates' to be 2-D")
    _err(lambda: lstm(tt.zeros(2, 6), tt.zeros(2, 6), cx), RuntimeError, "multiple of 4")
    _err(lambda: lstm(ig, tt.zeros(3, 8), cx), RuntimeError, "'hidden_gates' must have the shape")
    _err(lambda: lstm(ig, hg, tt.zeros(2, 3)), RuntimeError, r"expected 'cx' of shape \[2, 2\]")
    _err(lambda: gru(tt.zeros(2, 6), tt.zeros(2, 6), tt.zeros(1, 2)), RuntimeError, "expected 'hx' of shape")
    _err(lambda: lstm(ig, hg, cx, tt.zeros(8)), RuntimeError, "given together")
    _err(lambda: lstm(ig, hg, cx, tt.zeros(8), tt.zeros(4)), RuntimeError, "expected 'hidden_bias' of shape")
    _err(lambda: lstm(ig, hg, cx.double()), RuntimeError, "'cx' to have the dtype of 'input_gates'")
    _err(lambda: lstm(ig.int(), hg.int(), cx.int()), RuntimeError, "floating point 'input_gates'")
    assert ig.dtype is f32
