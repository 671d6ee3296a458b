"""torch's shape functions beyond the basic views (core/ops/shape_more.py): splits and stacks by
axis, flips by axis, ravel, the in-place layout changes, flat indexing (take/put), the block
builders (diagflat, block_diag, vander, combinations), unravel_index, the scatters into a view,
the *_copy forms and the size-list splits, each against NumPy on every layout and dtype, odd and
empty shapes, torch's errors, and the gradchecks."""
import itertools
import zlib

import numpy as np
import pytest

import tritensor as tt
from layouts import LAYOUTS, check_layout, make
from tolerances import FLOAT_DTYPES, NP, assert_close


@pytest.fixture(autouse=True)
def _reseed(request):
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


# every layout in fp32 (and fp64 for quantile's two dtypes), each other dtype on a layout of its own:
# the kernels under these composites are checked on every (dtype, layout) pair in their own files
CASES = [(tt.float32, layout) for layout in LAYOUTS] + [(tt.float64, "transposed"), (tt.float16, "sliced"),
                                                       (tt.bfloat16, "expanded")]


def _normal(shape):
    return RNG.standard_normal(shape)


def _exact(actual, expected, dtype):
    assert actual.dtype is dtype, (actual.dtype, dtype)
    assert tuple(actual.shape) == np.shape(expected), (tuple(actual.shape), np.shape(expected))
    assert_close(actual, expected, dtype, "exact")


@pytest.mark.parametrize("dtype,layout", CASES, ids=str)
def test_splits_stacks_flips_ravel_match_numpy(dtype, layout):
    x, r = make((4, 6, 2), dtype, layout, _normal)
    check_layout(x, layout)
    for got, want in ((tt.vsplit(x, 2), np.vsplit(r, 2)), (tt.hsplit(x, [1, 4]), np.hsplit(r, [1, 4])),
                      (tt.dsplit(x, 2), np.dsplit(r, 2)), (x.hsplit(3), np.hsplit(r, 3))):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _exact(g, w, dtype)
    _exact(tt.fliplr(x), np.fliplr(r), dtype)
    _exact(x.flipud(), np.flipud(r), dtype)
    _exact(tt.ravel(x), r.ravel(), dtype)
    _exact(x.ravel(), r.ravel(), dtype)
    v, rv = make((5,), dtype, layout, _normal)
    _exact(tt.dstack([x, x]), np.dstack([r, r]), dtype)
    _exact(tt.dstack((v, v, v)), np.dstack((rv, rv, rv)), dtype)
    _exact(tt.row_stack([v, v]), np.vstack([rv, rv]), dtype)
    _exact(tt.hsplit(v, 5)[4], np.hsplit(rv, 5)[4], dtype)
    wide = tt.tensor(np.ones((4, 6, 1)))  # float64: dstack promotes as cat
    _exact(tt.dstack([x, wide]), np.dstack([r, np.ones((4, 6, 1))]), tt.float64)
    e = tt.zeros(0, 3, dtype=dtype)
    _exact(tt.ravel(e), np.zeros(0), dtype)
    _exact(tt.flipud(e), np.zeros((0, 3)), dtype)
    _exact(tt.dstack([e, e]), np.zeros((0, 3, 2)), dtype)


def test_split_and_flip_errors_follow_torch():
    v, x = tt.arange(5.), tt.arange(6.).reshape(2, 3)
    with pytest.raises(RuntimeError, match="torch.vsplit requires a tensor with at least 2 dimension, but got a "
                                           "tensor with 1 dimensions!"):
        tt.vsplit(v, 2)
    with pytest.raises(RuntimeError, match="torch.hsplit attempted to split along dimension 0, but the size of the "
                                           "dimension 5 is not divisible by the split_size 2!"):
        tt.hsplit(v, 2)
    with pytest.raises(RuntimeError, match="torch.dsplit requires a tensor with at least 3 dimension"):
        tt.dsplit(x, 1)
    with pytest.raises(RuntimeError, match=r"Input must be >= 2-d\."):
        tt.fliplr(v)
    with pytest.raises(RuntimeError, match=r"Input must be >= 1-d\."):
        tt.flipud(tt.tensor(1.))
    with pytest.raises(TypeError, match="argument 'input' must be Tensor"):
        tt.ravel([1, 2])
    with pytest.raises(RuntimeError, match="split_with_sizes expects split_sizes to sum exactly to 5"):
        tt.split_with_sizes(v, [2, 2])
    with pytest.raises(RuntimeError, match=r"t\(\) expects a tensor with <= 2 dimensions, but self is 3D"):
        tt.t(tt.zeros(2, 2, 2))
    with pytest.raises(RuntimeError, match=r"size \{\[4\]\} is not expandable to size \{\[2, 3\]\}\."):
        x.sum_to_size(4)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [tt.int32, tt.int64], ids=str)
