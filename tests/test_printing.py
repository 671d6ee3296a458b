"""Printing: repr/str with torch's precision, summarisation and sci-mode rules, set_printoptions,
and Tensor.__format__. EXPECTED is what torch 2.13 printed for the same calls (torch's dtype names
replaced by tritensor's)."""
from __future__ import annotations

import numpy as np
import pytest

import tritensor as tt


@pytest.fixture(autouse=True)
def _default_options():
    tt.set_printoptions(profile="default")
    yield
    tt.set_printoptions(profile="default")


@pytest.fixture
def cpu_tensors():
    """EXPECTED is torch's printing of CPU tensors, so the tests that compare with it make their
    tensors on the cpu, also in the device-tensor variant (TRITENSOR_TEST_DEVICE=cuda); how a device
    tensor prints is test_device_tensors_print_their_device's."""
    before = tt.get_default_device()
    tt.set_default_device("cpu")
    yield
    tt.set_default_device(before)


def _mk(a, d=None):
    return tt.tensor(np.array(a), dtype=d)


def _render() -> str:
    mk = _mk
    cases = [
        mk([1.0, 2.5, 3.0]), mk(3.14159265), mk([1., 2., 3.]), mk([1e-5, 1.0]), mk([1e9, 1.0]), mk([0.0, -0.0]),
        mk([float("nan"), float("inf"), -float("inf"), 1.5]), mk([float("nan"), 2.0]), mk([123456.0, 1.0]),
        mk(np.arange(2000, dtype=np.float32).reshape(40, 50) / 7), mk(np.arange(1500)), mk([True, False]),
        mk([1, -22, 333], tt.int32), mk(np.zeros((0, 3), np.float32)), mk(np.zeros(0, np.int64)),
        mk([1.5, 2.25], tt.float16), mk([1.5, 2.25], tt.bfloat16), mk([1.5, 2.25], tt.float64),
        mk(np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 1.5), mk(np.arange(30, dtype=np.float64) * 0.123456),
        mk(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)),
        mk(np.arange(1200, dtype=np.int64).reshape(10, 4, 30)),
        mk([1.0, 2.0], None).requires_grad_(),
        mk(5), mk(np.float32(2e-5)),
    ]
    out = [repr(c) for c in cases]
    out.append(f"{mk(0.123456):.3f}|{mk(7):>4}|{mk(2.5)}")
    try:
        f"{mk([1.0]):.2f}"
    except TypeError as e:
        out.append(f"TypeError {e}")
    tt.set_printoptions(precision=2)
    out.append(str(mk([1.12345, 3.0])))
    tt.set_printoptions(threshold=5)
    out.append(str(tt.arange(10)))
    tt.set_printoptions(sci_mode=True)
    out.append(str(mk([1.5, 2.0])))
    tt.set_printoptions(profile="default")
    out.append(f"{mk([1.12345])} {tt.arange(10)}")
    tt.set_printoptions(edgeitems=0, threshold=3)
    out.append(str(tt.arange(10)))
    tt.set_printoptions(profile="default", linewidth=30)
    out.append(str(mk(np.arange(20, dtype=np.float32) / 3)))
    return "\n".join(out) + "\n"


