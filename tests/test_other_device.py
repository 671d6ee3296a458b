"""Ops on tensors of a device that is not the current one (``x.to("cuda:1")`` without
``set_device(1)``), as torch runs them: on that device's current stream, where the tensors'
memory is ordered, with that device current for the launch. Launching on the current device's
stream instead left the result unwritten when it was read back on its own device's stream (the
simulated device showed NaN: the output's fresh poison)."""
import numpy as np
import pytest

import tritensor as tt
import tritensor.nn.functional as F
from tolerances import assert_close

pytestmark = pytest.mark.skipif(not tt.cuda.is_available() or tt.cuda.device_count() < 2,
                                reason="needs two CUDA devices (the simulated device has two)")


def test_ops_and_backward_on_a_non_current_device():
    rng = np.random.default_rng(0)
    xn, wn = rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((3, 5)).astype(np.float32)
    assert tt.cuda.current_device() == 0
    x = tt.tensor(xn, device="cuda:1", requires_grad=True)
    w = tt.tensor(wn, device="cuda:1", requires_grad=True)
    y = F.linear(x, w)
    assert y.device == tt.device("cuda", 1)
    assert_close(y.detach(), xn.astype(np.float64) @ wn.T.astype(np.float64), tt.float32, "accumulate", k=5)
    y.sum().backward()
    assert x.grad.device == tt.device("cuda", 1)
    assert_close(x.grad, np.broadcast_to(wn.astype(np.float64).sum(0), (4, 5)), tt.float32, "accumulate", k=3)
    assert tt.cuda.current_device() == 0  # the launch's device guard put the current device back
    e = (x.detach() @ w.detach().T).exp()  # the next op, after the guard: still on cuda:1's stream
    assert_close(e, np.exp(xn.astype(np.float64) @ wn.T.astype(np.float64)), tt.float32, "accumulate", k=5)
