"""torch's native recurrent functions ``tritensor.lstm gru rnn_tanh rnn_relu`` (both overloads: padded
input and packed data) and the cells ``lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell``
(nn/functional_rnn.py).

The layers run with a module's parameters passed as torch's flat ``params`` list, checked against
tests/test_nn_rnn.py's float64 reference of PyTorch's formulas (itself checked against torch 2.13)
and against the module; the cells against the float64 step over four dtypes, with odd strides, and
by gradcheck; the argument errors with torch's messages, before any kernel runs.
"""
import zlib

import numpy as np
import pytest

import tritensor as tt
from tritensor import nn
from tritensor.autograd import gradcheck
from layouts import make as make_layout
from test_nn_rnn import ref_rnn, ref_step
from tolerances import FLOAT_DTYPES, assert_close

F64 = tt.float64
FN = {"LSTM": tt.lstm, "GRU": tt.gru, "RNN_TANH": tt.rnn_tanh, "RNN_RELU": tt.rnn_relu}
CELL = {"LSTM": tt.lstm_cell, "GRU": tt.gru_cell, "RNN_TANH": tt.rnn_tanh_cell, "RNN_RELU": tt.rnn_relu_cell}


@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def module(mode, **kw):
    cls = {"LSTM": nn.LSTM, "GRU": nn.GRU}.get(mode)
    m = cls(3, 4, **kw) if cls else nn.RNN(3, 4, nonlinearity="tanh" if mode == "RNN_TANH" else "relu", **kw)
    return m.to(F64).requires_grad_(False)


CONFIGS = [("LSTM", dict(num_layers=2, bidirectional=True, proj_size=2)), ("LSTM", dict(bias=False)),
           ("GRU", dict(num_layers=2)), ("RNN_TANH", dict(bidirectional=True, bias=False)), ("RNN_RELU", {})]


@pytest.mark.parametrize("mode,kw", CONFIGS, ids=[f"{m}-{len(k)}" for m, k in CONFIGS])
@pytest.mark.parametrize("batch_first", [False, True])
def test_layers_match_float64_reference(mode, kw, batch_first, rng):
    m = module(mode, **kw)
    L, D = m.num_layers, 2 if m.bidirectional else 1
    x = rng.standard_normal((3, 2, 3))
    h0 = rng.standard_normal((L * D, 2, m.proj_size or 4))
    c0 = rng.standard_normal((L * D, 2, 4))
    r_out, r_h, r_c = ref_rnn(m, x, h0=h0, c0=c0)
    xt = tt.tensor(np.swapaxes(x, 0, 1) if batch_first else x)
    hx = [tt.tensor(h0), tt.tensor(c0)] if mode == "LSTM" else tt.tensor(h0)
    got = FN[mode](xt, hx, m._flat_weights, m.bias, L, 0.0, False, m.bidirectional, batch_first)
    out = got[0].transpose(0, 1) if batch_first else got[0]
    assert_close(out, r_out, F64, err_msg="output")
    assert_close(got[1], r_h, F64, err_msg="h_n")
    if mode == "LSTM":
        assert_close(got[2], r_c, F64, err_msg="c_n")
    # the same by keyword, as torch's parser takes them
    again = FN[mode](input=xt, hx=hx, params=m._flat_weights, has_biases=m.bias, num_layers=L, dropout=0.0,
                     train=False, bidirectional=m.bidirectional, batch_first=batch_first)
    assert_close(again[1], r_h, F64)


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN_TANH"])
def test_packed_data_overload_matches_reference(mode, rng):
    m = module(mode, bidirectional=True)
    x = rng.standard_normal((3, 3, 3))
    lengths = [3, 2, 1]
    h0, c0 = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    r_out, r_h, r_c = ref_rnn(m, x, lengths=lengths, h0=h0, c0=c0)
    packed = nn.utils.rnn.pack_padded_sequence(tt.tensor(x), lengths)
    hx = [tt.tensor(h0), tt.tensor(c0)] if mode == "LSTM" else tt.tensor(h0)
    got = FN[mode](packed.data, packed.batch_sizes, hx, m._flat_weights, True, 1, 0.0, False, True)
    out = nn.utils.rnn.pad_packed_sequence(nn.utils.rnn.PackedSequence(got[0], packed.batch_sizes))[0]
    assert_close(out, r_out, F64, err_msg="output")
    assert_close(got[1], r_h, F64, err_msg="h_n")
    if mode == "LSTM":
        assert_close(got[2], r_c, F64, err_msg="c_n")


