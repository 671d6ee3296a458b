"""Advanced indexing, index_select, gather, scatter_add, index_add against NumPy
(kernels: triton_kernels/index.py; ops: core/ops/index.py; derivatives: autograd/functions/index.py).

Gathers and puts are copies, so results must match NumPy exactly in every dtype; scatter sums
compare with the per-dtype tolerances of tolerances.py (fp16/bf16 accumulate in fp32, round once).
"""
import numpy as np
import pytest
from tolerances import NP, TOL, assert_close
from grad_inputs import leaf

import tritensor as tt
from tritensor.autograd import gradcheck, gradgradcheck

ALL_DTYPES = [tt.float32, tt.float64, tt.float16, tt.bfloat16, tt.int64, tt.bool]
rng = np.random.default_rng(0)


def _data(shape, dtype):
    a = rng.standard_normal(shape) * 4
    if dtype is tt.bool:
        return a > 0
    return a.astype(np.int64 if dtype is tt.int64 else NP[dtype])


def _t(a, dtype):
    return tt.tensor(np.asarray(a).astype(NP[dtype])) if dtype is not tt.bool else tt.tensor(np.asarray(a, bool))


def _eq(actual, expected):
    a = actual.numpy()
    assert a.shape == expected.shape, (a.shape, expected.shape)
    np.testing.assert_array_equal(a.astype(np.float64) if a.dtype.kind == "V" or str(a.dtype) == "bfloat16" else a,
                                  expected.astype(np.float64) if str(expected.dtype) == "bfloat16" else expected)


# Indices (as NumPy sees them) for a (5, 6, 7) tensor: one or several index tensors, broadcast,
# mixed with slices, separated by a slice (advanced dims go first), negative, duplicates, empty.
CASES = [
    lambda: ([3, 0, -1, 3],),
    lambda: (slice(None), np.array([[5, 0], [-6, 2]])),
    lambda: (np.array([0, 4, 4]), np.array([1, 5, 0])),
    lambda: (np.array([[0], [4]]), slice(1, 5, 2), np.array([1, 6, 0])),  # separated by a slice
    lambda: (slice(None), np.array([0, 2]), np.array([[1], [6]])),          # adjacent, broadcast
    lambda: (None, np.array([0, 4]), slice(None), np.array([1, 6])),       # separated, not leading: B first
    lambda: (slice(1, 4), np.array([[0, 5]]), np.array([6, 1])),            # adjacent, not leading: B in place
    lambda: (Ellipsis, np.array([6, 0])),
    lambda: (None, np.array([1, 2]), slice(None, None, 2)),
    lambda: (np.array([], np.int64),),
    lambda: (slice(None), np.zeros((0, 2), np.int64), 3),
]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_getitem_matches_numpy(dtype):
    a = _data((5, 6, 7), dtype)
    x = _t(a, dtype)
    for case in CASES:
        idx = case()
        tidx = tuple(tt.tensor(i) if isinstance(i, np.ndarray) else i for i in idx)
        _eq(x[tidx], a[idx])
    _eq(x[[1, 4]], a[[1, 4]])  # a bare list is one index tensor (as in PyTorch)


def test_getitem_noncontiguous_input_and_index_int32(poison_allocations):
    a = rng.standard_normal((6, 5, 4)).astype(np.float32)
    x = tt.tensor(a).permute(2, 0, 1)[:, ::2]          # (4, 3, 5), strided
    big = tt.tensor(np.array([[4, 0, 1, 2], [3, 3, 0, -5]], np.int32))
    i = big.t()                                         # (4, 2) int32, non-contiguous
    _eq(x[:, 1:, i], a.transpose(2, 0, 1)[:, ::2][:, 1:, big.numpy().T])
    small = tt.tensor(np.array([[3, 0, 1], [-4, 2, 2]], np.int32)).t()
    _eq(x[small, 2], a.transpose(2, 0, 1)[:, ::2][small.numpy(), 2])


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_mask_indexing(dtype):
    a = _data((4, 3, 5), dtype)
    x = _t(a, dtype)
    m = rng.random((4, 3)) > 0.4
    _eq(x[tt.tensor(m)], a[m])
    m2 = rng.random((3, 5)) > 0.5
    _eq(x[1:, tt.tensor(m2)], a[1:, m2])
    _eq(x[tt.tensor(np.zeros((4, 3, 5), bool))], a[np.zeros((4, 3, 5), bool)])  # nothing selected
    mt = tt.tensor(np.ascontiguousarray(m.T)).t()                            # non-contiguous mask
    _eq(x[mt], a[m])
    _eq(x[[True, False, True, True]], a[[True, False, True, True]])


