"""The fused derivatives of the activations (aten's gelu_backward, silu_backward, sigmoid_backward,
tanh_backward, threshold_backward for relu, logit_backward: ``triton_kernels/elementwise.py:
ACTIVATION_BACKWARD``) against float64 NumPy derivatives, over dtypes, layouts, odd and empty shapes
and broadcasting; gradcheck and gradgradcheck in float64 (double backward takes the composite formula);
and one launch per fused backward, counted at the kernel's entry in both modes and as driver launches on
the simulated device."""
import math

import numpy as np
import pytest

import tritensor as tt
from layouts import LAYOUTS, make
from tolerances import FLOAT_DTYPES, assert_close
from tritensor.autograd import gradcheck, gradgradcheck
from tritensor.core.ops import elementwise as core_ew
from tritensor.runtime import mode
from tritensor.triton_kernels import elementwise as kernel_ew

rng = np.random.default_rng(0)
_erf = np.vectorize(math.erf, otypes=[np.float64])
OPS = tuple(kernel_ew.ACTIVATION_BACKWARD)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _d_gelu_tanh(x):
    k = math.sqrt(2 / math.pi)
    t = np.tanh(k * (x + 0.044715 * x ** 3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x)


# forward op -> dL/dx in float64 from (g, saved), saved being the forward's input or output as the kernel op takes it
REFERENCE = {
    "gelu": lambda g, x: g * (0.5 * (1 + _erf(x / math.sqrt(2))) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi)),
    "gelu_tanh": lambda g, x: g * _d_gelu_tanh(x),
    "silu": lambda g, x: g * _sigmoid(x) * (1 + x * (1 - _sigmoid(x))),
    "sigmoid": lambda g, y: g * y * (1 - y),
    "tanh": lambda g, y: g * (1 - y * y),
    "relu": lambda g, y: np.where(y <= 0, 0.0, g),
    "logit": lambda g, x: np.where((x < 0) | (x > 1), np.nan, g / (x * (1 - x))),
}


def _values(op):
    if op == "logit":
        return lambda shape: rng.uniform(0.05, 0.95, size=shape)
    return lambda shape: rng.standard_normal(shape) * 2.5


def _forward(op, x):
    return getattr(x, op)()


def test_every_fused_op_has_a_reference_and_a_derivative_row():
    assert set(REFERENCE) == set(OPS)
    assert len(set(kernel_ew.HIDDEN_BINARY)) == len(OPS)
    for op, (kop, saved) in kernel_ew.ACTIVATION_BACKWARD.items():
        assert kop == op + "_backward" and saved in ("x", "y"), op
        assert kernel_ew.SPEC[op].arity == 1 and kop not in kernel_ew.SPEC


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("op", OPS)
def test_backward_matches_numpy_over_layouts(op, dtype):
    """Through autograd: op(x).backward(g), x and g in every layout; "y" ops read the output as computed."""
    saved_kind = kernel_ew.ACTIVATION_BACKWARD[op][1]
    for layout in LAYOUTS:
        x, x_ref = make((3, 5), dtype, layout, _values(op))
        g, g_ref = make((3, 5), dtype, layout, lambda shape: rng.standard_normal(shape))
        x = x.detach().requires_grad_()
        y = _forward(op, x)
        y.backward(g)
        saved = x_ref if saved_kind == "x" else y.detach().double().cpu().numpy()
        assert x.grad.dtype == dtype and x.grad.shape == (3, 5)
        if op == "gelu_tanh":  # near its zero the two terms cancel: tanh's fp32 error, an ulp of 1, comes
            #                  back scaled by the second term's x (1 + 3 c x^2) k, and by g
            k = float(np.max(np.abs(g_ref * x_ref * (1 + 0.134 * x_ref ** 2)), initial=1.0))
            assert_close(x.grad, REFERENCE[op](g_ref, saved), dtype, "centered", k=k, err_msg=f"{op} {layout}")
        else:
            assert_close(x.grad, REFERENCE[op](g_ref, saved), dtype, err_msg=f"{op} {layout}")


@pytest.mark.parametrize("op", OPS)
def test_odd_and_empty_shapes_and_broadcasting(op):
    vals = _values(op)
    for shape in ((), (0, 3), (1,), (7,)):
        x, x_ref = make(shape, tt.float32, "contiguous", vals)
        g, g_ref = make(shape, tt.float32, "contiguous", lambda s: rng.standard_normal(s))
        got = core_ew.activation_backward(op, g, x)
        assert got.shape == shape and got.dtype == tt.float32
        assert_close(got, REFERENCE[op](g_ref, x_ref), tt.float32, err_msg=f"{op} {shape}")
    # the kernel op broadcasts as aten's does: g (2, 1, 4) against saved (3, 4)
    x, x_ref = make((3, 4), tt.float64, "contiguous", vals)
    g, g_ref = make((2, 1, 4), tt.float64, "contiguous", lambda s: rng.standard_normal(s))
    got = core_ew.activation_backward(op, g, x)
    assert got.shape == (2, 3, 4)
    assert_close(got, REFERENCE[op](g_ref, x_ref), tt.float64)


