"""tt.distributions against float64 NumPy formulas, and seeded sampling checks.

log_prob, entropy, cdf and the KL divergences are exact formulas: compared through
tolerances.py. Samples are checked by their moments, with a bound derived from the sample size:
a sample mean of n draws has standard error sigma / sqrt(n), so the check is |z| < 5 (a 1 in
1.7 million event for a correct sampler); the generator is seeded, so a run is deterministic.
"""
import math

import numpy as np
import pytest

import tritensor as tt
from tritensor import distributions as D
from layouts import LAYOUTS, make
from tolerances import FLOAT_DTYPES, NP, assert_close

N = 4000  # draws per moment check
Z = 5.0


def _np(t):
    return t.detach().cpu().numpy().astype(np.float64)


def _within_sigmas(stat, expected, se):
    z = (np.asarray(stat, dtype=np.float64) - expected) / se
    assert np.all(np.abs(z) < Z), f"sample statistic {stat} vs {expected}: z = {z}"


def _t(values, dtype=tt.float32):
    return tt.tensor(np.asarray(values, dtype=np.float64).astype(NP[dtype]))


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64])
def test_normal_exact(dtype):
    loc, scale = _t([0.5, -1.0, 2.0], dtype), _t([1.0, 0.3, 2.5], dtype)
    d = D.Normal(loc, scale)
    x = _t([[0.1, -1.2, 4.0], [3.0, 0.0, -2.0]], dtype)
    mu, sd, xv = _np(loc), _np(scale), _np(x)
    ref = -((xv - mu) ** 2) / (2 * sd ** 2) - np.log(sd) - 0.5 * np.log(2 * np.pi)
    assert_close(d.log_prob(x), ref, dtype, "rounded_terms", k=4)
    assert_close(d.entropy(), 0.5 + 0.5 * np.log(2 * np.pi) + np.log(sd), dtype)
    cdf = 0.5 * (1 + np.array([[math.erf(v) for v in row] for row in (xv - mu) / (sd * math.sqrt(2))]))
    assert_close(d.cdf(x), cdf, dtype, "rounded_terms", k=4)
    assert_close(d.mean, mu, dtype, "exact")
    assert_close(d.stddev, sd, dtype, "exact")
    assert_close(d.variance, sd ** 2, dtype)
    assert d.batch_shape == (3,) and d.event_shape == () and d.has_rsample


def test_normal_sampling_and_rsample_gradients():
    tt.manual_seed(0)
    loc = tt.tensor([1.0, -2.0], requires_grad=True)
    scale = tt.tensor([0.5, 2.0], requires_grad=True)
    d = D.Normal(loc, scale)
    s = d.rsample((N,))
    assert s.shape == (N, 2) and s.requires_grad
    v = _np(s)
    _within_sigmas(v.mean(0), [1.0, -2.0], np.array([0.5, 2.0]) / math.sqrt(N))
    _within_sigmas(v.var(0, ddof=1), [0.25, 4.0], np.array([0.25, 4.0]) * math.sqrt(2 / (N - 1)))
    s.sum().backward()  # d(loc + scale * eps)/dloc = 1, /dscale = eps = (s - loc) / scale
    assert_close(loc.grad, np.full(2, float(N)), tt.float32)
    eps_sum = ((v - np.array([1.0, -2.0])) / np.array([0.5, 2.0])).sum(0)
    assert_close(scale.grad, eps_sum, tt.float32, "accumulate", k=N)
    plain = d.sample((3,))
    assert plain.shape == (3, 2) and not plain.requires_grad
    tt.manual_seed(7)
    a = _np(D.Normal(0.0, 1.0).sample((5,)))
    tt.manual_seed(7)
    assert_close(D.Normal(0.0, 1.0).sample((5,)), a, tt.float32, "exact")