def test_mask_spanning_several_blocks():
    from tritensor.triton_kernels._common import ELEMENTWISE_BLOCK

    n = 2 * ELEMENTWISE_BLOCK + 77
    a = np.arange(n, dtype=np.int64)
    m = rng.random(n) > 0.3
    _eq(tt.tensor(a)[tt.tensor(m)], a[m])


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_setitem_matches_numpy(dtype):
    a = _data((5, 6, 7), dtype)
    for idx in [([3, 0, -1],), (slice(None), np.array([[5, 0], [-6, 2]])),
                (np.array([[0], [4]]), slice(1, 5, 2), np.array([1, 6, 0]))]:
        x, ref = _t(a, dtype), a.copy()
        tidx = tuple(tt.tensor(i) if isinstance(i, np.ndarray) else i for i in idx)
        v = _data(ref[idx].shape[1:], dtype)  # broadcast over the leading dim
        x[tidx] = _t(v, dtype)
        ref[idx] = v
        _eq(x, ref)
    x, ref = _t(a, dtype), a.copy()
    m = rng.random((5, 6)) > 0.5
    x[tt.tensor(m)] = 1
    ref[m] = 1
    _eq(x, ref)


@pytest.mark.parametrize("reverse", [False, True], ids=["programs-in-order", "programs-last-first"])
@pytest.mark.parametrize("dtype", [tt.float32, tt.int64, tt.int32, tt.bool])
def test_setitem_duplicates_write_the_last_value(dtype, reverse, monkeypatch):
    # Index rows naming one position: NumPy writes the last. A GPU runs programs in no order (the
    # H100 got 8 of 210 elements "wrong" for int64): the kernel resolves duplicates itself, so
    # the last value wins however the programs run. REVERSE_GRID runs them last first.
    from tritensor.runtime import interpreter_gpu
    from tritensor.triton_kernels._common import ELEMENTWISE_BLOCK

    monkeypatch.setattr(interpreter_gpu, "REVERSE_GRID", reverse)
    n = 2 * ELEMENTWISE_BLOCK + 9  # rows in three programs
    idx = rng.integers(0, 7, n)
    idx[[0, ELEMENTWISE_BLOCK, n - 1]] = 3  # position 3: first, middle and last program
    v = (np.arange(n) % 100 + 1).astype(np.float64)
    if dtype is tt.bool:
        v = (np.arange(n) % 3) == 0
    x, ref = _t(np.zeros(7), dtype), np.zeros(7).astype(NP[dtype])
    x[tt.tensor(idx)] = _t(v, dtype)
    ref[idx] = v.astype(NP[dtype])
    _eq(x, ref)
    # two index tensors, broadcast: (i, j) pairs repeat too; the rows keep a trailing dim
    x2, ref2 = _t(np.zeros((3, 4, 2)), dtype), np.zeros((3, 4, 2)).astype(NP[dtype])
    i, j = np.array([[0], [2], [0]]), np.array([1, 1, 3])
    w = _data((3, 3, 2), dtype)
    x2[tt.tensor(i), tt.tensor(j)] = _t(w, dtype)
    ref2[i, j] = w.astype(NP[dtype])
    _eq(x2, ref2)


def test_setitem_noncontiguous_target_and_version():
    a = rng.standard_normal((4, 6)).astype(np.float32)
    base = tt.tensor(a)
    x = base.t()                       # (6, 4) view, written through
    v0 = base._version
    x[[5, 0], 1:3] = tt.tensor([[1.0, 2.0], [3.0, 4.0]])
    ref = a.T.copy()
    ref[[5, 0], 1:3] = [[1, 2], [3, 4]]
    _eq(base.t(), ref)
    assert base._version > v0


