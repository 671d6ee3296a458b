"""Reductions (triton_kernels/reduce.py, core/ops/reduce.py) against float64 NumPy, and their derivatives
(autograd/functions/reduce.py) by gradcheck/gradgradcheck in float64.

Every op over fp32/fp64/fp16/bf16, four memory layouts (tests/layouts.py), one dim, several
dims, all dims, keepdim, 0-d/one-element/prime/empty shapes; then long extents (more than one
chunk, and the split + combine path), NaN/inf, ties, integer dtypes, dtype=, and the errors.
"""
import math
import warnings
import zlib

import numpy as np
import pytest

import tritensor as tt
from layouts import LAYOUTS, check_layout, make
from tolerances import FLOAT_DTYPES, NP, assert_close
from grad_inputs import F64, leaf, noncontig
from tritensor.autograd import gradcheck, gradgradcheck
from tritensor.triton_kernels import reduce as _k

RNG = np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def _reseed(request):
    """Each test draws the same data whichever xdist worker runs it, in whatever order."""
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))

# (shape, dim, keepdim): scalar, one element, prime sizes, several dims, negative dims.
CASES = [
    ((), None, False), ((), 0, True),
    ((1,), None, False), ((1,), 0, True),
    ((7,), 0, False), ((7,), None, True),
    ((5, 13), 1, False), ((5, 13), 0, True), ((5, 13), None, False), ((5, 13), -1, True),
    ((4, 3, 5), (0, 2), False), ((4, 3, 5), 1, True), ((4, 3, 5), (-1, -2), True),
    ((2, 3, 4, 5), (1, 3), False),
]


def _ids(case):
    shape, dim, keep = case
    return f"{list(shape)}-dim{dim}-keep{int(keep)}".replace(" ", "")


# Every layout of every case, except the layouts a 0-d tensor cannot have.
LAYOUT_CASES = [(layout, c) for c in CASES for layout in LAYOUTS if c[0] != () or layout == "contiguous"]
LAYOUT_IDS = [f"{layout}-{_ids(c)}" for layout, c in LAYOUT_CASES]


def normal(shape):
    return RNG.standard_normal(shape)


def near_one(shape):
    return 1.0 + 0.25 * RNG.uniform(-1, 1, shape)  # products of tens of these stay O(1)


def small_ints(shape):
    return RNG.integers(-3, 4, shape).astype(np.float64)  # ties on purpose; exact in bf16


def _axis(dim, ndim):
    if dim is None:
        return None
    return tuple(d % max(ndim, 1) for d in (dim if isinstance(dim, tuple) else (dim,))) if ndim else None


def _count(shape, axis):
    return math.prod(shape) if axis is None else math.prod(shape[a] for a in axis)


# --------------------------------------------------------------------------------------------
# Floating point: every op, dtype, layout, case
# --------------------------------------------------------------------------------------------
SUMLIKE = {
    "sum": (normal, lambda a, ax, kd: np.sum(a, axis=ax, keepdims=kd)),
    "mean": (normal, lambda a, ax, kd: np.mean(a, axis=ax, keepdims=kd)),
    "prod": (near_one, lambda a, ax, kd: np.prod(a, axis=ax, keepdims=kd)),
    "var": (normal, lambda a, ax, kd: np.var(a, axis=ax, keepdims=kd, ddof=1)),
    "std": (normal, lambda a, ax, kd: np.std(a, axis=ax, keepdims=kd, ddof=1)),
}


