"""Statistics and products beyond the plain reductions (core/ops/stats_more.py): quantile and
nanquantile, cov and corrcoef, dist, inner, vdot, addr, addbmm, chain_matmul, the trapezoid rules,
isin, histogram, renorm, index_reduce, fill_diagonal_ and the in-place scans, against float64
NumPy over dtypes, layouts, odd and empty shapes, with torch's errors and the gradchecks."""
import warnings
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


@pytest.mark.parametrize("dtype,layout", [CASES[0], CASES[2], CASES[3], CASES[4]], ids=str)
def test_quantile_nanquantile_match_numpy(dtype, layout):
    x, r = make((3, 7), dtype, layout, _normal)
    check_layout(x, layout)
    for method in ("linear", "lower", "higher", "midpoint", "nearest"):
        assert_close(tt.quantile(x, 0.3, dim=1, interpolation=method), np.quantile(r, 0.3, axis=1, method=method),
                     dtype)
    q = np.array([0.0, 0.25, 0.5, 1.0])
    assert_close(x.quantile(tt.tensor(q.astype(NP[dtype])), dim=0, keepdim=True),
                 np.quantile(r, q, axis=0, keepdims=True), dtype)
    assert_close(tt.quantile(x, 0.75), np.quantile(r, 0.75), dtype)
    assert_close(tt.quantile(x, 0.75, keepdim=True), np.quantile(r, 0.75, keepdims=True), dtype)
    n = r.copy()
    n[0, 2] = n[1, :] = np.nan
    xn = tt.tensor(n.astype(NP[dtype]))
    assert_close(tt.quantile(xn, 0.4, dim=1), np.quantile(n, 0.4, axis=1), dtype)  # NaN in a row: NaN
    assert_close(xn.nanquantile(0.4, dim=1), np.nanquantile(n, 0.4, axis=1), dtype)  # all-NaN row: NaN
    assert_close(tt.nanquantile(xn, tt.tensor(q.astype(NP[dtype]))), np.nanquantile(n, q), dtype)
    one = tt.tensor([2.5], dtype=dtype)
    assert tt.quantile(one, 0.9).item() == 2.5 and tt.quantile(one, 0.9).ndim == 0


def test_quantile_errors_follow_torch():
    x = tt.arange(6.).reshape(2, 3)
    with pytest.raises(RuntimeError, match=r"quantile\(\) q must be in the range \[0, 1\] but got 1.5"):
        tt.quantile(x, 1.5)
    with pytest.raises(RuntimeError, match=r"quantile\(\) input tensor must be either float or double dtype"):
        tt.quantile(x.int(), 0.5)
    with pytest.raises(RuntimeError, match="interpolation must be one of linear, lower, higher, midpoint or nearest, "
                                           "but got foo"):
        tt.quantile(x, 0.5, interpolation="foo")
    with pytest.raises(RuntimeError, match=r"quantile\(\) input tensor must be non-empty"):
        tt.nanquantile(tt.zeros(0), 0.5)
    with pytest.raises(RuntimeError, match=r"q tensor must be same dtype as the input tensor"):
        tt.quantile(x, tt.tensor([0.5], dtype=tt.float64))
    with pytest.raises(RuntimeError, match=r"q must be a scalar or 1D tensor"):
        tt.quantile(x, tt.ones(1, 1))


