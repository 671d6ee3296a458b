"""Selection by mask and counting (core/ops/select.py, autograd/functions/select.py): nonzero/
argwhere, masked_fill(_), masked_select, bincount.

The family has no kernel file of its own: its core entries run the index family's kernels
(stream compaction, atomic adds; triton_kernels/index.py) and the elementwise ``where``, so these
tests check the results against NumPy on every layout of tests/layouts.py, the dtype rules, the
edge shapes, the errors (before any kernel) and the gradients of masked_fill and masked_select.
"""
import zlib

import numpy as np
import pytest

import tritensor as tt
from layouts import LAYOUTS, check_layout, make
from tolerances import assert_close


@pytest.fixture(autouse=True)
def _reseed(request):
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_nonzero_argwhere_masked_ops(layout):
    x, r = make((4, 6), tt.float32, layout, lambda s: RNG.integers(-2, 3, s).astype(np.float64))
    check_layout(x, layout)
    np.testing.assert_array_equal(tt.nonzero(x).numpy(), np.argwhere(r))
    np.testing.assert_array_equal(x.argwhere().numpy(), np.argwhere(r))
    for got, want in zip(x.nonzero(as_tuple=True), np.nonzero(r)):
        np.testing.assert_array_equal(got.numpy(), want)
    mask = tt.tensor(RNG.integers(0, 2, (1, 6)).astype(np.bool_))
    np.testing.assert_array_equal(x.masked_fill(mask, -7.5).numpy(), np.where(mask.numpy(), -7.5, r))
    np.testing.assert_array_equal(tt.masked_fill(x, mask, tt.tensor(2.0)).numpy(), np.where(mask.numpy(), 2.0, r))
    np.testing.assert_array_equal(x.masked_select(mask).numpy(), r[np.broadcast_to(mask.numpy(), r.shape)])
    y = x.clone()
    v = y._version
    assert y.masked_fill_(mask, 0.5) is y and y._version == v + 1
    np.testing.assert_array_equal(y.numpy(), np.where(mask.numpy(), 0.5, r))


def test_masked_fill_dtypes_and_nonzero_edges():
    i = tt.tensor([1, 2, 3])
    assert i.masked_fill(tt.tensor([True, False, True]), 9.7).tolist() == [9, 2, 9]  # cast to the input dtype
    h = tt.ones(3, dtype=tt.bfloat16).masked_fill(tt.tensor([False, True, False]), 1.5)
    assert h.dtype is tt.bfloat16 and h.float().tolist() == [1.0, 1.5, 1.0]
    assert tt.nonzero(tt.zeros(2, 3)).shape == (0, 2) and tt.nonzero(tt.tensor(3.0)).shape == (1, 0)
    assert tt.tensor([[True, False]]).nonzero().tolist() == [[0, 0]]
    assert tt.masked_select(tt.arange(3.0), tt.tensor([[True], [False]])).tolist() == [0.0, 1.0, 2.0]


def test_bincount():
    a = RNG.integers(0, 6, 20)
    t = tt.tensor(a)
    np.testing.assert_array_equal(tt.bincount(t).numpy(), np.bincount(a))
    np.testing.assert_array_equal(t.bincount(minlength=10).numpy(), np.bincount(a, minlength=10))
    w = RNG.standard_normal(20)
    got = tt.bincount(t, tt.tensor(w.astype(np.float32)))
    assert got.dtype is tt.float32
    # each bin sums a few of the 20 weights in fp32: "accumulate" over 20 terms (atol 4.3e-6, below
    # the 1e-5 this test allowed before it had a profile)
    assert_close(got, np.bincount(a, w), tt.float32, "accumulate", k=20)
    assert tt.bincount(t.int(), tt.tensor(w)).dtype is tt.float64
    assert tt.bincount(tt.zeros(0, dtype=tt.int64), minlength=3).tolist() == [0, 0, 0]


def test_errors_name_the_argument(no_launch):
    x = tt.zeros(2, 3)
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        x.masked_fill(tt.zeros(3), 1.0)
    with pytest.raises(RuntimeError, match="0-dimensional value tensor"):
        x.masked_fill(tt.zeros(3, dtype=tt.bool), tt.zeros(1))
    with pytest.raises(RuntimeError, match="broadcastable"):
        x.masked_fill(tt.zeros(2, dtype=tt.bool), 1.0)
    with pytest.raises(RuntimeError, match="expected BoolTensor"):
        x.masked_select(x)
    with pytest.raises(RuntimeError, match="1-d non-negative integral"):
        tt.bincount(tt.zeros(3))
    with pytest.raises(RuntimeError, match="same length"):
        tt.bincount(tt.tensor([1, 2]), tt.ones(3))
    with pytest.raises(RuntimeError, match="minlength should be >= 0"):
        tt.bincount(tt.tensor([1]), minlength=-1)


def test_select_gradcheck():
    x = tt.tensor(RNG.permutation(6).reshape(2, 3).astype(np.float64) / 3).requires_grad_()
    nc = tt.tensor(RNG.permutation(6).reshape(3, 2).astype(np.float64) / 3).T.requires_grad_()  # non-contiguous
    cases = [lambda t: t.masked_fill(t > 0.5, 2.0), lambda t: t.masked_select(t > 1.1)]  # thresholds between the values k/3
    for f in cases:
        assert tt.autograd.gradcheck(f, (x,))
        assert tt.autograd.gradcheck(f, (nc,))
    value = tt.tensor(3.0, dtype=tt.float64, requires_grad=True)
    assert tt.autograd.gradcheck(lambda t, v: t.masked_fill(t > 1.1, v), (x, value))
    y = x * 1
    y.masked_fill_(x > 1.0, 0.0)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), (x.detach().numpy() <= 1.0).astype(np.float64))
