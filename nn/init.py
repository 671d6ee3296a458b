"""``nn.init``: the in-place initialisers PyTorch's layers use by default, and the rest of torch's
everyday ones (kaiming/xavier normal, trunc_normal_, orthogonal_, dirac_, eye_, sparse_), and torch's
deprecated names without the underscore (``uniform``, ``xavier_normal`` ...), which warn as torch's do.

``Linear`` and ``Conv2d`` use ``kaiming_uniform_(w, a=sqrt(5))`` (= U(-1/sqrt(fan_in),
1/sqrt(fan_in))) and the same bound for the bias, exactly as PyTorch's ``reset_parameters``.
All run under ``no_grad``; random numbers come from tritensor's Philox generator.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ..autograd.grad_mode import no_grad
from ..core.functional import orthogonalize_ as _orthogonalize_
from ..core.tensor import Tensor
from ..core.factories import from_numpy, rand, randn
from ..runtime.dtype_policy import FLOAT_COMPUTE


def _fans(t: Tensor):
    if t.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = math.prod(t.shape[2:])
    return t.shape[1] * receptive, t.shape[0] * receptive


def calculate_gain(nonlinearity: str, param=None) -> float:
    """torch.nn.init.calculate_gain: the recommended std gain for a nonlinearity (1 for linear/conv/sigmoid, 5/3
    tanh, sqrt(2) relu, sqrt(2 / (1 + slope^2)) leaky_relu, 3/4 selu); any other name is a ValueError."""
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "sigmoid"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


@no_grad()
def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    """Fill ``t`` in place with U(a, b) draws (the rand kernel), without recording; returns ``t``. torch's
    ``generator=`` is not taken."""
    return t.copy_(rand(t.shape, dtype=t.dtype, device=t.device) * (b - a) + a)


@no_grad()
def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """Fill ``t`` in place with N(mean, std^2) draws (the randn kernel), without recording; returns ``t``. torch's
    ``generator=`` is not taken."""
    return t.copy_(randn(t.shape, dtype=t.dtype, device=t.device) * std + mean)


@no_grad()
def constant_(t: Tensor, val: float) -> Tensor:
    """Fill ``t`` in place with ``val``, without recording; returns ``t``."""
    return t.fill_(val)


def zeros_(t: Tensor) -> Tensor:
    """Fill ``t`` with 0 in place, without recording; returns ``t``."""
    return constant_(t, 0.0)


def ones_(t: Tensor) -> Tensor:
    """Fill ``t`` with 1 in place, without recording; returns ``t``."""
    return constant_(t, 1.0)


def _fan(t: Tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _fans(t)
    return fan_in if mode == "fan_in" else fan_out


def kaiming_uniform_(t: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu") -> Tensor:
    """He uniform: U(-b, b) with b = gain * sqrt(3 / fan) (fan_in or fan_out by ``mode``), torch's default for Linear
    and conv weights; a zero fan gives zeros."""
    fan = _fan(t, mode)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan) if fan else 0.0
    return uniform_(t, -bound, bound)


def xavier_uniform_(t: Tensor, gain: float = 1.0) -> Tensor:
    """Glorot uniform: U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)); needs at least 2 dimensions."""
    fan_in, fan_out = _fans(t)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound)


# ----- Gaussian initializers: He and Glorot normal, truncated normal, orthogonal (torch.nn.init's) ---------
def kaiming_normal_(t: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu") -> Tensor:
    """N(0, std^2) with std = gain / sqrt(fan) (He et al.)."""
    fan = _fan(t, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan) if fan else 0.0
    return normal_(t, 0.0, std)


def xavier_normal_(t: Tensor, gain: float = 1.0) -> Tensor:
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)) (Glorot & Bengio)."""
    fan_in, fan_out = _fans(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)) if fan_in + fan_out else 0.0)


