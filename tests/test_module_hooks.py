"""Module.register_full_backward_hook / register_full_backward_pre_hook, as torch's: the gradients
with respect to a module's inputs and outputs, replaced by what the hooks return; checked against
NumPy gradients of a Linear layer."""
import numpy as np
import pytest

import tritensor as tt
from tritensor import nn
from tolerances import assert_close


def _linear():
    tt.manual_seed(0)
    m = nn.Linear(3, 2).double()
    x = tt.tensor(np.arange(6.0).reshape(2, 3) / 5 - 0.4, requires_grad=True)
    return m, x


def _np(t):
    return t.detach().cpu().numpy()


def test_hook_sees_grad_input_and_grad_output():
    m, x = _linear()
    seen = []
    h = m.register_full_backward_hook(lambda mod, gi, go: seen.append((mod, gi, go)))
    g_out = tt.tensor([[1.0, -2.0], [0.5, 3.0]], dtype=tt.float64)
    m(x).backward(g_out)
    (mod, gi, go), = seen
    assert mod is m and len(gi) == 1 and len(go) == 1
    W = _np(m.weight)
    assert_close(go[0], _np(g_out), tt.float64, "exact")
    assert_close(gi[0], _np(g_out) @ W, tt.float64)
    assert_close(x.grad, _np(g_out) @ W, tt.float64)
    h.remove()
    x.grad = None
    m(x).backward(g_out)
    assert len(seen) == 1  # removed: not called again


def test_returning_replaces_grad_input():
    m, x = _linear()
    m.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 3,))
    m(x).sum().backward()
    W = _np(m.weight)
    assert_close(x.grad, 3 * np.ones((2, 2)) @ W, tt.float64)
    assert_close(m.weight.grad, np.ones((2, 2)).T @ _np(x), tt.float64)  # parameters are not affected


def test_pre_hook_replaces_grad_output_for_everything_below():
    m, x = _linear()
    calls = []
    m.register_full_backward_pre_hook(lambda mod, go: (go[0] * 10,))
    m.register_full_backward_hook(lambda mod, gi, go: calls.append(go))
    m(x).sum().backward()
    W = _np(m.weight)
    assert_close(calls[0][0], np.full((2, 2), 10.0), tt.float64, "exact")
    assert_close(x.grad, np.full((2, 2), 10.0) @ W, tt.float64)
    assert_close(m.weight.grad, np.full((2, 2), 10.0).T @ _np(x), tt.float64)
    assert_close(m.bias.grad, np.full(2, 20.0), tt.float64)


class TwoInOut(nn.Module):
    def forward(self, a, k, b):
        return a * 2 + b * k, a.sum()


def test_several_inputs_and_outputs():
    m = TwoInOut()
    a = tt.ones(2, requires_grad=True)
    b = tt.ones(2, requires_grad=True)
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append((gi, go)))
    m.register_full_backward_pre_hook(lambda mod, go: (go[0] * 10, go[1]))
    y, s = m(a, 3.0, b)
    (y.sum() + s).backward()
    gi, go = seen[0]
    assert len(gi) == 3 and gi[1] is None and len(go) == 2
    assert a.grad.tolist() == [21.0, 21.0] and b.grad.tolist() == [30.0, 30.0]  # torch's numbers
    assert gi[0].tolist() == [21.0, 21.0] and gi[2].tolist() == [30.0, 30.0]


def test_no_input_requires_grad():
    m, _ = _linear()
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append(gi))
    with pytest.warns(UserWarning, match="Full backward hook is firing when gradients are computed with respect to "
                                         "module outputs since no inputs require gradients"):
        m(tt.ones(1, 3, dtype=tt.float64)).sum().backward()
    assert seen == [(None,)]
    assert m.weight.grad is not None
    m2, _ = _linear()
    m2.register_full_backward_hook(lambda mod, gi, go: (tt.ones(1, 3),))
    with pytest.warns(UserWarning):
        with pytest.raises(RuntimeError, match="^Backward hook for Modules where no input requires gradient should "
                                               "always return None or None for all gradients.$"):
            m2(tt.ones(1, 3, dtype=tt.float64)).sum().backward()


def test_wrong_number_of_gradients():
    m, x = _linear()
    m.register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="^Backward hook returned an invalid number of grad_input, got 2, but "
                                           "expected 1$"):
        m(x).sum().backward()
    m, x = _linear()
    m.register_full_backward_pre_hook(lambda mod, go: (go[0], go[0]))
    with pytest.raises(RuntimeError, match="^Backward pre hook returned an invalid number of grad_output, got 2, but "
                                           "expected 1$"):
        m(x).sum().backward()


def test_nested_modules_fire_innermost_last_for_inputs():
    tt.manual_seed(0)
    inner = nn.Linear(3, 3).double()
    outer = nn.Sequential(inner, nn.Tanh())
    order = []
    outer.register_full_backward_pre_hook(lambda mod, go: order.append("outer pre"))
    inner.register_full_backward_pre_hook(lambda mod, go: order.append("inner pre"))
    outer.register_full_backward_hook(lambda mod, gi, go: order.append("outer"))
    inner.register_full_backward_hook(lambda mod, gi, go: order.append("inner"))
    x = tt.ones(2, 3, dtype=tt.float64, requires_grad=True)
    outer(x).sum().backward()
    assert order == ["outer pre", "inner pre", "inner", "outer"]
    first = outer.register_full_backward_hook(lambda mod, gi, go: order.append("first"), prepend=True)
    order.clear()
    outer(x).sum().backward()
    assert order[-2:] == ["first", "outer"]
    first.remove()


def test_no_grad_and_index_inputs():
    emb = nn.Embedding(5, 2).double()
    seen = []
    emb.register_full_backward_hook(lambda mod, gi, go: seen.append(gi))
    with tt.no_grad():
        emb(tt.tensor([1, 2]))  # nothing recorded, nothing fires
    assert seen == []
    with pytest.warns(UserWarning):
        emb(tt.tensor([1, 2])).sum().backward()
    assert seen == [(None,)]