EXPECTED = 'tensor([1.0000, 2.5000, 3.0000], dtype=tritensor.float64)\ntensor(3.1416, dtype=tritensor.float64)\ntensor([1., 2., 3.], dtype=tritensor.float64)\ntensor([1.0000e-05, 1.0000e+00], dtype=tritensor.float64)\ntensor([1.0000e+09, 1.0000e+00], dtype=tritensor.float64)\ntensor([0., -0.], dtype=tritensor.float64)\ntensor([   nan,    inf,   -inf, 1.5000], dtype=tritensor.float64)\ntensor([nan, 2.], dtype=tritensor.float64)\ntensor([1.2346e+05, 1.0000e+00], dtype=tritensor.float64)\ntensor([[0.0000e+00, 1.4286e-01, 2.8571e-01,  ..., 6.7143e+00, 6.8571e+00,\n         7.0000e+00],\n        [7.1429e+00, 7.2857e+00, 7.4286e+00,  ..., 1.3857e+01, 1.4000e+01,\n         1.4143e+01],\n        [1.4286e+01, 1.4429e+01, 1.4571e+01,  ..., 2.1000e+01, 2.1143e+01,\n         2.1286e+01],\n        ...,\n        [2.6429e+02, 2.6443e+02, 2.6457e+02,  ..., 2.7100e+02, 2.7114e+02,\n         2.7129e+02],\n        [2.7143e+02, 2.7157e+02, 2.7171e+02,  ..., 2.7814e+02, 2.7829e+02,\n         2.7843e+02],\n        [2.7857e+02, 2.7871e+02, 2.7886e+02,  ..., 2.8529e+02, 2.8543e+02,\n         2.8557e+02]])\ntensor([   0,    1,    2,  ..., 1497, 1498, 1499])\ntensor([ True, False])\ntensor([  1, -22, 333], dtype=tritensor.int32)\ntensor([], size=(0, 3))\ntensor([], dtype=tritensor.int64)\ntensor([1.5000, 2.2500], dtype=tritensor.float16)\ntensor([1.5000, 2.2500], dtype=tritensor.bfloat16)\ntensor([1.5000, 2.2500], dtype=tritensor.float64)\ntensor([[[ 0.0000,  1.5000,  3.0000,  4.5000],\n         [ 6.0000,  7.5000,  9.0000, 10.5000],\n         [12.0000, 13.5000, 15.0000, 16.5000]],\n\n        [[18.0000, 19.5000, 21.0000, 22.5000],\n         [24.0000, 25.5000, 27.0000, 28.5000],\n         [30.0000, 31.5000, 33.0000, 34.5000]]])\ntensor([0.0000, 0.1235, 0.2469, 0.3704, 0.4938, 0.6173, 0.7407, 0.8642, 0.9876,\n        1.1111, 1.2346, 1.3580, 1.4815, 1.6049, 1.7284, 1.8518, 1.9753, 2.0988,\n        2.2222, 2.3457, 2.4691, 2.5926, 2.7160, 2.8395, 2.9629, 3.0864, 3.2099,\n        3.3333, 3.4568, 3.5802], dtype=tritensor.float64)\ntensor([[-1.0000, -0.8182, -0.6364, -0.4545],\n        [-0.2727, -0.0909,  0.0909,  0.2727],\n        [ 0.4545,  0.6364,  0.8182,  1.0000]])\ntensor([[[   0,    1,    2,  ...,   27,   28,   29],\n         [  30,   31,   32,  ...,   57,   58,   59],\n         [  60,   61,   62,  ...,   87,   88,   89],\n         [  90,   91,   92,  ...,  117,  118,  119]],\n\n        [[ 120,  121,  122,  ...,  147,  148,  149],\n         [ 150,  151,  152,  ...,  177,  178,  179],\n         [ 180,  181,  182,  ...,  207,  208,  209],\n         [ 210,  211,  212,  ...,  237,  238,  239]],\n\n        [[ 240,  241,  242,  ...,  267,  268,  269],\n         [ 270,  271,  272,  ...,  297,  298,  299],\n         [ 300,  301,  302,  ...,  327,  328,  329],\n         [ 330,  331,  332,  ...,  357,  358,  359]],\n\n        ...,\n\n        [[ 840,  841,  842,  ...,  867,  868,  869],\n         [ 870,  871,  872,  ...,  897,  898,  899],\n         [ 900,  901,  902,  ...,  927,  928,  929],\n         [ 930,  931,  932,  ...,  957,  958,  959]],\n\n        [[ 960,  961,  962,  ...,  987,  988,  989],\n         [ 990,  991,  992,  ..., 1017, 1018, 1019],\n         [1020, 1021, 1022,  ..., 1047, 1048, 1049],\n         [1050, 1051, 1052,  ..., 1077, 1078, 1079]],\n\n        [[1080, 1081, 1082,  ..., 1107, 1108, 1109],\n         [1110, 1111, 1112,  ..., 1137, 1138, 1139],\n         [1140, 1141, 1142,  ..., 1167, 1168, 1169],\n         [1170, 1171, 1172,  ..., 1197, 1198, 1199]]])\ntensor([1., 2.], dtype=tritensor.float64, requires_grad=True)\ntensor(5)\ntensor(2.0000e-05)\n0.123|   7|2.5\nTypeError unsupported format string passed to Tensor.__format__\ntensor([1.12, 3.00], dtype=tritensor.float64)\ntensor([0, 1, 2,  ..., 7, 8, 9])\ntensor([1.50e+00, 2.00e+00], dtype=tritensor.float64)\ntensor([1.1235], dtype=tritensor.float64) tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])\ntensor([...], size=(10,))\ntensor([0.0000, 0.3333,\n        0.6667, 1.0000,\n        1.3333, 1.6667,\n        2.0000, 2.3333,\n        2.6667, 3.0000,\n        3.3333, 3.6667,\n        4.0000, 4.3333,\n        4.6667, 5.0000,\n        5.3333, 5.6667,\n        6.0000, 6.3333])\n'


