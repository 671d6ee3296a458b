"""Joining and reshaping copies (core/ops/join.py, triton_kernels/join.py, autograd/functions/join.py):
cat/concat, stack, hstack, vstack, flip, roll, repeat, tile, movedim, tril, triu, diag, diagonal (a view), the free
squeeze/unsqueeze/flatten and as_tensor.

These ops move values without arithmetic, so results must equal NumPy's exactly, on every float
dtype and memory layout (tests/layouts.py), odd and empty shapes; then the errors (raised before
any kernel runs) and the gradchecks.
"""
import zlib

import ml_dtypes
import numpy as np
import pytest

import tritensor as tt
from layouts import LAYOUTS, check_layout, make
from tolerances import NP

DTYPES = [tt.float32, tt.float16, tt.bfloat16]


@pytest.fixture(autouse=True)
def _reseed(request):
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def _normal(shape):
    return RNG.standard_normal(shape)


def _host(t):
    a = t.numpy()
    return a.astype(np.float64) if a.dtype == ml_dtypes.bfloat16 else a


def _same(actual, expected, dtype=None):
    assert actual.is_contiguous()
    if dtype is not None:
        assert actual.dtype is dtype
    np.testing.assert_array_equal(_host(actual), expected)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cat_and_stack_match_numpy(dtype, layout):
    a, ra = make((3, 5, 2), dtype, layout, _normal)
    b, rb = make((3, 1, 2), dtype, "contiguous", _normal)
    check_layout(a, layout)
    _same(tt.cat([a, b], 1), np.concatenate([ra, rb], 1), dtype)
    _same(tt.concat((b, a), dim=-2), np.concatenate([rb, ra], 1))
    _same(tt.concatenate([a, a, a], 0), np.concatenate([ra] * 3, 0))
    _same(tt.stack([a, a], 1), np.stack([ra, ra], 1), dtype)
    _same(tt.stack([a], -1), np.stack([ra], -1))
    wide = tt.tensor(RNG.standard_normal((3, 2, 2)))  # float64: the result promotes
    _same(tt.cat([a, wide], 1), np.concatenate([ra, wide.numpy()], 1), tt.float64)


def test_cat_odd_cases_follow_torch():
    x = tt.arange(6, dtype=tt.int32).reshape(2, 3)
    _same(tt.cat([x, tt.ones(2, 0, dtype=tt.int32), x], 1), np.concatenate([x.numpy()] * 2, 1), tt.int32)
    _same(tt.cat([tt.empty(0), x.float()]), x.numpy().astype(np.float32))  # legacy: a 1-D empty tensor is skipped
    assert tt.cat([tt.empty(0), tt.empty(0)]).shape == (0,)
    _same(tt.cat([tt.tensor([True]), tt.tensor([2])]), np.array([1, 2]), tt.int64)
    _same(tt.stack([tt.tensor(1.0), tt.tensor(2.0)]), np.array([1.0, 2.0], np.float32))
    assert tt.stack([tt.zeros(0, 3)] * 2, 1).shape == (0, 2, 3)


def test_hstack_vstack():
    v, m = tt.arange(3.0), tt.arange(6.0).reshape(2, 3)
    _same(tt.hstack([v, v, tt.tensor(7.0)]), np.hstack([v.numpy(), v.numpy(), [7.0]]))
    _same(tt.hstack([m, m[:, :1]]), np.hstack([m.numpy(), m.numpy()[:, :1]]))
    _same(tt.vstack([v, m, v]), np.vstack([v.numpy(), m.numpy(), v.numpy()]))
    _same(tt.vstack([tt.tensor(1.0), tt.tensor(2.0)]), np.vstack([1.0, 2.0]).astype(np.float32))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_flip_roll_repeat_tile_match_numpy(dtype, layout):
    x, r = make((3, 4, 5), dtype, layout, _normal)
    check_layout(x, layout)
    _same(x.flip(0, 2), np.flip(r, (0, 2)), dtype)
    _same(tt.flip(x, [-1]), np.flip(r, -1))
    _same(x.flip(()), r)
    _same(x.roll((1, -7), (0, 2)), np.roll(r, (1, -7), (0, 2)), dtype)
    _same(tt.roll(x, 5), np.roll(r, 5))  # no dims: over the flattened tensor
    _same(x.roll(4, 1), r)  # a whole turn
    _same(x.repeat(2, 1, 3, 2), np.tile(r, (2, 1, 3, 2)), dtype)
    _same(tt.tile(x, (2,)), np.tile(r, (2,)))
    _same(x.tile((2, 1, 1, 1)), np.tile(r, (2, 1, 1, 1)))