def test_out_of_range_raises_before_any_kernel(no_launch, monkeypatch):
    """Host index tensors (and lists) are checked on the host, before any kernel, in every mode
    (device index tensors: tests/test_device_index_checks.py)."""
    import tritensor.core.ops.index as ix

    def T(v, **kw):
        return tt.tensor(v, device="cpu", **kw)

    monkeypatch.setattr(ix, "_bounds_values", lambda t: (int(t.numpy().min()), int(t.numpy().max())))
    x = tt.zeros(3, 4, device="cpu")
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 3"):
        x[T([0, 5])]
    with pytest.raises(IndexError, match="index -5 is out of bounds for dimension 1 with size 4"):
        x[:, [0, -5]]
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 1 with size 4"):
        x[[0, 1], [1, 4]] = 1.0
    with pytest.raises(IndexError, match="index_select\\(\\): index -1 is out of bounds"):
        tt.index_select(x, 0, T([-1]))
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 1 with size 4"):
        x.gather(1, T([[4]]))
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        x.scatter_add(0, T([[3]]), tt.ones(1, 1, device="cpu"))
    with pytest.raises(IndexError, match="The shape of the mask \\[3, 3\\] at index 1 does not match the shape "
                                         "of the indexed tensor \\[3, 4\\] at index 1"):
        x[tt.zeros(3, 3, dtype=tt.bool, device="cpu")]
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool tensors"):
        x[T([0.0])]
    with pytest.raises(RuntimeError, match="gather\\(\\): Expected dtype int64 for index"):
        x.gather(0, T([[0]], dtype=tt.int32))
    with pytest.raises(RuntimeError, match="shape mismatch: value tensor of shape \\[3\\] cannot be broadcast"):
        x[[0, 1]] = tt.ones(3, device="cpu")
    assert x.numpy().sum() == 0  # nothing was written


def test_bounds_check_runs_on_the_device_reduction():
    # Without the test hook above, the min/max of a host index come from tritensor.amin/amax kernels.
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 0 with size 3"):
        tt.zeros(3, device="cpu")[tt.tensor([[1, 7], [0, 2]], device="cpu").t()]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_index_select_and_gather(dtype):
    a = _data((4, 5, 3), dtype)
    x = _t(a, dtype)
    i = np.array([4, 0, 0, 2])
    _eq(tt.index_select(x, 1, tt.tensor(i)), np.take(a, i, axis=1))
    _eq(x.index_select(-1, tt.tensor(np.array([2], np.int32))), a[..., [2]])
    _eq(x.index_select(0, tt.tensor(np.array([], np.int64))), a[[]])
    g = rng.integers(0, 5, (3, 4, 2))
    _eq(x.gather(1, tt.tensor(g)), np.take_along_axis(a[:3, :, :2], g, axis=1))
    xt = _t(a, dtype).permute(2, 0, 1)  # non-contiguous input and index
    gt = tt.tensor(rng.integers(0, 3, (2, 4, 5))).transpose(1, 2)[:, :3]
    _eq(tt.gather(xt, 0, gt), np.take_along_axis(a.transpose(2, 0, 1)[:, :3, :4], gt.numpy(), axis=0))


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64, tt.float16, tt.bfloat16, tt.int64])
def test_scatter_add_and_index_add_accumulate_duplicates(dtype):
    a = _data((4, 5), dtype)
    src = _data((6, 5), dtype)
    idx = rng.integers(0, 4, (6, 5))
    ref = a.astype(np.float64)
    np.add.at(ref, (idx, np.arange(5)[None, :]), src.astype(np.float64))
    out = tt.scatter_add(_t(a, dtype), 0, tt.tensor(idx), _t(src, dtype))
    assert_close(out, ref if dtype is not tt.int64 else ref.astype(np.int64), dtype)
    ii = np.array([3, 3, 0, 3, 1, 0])
    ref = a.astype(np.float64)
    np.add.at(ref, ii, src.astype(np.float64))
    x = _t(a, dtype)
    y = x.index_add_(0, tt.tensor(ii), _t(src, dtype))
    assert y is x
    assert_close(x, ref if dtype is not tt.int64 else ref.astype(np.int64), dtype)
    # the out-of-place forms leave their input alone; alpha scales the source, as torch's does
    x = _t(a, dtype)
    ref = a.astype(np.float64)
    np.add.at(ref, ii, 2 * src.astype(np.float64))
    out = tt.index_add(x, 0, tt.tensor(ii), _t(src, dtype), alpha=2)
    assert_close(out, ref if dtype is not tt.int64 else ref.astype(np.int64), dtype)
    assert_close(x.index_add(0, tt.tensor(ii), _t(src, dtype), alpha=2), out.numpy().astype(np.float64), dtype)
    assert_close(x, a.astype(np.float64), dtype)
    # scatter_add_ writes into its input
    ref = a.astype(np.float64)
    np.add.at(ref, (idx, np.arange(5)[None, :]), src.astype(np.float64))
    z = _t(a, dtype)
    assert z.scatter_add_(0, tt.tensor(idx), _t(src, dtype)) is z
    assert_close(z, ref if dtype is not tt.int64 else ref.astype(np.int64), dtype)