def test_inplace_layout_and_triangle_forms(dtype):
    base = np.arange(24).reshape(2, 3, 4).astype(NP[dtype])
    x = tt.tensor(base)
    assert x.transpose_(0, 2) is x and tuple(x.shape) == (4, 3, 2)
    _exact(x, base.transpose(2, 1, 0), dtype)
    x.swapaxes_(0, 1)
    _exact(x, base.transpose(1, 2, 0), dtype)
    x.swapdims_(0, 1)
    x.unsqueeze_(1)
    _exact(x, base.transpose(2, 1, 0)[:, None], dtype)
    x.squeeze_(1)
    x.squeeze_()
    _exact(x, base.transpose(2, 1, 0), dtype)
    m = tt.tensor(base[0])
    m.t_()
    _exact(m, base[0].T, dtype)
    _exact(tt.t(m), base[0], dtype)
    _exact(tt.t(tt.tensor(base[0, 0])), base[0, 0], dtype)  # 1-D: as it is
    y = tt.tensor(base[1]).t()  # strided: written through its strides
    assert y.tril_(1) is y
    _exact(y, np.tril(base[1].T, 1), dtype)
    z = tt.tensor(base)
    z.triu_(-1)
    _exact(z, np.triu(base, -1), dtype)
    assert z.ndimension() == 3 and z.dim_order() == (0, 1, 2)
    assert z.permute(2, 0, 1).dim_order() == (1, 2, 0)
    leaf = tt.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place "
                                           "operation."):
        leaf.t_()
    with tt.no_grad():
        assert tuple(leaf.t_().shape) == (3, 2)  # outside autograd, as torch
    leaf = tt.ones(2, 3, requires_grad=True)
    b = leaf * 2  # a non-leaf changes layout in place and its gradient follows back
    b.t_()
    b.unsqueeze_(0)
    (b * tt.tensor([1.0, 2.0, 3.0]).reshape(1, 3, 1)).sum().backward()
    assert leaf.grad.tolist() == [[2.0, 4.0, 6.0], [2.0, 4.0, 6.0]]


@pytest.mark.parametrize("dtype,layout", CASES, ids=str)
def test_take_put_diagflat_match_numpy(dtype, layout):
    x, r = make((3, 5), dtype, layout, _normal)
    idx = np.array([[0, 14, -1], [7, 7, -15]])
    _exact(tt.take(x, tt.tensor(idx)), np.take(r, idx), dtype)
    _exact(x.take(tt.tensor([], dtype=tt.int64)), np.zeros(0), dtype)
    src = RNG.standard_normal(4).astype(NP[dtype])
    want = r.copy()
    np.put(want, [1, 13, -2, 0], src.astype(np.float64))
    _exact(tt.put(x, tt.tensor([1, 13, -2, 0]), tt.tensor(src)), want, dtype)
    y = x.clone() if layout != "expanded" else x.contiguous()
    y = y.t().contiguous().t() if layout == "transposed" else y
    y.put_(tt.tensor([1, 13, -2, 0]), tt.tensor(src))
    _exact(y, want, dtype)
    acc = r.copy().ravel()
    np.add.at(acc, [2, 2, 4], np.array([1., 2., 3.]).astype(NP[dtype]).astype(np.float64))
    z = x.clone()  # contiguous() of a contiguous x is x itself
    z.put_(tt.tensor([2, 2, 4]), tt.tensor(np.array([1., 2., 3.]).astype(NP[dtype])), accumulate=True)
    assert_close(z, acc.reshape(3, 5), dtype, "rounded_terms", k=3)
    _exact(tt.diagflat(x), np.diagflat(r), dtype)
    _exact(x.diagflat(-2), np.diagflat(r, -2), dtype)
    with pytest.raises(RuntimeError, match="take\\(\\): Expected a long tensor for index, but got Float"):
        tt.take(x, tt.tensor([0.]))
    with pytest.raises(IndexError, match="out of range: tried to access index 15 on a tensor of 15 elements."):
        tt.take(x, tt.tensor([15]))
    with pytest.raises(IndexError, match="put_\\(\\): Expected source and index to have the same number of elements"):
        x.contiguous().put_(tt.tensor([1]), tt.tensor([1., 2.], dtype=dtype))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [tt.int32, tt.int64], ids=str)
