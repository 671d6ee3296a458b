"""The fused recurrent cells: the gate math of one LSTM or GRU step, forward and backward.

PyTorch's fused cells (``_thnn_fused_lstm_cell``, ``_thnn_fused_gru_cell`` and their backward,
``aten/src/ATen/native/cuda/RNN.cu``) do the same: the matmuls stay matmuls (``x W_ih^T`` of every
step in one, ``h W_hh^T`` per step), and everything between one step's matmuls and the next is
one elementwise kernel over the (batch, hidden) elements, reading the 4 (LSTM) or 3 (GRU) gate
pre-activations of its element, and writing the new state plus a *workspace* of what the
backward needs (so it recomputes nothing):

  LSTM   i, f, g, o = sigmoid, sigmoid, tanh, sigmoid of (input_gates + hidden_gates [+ biases])
         cy = f * cx + i * g;  hy = o * tanh(cy);  workspace = (i, f, g, o)           (B, 4H)
  GRU    r, z = sigmoid of (input_gates + hidden_gates [+ biases]) in the first two chunks
         n = tanh(in + b_in + r * (hn + b_hn));  hy = n + z * (hx - n)
         workspace = (r, z, n, hx, hn + b_hn)                                          (B, 5H)

Gate layout is PyTorch's: the gate dim holds the chunks one after another (i|f|g|o, r|z|n), so
element (b, j) reads columns j, H + j, 2H + j ... of its row. Every 2-D operand is read through
its own (row, column) strides, so slices and transposed gradients need no copy; outputs are
contiguous. Values are loaded in their dtype, computed in fp32 (fp64 for fp64) and rounded once
on store, the workspace included, as PyTorch's kernels do.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.dtype_policy import FLOAT_COMPUTE_NAME
from ..runtime.launch import launch
from ._common import elementwise_block, grid_1d, linear_index
from .elementwise import _tanh


@triton.jit
def _sigmoid(x):
    """1 / (1 + exp(-x)), PyTorch's fused cells' formula: exp overflows to inf for x < -88 (fp32),
    which gives the right limit, 0."""
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def _gate(ig, hg, b_ih, b_hh, k, row, col, H, ig_r, ig_c, hg_r, hg_c, bi_s, bh_s, mask,
          HAS_BIAS: tl.constexpr, COMPUTE: tl.constexpr):
    """Gate chunk ``k`` at element (row, col), in COMPUTE: (input part, hidden part, input bias,
    hidden bias), the biases 0 without HAS_BIAS. Element (row, col) of chunk k sits at column
    k * H + col of its row."""
    x = tl.load(ig + (row * ig_r + col * ig_c) + k * (H * ig_c), mask=mask, other=0).to(COMPUTE)
    h = tl.load(hg + (row * hg_r + col * hg_c) + k * (H * hg_c), mask=mask, other=0).to(COMPUTE)
    bx = tl.zeros_like(x)
    bh = tl.zeros_like(x)
    if HAS_BIAS:
        bx = tl.load(b_ih + col * bi_s + k * H * bi_s, mask=mask, other=0).to(COMPUTE)
        bh = tl.load(b_hh + col * bh_s + k * H * bh_s, mask=mask, other=0).to(COMPUTE)
    return x, h, bx, bh


@triton.jit
def _gate_sum(ig, hg, b_ih, b_hh, k, row, col, H, ig_r, ig_c, hg_r, hg_c, bi_s, bh_s, mask,
              HAS_BIAS: tl.constexpr, COMPUTE: tl.constexpr):
    """A gate's pre-activation: (input part + hidden part) + (input bias + hidden bias)."""
    x, h, bx, bh = _gate(ig, hg, b_ih, b_hh, k, row, col, H, ig_r, ig_c, hg_r, hg_c, bi_s, bh_s, mask, HAS_BIAS,
                         COMPUTE)
    a = x + h
    if HAS_BIAS:
        a += bx + bh
    return a


