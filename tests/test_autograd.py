"""The autograd engine: the seed page's examples (requires_grad propagation, frozen-base
fine-tuning, the in-place version error, the threaded train_fn), graph structure, hooks,
custom Functions, grad mode, and each engine error. Kernels' numerics are tested elsewhere;
gradients of every op are checked in test_autograd_ops.py."""
import sys
import threading

import numpy as np
import pytest

import tritensor as tt
from tritensor.autograd import Function

from tolerances import assert_close


def arr(t):
    return np.asarray(t.detach().numpy(), dtype=np.float64)


# ----- the seed page -----------------------------------------------------------------------
def test_requires_grad_propagation():
    x = tt.randn(5, 5)
    y = tt.randn(5, 5)
    z = tt.randn((5, 5), requires_grad=True)
    a = x + y
    assert a.requires_grad is False and a.grad_fn is None
    b = a + z
    assert b.requires_grad is True and b.grad_fn is not None
    assert type(b.grad_fn).__name__ == "AddBackward0"
    # no graph is recorded for a subgraph where nothing requires grad
    assert b.grad_fn.next_functions[0] == (None, 0)
    assert type(b.grad_fn.next_functions[1][0]).__name__ == "AccumulateGrad"


def test_frozen_base_finetuning_pattern():
    tt.manual_seed(0)
    base = tt.nn.Sequential(tt.nn.Linear(6, 5), tt.nn.ReLU())
    for p in base.parameters():
        p.requires_grad = False
    fc = tt.nn.Linear(5, 3)
    opt = tt.optim.SGD(fc.parameters(), lr=1e-2, momentum=0.9)
    x = tt.randn(4, 6)
    feats = base(x)
    assert not feats.requires_grad and feats.grad_fn is None  # nothing saved in the frozen base
    loss = fc(feats).sum()
    loss.backward()
    assert all(p.grad is None for p in base.parameters())
    assert fc.weight.grad is not None and fc.bias.grad is not None
    assert_close(fc.bias.grad, np.full(3, 4.0), tt.float32)
    w0 = arr(fc.weight).copy()
    opt.step()
    assert not np.allclose(arr(fc.weight), w0)


def test_inplace_version_error_names_shape_op_and_versions():
    x = tt.randn(5, 5, requires_grad=True)
    y = x.exp()
    y.mul_(2)  # exp saved its output; this changes it
    assert y._version == 1
    with pytest.raises(RuntimeError) as e:
        y.sum().backward()
    msg = str(e.value)
    assert "modified by an inplace operation" in msg
    assert "[5, 5]" in msg and "ExpBackward0" in msg
    assert "is at version 1; expected version 0 instead" in msg


def test_threaded_train_fn():
    errors = []

    def train_fn():
        try:
            x = tt.ones(5, 5, requires_grad=True)
            y = (x + 3) * (x + 4) * 0.5
            y.sum().backward()
            assert_close(x.grad, np.full((5, 5), 4.5), tt.float32)  # d/dx = x + 3.5
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=train_fn) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_threads_accumulate_into_shared_leaf():
    w = tt.ones(3, requires_grad=True)

    def work():
        for _ in range(3):
            (w * 2).sum().backward()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert_close(w.grad, np.full(3, 2.0 * 12), tt.float32)


def test_shared_graph_freed_by_one_thread_raises_retain_graph_error():
    x = tt.randn(4, requires_grad=True)
    shared = x.exp()  # saves its output
    shared.sum().backward()  # frees the shared part
    errors = []

    def other():
        try:
            (shared * 2).sum().backward()
        except RuntimeError as exc:
            errors.append(str(exc))

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(errors) == 1 and "retain_graph=True" in errors[0]


# ----- graph structure and accumulation ----------------------------------------------------
def test_leaf_and_grad_fn_and_accumulation():
    x = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    assert x.is_leaf and x.grad_fn is None
    y = (x * x).sum()
    assert not y.is_leaf and type(y.grad_fn).__name__ == "SumBackward0"
    y.backward(retain_graph=True)
    assert_close(x.grad, [2.0, 4.0, 6.0], tt.float32)
    y.backward()
    assert_close(x.grad, [4.0, 8.0, 12.0], tt.float32)  # accumulates across calls
    assert tt.tensor([1.0]).is_leaf