def test_block_diag_vander_combinations_unravel_match_numpy(dtype):
    a = RNG.integers(-3, 4, (2, 3)).astype(NP[dtype])
    b = RNG.integers(-3, 4, (3,)).astype(NP[dtype])
    c = np.array(5).astype(NP[dtype])
    want = np.zeros((4, 7))
    want[:2, :3], want[2, 3:6], want[3, 6] = a, b, c
    _exact(tt.block_diag(tt.tensor(a), tt.tensor(b), tt.tensor(c)), want, dtype)
    _exact(tt.block_diag(tt.tensor(a), tt.zeros(0, 2, dtype=dtype)), np.pad(a.astype(np.float64), ((0, 0), (0, 2))),
           dtype)
    _exact(tt.block_diag(tt.tensor(a), tt.ones(1, 1, dtype=tt.float64)),
           np.block([[a, np.zeros((2, 1))], [np.zeros((1, 3)), np.ones((1, 1))]]), tt.float64)
    xs = np.array([2, -1, 3, 0, 1]).astype(NP[dtype])
    out_dtype = dtype if dtype.is_floating_point else tt.int64
    _exact(tt.vander(tt.tensor(xs)), np.vander(xs.astype(np.float64)), out_dtype)
    _exact(tt.vander(tt.tensor(xs), N=3, increasing=True), np.vander(xs.astype(np.float64), 3, increasing=True),
           out_dtype)
    _exact(tt.vander(tt.tensor(xs), N=0), np.zeros((5, 0)), out_dtype)
    _exact(tt.vander(tt.tensor(xs)[::2], N=1), np.ones((3, 1)), out_dtype)
    for r, rep in ((2, False), (3, True), (1, False), (5, False)):
        gen = itertools.combinations_with_replacement if rep else itertools.combinations
        want = np.array([[xs[i] for i in c] for c in gen(range(5), r)], dtype=np.float64).reshape(-1, r)
        _exact(tt.combinations(tt.tensor(xs), r, with_replacement=rep), want.reshape(-1) if r == 1 else want, dtype)
    _exact(tt.combinations(tt.tensor(xs), 6), np.zeros((0, 6)), dtype)
    _exact(tt.combinations(tt.tensor(xs), 0), np.zeros(0), dtype)
    flat = np.array([[0, 5, 23], [-1, 17, 12]])
    got = tt.unravel_index(tt.tensor(flat), (2, 3, 4))
    for g, w in zip(got, np.unravel_index(flat % 24, (2, 3, 4))):
        _exact(g, w, tt.int64)
    got = tt.unravel_index(tt.tensor(7, dtype=tt.int32), 9)
    assert len(got) == 1 and got[0].item() == 7 and got[0].dtype is tt.int64


