"""torch's native recurrent functions at the root: the layers ``lstm gru rnn_tanh rnn_relu`` (each with
its two overloads: a padded ``input`` (T, B, I), or packed ``data`` with its ``batch_sizes``) over a
flat ``params`` list, and the cells ``lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell``.

Why here: they are what ``nn.LSTM``/``GRU``/``RNN`` and the cells run, with the weights passed in
instead of held by a module (torch's modules call ``_VF.lstm`` etc.). So they run the same code,
``nn/modules/rnn.py``'s: ``stacked_layers`` (the layer loop ``RNNBase`` runs: one ``linear`` of the
whole sequence per layer and direction, then per step the hidden matmul and the fused cell kernel)
and ``_step`` for the cells; every op is recorded, so all of them are differentiable.
"""
from __future__ import annotations

import numbers

from ..core.tensor import Tensor
from . import functional as F
from .modules.rnn import _step, stacked_layers

__all__ = ["lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"]


# ----- the layers' two overloads --------------------------------------------------------------------
_INPUT = ("input", "hx", "params", "has_biases", "num_layers", "dropout", "train", "bidirectional", "batch_first")
_DATA = ("data", "batch_sizes", "hx", "params", "has_biases", "num_layers", "dropout", "train", "bidirectional")


def _bind(fn: str, args, kwargs) -> dict:
    """The arguments bound to the overload they fit, as torch's parser picks it: ``(data, batch_sizes, hx,
    params, ...)`` where ``params`` is the fourth argument (or ``data``/``batch_sizes`` are named), else
    ``(input, hx, params, ...)``."""
    packed = "data" in kwargs or "batch_sizes" in kwargs or (len(args) > 3 and isinstance(args[3], (list, tuple)))
    names = _DATA if packed else _INPUT
    if len(args) > len(names):
        raise TypeError(f"{fn}() takes {len(names)} positional arguments but {len(args)} were given")
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        if key not in names:
            raise TypeError(f"{fn}() got an unexpected keyword argument '{key}'")
        if key in bound:
            raise TypeError(f"{fn}() got multiple values for argument '{key}'")
        bound[key] = value
    missing = [n for n in names if n not in bound]
    if missing:
        raise TypeError(f"{fn}() missing required argument '{missing[0]}'")
    bound["packed"] = packed
    return bound


def _flag(b: dict, fn: str, name: str, kind=bool):
    v = b[name]
    ok = isinstance(v, bool) if kind is bool else (isinstance(v, numbers.Integral) and not isinstance(v, bool)) \
        if kind is int else (isinstance(v, numbers.Real) and not isinstance(v, bool))
    if not ok:
        raise TypeError(f"{fn}(): argument '{name}' must be {kind.__name__}, not {type(v).__name__}")
    return kind(v)


def _layers(mode: str, fn: str, args, kwargs):
    b = _bind(fn, args, kwargs)
    lstm = mode == "LSTM"
    has_biases, bidirectional, train = (_flag(b, fn, n) for n in ("has_biases", "bidirectional", "train"))
    num_layers, dropout = _flag(b, fn, "num_layers", int), _flag(b, fn, "dropout", float)
    batch_first = False if b["packed"] else _flag(b, fn, "batch_first")
    x = b["data"] if b["packed"] else b["input"]
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{'data' if b['packed'] else 'input'}' must be Tensor, not "
                        f"{type(x).__name__}")
    hx, params = b["hx"], b["params"]
    if lstm:
        if not (isinstance(hx, (list, tuple)) and all(isinstance(t, Tensor) for t in hx)):
            raise TypeError(f"{fn}(): argument 'hx' must be tuple of Tensors, not {type(hx).__name__}")
        if len(hx) != 2:
            raise RuntimeError("lstm expects two hidden states")
        h0, c0 = hx
    else:
        if not isinstance(hx, Tensor):
            raise TypeError(f"{fn}(): argument 'hx' must be Tensor, not {type(hx).__name__}")
        h0, c0 = hx, None
    if not (isinstance(params, (list, tuple)) and all(isinstance(t, Tensor) for t in params)):
        raise TypeError(f"{fn}(): argument 'params' must be tuple of Tensors, not {type(params).__name__}")
    proj = lstm and h0.ndim == 3 and c0.ndim == 3 and h0.shape[2] != c0.shape[2]
    stride = (4 if has_biases else 2) + (1 if proj else 0)
    num_directions = 2 if bidirectional else 1
    if len(params) % stride:
        raise RuntimeError(f"MatrixRef: ArrayRef size {len(params)} not divisible by stride {stride}")
    if len(params) != stride * num_layers * num_directions:
        raise RuntimeError(f"{fn}(): expected {stride * num_layers * num_directions} parameters for {num_layers} "
                           f"layer(s) x {num_directions} direction(s), got {len(params)}")
    if b["packed"]:
        if x.ndim != 2:
            raise RuntimeError(f"input must have 2 dimensions, got {x.ndim}")
        batch_sizes = [int(v) for v in b["batch_sizes"].tolist()]
        data = x
    else:
        if x.ndim != 3:
            raise RuntimeError(f"input must have 3 dimensions, got {x.ndim}")
        seq = x.transpose(0, 1) if batch_first else x
        batch_sizes = [seq.shape[1]] * seq.shape[0]
        data = seq.reshape(seq.shape[0] * seq.shape[1], seq.shape[2])
    if not batch_sizes:
        raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
    expected = (num_layers * num_directions, batch_sizes[0])
    for name, t in (("hx", h0),) + ((("cx", c0),) if lstm else ()):
        if t.ndim != 3 or tuple(t.shape[:2]) != expected:
            raise RuntimeError(f"{fn}(): {name} should be ({expected[0]}, {expected[1]}, hidden), got "
                               f"{list(t.shape)}")
    weights = []
    for k in range(num_layers * num_directions):
        p = list(params[k * stride:(k + 1) * stride])
        w_ih, w_hh = p[0], p[1]
        b_ih, b_hh = (p[2], p[3]) if has_biases else (None, None)
        weights.append((w_ih, w_hh, b_ih, b_hh, p[-1] if proj else None))
    out, h_n, c_n = stacked_layers(mode, data, batch_sizes, h0, c0, weights, num_layers, bidirectional, dropout,
                                   train)
    if not b["packed"]:
        out = out.reshape(seq.shape[0], seq.shape[1], out.shape[-1])
        if batch_first:
            out = out.transpose(0, 1)
    return (out, h_n, c_n) if lstm else (out, h_n)


