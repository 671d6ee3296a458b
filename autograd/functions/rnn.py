"""Derivatives of the fused recurrent cells ``_thnn_fused_lstm_cell`` and ``_thnn_fused_gru_cell``
(kernels: ``triton_kernels/rnn.py``; checks: ``core/ops/rnn.py``).

As in PyTorch (``derivatives.yaml``): a plain backward runs the fused backward kernel on the
forward's workspace (``_thnn_fused_lstm_cell_backward_impl``, ``_thnn_fused_gru_cell_backward``);
a backward that must itself be differentiable (``create_graph=True``: grad mode is on while it
runs) computes the same gradients from the saved gate inputs with recorded ops instead
(PyTorch's ``_thnn_differentiable_lstm_cell_backward`` / ``_gru_cell_backward``), so double
backward works. The workspace output is not differentiable.
"""
from __future__ import annotations

from ...core.factories import zeros_like
from ...core.functional import cat
from ...core.ops import rnn as _rnn
from ..function import BuiltinFunction
from ..grad_mode import is_grad_enabled


def _gates(input_gates, hidden_gates, input_bias, hidden_bias, chunks: int):
    """The ``chunks`` pre-activation chunks of input and hidden gates (recorded views and adds)."""
    ig, hg = input_gates, hidden_gates
    if input_bias is not None:
        ig, hg = ig + input_bias, hg + hidden_bias
    return ig.chunk(chunks, 1), hg.chunk(chunks, 1)


def lstm_cell_backward_graph(grad_hy, grad_cy, input_gates, hidden_gates, input_bias, hidden_bias, cx):
    """``(grad_gates, grad_cx)`` of the LSTM cell with recorded ops (differentiable again)."""
    (xi, xf, xg, xo), (hi, hf, hg, ho) = _gates(input_gates, hidden_gates, input_bias, hidden_bias, 4)
    i, f, g, o = (xi + hi).sigmoid(), (xf + hf).sigmoid(), (xg + hg).tanh(), (xo + ho).sigmoid()
    tc = (f * cx + i * g).tanh()
    grad_hy = grad_hy if grad_hy is not None else zeros_like(cx)
    d_c = grad_hy * o * (1 - tc * tc)
    if grad_cy is not None:
        d_c = d_c + grad_cy
    d_o = grad_hy * tc * o * (1 - o)
    parts = [d_c * g * i * (1 - i), d_c * cx * f * (1 - f), d_c * i * (1 - g * g), d_o]
    return cat(parts, 1), d_c * f


def gru_cell_backward_graph(grad_hy, input_gates, hidden_gates, input_bias, hidden_bias, hx):
    """``(grad_input_gates, grad_hidden_gates, grad_hx)`` of the GRU cell with recorded ops."""
    (xr, xz, xn), (hr, hz, hn) = _gates(input_gates, hidden_gates, input_bias, hidden_bias, 3)
    r, z = (xr + hr).sigmoid(), (xz + hz).sigmoid()
    n = (xn + r * hn).tanh()
    d_z = grad_hy * (hx - n) * z * (1 - z)
    d_n = grad_hy * (1 - z) * (1 - n * n)
    d_r = d_n * hn * r * (1 - r)
    return cat([d_r, d_z, d_n], 1), cat([d_r, d_z, d_n * r], 1), grad_hy * z


class ThnnFusedLstmCell(BuiltinFunction):
    """(hy, cy, workspace) = the fused LSTM cell; the node is ``ThnnFusedLstmCellBackward0``, as PyTorch's."""

    @staticmethod
    def forward(ctx, input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
        hy, cy, ws = _rnn._thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias, hidden_bias)
        ctx.set_materialize_grads(False)  # an unused hy or cy gets no zeros: the kernel skips it
        ctx.save_for_backward(input_gates, hidden_gates, cx, input_bias, hidden_bias, cy, ws)
        ctx.mark_non_differentiable(ws)
        return hy, cy, ws

    @staticmethod
    def backward(ctx, grad_hy, grad_cy, _grad_ws):
        ig, hg, cx, b_ih, b_hh, cy, ws = ctx.saved_tensors
        if grad_hy is None and grad_cy is None:
            return None, None, None, None, None
        has_bias = b_ih is not None
        if is_grad_enabled():  # create_graph=True: gradients made of recorded ops
            grad_gates, grad_cx = lstm_cell_backward_graph(grad_hy, grad_cy, ig, hg, b_ih, b_hh, cx)
            grad_bias = grad_gates.sum(0) if has_bias else None
        else:
            grad_gates, grad_cx, grad_bias = _rnn._thnn_fused_lstm_cell_backward_impl(grad_hy, grad_cy, cx, cy, ws,
                                                                                      has_bias)
        needs = ctx.needs_input_grad
        return (grad_gates if needs[0] else None, grad_gates if needs[1] else None, grad_cx if needs[2] else None,
                grad_bias if has_bias and needs[3] else None, grad_bias if has_bias and needs[4] else None)


class ThnnFusedGruCell(BuiltinFunction):
    """(hy, workspace) = the fused GRU cell; the node is ``ThnnFusedGruCellBackward0``, as PyTorch's."""

    @staticmethod
    def forward(ctx, input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
        hy, ws = _rnn._thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias, hidden_bias)
        ctx.save_for_backward(input_gates, hidden_gates, hx, input_bias, hidden_bias, ws)
        ctx.mark_non_differentiable(ws)
        return hy, ws

    @staticmethod
    def backward(ctx, grad_hy, _grad_ws):
        ig, hg, hx, b_ih, b_hh, ws = ctx.saved_tensors
        has_bias = b_ih is not None
        if is_grad_enabled():  # create_graph=True: gradients made of recorded ops
            g_ig, g_hg, g_hx = gru_cell_backward_graph(grad_hy, ig, hg, b_ih, b_hh, hx)
            g_bi, g_bh = (g_ig.sum(0), g_hg.sum(0)) if has_bias else (None, None)
        else:
            g_ig, g_hg, g_hx, g_bi, g_bh = _rnn._thnn_fused_gru_cell_backward(grad_hy, ws, has_bias)
        needs = ctx.needs_input_grad
        return (g_ig if needs[0] else None, g_hg if needs[1] else None, g_hx if needs[2] else None,
                g_bi if has_bias and needs[3] else None, g_bh if has_bias and needs[4] else None)


def _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    return ThnnFusedLstmCell.apply(input_gates, hidden_gates, cx, input_bias, hidden_bias)


def _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    return ThnnFusedGruCell.apply(input_gates, hidden_gates, hx, input_bias, hidden_bias)


RECORD = {"_thnn_fused_lstm_cell": _thnn_fused_lstm_cell, "_thnn_fused_gru_cell": _thnn_fused_gru_cell}
