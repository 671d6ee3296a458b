"""``nn.functional``'s non-linear activations: the softmax family (``softmax log_softmax softmin
gumbel_softmax``), the ops' thin forms (``relu gelu silu sigmoid tanh``), and the activations written
with recorded ops (``leaky_relu elu softplus mish hardswish relu6 hardtanh selu celu hardsigmoid
hardshrink softshrink tanhshrink softsign logsigmoid threshold glu prelu``).

The recorded ones are a few elementwise ops (``where``, ``clamp``, ``exp``...) that autograd
records, so each is differentiable to any order with no derivative of its own; an elementwise
kernel each would save a launch or two per call, which these activations, rare in hot loops, do not
need. ``inplace=True`` (where torch has it) computes out of place and copies back (``copy_`` is
recorded). Arguments are checked with torch's wording before any op runs.
"""
from __future__ import annotations

import numbers
import warnings

from ..core.factories import rand, zeros
from ..core.functional import function as _function
from ..core.ops import table as _table
from ..core.ops.activation_methods import hardshrink, prelu  # Tensor methods too: defined in core
from ..core.tensor import Tensor
from .functional_checks import _check_input, _check_number, _tensor

__all__ = ["softmax", "log_softmax", "softmin", "gumbel_softmax", "relu", "gelu", "silu", "sigmoid", "tanh",
           "leaky_relu", "elu", "softplus", "mish", "hardswish", "relu6", "hardtanh", "hardtanh_", "selu", "celu",
           "hardsigmoid", "hardshrink", "softshrink", "tanhshrink", "softsign", "logsigmoid", "threshold",
           "threshold_", "glu", "prelu", "elu_", "leaky_relu_", "rrelu"]
_sm = _function(_table.OPS["softmax"], "softmax", numpy_names=False)  # the op itself: it names a bad input
_lsm = _function(_table.OPS["log_softmax"], "log_softmax", numpy_names=False)
_where = _function(_table.OPS["where"], "where")
# SELU's constants (Klambauer et al. 2017), as torch's
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
_TYPE_NAME = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16"}


def _softmax_dim(fn: str, ndim: int, stacklevel: int) -> int:
    """torch's implicit dim for a softmax called without one (deprecated there, so it warns)."""
    dim = 0 if ndim in (0, 1, 3) else 1
    warnings.warn(f"Implicit dimension choice for {fn} has been deprecated. Change the call to include dim=X as "
                   "an argument.", UserWarning, stacklevel=stacklevel)
    return dim


def softmax(input, dim=None, _stacklevel: int = 3, dtype=None):
    """``torch.nn.functional.softmax``: ``input.softmax(dim, dtype)``; without ``dim``, torch's
    implicit choice (0 for 0-, 1- and 3-D input, else 1) and its deprecation warning."""
    if dim is None:
        _check_input(input, "softmax")
        dim = _softmax_dim("softmax", input.ndim, _stacklevel)
    return input.softmax(dim, dtype=dtype) if isinstance(input, Tensor) else _sm(input, dim, dtype)


def log_softmax(input, dim=None, _stacklevel: int = 3, dtype=None):
    """``torch.nn.functional.log_softmax``, with softmax's implicit ``dim`` rule."""
    if dim is None:
        _check_input(input, "log_softmax")
        dim = _softmax_dim("log_softmax", input.ndim, _stacklevel)
    return input.log_softmax(dim, dtype=dtype) if isinstance(input, Tensor) else _lsm(input, dim, dtype)


def softmin(input, dim=None, _stacklevel: int = 3, dtype=None):
    """``torch.nn.functional.softmin``: ``softmax(-input)``."""
    if dim is None:
        _check_input(input, "softmin")
        dim = _softmax_dim("softmin", input.ndim, _stacklevel)
    return softmax(-input, dim, dtype=dtype)