def test_builders_errors_follow_torch():
    x = tt.arange(6.).reshape(2, 3)
    with pytest.raises(RuntimeError, match="torch.block_diag: Input tensors must have 2 or fewer dimensions. "
                                           "Input 0 has 3 dimensions"):
        tt.block_diag(tt.ones(2, 2, 2))
    with pytest.raises(RuntimeError, match="x must be a one-dimensional tensor."):
        tt.vander(x)
    with pytest.raises(RuntimeError, match="N must be non-negative."):
        tt.vander(tt.arange(3.), N=-1)
    with pytest.raises(RuntimeError, match=r"Expect a 1D vector, but got shape \[2, 3\]"):
        tt.combinations(x)
    with pytest.raises(RuntimeError, match="Expect a non-negative number, but got -1"):
        tt.combinations(tt.arange(3.), r=-1)
    with pytest.raises(TypeError, match="expected 'indices' to be integer dtype, but got tritensor.float32"):
        tt.unravel_index(tt.tensor([1.]), (2,))
    with pytest.raises(ValueError, match=r"'shape' cannot have negative values, but got \(2, -3\)"):
        tt.unravel_index(tt.tensor(4), (2, -3))
    with pytest.raises(ValueError, match=r"'indices' must be in range \[-6, 5\]"):
        tt.unravel_index(tt.tensor([6]), (2, 3))


@pytest.mark.parametrize("dtype,layout", CASES, ids=str)
def test_scatters_copies_and_size_splits_match_numpy(dtype, layout):
    x, r = make((4, 5), dtype, layout, _normal)
    s = RNG.standard_normal(5).astype(NP[dtype])
    want = r.copy()
    want[2] = s
    _exact(tt.select_scatter(x, tt.tensor(s), 0, 2), want, dtype)
    s2 = RNG.standard_normal((4, 2)).astype(NP[dtype])
    want = r.copy()
    want[:, 1:5:2] = s2
    _exact(x.slice_scatter(tt.tensor(s2), 1, 1, None, 2), want, dtype)
    s3 = RNG.standard_normal(3).astype(NP[dtype])
    want = r.copy()
    want[[0, 1, 2], [2, 3, 4]] = s3
    _exact(tt.diagonal_scatter(x, tt.tensor(s3), 2), want, dtype)
    assert x.select(0, 2).tolist() == tt.tensor(r[2].astype(NP[dtype])).tolist()  # input untouched
    with pytest.raises(RuntimeError, match=r"expected src to have a size equal to the slice of self. src size = "
                                           r"\[3\], slice size = \[4\]"):
        tt.select_scatter(x, tt.ones(3, dtype=dtype), 1, 0)
    copies = {
        "diagonal_copy": (lambda t: tt.diagonal_copy(t, 1), np.diagonal(r, 1)),
        "expand_copy": (lambda t: tt.expand_copy(t[:1], (3, 5)), np.broadcast_to(r[:1], (3, 5))),
        "permute_copy": (lambda t: tt.permute_copy(t, (1, 0)), r.T),
        "select_copy": (lambda t: tt.select_copy(t, 1, 3), r[:, 3]),
        "slice_copy": (lambda t: tt.slice_copy(t, 1, 1, 4, 2), r[:, 1:4:2]),
        "squeeze_copy": (lambda t: tt.squeeze_copy(t[:1]), r[0]),
        "t_copy": (lambda t: tt.t_copy(t), r.T),
        "transpose_copy": (lambda t: tt.transpose_copy(t, 0, 1), r.T),
        "unfold_copy": (lambda t: tt.unfold_copy(t, 1, 2, 2), np.stack([r[:, 0:2], r[:, 2:4]], 1)),
        "unsqueeze_copy": (lambda t: tt.unsqueeze_copy(t, 1), r[:, None]),
        "view_copy": (lambda t: tt.view_copy(t.contiguous(), (5, 4)), r.reshape(5, 4)),
        "alias_copy": (lambda t: tt.alias_copy(t), r),
        "detach_copy": (lambda t: tt.detach_copy(t), r),
        "narrow_copy": (lambda t: t.narrow_copy(0, 1, 2), r[1:3]),
    }
    for name, (fn, want) in copies.items():
        got = fn(x)
        _exact(got, want, dtype)
        assert got.is_contiguous() and got.data_ptr() != x.data_ptr(), name
    for name, got in (("unbind_copy", tt.unbind_copy(x, 1)), ("split_copy", tt.split_copy(x, 2, 1)),
                      ("split_with_sizes_copy", tt.split_with_sizes_copy(x, [1, 4], 1))):
        want = {"unbind_copy": [r[:, i] for i in range(5)], "split_copy": np.split(r, [2, 4], 1),
                "split_with_sizes_copy": np.split(r, [1], 1)}[name]
        assert len(got) == len(want), name
        for g, w in zip(got, want):
            _exact(g, w, dtype)
    for got, want in ((tt.split_with_sizes(x, [1, 0, 3]), np.split(r, [1, 1])), (x.unsafe_split(3), np.split(r, [3])),
                      (tt.unsafe_chunk(x, 2, 1), np.split(r, [3], 1)),
                      (x.unsafe_split_with_sizes([2, 3], 1), np.split(r, [2], 1)),
                      (x.split_with_sizes([4], 0), [r])):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _exact(g, w, dtype)
    assert_close(x.sum_to_size(1, 5), r.sum(0, keepdims=True), dtype, "rounded_terms", k=4)
    assert_close(x.sum_to_size(5), r.sum(0), dtype, "rounded_terms", k=4)
    assert_close(x.sum_to_size((4, 1)), r.sum(1, keepdims=True), dtype, "rounded_terms", k=5)
    _exact(x.sum_to_size(4, 5), r, dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [tt.int64], ids=str)
