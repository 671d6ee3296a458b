"""The scans (triton_kernels/scan.py, core/ops/scan.py, autograd/functions/scan.py): forward checks
against float64 NumPy and the gradchecks, side by side.

cumsum: every float dtype on every memory layout (tests/layouts.py) and each dim, 0-d/one-element/
prime/empty shapes, an extent longer than one chunk of the kernel (the carry between chunks),
integer and bool inputs (int64 results, as torch), ``dtype=``, the errors, and the derivative.
cumprod and logcumsumexp: every float dtype and layout, an extent of several kernel chunks (the
carry), 0-d/empty/integer inputs, errors, gradchecks (with zeros in cumprod's input: the
first-zero rule of its derivative). cummax and cummin: ties, NaNs, indices, gradchecks.
"""
import zlib

import numpy as np
import pytest

import tritensor as tt
from layouts import LAYOUTS, check_layout, make
from tolerances import FLOAT_DTYPES, NP, assert_close
from tritensor.triton_kernels import scan as _k

DTYPES = [tt.float32, tt.float16, tt.bfloat16, tt.float64]
RNG = np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def _reseed(request):
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


# ----- cumsum ----------------------------------------------------------------------------------
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
    out = tt.tensor(a).cumsum(1)
    assert_close(out, np.cumsum(a.astype(np.float64), 1), dtype, "accumulate", k=n)
    col = tt.tensor(np.ascontiguousarray(a.T)).cumsum(0)  # the scanned dim strided, columns wide
    assert_close(col, np.cumsum(a.astype(np.float64).T, 0), dtype, "accumulate", k=n)


@pytest.mark.parametrize("shape,dim", [((0,), 0), ((3, 0), 1), ((0, 4), 1), ((2, 0, 3), 0)], ids=str)
def test_cumsum_empty(shape, dim):
    out = tt.zeros(shape).cumsum(dim)
    assert out.shape == shape and out.dtype is tt.float32


@pytest.mark.parametrize("dtype", [tt.int32, tt.int64, tt.bool], ids=str)
def test_cumsum_integers_sum_to_int64(dtype):
    a = (RNG.integers(-50, 50, (4, 9)) if dtype is not tt.bool else RNG.integers(0, 2, (4, 9))).astype(NP[dtype])
    t = tt.tensor(a)
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
    src = tt.tensor(a.astype(np.float16 if dtype is not tt.int32 else np.int64))
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
    x = tt.tensor(RNG.standard_normal((3, 5))).requires_grad_()
    for dim in (0, 1, -1):
        assert tt.autograd.gradcheck(lambda t: t.cumsum(dim), (x,))
        assert tt.autograd.gradgradcheck(lambda t: tt.cumsum(t, dim), (x,))
    nc = tt.tensor(RNG.standard_normal((5, 3))).T.requires_grad_()  # a non-contiguous leaf
    assert tt.autograd.gradcheck(lambda t: (t * t).cumsum(1), (nc,))


def test_cumsum_gradient_is_the_reversed_cumsum():
    x = tt.randn(2, 4, requires_grad=True)
    g = tt.randn(2, 4)
    x.cumsum(1).backward(g)
    ref = np.flip(np.cumsum(np.flip(g.numpy(), 1), 1), 1)
    assert_close(x.grad, ref, tt.float32)
    assert x.cumsum(0).grad_fn is not None and type(x.cumsum(0).grad_fn).__name__ == "CumSumBackward0"


# ----- cumprod, logcumsumexp, cummax, cummin ------------------------------------------------------
def _near_one(shape):  # products of values near 1 stay in range over a few dozen terms
    return RNG.uniform(0.7, 1.3, shape) * RNG.choice([-1.0, 1.0], shape)


def _logcumsumexp(r, dim):
    return np.logaddexp.accumulate(r, axis=dim)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape,dim", [((7,), 0), ((5, 13), 1), ((4, 3, 5), 0), ((2, 3, 4, 5), 2)], ids=str)
def test_cumprod_and_logcumsumexp_match_numpy(shape, dim, dtype, layout):
    t, ref = make(shape, dtype, layout, _near_one)
    check_layout(t, layout)
    out = tt.cumprod(t, dim)
    assert out.dtype is dtype and out.shape == t.shape and out.is_contiguous()
    assert_close(out, np.cumprod(ref, axis=dim), dtype, "product", k=shape[dim])
    lse = t.logcumsumexp(dim)
    assert lse.dtype is dtype
    assert_close(lse, _logcumsumexp(ref, dim), dtype)


@pytest.mark.parametrize("dtype", [tt.float32, tt.float16], ids=str)
def test_longer_than_one_chunk(dtype, monkeypatch):
    monkeypatch.setattr(_k, "MAX_BLOCK_N", 8)  # small chunks: the interpreter's scan of 1024 lanes is slow
    n = 2 * _k.MAX_BLOCK_N + 7  # the carry crosses chunks
    a = RNG.uniform(0.999, 1.001, (2, n)).astype(NP[dtype])
    ref = a.astype(np.float64)
    assert_close(tt.tensor(a).cumprod(1), np.cumprod(ref, 1), dtype, "product", k=n)
    b = RNG.standard_normal((n, 3)).astype(NP[dtype])
    assert_close(tt.tensor(b).logcumsumexp(0), _logcumsumexp(b.astype(np.float64), 0), dtype)


