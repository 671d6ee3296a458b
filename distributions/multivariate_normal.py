"""``MultivariateNormal(loc, covariance_matrix=None, precision_matrix=None, scale_tril=None)``.

Whichever matrix is given, the distribution works with the lower Cholesky factor ``L`` of the
covariance (``scale_tril``): sampling is ``loc + L @ eps``, ``log_prob`` solves ``L y = x - loc``.
The Cholesky factor and the triangular solves are ``utils.cholesky``/``utils.solve_lower``, written
from recorded ops (``utils`` says why), so ``rsample`` and ``log_prob`` are differentiable with
respect to ``loc`` and the matrix.
"""
from __future__ import annotations

import math

from ..core.creation import eye
from ..core.factories import randn
from ..core.tensor import Size
from . import constraints
from .distribution import Distribution
from .utils import _broadcast_shape, batch_mahalanobis, cholesky, lazy_property, solve_lower

__all__ = ["MultivariateNormal"]


def _precision_to_scale_tril(P):
    # P = U U^T with U = flip(chol(flip(P))) upper triangular, so P^-1 = U^-T U^-1 and its lower
    # Cholesky factor is U^-T = (U^T)^-1: a lower-triangular solve against the identity.
    Lf = cholesky(P.flip(-2, -1))
    L_inv = Lf.flip(-2, -1).transpose(-2, -1)
    n = P.shape[-1]
    identity = eye(n, dtype=P.dtype, device=P.device).expand(L_inv.shape)
    return solve_lower(L_inv, identity)


class MultivariateNormal(Distribution):
    """A Gaussian over vectors with mean ``loc`` and exactly one of ``covariance_matrix``, ``precision_matrix`` or
    ``scale_tril``, as torch.distributions.MultivariateNormal (see the module docstring for how it works)."""

    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        matrix = next(m for m in (scale_tril, covariance_matrix, precision_matrix) if m is not None)
        name = "scale_tril" if scale_tril is not None else (
            "covariance_matrix" if covariance_matrix is not None else "precision_matrix")
        if matrix.ndim < 2:
            raise ValueError(f"{name} matrix must be at least two-dimensional, with optional leading batch "
                             "dimensions")
        batch_shape = Size(_broadcast_shape(matrix.shape[:-2], loc.shape[:-1]))
        event_shape = Size(loc.shape[-1:])
        n = event_shape[0]
        setattr(self, name, matrix.expand(tuple(batch_shape) + (n, n)))
        self.loc = loc.expand(tuple(batch_shape) + (n,))
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = Size(batch_shape)
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        cov_shape = loc_shape + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(cov_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self):
        """The lower Cholesky factor L of the covariance (L L^T = covariance), made on first use from the matrix
        given."""
        L = self._unbroadcasted_scale_tril
        return L.expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def covariance_matrix(self):
        """L L^T, made on first use when not given."""
        L = self._unbroadcasted_scale_tril
        return (L @ L.transpose(-2, -1)).expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def precision_matrix(self):
        """The inverse covariance, made from L on first use when not given."""
        L = self._unbroadcasted_scale_tril
        n = L.shape[-1]
        L_inv = solve_lower(L, eye(n, dtype=L.dtype, device=L.device).expand(L.shape))
        return (L_inv.transpose(-2, -1) @ L_inv).expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(tuple(self._batch_shape)
                                                                    + tuple(self._event_shape))

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        eps = randn(*shape, dtype=self.loc.dtype, device=self.loc.device)
        # L @ eps as a broadcast product and a row sum: one elementwise and one reduction kernel
        # however many draws, where a batched matmul would treat each draw as a tiny matrix
        return self.loc + (self._unbroadcasted_scale_tril * eps.unsqueeze(-2)).sum(-1)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + M) - self._half_log_det()

    def entropy(self):
        H = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        if len(self._batch_shape) == 0:
            return H
        return H.expand(self._batch_shape)
