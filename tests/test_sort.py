"""Sorting and searching (triton_kernels/sort.py, core/ops/sort.py, autograd/functions/sort.py):
sort/argsort/msort, topk, kthvalue, unique, searchsorted. The selection ops (nonzero, masked_*,
bincount) are tests/test_select.py's.

Sorting moves values, so values must equal NumPy's stable sort exactly and indices too (ties in
position order, NaN last ascending and first descending as in PyTorch), on every dtype and
layout, through both paths (``tl.sort`` of packed keys; rank-sorted runs + merge passes for
64-bit dtypes and long rows); then the errors and the gradchecks.
"""
import zlib

import ml_dtypes
import numpy as np
import pytest

import tritensor as tt
from layouts import LAYOUTS, check_layout, make
from tolerances import NP
from tritensor.triton_kernels import sort as _k

DTYPES = [tt.float32, tt.float16, tt.bfloat16, tt.float64]


@pytest.fixture(autouse=True)
def _reseed(request):
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def _ties(shape):  # few distinct values: many ties, so stability shows
    a = RNG.integers(-4, 5, shape).astype(np.float64) / 2
    flat = a.reshape(-1)
    if flat.size > 3:
        flat[1], flat[-2] = np.nan, -0.0
    return a


def _host(t):
    a = t.numpy()
    return a.astype(np.float64) if a.dtype == ml_dtypes.bfloat16 else a


def _np_sort(r, axis, descending):
    """NumPy's stable sort with PyTorch's order: NaN last ascending, first descending."""
    idx = _lex(r, axis, descending)
    return np.take_along_axis(r, idx, axis), idx


def _lex(r, axis, descending):
    moved = np.moveaxis(r, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1]) if moved.size else moved.reshape(0, moved.shape[-1])
    out = np.empty(flat.shape, np.int64)
    for k, row in enumerate(flat):
        nan = np.isnan(row)
        val = np.where(nan, 0.0, row) + 0.0
        out[k] = np.lexsort((-val, ~nan)) if descending else np.lexsort((val, nan))
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape,dim", [((5, 13), 1), ((4, 3, 6), 0)], ids=str)
def test_sort_matches_numpy_stable_order(shape, dim, dtype, layout):
    t, ref = make(shape, dtype, layout, _ties)
    check_layout(t, layout)
    for descending in (False, True):
        vals, idx = tt.sort(t, dim, descending=descending)
        want_v, want_i = _np_sort(ref, dim, descending)
        assert vals.dtype is dtype and idx.dtype is tt.int64 and vals.is_contiguous()
        np.testing.assert_array_equal(_host(vals), want_v)
        np.testing.assert_array_equal(idx.numpy(), want_i)
        np.testing.assert_array_equal(t.argsort(dim, descending=descending).numpy(), want_i)
    np.testing.assert_array_equal(_host(t.msort()), _np_sort(ref, 0, False)[0])


@pytest.mark.parametrize("tile", [4, 256])
def test_merge_sort_for_long_rows_and_ints(monkeypatch, tile):
    monkeypatch.setattr(_k, "MAX_SORT_BLOCK", 4)  # rows longer than this take the rank kernel
    monkeypatch.setattr(_k, "RANK_TILE", tile)  # 4: rows of 9-11 are 3 runs, merged in 2 passes
    a = _ties((3, 11)).astype(np.float32)
    v, i = tt.tensor(a).sort(1, descending=True)
    want_v, want_i = _np_sort(a.astype(np.float64), 1, True)
    np.testing.assert_array_equal(v.numpy(), want_v.astype(np.float32))
    np.testing.assert_array_equal(i.numpy(), want_i)
    for dtype in (tt.int64, tt.int32, tt.bool):
        b = RNG.integers(-3, 4, (2, 9)) if dtype is not tt.bool else RNG.integers(0, 2, (2, 9))
        t = tt.tensor(b.astype(NP[dtype]))
        v, i = t.sort(1)
        np.testing.assert_array_equal(i.numpy(), np.argsort(b, 1, kind="stable"))
        np.testing.assert_array_equal(v.numpy(), np.sort(b.astype(NP[dtype]), 1))
    big = tt.tensor([2**40, -(2**40), 3, 2**40 + 1])  # int64 beyond 32 bits
    assert big.sort().values.tolist() == [-(2**40), 3, 2**40, 2**40 + 1]
    a = _ties((2, 37, 3))  # runs merged along a strided middle dim, ties and NaN across runs
    for descending in (False, True):
        v, i = tt.tensor(a).sort(1, descending=descending)
        want_v, want_i = _np_sort(a, 1, descending)
        np.testing.assert_array_equal(v.numpy(), want_v)
        np.testing.assert_array_equal(i.numpy(), want_i)