def test_special_values_integers_and_shapes():
    x = tt.tensor([-np.inf, -np.inf, 0.0, np.inf, 1.0])
    assert x.logcumsumexp(0).tolist() == [-np.inf, -np.inf, 0.0, np.inf, np.inf]
    big = tt.tensor([1000.0, 1000.0])
    assert big.logcumsumexp(0).tolist()[1] == pytest.approx(1000.0 + np.log(2.0))
    i = tt.tensor([[2, -3, 4], [1, 0, 5]], dtype=tt.int32)
    out = i.cumprod(1)
    assert out.dtype is tt.int64 and out.tolist() == [[2, -6, -24], [1, 0, 0]]
    assert tt.tensor([True, True, False]).cumprod(0).tolist() == [1, 1, 0]
    assert tt.cumprod(tt.tensor([1.5, 2.0]), 0, dtype=tt.float64).dtype is tt.float64
    assert tt.tensor(3.0).cumprod(0).item() == 3.0 and tt.tensor(2.0).logcumsumexp(0).item() == 2.0
    assert tt.zeros(0, 3).cumprod(0).shape == (0, 3) and tt.zeros(2, 0).logcumsumexp(1).shape == (2, 0)


def test_errors_name_the_argument(no_launch):
    with pytest.raises(TypeError, match="'input'"):
        tt.cumprod([1.0], 0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        tt.ones(2).cumprod(1)
    with pytest.raises(TypeError, match="'dtype'"):
        tt.ones(2).cumprod(0, dtype="float64")
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
        tt.tensor([1, 2]).logcumsumexp(0)


def test_scan_gradcheck():
    x = tt.tensor(RNG.uniform(0.5, 1.5, (2, 4))).requires_grad_()
    nc = tt.tensor(RNG.standard_normal((4, 2))).T.requires_grad_()  # a non-contiguous leaf
    zeros = tt.tensor([[1.0, 0.0, 2.0, 0.0], [0.0, 1.0, 2.0, 3.0]], dtype=tt.float64, requires_grad=True)
    for dim in (0, 1):
        assert tt.autograd.gradcheck(lambda t: t.cumprod(dim), (x,))
        assert tt.autograd.gradcheck(lambda t: tt.logcumsumexp(t, dim), (nc,))
    assert tt.autograd.gradcheck(lambda t: t.cumprod(1), (nc,))
    assert tt.autograd.gradcheck(lambda t: t.cumprod(1), (zeros,))  # zeros: the first-zero rule
    assert tt.autograd.gradgradcheck(lambda t: t.cumprod(1), (x,))


def _cum_extreme(a, axis, op):
    """NumPy reference for cummax/cummin: values and torch's indices (a later equal element or a
    NaN takes over)."""
    a = np.moveaxis(a, axis, -1)
    vals, idx = np.empty_like(a), np.zeros(a.shape, np.int64)
    for pos in np.ndindex(a.shape[:-1]):
        best, at = None, 0
        for k, v in enumerate(a[pos]):
            if best is None or np.isnan(v) or (not np.isnan(best) and (v >= best if op == "cummax" else v <= best)):
                best, at = v, k
            vals[pos + (k,)], idx[pos + (k,)] = best, at
    return np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis)


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64, tt.float16, tt.bfloat16, tt.int32, tt.int64, tt.bool],
                         ids=str)
def test_cummax_cummin_match_numpy(dtype, monkeypatch):
    monkeypatch.setattr(_k, "MAX_BLOCK_N", 8)  # small chunks: the carry crosses several
    a = RNG.integers(-3, 4, (3, 21)).astype(np.float64)  # many ties
    if dtype.is_floating_point:
        a[1, 5], a[2, 19] = np.nan, np.nan
    a = (a > 0) if dtype is tt.bool else a.astype(NP[dtype])
    for t, ref, dim in ((tt.tensor(a), a, 1), (tt.tensor(a.T.copy()).t(), a, 1),
                        (tt.tensor(a).t(), a.T, 0)):
        for op in ("cummax", "cummin"):
            got = getattr(t, op)(dim) if op == "cummax" else tt.cummin(t, dim)
            vals, idx = _cum_extreme(ref.astype(np.float64), dim, op)
            assert got.values.dtype is dtype and got.indices.dtype is tt.int64
            np.testing.assert_array_equal(got.values.numpy().astype(np.float64), vals, err_msg=op)
            np.testing.assert_array_equal(got.indices.numpy(), idx, err_msg=op)
    assert tt.zeros(2, 0).cummax(1).values.shape == (2, 0)
    assert tt.tensor(2.0).cummin(0).indices.item() == 0


def test_cummax_cummin_gradcheck():
    x = tt.tensor(RNG.standard_normal((3, 4))).requires_grad_()
    assert tt.autograd.gradcheck(lambda t: t.cummax(1).values, (x,))
    assert tt.autograd.gradcheck(lambda t: tt.cummin(t.t(), 1)[0], (x,), fast_mode=True)
    assert tt.autograd.gradgradcheck(lambda t: t.cummin(0).values ** 2, (x,), fast_mode=True)
    assert not x.cummax(0).indices.requires_grad