@pytest.mark.parametrize("layout,case", LAYOUT_CASES, ids=LAYOUT_IDS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("op", list(SUMLIKE))
def test_sumlike_against_float64(op, dtype, layout, case):
    shape, dim, keepdim = case
    if op == "prod" and isinstance(dim, tuple):
        dim = dim[0]  # torch.prod takes one dim
    values, ref_fn = SUMLIKE[op]
    x, ref = make(shape, dtype, layout, values)
    check_layout(x, layout)
    axis = _axis(dim, x.ndim)
    n = _count(shape, axis)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # var/std of one element: nan, torch warns too
        expected = ref_fn(ref, axis, keepdim)
        got = getattr(x, op)() if dim is None and not keepdim else getattr(tt, op)(x, dim, keepdim=keepdim)
    if dim is None and not keepdim:
        assert got.shape == ()
    assert tuple(got.shape) == np.shape(expected)
    assert got.dtype is dtype
    # sum/mean/var are n-term fp32 (fp64) sums: "accumulate" widens atol with sqrt(n).
    assert_close(got, expected, dtype, "default" if op == "prod" else "accumulate", k=None if op == "prod" else n)


EXTREME = {
    "amax": lambda a, ax, kd: np.max(a, axis=ax, keepdims=kd),
    "amin": lambda a, ax, kd: np.min(a, axis=ax, keepdims=kd),
    "argmax": lambda a, ax, kd: np.argmax(a, axis=ax, keepdims=kd),
    "argmin": lambda a, ax, kd: np.argmin(a, axis=ax, keepdims=kd),
}


# argmax/argmin take one dim (or none); amax/amin also get the several-dims cases.
EXTREME_CASES = [(op, layout, c) for op in EXTREME for layout, c in LAYOUT_CASES
                 if op.startswith("am") or not isinstance(c[1], tuple)]


@pytest.mark.parametrize("op,layout,case", EXTREME_CASES, ids=[f"{o}-{l}-{_ids(c)}" for o, l, c in EXTREME_CASES])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_extremes_exact_with_ties(op, layout, case, dtype):
    """Extremes are exact; the index is the first occurrence (data full of ties)."""
    shape, dim, keepdim = case
    x, ref = make(shape, dtype, layout, small_ints)
    axis = _axis(dim, x.ndim)
    if op.startswith("arg") and axis is not None:
        (axis,) = axis  # np.argmax takes an int axis
    if op.startswith("arg") and dim is None:
        expected = EXTREME[op](ref.reshape(-1), None, False)
        expected = np.reshape(expected, (1,) * x.ndim) if keepdim else expected
        got = getattr(tt, op)(x, keepdim=keepdim)
    else:
        expected = EXTREME[op](ref, axis, keepdim)
        got = getattr(tt, op)(x, () if dim is None else dim, keepdim) if op.startswith("am") else \
            getattr(tt, op)(x, dim, keepdim)
    assert tuple(got.shape) == np.shape(expected)
    assert got.dtype is (tt.int64 if op.startswith("arg") else dtype)
    np.testing.assert_array_equal(got.numpy().astype(np.float64), np.asarray(expected, dtype=np.float64))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_with_dim_return_values_and_indices(op, dtype, layout):
    x, ref = make((6, 11), dtype, layout, small_ints)
    for dim, keepdim in ((0, False), (1, True), (-1, False)):
        res = getattr(x, op)(dim, keepdim)
        values, indices = res  # unpacks like torch.return_types.max
        assert res.values is values and res.indices is indices
        npf = np.max if op == "max" else np.min
        npa = np.argmax if op == "max" else np.argmin
        np.testing.assert_array_equal(values.numpy().astype(np.float64), npf(ref, axis=dim, keepdims=keepdim))
        np.testing.assert_array_equal(indices.numpy(), npa(ref, axis=dim, keepdims=keepdim))
        assert values.dtype is dtype and indices.dtype is tt.int64
    full = getattr(x, op)()
    assert full.shape == () and full.item() == (ref.max() if op == "max" else ref.min())


# --------------------------------------------------------------------------------------------
# Longer than one chunk; the split + combine path
# --------------------------------------------------------------------------------------------
# (shape, dim): 4 rows x > MAX_BLOCK_N runs the chunk loop in one program per row; 3 rows x SPLIT
# (5000 in the interpreter, 33672 on a GPU, whose thresholds are larger) and whole-tensor
# reductions take the split path (rows < SPLIT_MAX_ROWS, extent >= SPLIT_MIN_LEN);
# (37, 1100) over dim 0 has more rows than KEPT_CONTIG_BLOCK_M, each reduced in several chunks.
SPLIT = _k.SPLIT_MIN_LEN + 904
LONG = [((4, _k.MAX_BLOCK_N + 232), 1), ((3, SPLIT), 1), ((3, SPLIT), None), ((70, 83), None), ((5003, 3), 0),
        ((37, _k.KEPT_CONTIG_BLOCK_M + 76), 0)]


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("dtype", [tt.float32, tt.bfloat16], ids=str)
@pytest.mark.parametrize("shape,dim", LONG, ids=[f"{s}-{d}" for s, d in LONG])
def test_long_reductions(shape, dim, dtype, layout):
    x, ref = make(shape, dtype, layout, normal)
    axis = None if dim is None else (dim,)
    n = _count(shape, axis)
    for op, fn in (("sum", np.sum), ("mean", np.mean)):
        assert_close(getattr(x, op)(dim), fn(ref, axis=dim), dtype, "accumulate", k=n)
    assert_close(x.var(dim), np.var(ref, axis=dim, ddof=1), dtype, "accumulate", k=n)
    np.testing.assert_array_equal(x.amax(() if dim is None else dim).numpy().astype(np.float64), np.max(ref, axis=dim))
    np.testing.assert_array_equal(x.argmax(dim).numpy(), np.argmax(ref, axis=dim))
    np.testing.assert_array_equal(x.argmin(dim).numpy(), np.argmin(ref, axis=dim))


def test_split_path_is_taken_only_for_few_long_rows(monkeypatch):
    """The LONG cases above cover both schedules only if the launcher really picks them."""
    launched = []
    real = _k.launch

    def spy(site, *a, **kw):  # the launcher passes a Site (kernel and constexprs)
        launched.append(getattr(site, "kernel", site).fn.__name__)
        return real(site, *a, **kw)
    monkeypatch.setattr(_k, "launch", spy)
    schedules = set()
    for shape, dim in LONG:
        launched.clear()
        x = tt.zeros(*shape)
        x.sum(dim)
        rows = 1 if dim is None else math.prod(shape) // shape[dim]
        expect_split = rows < _k.SPLIT_MAX_ROWS and math.prod(shape) // rows >= _k.SPLIT_MIN_LEN
        assert launched == (["_reduce_kernel", "_combine_kernel"] if expect_split else ["_reduce_kernel"]), shape
        schedules.add(expect_split)
    assert schedules == {True, False}
    x = tt.zeros(3, SPLIT)
    launched.clear()
    x.argmax(1)
    assert launched == ["_reduce_kernel", "_combine_kernel"]


@pytest.mark.parametrize("shape,dim", [((1, 20011), 1), ((20011,), None), ((8, 2503), 1)])
def test_variance_is_stable_for_large_mean(shape, dim):
    """Data 1e4 + N(0,1) in fp32: E[x^2] - E[x]^2 loses every digit, a stable method keeps ~1e-5."""
    x_np = (1e4 + RNG.standard_normal(shape)).astype(np.float32)
    ref = np.var(x_np.astype(np.float64), axis=dim, ddof=1)
    n = x_np.size // np.size(ref)
    naive = (np.mean(x_np * x_np, axis=dim, dtype=np.float32)
             - np.mean(x_np, axis=dim, dtype=np.float32) ** 2) * np.float32(n / (n - 1))
    assert np.max(np.abs(naive - ref) / ref) > 1e-2  # the data really defeats the naive formula
    # the chunk means carry fp32 rounding of 1e4-sized sums, whose error enters the variance
    # through the (tiny, but not zero) mean shift
    assert_close(tt.tensor(x_np).var(dim), ref, tt.float32, "large_mean")
    assert_close(tt.tensor(x_np.astype(np.float64)).var(dim), ref, tt.float64)


# --------------------------------------------------------------------------------------------
# Precision of low-precision sums, dtype=
# --------------------------------------------------------------------------------------------
def test_half_sums_accumulate_in_fp32():
    # An fp16 accumulator stops at 2048 (2048 + 1 rounds back), bf16 at 256.
    assert tt.ones(3000, dtype=tt.float16).sum().item() == 3000.0
    assert tt.ones(1000, dtype=tt.bfloat16).sum().item() == 1000.0
    assert tt.ones(3000, dtype=tt.float16).sum().dtype is tt.float16
    assert tt.ones(1000, dtype=tt.bfloat16).mean().item() == 1.0


def test_sum_dtype_argument():
    x_np = RNG.standard_normal((4, 9)).astype(np.float32)
    x = tt.tensor(x_np)
    h = x.half()
    s = h.sum(1, dtype=tt.float32)
    assert s.dtype is tt.float32
    assert_close(s, x_np.astype(np.float16).astype(np.float64).sum(1), tt.float32)
    # dtype= casts the input first, so fp32 summed "as fp16" sees fp16-rounded elements.
    s16 = x.sum(dtype=tt.float16)
    assert s16.dtype is tt.float16
    assert_close(s16, x_np.astype(np.float16).astype(np.float64).sum(), tt.float16)
    i = tt.arange(10, dtype=tt.int32)
    assert i.sum(dtype=tt.float64).dtype is tt.float64 and i.sum(dtype=tt.float64).item() == 45.0
    assert i.mean(dtype=tt.float32).item() == 4.5
    assert tt.tensor(x_np).prod(1, dtype=tt.float64).dtype is tt.float64


# --------------------------------------------------------------------------------------------
# Integers and bool
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [tt.int32, tt.int64, tt.bool], ids=str)
def test_integer_and_bool_reductions_are_exact(dtype):
    a = RNG.integers(-5, 6, (6, 7)).astype(NP[dtype]) if dtype is not tt.bool else RNG.random((6, 7)) < 0.5
    x = tt.tensor(np.ascontiguousarray(a))
    xt = tt.tensor(np.ascontiguousarray(a.T)).t()  # same values, transposed layout
    for t in (x, xt):
        s = t.sum(0)
        assert s.dtype is tt.int64
        np.testing.assert_array_equal(s.numpy(), a.astype(np.int64).sum(0))
        assert t.sum().item() == a.astype(np.int64).sum()
        assert t.prod(1).dtype is tt.int64
        np.testing.assert_array_equal(t.prod(1).numpy(), a.astype(np.int64).prod(1))
        np.testing.assert_array_equal(t.amax(1).numpy(), a.max(1))
        assert t.amax(1).dtype is dtype
        np.testing.assert_array_equal(t.min(0).values.numpy(), a.min(0))
        np.testing.assert_array_equal(t.argmax(1).numpy(), a.argmax(1))
        np.testing.assert_array_equal(t.argmin().item(), a.argmin())
        np.testing.assert_array_equal(t.all(1).numpy(), a.all(1))
        np.testing.assert_array_equal(t.any(0).numpy(), a.any(0))
        assert t.all().dtype is tt.bool and t.any().item() == bool(a.any())