@triton.jit
def _lstm_cell_fwd_kernel(ig, hg, cx, b_ih, b_hh, hy, cy, ws, n, H,
                          ig_r, ig_c, hg_r, hg_c, cx_r, cx_c, bi_s, bh_s,
                          HAS_BIAS: tl.constexpr, COMPUTE: tl.constexpr, INT64: tl.constexpr,
                          BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, INT64)
    mask = lin < n
    row = lin // H
    col = lin % H
    a_i = _gate_sum(ig, hg, b_ih, b_hh, 0, row, col, H, ig_r, ig_c, hg_r, hg_c, bi_s, bh_s, mask, HAS_BIAS, COMPUTE)
    a_f = _gate_sum(ig, hg, b_ih, b_hh, 1, row, col, H, ig_r, ig_c, hg_r, hg_c, bi_s, bh_s, mask, HAS_BIAS, COMPUTE)
    a_g = _gate_sum(ig, hg, b_ih, b_hh, 2, row, col, H, ig_r, ig_c, hg_r, hg_c, bi_s, bh_s, mask, HAS_BIAS, COMPUTE)
    a_o = _gate_sum(ig, hg, b_ih, b_hh, 3, row, col, H, ig_r, ig_c, hg_r, hg_c, bi_s, bh_s, mask, HAS_BIAS, COMPUTE)
    i = _sigmoid(a_i)
    f = _sigmoid(a_f)
    g = _tanh(a_g)
    o = _sigmoid(a_o)
    c_prev = tl.load(cx + row * cx_r + col * cx_c, mask=mask, other=0).to(COMPUTE)
    c = f * c_prev + i * g
    h = o * _tanh(c)
    tl.store(hy + lin, h.to(hy.dtype.element_ty), mask=mask)
    tl.store(cy + lin, c.to(cy.dtype.element_ty), mask=mask)
    w = ws + (lin + row * (3 * H))  # row * 4H + col
    tl.store(w, i.to(ws.dtype.element_ty), mask=mask)
    tl.store(w + H, f.to(ws.dtype.element_ty), mask=mask)
    tl.store(w + 2 * H, g.to(ws.dtype.element_ty), mask=mask)
    tl.store(w + 3 * H, o.to(ws.dtype.element_ty), mask=mask)


@triton.jit
def _lstm_cell_bwd_kernel(ghy, gcy, cx, cy, ws, g_gates, g_cx, n, H,
                          ghy_r, ghy_c, gcy_r, gcy_c, cx_r, cx_c,
                          HAS_GHY: tl.constexpr, HAS_GCY: tl.constexpr, COMPUTE: tl.constexpr,
                          INT64: tl.constexpr, BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, INT64)
    mask = lin < n
    row = lin // H
    col = lin % H
    w = ws + (lin + row * (3 * H))  # row * 4H + col
    i = tl.load(w, mask=mask, other=0).to(COMPUTE)
    f = tl.load(w + H, mask=mask, other=0).to(COMPUTE)
    g = tl.load(w + 2 * H, mask=mask, other=0).to(COMPUTE)
    o = tl.load(w + 3 * H, mask=mask, other=0).to(COMPUTE)
    c_prev = tl.load(cx + row * cx_r + col * cx_c, mask=mask, other=0).to(COMPUTE)
    tc = _tanh(tl.load(cy + lin, mask=mask, other=0).to(COMPUTE))
    gh = tl.zeros_like(tc)
    gc = tl.zeros_like(tc)
    if HAS_GHY:
        gh = tl.load(ghy + row * ghy_r + col * ghy_c, mask=mask, other=0).to(COMPUTE)
    if HAS_GCY:
        gc = tl.load(gcy + row * gcy_r + col * gcy_c, mask=mask, other=0).to(COMPUTE)
    d_o = gh * tc * o * (1.0 - o)
    d_c = gh * o * (1.0 - tc * tc) + gc  # the gradient reaching cy, through hy and directly
    d_i = d_c * g * i * (1.0 - i)
    d_f = d_c * c_prev * f * (1.0 - f)
    d_g = d_c * i * (1.0 - g * g)
    out = g_gates + (lin + row * (3 * H))
    tl.store(out, d_i.to(g_gates.dtype.element_ty), mask=mask)
    tl.store(out + H, d_f.to(g_gates.dtype.element_ty), mask=mask)
    tl.store(out + 2 * H, d_g.to(g_gates.dtype.element_ty), mask=mask)
    tl.store(out + 3 * H, d_o.to(g_gates.dtype.element_ty), mask=mask)
    tl.store(g_cx + lin, (d_c * f).to(g_cx.dtype.element_ty), mask=mask)


