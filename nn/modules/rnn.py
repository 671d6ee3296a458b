"""The recurrent layers ``RNN LSTM GRU``, PyTorch's (parameters, their names, shapes and
initialisation, arguments, checks and error messages) and the cells ``RNNCell LSTMCell GRUCell``
(torch keeps all of them in this file), with the time step both run.

How a layer runs (PyTorch's own recipe for its non-cuDNN path): per layer and direction, the input
projections of *all* time steps are one matmul (``linear`` of the whole sequence with ``W_ih``,
``b_ih``); then each step is the cells' step (``_step``): ``h W_hh^T + b_hh`` (one matmul)
and the gate math, one fused kernel for LSTM and GRU (``_thnn_fused_lstm_cell`` /
``_thnn_fused_gru_cell``, forward and backward: ``triton_kernels/rnn.py``), ``tanh``/``relu`` of
the sum for the plain RNN (as torch's ``rnn_tanh_cell``). An LSTM with ``proj_size`` projects
each step's ``h`` with ``W_hr``. Every op is recorded, so the layers are differentiable (twice, too).

A padded batch and a :class:`~tritensor.nn.utils.rnn.PackedSequence` run the same loop: a padded
batch is a packed one whose batch size is the same at every step. With packed input the batch
shrinks as sequences end (their final state is kept) and, in the reverse direction, grows.
"""
from __future__ import annotations

import math
import numbers
import warnings

from ...amp.autocast_mode import is_autocast_enabled
from ...autograd.grad_mode import no_grad
from ...core import functional as _tf
from ...core.factories import empty, zeros
from ...core.tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


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


_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _run_direction(mode, gates, batch_sizes, offsets, h0, c0, w_hh, b_hh, w_hr, reverse: bool):
    """One layer in one direction over packed steps: ``gates`` holds every step's input projection
    (rows ``offsets[t]`` .. ``+ batch_sizes[t]``). Returns (the steps' outputs in time order, h_n, c_n)."""
    lstm = mode == "LSTM"
    outs = [None] * len(batch_sizes)
    if not reverse:
        h, c, ended = h0, c0, []
        for t, bs in enumerate(batch_sizes):
            if bs < h.shape[0]:  # sequences bs.. have ended: their state is final
                ended.append((h.narrow(0, bs, h.shape[0] - bs), c.narrow(0, bs, c.shape[0] - bs) if lstm else None))
                h, c = h.narrow(0, 0, bs), (c.narrow(0, 0, bs) if lstm else None)
            h, c = _step(mode, gates.narrow(0, offsets[t], bs), h, c, w_hh, b_hh, w_hr)
            outs[t] = h
        if ended:  # the final states in batch order: the running ones, then those that ended, latest first
            h = _tf.cat([h] + [e[0] for e in reversed(ended)], 0)
            c = _tf.cat([c] + [e[1] for e in reversed(ended)], 0) if lstm else None
        return outs, h, c
    n = batch_sizes[-1]
    h, c = h0.narrow(0, 0, n), (c0.narrow(0, 0, n) if lstm else None)
    for t in range(len(batch_sizes) - 1, -1, -1):
        bs = batch_sizes[t]
        if bs > h.shape[0]:  # longer sequences start here (from the end): their initial state joins
            k = h.shape[0]
            h = _tf.cat([h, h0.narrow(0, k, bs - k)], 0)
            c = _tf.cat([c, c0.narrow(0, k, bs - k)], 0) if lstm else None
        h, c = _step(mode, gates.narrow(0, offsets[t], bs), h, c, w_hh, b_hh, w_hr)
        outs[t] = h
    return outs, h, c