def test_int_bool_0d_and_empty_inputs():
    b = tt.tensor([[True, False, True]])
    _same(b.flip(1), np.array([[True, False, True]]), tt.bool)
    _same(b.repeat(2, 2), np.tile(b.numpy(), (2, 2)), tt.bool)
    i = tt.arange(10, dtype=tt.int64).reshape(2, 5)
    _same(i.roll(-2, 1), np.roll(i.numpy(), -2, 1), tt.int64)
    _same(tt.tril(i, 2), np.tril(i.numpy(), 2), tt.int64)
    s = tt.tensor(3.5)
    _same(s.flip(0), np.array(3.5, np.float32))
    _same(s.roll(2), np.array(3.5, np.float32))
    _same(s.repeat(2, 3), np.full((2, 3), 3.5, np.float32))
    e = tt.zeros(0, 3)
    for out in (e.flip(0), e.roll(1, 1), e.tril(), tt.tile(e, (2, 2)), e.repeat(1, 0)):
        assert out.numel() == 0
    assert e.repeat(3, 2).shape == (0, 6) and tt.ones(2, 3).repeat(0, 1).shape == (0, 3)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_tril_triu_diag_match_numpy(dtype, layout):
    x, r = make((2, 5, 7), dtype, layout, _normal)
    for k in (-6, -1, 0, 2, 9):
        _same(x.tril(k), np.tril(r, k), dtype)
        _same(tt.triu(x, k), np.triu(r, k), dtype)
    m, rm = make((5, 7), dtype, layout, _normal)
    v, rv = make((4,), dtype, layout, _normal)
    for k in (-5, -2, 0, 3, 7, 8):
        _same(m.diag(k), np.diag(rm, k), dtype)
        _same(tt.diag(v, k), np.diag(rv, k), dtype)
    assert tt.diag(tt.zeros(0)).shape == (0, 0)
    x3, r3 = make((3, 4, 5), dtype, layout, _normal)
    for offset, d1, d2 in ((0, 0, 1), (1, 0, 2), (-2, 2, 1), (7, 1, 2)):
        view = x3.diagonal(offset, d1, d2)
        assert view._storage is x3._storage  # a view, as in PyTorch
        np.testing.assert_array_equal(_host(view), np.diagonal(r3, offset, d1, d2))


def test_movedim_is_a_view_and_free_squeeze_unsqueeze_flatten():
    x, r = make((2, 3, 4, 5), tt.float32, "sliced", _normal)
    y = tt.movedim(x, (0, 1), (3, 0))
    np.testing.assert_array_equal(y.numpy(), np.moveaxis(r, (0, 1), (3, 0)))
    assert y._storage is x._storage
    np.testing.assert_array_equal(x.moveaxis(-1, 0).numpy(), np.moveaxis(r, -1, 0))
    np.testing.assert_array_equal(x.movedim(1, 1).numpy(), r)
    assert tt.squeeze(tt.ones(1, 3, 1)).shape == (3,) and tt.squeeze(tt.ones(1, 3, 1), 0).shape == (3, 1)
    assert tt.unsqueeze(tt.ones(3), -1).shape == (3, 1)
    np.testing.assert_array_equal(tt.flatten(x, 1, 2).numpy(), r.reshape(2, 12, 5))
    assert tt.flatten(tt.tensor(2.0)).shape == (1,)


def test_as_tensor_shares_memory_when_nothing_changes():
    a = np.arange(6.0).reshape(2, 3)
    t = tt.as_tensor(a)
    a[0, 0] = 42.0
    assert t[0, 0].item() == 42.0 and t.dtype is tt.float64
    assert tt.as_tensor(t) is t
    c = tt.as_tensor(a, dtype=tt.float32)
    a[0, 1] = -1.0
    assert c.dtype is tt.float32 and c[0, 1].item() == 1.0  # a converted copy
    assert tt.as_tensor([[1, 2]]).dtype is tt.int64 and tt.as_tensor(3.0).shape == ()
    assert tt.as_tensor(t, dtype=tt.float16).dtype is tt.float16


def test_errors_name_the_argument_before_any_kernel(no_launch):
    x = tt.zeros(2, 3)
    with pytest.raises(TypeError, match="'tensors'"):
        tt.cat(x)
    with pytest.raises(TypeError, match="'tensors'.*pos 1"):
        tt.cat([x, 1.0])
    with pytest.raises(ValueError, match="non-empty"):
        tt.cat([])
    with pytest.raises(RuntimeError, match="non-empty TensorList"):
        tt.stack([])
    with pytest.raises(RuntimeError, match="Sizes of tensors must match except in dimension 0"):
        tt.cat([x, tt.zeros(2, 4)])
    with pytest.raises(RuntimeError, match="zero-dimensional tensor"):
        tt.cat([tt.tensor(1.0)])
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        tt.cat([x, tt.zeros(3)])
    with pytest.raises(IndexError, match="Dimension out of range"):
        tt.cat([x, x], 2)
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        tt.stack([x, tt.zeros(3, 2)])
    with pytest.raises(RuntimeError, match="dims has duplicates"):
        x.flip(0, -2)
    with pytest.raises(RuntimeError, match="shifts and dimensions must align"):
        x.roll((1, 2), 0)
    with pytest.raises(RuntimeError, match="can not be smaller"):
        x.repeat(2)
    with pytest.raises(TypeError, match="'dims'"):
        tt.tile(x, 1.5)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        tt.zeros(3).tril()
    with pytest.raises(RuntimeError, match="1D or 2D"):
        tt.zeros(1, 1, 1).diag()
    with pytest.raises(RuntimeError, match="diagonal dimensions cannot be identical"):
        x.diagonal(0, 1, -1)
    with pytest.raises(RuntimeError, match="repeated dim"):
        x.movedim((0, 0), (0, 1))
    with pytest.raises(TypeError, match="'input'"):
        tt.flip([1, 2], 0)


