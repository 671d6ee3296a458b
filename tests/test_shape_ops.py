"""Shape and creation composites against NumPy: ``repeat_interleave``, ``meshgrid``,
``cartesian_prod``, ``broadcast_to``, ``broadcast_tensors``, ``unflatten``, ``atleast_1d/2d/3d``,
``tensor_split``, ``unbind``, ``rot90``, ``triu_indices``/``tril_indices`` (core/ops/views.py,
core/ops/join.py, core/functional.py, core/creation.py). They are views, index_selects, flips and stacks, so
results match NumPy exactly in every dtype, and autograd records their pieces.
"""
import itertools

import numpy as np
import pytest
from grad_inputs import leaf, noncontig
from tolerances import NP

import tritensor as tt
from tritensor.autograd import gradcheck

DTYPES = [tt.float32, tt.float64, tt.float16, tt.bfloat16, tt.int32, tt.int64, tt.bool]
rng = np.random.default_rng(240)


def _pair(shape, dtype, transposed=False):
    """(tensor, NumPy array of the same values); ``transposed``: a non-contiguous view."""
    a = rng.standard_normal(shape[::-1] if transposed else shape) * 4
    a = (a > 0) if dtype is tt.bool else a.astype(NP[dtype])
    t = tt.tensor(a)
    return (t.t(), a.T) if transposed else (t, a)


def _eq(t, a):
    assert tuple(t.shape) == a.shape, (t.shape, a.shape)
    np.testing.assert_array_equal(t.numpy().astype(np.float64), np.asarray(a).astype(np.float64))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_repeat_interleave_matches_numpy(dtype):
    t, a = _pair((4, 3), dtype, transposed=True)  # non-contiguous
    _eq(t.repeat_interleave(2), np.repeat(a, 2))
    _eq(t.repeat_interleave(3, dim=1), np.repeat(a, 3, axis=1))
    reps = np.array([2, 0, 1, 3])
    _eq(tt.repeat_interleave(t, tt.tensor(reps), dim=0), np.repeat(a, reps, axis=0))
    _eq(t.repeat_interleave(tt.tensor([2], dtype=tt.int32), dim=-1, output_size=6), np.repeat(a, 2, axis=-1))
    _eq(t.repeat_interleave(tt.tensor(0), dim=0), np.repeat(a, 0, axis=0))  # empty
    _eq(tt.repeat_interleave(tt.tensor([1, 0, 3])), np.repeat(np.arange(3), [1, 0, 3]))
    _eq(tt.tensor(5).repeat_interleave(2), np.array([5, 5]))
    with pytest.raises(RuntimeError, match="repeats must have the same size as input along dim, but got "
                                           r"repeats.size\(0\) = 2 and input.size\(1\) = 3"):
        t.repeat_interleave(tt.tensor([1, 2]), dim=1)
    with pytest.raises(RuntimeError, match="repeats can not be negative"):
        t.repeat_interleave(tt.tensor([1, -1, 1, 1]), dim=0)
    with pytest.raises(RuntimeError, match="Repeats must be non-negative"):
        t.repeat_interleave(-1)
    with pytest.raises(RuntimeError, match="allocated size does not match required size"):
        t.repeat_interleave(tt.tensor([1, 1, 1, 1]), dim=0, output_size=5)