def test_as_strided_family_matches_numpy(dtype):
    base = np.arange(12).astype(NP[dtype])
    x = tt.tensor(base)
    item = base.itemsize
    for size, stride, off in (((3, 2), (2, 1), 0), ((2, 3), (1, 4), 1), ((4,), (3,), None), ((2, 2), (0, 1), 5),
                              ((0, 3), (1, 1), 2), ((), (), 11)):
        want = np.lib.stride_tricks.as_strided(base[off or 0:], size, tuple(st * item for st in stride))
        v = x.as_strided(size, stride, off)
        assert v.data_ptr() == x.data_ptr() + (off or 0) * item  # a view
        assert_close(v, want, dtype, "exact")
        assert_close(tt.as_strided_copy(x, size, stride, off), want, dtype, "exact")
        assert tt.as_strided_copy(x, size, stride, off).data_ptr() != x.data_ptr() or want.size == 0
    sliced = x[1::2]  # offset 1, stride 2: as_strided reads its storage, from its own offset by default
    assert_close(tt.as_strided(sliced, (2, 2), (2, 1)), np.array([[1, 2], [3, 4]]), dtype, "exact")
    src = np.arange(100, 103).astype(NP[dtype])
    want = base.copy()
    want[1:7:2] = src
    assert_close(tt.as_strided_scatter(x, tt.tensor(src), (3,), (2,), 1), want, dtype, "exact")
    # a strided input: the positions are those of its contiguous copy, as torch's
    assert_close(x.reshape(3, 4).t().as_strided_scatter(tt.tensor(src[:2]), (2,), (5,)),
                 _as_strided_scatter_ref(base.reshape(3, 4).T, src[:2], (2,), (5,)), dtype, "exact")
    y = tt.tensor(base)
    assert y.as_strided_((2, 3), (1, 2), 1) is y and tuple(y.stride()) == (1, 2)
    assert_close(y, np.lib.stride_tricks.as_strided(base[1:], (2, 3), (item, 2 * item)), dtype, "exact")
    n = x.new_empty_strided((2, 3), (1, 2))
    assert tuple(n.shape) == (2, 3) and n.stride() == (1, 2) and n.dtype is dtype and n.device == x.device
    with pytest.raises(RuntimeError, match=r"as_strided: Negative strides are not supported at the moment, got "
                                           r"strides: \[1, -1\]"):
        x.as_strided((2, 2), (1, -1))
    with pytest.raises(RuntimeError, match=r"setStorage: sizes \[4, 4\], strides \[4, 1\], storage offset 0, and "
                                           rf"itemsize {item} requiring a storage size of {16 * item} are out of "
                                           r"bounds "
                                           rf"for storage of size {12 * item}"):
        x.as_strided((4, 4), (4, 1), 0)
    with pytest.raises(RuntimeError, match="mismatch in length of strides and shape"):
        x.as_strided((2,), (1, 2))