def test_edge_values_follow_torch():
    g = tt.ones(3)
    # logit has no derivative outside [0, 1]: NaN there (torch's logit_backward)
    assert_close(core_ew.activation_backward("logit", g, tt.tensor([-0.5, 0.5, 1.5])), [np.nan, 4.0, np.nan],
                 tt.float32)
    # relu's is threshold_backward(g, y, 0): the gradient passes where y is NaN, not at y == 0
    assert_close(core_ew.activation_backward("relu", g, tt.tensor([float("nan"), 0.0, 1.0])), [1.0, 0.0, 1.0],
                 tt.float32)
    # large |x|: no overflow to NaN inside the kernel
    big = tt.tensor([-100.0, 100.0])
    for op, want in (("gelu", [0.0, 1.0]), ("gelu_tanh", [0.0, 1.0]), ("silu", [0.0, 1.0])):
        assert_close(core_ew.activation_backward(op, tt.ones(2), big), want, tt.float32, err_msg=op)


def test_integer_operands_are_refused_with_torchs_error():
    i = tt.tensor([1, 2, 3])
    with pytest.raises(NotImplementedError, match=r"\"sigmoid_backward_[a-z]+\" not implemented for 'Long'"):
        core_ew.activation_backward("sigmoid", i, i)
    with pytest.raises(TypeError, match="other"):
        core_ew.activation_backward("gelu", tt.ones(2), "x")


_GRAD_INPUTS = {"logit": lambda: tt.tensor(rng.uniform(0.1, 0.9, (2, 3)), dtype=tt.float64)}


def _leaf(op):
    x = _GRAD_INPUTS.get(op, lambda: tt.tensor(rng.uniform(-2, 2, (3, 2)), dtype=tt.float64).t())()
    if op == "relu":  # away from the kink at 0, where finite differences see half a step
        x = x + (x.abs() < 0.05).to(tt.float64) * 0.2
    return x.detach().requires_grad_()


@pytest.mark.parametrize("op", OPS)
def test_gradcheck_and_gradgradcheck(op):
    """gradcheck runs backward without create_graph (the fused op); gradgradcheck with it (the composite)."""
    x = _leaf(op)
    assert gradcheck(lambda t: _forward(op, t), (x,))
    assert gradgradcheck(lambda t: _forward(op, t), (x,))


def test_inplace_forms_take_the_fused_op():
    for op in ("sigmoid", "tanh", "relu"):
        x = _leaf(op)
        assert gradcheck(lambda t: getattr(t.clone(), op + "_")(), (x,)), op


@pytest.fixture
def kernel_ops(monkeypatch):
    """The ops launched through the elementwise kernel's entry, in order."""
    seen = []
    real = kernel_ew.elementwise

    def counted(op, *args, **kwargs):
        seen.append(op)
        return real(op, *args, **kwargs)

    monkeypatch.setattr(kernel_ew, "elementwise", counted)
    return seen


@pytest.mark.parametrize("op", OPS)
def test_one_launch_per_backward_and_the_composite_under_create_graph(op, kernel_ops):
    x = tt.tensor(_values(op)((4, 3)), dtype=tt.bfloat16).requires_grad_()
    g = tt.tensor(rng.standard_normal((4, 3)), dtype=tt.bfloat16)
    y = _forward(op, x)
    kernel_ops.clear()
    if mode.SIM:
        from tritensor.runtime import sim  # only the simulated device counts driver calls
        with sim.counting() as c:
            (gx,) = tt.autograd.grad(y, x, g)
        assert c["launch"] == 1, dict(c)
    else:
        (gx,) = tt.autograd.grad(y, x, g)
    assert kernel_ops == [kernel_ew.ACTIVATION_BACKWARD[op][0]]
    assert gx.grad_fn is None
    kernel_ops.clear()
    (gx2,) = tt.autograd.grad(_forward(op, x), x, g, create_graph=True)
    assert len(kernel_ops) >= 2 and kernel_ew.ACTIVATION_BACKWARD[op][0] not in kernel_ops, kernel_ops
    assert gx2.grad_fn is not None or op == "relu"  # relu's is g times a mask of y: nothing depends on x
    # the composite rounds to bf16 after each of its ops, the fused op once
    assert_close(gx2.detach().float(), gx.float().cpu().numpy().astype(np.float64), tt.bfloat16, "autocast_bf16")