def test_int64_extremes_at_the_type_limits():
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    x = tt.tensor(np.array([[lo, lo, 3], [hi, 2, hi]], dtype=np.int64))
    np.testing.assert_array_equal(x.amax(1).numpy(), [3, hi])
    np.testing.assert_array_equal(x.argmin(1).numpy(), [0, 1])
    np.testing.assert_array_equal(x.argmax(1).numpy(), [2, 0])
    assert tt.full((5,), lo, dtype=tt.int64).argmax().item() == 0


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_all_any_on_floats(dtype):
    a = np.array([[0.0, 1.0, np.nan], [0.0, 0.0, 0.0], [2.0, -1.0, 0.5]]).astype(NP[dtype])
    x = tt.tensor(a)
    np.testing.assert_array_equal(x.all(1).numpy(), [False, False, True])
    np.testing.assert_array_equal(x.any(1).numpy(), [True, False, True])  # NaN is truthy
    np.testing.assert_array_equal(x.any(0, keepdim=True).numpy(), [[True, True, True]])


# --------------------------------------------------------------------------------------------
# NaN, inf
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(3, 7), (3, SPLIT)], ids=["one-chunk", "split"])
def test_nan_propagates_and_wins_extremes(dtype, shape):
    a = RNG.standard_normal(shape)
    a[1, 2] = np.nan
    a[1, shape[1] - 2] = np.nan  # the first NaN is the index to report
    a[2, shape[1] - 1] = np.nan  # in the last chunk / last split
    x = tt.tensor(a.astype(NP[dtype]))
    ref = a.astype(NP[dtype]).astype(np.float64)
    for op in ("sum", "mean", "var"):
        r = getattr(x, op)(1).numpy().astype(np.float64)
        assert np.isnan(r[1]) and np.isnan(r[2]) and not np.isnan(r[0]), op
    for op in ("max", "min"):
        v, i = getattr(x, op)(1)
        np.testing.assert_array_equal(np.isnan(v.numpy().astype(np.float64)), [False, True, True])
        np.testing.assert_array_equal(i.numpy(), [getattr(ref[0], "arg" + op)(), 2, shape[1] - 1])
    assert np.isnan(x.amax().item()) and np.isnan(x.min().item())
    assert x.argmax().item() == shape[1] + 2 and x.argmin().item() == shape[1] + 2


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_infinities(dtype):
    inf = np.inf
    a = np.array([[-inf, -inf, -inf], [inf, 1.0, inf], [-inf, 2.0, inf], [1.0, -inf, -inf]]).astype(NP[dtype])
    x = tt.tensor(a)
    np.testing.assert_array_equal(x.argmax(1).numpy(), [0, 0, 2, 0])
    np.testing.assert_array_equal(x.argmin(1).numpy(), [0, 1, 0, 1])
    np.testing.assert_array_equal(x.amax(1).numpy().astype(np.float64), [-inf, inf, inf, 1.0])
    r = x.sum(1).numpy().astype(np.float64)
    assert r[0] == -inf and r[1] == inf and np.isnan(r[2])


