"""angle, the adjoints (adjoint, mH, H), gradient, histogramdd, nonzero_static, slice_inverse, cond,
lobpcg and the samplers poisson, binomial, cauchy_, exponential_, geometric_, log_normal_
(core/ops/signal_more.py) against float64 NumPy (np.gradient, np.histogramdd, numpy.linalg.eigh),
with torch's errors; the samplers' moments checked statistically on fixed seeds; the gradchecks."""
import math
import zlib

import numpy as np
import pytest

import tritensor as tt
from layouts import LAYOUTS, check_layout, make
from tolerances import FLOAT_DTYPES, assert_close


@pytest.fixture(autouse=True)
def _reseed(request):
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_angle_and_adjoints(dtype):
    layout = LAYOUTS[FLOAT_DTYPES.index(dtype)]
    x, r = make((3, 4), dtype, layout, lambda s: RNG.standard_normal(s))
    check_layout(x, layout)
    assert_close(tt.angle(x), np.where(r < 0, np.pi, 0.0), dtype)
    special = tt.tensor([float("nan"), float("inf"), -float("inf"), -0.0], dtype=dtype)
    assert_close(special.angle(), [np.nan, 0.0, np.pi, 0.0], dtype)
    assert tt.angle(tt.tensor([1, -2])).dtype == tt.float32
    assert_close(tt.angle(tt.empty(0, 2, dtype=dtype)), np.zeros((0, 2)), dtype)
    assert_close(tt.adjoint(x), r.T, dtype)
    assert_close(x.mH, r.T, dtype)
    assert_close(x.H, r.T, dtype)
    b, rb = make((2, 3, 5), dtype, layout, lambda s: RNG.standard_normal(s))
    assert_close(b.adjoint(), rb.transpose(0, 2, 1), dtype)
    assert_close(b.mH, rb.transpose(0, 2, 1), dtype)
    with pytest.raises(RuntimeError, match="tensor.H is only supported on matrices \\(2-D tensors\\). Got 3-D"):
        b.H
    with pytest.raises(RuntimeError, match="tensor.mH is only supported on matrices or batches of matrices. Got 1-D"):
        tt.ones(3).mH
    with pytest.raises(RuntimeError, match="tensor.adjoint\\(\\) is only supported on matrices"):
        tt.adjoint(tt.ones(3))


def _coords(n):
    return np.cumsum(RNG.random(n) + 0.5)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient_matches_numpy(dtype, edge_order):
    layout = LAYOUTS[FLOAT_DTYPES.index(dtype)]
    x, r = make((4, 5), dtype, layout, lambda s: RNG.standard_normal(s))
    check_layout(x, layout)
    # spacing: unit, a scalar, a list of scalars, coordinate tensors, one dim of several
    for got, ref in ((tt.gradient(x, edge_order=edge_order), np.gradient(r, edge_order=edge_order)),
                     (tt.gradient(x, spacing=2.0, edge_order=edge_order), np.gradient(r, 2.0, edge_order=edge_order)),
                     (tt.gradient(x, spacing=[0.5, 3.0], edge_order=edge_order),
                      np.gradient(r, 0.5, 3.0, edge_order=edge_order))):
        for g, e in zip(got, ref):
            assert_close(g, e, dtype, "rounded_terms", k=4)
    c0, c1 = _coords(4), _coords(5)
    got = tt.gradient(x, spacing=[tt.tensor(c0, dtype=dtype), tt.tensor(c1, dtype=dtype)], edge_order=edge_order)
    c0r, c1r = (tt.tensor(c, dtype=dtype).to(tt.float64).numpy() for c in (c0, c1))
    for g, e in zip(got, np.gradient(r, c0r, c1r, edge_order=edge_order)):
        assert_close(g, e, dtype, "rounded_terms", k=8)
    (g1,) = tt.gradient(x, spacing=[tt.tensor(c1r)], dim=1, edge_order=edge_order)
    assert_close(g1, np.gradient(r, c1r, axis=1, edge_order=edge_order), dtype, "rounded_terms", k=8)
    (gi,) = tt.gradient(tt.arange(6) ** 2)
    assert gi.dtype == tt.float32
    assert_close(gi, np.gradient(np.arange(6.0) ** 2), tt.float32)