def test_dropout_between_layers_only_in_training(rng):
    m = module("GRU", num_layers=2)
    x, h0 = tt.tensor(rng.standard_normal((2, 2, 3))), tt.zeros(2, 2, 4, dtype=F64)
    r_out, r_h, _ = ref_rnn(m, x.numpy(), drop_between=True)
    out, h = tt.gru(x, h0, m._flat_weights, True, 2, 1.0, True, False, False)  # p = 1: layer 2 sees zeros
    assert_close(out, r_out, F64)
    out, h = tt.gru(x, h0, m._flat_weights, True, 2, 1.0, False, False, False)  # eval: no dropout
    assert_close(out, ref_rnn(m, x.numpy())[0], F64)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN_TANH", "RNN_RELU"])
def test_cells_match_float64_step(mode, dtype, rng):
    chunks = {"LSTM": 4, "GRU": 3}.get(mode, 1)
    vals = lambda shape: rng.standard_normal(shape) * 0.5  # noqa: E731
    x, rx = make_layout((3, 3), dtype, "sliced", vals)
    h, rh = make_layout((3, 4), dtype, "transposed", vals)
    c, rc = make_layout((3, 4), dtype, "contiguous", vals)
    w_ih, rw_ih = make_layout((chunks * 4, 3), dtype, "transposed", vals)
    w_hh, rw_hh = make_layout((chunks * 4, 4), dtype, "contiguous", vals)
    b_ih, rb_ih = make_layout((chunks * 4,), dtype, "sliced", vals)
    b_hh, rb_hh = make_layout((chunks * 4,), dtype, "contiguous", vals)
    r_h, r_c = ref_step(mode, rx, rh, rc, rw_ih, rw_hh, rb_ih, rb_hh)
    # fp16/bf16: the gates are products of 3-4 terms rounded to the dtype, then the cell's math
    profile, k = ("rounded_terms", 4) if dtype in (tt.float16, tt.bfloat16) else ("layer", None)
    if mode == "LSTM":
        hy, cy = tt.lstm_cell(x, (h, c), w_ih, w_hh, b_ih, b_hh)
        assert_close(hy, r_h, dtype, profile, k=k)
        assert_close(cy, r_c, dtype, profile, k=k)
    else:
        assert_close(CELL[mode](x, h, w_ih, w_hh, b_ih, b_hh), r_h, dtype, profile, k=k)
    # no biases, and an empty batch
    r_h0, _ = ref_step(mode, rx, rh, rc, rw_ih, rw_hh, None, None)
    got = tt.lstm_cell(x, [h, c], w_ih, w_hh)[0] if mode == "LSTM" else CELL[mode](x, h, w_ih, w_hh)
    assert_close(got, r_h0, dtype, profile, k=k)
    empty = tt.zeros(0, 3, dtype=dtype), tt.zeros(0, 4, dtype=dtype)
    got = tt.lstm_cell(empty[0], [empty[1]] * 2, w_ih, w_hh)[0] if mode == "LSTM" else CELL[mode](*empty, w_ih, w_hh)
    assert tuple(got.shape) == (0, 4)


