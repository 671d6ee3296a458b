"""layer_norm / native_layer_norm (triton_kernels/layer_norm.py, core/ops/layer_norm.py) against float64
NumPy, and their derivative (autograd/functions/layer_norm.py): the fused backward kernels against
float64 NumPy, and by gradcheck.

One or several normalized dims, strided inputs (four layouts, tests/layouts.py), with and
without weight/bias, the per-row mean/rstd the backward will use, rows longer than one tile
(chunked statistics), a large mean (stability), empty inputs, and the errors. The backward: the
same dtypes, shapes and layouts (of the input and of the incoming gradient), rows spread over
several programs (the column sums' second kernel), each subset of the gradients, and its launches.
"""
import zlib

import numpy as np
import pytest

import tritensor as tt
from layouts import LAYOUTS, check_layout, make
from tolerances import FLOAT_DTYPES, NP, assert_close
from grad_inputs import leaf, noncontig
from tritensor.autograd import gradcheck
from tritensor.runtime import mode
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


def ref_layer_norm_backward(a, k, w, g, eps=1e-5):
    """float64 (dx, dw, db) of layer_norm over a's last k dims, for the incoming gradient g."""
    axes, lead = tuple(range(a.ndim - k, a.ndim)), tuple(range(a.ndim - k))
    _, mean, rstd = ref_layer_norm(a, k, eps=eps)
    xhat = (a - mean) * rstd
    gh = g * w if w is not None else g
    dx = rstd * (gh - gh.mean(axis=axes, keepdims=True) - xhat * (gh * xhat).mean(axis=axes, keepdims=True))
    return dx, (g * xhat).sum(axis=lead), g.sum(axis=lead)


def _affine(norm, dtype, affine):
    """(weight, bias) leaves of ``dtype`` (None where ``affine`` leaves them out) and their float64 values."""
    w = b = w_np = None
    if affine in ("weight", "both"):
        w_np = RNG.standard_normal(norm).astype(NP[dtype]).astype(np.float64)
        w = tt.tensor(w_np, dtype=dtype).requires_grad_()
    if affine in ("bias", "both"):
        b = tt.tensor(RNG.standard_normal(norm), dtype=dtype).requires_grad_()
    return w, b, w_np


def _check_backward(x, ref, g, g_ref, norm, dtype, w, b, w_np, rows_k=None):
    """Run layer_norm's backward with ``g`` and compare every gradient with float64 NumPy."""
    k = len(norm)
    y = tt.layer_norm(x, norm, w, b)
    leaves = [t for t in (x, w, b) if t is not None]
    grads = tt.autograd.grad(y, leaves, g)
    e_dx, e_dw, e_db = ref_layer_norm_backward(ref, k, w_np, g_ref)
    n = int(np.prod(norm))
    rows = int(np.prod(ref.shape[: ref.ndim - k]))
    got = dict(zip(("dx", "dw", "db"), grads)) if w is not None else dict(zip(("dx", "db"), grads))
    assert got["dx"].shape == x.shape and got["dx"].dtype is dtype
    # dx: two n-term row sums; dw, db: sums over the rows, all in fp32 (fp64) then rounded once
    assert_close(got["dx"], e_dx, dtype, "accumulate", k=n, err_msg="dx")
    if w is not None:
        assert got["dw"].shape == tuple(norm) and got["dw"].dtype is w.dtype
        assert_close(got["dw"], e_dw, dtype, "accumulate", k=max(rows, 1), err_msg="dw")
    if b is not None:
        assert got["db"].shape == tuple(norm) and got["db"].dtype is b.dtype
        assert_close(got["db"], e_db, dtype, "accumulate", k=max(rows, 1), err_msg="db")


# (shape, normalized shape, x's layout, the incoming gradient's layout): N = 1, 3, 1000 (a thousand
# columns over 70 rows: several programs, then the column sums' kernel), a 2-D normalized shape
BACKWARD_CASES = [((3, 1), (1,), "contiguous", "contiguous"), ((5, 3), (3,), "transposed", "sliced"),
                  ((4, 3, 5), (3, 5), "sliced", "expanded"), ((70, 1000), (1000,), "expanded", "transposed")]


@pytest.mark.parametrize("shape,norm,x_layout,g_layout", BACKWARD_CASES,
                         ids=[f"{list(c[0])}-{list(c[1])}".replace(" ", "") for c in BACKWARD_CASES])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("affine", ["none", "weight", "bias", "both"])
def test_backward_against_float64(affine, dtype, shape, norm, x_layout, g_layout):
    x, ref = make(shape, dtype, x_layout, normal)
    check_layout(x, x_layout)
    g, g_ref = make(shape, dtype, g_layout, RNG.standard_normal)
    check_layout(g, g_layout)
    w, b, w_np = _affine(norm, dtype, affine)
    _check_backward(x.requires_grad_(), ref, g, g_ref, norm, dtype, w, b, w_np)


@pytest.mark.parametrize("x_layout", LAYOUTS)
@pytest.mark.parametrize("g_layout", LAYOUTS)
def test_backward_reads_every_layout_in_place(g_layout, x_layout):
    """Each layout of the input against each of the incoming gradient (strides read, no copy)."""
    x, ref = make((6, 2, 7), tt.float32, x_layout, normal)
    g, g_ref = make((6, 2, 7), tt.float32, g_layout, RNG.standard_normal)
    w, b, w_np = _affine((2, 7), tt.float32, "both")
    _check_backward(x.requires_grad_(), ref, g, g_ref, (2, 7), tt.float32, w, b, w_np)