def test_control_flow_rebuilds_graph():
    x = tt.tensor([2.0], requires_grad=True)
    for step in range(3):
        y = x
        for _ in range(step + 1):  # a different graph each iteration
            y = y * x
        x.grad = None
        y.sum().backward()
        assert_close(x.grad, [(step + 2) * 2.0 ** (step + 1)], tt.float32)


def test_long_chain_is_iterative():
    # far beyond Python's recursion limit; a custom no-kernel Function keeps this fast
    class Scale(Function):
        @staticmethod
        def forward(ctx, x):
            return x.detach()

        @staticmethod
        def backward(ctx, g):
            return g

    n = max(100_000, sys.getrecursionlimit() * 50)
    x = tt.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(n):
        y = Scale.apply(y)
    counter = {"n": 0}
    y.grad_fn.register_prehook(lambda g: counter.__setitem__("n", counter["n"] + 1))
    y.backward()
    assert_close(x.grad, [1.0], tt.float32)
    assert counter["n"] == 1


def test_each_node_runs_once_in_a_diamond():
    calls = []

    class Tap(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            calls.append(1)
            return g

    x = tt.tensor([3.0], requires_grad=True)
    t = Tap.apply(x)
    y = t * t + t * 2  # t feeds three consumers
    y.sum().backward()
    assert len(calls) == 1
    assert_close(x.grad, [2 * 3.0 + 2], tt.float32)


def test_detach_and_no_grad():
    x = tt.randn(3, requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d.grad_fn is None and d._version_counter is x._version_counter
    with tt.no_grad():
        y = x * 2
    assert not y.requires_grad
    with tt.no_grad():
        with tt.enable_grad():
            assert (x * 2).requires_grad

    @tt.no_grad()
    def f(t):
        return t * 2

    @tt.no_grad
    def g(t):
        return t * 2

    assert not f(x).requires_grad and not g(x).requires_grad
    tt.set_grad_enabled(False)
    assert not tt.is_grad_enabled()
    tt.set_grad_enabled(True)
    with tt.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert tt.is_grad_enabled()


def test_grad_mode_is_thread_local():
    seen = []
    with tt.no_grad():
        t = threading.Thread(target=lambda: seen.append(tt.is_grad_enabled()))
        t.start()
        t.join()
    assert seen == [True]


def test_requires_grad_flag_rules():
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        tt.tensor([1, 2]).requires_grad_()
    y = tt.randn(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf variables"):
        y.requires_grad = False


# ----- backward() and grad() ---------------------------------------------------------------
def test_backward_with_gradient_and_inputs():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    w = tt.tensor([3.0, 4.0], requires_grad=True)
    y = x * w
    y.backward(tt.tensor([1.0, 10.0]), inputs=[x])
    assert_close(x.grad, [3.0, 40.0], tt.float32)
    assert w.grad is None


def test_autograd_grad_does_not_touch_dot_grad():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    y = (x ** 3).sum()
    (gx,) = tt.autograd.grad(y, x)
    assert_close(gx, [3.0, 12.0], tt.float32)
    assert x.grad is None and not gx.requires_grad


def test_grad_of_intermediate_and_unused():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    u = tt.tensor([5.0], requires_grad=True)
    h = x * 2
    y = (h * h).sum()
    gh, gu = tt.autograd.grad(y, [h, u], allow_unused=True, retain_graph=True)
    assert_close(gh, [4.0, 8.0], tt.float32)
    assert gu is None
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        tt.autograd.grad(y, [x, u])


def test_create_graph_second_derivative():
    x = tt.tensor([1.5, -2.0], requires_grad=True)
    y = (x ** 3).sum()
    (g,) = tt.autograd.grad(y, x, create_graph=True)
    assert g.requires_grad
    (gg,) = tt.autograd.grad(g.sum(), x)
    assert_close(gg, [6 * 1.5, 6 * -2.0], tt.float32)


def test_backward_create_graph_keeps_graph_in_grad():
    x = tt.tensor([2.0], requires_grad=True)
    (x * x * x).sum().backward(create_graph=True)
    assert x.grad.requires_grad
    g = x.grad
    x.grad = None
    g.sum().backward()
    assert_close(x.grad, [12.0], tt.float32)


# ----- engine errors -----------------------------------------------------------------------
def test_error_backward_twice():
    x = tt.randn(3, requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time.*retain_graph=True"):
        y.backward()


def test_retain_graph_allows_second_backward():
    x = tt.randn(3, requires_grad=True)
    y = (x.exp()).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert_close(x.grad, 2 * np.exp(arr(x)), tt.float32)


def test_error_non_scalar_backward_without_gradient():
    x = tt.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (x * 2).backward()


def test_error_backward_on_tensor_without_grad():
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        tt.randn(1).backward()


def test_error_gradient_shape_mismatch():
    x = tt.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * 2).backward(tt.ones(2))


def test_error_inplace_on_leaf_before_kernel_runs():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    for op in (lambda: x.mul_(2), lambda: x.exp_(), lambda: x.add_(1), lambda: x.copy_(tt.ones(2)),
               lambda: x.zero_()):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
            op()
    assert_close(x.detach(), [1.0, 2.0], tt.float32)  # untouched
    assert x._version == 0
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        x[0].mul_(2)
    with tt.no_grad():
        x.mul_(2)  # allowed: this is how optimisers update parameters
    assert_close(x.detach(), [2.0, 4.0], tt.float32)


def test_error_out_argument_with_requires_grad():
    x = tt.randn(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
        tt.exp(x, out=tt.empty(2))


# ----- in-place ops and views ----------------------------------------------------------------
def test_inplace_on_nonleaf_records_history():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.mul_(x)  # y = 3x * x
    assert type(y.grad_fn).__name__ == "MulBackward0" and y._version == 1
    y.sum().backward()
    assert_close(x.grad, [6.0, 12.0], tt.float32)


def test_inplace_on_view_rebases_base():
    w = tt.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    b = w * 1
    v = b[1:3]
    v.mul_(w[1:3])  # b[1:3] = w[1:3] ** 2
    assert type(b.grad_fn).__name__ == "CopySlices"
    (b * tt.tensor([1.0, 10.0, 100.0, 1000.0])).sum().backward()
    assert_close(w.grad, [1.0, 10 * 2 * 2.0, 100 * 2 * 3.0, 1000.0], tt.float32)


def test_inplace_on_base_updates_old_view():
    w = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = w * 1
    v = b[:2]
    b.mul_(2)
    (v * v).sum().backward()  # v now reads 2w
    assert_close(w.grad, [8.0, 16.0, 0.0], tt.float32)


def test_setitem_into_tensor_without_grad_gives_it_history():
    w = tt.tensor([5.0, 6.0], requires_grad=True)
    buf = tt.zeros(4)
    buf[1:3] = w * 2
    assert buf.requires_grad and type(buf.grad_fn).__name__ == "CopySlices"
    (buf * tt.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    assert_close(w.grad, [4.0, 6.0], tt.float32)


def test_version_counter_shared_with_views():
    x = tt.zeros(4)
    v = x[1:]
    v.add_(1)
    assert x._version == v._version == 1
    x.fill_(0)
    assert v._version == 2


# ----- hooks ---------------------------------------------------------------------------------
def test_register_hook_replaces_gradient_and_remove():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    h = x.register_hook(lambda g: g * 10)
    (x * 2).sum().backward()
    assert_close(x.grad, [20.0, 20.0], tt.float32)
    h.remove()
    x.grad = None
    (x * 2).sum().backward()
    assert_close(x.grad, [2.0, 2.0], tt.float32)


def test_hook_on_nonleaf_and_retain_grad():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    seen = []
    y.register_hook(lambda g: seen.append(arr(g)))
    y.retain_grad()
    (y * y).sum().backward()
    np.testing.assert_allclose(seen[0], [6.0, 12.0])
    assert_close(y.grad, [6.0, 12.0], tt.float32)
    assert y.retains_grad
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        tt.ones(1).register_hook(lambda g: g)


def test_post_accumulate_grad_hook():
    w = tt.tensor([1.0, 1.0], requires_grad=True)
    seen = []
    h = w.register_post_accumulate_grad_hook(lambda p: seen.append(arr(p.grad)))
    (w * 4).sum().backward()
    np.testing.assert_allclose(seen[0], [4.0, 4.0])
    h.remove()
    (w * 4).sum().backward()
    assert len(seen) == 1
    with pytest.raises(RuntimeError, match="non-leaf"):
        (w * 2).register_post_accumulate_grad_hook(lambda p: None)


# ----- custom Function -----------------------------------------------------------------------
class MulAdd(Function):
    @staticmethod
    def forward(ctx, x, y, alpha):
        ctx.save_for_backward(x, y)
        ctx.alpha = alpha
        return x * y + alpha

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        assert ctx.needs_input_grad == (True, False, False)
        return g * y, None, None


def test_custom_function():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    y = tt.tensor([3.0, 4.0])
    out = MulAdd.apply(x, y, 5.0)
    assert type(out.grad_fn).__name__ == "MulAddBackward"
    assert_close(out.detach(), [8.0, 13.0], tt.float32)
    out.sum().backward()
    assert_close(x.grad, [3.0, 4.0], tt.float32)


def test_custom_function_mark_dirty_and_non_differentiable():
    class AddOneInplace(Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    class SortLike(Function):
        @staticmethod
        def forward(ctx, x):
            idx = tt.arange(x.shape[0])
            ctx.mark_non_differentiable(idx)
            return x * 1, idx

        @staticmethod
        def backward(ctx, g, g_idx):
            return g * 2

    x = tt.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    z = AddOneInplace.apply(y)
    assert z is y and y._version >= 1 and type(y.grad_fn).__name__ == "AddOneInplaceBackward"
    vals, idx = SortLike.apply(z)
    assert vals.requires_grad and not idx.requires_grad
    vals.sum().backward()
    assert_close(x.grad, [2.0, 2.0], tt.float32)
    leaf = tt.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        AddOneInplace.apply(leaf)


def test_custom_function_wrong_number_of_grads():
    class Bad(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, g):
            return g

    x = tt.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        Bad.apply(x, x).backward()


def test_gradcheck_catches_a_wrong_backward():
    class WrongSquare(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x  # should be 2 x

    x = tt.tensor([1.0, 2.0], dtype=tt.float64, requires_grad=True)
    with pytest.raises(tt.autograd.GradcheckError, match="Jacobian mismatch"):
        tt.autograd.gradcheck(WrongSquare.apply, (x,))
    assert tt.autograd.gradcheck(WrongSquare.apply, (x,), raise_exception=False) is False


def test_backward_inputs_nonleaf_and_multiple_roots():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    y = (h * h).sum()
    y.backward(inputs=[h])
    assert_close(h.grad, [6.0, 12.0], tt.float32)
    assert x.grad is None
    a = x * 2
    b = x * x
    tt.autograd.backward([a.sum(), b], [None, tt.tensor([1.0, 10.0])])
    assert_close(x.grad, [2.0 + 2.0, 2.0 + 40.0], tt.float32)


def test_node_hooks_see_and_replace_gradients():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    seen = []
    y.grad_fn.register_prehook(lambda grad_outputs: seen.append(arr(grad_outputs[0])))
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: (grad_inputs[0] * 0 + 5, grad_inputs[1]))
    y.sum().backward()
    np.testing.assert_allclose(seen[0], [1.0, 1.0])
    assert_close(x.grad, [5.0, 5.0], tt.float32)


def test_next_functions_of_custom_function_skip_non_tensor_args():
    x = tt.tensor([1.0], requires_grad=True)
    out = MulAdd.apply(x, tt.tensor([2.0]), 3.0)
    fns = out.grad_fn.next_functions
    assert len(fns) == 2 and type(fns[0][0]).__name__ == "AccumulateGrad" and fns[1] == (None, 0)
    assert fns[0][0].variable is x