def test_normal_errors_and_repr():
    with pytest.raises(ValueError) as info:
        D.Normal(tt.tensor([0.0, float("nan")]), tt.tensor([1.0, 1.0]))
    assert str(info.value) == ("Expected parameter loc (Tensor of shape (2,)) of distribution Normal(loc: "
                               "tritensor.Size([2]), scale: tritensor.Size([2])) to satisfy the constraint Real(), "
                               f"but found invalid values:\n{tt.tensor([0.0, float('nan')])}")
    with pytest.raises(ValueError, match=r"scale .* to satisfy the constraint GreaterThan\(lower_bound=0.0\)"):
        D.Normal(tt.zeros(2), tt.tensor([1.0, -1.0]))
    D.Normal(tt.zeros(2), tt.tensor([1.0, -1.0]), validate_args=False)  # unchecked when asked
    assert repr(D.Normal(0.0, 1.0)) == "Normal(loc: 0.0, scale: 1.0)"
    with pytest.raises(ValueError, match="The right-most size of value must match event_shape|Value is not "
                                         "broadcastable with batch_shape"):
        D.Normal(tt.zeros(2), tt.ones(2)).log_prob(tt.zeros(3))


def test_expand():
    d = D.Normal(tt.tensor([0.0, 1.0]), tt.tensor([1.0, 2.0])).expand((3, 2))
    assert d.batch_shape == (3, 2) and d.sample().shape == (3, 2)
    assert_close(d.log_prob(tt.zeros(3, 2)), np.tile(-0.5 * np.log(2 * np.pi) - np.log([1.0, 2.0])
                                                    - np.array([0.0, 1.0]) / np.array([2.0, 8.0]), (3, 1)),
                 tt.float32, "rounded_terms", k=3)
    c = D.Categorical(logits=tt.zeros(3)).expand((2,))
    assert c.batch_shape == (2,) and c.sample((4,)).shape == (4, 2)


