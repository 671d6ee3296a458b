"""``Distribution``: the base class of tritensor's probability distributions (torch's API).

A distribution has a ``batch_shape`` (independent distributions side by side) and an
``event_shape`` (the shape of one draw); ``sample(sample_shape)`` returns
``sample_shape + batch_shape + event_shape``. With ``validate_args`` (on by default, as torch's
``__debug__`` default) the parameters are checked against ``arg_constraints`` when it is made and
values against ``support`` in ``log_prob``, raising torch's ``ValueError``.
"""
from __future__ import annotations

from ..autograd.grad_mode import no_grad
from ..core.tensor import Size, Tensor
from . import constraints
from .utils import lazy_property

__all__ = ["Distribution"]


def _format_param(v) -> str:
    if isinstance(v, Tensor):
        if v.ndim == 0:
            return str(v.item())
        if v.numel() == 1:
            return str(v)
        return str(v.size())
    return str(v)


class Distribution:
    """The base of the probability distributions, as torch.distributions.Distribution: shapes, parameter and support
    validation, and the API each family overrides (mean, variance, sample/rsample, log_prob, cdf, icdf, entropy,
    expand)."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument validation on or off for distributions made afterwards (torch's default follows
        ``__debug__``); a non-bool is a ValueError."""
        if value not in [True, False]:
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=Size(), event_shape=Size(), validate_args=None) -> None:
        self._batch_shape = Size(batch_shape)
        self._event_shape = Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            for param, constraint in self.arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None), lazy_property):
                    continue  # a parameter made lazily from the one given is not checked
                value = getattr(self, param)
                if not bool(constraint.check(value).all()):
                    raise ValueError(f"Expected parameter {param} ({type(value).__name__} of shape "
                                     f"{tuple(value.shape)}) of distribution {self!r} to satisfy the constraint "
                                     f"{constraint!r}, but found invalid values:\n{value}")

    @property
    def batch_shape(self) -> Size:
        """The shape of the independent distributions held side by side."""
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        """The shape of one draw (() for scalar families, (k,) for MultivariateNormal)."""
        return self._event_shape

    @property
    def arg_constraints(self) -> dict:
        """Parameter name -> the Constraint its value must satisfy (checked at construction when validating)."""
        raise NotImplementedError

    @property
    def support(self):
        """The Constraint that values of ``log_prob`` must satisfy (checked when validating)."""
        raise NotImplementedError

    @property
    def mean(self) -> Tensor:
        """The mean; NotImplementedError where the family does not define it."""
        raise NotImplementedError(f"{self.__class__} does not implement mean")

    @property
    def mode(self) -> Tensor:
        """The mode; NotImplementedError where the family does not define it."""
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self) -> Tensor:
        """The variance; NotImplementedError where the family does not define it."""
        raise NotImplementedError(f"{self.__class__} does not implement variance")

    @property
    def stddev(self) -> Tensor:
        """The standard deviation, ``variance.sqrt()`` unless the family overrides it."""
        return self.variance.sqrt()

    def expand(self, batch_shape, _instance=None):
        """The same distribution with its parameters expanded (as views) to ``batch_shape``, as torch's ``expand``."""
        raise NotImplementedError

    def sample(self, sample_shape=Size()) -> Tensor:
        """A draw of shape ``sample_shape + batch_shape + event_shape``, no gradient."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()) -> Tensor:
        """A reparameterised draw: gradients flow back to the parameters."""
        raise NotImplementedError

    def sample_n(self, n: int) -> Tensor:
        """``sample((n,))`` (torch's deprecated spelling, kept for its callers)."""
        return self.sample(Size((n,)))

    def log_prob(self, value: Tensor) -> Tensor:
        """The log density (or mass) of ``value``, broadcast against batch_shape + event_shape; validated against
        ``support`` when validating."""
        raise NotImplementedError

    def cdf(self, value: Tensor) -> Tensor:
        """The cumulative distribution function at ``value``."""
        raise NotImplementedError

    def icdf(self, value: Tensor) -> Tensor:
        """The inverse cumulative distribution function at probabilities ``value``."""
        raise NotImplementedError

    def entropy(self) -> Tensor:
        """The entropy of each distribution of the batch."""
        raise NotImplementedError

    def perplexity(self) -> Tensor:
        """exp(entropy())."""
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=Size()) -> Size:
        if not isinstance(sample_shape, Size):
            sample_shape = Size(sample_shape)
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom "
                                      "__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def _validate_sample(self, value: Tensor) -> None:
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = value.ndim - len(self._event_shape)
        if tuple(value.size()[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: {value.size()} vs "
                             f"{self._event_shape}.")
        actual_shape = value.size()
        expected_shape = Size(tuple(self._batch_shape) + tuple(self._event_shape))
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {actual_shape} vs "
                                 f"{expected_shape}.")
        support = self.support
        if not bool(support.check(value).all()):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) to be "
                             f"within the support ({support!r}) of the distribution {self!r}, but found invalid "
                             f"values:\n{_format_param(value) if value.ndim == 0 else value}")

    def __repr__(self) -> str:
        names = [k for k in self.arg_constraints if k in self.__dict__]
        return self.__class__.__name__ + "(" + ", ".join(f"{p}: {_format_param(self.__dict__[p])}"
                                                         for p in names) + ")"