@pytest.mark.parametrize("dtype,layout", CASES, ids=str)
def test_products_and_distances_match_numpy(dtype, layout):
    x, r = make((3, 5), dtype, layout, _normal)
    y, ry = make((3, 5), dtype, "contiguous", _normal)
    v, rv = make((5,), dtype, layout, _normal)
    w, rw = make((3,), dtype, "contiguous", _normal)
    assert_close(tt.dist(x, y), np.linalg.norm((r - ry).ravel()), dtype, "rounded_terms", k=15)
    assert_close(x.dist(v, 3), np.sum(np.abs(r - rv) ** 3) ** (1 / 3), dtype, "rounded_terms", k=15)
    assert_close(tt.inner(x, v), r @ rv, dtype, "accumulate", k=5)
    assert_close(x.inner(y), r @ ry.T, dtype, "accumulate", k=5)
    assert_close(tt.inner(x, tt.tensor(2.0, dtype=dtype)), r * 2, dtype)
    assert_close(tt.vdot(v, v), rv @ rv, dtype, "accumulate", k=5)
    assert_close(tt.addr(x, w, v, beta=0.5, alpha=2), 0.5 * r + 2 * np.outer(rw, rv), dtype, "rounded_terms", k=2)
    nan = tt.full((3, 5), float("nan"), dtype=dtype)
    assert_close(tt.addr(nan, w, v, beta=0), np.outer(rw, rv), dtype)  # beta=0 ignores the input
    b1, rb1 = make((4, 3, 2), dtype, layout, _normal)
    b2, rb2 = make((4, 2, 5), dtype, "contiguous", _normal)
    # fp16/bf16 round the batch products, their sum, the scaling and the add: four roundings
    assert_close(tt.addbmm(x, b1, b2, alpha=0.5), r + 0.5 * np.einsum("bij,bjk->ik", rb1, rb2), dtype,
                 "rounded_terms", k=4)
    z = x.clone()
    assert z.addbmm_(b1, b2) is z
    assert_close(z, r + np.einsum("bij,bjk->ik", rb1, rb2), dtype, "rounded_terms", k=4)
    z = x.clone()
    z.addr_(w, v)
    assert_close(z, r + np.outer(rw, rv), dtype, "rounded_terms", k=2)
    with pytest.warns(UserWarning, match="torch.chain_matmul is deprecated"):
        got = tt.chain_matmul(x, y.t(), x)
    assert_close(got, r @ ry.T @ r, dtype, "product_chain", k=np.abs(r) @ np.abs(ry.T) @ np.abs(r))
    empty = tt.zeros(0, dtype=dtype)
    assert tt.vdot(empty, empty).item() == 0
    with pytest.raises(RuntimeError, match="1D tensors expected, but got 2D and 2D tensors"):
        tt.vdot(x, x)
    with pytest.raises(RuntimeError, match="dot : expected both vectors to have same dtype, but found"):
        tt.vdot(tt.ones(2), tt.ones(2, dtype=tt.int32))
    with pytest.raises(RuntimeError, match=r"inner\(\) the last dimension must match on both input tensors but got "
                                           r"shapes \[3, 5\] and \[3\]"):
        tt.inner(x, w)
    with pytest.raises(RuntimeError, match="addr: Expected 1-D argument vec1, but got 2-D"):
        tt.addr(x, x, v)


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64], ids=str)
def test_cov_corrcoef_match_numpy(dtype):
    x, r = make((3, 6), dtype, "transposed", _normal)
    assert_close(tt.cov(x), np.cov(r), dtype, "accumulate", k=6)
    assert_close(x.cov(correction=0), np.cov(r, ddof=0), dtype, "accumulate", k=6)
    fw, aw = np.array([1, 2, 1, 3, 1, 1]), RNG.uniform(0.5, 2, 6)
    assert_close(tt.cov(x, fweights=tt.tensor(fw), aweights=tt.tensor(aw.astype(NP[dtype]))),
                 np.cov(r, fweights=fw, aweights=aw.astype(NP[dtype]).astype(np.float64)), dtype, "accumulate", k=12)
    assert_close(tt.cov(x[0]), np.cov(r[0]), dtype, "accumulate", k=6)
    assert_close(tt.cov(tt.arange(3)), np.cov(np.arange(3)), tt.float32)
    assert_close(tt.corrcoef(x), np.corrcoef(r), dtype, "accumulate", k=6)
    assert_close(x.corrcoef(), np.corrcoef(r), dtype, "accumulate", k=6)
    with pytest.raises(RuntimeError, match=r"cov\(\): expected input to have two or fewer dimensions but got an input "
                                           "with 3 dimensions"):
        tt.cov(tt.ones(2, 2, 2))
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        tt.cov(tt.ones(1, 1, dtype=dtype))


@pytest.mark.parametrize("dtype,layout", CASES, ids=str)
def test_trapezoid_rules_match_numpy(dtype, layout):
    y, ry = make((3, 6), dtype, layout, _normal)
    xs = np.sort(RNG.uniform(0, 4, 6)).astype(NP[dtype])
    assert_close(tt.trapezoid(y), np.trapezoid(ry, axis=-1), dtype, "rounded_terms", k=6)
    assert_close(tt.trapz(y, dx=0.5, dim=0), np.trapezoid(ry, dx=0.5, axis=0), dtype, "rounded_terms", k=3)
    assert_close(tt.trapezoid(y, tt.tensor(xs)), np.trapezoid(ry, xs.astype(np.float64)), dtype, "rounded_terms",
                 k=6)
    mids = (ry[:, 1:] + ry[:, :-1]) / 2 * np.diff(xs.astype(np.float64))
    assert_close(tt.cumulative_trapezoid(y, tt.tensor(xs)), np.cumsum(mids, -1), dtype, "rounded_terms", k=6)
    assert_close(tt.cumulative_trapezoid(y, dim=0), np.cumsum((ry[1:] + ry[:-1]) / 2, 0), dtype, "rounded_terms",
                 k=3)
    e = tt.zeros(2, 0, dtype=dtype)
    assert_close(tt.trapezoid(e), np.zeros(2), dtype)
    assert tuple(tt.cumulative_trapezoid(tt.zeros(2, 1, dtype=dtype)).shape) == (2, 0)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [tt.int32, tt.int64], ids=str)