@pytest.mark.parametrize("by", ["probs", "logits"])
def test_bernoulli(by):
    p = np.array([0.2, 0.5, 0.9])
    d = D.Bernoulli(probs=_t(p)) if by == "probs" else D.Bernoulli(logits=_t(np.log(p / (1 - p))))
    x = _t([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    xv = _np(x)
    assert_close(d.log_prob(x), xv * np.log(p) + (1 - xv) * np.log1p(-p), tt.float32, "rounded_terms", k=4)
    assert_close(d.entropy(), -(p * np.log(p) + (1 - p) * np.log1p(-p)), tt.float32, "rounded_terms", k=4)
    assert_close(d.probs, p, tt.float32)
    assert_close(d.variance, p * (1 - p), tt.float32)
    tt.manual_seed(1)
    s = _np(d.sample((N,)))
    assert set(np.unique(s)) <= {0.0, 1.0} and s.shape == (N, 3)
    _within_sigmas(s.mean(0), p, np.sqrt(p * (1 - p) / N))


def test_bernoulli_errors():
    with pytest.raises(ValueError, match=r"^Either `probs` or `logits` must be specified, but not both.$"):
        D.Bernoulli(probs=0.3, logits=0.2)
    with pytest.raises(ValueError, match=r"^Either `probs` or `logits` must be specified"):
        D.Bernoulli()
    with pytest.raises(ValueError, match=r"constraint Interval\(lower_bound=0.0, upper_bound=1.0\)"):
        D.Bernoulli(probs=tt.tensor([0.5, 2.0]))
    with pytest.raises(ValueError, match=r"to be within the support \(Boolean\(\)\)"):
        D.Bernoulli(probs=tt.tensor([0.5, 0.2])).log_prob(tt.tensor([0.5, 1.0]))


@pytest.mark.parametrize("by", ["probs", "logits"])
def test_categorical(by):
    w = np.array([[1.0, 2.0, 7.0], [5.0, 3.0, 2.0]])
    p = w / w.sum(-1, keepdims=True)
    d = D.Categorical(probs=_t(w, tt.float64)) if by == "probs" else D.Categorical(logits=_t(np.log(w), tt.float64))
    assert d.batch_shape == (2,) and d.event_shape == ()
    v = tt.tensor([[2, 0], [1, 1], [0, 2]])
    assert_close(d.log_prob(v), np.log(p[np.arange(2), _np(v).astype(int)]), tt.float64)
    assert_close(d.entropy(), -(p * np.log(p)).sum(-1), tt.float64)
    assert_close(d.probs, p, tt.float64)
    assert _np(d.mode).tolist() == [2, 0]
    tt.manual_seed(2)
    s = d.sample((N,))
    assert s.shape == (N, 2) and s.dtype is tt.int64
    sv = _np(s)
    for b in range(2):
        freq = np.array([(sv[:, b] == k).mean() for k in range(3)])
        _within_sigmas(freq, p[b], np.sqrt(p[b] * (1 - p[b]) / N))


def test_categorical_errors():
    with pytest.raises(ValueError, match=r"to be within the support \(IntegerInterval\(lower_bound=0, "
                                         r"upper_bound=1\)\) of the distribution Categorical\(probs: "
                                         r"tritensor.Size\(\[2\]\)\), but found invalid values:\n3$"):
        D.Categorical(probs=tt.tensor([0.2, 0.3])).log_prob(tt.tensor(3))
    with pytest.raises(ValueError, match="constraint Simplex()"):
        D.Categorical(probs=tt.tensor([0.5, -0.5]))
    with pytest.raises(ValueError, match="`probs` parameter must be at least one-dimensional."):
        D.Categorical(probs=tt.tensor(0.5))


def test_uniform():
    lo, hi = np.array([0.0, -1.0]), np.array([2.0, 3.0])
    d = D.Uniform(_t(lo, tt.float64), _t(hi, tt.float64))
    x = _t([0.5, 2.5], tt.float64)
    assert_close(d.log_prob(x), -np.log(hi - lo), tt.float64)
    assert_close(d.entropy(), np.log(hi - lo), tt.float64)
    assert_close(d.cdf(x), (np.array([0.5, 2.5]) - lo) / (hi - lo), tt.float64)
    assert_close(d.mean, (lo + hi) / 2, tt.float64)
    assert_close(d.variance, (hi - lo) ** 2 / 12, tt.float64)
    outside = D.Uniform(0.0, 1.0, validate_args=False).log_prob(tt.tensor([2.0, -0.5, 0.5]))
    assert_close(outside, np.array([-np.inf, -np.inf, 0.0]), tt.float32, "exact")
    tt.manual_seed(3)
    low = tt.tensor([0.0, -1.0], requires_grad=True)
    high = tt.tensor([2.0, 3.0], requires_grad=True)
    s = D.Uniform(low, high).rsample((N,))
    sv = _np(s)
    assert (sv >= lo).all() and (sv < hi).all()
    _within_sigmas(sv.mean(0), (lo + hi) / 2, (hi - lo) / math.sqrt(12 * N))
    s.sum().backward()  # low + u (high - low): d/dhigh = sum(u)
    u = (sv - lo) / (hi - lo)
    assert_close(high.grad, u.sum(0), tt.float32, "accumulate", k=N)
    assert_close(low.grad, (1 - u).sum(0), tt.float32, "accumulate", k=N)
    with pytest.raises(ValueError) as info:
        D.Uniform(1.0, 0.0)
    assert str(info.value) == ("Expected parameter low (Tensor of shape ()) of distribution Uniform(low: 1.0, "
                               "high: 0.0) to satisfy the constraint LessThan(upper_bound=0.0), but found invalid "
                               "values:\n1.0")


COV = np.array([[2.0, 0.6, 0.2], [0.6, 1.0, -0.3], [0.2, -0.3, 1.5]])


def _mvn_logpdf(x, mu, cov):
    d = x - mu
    k = len(mu)
    sol = np.linalg.solve(cov, d.T).T
    return -0.5 * (k * np.log(2 * np.pi) + (d * sol).sum(-1) + np.linalg.slogdet(cov)[1])


@pytest.mark.parametrize("by", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_multivariate_normal_exact(by):
    mu = np.array([0.5, -1.0, 2.0])
    mat = {"covariance_matrix": COV, "precision_matrix": np.linalg.inv(COV),
           "scale_tril": np.linalg.cholesky(COV)}[by]
    d = D.MultivariateNormal(_t(mu, tt.float64), **{by: _t(mat, tt.float64)})
    assert d.batch_shape == () and d.event_shape == (3,)
    x = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 3.0]])
    assert_close(d.log_prob(_t(x, tt.float64)), _mvn_logpdf(x, mu, COV), tt.float64)
    assert_close(d.entropy(), np.array(0.5 * 3 * (1 + np.log(2 * np.pi)) + 0.5 * np.linalg.slogdet(COV)[1]),
                 tt.float64)
    assert_close(d.covariance_matrix, COV, tt.float64)
    assert_close(d.scale_tril, np.linalg.cholesky(COV), tt.float64)
    assert_close(d.precision_matrix, np.linalg.inv(COV), tt.float64)
    assert_close(d.variance, np.diag(COV), tt.float64)


