"""scatter, scatter_reduce, index_put, index_fill, index_copy, masked_scatter, take_along_dim
against NumPy (kernels: triton_kernels/scatter.py and the index family's; ops: core/ops/scatter.py;
derivatives: autograd/functions/scatter.py).

Writes are copies, so they match NumPy exactly in every dtype, the last of repeated indices
winning as in NumPy's fancy assignment; reductions compare with the per-dtype tolerances of
tolerances.py (fp16/bf16 reduce in fp32 and round once).
"""
import numpy as np
import pytest
from grad_inputs import leaf
from tolerances import NP, assert_close

import tritensor as tt
from tritensor.autograd import gradcheck, gradgradcheck

DTYPES = [tt.float32, tt.float64, tt.float16, tt.bfloat16, tt.int32, tt.int64, tt.bool]
FLOATS = [tt.float32, tt.float64, tt.float16, tt.bfloat16]
rng = np.random.default_rng(24)


def _data(shape, dtype):
    a = rng.integers(-4, 5, shape) if dtype in (tt.int32, tt.int64, tt.bool) else rng.standard_normal(shape) * 3
    return (a > 0) if dtype is tt.bool else a.astype(NP[dtype])


def _t(a):
    return tt.tensor(np.ascontiguousarray(a))


def _along(idx, d, shape):
    """NumPy's fancy index of ``x[..., idx, ...]`` along ``d`` (what put_along_axis builds)."""
    grids = np.ix_(*[np.arange(n) for n in idx.shape])
    return tuple(idx if k == d else grids[k] for k in range(len(shape)))