# --------------------------------------------------------------------------------------------
# Empty inputs
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_empty_reductions_give_identities(dtype):
    e = tt.empty(0, 4, dtype=dtype)
    assert e.sum().item() == 0 and e.sum().shape == ()
    np.testing.assert_array_equal(e.sum(0).numpy().astype(np.float64), np.zeros(4))
    np.testing.assert_array_equal(e.prod(0).numpy().astype(np.float64), np.ones(4))
    assert np.isnan(e.mean().item())
    assert np.all(np.isnan(e.mean(0).numpy().astype(np.float64)))
    with pytest.warns(RuntimeWarning, match="degrees of freedom"):
        assert np.all(np.isnan(e.var(0).numpy().astype(np.float64)))
    assert e.all().item() is True and e.any().item() is False
    # Reducing a non-empty dim of an empty tensor is an empty result, not an error.
    assert e.sum(1).shape == (0,) and e.amax(1).shape == (0,) and e.max(1).indices.shape == (0,)
    assert e.argmax(1, keepdim=True).shape == (0, 1)
    z = tt.empty(3, 0, dtype=dtype).sum(1, keepdim=True)
    assert z.shape == (3, 1) and z.numpy().astype(np.float64).tolist() == [[0.0]] * 3


def test_empty_extremes_raise_torch_errors():
    e = tt.empty(0, 4)
    with pytest.raises(RuntimeError, match=r"^max\(\): Expected reduction dim 0 to have non-zero size\.$"):
        e.max(0)
    with pytest.raises(RuntimeError, match=r"max\(\): Expected reduction dim to be specified for input.numel\(\) == 0"):
        e.max()
    with pytest.raises(RuntimeError, match=r"argmin\(\): Expected reduction dim to be specified"):
        e.argmin()
    with pytest.raises(RuntimeError, match=r"argmax\(\): Expected reduction dim 0 to have non-zero size"):
        e.argmax(0)
    with pytest.raises(RuntimeError, match=r"amin\(\): Expected reduction dim 0 to have non-zero size"):
        e.amin((0, 1))