def _as_strided_scatter_ref(a, src, size, stride):
    """NumPy's as_strided_scatter: src written into the strided view of a contiguous copy of a."""
    out = np.ascontiguousarray(a).copy()
    view = np.lib.stride_tricks.as_strided(out, size, tuple(st * out.itemsize for st in stride))
    view[...] = src
    return out


def test_strided_factories_follow_torch():
    t = tt.empty_strided((2, 3), (1, 2))
    assert tuple(t.shape) == (2, 3) and t.stride() == (1, 2) and t.dtype is tt.get_default_dtype()
    t.copy_(tt.tensor([[1., 2., 3.], [4., 5., 6.]]))
    assert t.tolist() == [[1., 2., 3.], [4., 5., 6.]]
    assert tt.empty_strided((2, 0), (1, 1), dtype=tt.int32).numel() == 0
    p = tt.empty_permuted((2, 3, 4, 5), (0, 2, 3, 1))
    assert p.stride() == (60, 1, 15, 3) and p.is_contiguous(memory_format=tt.channels_last)
    assert tt.empty_permuted((2, 0, 3), (2, 1, 0)).stride() == (1, 2, 2)
    with pytest.raises(RuntimeError, match=r"dimensionality of sizes \(2\) must match dimensionality of strides "
                                           r"\(1\)"):
        tt.empty_strided((2, 3), (1,))
    with pytest.raises(RuntimeError, match="Number of dimensions in size does not match the length of the "
                                           "physical_layout"):
        tt.empty_permuted((2, 3, 4), (0, 2))
    s = tt.scalar_tensor(3)
    assert s.ndim == 0 and s.dtype is tt.get_default_dtype() and s.item() == 3
    assert tt.scalar_tensor(2, dtype=tt.int64).dtype is tt.int64
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        r = tt.range(1, 2, 0.25)
    assert_close(r, np.array([1.0, 1.25, 1.5, 1.75, 2.0]), tt.float32)
    with pytest.warns(UserWarning):
        assert tt.range(5, 1, -2).tolist() == [5.0, 3.0, 1.0]
    buf = bytearray(np.array([1.5, -2.0, 3.25], dtype=np.float32).tobytes())
    f = tt.frombuffer(buf, dtype=tt.float32)
    assert f.tolist() == [1.5, -2.0, 3.25] and f.device == tt.device("cpu")
    f[0] = 7.0  # the buffer's memory, shared
    assert np.frombuffer(buf, dtype=np.float32)[0] == 7.0
    assert tt.frombuffer(buf, dtype=tt.float32, count=1, offset=4).tolist() == [-2.0]
    with pytest.raises(ValueError, match=r"buffer length \(6 bytes\) after offset \(0 bytes\) must be a multiple "
                                         r"of element size \(4\)"):
        tt.frombuffer(bytearray(6), dtype=tt.float32)
    with pytest.raises(ValueError, match=r"offset \(8 bytes\) must be non-negative and no greater than buffer length"):
        tt.frombuffer(bytearray(8), dtype=tt.float32, offset=8)
    a = np.arange(3.0)
    shared = tt.asarray(a)
    a[0] = 9.0
    assert shared.tolist() == [9.0, 1.0, 2.0] and shared.dtype is tt.float64
    assert tt.asarray(a, copy=True).data_ptr() != shared.data_ptr()
    x = tt.ones(2)
    assert tt.asarray(x) is x and tt.asarray(x, copy=True) is not x
    assert tt.asarray(x, dtype=tt.float64).dtype is tt.float64
    assert tt.asarray([[1, 2]]).dtype is tt.int64 and tt.asarray(3.5).dtype is tt.get_default_dtype()
    with pytest.raises(ValueError, match="can't alias tensor with dtype 'Float' into dtype 'Double'."):
        tt.asarray(x, dtype=tt.float64, copy=False)
    with pytest.raises(ValueError, match="can't alias arbitrary sequence into a tensor."):
        tt.asarray([1, 2], copy=False)