def stacked_layers(mode, data, batch_sizes, h0, c0, weights, num_layers, bidirectional, dropout, train):
    """The stacked layers over packed ``data`` (sum(batch_sizes), input_size). ``weights[k]`` is layer-direction
    k's ``(w_ih, w_hh, b_ih, b_hh, w_hr)`` (None where absent); ``h0``/``c0`` are (layers * directions, B, .)
    (``c0`` None but for LSTM). Returns (output, h_n, c_n)."""
    lstm = mode == "LSTM"
    offsets, total = [], 0
    for bs in batch_sizes:
        offsets.append(total)
        total += bs
    num_directions = 2 if bidirectional else 1
    h_n, c_n = [], []
    for layer in range(num_layers):
        outputs = []
        for direction in range(num_directions):
            k = layer * num_directions + direction
            w_ih, w_hh, b_ih, b_hh, w_hr = weights[k]
            gates = F.linear(data, w_ih, b_ih)  # every step's input projection: one matmul
            steps, h, c = _run_direction(mode, gates, batch_sizes, offsets, h0.select(0, k),
                                         c0.select(0, k) if lstm else None, w_hh, b_hh, w_hr, direction == 1)
            outputs.append(_tf.cat(steps, 0))
            h_n.append(h)
            c_n.append(c)
        data = outputs[0] if num_directions == 1 else _tf.cat(outputs, 1)
        if dropout and train and layer < num_layers - 1:
            data = F.dropout(data, dropout, True)
    return data, _tf.stack(h_n, 0), (_tf.stack(c_n, 0) if lstm else None)


def _check_size(name: str, value, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} should be of type int, got: {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be greater than zero" if minimum else
                         f"{name} should be a positive integer or zero to disable projections")


def _check_dtype(input: Tensor, weight: Tensor, fn: str) -> None:
    """PyTorch's check: the input in the weights' dtype, unless autocast decides the dtypes."""
    if input.dtype != weight.dtype and not _autocast(input):
        w, i = f"tritensor.{weight.dtype.name}", f"tritensor.{input.dtype.name}"
        raise ValueError(f"{fn} input dtype ({i}) does not match weight dtype ({w}). Convert input: input.to({w}), "
                         f"or convert model: model.to({i})")