@no_grad()
def trunc_normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0) -> Tensor:
    """N(mean, std^2) truncated to [a, b]: draws outside are redrawn (rejection, exact in
    distribution) until none is left; one host read per round, a few rounds for the usual +-2 std."""
    if not a < b:
        raise ValueError(f"trunc_normal_(): expected a < b, got a={a}, b={b}")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values "
                      "may be incorrect.", stacklevel=2)
    d = FLOAT_COMPUTE[t.dtype]  # drawn and tested before rounding
    x = randn(t.shape, dtype=d, device=t.device) * std + mean
    for _ in range(1000):
        outside = (x < a) | (x > b)
        if not bool(outside.any().item()):
            break
        x = (randn(t.shape, dtype=d, device=t.device) * std + mean).where(outside, x)
    else:  # [a, b] holds almost no mass: fall back to clamping, as torch's method ends with
        x = x.clamp(a, b)
    return t.copy_(x)


@no_grad()
def orthogonal_(t: Tensor, gain: float = 1.0) -> Tensor:
    """A (semi-)orthogonal matrix (Saxe et al.): the Q of a Gaussian matrix's QR, with R's diagonal
    positive (Gram-Schmidt gives that Q), trailing dims flattened, scaled by ``gain``."""
    if t.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if t.numel() == 0:
        return t
    rows = t.shape[0]
    cols = t.numel() // rows
    tall = (max(rows, cols), min(rows, cols))
    compute = FLOAT_COMPUTE[t.dtype]
    q = _orthogonalize_(randn(tall, dtype=compute, device=t.device))
    if rows < cols:
        q = q.T
    return t.copy_((q * gain).reshape(t.shape))


@no_grad()
def dirac_(t: Tensor, groups: int = 1) -> Tensor:
    """The Dirac delta of a 3-, 4- or 5-dim conv weight: output channel d of each group passes input
    channel d through at the kernel's centre (as many channels as both sides have), zeros elsewhere."""
    if t.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    if t.shape[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = t.shape[0] // groups
    delta = np.zeros(tuple(t.shape), dtype=np.float64)
    centre = tuple(n // 2 for n in t.shape[2:])
    for g in range(groups):
        for d in range(min(per_group, t.shape[1])):
            delta[(g * per_group + d, d) + centre] = 1.0
    return t.copy_(from_numpy(delta).to(device=t.device, dtype=t.dtype))


@no_grad()
def eye_(t: Tensor) -> Tensor:
    """The identity matrix of a 2-dim tensor (ones on the main diagonal of a non-square one too)."""
    if t.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return t.copy_(from_numpy(np.eye(t.shape[0], t.shape[1])).to(device=t.device, dtype=t.dtype))


@no_grad()
def sparse_(t: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    """N(0, std^2) draws with ceil(sparsity * rows) of each column's entries, at random rows, set to 0
    (Martens 2010). The rows are a random permutation per column: the ranks of uniform draws."""
    if t.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    if generator is not None:
        raise NotImplementedError("sparse_(): generator= is not supported")
    rows, cols = t.shape
    num_zeros = int(math.ceil(sparsity * rows))
    normal_(t, 0.0, std)
    if num_zeros and t.numel():
        rank = rand((rows, cols), device=t.device).argsort(0).argsort(0)
        t.masked_fill_(rank < num_zeros, 0.0)
    return t


def _make_deprecate(meth):
    """torch's deprecated alias: the name without the underscore, warning with torch's FutureWarning."""
    new_name = meth.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args, **kwargs):
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of `nn.init.{new_name}`.", FutureWarning,
                      stacklevel=2)
        return meth(*args, **kwargs)

    deprecated_init.__doc__ = f"{old_name}(...): deprecated, see ``{new_name}``."
    deprecated_init.__name__ = old_name
    deprecated_init.__qualname__ = old_name
    return deprecated_init


uniform = _make_deprecate(uniform_)
normal = _make_deprecate(normal_)
constant = _make_deprecate(constant_)
eye = _make_deprecate(eye_)
dirac = _make_deprecate(dirac_)
xavier_uniform = _make_deprecate(xavier_uniform_)
xavier_normal = _make_deprecate(xavier_normal_)
kaiming_uniform = _make_deprecate(kaiming_uniform_)
kaiming_normal = _make_deprecate(kaiming_normal_)
orthogonal = _make_deprecate(orthogonal_)
sparse = _make_deprecate(sparse_)