def test_prints_as_torch_does(cpu_tensors):
    got = _render()
    for g, e in zip(got.split("\n"), EXPECTED.split("\n")):
        assert g == e
    assert got == EXPECTED


def test_format_and_suffixes(cpu_tensors):
    loss = tt.tensor(0.123456)
    assert f"{loss:.4f}" == "0.1235" and f"{tt.tensor(3):03d}" == "003" and format(tt.tensor(True)) == "True"
    with pytest.raises(TypeError, match="unsupported format string passed to Tensor.__format__"):
        f"{tt.ones(2):.2f}"
    assert f"{tt.ones(2)}" == "tensor([1., 1.])"
    y = tt.ones(2, requires_grad=True) * 2
    assert repr(y).startswith("tensor([2., 2.], grad_fn=<")
    assert repr(tt.nn.Parameter(tt.zeros(1))) == "Parameter containing:\ntensor([0.], requires_grad=True)"
    t = tt.arange(6.0).reshape(2, 3).t()  # non-contiguous
    assert repr(t) == "tensor([[0., 3.],\n        [1., 4.],\n        [2., 5.]])"


@pytest.mark.skipif(not tt.cuda.is_available(), reason="needs a CUDA device (GPU mode or the simulated one)")
def test_device_tensors_print_their_device():
    # torch's order: the device comes first among the suffixes; the values are read back from the device
    x = tt.tensor([1.0, 2.5], dtype=tt.float64, device="cuda")
    assert repr(x) == "tensor([1.0000, 2.5000], device='cuda:0', dtype=tritensor.float64)"
    assert repr(tt.ones(2, device="cuda")) == "tensor([1., 1.], device='cuda:0')"
    y = tt.ones(2, device="cuda", requires_grad=True) * 2
    assert repr(y).startswith("tensor([2., 2.], device='cuda:0', grad_fn=<")
    t = tt.arange(6.0, device="cuda").reshape(2, 3).t()  # non-contiguous
    assert repr(t) == "tensor([[0., 3.],\n        [1., 4.],\n        [2., 5.]], device='cuda:0')"
    assert f"{tt.tensor(0.123456, device='cuda'):.4f}" == "0.1235"


def test_printoptions_context_and_errors(cpu_tensors):
    with tt.printoptions(precision=1):
        assert repr(tt.tensor([1.25])) == "tensor([1.2])"
        assert tt.get_printoptions()["precision"] == 1
    assert tt.get_printoptions() == {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80,
                                     "sci_mode": None}
    with pytest.raises(ValueError, match="profile must be one of"):
        tt.set_printoptions(profile="long")
    with pytest.raises(TypeError, match="precision must be a non-negative number"):
        tt.set_printoptions(precision="4")