@triton.jit
def _gru_cell_fwd_kernel(ig, hg, hx, b_ih, b_hh, hy, ws, n, H,
                         ig_r, ig_c, hg_r, hg_c, hx_r, hx_c, bi_s, bh_s,
                         HAS_BIAS: tl.constexpr, COMPUTE: tl.constexpr, INT64: tl.constexpr,
                         BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, INT64)
    mask = lin < n
    row = lin // H
    col = lin % H
    a_r = _gate_sum(ig, hg, b_ih, b_hh, 0, row, col, H, ig_r, ig_c, hg_r, hg_c, bi_s, bh_s, mask, HAS_BIAS, COMPUTE)
    a_z = _gate_sum(ig, hg, b_ih, b_hh, 1, row, col, H, ig_r, ig_c, hg_r, hg_c, bi_s, bh_s, mask, HAS_BIAS, COMPUTE)
    xn, hn, bxn, bhn = _gate(ig, hg, b_ih, b_hh, 2, row, col, H, ig_r, ig_c, hg_r, hg_c, bi_s, bh_s, mask, HAS_BIAS,
                             COMPUTE)
    if HAS_BIAS:  # n = tanh(x_n + b_in + r * (h_n + b_hn)): the two sides stay apart
        xn += bxn
        hn += bhn
    r = _sigmoid(a_r)
    z = _sigmoid(a_z)
    ng = _tanh(xn + r * hn)
    h_prev = tl.load(hx + row * hx_r + col * hx_c, mask=mask, other=0)
    h = ng + z * (h_prev.to(COMPUTE) - ng)
    tl.store(hy + lin, h.to(hy.dtype.element_ty), mask=mask)
    w = ws + (lin + row * (4 * H))  # row * 5H + col
    tl.store(w, r.to(ws.dtype.element_ty), mask=mask)
    tl.store(w + H, z.to(ws.dtype.element_ty), mask=mask)
    tl.store(w + 2 * H, ng.to(ws.dtype.element_ty), mask=mask)
    tl.store(w + 3 * H, h_prev.to(ws.dtype.element_ty), mask=mask)
    tl.store(w + 4 * H, hn.to(ws.dtype.element_ty), mask=mask)


@triton.jit
def _gru_cell_bwd_kernel(ghy, ws, g_ig, g_hg, g_hx, n, H, ghy_r, ghy_c,
                         COMPUTE: tl.constexpr, INT64: tl.constexpr, BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, INT64)
    mask = lin < n
    row = lin // H
    col = lin % H
    w = ws + (lin + row * (4 * H))  # row * 5H + col
    r = tl.load(w, mask=mask, other=0).to(COMPUTE)
    z = tl.load(w + H, mask=mask, other=0).to(COMPUTE)
    ng = tl.load(w + 2 * H, mask=mask, other=0).to(COMPUTE)
    h_prev = tl.load(w + 3 * H, mask=mask, other=0).to(COMPUTE)
    hn = tl.load(w + 4 * H, mask=mask, other=0).to(COMPUTE)
    gh = tl.load(ghy + row * ghy_r + col * ghy_c, mask=mask, other=0).to(COMPUTE)
    d_z = gh * (h_prev - ng) * z * (1.0 - z)
    d_n = gh * (1.0 - z) * (1.0 - ng * ng)  # the gradient of n's pre-activation
    d_r = d_n * hn * r * (1.0 - r)
    gi = g_ig + (lin + row * (2 * H))  # row * 3H + col
    gg = g_hg + (lin + row * (2 * H))
    tl.store(gi, d_r.to(g_ig.dtype.element_ty), mask=mask)
    tl.store(gi + H, d_z.to(g_ig.dtype.element_ty), mask=mask)
    tl.store(gi + 2 * H, d_n.to(g_ig.dtype.element_ty), mask=mask)
    tl.store(gg, d_r.to(g_hg.dtype.element_ty), mask=mask)
    tl.store(gg + H, d_z.to(g_hg.dtype.element_ty), mask=mask)
    tl.store(gg + 2 * H, (d_n * r).to(g_hg.dtype.element_ty), mask=mask)
    tl.store(g_hx + lin, (gh * z).to(g_hx.dtype.element_ty), mask=mask)