def test_multivariate_normal_batched_sampling_and_gradients():
    tt.manual_seed(4)
    mu = tt.tensor(np.array([[0.0, 1.0, 0.0], [2.0, 0.0, -1.0]]), requires_grad=True)
    d = D.MultivariateNormal(mu, covariance_matrix=tt.tensor(COV))
    assert d.batch_shape == (2,) and d.event_shape == (3,)
    s = d.rsample((N,))
    assert s.shape == (N, 2, 3)
    sv = _np(s)
    _within_sigmas(sv.mean(0), _np(mu), np.sqrt(np.diag(COV)) / math.sqrt(N))
    emp = np.cov(sv[:, 0, :].T)
    se = np.sqrt((COV ** 2 + np.outer(np.diag(COV), np.diag(COV))) / (N - 1))  # var of a sample covariance
    _within_sigmas(emp, COV, se)
    x = tt.tensor(np.array([1.0, -1.0, 0.5]))
    d.log_prob(x).sum().backward()  # d/dmu log N(x; mu, C) = C^-1 (x - mu)
    ref = np.linalg.solve(COV, (np.array([1.0, -1.0, 0.5]) - _np(mu)).T).T
    assert_close(mu.grad, ref, tt.float64)


def test_multivariate_normal_errors():
    with pytest.raises(ValueError, match="^Exactly one of covariance_matrix or precision_matrix or scale_tril may be "
                                         "specified.$"):
        D.MultivariateNormal(tt.zeros(2))
    with pytest.raises(ValueError, match=r"covariance_matrix \(Tensor of shape \(2, 2\)\) of distribution "
                                         r"MultivariateNormal\(loc: tritensor.Size\(\[2\]\), covariance_matrix: "
                                         r"tritensor.Size\(\[2, 2\]\)\) to satisfy the constraint PositiveDefinite\(\)"):
        D.MultivariateNormal(tt.zeros(2), tt.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match=r"constraint LowerCholesky\(\)"):
        D.MultivariateNormal(tt.zeros(2), scale_tril=tt.tensor([[1.0, 2.0], [0.0, 1.0]]))


def test_kl_divergence():
    p, q = D.Normal(_t([0.0, 1.0], tt.float64), _t([1.0, 2.0], tt.float64)), D.Normal(_t([1.0, 1.0], tt.float64),
                                                                                   _t([0.5, 2.0], tt.float64))
    m1, s1, m2, s2 = np.array([0.0, 1.0]), np.array([1.0, 2.0]), np.array([1.0, 1.0]), np.array([0.5, 2.0])
    assert_close(D.kl_divergence(p, q), np.log(s2 / s1) + (s1 ** 2 + (m1 - m2) ** 2) / (2 * s2 ** 2) - 0.5,
                 tt.float64)
    a, b = np.array([0.2, 0.7]), np.array([0.5, 0.1])
    kl_b = a * np.log(a / b) + (1 - a) * np.log((1 - a) / (1 - b))
    assert_close(D.kl_divergence(D.Bernoulli(_t(a, tt.float64)), D.Bernoulli(_t(b, tt.float64))), kl_b, tt.float64)
    pa, pb = np.array([0.2, 0.3, 0.5]), np.array([0.6, 0.2, 0.2])
    assert_close(D.kl_divergence(D.Categorical(_t(pa, tt.float64)), D.Categorical(_t(pb, tt.float64))),
                 np.array((pa * np.log(pa / pb)).sum()), tt.float64)
    assert_close(D.kl_divergence(D.Uniform(0.0, 1.0), D.Uniform(-1.0, 2.0)), np.array(np.log(3.0)), tt.float32)
    assert_close(D.kl_divergence(D.Uniform(-1.0, 2.0), D.Uniform(0.0, 1.0)), np.array(np.inf), tt.float32, "exact")
    cov2 = np.array([[1.0, 0.2, 0.0], [0.2, 2.0, 0.1], [0.0, 0.1, 0.5]])
    mu1, mu2 = np.array([0.0, 1.0, -1.0]), np.array([0.5, 0.0, 0.0])
    P = D.MultivariateNormal(_t(mu1, tt.float64), _t(COV, tt.float64))
    Q = D.MultivariateNormal(_t(mu2, tt.float64), _t(cov2, tt.float64))
    inv2 = np.linalg.inv(cov2)
    ref = 0.5 * (np.trace(inv2 @ COV) + (mu2 - mu1) @ inv2 @ (mu2 - mu1) - 3
                 + np.linalg.slogdet(cov2)[1] - np.linalg.slogdet(COV)[1])
    assert_close(D.kl_divergence(P, Q), np.array(ref), tt.float64)
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.Bernoulli(0.5), D.Normal(0.0, 1.0))