def test_join_gradcheck():
    x = tt.tensor(RNG.standard_normal((2, 3))).requires_grad_()
    nc = tt.tensor(RNG.standard_normal((3, 2))).T.requires_grad_()  # a non-contiguous leaf
    cases = [lambda t: tt.cat([t, t * 2], 1), lambda t: tt.stack([t, nc], 0), lambda t: t.flip(1),
             lambda t: t.roll((1, -1), (0, 1)), lambda t: t.repeat(2, 1, 2), lambda t: tt.tile(t, (2,)),
             lambda t: t.tril(), lambda t: t.triu(1), lambda t: t.diag(1), lambda t: t[0].diag(-1),
             lambda t: tt.hstack([t, nc]), lambda t: tt.vstack([t[0], t]), lambda t: t.movedim(0, 1),
             lambda t: t.diagonal(), lambda t: tt.diagonal(t, -1, 1, 0)]
    for f in cases:
        assert tt.autograd.gradcheck(f, (x,))
        assert tt.autograd.gradcheck(f, (nc,))
        assert tt.autograd.gradgradcheck(f, (x,))
    assert tt.autograd.gradcheck(lambda a, b: tt.cat([a, b], 0), (x, nc))
    y = tt.cat([x, nc.float().detach()], 0)
    assert type(y.grad_fn).__name__ == "CatBackward0" and y.dtype is tt.float64


# ----- diag_embed, column_stack --------------------------------------------------------------------
def _np_diag_embed(a, offset, dim1, dim2):
    n = a.shape[-1]
    m = n + abs(offset)
    out = np.zeros(a.shape[:-1] + (m, m), dtype=a.dtype)
    i = np.arange(n)
    out[..., i + max(-offset, 0), i + max(offset, 0)] = a
    return np.moveaxis(out, (-2, -1), (dim1, dim2))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES + [tt.float64], ids=str)
def test_diag_embed_and_column_stack_match_numpy(dtype, layout):
    x, rx = make((2, 3, 4), dtype, layout, _normal)
    check_layout(x, layout)
    for offset, d1, d2 in ((0, -2, -1), (1, 0, 2), (-2, 3, 1), (0, 1, 0)):
        out = tt.diag_embed(x, offset, d1, d2)
        _same(out, _np_diag_embed(rx, offset, d1 % 4, d2 % 4), dtype)
    _same(x.diag_embed(), _np_diag_embed(rx, 0, 2, 3), dtype)
    _same(tt.diag_embed(x[:, :, :0]), np.zeros((2, 3, 0, 0)), dtype)  # empty
    v, rv = make((4,), dtype, layout, _normal)
    c = tt.column_stack([v, x[0].T, v])  # 1-D tensors become columns
    _same(c, np.column_stack([rv, rx[0].T, rv]), dtype)
    _same(tt.column_stack([v[0], v[1]]), np.column_stack([rv[0], rv[1]]), dtype)  # 0-d: one row
    assert tt.column_stack((tt.ones(2, dtype=tt.int64), v[:2])).dtype is dtype  # promotes as cat


def test_diag_embed_and_column_stack_errors(no_launch):
    with pytest.raises(RuntimeError, match="diagonal dimensions cannot be identical 1, 1"):
        tt.diag_embed(tt.ones(2, 3), dim1=1, dim2=1)
    with pytest.raises(IndexError, match="Dimension out of range"):
        tt.diag_embed(tt.ones(2, 3), dim1=5)
    with pytest.raises(RuntimeError, match="column_stack expects a non-empty TensorList"):
        tt.column_stack([])
    with pytest.raises(TypeError, match="must be tuple of Tensors"):
        tt.column_stack([tt.ones(2), 3])


def test_diag_embed_and_column_stack_gradcheck():
    F64 = tt.float64
    x = tt.tensor(RNG.standard_normal((2, 3)), dtype=F64, requires_grad=True)
    assert tt.autograd.gradcheck(lambda t: tt.diag_embed(t, 1, 0, 2), (x,))
    assert tt.autograd.gradgradcheck(lambda t: tt.diag_embed(t) * 2, (x,))
    v = tt.tensor(RNG.standard_normal(3), dtype=F64, requires_grad=True)
    assert tt.autograd.gradcheck(lambda a, b: tt.column_stack([a, b.T, a]), (v, x))