def gumbel_softmax(logits, tau: float = 1, hard: bool = False, eps: float = 1e-10, dim: int = -1):
    """softmax((logits + g) / tau), g Gumbel(0, 1) noise (-log of an Exp(1) draw, itself -log U);
    ``hard``: the one-hot of the argmax in the forward pass, the soft sample's gradient
    (straight-through), as torch."""
    _tensor(logits, "gumbel_softmax", "logits")
    u = rand(logits.shape, dtype=logits.dtype, device=logits.device)
    gumbels = -(-(u.clamp_min(1e-20).log())).log()  # -log(Exp(1)), Exp(1) = -log U
    y = _sm((logits + gumbels) / tau, dim)
    if not hard:
        return y
    index = y.argmax(dim, keepdim=True)
    y_hard = zeros(logits.shape, dtype=logits.dtype, device=logits.device).scatter(dim, index, 1.0)
    return y_hard - y.detach() + y


def relu(input, inplace: bool = False):
    """torch.nn.functional.relu: max(0, x); ``inplace=True`` runs the in-place op ``relu_``."""
    return input.relu_() if inplace else input.relu()


def gelu(input, approximate: str = "none"):
    """torch.nn.functional.gelu: the exact (erf) form, or with ``approximate='tanh'`` the tanh form; any other value
    is a ValueError."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu(): approximate must be 'none' or 'tanh', got {approximate!r}")
    return input.gelu() if approximate == "none" else input.gelu_tanh()


def silu(input, inplace: bool = False):
    """torch.nn.functional.silu: x * sigmoid(x); ``inplace=True`` runs ``silu_``."""
    return input.silu_() if inplace else input.silu()


def sigmoid(input):
    """torch.nn.functional.sigmoid: 1 / (1 + exp(-x)) (the op; torch deprecates this alias of torch.sigmoid,
    tritensor does not warn)."""
    return input.sigmoid()


def tanh(input):
    """torch.nn.functional.tanh: the op ``tanh`` (torch deprecates this alias of torch.tanh, tritensor does not
    warn)."""
    return input.tanh()


def _maybe_inplace(input, out, inplace: bool):
    return input.copy_(out) if inplace else out


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):
    """x if x > 0 else negative_slope * x."""
    _check_input(input, "leaky_relu")
    slope = _check_number(negative_slope, "leaky_relu", "negative_slope")
    return _maybe_inplace(input, _where(input > 0, input, input * slope), inplace)


def elu(input, alpha: float = 1.0, inplace: bool = False):
    """x if x > 0 else alpha * (exp(x) - 1) (expm1: accurate near 0)."""
    _check_input(input, "elu")
    a = _check_number(alpha, "elu", "alpha")
    neg = input.clamp_max(0.0).expm1() * a  # clamped: exp of a large x never overflows into where's gradient
    return _maybe_inplace(input, _where(input > 0, input, neg), inplace)


def leaky_relu_(input, negative_slope: float = 0.01):
    """``leaky_relu`` in place."""
    return leaky_relu(input, negative_slope, inplace=True)


def elu_(input, alpha: float = 1.0):
    """``elu`` in place."""
    return elu(input, alpha, inplace=True)


def rrelu(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False, inplace: bool = False):
    """Randomized leaky ReLU: in training each negative element is scaled by its own slope drawn
    uniformly from [lower, upper] (the draw is not differentiated); in evaluation every slope is
    (lower + upper) / 2, torch's leaky_relu."""
    _check_input(input, "rrelu")
    lo = _check_number(lower, "rrelu", "lower")
    hi = _check_number(upper, "rrelu", "upper")
    if lo > hi:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if not training:
        return leaky_relu(input, (lo + hi) / 2, inplace)
    slope = rand(input.shape, dtype=input.dtype, device=input.device) * (hi - lo) + lo
    return _maybe_inplace(input, _where(input >= 0, input, input * slope), inplace)