@pytest.mark.parametrize("fn", [
    lambda x: x.index_select(1, tt.tensor([3, 0, 3, 3])),
    lambda x: x.gather(0, tt.tensor([[0, 2, 2, 2], [0, 0, 1, 2]])),
    lambda x: x[[2, 0, 2], 1:],
    lambda x: x[tt.tensor([[1, 1], [0, 2]]), tt.tensor([3, 0])],
    lambda x: x.t()[[1, 1]],
    lambda x: x[x.detach() > 0],
])
def test_gradcheck(fn):
    x = tt.tensor(rng.standard_normal((3, 4)), dtype=tt.float64, requires_grad=True)
    assert gradcheck(fn, (x,))


def test_scatter_add_and_index_add_gradcheck():
    """These once had no derivative, so gradients to their inputs were dropped silently."""
    x, src, wide, source = leaf(2, 3), leaf(2, 2), leaf(2, 4), leaf(2, 3)
    idx = tt.tensor([[0, 2], [1, 1]])
    rows = tt.tensor([0, 0])  # duplicate rows
    assert gradcheck(lambda a, b: a.scatter_add(1, idx, b), (x, src))
    assert gradcheck(lambda a, b: tt.scatter_add(a, 1, idx, b), (x, wide), fast_mode=True)  # src wider: zeros
    assert gradcheck(lambda a, b: (a * 1).scatter_add_(1, idx, b), (x, src), fast_mode=True)
    assert gradcheck(lambda a, b: tt.index_add(a, 0, rows, b, alpha=2), (x, source))
    assert gradcheck(lambda a, b: (a * 1).index_add_(0, rows, b, alpha=-1.5), (x, source), fast_mode=True)
    assert gradcheck(lambda a, b: a.t().index_add(1, rows, b.t()), (x, source), fast_mode=True)  # strided
    assert gradgradcheck(lambda a, b: a.scatter_add(1, idx, b) ** 2, (x, src), fast_mode=True)
    assert gradgradcheck(lambda a, b: tt.index_add(a, 0, rows, b) ** 2, (x, source), fast_mode=True)
    y = x.scatter_add(1, idx, src)
    assert type(y.grad_fn).__name__ == "ScatterAddBackward0" and y.requires_grad
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        x.index_add_(0, rows, source)


def test_backward_accumulates_duplicates_low_precision():
    for dtype in (tt.float16, tt.bfloat16, tt.float32):
        x = tt.zeros(3, 2, dtype=dtype, requires_grad=True)
        x[[0, 2, 0, 0]].sum().backward()
        assert x.grad.dtype is dtype
        assert_close(x.grad, np.array([[3, 3], [0, 0], [1, 1]]), dtype)


def test_setitem_on_tensor_requiring_grad_raises():
    x = tt.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="not differentiable"):
        x[[0]] = 1.0
    with tt.no_grad():
        x[[0]] = 1.0
    assert x.detach().numpy()[0] == 1 and TOL


# ----- derivatives of x[idx] = v -------------------------------------------------------------
def test_setitem_gradcheck():
    x, v = leaf(3, 4), leaf(2)

    def f(a, b):
        z = a * 1
        z[1, 1:3] = b * 3
        return z

    assert gradcheck(f, (x, v))
