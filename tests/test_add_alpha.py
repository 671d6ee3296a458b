"""add/sub's ``alpha`` keyword (``input + alpha * other``): the elementwise kernel scales ``other``
as it loads it (one launch), checked against float64 NumPy over dtypes, layouts, broadcasting and
Python-number operands; torch's checks on ``alpha``; the in-place forms (``p.data.add_(p.grad,
alpha=-lr)``, the hand-written SGD step); the derivative (other's gradient scaled by alpha).
Kept beside test_elementwise.py, which is at its size limit."""
import numpy as np
import pytest

import tritensor as tt
from grad_inputs import leaf, noncontig
from tolerances import FLOAT_DTYPES, NP, assert_close
from tritensor.autograd import gradcheck

rng = np.random.default_rng(5)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize("alpha", [-0.125, 3, 2.5])
def test_alpha_against_float64(op, dtype, alpha):
    sign = 1 if op == "add" else -1
    a_np, b_np = rng.standard_normal((7, 1, 5)).astype(NP[dtype]), rng.standard_normal((3, 5)).astype(NP[dtype])
    aq, bq = a_np.astype(np.float64), b_np.astype(np.float64)
    ref = aq + sign * alpha * bq
    a, b = tt.tensor(a_np), tt.tensor(b_np)  # on the default device (the test variant's)
    out = getattr(tt, op)(a, b, alpha=alpha)
    assert out.shape == (7, 3, 5) and out.dtype is dtype
    assert_close(out, ref, dtype)
    assert_close(getattr(a, op)(b, alpha=alpha), ref, dtype)
    # strided operands read in place, and an out= tensor
    at = tt.tensor(np.ascontiguousarray(a_np.transpose(2, 1, 0))).permute(2, 1, 0)
    bt = b.T.contiguous().T
    assert not at.is_contiguous() and not bt.is_contiguous()
    res = tt.empty(7, 3, 5, dtype=dtype)
    assert getattr(tt, op)(at, bt, alpha=alpha, out=res) is res
    assert_close(res, ref, dtype)
    # in place, through a view of a bigger tensor
    big = tt.zeros(7, 3, 10, dtype=dtype)
    view = big[..., ::2]
    view.copy_(a.expand(7, 3, 5))
    assert getattr(view, op + "_")(b, alpha=alpha) is view
    assert_close(big[..., ::2], ref, dtype)
    assert_close(big[..., 1::2], np.zeros((7, 3, 5)), dtype, "exact")  # nothing written between


def test_alpha_with_numbers_integers_and_bools():
    x_np = rng.standard_normal(6)
    x = tt.tensor(x_np)
    assert_close(x.add(2, alpha=3), x_np + 6, tt.float64)
    assert_close(tt.add(2, x, alpha=3), 2 + 3 * x_np, tt.float64)  # number first: alpha scales the tensor
    assert_close(tt.sub(2, x, alpha=0.5), 2 - 0.5 * x_np, tt.float64)
    i = tt.tensor([1, 2, 3])
    out = tt.add(i, i, alpha=2)
    assert out.dtype is tt.int64 and out.tolist() == [3, 6, 9]
    assert i.sub(i, alpha=-2).tolist() == [3, 6, 9]
    f = i.add(1.5, alpha=2)  # an int tensor and a float number: a float result, alpha may be an int
    assert f.dtype is tt.float32 and f.tolist() == [4.0, 5.0, 6.0]
    assert tt.add(tt.tensor([1.0, 2.0]), i[:2], alpha=2.5).tolist() == [3.5, 7.0]
    b = tt.tensor([True, False])
    assert tt.add(b, b, alpha=True).tolist() == [True, False]
    assert tt.add(i, i, alpha=1).tolist() == [2, 4, 6]


def test_alpha_errors(no_launch):
    i, f = tt.tensor([1, 2]), tt.tensor([1.0, 2.0])
    msg = "For integral input tensors, argument alpha must not be a floating point number."
    with pytest.raises(RuntimeError, match=msg):
        tt.add(i, i, alpha=2.0)
    with pytest.raises(RuntimeError, match=msg):
        i.sub(i, alpha=1.0)  # torch checks any alpha given, even 1.0
    with pytest.raises(RuntimeError, match="Boolean alpha only supported for Boolean results."):
        tt.add(f, f, alpha=True)
    with pytest.raises(TypeError, match="argument 'alpha' must be Number, not str"):
        f.add(f, alpha="2")
    with pytest.raises(TypeError, match="unexpected keyword argument 'alpha'"):
        f.mul(f, alpha=2)
    with pytest.raises(RuntimeError, match="For integral input tensors"):
        i.add_(i, alpha=0.5)


def test_alpha_gradients():
    a, b = leaf(2, 3), leaf(3)
    assert gradcheck(lambda x, y: tt.add(x, y, alpha=-2.5), (a, b))
    assert gradcheck(lambda x, y: x.sub(y, alpha=3), (a, noncontig(2, 3)))
    assert gradcheck(lambda y: tt.add(1.5, y, alpha=0.5), (b,))
    assert gradcheck(lambda x, y: (x * 1).add_(y, alpha=-0.75), (a, b))
    x, y = tt.tensor([1.0, 2.0], requires_grad=True), tt.tensor([3.0, 4.0], requires_grad=True)
    tt.sub(x, y, alpha=3).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0] and y.grad.tolist() == [-3.0, -3.0]


def test_hand_written_sgd_step():
    # for p in model.parameters(): p.data.add_(p.grad, alpha=-lr): what word_language_model does
    model = tt.nn.Linear(3, 2)
    before = [p.detach().numpy().copy() for p in model.parameters()]
    model(tt.randn(4, 3)).pow(2).sum().backward()
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-0.1)
    for p, w0, g in zip(model.parameters(), before, grads):
        assert_close(p.detach(), w0.astype(np.float64) - 0.1 * g.astype(np.float64), tt.float32)
        assert p.grad_fn is None and p.requires_grad
