"""Random ops on the counter-based Philox stream: ``bernoulli``/``bernoulli_``, ``multinomial``,
``normal`` and the in-place fills ``normal_``, ``uniform_``, ``random_``.

Each draw takes its counters from a :class:`~tritensor.core.generator.Generator` (``generator=``,
else the default one), so the numbers are the same in CPU and GPU mode. Kernels:
``triton_kernels/random.py`` (uniform/normal floats, integers, Bernoulli).
Draws land in a contiguous buffer; a strided destination gets the buffer copied in (the numbers
follow the row-major order of the destination's shape either way). ``multinomial`` is built on
the sort and search kernels: with replacement, inverse-CDF sampling (``cumsum`` + ``searchsorted``),
without, the exponential race (the k largest ``log(u) / w``, via ``topk``). ``normal`` with tensor
``mean``/``std`` is ``z * std + mean`` with recorded ops, so it is differentiable in both.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numbers

import numpy as np

from ...triton_kernels import random as _rand
from ...runtime import dtype as dt
from ...runtime.device import device_or_default
from ..generator import resolve
from ..shape import _shape_arg, broadcast_shapes
from ..tensor_base import TensorBase
from . import _check_writable, copy_into
from .reduce import amax, amin
from .sort import sort_along, searchsorted, topk

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor


def _check(input, op: str, name="input") -> None:
    if not isinstance(input, TensorBase):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(input).__name__}")


def _num(v, name: str, op: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (numbers.Real, np.number)):
        raise TypeError(f"{op}(): argument '{name}' must be a number, not {type(v).__name__}")
    return float(v)


def _into(dst, fill_contiguous) -> None:
    """Run ``fill_contiguous(buf)`` on ``dst`` itself when contiguous, else on a buffer copied in."""
    if dst.is_contiguous():
        fill_contiguous(dst)
        return
    buf = TensorBase._empty(dst.shape, dst.dtype, dst.device)
    fill_contiguous(buf)
    copy_into(dst, buf)


def _floats(dst, gen, normal: bool, lo: float, span: float) -> None:
    seed, off = gen._take(dst.numel())
    _into(dst, lambda buf: _rand.random_(buf, seed, off, normal, lo, span))


# ----- in-place fills ------------------------------------------------------------------------
def normal_(input, mean=0.0, std=1.0, *, generator=None) -> Tensor:
    """Fill with N(mean, std**2) samples."""
    _check(input, "normal_")
    mean, std = _num(mean, "mean", "normal_"), _num(std, "std", "normal_")
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"normal_ expects a floating point tensor, got {input.dtype.name}")
    gen = resolve(generator, "normal_")
    _check_writable(input, "normal_")
    _floats(input, gen, True, mean, std)
    input._bump_version()
    return input


def uniform_(input, from_=0.0, to=1.0, *, generator=None) -> Tensor:
    """Fill with samples uniform in [from, to) (``from`` is a Python keyword: pass it by position)."""
    _check(input, "uniform_")
    a, b = _num(from_, "from", "uniform_"), _num(to, "to", "uniform_")
    if a > b:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={a} > to={b}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"uniform_ expects a floating point tensor, got {input.dtype.name}")
    gen = resolve(generator, "uniform_")
    _check_writable(input, "uniform_")
    _floats(input, gen, False, a, b - a)
    input._bump_version()
    return input


def _dtype_max(d: dt.dtype) -> int:
    if d is dt.bool_:
        return 1
    if d.is_floating_point:  # every integer up to 2**digits is exact
        return 2 ** {dt.float16: 11, dt.bfloat16: 8, dt.float32: 24, dt.float64: 53}[d]
    return int(np.iinfo(d.np).max)


def random_(input, *args, generator=None) -> Tensor:
    """``random_()``: integers uniform in [0, 2**mantissa] (floats) or [0, max] (integers);
    ``random_(to)``: in [0, to); ``random_(from, to)``: in [from, to) (``to=None``: up to the max)."""
    _check(input, "random_")
    if len(args) > 2:
        raise TypeError(f"random_() takes at most 2 positional arguments ({len(args)} given)")
    for name, v in zip(("from", "to"), args):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer))):
            raise TypeError(f"random_(): argument '{name}' must be int, not {type(v).__name__}")
    if len(args) == 0:
        lo, hi = 0, _dtype_max(input.dtype) + 1
    elif len(args) == 1:
        lo, hi = 0, int(args[0])
    else:
        lo, hi = int(args[0]), (_dtype_max(input.dtype) + 1 if args[1] is None else int(args[1]))
    if lo >= hi:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={lo} >= to={hi}")
    gen = resolve(generator, "random_")
    _check_writable(input, "random_")
    seed, off = gen._take(input.numel())
    if input.dtype is dt.int64:
        _into(input, lambda buf: _rand.randint(buf, seed, off, lo, hi))
    else:
        tmp = TensorBase._empty(input.shape, dt.int64, input.device)
        _rand.randint(tmp, seed, off, lo, hi)
        copy_into(input, tmp)
    input._bump_version()
    return input


def _bernoulli_into(out, p, gen) -> None:
    compute = "float64" if out.dtype is dt.float64 or (isinstance(p, TensorBase) and p.dtype is dt.float64) \
        else "float32"
    seed, off = gen._take(out.numel())
    _into(out, lambda buf: _rand.bernoulli(buf, p, seed, off, compute))


def _check_p(p, op: str):
    if isinstance(p, TensorBase):
        if not p.dtype.is_floating_point:
            raise RuntimeError(f"{op}: expected a floating point probability tensor, got {p.dtype.name}")
        if p.numel() and (float(amin(p).item()) < 0 or float(amax(p).item()) > 1):
            raise RuntimeError(f"{op}: Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
        return p
    p = _num(p, "p", op)
    if not 0 <= p <= 1:
        raise RuntimeError(f"{op} expects p to be in [0, 1], but got p={p}")
    return p


def bernoulli(input, p=None, *, generator=None) -> Tensor:
    """1 with probability ``input`` (elementwise), else 0, in ``input``'s dtype; with a float ``p``,
    ``input`` only gives the shape and dtype."""
    _check(input, "bernoulli")
    gen = resolve(generator, "bernoulli")
    prob = _check_p(input if p is None else p, "bernoulli")
    out = TensorBase._empty(input.shape, input.dtype, input.device)
    _bernoulli_into(out, prob, gen)
    return out


def bernoulli_(input, p=0.5, *, generator=None) -> Tensor:
    """Fill with 1 with probability ``p`` (a float, or a tensor broadcast to ``input``'s shape), else 0."""
    _check(input, "bernoulli_")
    gen = resolve(generator, "bernoulli_")
    p = _check_p(p, "bernoulli_")
    if isinstance(p, TensorBase):
        broadcast_shapes(p.shape, input.shape)
        p = p.expand(input.shape) if p.device == input.device else p.to(input.device).expand(input.shape)
    _check_writable(input, "bernoulli_")
    _bernoulli_into(input, p, gen)
    input._bump_version()
    return input


# ----- normal / multinomial ------------------------------------------------------------------
def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """``normal(mean, std)``: N(mean, std**2) samples, elementwise for tensor ``mean``/``std``
    (broadcast; differentiable in both); ``normal(mean, std, size)`` for numbers."""
    gen = resolve(generator, "normal")
    t_mean, t_std = isinstance(mean, TensorBase), isinstance(std, TensorBase)
    if not t_mean and not t_std:
        m, s = _num(mean, "mean", "normal"), _num(std, "std", "normal")
        if size is None:
            raise TypeError("normal(): with float mean and std, argument 'size' is required")
        if s < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {s}")
        d = dt.get_default_dtype() if dtype is None else dt.to_dtype(dtype)
        out = TensorBase._empty(_shape_arg((size,)), d, device_or_default(device))
        _floats(out, gen, True, m, s)
        if requires_grad:
            out.requires_grad_(True)
        return out
    if size is not None:
        raise RuntimeError("normal(): size is only allowed with float mean and std")
    for v, name in ((mean, "mean"), (std, "std")):
        if isinstance(v, TensorBase):
            if not v.dtype.is_floating_point:
                raise RuntimeError(f"normal expects floating point {name}, got {v.dtype.name}")
        else:
            _num(v, name, "normal")
    if t_std and std.numel() and float(amin(std).item()) < 0:
        raise RuntimeError("normal expects all elements of std >= 0.0")
    if not t_std and float(std) < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    ref = mean if t_mean else std
    shape = broadcast_shapes(mean.shape, std.shape) if t_mean and t_std else tuple(ref.shape)
    d = dt.result_type(mean, std)
    z = TensorBase._empty(shape, d, ref.device)
    _floats(z, gen, True, 0.0, 1.0)
    return z * std + mean


def multinomial(input, num_samples, replacement=False, *, generator=None) -> Tensor:
    """``num_samples`` category indices per row of the non-negative weights ``input`` (1-D or 2-D)."""
    _check(input, "multinomial")
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)):
        raise TypeError(f"multinomial(): argument 'num_samples' must be int, not {type(num_samples).__name__}")
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: {input.dtype.name}")
    n_cat = input.shape[-1]
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > n_cat:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    gen = resolve(generator, "multinomial")
    w = (input.reshape(1, n_cat) if input.ndim == 1 else input).to(dt.float64)
    rows = w.shape[0]
    if w.numel():
        lo = float(amin(w).item())
        finite = bool(w.isfinite().all().item())
        if lo < 0 or not finite:
            raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        if float(amin(w.sum(1)).item()) <= 0:
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        if not replacement and int(amin(w.ne(0).sum(1)).item()) < num_samples:
            raise RuntimeError("invalid multinomial distribution (with replacement=False, not enough non-negative "
                               "category to sample)")
    u = TensorBase._empty((rows, num_samples if replacement else n_cat), dt.float64, input.device)
    _floats(u, gen, False, 0.0, 1.0)
    if replacement:  # inverse CDF: the first category whose cumulative weight exceeds u * total
        cdf = w.cumsum(1)
        idx = searchsorted(cdf, u * cdf[:, -1:], right=True).clamp_max(n_cat - 1)
    else:  # exponential race: the k largest log(u)/w (zero weights: -inf, never before a positive one)
        keys = u.log().div(w)
        idx = topk(keys, num_samples, 1)[1]
    return idx.reshape(num_samples) if input.ndim == 1 else idx


def randperm_keys(n: int, gen, dev):
    """int64 [0, n) in random order: the stable argsort of n random 31-bit keys (``randperm``)."""
    keys = TensorBase._empty((n,), dt.int32, dev)
    seed, off = gen._take(n)
    _rand.randint(keys, seed, off, 0, 2**31 - 1)
    return sort_along(keys, 0, False)[1]