@pytest.mark.parametrize("dtype", [tt.float32, tt.bfloat16, tt.int32], ids=str)
def test_resize_and_new_follow_torch(dtype):
    base = np.arange(6).astype(NP[dtype])
    y = tt.tensor(base)
    assert y.resize_(2, 2) is y and tuple(y.shape) == (2, 2) and y.stride() == (2, 1)
    assert_close(y, base[:4].reshape(2, 2), dtype, "exact")  # the storage kept: the first elements
    y.resize_((3, 3))  # grown: a larger storage holding the old elements first
    assert tuple(y.shape) == (3, 3) and y.is_contiguous()
    assert_close(y.reshape(-1)[:6], base, dtype, "exact")
    z = tt.tensor(base)[2:]  # an offset is kept
    z.resize_(2)
    assert_close(z, base[2:4], dtype, "exact")
    assert tuple(tt.tensor(base).resize_(0).shape) == (0,)
    assert tuple(tt.tensor(base).resize_as_(tt.ones(3, 1)).shape) == (3, 1)
    if dtype.is_floating_point:
        with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
            tt.ones(2, dtype=dtype, requires_grad=True).resize_(3)
    with pytest.raises(RuntimeError, match="Trying to create tensor with negative dimension -1"):
        tt.tensor(base).resize_(-1)
    x = tt.tensor(base)
    assert x.new().shape == (0,) and x.new().dtype is dtype and x.new().device == x.device
    assert tuple(x.new(2, 3).shape) == (2, 3) and x.new(2, 3).dtype is dtype
    assert tuple(x.new(tt.Size([4])).shape) == (4,)
    assert_close(x.new([1, 2]), np.array([1, 2]), dtype, "exact")
    assert x.new([1, 2]).dtype is dtype
    assert x.new(x) is not x and x.new(x).data_ptr() == x.data_ptr()
    with pytest.raises(TypeError, match=r"expected tritensor\.(cuda\.)?\w+Tensor \(got "
                                        r"tritensor\.(cuda\.)?DoubleTensor\)"):
        x.new(tt.ones(2, dtype=tt.float64))


def test_inplace_forms_torch_has_as_functions():
    """torch.as_strided_, resize_as_, addmv_ and index_put_ are functions as well as methods."""
    x = tt.arange(6.)
    assert tt.as_strided_(x, (2, 2), (1, 2), 1) is x and x.tolist() == [[1.0, 3.0], [2.0, 4.0]]
    y = tt.ones(2)
    assert tt.resize_as_(y, tt.ones(1, 2)) is y and tuple(y.shape) == (1, 2)
    z = tt.zeros(2)
    assert tt.addmv_(z, tt.ones(2, 3), tt.arange(3.), beta=0, alpha=2) is z and z.tolist() == [6.0, 6.0]
    w = tt.zeros(4)
    assert tt.index_put_(w, (tt.tensor([1, 1]),), tt.tensor([2.0, 3.0]), accumulate=True) is w
    assert w.tolist() == [0.0, 5.0, 0.0, 0.0]