def test_gradient_errors_follow_torch():
    with pytest.raises(RuntimeError, match="expected each dimension size to be at least edge_order\\+1"):
        tt.gradient(tt.ones(2), edge_order=2)
    with pytest.raises(RuntimeError, match="only supports edge_order=1 and edge_order=2"):
        tt.gradient(tt.ones(4), edge_order=3)
    with pytest.raises(RuntimeError, match="a list of length equal to 'self.dim\\(\\) = 2'"):
        tt.gradient(tt.ones(3, 4), spacing=[1.0, 2.0, 3.0])
    with pytest.raises(IndexError, match="Dimension out of range"):
        tt.gradient(tt.ones(3, 4), dim=2)


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64], ids=str)
def test_histogramdd_matches_numpy(dtype):
    x, r = make((30, 3), dtype, "transposed", lambda s: RNG.random(s))
    w = RNG.random(30)
    for bins in (4, [2, 3, 5]):
        for density in (False, True):
            hist, edges = tt.histogramdd(x, bins=bins, density=density)
            ref, ref_edges = np.histogramdd(r, bins=bins, density=density)
            assert_close(hist, ref, dtype, "rounded_terms", k=4)
            for e, re_ in zip(edges, ref_edges):
                assert_close(e, re_, dtype)
    rng = [0.2, 0.8, 0.0, 1.0, 0.1, 0.5]
    got = tt.histogramdd(x, bins=[3, 2, 2], range=rng, weight=tt.tensor(w, dtype=dtype))
    wr = tt.tensor(w, dtype=dtype).to(tt.float64).numpy()
    ref, _ = np.histogramdd(r, bins=[3, 2, 2], range=[(0.2, 0.8), (0.0, 1.0), (0.1, 0.5)], weights=wr)
    assert_close(got.hist, ref, dtype, "rounded_terms", k=4)
    edges = [tt.tensor([0.0, 0.3, 1.0], dtype=dtype), tt.tensor([0.0, 0.5, 0.9, 1.0], dtype=dtype),
             tt.tensor([0.2, 0.6], dtype=dtype)]
    got = tt.histogramdd(x, bins=edges)
    ref, _ = np.histogramdd(r, bins=[e.to(tt.float64).numpy() for e in edges])
    assert_close(got.hist, ref, dtype)
    empty = tt.histogramdd(tt.empty(0, 2, dtype=dtype), bins=2)
    assert_close(empty.hist, np.zeros((2, 2)), dtype)
    with pytest.raises(NotImplementedError, match='"histogramdd" not implemented for \'Long\''):
        tt.histogramdd(tt.arange(10).view(5, 2), bins=3)
    with pytest.raises(RuntimeError, match="The size of bins must be equal to the innermost dimension"):
        tt.histogramdd(x, bins=[3])
    with pytest.raises(RuntimeError, match="range should have 6 elements, but got 2"):
        tt.histogramdd(x, bins=3, range=[0.0, 1.0])


def test_nonzero_static_slice_inverse_cond():
    x = tt.tensor([[0, 1, 0], [2, 0, 3]])
    ref = np.argwhere(x.numpy())
    assert_close(tt.nonzero_static(x, size=5), np.concatenate([ref, -np.ones((2, 2), np.int64)]), tt.int64)
    assert_close(x.nonzero_static(size=2, fill_value=7), ref[:2], tt.int64)
    assert_close(x.t().nonzero_static(size=3), np.argwhere(x.numpy().T), tt.int64)
    assert tuple(tt.nonzero_static(tt.zeros(0), size=0).shape) == (0, 1)
    with pytest.raises(RuntimeError, match="'size' must be an non-negative integer"):
        tt.nonzero_static(x, size=-1)
    with pytest.raises(TypeError, match="argument 'size' must be int, not float"):
        tt.nonzero_static(x, size=2.0)
    base = tt.arange(10.0)
    s = base[2:8:2]
    inv = tt.slice_inverse(s, base, 0, 2, 8, 2)
    assert_close(inv, np.arange(10.0), tt.float32)
    assert_close(s.slice_inverse(tt.zeros(10), 0, 2, 8, 2), np.arange(10.0), tt.float32)  # src gives the geometry
    a = tt.ones(2)
    assert_close(tt.cond(tt.tensor(False), lambda v: v + 1, lambda v: v - 1, (a,)), [0.0, 0.0], tt.float32)
    assert_close(tt.cond(True, lambda v, w: v * w, lambda v, w: v, [a, a * 3]), [3.0, 3.0], tt.float32)
    assert_close(tt.cond(True, lambda: tt.ones(1), lambda: tt.zeros(1)), [1.0], tt.float32)
    with pytest.raises(RuntimeError, match="Expected pred to be bool or single-element tensor"):
        tt.cond(tt.tensor([True, False]), lambda v: v, lambda v: v, (a,))
    with pytest.raises(RuntimeError, match="callable"):
        tt.cond(True, 3, lambda v: v, (a,))


