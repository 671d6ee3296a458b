"""``kl_divergence(p, q)`` and ``register_kl``: KL(p || q) in closed form for pairs of
distribution types, looked up by the most specific registered pair (torch's rule)."""
from __future__ import annotations

import math

from ..core.factories import full_like
from ..nn import functional as F
from .bernoulli import Bernoulli
from .categorical import Categorical
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .uniform import Uniform
from .utils import batch_mahalanobis, solve_lower

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY: dict = {}


def register_kl(type_p, type_q):
    """Decorator: ``@register_kl(P, Q)`` makes the function KL(p || q) for p of type P, q of type Q."""
    if not isinstance(type_p, type):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not isinstance(type_q, type):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        return fun

    return decorator


def _dispatch_kl(type_p, type_q):
    matches = [(p, q) for p, q in _KL_REGISTRY if issubclass(type_p, p) and issubclass(type_q, q)]
    if not matches:
        return None
    # the pair nearest in both class hierarchies
    best = min(matches, key=lambda pq: (type_p.__mro__.index(pq[0]), type_q.__mro__.index(pq[1])))
    return _KL_REGISTRY[best]


def kl_divergence(p, q):
    """KL(p || q) in closed form, from the most specific pair registered with register_kl (torch's rule);
    NotImplementedError for a pair with none."""
    fun = _dispatch_kl(type(p), type(q))
    if fun is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {p.__class__.__name__} and q type "
                                  f"{q.__class__.__name__}")
    return fun(p, q)


def _inf_where(mask, t):
    return t.masked_fill(mask, math.inf)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t1 = _inf_where(q.probs == 0, t1).masked_fill(p.probs == 0, 0.0)
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    t2 = _inf_where(q.probs == 1, t2).masked_fill(p.probs == 1, 0.0)
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = _inf_where((q.probs == 0).expand_as(t), t)
    t = t.masked_fill((p.probs == 0).expand_as(t), 0.0)
    return t.sum(-1)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _inf_where((q.low > p.low) | (q.high < p.high), result)


@register_kl(Normal, Uniform)
def _kl_normal_uniform(p, q):
    # a Normal puts mass outside any interval: infinite, as torch answers
    return full_like(p.loc, math.inf)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot be "
                         "computed")
    half_term1 = (q._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
                  - p._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1))
    n = p.event_shape[0]
    qL, pL = q._unbroadcasted_scale_tril, p._unbroadcasted_scale_tril
    shape = tuple(p.batch_shape) if len(p.batch_shape) >= len(q.batch_shape) else tuple(q.batch_shape)
    qL_b, pL_b = qL.expand(shape + (n, n)), pL.expand(shape + (n, n))
    term2 = solve_lower(qL_b, pL_b).pow(2).sum((-2, -1))  # trace(X X^T) of X = qL^-1 pL
    term3 = batch_mahalanobis(qL, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