class RNNBase(Module):
    """What ``RNN``, ``LSTM`` and ``GRU`` share: parameters per layer and direction, PyTorch's checks
    and the forward over padded or packed batches. ``mode`` is ``"LSTM"``, ``"GRU"``, ``"RNN_TANH"``
    or ``"RNN_RELU"``."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None):
        super().__init__()
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an element "
                             "being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                          stacklevel=3)
        if not isinstance(bias, bool):
            raise TypeError(f"bias should be of type bool, got: {type(bias).__name__}")
        if not isinstance(batch_first, bool):
            raise TypeError(f"batch_first should be of type bool, got: {type(batch_first).__name__}")
        _check_size("input_size", input_size)
        _check_size("hidden_size", hidden_size)
        _check_size("num_layers", num_layers)
        _check_size("proj_size", proj_size, 0)
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + str(mode))
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        num_directions = 2 if bidirectional else 1
        self._flat_weights_names, self._all_weights = [], []
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input = input_size if layer == 0 else real_hidden * num_directions
                shapes = [("weight_ih_l{}{}", (gate_size, layer_input)), ("weight_hh_l{}{}", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih_l{}{}", (gate_size,)), ("bias_hh_l{}{}", (gate_size,))]
                if proj_size > 0:
                    shapes += [("weight_hr_l{}{}", (proj_size, hidden_size))]
                names = []
                for fmt, shape in shapes:
                    name = fmt.format(layer, "_reverse" if direction == 1 else "")
                    setattr(self, name, Parameter(empty(*shape, device=device, dtype=dtype)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self) -> list:
        """The parameters in PyTorch's flat order (w_ih, w_hh, b_ih, b_hh, w_hr per layer and direction)."""
        return [getattr(self, n, None) for n in self._flat_weights_names]

    @property
    def all_weights(self) -> list:
        """The parameters per layer and direction, each list in torch's order (w_ih, w_hh, b_ih, b_hh, w_hr), as
        torch's ``all_weights``."""
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self) -> None:
        """A no-op, as PyTorch's off cuDNN: the parameters are used where they are."""

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        with no_grad():
            for weight in self.parameters():
                init.uniform_(weight, -stdv, stdv)

    # ----- PyTorch's checks ------------------------------------------------------------------------
    def check_input(self, input: Tensor, batch_sizes) -> None:
        """torch's input check: dtype matching the weights, 3 dims (2 when packed), last dim ``input_size``;
        RuntimeError with torch's message."""
        _check_dtype(input, self._flat_weights[0], "RNN")
        expected = 2 if batch_sizes is not None else 3
        if input.dim() != expected:
            raise RuntimeError(f"input must have {expected} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.size(-1)}")

    def get_expected_hidden_size(self, input: Tensor, batch_sizes) -> tuple:
        """(num_layers * num_directions, batch, proj_size or hidden_size): the hidden state shape torch expects for
        this input."""
        if batch_sizes is not None:
            mini_batch = int(batch_sizes[0])
        else:
            mini_batch = input.size(0) if self.batch_first else input.size(1)
        return (self.num_layers * (2 if self.bidirectional else 1), mini_batch,
                self.proj_size if self.proj_size > 0 else self.hidden_size)

    def check_hidden_size(self, hx: Tensor, expected_hidden_size: tuple,
                          msg: str = "Expected hidden size {}, got {}") -> None:
        """RuntimeError with torch's message (``msg``) when ``hx`` is not ``expected_hidden_size``."""
        if tuple(hx.size()) != tuple(expected_hidden_size):
            raise RuntimeError(msg.format(tuple(expected_hidden_size), list(hx.size())))

    def check_forward_args(self, input: Tensor, hidden, batch_sizes) -> None:
        """The input and hidden-state checks forward runs before any kernel, as torch's."""
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def permute_hidden(self, hx, permutation):
        """Reorder the hidden state's batch dim by ``permutation`` (a packed input's sorted order); None leaves it."""
        return hx if permutation is None else hx.index_select(1, permutation)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # ----- the forward ---------------------------------------------------------------------------
    def _zeros(self, input: Tensor, batch: int, size: int) -> Tensor:
        return zeros(self.num_layers * (2 if self.bidirectional else 1), batch, size, dtype=input.dtype,
                     device=input.device)

    def _check_hx(self, hx, batched: bool) -> None:
        """The dims of hx for a (batched or unbatched) padded input, PyTorch's messages."""
        want = 3 if batched else 2
        kind = "batched 3-D" if batched else "unbatched 2-D"
        if self.mode == "LSTM":
            if hx[0].dim() != want or hx[1].dim() != want:
                raise RuntimeError(f"For {kind} input, hx and cx should also be {want}-D but got "
                                   f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
        elif hx.dim() != want:
            raise RuntimeError(f"For {kind} input, hx should also be {want}-D but got {hx.dim()}-D tensor")

    def _hx_tensors(self, hx):
        if self.mode == "LSTM":
            if not (isinstance(hx, (tuple, list)) and len(hx) == 2 and all(isinstance(t, Tensor) for t in hx)):
                raise TypeError(f"LSTM: argument 'hx' must be a tuple of two Tensors (h_0, c_0), not "
                                f"{type(hx).__name__}")
            return tuple(hx)
        if not isinstance(hx, Tensor):
            raise TypeError(f"{type(self).__name__}: argument 'hx' must be Tensor, not {type(hx).__name__}")
        return hx

    def forward(self, input, hx=None):
        lstm = self.mode == "LSTM"
        name = "RNN" if self.mode.startswith("RNN") else self.mode
        if hx is not None:
            hx = self._hx_tensors(hx)
        if isinstance(input, PackedSequence):
            x, batch_sizes_t, sorted_indices, unsorted_indices = input
            batch_sizes = [int(b) for b in batch_sizes_t.tolist()]
            batched = True
        else:
            if not isinstance(input, Tensor):
                raise TypeError(f"{name}: argument 'input' must be Tensor or PackedSequence, not "
                                f"{type(input).__name__}")
            if input.dim() not in (2, 3):
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D"
                                 f"{' tensor' if name == 'RNN' else ''} instead")
            batched, batch_dim = input.dim() == 3, (0 if self.batch_first else 1)
            batch_sizes_t = sorted_indices = unsorted_indices = None
            if not batched:
                input = input.unsqueeze(batch_dim)
            if hx is not None:
                self._check_hx(hx, batched)
                if not batched:
                    hx = (hx[0].unsqueeze(1), hx[1].unsqueeze(1)) if lstm else hx.unsqueeze(1)
            x = input
            batch_sizes = [input.shape[batch_dim]] * input.shape[1 - batch_dim]
        if hx is None:
            batch = int(batch_sizes_t[0]) if batch_sizes_t is not None else x.shape[batch_dim]
            out_size = self.proj_size if self.proj_size > 0 else self.hidden_size
            hx = (self._zeros(x, batch, out_size), self._zeros(x, batch, self.hidden_size)) if lstm else \
                self._zeros(x, batch, self.hidden_size)
        self.check_forward_args(x, hx, batch_sizes_t)
        _check_state_dtype(x, hx if lstm else (hx,), name)
        hx = self.permute_hidden(hx, sorted_indices)
        if not batch_sizes:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        if batch_sizes_t is None:  # padded (T, B, I) as packed rows: every step has the whole batch
            steps, batch = len(batch_sizes), batch_sizes[0]
            data = (x.transpose(0, 1) if self.batch_first else x).reshape(steps * batch, self.input_size)
        else:
            data = x
        out, h_n, c_n = self._layers(data, batch_sizes, hx if lstm else (hx, None))
        hidden = self.permute_hidden((h_n, c_n) if lstm else h_n, unsorted_indices)
        if batch_sizes_t is not None:
            return PackedSequence(out, batch_sizes_t, sorted_indices, unsorted_indices), hidden
        out = out.reshape(steps, batch, out.shape[-1])
        if self.batch_first:
            out = out.transpose(0, 1)
        if not batched:
            out = out.squeeze(batch_dim)
            hidden = (hidden[0].squeeze(1), hidden[1].squeeze(1)) if lstm else hidden.squeeze(1)
        return out, hidden

    def _layers(self, data, batch_sizes, state):
        """The stacked layers over packed ``data`` (sum(batch_sizes), input_size): (output, h_n, c_n)."""
        weights = [(p[0], p[1], *((p[2], p[3]) if self.bias else (None, None)), p[-1] if self.proj_size > 0 else None)
                   for p in self.all_weights]
        return stacked_layers(self.mode, data, batch_sizes, state[0], state[1], weights, self.num_layers,
                              self.bidirectional, self.dropout, self.training)


class RNN(RNNBase):
    """Elman RNN: h_t = tanh (or relu) of (x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory, with an optional projection of h (``proj_size``); the state is (h, c)."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input: Tensor, batch_sizes) -> tuple:
        """(num_layers * num_directions, batch, hidden_size): the cell state shape (never projected), as torch."""
        expected = self.get_expected_hidden_size(input, batch_sizes)
        return expected[:2] + (self.hidden_size,)

    def check_forward_args(self, input: Tensor, hidden, batch_sizes) -> None:
        """The input check and both state checks (h0 and c0, with torch's messages) before any kernel."""
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden[0], self.get_expected_hidden_size(input, batch_sizes),
                               "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], self.get_expected_cell_size(input, batch_sizes),
                               "Expected hidden[1] size {}, got {}")

    def permute_hidden(self, hx, permutation):
        """Reorder the batch dim of both h and c by ``permutation``; None leaves them."""
        if permutation is None:
            return hx
        return hx[0].index_select(1, permutation), hx[1].index_select(1, permutation)


class GRU(RNNBase):
    """Gated recurrent unit: r, z gates and the candidate n = tanh(x W_in + b_in + r * (h W_hn + b_hn))."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


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