def test_lobpcg_matches_numpy_eigh():
    q = np.linalg.qr(RNG.standard_normal((9, 9)))[0]
    evals = np.array([1.0, 2.0, 3.0, 4.5, 5.0, 6.0, 7.0, 9.0, 12.0])
    a = q @ np.diag(evals) @ q.T
    b = np.diag(np.linspace(1.0, 2.0, 9))
    tol = 1e-6  # looser than torch's sqrt(eps) default, for fewer iterations in CPU mode; the Ritz values
    # converge like the residual squared, so they still meet float64's finite-difference profile
    e, x = tt.lobpcg(tt.tensor(a), k=2, B=tt.tensor(b), tol=tol)
    # the generalized problem through numpy: eigh of L^-1 A L^-T, B = L L^T
    li = np.linalg.inv(np.linalg.cholesky(b))
    ref = np.linalg.eigh(li @ a @ li.T)[0][::-1][:2]
    assert_close(e, ref, tt.float64, "finite_difference")
    # the vectors solve A x = l B x to torch's convergence test, |r| <= tol |x| (|A| + |l| |B|)
    xn, en = x.numpy(), e.numpy()
    res = np.linalg.norm(a @ xn - b @ xn * en, axis=0)
    bound = tol * np.linalg.norm(xn, axis=0) * (np.linalg.norm(a) + en * np.linalg.norm(b))
    assert (res <= bound).all(), (res, bound)
    e, _ = tt.lobpcg(tt.tensor(a), k=1, n=2, largest=False, tol=tol)  # n = 2 search vectors for k = 1
    assert_close(e, evals[:1], tt.float64, "finite_difference")
    with pytest.raises(ValueError, match="smaller than 3 x the number of requested eigenpairs \\(=2\\)"):
        tt.lobpcg(tt.eye(4), k=2)


# Moment bounds: the sample mean of N draws has standard error sd / sqrt(N); every check allows 6
# standard errors (a two-sided 6-sigma event has probability 2e-9, and the seeds are fixed, so the
# tests are deterministic; the bound only says the draws are not just any numbers that pass).
def _check_mean(samples, mean, sd):
    n = samples.size
    assert abs(samples.mean() - mean) <= 6 * sd / math.sqrt(n), (samples.mean(), mean)


def test_in_place_samplers_moments_and_generator():
    n = 4000
    e = tt.empty(n).exponential_(2.0, generator=tt.Generator().manual_seed(1)).numpy().astype(np.float64)
    assert (e >= 0).all()
    _check_mean(e, 0.5, 0.5)
    g = tt.empty(n, dtype=tt.float64).geometric_(0.25).numpy()
    assert (g >= 1).all() and (g == np.round(g)).all()
    _check_mean(g, 4.0, math.sqrt(0.75) / 0.25)
    ln = tt.empty(n, dtype=tt.float64).log_normal_(0.5, 0.3).numpy()
    _check_mean(np.log(ln), 0.5, 0.3)
    c = tt.empty(n, dtype=tt.float64).cauchy_(1.0, 2.0).numpy()
    # the median of Cauchy(1, 2): the sample median's standard error is pi * sigma / (2 sqrt(N))
    assert abs(np.median(c) - 1.0) <= 6 * math.pi * 2.0 / (2 * math.sqrt(n))
    # the generator decides the numbers; a strided destination is filled too
    for name, args in (("exponential_", (1.0,)), ("cauchy_", ()), ("log_normal_", ()), ("geometric_", (0.3,))):
        a = getattr(tt.empty(6, dtype=tt.float64), name)(*args, generator=tt.Generator().manual_seed(7))
        b = getattr(tt.empty(6, dtype=tt.float64), name)(*args, generator=tt.Generator().manual_seed(7))
        d = getattr(tt.empty(6, dtype=tt.float64), name)(*args, generator=tt.Generator().manual_seed(8))
        assert_close(a, b.numpy(), tt.float64, "exact")
        assert not np.array_equal(a.numpy(), d.numpy())
        strided = tt.zeros(6, 2)[:, 0]
        getattr(strided, name)(*args)
        assert (strided.numpy() != 0).all()
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        tt.ones(3, requires_grad=True).exponential_()
    half = tt.empty(5, dtype=tt.float16).exponential_()
    assert half.dtype == tt.float16 and (half.numpy() >= 0).all()
    for call, msg in ((lambda: tt.ones(3).exponential_(0), "exponential_ expects lambda > 0.0, but found lambda=0"),
                      (lambda: tt.ones(3).geometric_(1), "geometric_ expects p to be in \\(0, 1\\), but got p=1"),
                      (lambda: tt.ones(3).log_normal_(1, 0), "log_normal_ expects std > 0.0, but found std=0"),
                      (lambda: tt.ones(3).cauchy_(0, -1), "cauchy_ expects sigma > 0.0, but found sigma=-1"),
                      (lambda: tt.ones(3, dtype=tt.int64).exponential_(),
                       "dtype must be a floating point but you specified Long")):
        with pytest.raises(RuntimeError, match=msg):
            call()


