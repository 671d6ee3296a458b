"""The recurrent cells ``RNNCell LSTMCell GRUCell``, PyTorch's (parameters, their names, shapes and
initialisation, arguments, checks and error messages), and the one time step they share with the
layers of ``nn/rnn.py``.

A step is ``h W_hh^T + b_hh`` (one matmul) and the gate math on it and the step's input projection
``x W_ih^T + b_ih``: one fused kernel for LSTM and GRU (``_thnn_fused_lstm_cell`` /
``_thnn_fused_gru_cell``, forward and backward: ``triton_kernels/rnn.py``), ``tanh``/``relu`` of the
sum for the plain RNN (as torch's ``rnn_tanh_cell``). Every op is recorded, so the cells are
differentiable (twice, too).
"""
from __future__ import annotations

import math

from ..amp.autocast_mode import is_autocast_enabled
from ..autograd.grad_mode import no_grad
from ..core import functional as _tf
from ..core.factories import empty, zeros
from ..core.tensor import Tensor
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


# ----- one time step (hidden matmul + gate math), shared by the layers and the cells ---------------
def _step(mode: str, input_gates, h, c, w_hh, b_hh, w_hr=None):
    """``(h', c')`` after one step from the step's input projection ``input_gates`` (b_ih included);
    ``c`` and ``c'`` are None except for LSTM."""
    hidden_gates = F.linear(h, w_hh, b_hh)
    dtype = input_gates.dtype  # the states' dtype but under autocast (fp32 states, low-precision gates)
    if mode == "LSTM":
        hy, cy, _ = _tf._thnn_fused_lstm_cell(input_gates, hidden_gates, c if c.dtype == dtype else c.to(dtype))
        return (F.linear(hy, w_hr) if w_hr is not None else hy), cy
    if mode == "GRU":
        return _tf._thnn_fused_gru_cell(input_gates, hidden_gates, h if h.dtype == dtype else h.to(dtype))[0], None
    pre = input_gates + hidden_gates
    return (pre.tanh() if mode == "RNN_TANH" else pre.relu()), None


def _autocast(input: Tensor) -> bool:
    return is_autocast_enabled("cuda" if input.is_cuda else "cpu")


def _check_state_dtype(input: Tensor, states, fn: str) -> None:
    """The states in the input's dtype (PyTorch fails later, in a matmul); under autocast the
    layers cast them to the gates' dtype."""
    for t in states:
        if t.dtype != input.dtype and not _autocast(input):
            raise RuntimeError(f"{fn}: argument 'hx' must have the input's dtype ({input.dtype.name}), got "
                               f"{t.dtype.name}")


class RNNCellBase(Module):
    """What the cells share: ``weight_ih`` (chunks * hidden, input), ``weight_hh`` (chunks * hidden,
    hidden), ``bias_ih``/``bias_hh``, all U(-1/sqrt(hidden), 1/sqrt(hidden)), and PyTorch's checks."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = Parameter(empty(num_chunks * hidden_size, input_size, device=device, dtype=dtype))
        self.weight_hh = Parameter(empty(num_chunks * hidden_size, hidden_size, device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, device=device, dtype=dtype))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        with no_grad():
            for weight in self.parameters():
                init.uniform_(weight, -stdv, stdv)

    def _prepare(self, input, hx, n_states: int):
        """(batched input, batched states or None, whether the input was batched), after the checks."""
        name = type(self).__name__
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: argument 'input' must be Tensor, not {type(input).__name__}")
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        states = None
        if hx is not None:
            states = tuple(hx) if n_states == 2 and isinstance(hx, (tuple, list)) else (hx,)
            if len(states) != n_states or not all(isinstance(t, Tensor) for t in states):
                raise TypeError(f"{name}: argument 'hx' must be " + ("a tuple of two Tensors (h_0, c_0)"
                                                                     if n_states == 2 else "Tensor"))
            for i, t in enumerate(states):
                label = f"hx[{i}]" if n_states == 2 else "hidden"
                if t.dim() not in (1, 2):
                    raise ValueError(f"{name}: Expected {label} to be 1D or 2D, got {t.dim()}D instead")
                if t.dim() != input.dim():
                    raise RuntimeError(f"{name}: {label} is {t.dim()}-D but input is {input.dim()}-D: batched "
                                       "(2-D) and unbatched (1-D) input take states of their own dims")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
            states = None if states is None else tuple(t.unsqueeze(0) for t in states)
        if input.dtype != self.weight_ih.dtype and not _autocast(input):  # torch: its matmul's RuntimeError
            raise RuntimeError(f"{name}: expected input and weight to have the same dtype, but got: "
                               f"{input.dtype.name} != {self.weight_ih.dtype.name} (cast one with .to())")
        if input.size(1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} expected {self.input_size}")
        if states is None:
            z = zeros(input.size(0), self.hidden_size, dtype=input.dtype, device=input.device)
            states = (z,) * n_states
        _check_state_dtype(input, states, name)
        for i, t in enumerate(states):
            if t.size(0) != input.size(0):
                raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden{i} batch size {t.size(0)}")
            if t.size(1) != self.hidden_size:
                raise RuntimeError(f"hidden{i} has inconsistent hidden_size: got {t.size(1)}, expected "
                                   f"{self.hidden_size}")
        return input, states, batched

    def _run(self, mode: str, input, hx, n_states: int):
        input, states, batched = self._prepare(input, hx, n_states)
        gates = F.linear(input, self.weight_ih, self.bias_ih)
        h, c = _step(mode, gates, states[0], states[1] if n_states == 2 else None, self.weight_hh, self.bias_hh)
        if n_states == 2:
            return (h, c) if batched else (h.squeeze(0), c.squeeze(0))
        return h if batched else h.squeeze(0)


class RNNCell(RNNCellBase):
    """h' = tanh (or relu) of (x W_ih^T + b_ih + h W_hh^T + b_hh)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        return self._run("RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU", input, hx, 1)


class LSTMCell(RNNCellBase):
    """One LSTM step: (h', c') from x and (h, c); the gate math is the fused kernel."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        return self._run("LSTM", input, hx, 2)


class GRUCell(RNNCellBase):
    """One GRU step: h' from x and h; the gate math is the fused kernel."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        return self._run("GRU", input, hx, 1)
