"""cumsum (triton_kernels/cumsum.py, core/ops/cumsum.py, autograd/functions/cumsum.py): forward
checks against float64 NumPy and the gradchecks, side by side.

Every float dtype on every memory layout (tests/layouts.py) and each dim, 0-d/one-element/prime/
empty shapes, an extent longer than one chunk of the kernel (the carry between chunks), integer
and bool inputs (int64 results, as torch), ``dtype=``, the errors, and the derivative.
"""
import zlib

import numpy as np
import pytest

import tritensor as tt
from layouts import LAYOUTS, check_layout, make
from tolerances import FLOAT_DTYPES, NP, assert_close
from tritensor.triton_kernels import cumsum as _k

RNG = np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def _reseed(request):
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def _normal(shape):
    return RNG.standard_normal(shape)


SHAPES = [((), 0), ((), -1), ((1,), 0), ((7,), 0), ((7,), -1), ((5, 13), 0), ((5, 13), 1), ((4, 3, 5), 1),
          ((4, 3, 5), 0), ((4, 3, 5), -1), ((2, 3, 4, 5), 2)]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("shape,dim", SHAPES, ids=str)
def test_cumsum_matches_numpy(shape, dim, dtype, layout):
    t, ref = make(shape, dtype, layout, _normal)
    check_layout(t, layout)
    out = tt.cumsum(t, dim)
    assert out.dtype is dtype and out.shape == t.shape and out.is_contiguous()
    expected = np.cumsum(ref.reshape(1) if ref.ndim == 0 else ref, axis=dim).reshape(ref.shape)
    n = shape[dim] if shape else 1
    assert_close(out, expected, dtype, "accumulate", k=n)
    assert_close(t.cumsum(dim=dim), expected, dtype, "accumulate", k=n)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_cumsum_longer_than_one_chunk(dtype):
    n = 3 * _k.MAX_BLOCK_N + 5  # several chunks: the running total is carried across them
    a = RNG.standard_normal((3, n)).astype(NP[dtype])
    out = tt.from_numpy(a).cumsum(1)
    assert_close(out, np.cumsum(a.astype(np.float64), 1), dtype, "accumulate", k=n)
    col = tt.from_numpy(np.ascontiguousarray(a.T)).cumsum(0)  # the scanned dim strided, columns wide
    assert_close(col, np.cumsum(a.astype(np.float64).T, 0), dtype, "accumulate", k=n)


@pytest.mark.parametrize("shape,dim", [((0,), 0), ((3, 0), 1), ((0, 4), 1), ((2, 0, 3), 0)], ids=str)
def test_cumsum_empty(shape, dim):
    out = tt.zeros(shape).cumsum(dim)
    assert out.shape == shape and out.dtype is tt.float32


@pytest.mark.parametrize("dtype", [tt.int32, tt.int64, tt.bool], ids=str)
def test_cumsum_integers_sum_to_int64(dtype):
    a = (RNG.integers(-50, 50, (4, 9)) if dtype is not tt.bool else RNG.integers(0, 2, (4, 9))).astype(NP[dtype])
    t = tt.from_numpy(a)
    for dim in (0, 1):
        out = t.cumsum(dim)
        assert out.dtype is tt.int64
        np.testing.assert_array_equal(out.numpy(), np.cumsum(a.astype(np.int64), dim))
    big = tt.full((3,), 2**31 - 1, dtype=tt.int32).cumsum(0)  # no int32 overflow: int64 accumulation
    assert big.tolist() == [2**31 - 1, 2 * (2**31 - 1), 3 * (2**31 - 1)]
    np.testing.assert_array_equal(t.T.cumsum(1).numpy(), np.cumsum(a.T.astype(np.int64), 1))  # strided


@pytest.mark.parametrize("dtype", [tt.float64, tt.float32, tt.int32], ids=str)
def test_cumsum_dtype_argument(dtype):
    a = RNG.integers(-5, 5, (3, 6)).astype(np.int64) if dtype is tt.int32 else RNG.standard_normal((3, 6))
    src = tt.from_numpy(a.astype(np.float16 if dtype is not tt.int32 else np.int64))
    out = tt.cumsum(src, 1, dtype=dtype)
    assert out.dtype is dtype
    ref = np.cumsum(src.numpy().astype(NP[dtype]).astype(np.float64), 1)
    assert_close(out, ref, dtype, "accumulate", k=6)  # integer dtypes: exact


def test_cumsum_errors_name_the_argument():
    x = tt.ones(2, 3)
    with pytest.raises(TypeError, match="'input'"):
        tt.cumsum([1.0, 2.0], 0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.cumsum(2)
    with pytest.raises(TypeError, match="dim"):
        x.cumsum(1.5)
    with pytest.raises(TypeError, match="'dtype'"):
        x.cumsum(0, dtype="float32")


def test_cumsum_gradcheck():
    x = tt.from_numpy(RNG.standard_normal((3, 5))).requires_grad_()
    for dim in (0, 1, -1):
        assert tt.autograd.gradcheck(lambda t: t.cumsum(dim), (x,))
        assert tt.autograd.gradgradcheck(lambda t: tt.cumsum(t, dim), (x,))
    nc = tt.from_numpy(RNG.standard_normal((5, 3))).T.requires_grad_()  # a non-contiguous leaf
    assert tt.autograd.gradcheck(lambda t: (t * t).cumsum(1), (nc,))


def test_cumsum_gradient_is_the_reversed_cumsum():
    x = tt.randn(2, 4, requires_grad=True)
    g = tt.randn(2, 4)
    x.cumsum(1).backward(g)
    ref = np.flip(np.cumsum(np.flip(g.numpy(), 1), 1), 1)
    assert_close(x.grad, ref, tt.float32)
    assert x.cumsum(0).grad_fn is not None and type(x.cumsum(0).grad_fn).__name__ == "CumSumBackward0"