def _ref_reduce(x, d, idx, src, reduce, include_self):
    ref = x.astype(np.float64)
    fancy = _along(idx, d, x.shape)
    hit = np.zeros(x.shape, np.int64)
    np.add.at(hit, fancy, 1)
    if not include_self:
        ident = {"sum": 0, "mean": 0, "prod": 1, "amax": -np.inf, "amin": np.inf}[reduce]
        ref[hit > 0] = ident
    s = src[tuple(slice(0, n) for n in idx.shape)].astype(np.float64)
    ufunc = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.fmax, "amin": np.fmin}[reduce]
    ufunc.at(ref, fancy, s)
    if reduce in ("amax", "amin"):  # NaN propagates
        nans = np.zeros(x.shape, np.int64)
        np.add.at(nans, fancy, np.isnan(s))
        ref[nans > 0] = np.nan
    if reduce == "mean":
        n = hit + (1 if include_self else 0)
        ref = ref / np.maximum(n, 1)
    return ref


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_scatter_matches_numpy(dtype):
    x, src = _data((4, 5), dtype), _data((6, 5), dtype)
    idx = rng.integers(0, 4, (5, 3))  # repeats along dim 0: the last one wins
    ref = x.copy()
    ref[_along(idx, 0, x.shape)] = src[:5, :3]
    out = _t(x).scatter(0, tt.tensor(idx), _t(src))
    assert out.dtype is dtype
    np.testing.assert_array_equal(out.numpy().astype(ref.dtype), ref)
    # strided input, transposed index and source, dim 1, int32 index; in place
    xs = _t(np.stack([x, x], 1))[:, 0]
    ref = x.copy()
    ref[_along(idx.T[:, :4], 1, x.shape)] = src.T[:3, :4]
    assert xs.scatter_(1, tt.tensor(idx).t()[:, :4].int(), _t(src).t()[:, :4]) is xs
    np.testing.assert_array_equal(xs.numpy().astype(ref.dtype), ref)
    # a scalar value; reduce='add' / 'multiply' on a tensor and a scalar
    ref = x.copy()
    ref[_along(idx, 0, x.shape)] = 1
    np.testing.assert_array_equal(tt.scatter(_t(x), 0, tt.tensor(idx), value=1).numpy().astype(ref.dtype), ref)
    if dtype is not tt.bool:
        for reduce, ufunc in (("add", np.add), ("multiply", np.multiply)):
            ref = x.astype(np.float64)
            ufunc.at(ref, _along(idx, 0, x.shape), src[:5, :3].astype(np.float64))
            assert_close(_t(x).scatter(0, tt.tensor(idx), _t(src), reduce=reduce), ref, dtype, "product", k=4)
            ref = x.astype(np.float64)
            ufunc.at(ref, _along(idx, 0, x.shape), 2.0)
            assert_close(_t(x).scatter(0, tt.tensor(idx), 2, reduce=reduce), ref, dtype, "product", k=4)
    # empty index, 0-d
    assert tt.scatter(_t(x), 0, tt.zeros(0, 5, dtype=tt.int64), _t(src)).numpy().tolist() == x.tolist()
    assert tt.tensor(3).scatter(0, tt.tensor(0), tt.tensor(7)).item() == 7


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64, tt.float16, tt.bfloat16, tt.int32, tt.int64], ids=str)
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_matches_numpy(dtype, reduce):
    x, src = _data((3, 7), dtype), _data((4, 9), dtype)
    if reduce == "prod" and dtype.is_floating_point:
        src = (np.sign(src) * (1 + np.abs(src) % 1)).astype(NP[dtype])  # products of O(1) factors
    idx = rng.integers(0, 7, (3, 8))
    if dtype.is_floating_point:
        src[1, 2] = np.nan  # reaches x[1, idx[1, 2]]
    for include_self in (True, False):
        out = _t(x).scatter_reduce(1, tt.tensor(idx), _t(src), reduce, include_self=include_self)
        ref = _ref_reduce(x, 1, idx, src, reduce, include_self)
        if reduce == "mean" and not dtype.is_floating_point:
            s = np.zeros(x.shape, np.int64) if not include_self else x.astype(np.int64)
            fancy = _along(idx, 1, x.shape)
            hit = np.zeros(x.shape, np.int64)
            np.add.at(hit, fancy, 1)
            s = np.where((hit > 0) | include_self, s, 0)
            np.add.at(s, fancy, src[:3, :8].astype(np.int64))
            ref = np.where(hit + include_self > 0, s // np.maximum(hit + include_self, 1), x)
        assert out.dtype is dtype
        assert_close(out, ref.astype(np.int64) if not dtype.is_floating_point else ref, dtype, "product", k=9,
                     err_msg=f"include_self={include_self}")
    # in place, on a non-contiguous input, dim 0
    xt = _t(x.T.copy()).t()
    assert xt.scatter_reduce_(0, tt.tensor(idx[:, :3] % 3).t(), _t(src).t(), reduce) is xt
    ref = _ref_reduce(x, 0, (idx[:, :3] % 3).T, src.T, reduce, True)
    if reduce == "mean" and not dtype.is_floating_point:
        return  # (floor division checked above)
    assert_close(xt, ref.astype(np.int64) if not dtype.is_floating_point else ref, dtype, "product", k=9)


def test_index_put_fill_copy_masked_scatter_take_along_dim_match_numpy():
    for dtype in (tt.float32, tt.bfloat16, tt.int64, tt.bool):
        x, v = _data((4, 5), dtype), _data((3, 5), dtype)
        rows, cols = np.array([3, 0, 3]), np.array([1, 4, 1])
        ref = x.copy()
        ref[rows, cols] = v[0, :3]  # a repeat: the last one wins
        out = _t(x).index_put((tt.tensor(rows), tt.tensor(cols)), _t(v[0, :3]))
        np.testing.assert_array_equal(out.numpy().astype(ref.dtype), ref)
        ref = x.copy()
        ref[:, [2, 0]] = v[0, 0]
        np.testing.assert_array_equal(_t(x).index_fill(1, tt.tensor([2, -5]), _t(v[0])[0]).numpy().astype(ref.dtype),
                                      ref)
        ref[1] = v[0, 1]
        np.testing.assert_array_equal(_t(x).index_fill(1, tt.tensor([2, -5]), _t(v[0])[0]).index_fill_(
            0, tt.tensor([1]), v[0, 1].item()).numpy().astype(ref.dtype), ref)
        ref = x.copy()
        ref[[3]] = v[:1]
        np.testing.assert_array_equal(_t(x).index_copy(0, tt.tensor([3]), _t(v[:1])).numpy().astype(ref.dtype), ref)
        ref = x.copy()
        ref[[2, 0, 1]] = v
        t = _t(x)
        assert t.index_copy_(0, tt.tensor([2, 0, 1]), _t(v)) is t
        np.testing.assert_array_equal(t.numpy().astype(ref.dtype), ref)
        mask = _data((4, 5), tt.bool)
        ref = x.copy()
        ref[mask] = np.concatenate([v.reshape(-1), v.reshape(-1)])[:mask.sum()]
        source = _t(np.concatenate([v, v]))
        np.testing.assert_array_equal(_t(x).masked_scatter(_t(mask), source).numpy().astype(ref.dtype), ref)
        t = _t(x)
        t.masked_scatter_(_t(mask[0]), source)  # a broadcast mask, in place
        ref = x.copy()
        ref[np.broadcast_to(mask[0], x.shape)] = source.numpy().reshape(-1)[:4 * mask[0].sum()]
        np.testing.assert_array_equal(t.numpy().astype(ref.dtype), ref)
        i = rng.integers(0, 5, (1, 3))  # broadcast along dim 0
        np.testing.assert_array_equal(tt.take_along_dim(_t(x), tt.tensor(i), 1).numpy(),
                                      np.take_along_axis(x, np.broadcast_to(i, (4, 3)), 1))
        np.testing.assert_array_equal(_t(x).t().take_along_dim(tt.tensor([[19, 0]])).numpy(),
                                      np.take(x.T.reshape(-1), [19, 0]))
    x = np.arange(6.0).reshape(2, 3)
    for accumulate in (True, False):
        ref = x.copy()
        if accumulate:
            np.add.at(ref, ([0, 0, 1], [1, 1, 2]), [1.0, 2.0, 4.0])
        else:
            ref[[0, 0, 1], [1, 1, 2]] = [1.0, 2.0, 4.0]
        t = _t(x)
        t.index_put_((tt.tensor([0, 0, 1]), tt.tensor([1, 1, 2])), tt.tensor([1.0, 2.0, 4.0], dtype=tt.float64),
                     accumulate=accumulate)
        np.testing.assert_array_equal(t.numpy(), ref)
    half = tt.zeros(3, dtype=tt.float16).index_put((tt.tensor([0, 0, 0]),), tt.tensor(0.5, dtype=tt.float16), True)
    assert half.tolist() == [1.5, 0.0, 0.0]  # accumulated in fp32, rounded once


def test_bad_input(no_launch):
    x, i = tt.zeros(2, 3), tt.tensor([[0, 1]])
    with pytest.raises(RuntimeError, match="scatter\\(\\): Expected dtype int32/int64 for index"):
        x.scatter(1, i.float(), x)
    with pytest.raises(RuntimeError, match="Expected self.dtype to be equal to src.dtype"):
        x.scatter(1, i, x.double())
    with pytest.raises(RuntimeError, match="Index tensor must have the same number of dimensions as self tensor"):
        x.scatter(1, tt.tensor([0]), x)
    with pytest.raises(RuntimeError, match=r"Expected index \[1, 4\] to be no larger than self \[2, 3\] apart from "
                                           r"dimension 1 and to be no larger size than src \[2, 3\]"):
        x.scatter(1, tt.zeros(1, 4, dtype=tt.int64), x)
    with pytest.raises(RuntimeError, match="reduce argument must be either add or multiply."):
        x.scatter(1, i, x, reduce="max")
    with pytest.raises(RuntimeError, match="reduce argument must be either sum, prod, mean, amax or amin, got foo"):
        x.scatter_reduce(1, i, x, "foo")
    with pytest.raises(TypeError, match="argument 'include_self' must be bool, not int"):
        x.scatter_reduce(1, i, x, "sum", include_self=3)
    with pytest.raises(TypeError, match="must be tuple of Tensors, not Tensor"):
        x.index_put(tt.tensor([0]), tt.tensor(1.0))
    with pytest.raises(RuntimeError, match="Index put requires the source and destination dtypes match"):
        x.index_put((tt.tensor([0]),), tt.tensor(1.0, dtype=tt.float64))
    with pytest.raises(IndexError, match="index_fill\\(\\): Index has to be a vector/scalar"):
        x.index_fill(1, tt.tensor([[0]]), 1)
    with pytest.raises(RuntimeError, match="only supports a 0-dimensional value tensor, but got tensor with 1"):
        x.index_fill_(1, tt.tensor([0]), tt.zeros(1))
    with pytest.raises(IndexError, match="Expected dtype int64 for index"):
        x.index_copy(0, tt.tensor([0], dtype=tt.int32), tt.zeros(1, 3))
    with pytest.raises(IndexError, match=r"Number of indices \(2\) should be equal to source.size\(dim\) \(1\)"):
        x.index_copy(0, tt.tensor([0, 1]), tt.zeros(1, 3))
    with pytest.raises(RuntimeError, match="only supports boolean masks, but got mask with dtype int32"):
        x.masked_scatter(tt.zeros(2, 3, dtype=tt.int32), x)
    with pytest.raises(RuntimeError, match="dtype of indices should be int64 but got float32"):
        tt.take_along_dim(x, i.float(), 1)
    with pytest.raises(RuntimeError, match="input and indices should have the same number of dimensions"):
        tt.take_along_dim(x, tt.tensor([0]), 1)


def test_out_of_bounds_indices_raise_before_writing():
    """Host indices (bounds checked with a reduction of the index: a kernel, so not under no_launch),
    in every mode; device indices: tests/test_device_index_checks.py."""
    x = tt.zeros(2, 3, device="cpu")
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 1 with size 3"):
        x.scatter(1, tt.tensor([[3]], device="cpu"), 1.0)
    with pytest.raises(IndexError, match="index -1 is out of bounds"):
        x.scatter_(1, tt.tensor([[-1]], device="cpu"), 1.0)
    with pytest.raises(IndexError, match="scatter_reduce_\\(\\): index 2 is out of bounds for dimension 0"):
        x.scatter_reduce_(0, tt.tensor([[2]], device="cpu"), x, "amax")
    with pytest.raises(IndexError, match="index_copy_\\(\\): index 2 is out of bounds for dimension 0 with size 2"):
        x.index_copy_(0, tt.tensor([2], device="cpu"), tt.zeros(1, 3, device="cpu"))
    with pytest.raises(IndexError, match="index -4 is out of bounds for dimension 1 with size 3"):
        x.index_fill_(1, tt.tensor([-4], device="cpu"), 1.0)
    with pytest.raises(RuntimeError, match="Number of elements of source < number of ones in mask"):
        x.masked_scatter_(tt.ones(2, 3, dtype=tt.bool, device="cpu"), tt.zeros(5, device="cpu"))
    with pytest.raises(RuntimeError, match=r"shape mismatch: value tensor of shape \[2\] cannot be broadcast"):
        x.index_put_((tt.tensor([0], device="cpu"),), tt.zeros(2, device="cpu"))
    assert x.abs().sum().item() == 0  # nothing was written


def test_scatter_gradcheck():
    x, s = leaf(2, 3), leaf(2, 4)
    i = tt.tensor([[0, 0, 2], [1, 1, 1]])  # repeats: only the written element gets the gradient
    assert gradcheck(lambda a, b: a.scatter(1, i, b), (x, s), fast_mode=True)
    assert gradcheck(lambda a: a.scatter(1, i, 2.0), (x,), fast_mode=True)
    assert gradcheck(lambda a, b: (a * 1).scatter_(1, i.int(), b), (x, s), fast_mode=True)
    assert gradcheck(lambda a, b: a.scatter(1, i, b, reduce="multiply"), (x, s), fast_mode=True)
    assert gradgradcheck(lambda a, b: a.scatter(1, i, b) ** 2, (x, s), fast_mode=True)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_gradcheck(reduce):
    x, s = leaf(2, 3), leaf(2, 3)
    i = tt.tensor([[0, 0, 2], [1, 1, 1]])
    for include_self in (True, False):
        assert gradcheck(lambda a, b: a.scatter_reduce(1, i, b, reduce, include_self=include_self), (x, s),
                         fast_mode=True)
    assert gradcheck(lambda a, b: (a * 1).scatter_reduce_(1, i, b, reduce), (x, s), fast_mode=True)
    if reduce == "prod":  # exact where a factor is 0, one or two per target
        z = tt.tensor([[0.0, 1, 2], [3, 0, 1]], dtype=tt.float64, requires_grad=True)
        zs = tt.tensor([[0.0, 2, 0], [1, 0, 3]], dtype=tt.float64, requires_grad=True)
        assert gradcheck(lambda a, b: a.scatter_reduce(1, i, b, "prod"), (z, zs))
        assert gradgradcheck(lambda a, b: a.scatter_reduce(1, i, b, "prod"), (x, s), fast_mode=True)


def test_index_put_and_composites_gradcheck():
    x, v, w = leaf(2, 3), leaf(3), leaf(2, 2)
    rows, cols = tt.tensor([1, 0, 1]), tt.tensor([2, 2, 2])  # a repeated (1, 2): the last value is kept
    assert gradcheck(lambda a, b: a.index_put((rows, cols), b), (x, v), fast_mode=True)
    assert gradcheck(lambda a, b: (a * 1).index_put_((rows, cols), b, accumulate=True), (x, v), fast_mode=True)
    assert gradcheck(lambda a, b: a.index_fill(1, tt.tensor([0, -1]), b[0]), (x, v), fast_mode=True)
    assert gradcheck(lambda a: (a * 1).index_fill_(0, tt.tensor([1]), 2.0), (x,), fast_mode=True)
    assert gradcheck(lambda a, b: (a * 1).index_copy_(1, tt.tensor([2, 0]), b), (x, w), fast_mode=True)
    assert gradcheck(lambda a, b: a.index_copy(0, tt.tensor([1]), b[:1, :1].expand(1, 3)), (x, w), fast_mode=True)
    assert gradcheck(lambda a, b: a.masked_scatter(tt.tensor([True, False, True]), b.reshape(-1)), (x, w),
                     fast_mode=True)
    assert gradcheck(lambda a, b: (a * 1).masked_scatter_(tt.tensor([[False], [True]]), b), (x, w), fast_mode=True)
    assert gradcheck(lambda a: tt.take_along_dim(a, tt.tensor([[0], [2]]), 1), (x,), fast_mode=True)
    y = leaf(2, 3)
    y.detach().index_fill_(0, tt.tensor([0]), 1.0)  # on a detached alias: records nothing
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        y.masked_scatter_(tt.ones(2, 3, dtype=tt.bool), y.detach())