# --------------------------------------------------------------------------------------------
# var/std arguments
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [tt.float32, tt.float64], ids=str)
def test_var_std_correction_and_unbiased(dtype):
    a = RNG.standard_normal((5, 8))
    x = tt.tensor(a.astype(NP[dtype]))
    ref = a.astype(NP[dtype]).astype(np.float64)
    assert_close(x.var(1, correction=0), ref.var(1), dtype)
    assert_close(x.var(1, correction=3, keepdim=True), ref.var(1, ddof=3, keepdims=True), dtype)
    assert_close(x.var(1, unbiased=False), ref.var(1), dtype)
    assert_close(x.std(0, unbiased=True), ref.std(0, ddof=1), dtype)
    assert_close(tt.var(x, False), ref.var(), dtype)  # legacy positional unbiased
    assert_close(x.std(correction=2.5), np.sqrt(((ref - ref.mean()) ** 2).sum() / (40 - 2.5)), dtype)
    with pytest.warns(RuntimeWarning, match="degrees of freedom"):
        r = x.var(1, correction=8).numpy()  # N - correction == 0: x/0 like torch
    assert np.all(np.isinf(r))
    with pytest.warns(RuntimeWarning):
        assert np.isnan(x[0, :1].var().item())  # one element, Bessel's correction: 0/0


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("shape,dim", [((3, 7), 1), ((3, SPLIT), 1), ((5, 3), 0)], ids=["one-chunk", "split", "dim0"])
def test_variance_of_constant_rows_is_exactly_zero(dtype, shape, dim):
    """Welford gives exactly 0 for a constant row (PyTorch's result); sum/n of 0.1 copies is not 0.1."""
    x = tt.full(shape, 0.1, dtype=dtype)
    assert np.all(x.var(dim).numpy().astype(np.float64) == 0.0)
    assert np.all(x.std(dim, correction=0).numpy().astype(np.float64) == 0.0)