def test_shape_more_gradcheck():
    x = tt.tensor(RNG.standard_normal((2, 4)), requires_grad=True)
    nc = tt.tensor(RNG.standard_normal((4, 2))).t().requires_grad_()
    v = tt.tensor(RNG.standard_normal(3), requires_grad=True)
    idx = tt.tensor([[0, 7], [-1, 5]])
    strided = [lambda a: tt.take(a, idx), lambda a: a.clone().put_(idx, a[1, :4].reshape(2, 2)),
               lambda a: tt.diagonal_scatter(a, a[0, :2] * 3, 1), lambda a: tt.view_copy(a.contiguous(), (8,)),
               lambda a: tt.dstack([a, a * 2]), tt.ravel]
    fns = strided + [
        lambda a: tt.vsplit(a, 2)[1], lambda a: tt.hsplit(a, [1])[1], lambda a: tt.dsplit(a.reshape(2, 1, 4), 2)[1],
        lambda a: tt.row_stack([a, a[0]]), tt.fliplr, tt.flipud, tt.t,
        lambda a: tt.put(a, idx, a[0].reshape(2, 2), accumulate=True), lambda a: tt.diagflat(a[:, :2]),
        lambda a: tt.block_diag(a, a[0]), lambda a: tt.vander(a[0], 3), lambda a: tt.combinations(a[0], 2),
        lambda a: a.clone().tril_(), lambda a: (a * 1).triu_(1), lambda a: tt.select_scatter(a, a[0] * 3, 0, 1),
        lambda a: (a * 1).t_() * a.t(), lambda a: (a * 1).transpose_(0, 1).unsqueeze_(1).squeeze_(),
        lambda a: (a * 1).swapaxes_(1, 0).swapdims_(0, 1).as_strided_((3, 2), (1, 2), 1),
        lambda a: tt.slice_scatter(a, a[:, :2], 1, 2, 4),
        # the copy forms and the splits, as one function of many outputs (views and copies: one check)
        lambda a: (tt.diagonal_copy(a, -1), tt.expand_copy(a[:1], (3, 4)), tt.permute_copy(a, (1, 0)),
                   tt.select_copy(a, 0, 1), tt.slice_copy(a, 1, 0, 4, 3), tt.squeeze_copy(a[:1]), tt.t_copy(a),
                   tt.transpose_copy(a, 1, 0), tt.unbind_copy(a)[1], tt.unfold_copy(a, 1, 2, 1),
                   tt.unsqueeze_copy(a, 0), tt.alias_copy(a), a.narrow_copy(1, 2, 2)),
        lambda a: (tt.split_copy(a, 3, 1)[1], tt.split_with_sizes(a, [1, 3], 1)[1],
                   tt.split_with_sizes_copy(a, [1, 1])[0], a.unsafe_split(3, 1)[0], tt.unsafe_chunk(a, 2)[1],
                   tt.unsafe_split_with_sizes(a, [2, 2], 1)[0], a.sum_to_size(1, 4))]
    # fast mode (random projections v^T J u, as torch's): the many composites in one test stay cheap
    for f in fns:
        assert tt.autograd.gradcheck(f, (x,), fast_mode=True)
    assert not tt.detach_copy(x).requires_grad and tt.detach_copy(x).grad_fn is None
    for f in strided:
        assert tt.autograd.gradcheck(f, (nc,), fast_mode=True)
    assert tt.autograd.gradcheck(lambda a, b: tt.dstack([a, b]), (v, v), fast_mode=True)
    assert tt.autograd.gradcheck(lambda a, b: tt.put(a, idx.reshape(-1)[:3], b), (x, v), fast_mode=True)
    assert tt.autograd.gradcheck(lambda a: a.as_strided((2, 3), (1, 2), 1), (x,), fast_mode=True)
    assert tt.autograd.gradcheck(lambda a: a.t().as_strided((3, 2), (1, 1)), (nc,), fast_mode=True)  # overlapping
    assert tt.autograd.gradcheck(lambda a: a.expand(2, 3).as_strided((2, 3), (0, 1)), (v,))  # overlapping input
    assert tt.autograd.gradcheck(lambda a: tt.as_strided_scatter(a, a[0, :3] * 3, (3,), (3,), 1), (x,), fast_mode=True)
    assert tt.autograd.gradcheck(lambda a: tt.as_strided_copy(a, (2, 2), (4, 2)), (nc,), fast_mode=True)
    assert tt.autograd.gradgradcheck(lambda a: (a * a).as_strided((2, 2), (1, 1), 0), (v,), fast_mode=True)
    # twice differentiable: the placements are index_put_/index_copy_ on a tensor of their own
    assert tt.autograd.gradgradcheck(lambda a: tt.vander(a, 4), (v,), fast_mode=True)
    assert tt.autograd.gradgradcheck(lambda a: tt.diagonal_scatter(a, a[0, :2] * a[1, :2], 1), (x,), fast_mode=True)
    assert tt.autograd.gradgradcheck(lambda a, b: tt.block_diag(a * a, b), (x[:1, :2].detach().requires_grad_(), v),
                                     fast_mode=True)