def test_grids_broadcasts_and_cartesian_products_match_numpy():
    for dtype in (tt.float32, tt.bfloat16, tt.int64, tt.bool):
        (x, a), (y, b), (z, c) = _pair((3,), dtype), _pair((4,), dtype), _pair((2,), dtype)
        for indexing in ("ij", "xy"):
            for got, want in zip(tt.meshgrid(x, y, z, indexing=indexing), np.meshgrid(a, b, c, indexing=indexing)):
                _eq(got, want)
        _eq(tt.cartesian_prod(x, y, z), np.array(list(itertools.product(a, b, c))))
        m, ma = _pair((1, 3), dtype, transposed=True)
        for got, want in zip(tt.broadcast_tensors(m, x[:, None][:, :1], tt.tensor(np.asarray(a[0]))),
                             np.broadcast_arrays(ma, a[:, None], a[0])):
            _eq(got, want)
        _eq(tt.broadcast_to(m, (2, -1, 3)), np.broadcast_to(ma, (2, 1, 3)))
    with pytest.warns(UserWarning, match="it will be required to pass the indexing argument"):
        g = tt.meshgrid(tt.arange(2), tt.arange(3))
    assert g[0].shape == (2, 3)
    assert tt.meshgrid([tt.tensor(1.0), tt.zeros(0)], indexing="xy")[0].shape == (0, 1)
    with pytest.raises(RuntimeError, match='indexing must be one of "xy" or "ij", but received: foo'):
        tt.meshgrid(tt.arange(2), indexing="foo")
    with pytest.raises(RuntimeError, match="Expect a 1D vector, but got shape"):
        tt.cartesian_prod(tt.zeros(1, 1), tt.zeros(2))


@pytest.mark.parametrize("dtype", [tt.float32, tt.float16, tt.int64, tt.bool], ids=str)
def test_unflatten_atleast_tensor_split_unbind_rot90_match_numpy(dtype):
    t, a = _pair((4, 6), dtype, transposed=True)  # non-contiguous
    _eq(tt.unflatten(t, -1, (3, -1)), a.reshape(4, 3, 2))
    with pytest.raises(RuntimeError, match=r"Provided sizes \[4, 2\] don't multiply up to the size of dim 1"):
        t.unflatten(1, (4, 2))
    for fn, ref in ((tt.atleast_1d, np.atleast_1d), (tt.atleast_2d, np.atleast_2d), (tt.atleast_3d, np.atleast_3d)):
        for x, xa in ((t[0, 0], a[0, 0]), (t[0], a[0]), (t, a), (t[None], a[None])):
            _eq(fn(x), ref(xa))
        got = fn([t[0, 0], t[0]])
        assert isinstance(got, tuple) and len(got) == 2
    for ios in (4, 5, [1, 5], [4, 2, -1], (7,)):
        parts = t.tensor_split(ios, dim=1)
        want = np.array_split(a, ios, axis=1)
        assert len(parts) == len(want)
        for p, w in zip(parts, want):
            _eq(p, w)
    for p, w in zip(tt.tensor_split(t, tt.tensor([2, 3])), np.array_split(a, [2, 3])):
        _eq(p, w)
    with pytest.raises(RuntimeError, match="number of sections must be larger than 0, got 0"):
        t.tensor_split(0)
    for p, w in zip(tt.unbind(t, 1), np.moveaxis(a, 1, 0)):
        _eq(p, w)
    for k in (1, 2, 3, 4, -1):
        _eq(t.rot90(k), np.rot90(a, k))
        _eq(tt.rot90(t[None], k, (2, 0)), np.rot90(a[None], k, (2, 0)))
    with pytest.raises(RuntimeError, match="expected rotation dims to be different, but got dim0 = 0 and dim1 = -2"):
        t.rot90(1, (0, -2))


def test_triu_tril_indices_match_numpy():
    for r, c, k in ((3, 4, 1), (4, 3, -1), (3, 3, 0), (0, 2, 0), (2, 3, 10), (3, 4, -5)):
        _eq(tt.triu_indices(r, c, k), np.stack(np.triu_indices(r, k, c)).reshape(2, -1))
        _eq(tt.tril_indices(r, c, k), np.stack(np.tril_indices(r, k, c)).reshape(2, -1))
    assert tt.tril_indices(3, 3, dtype=tt.int32).dtype is tt.int32 and tt.triu_indices(2, 2).dtype is tt.int64
    with pytest.raises(RuntimeError, match="row must be non-negative, got -1"):
        tt.triu_indices(-1, 3)
    with pytest.raises(RuntimeError, match="not implemented for float32"):
        tt.tril_indices(3, 3, dtype=tt.float32)


