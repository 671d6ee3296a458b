"""Core entries of the fused recurrent cells ``_thnn_fused_lstm_cell`` and ``_thnn_fused_gru_cell``
(PyTorch's names and signatures), and of their backward, which the derivative
(``autograd/functions/rnn.py``) calls.

A cell's matmuls are not here: the caller computes ``input_gates = x W_ih^T`` (for every step of a
sequence at once, ``nn.LSTM``) and ``hidden_gates = h W_hh^T``; the fused kernel
(``triton_kernels/rnn.py``) does the gate math between them and writes a workspace that the
backward reads instead of recomputing. Checks come first, each naming its argument, before any
kernel runs.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...triton_kernels import rnn as _k
from ..tensor_base import TensorBase
from .reduce import sum as _sum

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor


def _tensor(t, op: str, name: str):
    if not isinstance(t, TensorBase):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(t).__name__}")
    return t


def _check_cell(op: str, chunks: int, input_gates, hidden_gates, state, state_name: str, input_bias, hidden_bias):
    """PyTorch's checkSizes for a fused cell (``chunks`` = 4 for LSTM, 3 for GRU), stricter where
    PyTorch only compares element counts: the state must be (batch, gates / chunks)."""
    ig = _tensor(input_gates, op, "input_gates")
    hg = _tensor(hidden_gates, op, "hidden_gates")
    st = _tensor(state, op, state_name)
    if ig.ndim != 2:
        raise RuntimeError(f"{op}(): expected 'input_gates' to be 2-D (batch, {chunks} * hidden_size), "
                           f"got {ig.ndim}-D of shape {list(ig.shape)}")
    B, G = ig.shape
    if G % chunks:
        raise RuntimeError(f"{op}(): the gate size of 'input_gates' ({G}) must be a multiple of {chunks}")
    if tuple(hg.shape) != (B, G):
        raise RuntimeError(f"{op}(): 'hidden_gates' must have the shape of 'input_gates' {[B, G]}, "
                           f"got {list(hg.shape)}")
    if tuple(st.shape) != (B, G // chunks):
        raise RuntimeError(f"{op}(): expected '{state_name}' of shape {[B, G // chunks]} (batch, hidden_size), "
                           f"got {list(st.shape)}")
    if (input_bias is None) != (hidden_bias is None):
        raise RuntimeError(f"{op}(): 'input_bias' and 'hidden_bias' are given together or not at all, got "
                           f"{'input_bias' if hidden_bias is None else 'hidden_bias'} alone")
    named = [("input_gates", ig), ("hidden_gates", hg), (state_name, st)]
    for name, b in (("input_bias", input_bias), ("hidden_bias", hidden_bias)):
        if b is not None:
            _tensor(b, op, name)
            if tuple(b.shape) != (G,):
                raise RuntimeError(f"{op}(): expected '{name}' of shape [{G}] (the gate size), got {list(b.shape)}")
            named.append((name, b))
    if not ig.dtype.is_floating_point:
        raise RuntimeError(f"{op}(): expected a floating point 'input_gates', got {ig.dtype.name}")
    for name, t in named[1:]:
        if t.dtype != ig.dtype:
            raise RuntimeError(f"{op}(): expected '{name}' to have the dtype of 'input_gates' ({ig.dtype.name}), "
                               f"got {t.dtype.name}")
        if t.device != ig.device:
            raise RuntimeError(f"{op}(): expected all tensors on the same device, got 'input_gates' on {ig.device} "
                               f"and '{name}' on {t.device}")
    return B, G // chunks


def _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None) -> tuple[Tensor, Tensor, Tensor]:
    """One LSTM step's gate math: ``(hy, cy, workspace)`` from the gate pre-activations
    ``input_gates``/``hidden_gates`` (batch, 4 * hidden: i|f|g|o), the cell state ``cx`` and optional
    biases (4 * hidden,); ``workspace`` holds the activated gates for the backward."""
    B, H = _check_cell("_thnn_fused_lstm_cell", 4, input_gates, hidden_gates, cx, "cx", input_bias, hidden_bias)
    dtype, dev = input_gates.dtype, input_gates.device
    hy = TensorBase._empty((B, H), dtype, dev)
    cy = TensorBase._empty((B, H), dtype, dev)
    ws = TensorBase._empty((B, 4 * H), dtype, dev)
    _k.lstm_cell(hy, cy, ws, input_gates, hidden_gates, cx, input_bias, hidden_bias)
    return hy, cy, ws


def _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None) -> tuple[Tensor, Tensor]:
    """One GRU step's gate math: ``(hy, workspace)`` from ``input_gates``/``hidden_gates`` (batch,
    3 * hidden: r|z|n), the hidden state ``hx`` and optional biases (3 * hidden,); ``workspace``
    (batch, 5 * hidden) holds r, z, n, hx and the hidden n gate for the backward."""
    B, H = _check_cell("_thnn_fused_gru_cell", 3, input_gates, hidden_gates, hx, "hx", input_bias, hidden_bias)
    dtype, dev = input_gates.dtype, input_gates.device
    hy = TensorBase._empty((B, H), dtype, dev)
    ws = TensorBase._empty((B, 5 * H), dtype, dev)
    _k.gru_cell(hy, ws, input_gates, hidden_gates, hx, input_bias, hidden_bias)
    return hy, ws


def _check_grad(op: str, name: str, g, shape: tuple, like):
    if g is None:
        return None
    _tensor(g, op, name)
    if tuple(g.shape) != shape:
        raise RuntimeError(f"{op}(): expected '{name}' of shape {list(shape)}, got {list(g.shape)}")
    if g.dtype != like.dtype or g.device != like.device:
        raise RuntimeError(f"{op}(): expected '{name}' as {like.dtype.name} on {like.device}, got {g.dtype.name} "
                           f"on {g.device}")
    return g


def _thnn_fused_lstm_cell_backward_impl(grad_hy, grad_cy, cx, cy, workspace, has_bias: bool):
    """``(grad_gates, grad_cx, grad_bias)`` of :func:`_thnn_fused_lstm_cell` (``grad_gates`` is the
    gradient of both gate inputs; ``grad_bias`` its sum over the batch, None without biases).
    ``grad_hy`` or ``grad_cy`` may be None (no gradient reached that output); both None: all None."""
    op = "_thnn_fused_lstm_cell_backward"
    if grad_hy is None and grad_cy is None:
        return None, None, None
    _tensor(cx, op, "cx")
    shape = tuple(cx.shape)
    _check_grad(op, "cy", cy, shape, cx)
    _check_grad(op, "workspace", workspace, (shape[0], 4 * shape[1]), cx)
    _check_grad(op, "grad_hy", grad_hy, shape, cx)
    _check_grad(op, "grad_cy", grad_cy, shape, cx)
    grad_gates = TensorBase._empty(tuple(workspace.shape), cx.dtype, cx.device)
    grad_cx = TensorBase._empty(shape, cx.dtype, cx.device)
    _k.lstm_cell_backward(grad_gates, grad_cx, grad_hy, grad_cy, cx, cy.contiguous(), workspace.contiguous())
    return grad_gates, grad_cx, (_sum(grad_gates, 0) if has_bias else None)


def _thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias: bool):
    """``(grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias)`` of
    :func:`_thnn_fused_gru_cell` (the bias gradients None without biases)."""
    op = "_thnn_fused_gru_cell_backward"
    _tensor(grad_hy, op, "grad_hy")
    _tensor(workspace, op, "workspace")
    if grad_hy.ndim != 2:
        raise RuntimeError(f"{op}(): expected 'grad_hy' to be 2-D, got {grad_hy.ndim}-D")
    B, H = grad_hy.shape
    _check_grad(op, "workspace", workspace, (B, 5 * H), grad_hy)
    grad_ig = TensorBase._empty((B, 3 * H), grad_hy.dtype, grad_hy.device)
    grad_hg = TensorBase._empty((B, 3 * H), grad_hy.dtype, grad_hy.device)
    grad_hx = TensorBase._empty((B, H), grad_hy.dtype, grad_hy.device)
    _k.gru_cell_backward(grad_ig, grad_hg, grad_hx, grad_hy, workspace.contiguous())
    if not has_bias:
        return grad_ig, grad_hg, grad_hx, None, None
    return grad_ig, grad_hg, grad_hx, _sum(grad_ig, 0), _sum(grad_hg, 0)