def test_isin_and_histogram_match_numpy(dtype):
    e = RNG.integers(-5, 6, (4, 7)).astype(NP[dtype])
    t = RNG.integers(-5, 6, 9).astype(NP[dtype])
    assert_close(tt.isin(tt.tensor(e), tt.tensor(t)), np.isin(e, t), tt.bool)
    assert_close(tt.isin(tt.tensor(e).t(), tt.tensor(t), invert=True), np.isin(e.T, t, invert=True), tt.bool)
    assert_close(tt.isin(tt.tensor(e), 3), np.isin(e, 3), tt.bool)
    assert tt.isin(2, tt.tensor(t)).item() == bool(np.isin(2, t))
    assert_close(tt.isin(tt.tensor(e), tt.zeros(0, dtype=dtype)), np.zeros(e.shape, bool), tt.bool)
    if not dtype.is_floating_point or dtype in (tt.float16, tt.bfloat16):
        with pytest.raises(NotImplementedError, match='"histogramdd" not implemented for'):
            tt.histogram(tt.tensor(e), bins=3)
        return
    x, r = make((5, 8), dtype, "sliced", _normal)
    for bins, rng in ((5, None), (3, (-1.0, 1.0))):
        hist, edges = tt.histogram(x, bins, range=rng)
        want_h, want_e = np.histogram(r, bins, range=rng)
        assert_close(edges, want_e, dtype)
        assert_close(hist, want_h.astype(np.float64), dtype, "exact")
        assert hist.dtype is dtype
    w = RNG.uniform(0, 1, (5, 8))
    edges_in = np.array([-1.0, 0.0, 0.5, 2.0])
    hist, edges = x.histogram(tt.tensor(edges_in.astype(NP[dtype])), weight=tt.tensor(w.astype(NP[dtype])),
                              density=True)
    want_h, _ = np.histogram(r, edges_in, weights=w.astype(NP[dtype]).astype(np.float64), density=True)
    assert_close(hist, want_h, dtype, "rounded_terms", k=40)
    hist, edges = tt.histogram(tt.tensor([2.0, 2.0], dtype=dtype), bins=2)  # one value: a range of width 1
    assert_close(hist, np.array([0.0, 2.0]), dtype, "exact")
    assert_close(edges, np.array([1.5, 2.0, 2.5]), dtype, "exact")