def _compute(t):
    return getattr(tl, FLOAT_COMPUTE_NAME[t.dtype.name])


def _needs_int64(*tensors) -> bool:
    """Whether an element offset of any operand (2-D, or a 1-D bias) may pass int32."""
    for t in tensors:
        if t is not None and sum((d - 1) * abs(s) for d, s in zip(t.shape, t.stride()) if d) >= 2**31 - 1:
            return True
    return False


def _strides2(t):
    return tuple(t.stride()) if t is not None else (0, 0)


def _geometry(n: int):
    block = elementwise_block(n)
    return grid_1d(n, block), block


def lstm_cell(hy, cy, ws, input_gates, hidden_gates, cx, input_bias, hidden_bias) -> None:
    """hy, cy (B, H) and ws (B, 4H), contiguous, from the gates (B, 4H) and cx (B, H), read strided;
    the biases (4H,) are both given or both None."""
    B, H = cx.shape
    n = B * H
    if n == 0:
        return
    grid, block = _geometry(n)
    has_bias = input_bias is not None
    launch(_lstm_cell_fwd_kernel, grid, input_gates, hidden_gates, cx,
           input_bias if has_bias else hy, hidden_bias if has_bias else hy, hy, cy, ws, n, H,
           *_strides2(input_gates), *_strides2(hidden_gates), *_strides2(cx),
           input_bias.stride(0) if has_bias else 0, hidden_bias.stride(0) if has_bias else 0,
           HAS_BIAS=has_bias, COMPUTE=_compute(cx),
           INT64=_needs_int64(input_gates, hidden_gates, cx, input_bias, hidden_bias, ws), BLOCK=block)


def lstm_cell_backward(grad_gates, grad_cx, grad_hy, grad_cy, cx, cy, ws) -> None:
    """grad_gates (B, 4H) and grad_cx (B, H), contiguous; ``grad_hy``/``grad_cy`` (either may be
    None: no gradient) and ``cx`` read strided, ``cy`` and ``ws`` contiguous."""
    B, H = cx.shape
    n = B * H
    if n == 0:
        return
    grid, block = _geometry(n)
    launch(_lstm_cell_bwd_kernel, grid, grad_hy if grad_hy is not None else cx, grad_cy if grad_cy is not None else cx,
           cx, cy, ws, grad_gates, grad_cx, n, H, *_strides2(grad_hy), *_strides2(grad_cy), *_strides2(cx),
           HAS_GHY=grad_hy is not None, HAS_GCY=grad_cy is not None, COMPUTE=_compute(cx),
           INT64=_needs_int64(grad_hy, grad_cy, cx, grad_gates), BLOCK=block)


def gru_cell(hy, ws, input_gates, hidden_gates, hx, input_bias, hidden_bias) -> None:
    """hy (B, H) and ws (B, 5H), contiguous, from the gates (B, 3H) and hx (B, H), read strided."""
    B, H = hx.shape
    n = B * H
    if n == 0:
        return
    grid, block = _geometry(n)
    has_bias = input_bias is not None
    launch(_gru_cell_fwd_kernel, grid, input_gates, hidden_gates, hx,
           input_bias if has_bias else hy, hidden_bias if has_bias else hy, hy, ws, n, H,
           *_strides2(input_gates), *_strides2(hidden_gates), *_strides2(hx),
           input_bias.stride(0) if has_bias else 0, hidden_bias.stride(0) if has_bias else 0,
           HAS_BIAS=has_bias, COMPUTE=_compute(hx),
           INT64=_needs_int64(input_gates, hidden_gates, hx, input_bias, hidden_bias, ws), BLOCK=block)


def gru_cell_backward(grad_input_gates, grad_hidden_gates, grad_hx, grad_hy, ws) -> None:
    """The three gradients (contiguous) from grad_hy (B, H, read strided) and the workspace."""
    B, H = grad_hy.shape
    n = B * H
    if n == 0:
        return
    grid, block = _geometry(n)
    launch(_gru_cell_bwd_kernel, grid, grad_hy, ws, grad_input_gates, grad_hidden_gates, grad_hx, n, H,
           *_strides2(grad_hy), COMPUTE=_compute(grad_hy), INT64=_needs_int64(grad_hy, ws), BLOCK=block)