@pytest.mark.parametrize("dtype", [tt.float32, tt.bfloat16], ids=str)
@pytest.mark.parametrize("rows", [2, 9], ids=["one-program", "several-programs"])
def test_backward_rows_longer_than_one_tile(rows, dtype):
    """Rows over BWD_MAX_SINGLE_N walk their chunks twice; with more row blocks than programs, a
    program adds its later blocks' column sums to its first's."""
    n = _k.BWD_MAX_SINGLE_N + 29
    x, ref = make((rows, n), dtype, "contiguous", normal)
    g, g_ref = make((rows, n), dtype, "transposed", RNG.standard_normal)
    w, b, w_np = _affine((n,), dtype, "both")
    _check_backward(x.requires_grad_(), ref, g, g_ref, (n,), dtype, w, b, w_np)


def test_backward_mixed_dtypes_and_each_subset_of_gradients():
    """fp16 input with fp32 weight/bias: dx fp16, dw/db fp32; every subset of the three needing a
    gradient computes that subset (the others are not asked for: None)."""
    a = normal((6, 5)).astype(np.float16)
    g_np = RNG.standard_normal((6, 5)).astype(np.float16)
    w_np = RNG.standard_normal(5)
    e_dx, e_dw, e_db = ref_layer_norm_backward(a.astype(np.float64), 1, w_np, g_np.astype(np.float64))
    expected = {"x": (e_dx, tt.float16, "accumulate"), "w": (e_dw, tt.float32, "accumulate"),
                "b": (e_db, tt.float32, "accumulate")}
    for need in (("x",), ("w",), ("b",), ("w", "b"), ("x", "b"), ("x", "w", "b")):
        t = {"x": tt.tensor(a), "w": tt.tensor(w_np, dtype=tt.float32), "b": tt.zeros(5)}
        for name in need:
            t[name].requires_grad_()
        y = tt.layer_norm(t["x"], (5,), t["w"], t["b"])
        y.backward(tt.tensor(g_np))
        for name in ("x", "w", "b"):
            if name in need:
                e, dtype, profile = expected[name]
                assert t[name].grad.dtype is dtype
                assert_close(t[name].grad, e, dtype, profile, k=6, err_msg=f"{name} of {need}")
            else:
                assert t[name].grad is None


def test_backward_empty():
    """No rows: an empty dx, zero dw and db; rows of nothing: empty gradients."""
    x = tt.empty(0, 5).requires_grad_()
    w, b = tt.ones(5, requires_grad=True), tt.ones(5, requires_grad=True)
    dx, dw, db = tt.autograd.grad(tt.layer_norm(x, (5,), w, b), (x, w, b), tt.empty(0, 5))
    assert dx.shape == (0, 5) and dw.shape == (5,) and db.shape == (5,)
    np.testing.assert_array_equal(dw.numpy(), np.zeros(5, np.float32))
    np.testing.assert_array_equal(db.numpy(), np.zeros(5, np.float32))
    x = tt.empty(3, 0).requires_grad_()
    w, b = tt.ones(0, requires_grad=True), tt.ones(0, requires_grad=True)
    dx, dw, db = tt.autograd.grad(tt.layer_norm(x, (0,), w, b), (x, w, b), tt.empty(3, 0))
    assert dx.shape == (3, 0) and dw.shape == (0,) and db.shape == (0,)


def test_backward_is_deterministic_over_several_programs():
    """The column sums are added in a fixed order (no atomics): two runs agree bit for bit."""
    x = tt.tensor(normal((70, 1000)).astype(np.float32), requires_grad=True)
    w, b = tt.ones(1000, requires_grad=True), tt.zeros(1000, requires_grad=True)
    g = tt.tensor(RNG.standard_normal((70, 1000)).astype(np.float32))
    first = [t.numpy() for t in tt.autograd.grad(tt.layer_norm(x, (1000,), w, b), (x, w, b), g)]
    again = [t.numpy() for t in tt.autograd.grad(tt.layer_norm(x, (1000,), w, b), (x, w, b), g)]
    for u, v in zip(first, again):
        np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("shape,need,launches", [
    ((32, 64), (True, True, True), 1),  # one program: its column sums are dw and db
    ((70, 1000), (True, True, True), 2),  # several programs: the column sums' kernel too
    ((70, 1000), (True, False, False), 1),  # dx only: no column sums
    ((70, 1000), (False, True, False), 2),  # dw only
    ((0, 64), (True, True, True), 1),  # no rows: zero dw and db from the summing kernel
], ids=["one-program", "several-programs", "dx-only", "dw-only", "no-rows"])
def test_backward_launches(shape, need, launches, monkeypatch):
    """A LayerNorm backward is one or two kernel launches (the composite it replaced made 11-12),
    counted at the launcher in both modes and as driver launches on the simulated device."""
    x = tt.tensor(normal(shape).astype(np.float32), requires_grad=need[0])
    w = tt.ones(shape[-1], requires_grad=need[1])
    b = tt.zeros(shape[-1], requires_grad=need[2])
    y = tt.layer_norm(x, shape[-1:], w, b)
    g = tt.ones(shape)
    seen = []
    real = _k.launch

    def counted(kernel, *args, **kwargs):
        seen.append(kernel.__name__ if hasattr(kernel, "__name__") else kernel.fn.__name__)
        return real(kernel, *args, **kwargs)

    monkeypatch.setattr(_k, "launch", counted)
    if mode.SIM:
        from tritensor.runtime import sim  # only the simulated device counts driver calls
        with sim.counting() as c:
            y.backward(g)
        assert c["launch"] == launches, dict(c)
    else:
        y.backward(g)
    assert len(seen) == launches and all(name.startswith("_layer_norm_bwd") for name in seen), seen
