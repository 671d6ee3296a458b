"""Anomaly mode: a NaN made by a backward node is an error naming the node, with its forward's stack."""
import math
import warnings

import numpy as np
import pytest

import tritensor as tt
from tritensor.autograd import Function
from tolerances import assert_close


@pytest.fixture(autouse=True)
def _anomaly_off():
    yield
    tt.autograd.set_detect_anomaly(False)


def _sqrt_of_negative():
    x = tt.tensor([-1.0, 4.0], requires_grad=True)
    return x, (x.sqrt() * 0).sum()  # sqrt(-1) is NaN, and so is its derivative 0.5 / sqrt(-1)


def test_nan_in_backward_raises_with_the_forward_traceback():
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        mode = tt.autograd.detect_anomaly()
    with mode:
        assert tt.autograd.is_anomaly_enabled() and tt.autograd.is_anomaly_check_nan_enabled()
        x, loss = _sqrt_of_negative()
        node = loss.grad_fn.next_functions[0][0].next_functions[0][0]
        assert node.name() == "SqrtBackward0"
        trace = node.metadata["traceback_"]
        assert "_sqrt_of_negative" in trace[-1]  # the user's line comes last: tritensor's frames are left out
        with pytest.warns(UserWarning, match="(?s)Error detected in SqrtBackward0. Traceback of forward call that "
                                             "caused the error:\n.*in _sqrt_of_negative"):
            with pytest.raises(RuntimeError, match=r"^Function 'SqrtBackward0' returned nan values in its 0th "
                                                   r"output.$"):
                loss.backward()
    assert not tt.autograd.is_anomaly_enabled()


def test_off_nan_flows_silently_and_nothing_is_recorded():
    x, loss = _sqrt_of_negative()
    node = loss.grad_fn.next_functions[0][0].next_functions[0][0]
    assert "traceback_" not in node.metadata
    loss.backward()
    g = x.grad.cpu().numpy()
    assert math.isnan(g[0]) and g[1] == 0.0


def test_check_nan_false_only_keeps_the_traceback():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with tt.autograd.detect_anomaly(check_nan=False):
            assert not tt.autograd.is_anomaly_check_nan_enabled()
            x, loss = _sqrt_of_negative()
            loss.backward()
    assert math.isnan(x.grad.cpu().numpy()[0])
    assert tt.autograd.is_anomaly_check_nan_enabled()


def test_which_output_is_named():
    class Two(Function):
        @staticmethod
        def forward(ctx, a, b):
            return a + b

        @staticmethod
        def backward(ctx, g):
            return g, g * float("nan")

    a = tt.ones(2, requires_grad=True)
    b = tt.ones(2, requires_grad=True)
    tt.autograd.set_detect_anomaly(True)
    with pytest.warns(UserWarning, match="Error detected in TwoBackward"):
        with pytest.raises(RuntimeError, match="Function 'TwoBackward' returned nan values in its 1th output."):
            Two.apply(a, b).sum().backward()


def test_any_backward_error_shows_the_forward_stack():
    class Bad(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            raise ValueError("bad backward")

    a = tt.ones(2, requires_grad=True)
    y = Bad.apply(a).sum()  # made outside anomaly mode: no forward stack to show
    with tt.autograd.set_detect_anomaly(True):
        with pytest.warns(UserWarning, match="No forward pass information available"):
            with pytest.raises(ValueError, match="bad backward"):
                y.backward()
    assert not tt.autograd.is_anomaly_enabled()


def test_decorator_and_grads_stay_right():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")

        @tt.autograd.detect_anomaly()
        def step(x):
            assert tt.autograd.is_anomaly_enabled()
            (x * x).sum().backward()

        x = tt.tensor([1.0, -2.0, 3.0], requires_grad=True)
        step(x)  # torch's decorator warns on each call too
    assert not tt.autograd.is_anomaly_enabled()
    assert_close(x.grad.cpu().numpy(), np.array([2.0, -4.0, 6.0]), tt.float32)
