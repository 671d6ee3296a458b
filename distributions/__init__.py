"""``tritensor.distributions`` (torch.distributions): parameterised probability distributions
with sampling (reparameterised where torch's is), ``log_prob``, ``entropy``, moments, argument
validation with torch's messages, and ``kl_divergence`` between pairs of them.

Provided: ``Normal``, ``Uniform``, ``Bernoulli``, ``Categorical``, ``MultivariateNormal``.
"""
from . import constraints
from .bernoulli import Bernoulli
from .categorical import Categorical
from .distribution import Distribution
from .kl import kl_divergence, register_kl
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .uniform import Uniform

__all__ = ["Bernoulli", "Categorical", "Distribution", "MultivariateNormal", "Normal", "Uniform", "constraints",
           "kl_divergence", "register_kl"]