def softplus(input, beta: float = 1.0, threshold: float = 20.0):
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (torch's rule)."""
    _check_input(input, "softplus")
    b = _check_number(beta, "softplus", "beta")
    th = _check_number(threshold, "softplus", "threshold")
    bx = input * b
    soft = bx.clamp_max(th).exp().log1p() / b  # clamped: no inf whose gradient would be 0 * inf
    return _where(bx > th, input, soft)


def mish(input, inplace: bool = False):
    """x * tanh(softplus(x))."""
    _check_input(input, "mish")
    return _maybe_inplace(input, input * softplus(input).tanh(), inplace)


def hardswish(input, inplace: bool = False):
    """x * relu6(x + 3) / 6."""
    _check_input(input, "hardswish")
    return _maybe_inplace(input, input * (input + 3.0).clamp(0.0, 6.0) / 6.0, inplace)


def _check(input, fn: str, integers: bool = False) -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"{fn}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not integers and not input.dtype.is_floating_point:
        raise RuntimeError(f"{fn}(): expected a floating point input, got {input.dtype.name}")


def _number(v, fn: str, name: str, position: int = 2) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{fn}(): argument '{name}' (position {position}) must be Number, not {type(v).__name__}")
    return float(v)


def _out(input, out, inplace: bool):
    return input.copy_(out) if inplace else out


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
    """clamp(x, min_val, max_val)."""
    _check(input, "hardtanh", integers=True)
    lo, hi = _number(min_val, "hardtanh", "min_val"), _number(max_val, "hardtanh", "max_val", 3)
    if lo > hi:
        raise ValueError("min_val cannot be greater than max_val")
    return _out(input, input.clamp(lo, hi), inplace)


def hardtanh_(input, min_val: float = -1.0, max_val: float = 1.0):
    """hardtanh in place, as torch.nn.functional.hardtanh_."""
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace: bool = False):
    """min(max(0, x), 6)."""
    _check(input, "relu6", integers=True)
    return _out(input, input.clamp(0.0, 6.0), inplace)


def selu(input, inplace: bool = False):
    """scale * (x if x > 0 else alpha * (exp(x) - 1))."""
    _check(input, "selu")
    neg = input.clamp_max(0.0).expm1() * SELU_ALPHA  # clamped: no overflow where the branch is not taken
    return _out(input, _where(input > 0, input, neg) * SELU_SCALE, inplace)


def celu(input, alpha: float = 1.0, inplace: bool = False):
    """x if x > 0 else alpha * (exp(x / alpha) - 1)."""
    _check(input, "celu")
    a = _number(alpha, "celu", "alpha")
    if a == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    neg = (input.clamp_max(0.0) / a).expm1() * a
    return _out(input, _where(input > 0, input, neg), inplace)


def hardsigmoid(input, inplace: bool = False):
    """relu6(x + 3) / 6."""
    _check(input, "hardsigmoid")
    return _out(input, (input + 3.0).clamp(0.0, 6.0) / 6.0, inplace)


def softshrink(input, lambd: float = 0.5):
    """x - lambd where x > lambd, x + lambd where x < -lambd, else 0."""
    _check(input, "softshrink")
    lam = _number(lambd, "softshrink", "lambd")
    if lam < 0:
        kind = _TYPE_NAME.get(input.dtype.name, input.dtype.name)
        raise RuntimeError(f"lambda must be in range [0, 3.40282e+38] for input dtype {kind}, but found {lambd}")
    return _where(input > lam, input - lam, _where(input < -lam, input + lam, 0.0))


def tanhshrink(input):
    """x - tanh(x)."""
    _check(input, "tanhshrink")
    return input - input.tanh()


def softsign(input):
    """x / (1 + |x|)."""
    _check(input, "softsign")
    return input / (input.abs() + 1.0)


def logsigmoid(input):
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)): no overflow, no log of 0."""
    _check(input, "logsigmoid")
    return input.clamp_max(0.0) - (-input.abs()).exp().log1p()


def _threshold(input, th, value, inplace: bool, fn: str):
    _check(input, fn)
    th = _number(th, fn, "threshold")
    v = _number(value, fn, "value", 3)
    return _out(input, _where(input > th, input, v), inplace)


def threshold(input, threshold: float, value: float, inplace: bool = False):
    """x where x > threshold, else value."""
    return _threshold(input, threshold, value, inplace, "threshold")


def threshold_(input, threshold: float, value: float):
    """threshold in place, as torch.nn.functional.threshold_."""
    return _threshold(input, threshold, value, True, "threshold_")


def glu(input, dim: int = -1):
    """a * sigmoid(b), a and b the two halves of ``input`` along ``dim``."""
    _check(input, "glu")
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    if not -input.ndim <= dim < input.ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-input.ndim}, {input.ndim - 1}], "
                         f"but got {dim})")
    d = dim % input.ndim
    n = input.shape[d]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {n}")
    a, b = input.narrow(d, 0, n // 2), input.narrow(d, n // 2, n // 2)
    return a * b.sigmoid()