@pytest.mark.parametrize("dtype,layout", CASES, ids=str)
def test_renorm_index_reduce_fill_diagonal_inplace_scans(dtype, layout):
    x, r = make((4, 3), dtype, layout, _normal)
    norms = np.linalg.norm(r, axis=1, keepdims=True)
    want = np.where(norms > 1.0, r * (1.0 / (norms + 1e-7)), r)
    assert_close(tt.renorm(x, 2, 0, 1.0), want, dtype)
    z = x.clone()
    assert z.renorm_(2, 0, 1.0) is z
    assert_close(z, want, dtype)
    src = RNG.standard_normal((5, 3)).astype(NP[dtype])
    idx = np.array([0, 2, 0, 3, 2])
    for reduce, fn, ident in (("prod", np.multiply, 1.0), ("amax", np.maximum, -np.inf), ("amin", np.minimum, np.inf)):
        for include_self in (True, False):
            want = r.copy() if include_self else np.where(np.isin(np.arange(4), idx)[:, None], ident, r)
            fn.at(want, idx, src.astype(np.float64))
            assert_close(x.index_reduce(0, tt.tensor(idx), tt.tensor(src), reduce, include_self=include_self), want,
                         dtype, "rounded_terms", k=3)
    sums, counts = r.copy(), np.ones(4)
    np.add.at(sums, idx, src.astype(np.float64))
    np.add.at(counts, idx, 1)
    z = x.clone()
    z.index_reduce_(0, tt.tensor(idx), tt.tensor(src), "mean")
    assert_close(z, sums / counts[:, None], dtype, "rounded_terms", k=3)
    for shape, wrap in (((4, 3), False), ((7, 3), True), ((7, 3), False), ((3, 5), False), ((3, 3, 3), False)):
        a = tt.zeros(*shape, dtype=dtype)
        if layout == "transposed":
            a = tt.zeros(*shape[::-1], dtype=dtype).permute(*reversed(range(len(shape))))
        want = np.zeros(shape)
        np.fill_diagonal(want, 2.0, wrap=wrap)
        assert a.fill_diagonal_(2.0, wrap=wrap) is a
        assert_close(a, want, dtype, "exact")
    z = x.clone()
    assert z.cumsum_(0) is z
    assert_close(z, np.cumsum(r, 0), dtype, "rounded_terms", k=4)
    z = x.clone()
    z.cumprod_(1)
    assert_close(z, np.cumprod(r, 1), dtype, "product", k=3)
    with pytest.raises(RuntimeError, match="renorm: non-positive-norm not supported"):
        x.renorm(-1, 0, 1)
    with pytest.raises(RuntimeError, match="renorm: expected maxnorm to be >= 0 but got -1"):
        x.renorm(2, 0, -1)
    with pytest.raises(RuntimeError, match="Expected reduce to be one of prod, mean, amax or amin but got sum."):
        x.index_reduce(0, tt.tensor([0]), x[:1], "sum")
    with pytest.raises(RuntimeError, match="all dimensions of input must be of equal length"):
        tt.ones(2, 3, 4, dtype=dtype).fill_diagonal_(1)


def test_stats_more_gradcheck():
    x = tt.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    v = tt.tensor(RNG.standard_normal(4), requires_grad=True)
    w = tt.tensor(RNG.standard_normal(3), requires_grad=True)
    b = tt.tensor(RNG.standard_normal((2, 3, 4)), requires_grad=True)
    q = tt.tensor([0.2, 0.9], dtype=tt.float64)
    pts = tt.tensor([0.0, 0.5, 2.0, 2.5], dtype=tt.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fns = [lambda a: tt.quantile(a, 0.3, dim=1), lambda a: tt.nanquantile(a, q, dim=0, interpolation="midpoint"),
               tt.cov, tt.corrcoef, lambda a: tt.dist(a, a[0] * 2, 3), lambda a: tt.inner(a, a),
               lambda a: tt.vdot(a[0], a[1]), lambda a: tt.addr(a, a[:, 0], a[0], beta=2),
               lambda a: a.clone().addr_(a[:, 1], a[1]), lambda a: tt.chain_matmul(a, a.t(), a),
               lambda a: tt.trapezoid(a, dim=0), lambda a: tt.trapz(a, pts),
               lambda a: tt.cumulative_trapezoid(a, dx=2), lambda a: tt.renorm(a, 2, 1, 1.0),
               lambda a: a.clone().renorm_(1, 0, 0.5),
               lambda a: tt.index_reduce(a, 0, tt.tensor([0, 2]), a[:2] * 2, "amax", include_self=False),
               lambda a: a.clone().index_reduce_(1, tt.tensor([1, 1, 3]), a[:, :3] + 1, "prod"),
               lambda a: tt.index_reduce(a, 0, tt.tensor([2, 2]), a[1:] * 3, "mean"),
               lambda a: a.clone().cumsum_(1), lambda a: a.clone().cumprod_(0),
               lambda a: (a * 1).fill_diagonal_(0.5)]
        # fast mode (random projections v^T J u, as torch's): the many composites in one test stay cheap
        for f in fns:
            assert tt.autograd.gradcheck(f, (x,), fast_mode=True)
        assert tt.autograd.gradcheck(lambda a, m: tt.addbmm(a, m, m.transpose(1, 2)), (x[:, :3].detach()
                                                                                           .requires_grad_(), b))
        assert tt.autograd.gradcheck(lambda a, m: a.clone().addbmm_(m, m.transpose(1, 2), alpha=2),
                                     (x[:, :3].detach().requires_grad_(), b))
        assert tt.autograd.gradcheck(lambda c, d: tt.inner(c, d), (v, v))
        assert tt.autograd.gradcheck(lambda a, c: tt.addr(a, c, v), (x, w))
        assert tt.autograd.gradgradcheck(lambda a: (a * 1).fill_diagonal_(0.5) * a, (x,), fast_mode=True)