def lstm(*args, **kwargs):
    """torch.lstm: ``(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)`` or
    ``(data, batch_sizes, hx, params, has_biases, num_layers, dropout, train, bidirectional)``; ``hx`` is
    ``[h_0, c_0]`` (h_0 narrower than c_0 when ``params`` hold projections). Returns (output, h_n, c_n)."""
    return _layers("LSTM", "lstm", args, kwargs)


def gru(*args, **kwargs):
    """torch.gru, the overloads of :func:`lstm` with one state ``hx``. Returns (output, h_n)."""
    return _layers("GRU", "gru", args, kwargs)


def rnn_tanh(*args, **kwargs):
    """torch.rnn_tanh, the overloads of :func:`gru` for the Elman RNN with tanh. Returns (output, h_n)."""
    return _layers("RNN_TANH", "rnn_tanh", args, kwargs)


def rnn_relu(*args, **kwargs):
    """torch.rnn_relu, the overloads of :func:`gru` for the Elman RNN with relu. Returns (output, h_n)."""
    return _layers("RNN_RELU", "rnn_relu", args, kwargs)


# ----- the cells --------------------------------------------------------------------------------
def _cell(mode: str, fn: str, input, states, w_ih, w_hh, b_ih, b_hh):
    """torch's check_rnn_cell_forward_input/hidden (its messages), then one step."""
    for name, t in (("input", input), ("w_ih", w_ih), ("w_hh", w_hh)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}(): argument '{name}' must be Tensor, not {type(t).__name__}")
    for name, t in (("b_ih", b_ih), ("b_hh", b_hh)):
        if t is not None and not isinstance(t, Tensor):
            raise TypeError(f"{fn}(): argument '{name}' must be Tensor, not {type(t).__name__}")
    if input.ndim != 2:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-max(input.ndim, 1)}, "
                         f"{max(input.ndim, 1) - 1}], but got 1)")
    if input.shape[1] != w_ih.shape[1]:
        raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} expected {w_ih.shape[1]}")
    for i, t in enumerate(states):
        if t.ndim != 2:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-max(t.ndim, 1)}, "
                             f"{max(t.ndim, 1) - 1}], but got 1)")
        if t.shape[0] != input.shape[0]:
            raise RuntimeError(f"Input batch size {input.shape[0]} doesn't match hidden{i} batch size {t.shape[0]}")
        if t.shape[1] != w_hh.shape[1]:
            raise RuntimeError(f"hidden{i} has inconsistent hidden_size: got {t.shape[1]}, expected {w_hh.shape[1]}")
    gates = F.linear(input, w_ih, b_ih)
    return _step(mode, gates, states[0], states[1] if len(states) == 2 else None, w_hh, b_hh)


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """torch.lstm_cell: one LSTM step, ``hx`` = [h, c]; returns (h', c')."""
    if not (isinstance(hx, (list, tuple)) and all(isinstance(t, Tensor) for t in hx)):
        raise TypeError(f"lstm_cell(): argument 'hx' must be tuple of Tensors, not {type(hx).__name__}")
    if len(hx) != 2:
        raise RuntimeError("lstm_cell expects two hidden states")
    return _cell("LSTM", "lstm_cell", input, tuple(hx), w_ih, w_hh, b_ih, b_hh)


def _single(mode: str, fn: str, input, hx, w_ih, w_hh, b_ih, b_hh):
    if not isinstance(hx, Tensor):
        raise TypeError(f"{fn}(): argument 'hx' must be Tensor, not {type(hx).__name__}")
    return _cell(mode, fn, input, (hx,), w_ih, w_hh, b_ih, b_hh)[0]


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """torch.gru_cell: one GRU step; returns h'."""
    return _single("GRU", "gru_cell", input, hx, w_ih, w_hh, b_ih, b_hh)


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """torch.rnn_tanh_cell: ``tanh(input W_ih^T + b_ih + hx W_hh^T + b_hh)``."""
    return _single("RNN_TANH", "rnn_tanh_cell", input, hx, w_ih, w_hh, b_ih, b_hh)


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """torch.rnn_relu_cell: ``relu(input W_ih^T + b_ih + hx W_hh^T + b_hh)``."""
    return _single("RNN_RELU", "rnn_relu_cell", input, hx, w_ih, w_hh, b_ih, b_hh)