def test_cells_gradcheck(rng):
    t = lambda *s: tt.tensor(rng.standard_normal(s), requires_grad=True)  # noqa: E731
    x, h, c = t(2, 2), t(2, 3), t(2, 3)
    assert gradcheck(lambda *a: tt.lstm_cell(a[0], (a[1], a[2]), *a[3:]), (x, h, c, t(12, 2), t(12, 3), t(12), t(12)),
                     fast_mode=True)
    assert gradcheck(tt.gru_cell, (x, h, t(9, 2), t(9, 3), t(9), t(9)), fast_mode=True)
    assert gradcheck(tt.rnn_tanh_cell, (x, h, t(3, 2), t(3, 3)), fast_mode=True)
    assert gradcheck(tt.rnn_relu_cell, (x, h, t(3, 2), t(3, 3), t(3)), fast_mode=True)


def test_layer_gradcheck(rng):
    m = module("LSTM")
    x = tt.tensor(rng.standard_normal((2, 1, 3)), requires_grad=True)
    h0, c0 = (tt.tensor(rng.standard_normal((1, 1, 4)), requires_grad=True) for _ in range(2))
    w = m.weight_hh_l0.detach().requires_grad_(True)
    params = [m.weight_ih_l0, w, m.bias_ih_l0, m.bias_hh_l0]
    assert gradcheck(lambda x, h, c, w: tt.lstm(x, [h, c], params[:1] + [w] + params[2:], True, 1, 0.0, False,
                                                False, False), (x, h0, c0, w), fast_mode=True)


def _err(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_errors_are_torch_s_and_come_first(no_launch):
    x, h, c = tt.zeros(2, 3), tt.zeros(2, 4), tt.zeros(2, 4)
    wi, wh = tt.zeros(16, 3), tt.zeros(16, 4)
    _err(lambda: tt.lstm_cell(tt.zeros(2, 5), [h, c], wi, wh), RuntimeError,
         "input has inconsistent input_size: got 5 expected 3")
    _err(lambda: tt.lstm_cell(x, [tt.zeros(3, 4), c], wi, wh), RuntimeError,
         "Input batch size 2 doesn't match hidden0 batch size 3")
    _err(lambda: tt.lstm_cell(x, [tt.zeros(2, 5), c], wi, wh), RuntimeError,
         "hidden0 has inconsistent hidden_size: got 5, expected 4")
    _err(lambda: tt.lstm_cell(x, [h], wi, wh), RuntimeError, "lstm_cell expects two hidden states")
    _err(lambda: tt.gru_cell(x, [h], wi, wh), TypeError, "argument 'hx' must be Tensor")
    _err(lambda: tt.rnn_tanh_cell(tt.zeros(3), tt.zeros(4), tt.zeros(4, 3), tt.zeros(4, 4)), IndexError,
         "Dimension out of range")
    hx = [tt.zeros(1, 2, 4), tt.zeros(1, 2, 4)]
    _err(lambda: tt.lstm(tt.zeros(5, 2, 3), hx, [wi, wh], True, 1, 0.0, False, False, False), RuntimeError,
         "MatrixRef: ArrayRef size 2 not divisible by stride 4")
    _err(lambda: tt.gru(tt.zeros(2, 3), tt.zeros(1, 4), [wi, wh], False, 1, 0.0, False, False, False), RuntimeError,
         "input must have 3 dimensions, got 2")
    _err(lambda: tt.gru(tt.zeros(5, 2, 3), tt.zeros(1, 3, 4), [wi, wh], False, 1, 0.0, False, False, False),
         RuntimeError, r"hx should be \(1, 2, hidden\), got \[1, 3, 4\]")
    _err(lambda: tt.rnn_relu(tt.zeros(5, 2, 3), tt.zeros(1, 2, 4), [wi, wh], 1, 1, 0.0, False, False, False),
         TypeError, "argument 'has_biases' must be bool, not int")
    _err(lambda: tt.rnn_tanh(tt.zeros(5, 2, 3), tt.zeros(1, 2, 4), [wi, wh], False, 1, 0.0, False, False),
         TypeError, "missing required argument 'batch_first'")