RNG = np.random.default_rng(11)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_normal_log_prob_over_dtypes_layouts_and_broadcasting(dtype, layout):
    x, xr = make((3, 4), dtype, layout, lambda s: RNG.uniform(-2, 2, s))
    loc, lr = make((4,), dtype, "sliced", lambda s: RNG.uniform(-1, 1, s))  # broadcast over the rows
    scale, sr = make((3, 1), dtype, "contiguous", lambda s: RNG.uniform(0.5, 2, s))
    d = D.Normal(loc, scale)
    assert d.batch_shape == (3, 4)
    ref = -((xr - lr) ** 2) / (2 * sr ** 2) - np.log(sr) - 0.5 * np.log(2 * np.pi)
    # five ops each rounding in the dtype (sub, square, divide, log, the sums): a chain of roundings
    assert_close(d.log_prob(x), ref, dtype, "rounded_terms", k=6)
    assert_close(d.entropy(), np.broadcast_to(0.5 + 0.5 * np.log(2 * np.pi) + np.log(sr), (3, 4)), dtype,
                 "rounded_terms", k=3)
    assert d.sample((2,)).dtype is dtype and d.sample((2,)).shape == (2, 3, 4)


def test_empty_batches():
    d = D.Normal(tt.zeros(0), tt.ones(0))
    assert d.sample((2,)).shape == (2, 0) and d.log_prob(tt.zeros(0)).shape == (0,)
    c = D.Categorical(probs=tt.ones(0, 3))
    assert c.batch_shape == (0,) and c.sample((4,)).shape == (4, 0)


def test_gradchecks():
    """Small inputs: gradcheck perturbs every element, each a full forward."""
    x = tt.tensor(RNG.uniform(-2, 2, (2,)))
    loc = tt.tensor(RNG.uniform(-1, 1, (2,)), requires_grad=True)
    scale = tt.tensor(RNG.uniform(0.5, 2, (2,)), requires_grad=True)
    normal = lambda m, s: D.Normal(m, s, validate_args=False)  # noqa: E731  (validation is checked above)
    assert tt.autograd.gradcheck(lambda m, s: normal(m, s).log_prob(x) + normal(m, s).entropy(), (loc, scale))
    logits = tt.tensor(RNG.normal(size=(2, 3)), requires_grad=True)
    v = tt.tensor([2, 0])
    cat = lambda z: D.Categorical(logits=z, validate_args=False)  # noqa: E731
    assert tt.autograd.gradcheck(lambda z: cat(z).log_prob(v) + cat(z).entropy(), (logits,))
    b = tt.tensor(RNG.normal(size=(2,)), requires_grad=True)
    assert tt.autograd.gradcheck(lambda z: D.Bernoulli(logits=z, validate_args=False).log_prob(
        tt.tensor([1.0, 0.0], dtype=tt.float64)), (b,))
    # through the Cholesky factor and the triangular solves written from recorded ops
    cov = tt.tensor(np.array([[2.0, 0.6], [0.6, 1.0]]), requires_grad=True)
    mu = tt.tensor(np.array([0.5, -1.0]), requires_grad=True)
    y = tt.tensor(np.array([1.0, 0.0]))
    assert tt.autograd.gradcheck(
        lambda m, c: D.MultivariateNormal(m, covariance_matrix=c, validate_args=False).log_prob(y), (mu, cov))
    assert tt.autograd.gradcheck(
        lambda c: D.MultivariateNormal(mu.detach(), precision_matrix=c, validate_args=False).entropy(), (cov,))