def test_each_sort_kernel_takes_its_cases(monkeypatch):
    seen = []
    real = _k.launch

    def spy(kernel, *args, **kwargs):
        seen.append(kernel.fn.__name__)
        return real(kernel, *args, **kwargs)

    monkeypatch.setattr(_k, "launch", spy)
    x = tt.tensor(RNG.standard_normal((64, 64)).astype(np.float32))
    x[:5, :13].sort(1)  # small, 32-bit: tl.sort of packed keys
    x[:5, :13].double().sort(1)  # 64-bit values: the rank kernel
    x.sort(1)  # CPU mode: too many elements for the interpreter's tl.sort; GPU: tl.sort
    big = "_rank_kernel" if _k.INTERPRET else "_sort_kernel"
    assert seen == ["_sort_kernel", "_rank_kernel", big]


def test_sort_0d_and_empty():
    v, i = tt.tensor(2.5).sort()
    assert v.item() == 2.5 and i.item() == 0 and v.shape == ()
    v, i = tt.zeros(3, 0).sort(1)
    assert v.shape == (3, 0) and i.dtype is tt.int64


@pytest.mark.parametrize("dtype", [tt.float32, tt.bfloat16, tt.float64], ids=str)
def test_topk_and_kthvalue(dtype):
    a = RNG.permutation(40).reshape(5, 8).astype(np.float64)  # distinct values: one right answer
    t = tt.tensor(a.astype(NP[dtype])).T  # non-contiguous
    r = a.T
    vals, idx = tt.topk(t, 3, dim=0)
    np.testing.assert_array_equal(_host(vals), -np.sort(-r, 0)[:3])
    np.testing.assert_array_equal(idx.numpy(), np.argsort(-r, 0)[:3])
    vals, idx = t.topk(2, largest=False)
    np.testing.assert_array_equal(_host(vals), np.sort(r, 1)[:, :2])
    assert t.topk(0).values.shape == (8, 0)
    v, i = t.kthvalue(3, 1)
    np.testing.assert_array_equal(_host(v), np.sort(r, 1)[:, 2])
    np.testing.assert_array_equal(i.numpy(), np.argsort(r, 1)[:, 2])
    v, i = tt.kthvalue(t, 1, 0, keepdim=True)
    assert v.shape == (1, 5) and np.array_equal(_host(v), r.min(0, keepdims=True))


