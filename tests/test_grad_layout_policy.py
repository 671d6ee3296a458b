"""The gradient layout contract and ``autograd.enforce_grad_layout_policy``: a leaf's first
gradient is strided as the (dense) leaf, as torch's; with the policy relaxed the engine's own
gradient is kept in its own layout; the setting is a context manager, a function call and a
decorator, per thread."""
import threading

import numpy as np

import tritensor as tt
from tolerances import assert_close

W = np.arange(24.0).reshape(4, 2, 3)


def _backward():
    p = tt.empty(2, 3, 4).permute(2, 0, 1).requires_grad_()
    (p * tt.tensor(W, dtype=tt.float32)).sum().backward()
    return p


def test_grad_follows_the_leaf_unless_the_policy_is_relaxed():
    p = _backward()
    assert p.stride() == (1, 12, 4) and p.grad.stride() == (1, 12, 4)
    assert_close(p.grad, W, tt.float32)
    with tt.autograd.enforce_grad_layout_policy(False):
        p = _backward()
    assert p.grad.stride() == (6, 3, 1)
    assert_close(p.grad, W, tt.float32)
    # an overlapping leaf has no layout to follow: a contiguous gradient
    e = tt.zeros(1, 3).expand(2, 3).requires_grad_()
    (e * 2.0).sum().backward()
    assert e.grad.is_contiguous()
    assert_close(e.grad, np.full((2, 3), 2.0), tt.float32)


def test_function_call_decorator_and_threads():
    tt.autograd.enforce_grad_layout_policy(False)
    try:
        assert _backward().grad.stride() == (6, 3, 1)
        seen = []
        t = threading.Thread(target=lambda: seen.append(_backward().grad.stride()))
        t.start()
        t.join()
        assert seen == [(1, 12, 4)]  # thread-local: another thread keeps the default
    finally:
        tt.autograd.enforce_grad_layout_policy(True)

    @tt.autograd.enforce_grad_layout_policy(False)
    def relaxed():
        return _backward().grad.stride()

    assert _backward().grad.stride() == (1, 12, 4)  # decorating sets nothing by itself
    assert relaxed() == (6, 3, 1)
    assert _backward().grad.stride() == (1, 12, 4)
    assert tt.autograd.enforce_grad_layout_policy(True).clone().mode is True
