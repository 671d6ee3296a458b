"""layer_norm / native_layer_norm (triton_kernels/layer_norm.py, core/ops/layer_norm.py) against float64
NumPy, and their derivative (autograd/functions/layer_norm.py) by gradcheck.

One or several normalized dims, strided inputs (four layouts, tests/layouts.py), with and
without weight/bias, the per-row mean/rstd the backward will use, rows longer than one tile
(chunked statistics), a large mean (stability), empty inputs, and the errors.
"""
import zlib

import numpy as np
import pytest

import tritensor as tt
from layouts import LAYOUTS, check_layout, make
from tolerances import FLOAT_DTYPES, NP, assert_close
from grad_inputs import leaf, noncontig
from tritensor.autograd import gradcheck
from tritensor.triton_kernels import layer_norm as _k

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _reseed(request):
    """Each test draws the same data whichever xdist worker runs it, in whatever order."""
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def ref_layer_norm(a, k, w=None, b=None, eps=1e-5):
    axes = tuple(range(a.ndim - k, a.ndim))
    mean = a.mean(axis=axes, keepdims=True)
    var = a.var(axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    y = (a - mean) * rstd
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y, mean, rstd


def normal(shape):
    return 2.0 + 3.0 * RNG.standard_normal(shape)


CASES = [((1,), (1,)), ((7,), (7,)), ((5, 13), (13,)), ((4, 3, 5), (5,)), ((4, 3, 5), (3, 5)),
         ((2, 3, 4, 5), (4, 5))]


@pytest.mark.parametrize("shape,norm", CASES, ids=[f"{list(s)}-{list(n)}".replace(" ", "") for s, n in CASES])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("affine", ["none", "weight", "both"])
def test_against_float64(affine, dtype, layout, shape, norm):
    x, ref = make(shape, dtype, layout, normal)
    check_layout(x, layout)
    w_np = b_np = w = b = None
    if affine != "none":
        w_np = RNG.standard_normal(norm).astype(NP[dtype])
        w = tt.tensor(w_np)
        w_np = w_np.astype(np.float64)
    if affine == "both":
        b_np = RNG.standard_normal(norm).astype(NP[dtype])
        b = tt.tensor(b_np)
        b_np = b_np.astype(np.float64)
    y = tt.layer_norm(x, norm, w, b)
    assert y.shape == x.shape and y.dtype is dtype
    expected, _, _ = ref_layer_norm(ref, len(norm), w_np, b_np)
    n = int(np.prod(norm))
    # The statistics are n-term fp32 sums: widen atol like every other accumulated sum.
    assert_close(y, expected, dtype, "accumulate", k=n)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_native_layer_norm_statistics(dtype):
    """mean and rstd are returned for the backward: fp32 (fp64 for fp64), shaped [*lead, 1...]."""
    a = normal((3, 4, 6, 5)).astype(NP[dtype])
    x = tt.tensor(a)[:, 1:]  # a sliced (non-contiguous) view
    ref = a[:, 1:].astype(np.float64)
    w = tt.tensor(RNG.standard_normal((6, 5)).astype(NP[dtype]))
    y, mean, rstd = tt.native_layer_norm(x, (6, 5), w, None, 1e-3)
    e_y, e_mean, e_rstd = ref_layer_norm(ref, 2, w.numpy().astype(np.float64), None, 1e-3)
    stats = tt.float64 if dtype is tt.float64 else tt.float32
    assert mean.dtype is stats and rstd.dtype is stats
    assert mean.shape == (3, 3, 1, 1) and rstd.shape == (3, 3, 1, 1)
    assert_close(mean, e_mean, stats, "accumulate", k=30)
    assert_close(rstd, e_rstd, stats, "accumulate", k=30)
    assert_close(y, e_y, dtype, "accumulate", k=30)


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64, tt.bfloat16], ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_rows_longer_than_one_tile_with_large_mean(layout, dtype):
    """Rows over MAX_SINGLE_N take chunked statistics; a mean of 1e3 would wreck E[x^2]-E[x]^2."""
    n = _k.MAX_SINGLE_N + 29
    x, ref = make((2, n), dtype, layout, lambda s: 1e3 + RNG.standard_normal(s))
    w_np = RNG.standard_normal(n).astype(NP[dtype])
    b_np = RNG.standard_normal(n).astype(NP[dtype])
    y, mean, rstd = tt.native_layer_norm(x, [n], tt.tensor(w_np), tt.tensor(b_np))
    e_y, e_mean, e_rstd = ref_layer_norm(ref, 1, w_np.astype(np.float64), b_np.astype(np.float64))
    stats = tt.float64 if dtype is tt.float64 else tt.float32
    # rstd: fp32 chunk means carry the rounding of 1e3-sized sums (fp64 keeps the default)
    assert_close(rstd.reshape(-1), e_rstd.reshape(-1), stats, "large_mean")
    assert_close(mean.reshape(-1), e_mean.reshape(-1), stats)
    # y: centering x ~ 1e3 is exact only to about an ulp of the mean in the statistics dtype,
    # which rstd and the weight then scale
    scale = 1e3 * float(e_rstd.max()) * float(np.abs(w_np.astype(np.float64)).max())
    assert_close(y, e_y, dtype, "centered", k=scale)


