"""A leaf's first gradient becomes its ``.grad`` without a copy when the engine made it and nothing
else refers to it or its memory (autograd/engine.py: ``_owned``), as torch's AccumulateGrad steals
such a buffer; every way a gradient can be shared must still get a copy, or a later in-place
accumulation (the second backward, an optimizer's ``grad.mul_``) would change another tensor."""
import numpy as np
import pytest

import tritensor as tt
from tritensor.autograd import Function
from tritensor.triton_kernels import copies as copies_k

from tolerances import assert_close


def _leaf(*shape, seed=0):
    return tt.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32), requires_grad=True)


def _np(t):
    return t.detach().cpu().numpy().astype(np.float64)


@pytest.fixture
def copies(monkeypatch):
    calls = []
    real = copies_k.copy
    monkeypatch.setattr(copies_k, "copy", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def test_a_fresh_gradient_is_kept_not_copied_and_later_ones_add_in_place(copies):
    a, b = _leaf(3, 4), _leaf(4, 5, seed=1)
    (a @ b).sum().backward()  # both gradients are new products: no copy into .grad
    assert copies == []
    ga, gb = _np(a.grad), _np(b.grad)
    assert_close(a.grad, np.ones((3, 5)) @ _np(b).T, tt.float32, "accumulate", k=5)
    grad_a = a.grad
    (a @ b).sum().backward()
    assert a.grad is grad_a  # summed into in place
    assert_close(a.grad, 2 * ga, tt.float32)
    assert_close(b.grad, 2 * gb, tt.float32)


def _independent(x, y):
    """x.grad and y.grad are separate memory: changing one leaves the other."""
    before = _np(y.grad)
    x.grad.mul_(0.0)
    assert np.array_equal(_np(y.grad), before)


def test_a_gradient_passed_to_two_leaves_is_copied_for_them():
    a, b = _leaf(4), _leaf(4, seed=1)
    w = tt.randn(4)
    ((a + b) * w).sum().backward()  # add's backward gives its incoming (dense, new) gradient to both inputs
    _independent(a, b)
    _independent(b, a)


def test_a_users_gradient_is_never_kept():
    a = _leaf(4)
    g = tt.ones(4)
    a.backward(g)  # the root is the leaf itself
    g.mul_(5.0)
    assert np.array_equal(_np(a.grad), np.ones(4))
    c = _leaf(4, seed=1)
    g2 = tt.ones(4)
    c.clone().backward(g2)  # clone's backward passes the user's gradient through
    g2.mul_(5.0)
    assert np.array_equal(_np(c.grad), np.ones(4))


def test_views_of_one_gradient_are_copied():
    a, b = _leaf(2, 3), _leaf(2, 3, seed=1)
    w = tt.randn(4, 3)
    (tt.cat([a, b]) * w).sum().backward()  # cat's backward: slices of one tensor
    _independent(a, b)
    assert_close(b.grad, _np(w)[2:], tt.float32)


def test_a_custom_functions_gradient_and_a_hooks_result_are_copied():
    kept = []

    class Keep(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            out = grad * 2
            kept.append(out)  # the user's Function keeps what it returns
            return out

    a = _leaf(3)
    Keep.apply(a).sum().backward()
    kept[0].mul_(0.0)
    assert np.array_equal(_np(a.grad), np.full(3, 2.0))

    held = []
    b = _leaf(3, seed=1)
    b.register_hook(lambda g: held.append(g * 3) or held[-1])
    (b * 1.5).sum().backward()
    held[0].mul_(0.0)
    assert_close(b.grad, np.full(3, 4.5), tt.float32)


def test_a_gradient_laid_out_unlike_its_leaf_is_copied_in_the_leafs_layout():
    a = tt.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3)).t().detach().requires_grad_()  # strides (1, 3)
    (a * 2).sum().backward()
    assert_close(a.grad, np.full((3, 2), 2.0), tt.float32)
    a.grad.mul_(0.5)  # its own memory either way
    assert_close(a.grad, np.ones((3, 2)), tt.float32)


def test_create_graph_keeps_the_gradients_graph():
    a = _leaf(3)
    (a * a).sum().backward(create_graph=True)
    assert a.grad.grad_fn is not None
    a.grad.sum().backward()
    assert_close(a.grad.detach(), 2 * _np(a) + 2, tt.float32)