# --------------------------------------------------------------------------------------------
# API shape and errors
# --------------------------------------------------------------------------------------------
def test_public_surface():
    x = tt.tensor(np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]], dtype=np.float32))
    assert tt.max(x, 1).indices.tolist() == [1, 0]
    assert tt.min(x, dim=0, keepdim=True).values.tolist() == [[1.0, 0.0, 2.0]]
    assert tt.max(x, tt.full((2, 3), 4.0)).tolist() == [[4.0, 5.0, 4.0], [7.0, 4.0, 7.0]]  # elementwise form
    assert x.max(x * 0 + 3).tolist() == [[3.0, 5.0, 3.0], [7.0, 3.0, 7.0]]
    assert repr(x.max(1)).startswith("max(values=")
    assert tt.sum(x, (0, 1)).item() == 22.0 and x.sum(dim=[]).item() == 22.0
    assert x.mean((), keepdim=True).shape == (1, 1)
    assert tt.amax(x, (0, 1)).item() == 7.0 and tt.amin(x).item() == 0.0


def test_reduction_errors_are_raised_before_any_kernel():
    x = tt.zeros(2, 3)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"):
        x.sum(2)
    with pytest.raises(IndexError, match="but got -3"):
        x.amax((0, -3))
    with pytest.raises(RuntimeError, match="dim 1 appears multiple times in the list of dims"):
        x.sum((1, -1))
    with pytest.raises(RuntimeError, match=r"mean\(\): could not infer output dtype\. Input dtype must be either a "
                                           r"floating point or complex dtype\. Got: Long"):
        tt.arange(3).mean()
    with pytest.raises(RuntimeError, match="Got: Int"):
        tt.arange(3, dtype=tt.int32).mean(0)
    with pytest.raises(RuntimeError, match="std and var only support floating point and complex dtypes"):
        tt.arange(3).var()
    with pytest.raises(RuntimeError, match="can't specify both the unbiased and correction arguments"):
        x.std(0, unbiased=True, correction=0)
    with pytest.raises(TypeError, match="dtype"):
        x.sum(dtype="complex64")
    with pytest.raises(TypeError, match=r"sum\(\): argument 'input' \(position 1\) must be Tensor, not list"):
        tt.sum([1, 2])
    with pytest.raises(TypeError, match=r"argmax\(\): argument 'dim' must be int"):
        x.argmax((0, 1))
    with pytest.raises(TypeError, match=r"max\(\): argument 'dim' must be int.*amax"):
        x.max((0, 1))
    with pytest.raises(TypeError, match=r"prod\(\): argument 'dim' must be int"):
        x.prod((0, 1))