def test_mixed_dtype_affine_and_strided_weight():
    """fp16 input with fp32 weight/bias (as under autocast) keeps the input dtype; a strided
    weight is read correctly."""
    a = normal((4, 8)).astype(np.float16)
    wbase = RNG.standard_normal((8, 3)).astype(np.float32)
    w = tt.tensor(wbase)[:, 1]  # stride 3
    b = tt.tensor(RNG.standard_normal(8).astype(np.float32))
    y = tt.layer_norm(tt.tensor(a), 8, w, b, eps=1e-6)
    assert y.dtype is tt.float16
    e, _, _ = ref_layer_norm(a.astype(np.float64), 1, wbase[:, 1].astype(np.float64), b.numpy().astype(np.float64),
                             1e-6)
    assert_close(y, e, tt.float16)


@pytest.mark.parametrize("n", [7, _k.MAX_SINGLE_N + 3], ids=["one-tile", "chunked"])
def test_constant_rows_normalize_exactly_to_bias(n):
    """x - mean must be exactly 0 (sum/n of 0.1f copies is not 0.1f): rstd = 1/sqrt(eps) ~ 316
    would blow up any rounding left in it."""
    x = tt.full((3, 1), 0.1).expand(3, n)
    b = tt.tensor(RNG.standard_normal(n).astype(np.float32))
    y, mean, rstd = tt.native_layer_norm(x, (n,), tt.ones(n), b)
    np.testing.assert_array_equal(y.numpy(), np.broadcast_to(b.numpy(), (3, n)))
    np.testing.assert_array_equal(mean.numpy(), np.full((3, 1), np.float32(0.1)))


def test_empty_inputs():
    y, mean, rstd = tt.native_layer_norm(tt.empty(0, 5), (5,))
    assert y.shape == (0, 5) and mean.shape == (0, 1)
    y, mean, rstd = tt.native_layer_norm(tt.empty(3, 0), (0,))
    assert y.shape == (3, 0) and mean.shape == (3, 1)
    assert np.isnan(mean.numpy()).all() and np.isnan(rstd.numpy()).all()  # statistics of nothing


def test_errors_before_any_kernel():
    x = tt.zeros(2, 3)
    with pytest.raises(RuntimeError, match=r"^Given normalized_shape=\[4\], expected input with shape \[\*, 4\], "
                                           r"but got input of size\[2, 3\]$"):
        tt.layer_norm(x, (4,))
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[2, 3, 1\]"):
        tt.layer_norm(x, [2, 3, 1])
    with pytest.raises(RuntimeError, match=r"^Expected weight to be of same shape as normalized_shape, but got "
                                           r"weight of shape \[2\] and normalized_shape = \[3\]$"):
        tt.layer_norm(x, 3, tt.ones(2))
    with pytest.raises(RuntimeError, match=r"Expected bias to be of same shape as normalized_shape, but got bias "
                                           r"of shape \[3, 1\]"):
        tt.layer_norm(x, 3, tt.ones(3), tt.ones(3, 1))
    with pytest.raises(RuntimeError, match="Expected normalized_shape to be at least 1-dimensional"):
        tt.layer_norm(x, ())
    with pytest.raises(RuntimeError, match=r"layer_norm\(\): expected a floating point input, but got int64"):
        tt.layer_norm(tt.arange(6).reshape(2, 3), 3)
    with pytest.raises(RuntimeError, match="expected weight to be a floating point tensor, but got int64"):
        tt.layer_norm(x, 3, tt.arange(3))
    with pytest.raises(TypeError, match="normalized_shape"):
        tt.layer_norm(x, 3.0)
    with pytest.raises(TypeError, match=r"argument 'input' must be Tensor, not list"):
        tt.layer_norm([1.0, 2.0], 2)
    with pytest.raises(TypeError, match=r"argument 'weight' must be Tensor, not list"):
        tt.layer_norm(x, 3, [1.0, 1.0, 1.0])


# ----- derivatives ---------------------------------------------------------------------------
def test_layer_norm_gradcheck():
    x, w, b = leaf(2, 3), leaf(3), leaf(3)
    assert gradcheck(lambda a, ww, bb: tt.layer_norm(a, (3,), ww, bb), (x, w, b))
    assert gradcheck(lambda a: tt.layer_norm(a, (3, 4)), (leaf(2, 3, 4),), fast_mode=True)
    assert gradcheck(lambda a, ww: tt.layer_norm(a, (4,), ww), (noncontig(3, 4), leaf(4)), fast_mode=True)
    out, mean, rstd = tt.native_layer_norm(x, (3,), w, b)
    assert out.requires_grad and not mean.requires_grad and not rstd.requires_grad
    assert gradcheck(lambda a: tt.native_layer_norm(a, (3,))[0], (x,))
    with pytest.raises(NotImplementedError, match="double backward"):
        tt.autograd.grad(tt.layer_norm(x, (3,)).sum(), x, create_graph=True)