def test_unique():
    a = RNG.integers(-3, 4, (4, 5))
    t = tt.tensor(a).T
    vals, inv, counts = tt.unique(t, return_inverse=True, return_counts=True)
    want, want_inv, want_counts = np.unique(a.T, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(vals.numpy(), want)
    np.testing.assert_array_equal(inv.numpy(), want_inv.reshape(a.T.shape))
    np.testing.assert_array_equal(counts.numpy(), want_counts)
    f = tt.tensor([2.5, -1.0, 2.5, 0.0, -0.0])
    assert f.unique().tolist() == [-1.0, 0.0, 2.5] and f.unique().dtype is tt.float32
    assert tt.unique(tt.tensor([7])).tolist() == [7]
    e, ei, ec = tt.unique(tt.zeros(0, dtype=tt.int64), return_inverse=True, return_counts=True)
    assert e.shape == (0,) and ei.shape == (0,) and ec.shape == (0,)


def test_searchsorted():
    seq = np.array([1.0, 2.0, 2.0, 4.0, 7.0])
    vals = np.array([[0.0, 2.0, 3.0], [7.0, 8.0, 2.0]])
    for right in (False, True):
        got = tt.searchsorted(tt.tensor(seq), tt.tensor(vals), right=right)
        np.testing.assert_array_equal(got.numpy(), np.searchsorted(seq, vals, side="right" if right else "left"))
    got = tt.searchsorted(tt.tensor(seq).half(), tt.tensor(vals).float(), side="right", out_int32=True)
    assert got.dtype is tt.int32 and got.tolist() == np.searchsorted(seq, vals, side="right").tolist()
    rows = np.sort(RNG.standard_normal((3, 6)), 1)
    v = RNG.standard_normal((3, 4))
    got = tt.searchsorted(tt.tensor(rows), tt.tensor(v))  # a row of boundaries per row of values
    np.testing.assert_array_equal(got.numpy(), [np.searchsorted(rows[k], v[k]) for k in range(3)])
    assert tt.searchsorted(tt.tensor(seq), 2.0).item() == 1 and tt.searchsorted(tt.tensor(seq), 2.0).ndim == 0
    perm = RNG.permutation(5)
    unsorted = tt.tensor(seq[perm])
    sorter = tt.tensor(np.argsort(seq[perm]))
    assert tt.searchsorted(unsorted, tt.tensor([3.0]), sorter=sorter).tolist() == [3]
    assert tt.searchsorted(tt.tensor([1, 3, 5]), tt.tensor([4, 5]), right=True).tolist() == [2, 3]
    assert tt.searchsorted(tt.zeros(0), tt.tensor([1.0])).tolist() == [0]


def test_errors_name_the_argument(no_launch):
    x = tt.zeros(2, 3)
    with pytest.raises(TypeError, match="'input'"):
        tt.sort([3, 1])
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.sort(2)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        x.topk(4)
    with pytest.raises(IndexError, match="selected number k out of range"):
        x.kthvalue(0)
    with pytest.raises(TypeError, match="'k'"):
        x.topk(1.0)
    with pytest.raises(IndexError, match="Dimension out of range"):  # unique(dim=) exists: its dim is checked
        x.unique(dim=2)
    with pytest.raises(RuntimeError, match="boundaries tensor should be 1 dimension"):
        tt.searchsorted(tt.zeros(2, 3), tt.zeros(3, 1))
    with pytest.raises(RuntimeError, match="side can only be"):
        tt.searchsorted(tt.zeros(3), tt.zeros(1), side="middle")


def test_sort_family_gradcheck():
    x = tt.tensor(RNG.permutation(6).reshape(2, 3).astype(np.float64) / 3).requires_grad_()
    nc = tt.tensor(RNG.permutation(6).reshape(3, 2).astype(np.float64)).T.requires_grad_()
    cases = [lambda t: t.sort(1).values, lambda t: tt.sort(t, 0, descending=True)[0], lambda t: t.msort(),
             lambda t: tt.topk(t, 1, 0).values, lambda t: t.topk(2, largest=False)[0],
             lambda t: t.kthvalue(2, 1).values, lambda t: tt.kthvalue(t, 1, 0, keepdim=True)[0]]
    for f in cases:
        assert tt.autograd.gradcheck(f, (x,))
    for f in cases[:2] + cases[3:4]:
        assert tt.autograd.gradcheck(f, (nc,))
        assert tt.autograd.gradgradcheck(f, (x,))


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64, tt.float16, tt.bfloat16, tt.int32, tt.int64], ids=str)
def test_median_nanmedian_mode_match_numpy(dtype):
    """Composites of the stable sort: torch's lower median and its index (the middle of
    equal elements in sorted order), NaN handling, and mode's smallest most frequent value with the
    index of its last occurrence."""
    rng = np.random.default_rng(11)
    a = rng.integers(-3, 4, (4, 7)).astype(np.float64)
    if dtype.is_floating_point:
        a[1, 2] = a[2, [0, 5]] = np.nan
        a[3, :] = np.nan
    a = a.astype(NP[dtype])
    for t, ref, dim in ((tt.tensor(a), a.astype(np.float64), 1),
                        (tt.tensor(a.T.copy()).t(), a.astype(np.float64), 1),
                        (tt.tensor(a).t(), a.T.astype(np.float64), 0)):
        order = np.argsort(ref, axis=dim, kind="stable")  # NaN last, as the kernels
        srt = np.take_along_axis(ref, order, dim)
        n, nans = ref.shape[dim], np.isnan(ref).sum(dim, keepdims=True)
        for op in ("median", "nanmedian"):
            k = np.where(nans > 0, n - nans, (n - 1) // 2) if op == "median" else np.maximum((n - nans - 1) // 2, 0)
            got = getattr(t, op)(dim, keepdim=True)
            np.testing.assert_array_equal(got.values.numpy().astype(np.float64), np.take_along_axis(srt, k, dim))
            np.testing.assert_array_equal(got.indices.numpy(), np.take_along_axis(order, k, dim))
        got = tt.mode(t, dim)
        for row in range(ref.shape[1 - dim]):
            line = np.take(ref, row, axis=1 - dim)
            vals, counts = np.unique(line[~np.isnan(line)], return_counts=True)
            if counts.size and counts.max() > 1 or not np.isnan(line).any():
                best = vals[np.argmax(counts)]
                assert got.values[row].item() == best
                assert got.indices[row].item() == np.nonzero(line == best)[0][-1]
    flat = a.astype(np.float64).reshape(-1)
    assert np.isnan(tt.tensor(a).median().item()) == np.isnan(flat).any()
    assert tt.tensor(a).nanmedian().item() == np.sort(flat[~np.isnan(flat)])[(np.sum(~np.isnan(flat)) - 1) // 2]
    assert np.isnan(tt.zeros(0).median().item())
    with pytest.raises(IndexError, match=r"mode\(\): Expected reduction dim 0 to have non-zero size"):
        tt.zeros(0, 2).mode(0)
    with pytest.raises(IndexError, match=r"median\(\): Expected reduction dim 1 to have non-zero size"):
        tt.zeros(2, 0).median(1)


def test_median_and_mode_gradcheck():
    x = tt.tensor(np.random.default_rng(3).standard_normal((3, 5)), dtype=tt.float64, requires_grad=True)
    gradcheck = tt.autograd.gradcheck
    assert gradcheck(lambda t: t.median(1).values, (x,), fast_mode=True)
    assert gradcheck(lambda t: tt.nanmedian(t.t(), 0).values, (x,), fast_mode=True)
    assert gradcheck(lambda t: t.median(), (x,), fast_mode=True)
    assert gradcheck(lambda t: t.mode(0).values, (x,), fast_mode=True)


# ----- bucketize, unique(dim=), unique_consecutive -------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bucketize(dtype):
    bounds = np.array([-1.0, 0.0, 0.0, 1.5, 3.0])
    vals = np.array([[-2.0, -1.0, 0.0, 0.5], [1.5, 2.0, 3.0, 9.0]])
    b, v = tt.tensor(bounds.astype(NP[dtype])), tt.tensor(vals.astype(NP[dtype]))
    for right in (False, True):
        got = tt.bucketize(v.T, b, right=right)  # a transposed input
        assert got.dtype is tt.int64
        # torch: right=False gives boundaries[i-1] < x <= boundaries[i], NumPy's searchsorted side='left'
        np.testing.assert_array_equal(got.numpy(), np.searchsorted(bounds, vals.T, side="right" if right else "left"))
        assert got.tolist() == tt.searchsorted(b, v.T, right=right).tolist()
    got = tt.bucketize(v, b, out_int32=True)
    assert got.dtype is tt.int32
    s = tt.bucketize(0.25, b)
    assert s.ndim == 0 and s.item() == 3
    assert tt.bucketize(v[:, :0], b).shape == (2, 0)
    with pytest.raises(RuntimeError, match=r"boundaries tensor must be 1 dimension, but got dim\(2\)"):
        tt.bucketize(v, b.reshape(5, 1))


def test_unique_dim_and_unique_consecutive():
    a = RNG.integers(0, 3, (6, 2))
    a[3] = a[1]
    for t, d in ((tt.tensor(a), 0), (tt.tensor(np.ascontiguousarray(a.T)), 1)):  # rows, then columns
        vals, inv, counts = tt.unique(t, dim=d, return_inverse=True, return_counts=True)
        want, want_inv, want_counts = np.unique(t.numpy(), axis=d, return_inverse=True, return_counts=True)
        np.testing.assert_array_equal(vals.numpy(), want)
        np.testing.assert_array_equal(inv.numpy(), want_inv.reshape(-1))
        np.testing.assert_array_equal(counts.numpy(), want_counts)
    f = tt.tensor(RNG.integers(0, 2, (2, 5, 2)).astype(np.float32)).transpose(0, 2)  # strided, 3-D, dim 1
    np.testing.assert_array_equal(tt.unique(f, dim=1).numpy(), np.unique(f.numpy(), axis=1))
    e = tt.unique(tt.zeros(0, 3), dim=0, return_inverse=True, return_counts=True)
    assert [x.shape for x in e] == [(0, 3), (0,), (0,)]
    with pytest.raises(RuntimeError, match="There are 0 sized dimensions"):
        tt.unique(tt.zeros(2, 0), dim=0)
    x = np.array([1, 1, 2, 2, 1, 3, 3, 3])
    vals, inv, counts = tt.unique_consecutive(tt.tensor(x), return_inverse=True, return_counts=True)
    assert vals.tolist() == [1, 2, 1, 3] and inv.tolist() == [0, 0, 1, 1, 2, 3, 3, 3] and counts.tolist() == [2, 2, 1, 3]
    m = tt.tensor([[1.0, 2.0], [1.0, 2.0], [0.0, 2.0], [1.0, 2.0]])
    vals, inv = m.unique_consecutive(return_inverse=True, dim=0)
    assert vals.tolist() == [[1.0, 2.0], [0.0, 2.0], [1.0, 2.0]] and inv.tolist() == [0, 0, 1, 2]
    g = tt.tensor(x.reshape(2, 4)).T  # strided, no dim: flattened in row-major order, inverse input-shaped
    vals, inv = tt.unique_consecutive(g, return_inverse=True)
    flat = x.reshape(2, 4).T.reshape(-1)
    assert vals.tolist() == [v for i, v in enumerate(flat) if i == 0 or v != flat[i - 1]] and inv.shape == (4, 2)
    assert tt.unique_consecutive(tt.zeros(0)).shape == (0,)
