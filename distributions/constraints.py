"""Constraints: what values a distribution's parameters and samples may take (torch's
``torch.distributions.constraints``), checked when ``validate_args`` is on.

``check(value)`` returns a bool tensor, ``True`` where the value satisfies the constraint (over
the constraint's ``event_dim`` rightmost dims, all at once). Their reprs are torch's, since they
appear in the ``ValueError`` a bad argument raises.
"""
from __future__ import annotations

import numpy as np

from ..core.factories import tensor as _tensor
from ..core.tensor import Tensor

__all__ = ["Constraint", "boolean", "dependent", "greater_than", "integer_interval", "interval",
           "less_than", "lower_cholesky", "positive", "positive_definite", "real", "real_vector", "simplex",
           "unit_interval", "independent", "is_dependent", "nonnegative_integer"]


class Constraint:
    """A region of values, as torch.distributions.constraints.Constraint: ``check(value)`` gives a bool tensor;
    ``event_dim`` dims form one event."""

    is_discrete = False
    event_dim = 0

    def check(self, value):
        """A bool tensor saying, per event, whether ``value`` satisfies the constraint."""
        raise NotImplementedError

    def __repr__(self):
        return self.__class__.__name__[1:] + "()"


class _Dependent(Constraint):
    """A constraint that depends on other parameters: not checked on its own."""

    def __init__(self, *, is_discrete=False, event_dim=0):
        self.is_discrete, self.event_dim = is_discrete, event_dim

    def __call__(self, *, is_discrete=False, event_dim=0):
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, x):
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint) -> bool:
    """Whether ``constraint`` depends on other parameters (``constraints.dependent``), so it cannot be checked alone."""
    return isinstance(constraint, _Dependent)


class _Real(Constraint):
    def check(self, value):
        return value == value  # NaN is the only value that fails


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return self.lower_bound < value

    def __repr__(self):
        return f"GreaterThan(lower_bound={self.lower_bound})"


class _LessThan(Constraint):
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return value < self.upper_bound

    def __repr__(self):
        return f"LessThan(upper_bound={self.upper_bound})"


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (self.lower_bound <= value) & (value <= self.upper_bound)

    def __repr__(self):
        return f"Interval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (value % 1 == 0) & (self.lower_bound <= value) & (value <= self.upper_bound)

    def __repr__(self):
        return f"IntegerInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerGreaterThan(Constraint):
    is_discrete = True

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound)

    def __repr__(self):
        return f"IntegerGreaterThan(lower_bound={self.lower_bound})"


class _IndependentConstraint(Constraint):
    """``base`` over the ``reinterpreted_batch_ndims`` rightmost dims at once (all must hold)."""

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        self.event_dim = base_constraint.event_dim + reinterpreted_batch_ndims

    def check(self, value):
        result = self.base_constraint.check(value)
        if result.ndim < self.reinterpreted_batch_ndims:
            raise ValueError(f"Expected value.dim() >= {result.ndim + self.reinterpreted_batch_ndims} "
                             f"but got {value.ndim}")
        for _ in range(self.reinterpreted_batch_ndims):
            result = result.all(-1)
        return result

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


def _matrix_check(value: Tensor, fn) -> Tensor:
    # Validation only: a host-side answer per matrix (NumPy's eigenvalues), never on a hot path.
    arr = value.detach().cpu().numpy().astype(np.float64)
    flat = arr.reshape((-1,) + arr.shape[-2:])
    out = np.array([fn(m) for m in flat], dtype=np.bool_).reshape(arr.shape[:-2])
    return _tensor(out, device=value.device)


class _LowerCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        return _matrix_check(value, lambda m: bool(np.all(np.triu(m, 1) == 0) and np.all(np.diag(m) > 0)))


class _PositiveDefinite(Constraint):
    event_dim = 2

    def check(self, value):
        def pd(m):
            if m.shape[0] != m.shape[1] or not np.allclose(m, m.T, atol=1e-6):
                return False
            return bool(np.all(np.isfinite(m)) and np.all(np.linalg.eigvalsh(m) > 0))

        return _matrix_check(value, pd)


dependent = _Dependent()
real = _Real()
real_vector = _IndependentConstraint(real, 1)
boolean = _Boolean()
positive = _GreaterThan(0.0)
unit_interval = _Interval(0.0, 1.0)
simplex = _Simplex()
lower_cholesky = _LowerCholesky()
positive_definite = _PositiveDefinite()
nonnegative_integer = _IntegerGreaterThan(0)
greater_than = _GreaterThan
less_than = _LessThan
interval = _Interval
integer_interval = _IntegerInterval
independent = _IndependentConstraint