def test_poisson_binomial_moments_and_checks():
    n = 250
    rates = np.array([0.0, 0.7, 9.5, 400.0])  # zero, the CDF count (small and near the switch), PTRS
    p = tt.poisson(tt.tensor(rates).expand(n, 4).contiguous(), generator=tt.Generator().manual_seed(3)).numpy()
    assert (p == np.round(p)).all() and (p >= 0).all() and (p[:, 0] == 0).all()
    for j in range(1, 4):
        _check_mean(p[:, j], rates[j], math.sqrt(rates[j]))
    again = tt.poisson(tt.tensor(rates[1:3]), generator=tt.Generator().manual_seed(4))
    assert_close(again, tt.poisson(tt.tensor(rates[1:3]), generator=tt.Generator().manual_seed(4)).numpy(),
                 tt.float64, "exact")
    counts = np.array([5.0, 40.0, 1000.0, 0.0])  # the CDF count, mirrored (p > 1/2), BTRS, nothing to draw
    probs = np.array([0.3, 0.9, 0.4, 0.5])
    b = tt.binomial(tt.tensor(counts).expand(n, 4).contiguous(), tt.tensor(probs).expand(n, 4).contiguous()).numpy()
    assert (b == np.round(b)).all() and (b >= 0).all() and (b <= counts).all()
    for j in range(3):
        _check_mean(b[:, j], counts[j] * probs[j], math.sqrt(counts[j] * probs[j] * (1 - probs[j])))
    assert_close(tt.binomial(tt.tensor([7.0, 3.0]), tt.tensor([1.0, 0.0])), [7.0, 0.0], tt.float32)
    with pytest.raises(RuntimeError, match="invalid Poisson rate, expected rate to be non-negative"):
        tt.poisson(tt.tensor([-1.0]))
    with pytest.raises(NotImplementedError, match="\"poisson_cpu\" not implemented for 'Long'"):
        tt.poisson(tt.tensor([1, 2]))
    with pytest.raises(ValueError, match="binomial only supports floating-point dtypes for count, got: Long"):
        tt.binomial(tt.tensor([5]), tt.tensor([0.5]))
    with pytest.raises(RuntimeError, match="0 <= prob <= 1"):
        tt.binomial(tt.tensor([5.0]), tt.tensor([1.5]))


def test_signal_more_gradcheck():
    x = tt.tensor(RNG.standard_normal((4, 5)), requires_grad=True)
    c = tt.tensor(_coords(5))
    fns = [lambda a: tt.gradient(a, edge_order=2), lambda a: tt.gradient(a, spacing=[c], dim=1),
           lambda a: tt.angle(a), lambda a: tt.adjoint(a), lambda a: a.mH, lambda a: a.H,
           lambda a: tt.cond(True, lambda v: v * 2, lambda v: v, (a,))]
    for f in fns:
        assert tt.autograd.gradcheck(f, (x,), fast_mode=True)