def test_shape_ops_gradcheck():
    x, v = noncontig(3, 2), leaf(3)
    assert gradcheck(lambda a: a.repeat_interleave(2, dim=1), (x,), fast_mode=True)
    assert gradcheck(lambda a: tt.repeat_interleave(a, tt.tensor([2, 0, 1]), dim=0), (x,))
    assert gradcheck(lambda a: a.rot90(1), (x,), fast_mode=True)
    assert gradcheck(lambda a: a.tensor_split([1], dim=0)[1] * 2, (x,), fast_mode=True)
    assert gradcheck(lambda a, b: tt.meshgrid(a[:, 0], b, indexing="xy")[1] * tt.cartesian_prod(b, b)[:3, :1],
                     (x, v), fast_mode=True)
    assert gradcheck(lambda a, b: sum(tt.broadcast_tensors(a, b[:2])), (x, v), fast_mode=True)
    assert gradcheck(lambda a: tt.atleast_3d(a) * 1, (x,), fast_mode=True)


@pytest.mark.parametrize("dtype", [tt.float32, tt.bfloat16, tt.int64, tt.bool], ids=str)
def test_diff_matches_numpy(dtype):
    t, a = _pair((4, 6), dtype, transposed=True)
    for n, dim in ((1, -1), (2, 0), (3, 1), (7, 1), (0, 0)):
        _eq(t.diff(n, dim), np.diff(a, n, axis=dim))
    p, pa = _pair((4, 2), dtype)
    q, qa = _pair((4, 1), dtype)
    _eq(tt.diff(t, 2, 1, prepend=p, append=q), np.diff(a, 2, axis=1, prepend=pa, append=qa))
    with pytest.raises(RuntimeError, match="order must be non-negative but got -1"):
        t.diff(-1)
    with pytest.raises(RuntimeError, match="diff expects prepend or append to be the same dimension as input"):
        t.diff(prepend=p[0])
    with pytest.raises(RuntimeError, match="diff expects input to be at least one-dimensional"):
        tt.tensor(1.0).diff()


def test_numpy_keyword_names_where_torch_takes_them():
    """axis= for dim= and keepdims= for keepdim= on torch's native methods and functions (torch's
    argument parser takes NumPy's names there); not on its Python ones (nn.functional, norm, split, flatten)."""
    x = tt.arange(6.0).reshape(2, 3)
    assert x.sum(axis=1, keepdims=True).shape == (2, 1) and tt.mean(x, axis=0).shape == (3,)
    assert x.max(axis=1).values.tolist() == [2.0, 5.0] and tt.cat([x, x], axis=0).shape == (4, 3)
    assert x.softmax(axis=1).shape == (2, 3) and tt.cumsum(x, axis=1).shape == (2, 3)
    assert x.median(axis=1, keepdims=True).values.shape == (2, 1) and tt.std_mean(x, axis=1)[0].shape == (2,)
    assert x.unbind(axis=1)[0].shape == (2,) and tt.tensor_split(x, 2, axis=1)[1].shape == (2, 1)
    assert x.repeat_interleave(2, axis=0).shape == (4, 3) and x.diff(axis=0).shape == (1, 3)
    assert x.chunk(2, axis=0)[0].shape == (1, 3) and x.scatter(axis=1, index=tt.tensor([[0]]), value=9.0)[0, 0] == 9
    with pytest.raises(TypeError, match="got multiple values for argument 'dim'"):
        x.sum(axis=1, dim=1)
    for f in (lambda: tt.nn.functional.softmax(x, axis=1), lambda: x.norm(axis=0), lambda: x.split(1, axis=0),
              lambda: x.flatten(axis=0)):
        with pytest.raises(TypeError, match="unexpected keyword argument 'axis'"):
            f()