# ----- derivatives: gradcheck in float64 -----------------------------------------------------
REDUCTIONS = {
    "sum": lambda t: t.sum(), "sum_dim": lambda t: t.sum(1), "sum_dims_keep": lambda t: t.sum((0, 2), keepdim=True),
    "mean": lambda t: t.mean(), "mean_dim": lambda t: t.mean(-1, keepdim=True), "amax": lambda t: t.amax(1),
    "amin": lambda t: t.amin((0, 1)), "max": lambda t: t.max(), "max_dim": lambda t: t.max(2).values,
    "min_dim": lambda t: t.min(0, keepdim=True)[0], "var": lambda t: t.var(1), "std": lambda t: t.std(),
    "var_corr0": lambda t: t.var((1, 2), correction=0), "prod": lambda t: t.prod(1),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_gradcheck(name):
    x = leaf(2, 3, 2, positive=name == "prod")
    assert gradcheck(REDUCTIONS[name], (x,))


@pytest.mark.parametrize("name", ["sum_dim", "mean_dim", "max_dim", "var"])
def test_reduction_gradcheck_noncontiguous(name):
    x = noncontig(2, 3, 2)
    assert gradcheck(REDUCTIONS[name], (x,))


@pytest.mark.parametrize("name", ["sum_dim", "mean", "amax", "var", "std"])
def test_reduction_second_derivative(name):
    x = leaf(2, 3, 2)
    assert gradgradcheck(REDUCTIONS[name], (x,), fast_mode=True)


def test_max_dim_gradient_goes_to_returned_index():
    x = tt.tensor([[1.0, 3.0, 3.0]], requires_grad=True)
    v, i = x.max(1)
    assert not i.requires_grad
    v.sum().backward()
    assert_close(x.grad, [[0.0, 1.0, 0.0]] if int(i.item()) == 1 else [[0.0, 0.0, 1.0]], tt.float32)


def _with_zeros(nzeros, shape=(2, 3)):
    """A float64 leaf with ``nzeros`` zeros in every row (at different columns per row)."""
    a = RNG.uniform(0.5, 1.5, size=shape) * RNG.choice([-1.0, 1.0], size=shape)
    for r in range(shape[0]):
        a[r, [(r + k) % shape[1] for k in range(nzeros)]] = 0.0
    return tt.tensor(a, dtype=F64, requires_grad=True)


def _prod_grad_ref(a, axis):
    """d prod / dx_i = product of the other entries of the slice, by brute force."""
    a = a.reshape(1, -1) if axis is None else np.moveaxis(a, axis, -1)
    ref = np.empty_like(a)
    for i in range(a.shape[-1]):
        ref[..., i] = np.prod(np.delete(a, i, axis=-1), axis=-1)
    return ref


@pytest.mark.parametrize("nzeros", [0, 1, 2])
@pytest.mark.parametrize("over", ["dim", "all"])
def test_prod_gradient_with_zeros(nzeros, over):
    # per row of a (2, 3) input: 0, 1 or 2 zeros; over all dims the whole tensor has 2 * nzeros
    fn = {"dim": lambda t: t.prod(-1, keepdim=True), "all": lambda t: t.prod()}[over]
    x = _with_zeros(nzeros)
    assert gradcheck(fn, (x,))
    a = x.detach().numpy()
    fn(x).sum().backward()
    expected = _prod_grad_ref(a, 1) if over == "dim" else _prod_grad_ref(a, None).reshape(a.shape)
    assert_close(x.grad, expected, F64)


@pytest.mark.parametrize("nzeros", [1, 2])
def test_prod_second_derivative_with_zeros(nzeros):
    # the backward is written to be differentiable again at zeros too (fast mode: the full
    # second-order Jacobian costs far more in the interpreter)
    assert gradgradcheck(lambda t: t.prod(0), (_with_zeros(nzeros, (3, 2)),), fast_mode=True)


def test_prod_gradient_with_one_zero_over_all_dims_and_low_precision():
    x = tt.tensor([[1.5, 0.0, 2.0], [0.5, -1.0, 3.0]], requires_grad=True)  # fp32, one zero in the tensor
    x.prod().backward()
    assert_close(x.grad, [[0.0, -4.5, 0.0], [0.0, 0.0, 0.0]], tt.float32)
    y = tt.tensor([[2.0, 0.0], [0.0, 0.0]], dtype=tt.bfloat16, requires_grad=True)
    y.prod(0).sum().backward()
    assert y.grad.dtype is tt.bfloat16
    assert_close(y.grad, [[0.0, 0.0], [2.0, 0.0]], tt.bfloat16)


# ----- composites of the reductions ------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_composite_reductions_match_numpy(dtype, layout):
    """std_mean, var_mean, aminmax, nansum, nanmean, count_nonzero over one dim, several, all; NaN."""
    t, ref = make((5, 6), dtype, layout, lambda s: RNG.standard_normal(s))
    for dim, keepdim in ((1, False), ((0, 1), True), (None, False)):
        axis = tuple(dim) if isinstance(dim, tuple) else dim
        s, m = tt.std_mean(t, dim, keepdim=keepdim)
        assert_close(s, ref.std(axis=axis, ddof=1, keepdims=keepdim), dtype, "centered", k=30)
        assert_close(m, ref.mean(axis=axis, keepdims=keepdim), dtype, "accumulate", k=30)
        v, m = tt.var_mean(t, dim, correction=0, keepdim=keepdim)
        assert_close(v, ref.var(axis=axis, keepdims=keepdim), dtype, "centered", k=30)
        lo, hi = t.aminmax(dim=None if dim is None else dim, keepdim=keepdim)
        np.testing.assert_array_equal(lo.float().numpy(), ref.min(axis=axis, keepdims=keepdim).astype(np.float32))
        np.testing.assert_array_equal(hi.float().numpy(), ref.max(axis=axis, keepdims=keepdim).astype(np.float32))
        assert tt.count_nonzero(t.gt(0), dim).tolist() == np.count_nonzero(ref > 0, axis=axis).tolist()
    nan = ref.copy()
    nan[1, 2] = nan[3, :] = np.nan
    tn = tt.tensor(nan.astype(NP[dtype]))
    assert_close(tn.nansum(1), np.nansum(nan, 1), dtype, "accumulate", k=6)
    assert_close(tt.nansum(tn), np.nansum(nan), dtype, "accumulate", k=30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's "mean of empty slice" for the all-NaN row
        assert_close(tn.nanmean(dim=1, keepdim=True), np.nanmean(nan, 1, keepdims=True), dtype, "accumulate", k=6)


def test_composite_reductions_on_integers_and_errors():
    i = tt.tensor([[0, 3, -1], [2, 0, 0]], dtype=tt.int32)
    assert tt.nansum(i).dtype is tt.int64 and tt.nansum(i).item() == 4
    assert i.count_nonzero().item() == 3 and tt.count_nonzero(i, dim=(0, 1)).item() == 3
    assert i.aminmax().min.item() == -1 and tt.aminmax(i, dim=0).max.tolist() == [2, 3, 0]
    assert [t.shape for t in tt.var_mean(tt.ones(2, 3), 1, True, True)] == [(2, 1), (2, 1)]  # positional
    with pytest.raises(RuntimeError, match="nanmean\\(\\): expected input to have floating point or complex dtype "
                                           "but got Int"):
        i.nanmean()
    with pytest.raises(RuntimeError, match="cannot compute aminmax over an empty dimension"):
        tt.zeros(0, 2).aminmax()
    with pytest.raises(RuntimeError, match="std and var only support floating point"):
        tt.std_mean(i)


def test_composite_reductions_gradcheck():
    x = noncontig(3, 4)
    assert gradcheck(lambda t: tt.std_mean(t, 1)[0] + tt.var_mean(t, 1)[1] * tt.var_mean(t, 1)[0], (x,),
                     fast_mode=True)
    assert gradcheck(lambda t: t.aminmax(dim=0).max - t.aminmax(dim=0).min, (x,), fast_mode=True)
    nan = tt.tensor([[1.0, float("nan")], [2.0, 3.0]], dtype=F64, requires_grad=True)
    tt.nansum(nan * 2).backward()
    assert nan.grad.tolist() == [[2.0, 0.0], [2.0, 2.0]]  # zero where NaN, as torch
    assert gradcheck(lambda t: t.nansum(0) + tt.nanmean(t, 1).sum(), (x,), fast_mode=True)
