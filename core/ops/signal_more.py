"""torch's odd numerical functions that belong to no kernel family: ``angle`` and the adjoints
(``adjoint``, ``Tensor.mH``/``H``) of real tensors, ``gradient``, ``histogramdd``, ``nonzero_static``,
``slice_inverse``, eager ``cond``, ``lobpcg``, and the samplers ``poisson``, ``binomial`` and the
in-place ``cauchy_ exponential_ geometric_ log_normal_``.

Why no kernel: each is a short chain of ops that have kernels, each dispatched (so the
differentiable ones are recorded and need no derivative of their own). The samplers transform
uniform draws of the Philox stream (``uniform_``: so ``generator=`` and the seed behave as for
the other random ops): the continuous ones by inverting their CDF; ``poisson`` and ``binomial``
by counting the CDF values below the draw where the mean is small (below 10: a few dozen terms
cover all but 1e-15 of the mass) and by Hörmann's transformed rejection (PTRS, BTRS, as torch)
above, each round drawing again only where a sample was rejected. ``lobpcg`` is torch's basic
LOBPCG: Rayleigh-Ritz over [X, residuals, previous directions], the basis B-orthonormalized
through ``eigh`` of its Gram matrix, the projected problem solved with ``eigh``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import math
import numbers
from collections import namedtuple

import numpy as np

from ...runtime import dtype as dt
from ..tensor_base import TensorBase
from . import host_tensor
from . import random as _random
from .shape_more import _torch_name  # torch's scalar-type names in messages (Long, Half ...)
from .linalg_eig_svd import linalg_eigh  # lobpcg has no gradient: called as the core entry
from .sort import searchsorted  # histogramdd has no gradient: called as the core entry

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor


def _check(input, op: str, name: str = "input") -> None:
    if not isinstance(input, TensorBase):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(input).__name__}")


def _float(v, name: str, op: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (numbers.Real, np.number)):
        raise TypeError(f"{op}(): argument '{name}' must be float, not {type(v).__name__}")
    return float(v)


def _where(cond, a, b):
    """``a`` where ``cond`` else ``b``; either may be a number (Tensor.where wants its self a tensor)."""
    if isinstance(a, TensorBase):
        return a.where(cond, b)
    if isinstance(b, TensorBase):
        return b.where(~cond, a)
    return host_tensor(np.asarray(a, dtype=np.float64), cond.device).expand(tuple(cond.shape)).where(cond, b)


# ----- angle, adjoints ------------------------------------------------------------------------------------------
def angle(input) -> Tensor:
    """The argument of a real number: pi below zero, 0 at or above it, NaN kept; integers give
    float32. Its gradient is zero everywhere (torch's), carried by ``nan_to_num(x) * 0``."""
    _check(input, "angle")
    x = input if input.dtype.is_floating_point else input.to(dt.float32)
    d = x.detach()
    value = _where(d.isnan(), d, _where((d < 0), math.pi, 0.0).to(x.dtype))
    return value + x.nan_to_num(0.0, 0.0, 0.0) * 0.0


def adjoint(input) -> Tensor:
    """The conjugate transpose of the last two dims: their transpose for real tensors (a view)."""
    _check(input, "adjoint")
    if input.ndim < 2:
        raise RuntimeError(f"tensor.adjoint() is only supported on matrices or batches of matrices. Got "
                           f"{input.ndim}-D tensor.")
    return input.transpose(-2, -1)


def mH(self) -> Tensor:
    """``Tensor.mH``: ``adjoint``, with its own message."""
    if self.ndim < 2:
        raise RuntimeError(f"tensor.mH is only supported on matrices or batches of matrices. Got {self.ndim}-D tensor.")
    return self.transpose(-2, -1)


def H(self) -> Tensor:
    """``Tensor.H``: the conjugate transpose of a matrix (2-D only, as torch)."""
    if self.ndim != 2:
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor. For "
                           "batches of matrices, consider using tensor.mH")
    return self.transpose(0, 1)


# ----- nonzero_static, slice_inverse, cond -------------------------------------------------------------------------
def nonzero_static(input, *, size, fill_value: int = -1) -> Tensor:
    """``nonzero`` with a fixed number of rows: cut at ``size`` or filled with ``fill_value``."""
    _check(input, "nonzero_static")
    if isinstance(size, bool) or not isinstance(size, (numbers.Integral, np.integer)):
        raise TypeError(f"nonzero_static(): argument 'size' must be int, not {type(size).__name__}")
    if isinstance(fill_value, bool) or not isinstance(fill_value, (numbers.Integral, np.integer)):
        raise TypeError(f"nonzero_static(): argument 'fill_value' must be int, not {type(fill_value).__name__}")
    if size < 0:
        raise RuntimeError("nonzero_static: 'size' must be an non-negative integer")
    found = input.nonzero()
    n = found.shape[0]
    if n >= size:
        return found[:size]
    out = found.new_full((int(size), input.ndim), int(fill_value))
    return out.slice_scatter(found, 0, 0, n) if n else out


def slice_inverse(input, src, dim: int = 0, start=None, end=None, step: int = 1) -> Tensor:
    """The inverse of ``src[start:end:step]`` along ``dim`` for functionalization: a view of
    ``input``'s storage with ``src``'s geometry (torch's own definition; start/end/step only say
    which slice ``input`` is)."""
    _check(input, "slice_inverse")
    _check(src, "slice_inverse", "src")
    return input.as_strided(tuple(src.shape), src.stride(), src.storage_offset())


def cond(pred, true_fn, false_fn, operands=()):
    """torch.cond run eagerly: ``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)``."""
    if isinstance(pred, TensorBase):
        if pred.numel() != 1:
            raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got {pred}.")
        pred = bool(pred.item())
    elif not isinstance(pred, (bool, numbers.Integral, np.bool_)):
        raise RuntimeError(f"Expected pred to be bool or tensor, but got {pred}.")
    if not callable(true_fn) or not callable(false_fn):
        raise RuntimeError("Expect both branches to be callable.")
    if isinstance(operands, TensorBase):
        operands = (operands,)
    if not isinstance(operands, (tuple, list)):
        raise RuntimeError(f"Expect operands to be a tuple of possibly nested dict/list/tuple that only consists of "
                           f"tensor leaves, but got {operands}.")
    return (true_fn if pred else false_fn)(*operands)


# ----- gradient -----------------------------------------------------------------------------------------------------
def _gradient_along(f, d: int, h, edge_order: int):
    """np.gradient along ``d``: ``h`` a number (uniform spacing) or a 1-D coordinate tensor."""
    n = f.shape[d]

    def seg(a, b):
        return f.narrow(d, a, b - a)

    if not isinstance(h, TensorBase):
        inner = (seg(2, n) - seg(0, n - 2)) / (2 * h)
        if edge_order == 1:
            first = (seg(1, 2) - seg(0, 1)) / h
            last = (seg(n - 1, n) - seg(n - 2, n - 1)) / h
        else:
            first = (seg(0, 1) * -1.5 + seg(1, 2) * 2 - seg(2, 3) * 0.5) / h
            last = (seg(n - 3, n - 2) * 0.5 - seg(n - 2, n - 1) * 2 + seg(n - 1, n) * 1.5) / h
    else:
        shape = [1] * f.ndim
        shape[d] = -1
        dx = (h[1:] - h[:-1]).to(f.dtype)
        hd, hs = dx[:-1].reshape(shape), dx[1:].reshape(shape)
        a, b, c = -hs / (hd * (hd + hs)), (hs - hd) / (hd * hs), hd / (hs * (hd + hs))
        inner = seg(0, n - 2) * a + seg(1, n - 1) * b + seg(2, n) * c
        if edge_order == 1:
            first = (seg(1, 2) - seg(0, 1)) / dx[0]
            last = (seg(n - 1, n) - seg(n - 2, n - 1)) / dx[-1]
        else:
            d1, d2 = dx[0], dx[1]
            first = (seg(0, 1) * (-(2 * d1 + d2) / (d1 * (d1 + d2))) + seg(1, 2) * ((d1 + d2) / (d1 * d2))
                     + seg(2, 3) * (-d1 / (d2 * (d1 + d2))))
            d1, d2 = dx[-2], dx[-1]
            last = (seg(n - 3, n - 2) * (d2 / (d1 * (d1 + d2))) + seg(n - 2, n - 1) * (-(d2 + d1) / (d1 * d2))
                    + seg(n - 1, n) * ((2 * d2 + d1) / (d2 * (d1 + d2))))
    out = f.new_zeros(tuple(f.shape))
    out = out.slice_scatter(first, d, 0, 1).slice_scatter(last, d, n - 1, n)
    return out.slice_scatter(inner, d, 1, n - 1) if n > 2 else out


def gradient(input, *, spacing=1, dim=None, edge_order: int = 1):
    """np.gradient: second-order central differences inside, first- or second-order one-sided
    differences at the edges, along each of ``dim`` (all dims by default); a tuple of tensors."""
    _check(input, "gradient")
    nd = input.ndim
    if dim is None:
        dims = list(range(nd))
    else:
        dims = [dim] if isinstance(dim, numbers.Integral) else list(dim)
        for d in dims:
            if not -nd <= d < nd:
                raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {d})")
        dims = [d % nd for d in dims]
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    if isinstance(spacing, (list, tuple)):
        if len(spacing) != len(dims):
            what = ("since dim argument was not given" if dim is None else "since dim argument was given")
            size = f"'self.dim() = {nd}'" if dim is None else f"'dim.size() = {len(dims)}'"
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar, or a list of length "
                               f"equal to {size}, {what}, but got a list of length {len(spacing)}")
        hs = list(spacing)
    else:
        hs = [spacing] * len(dims)
    for d, h in zip(dims, hs):
        if input.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
        if isinstance(h, TensorBase) and (h.ndim != 1 or h.shape[0] != input.shape[d]):
            raise RuntimeError(f"torch.gradient expected each tensor to be on the same device, and the coordinates "
                               f"along dim {d} to be a 1-D tensor of its size {input.shape[d]}, got {list(h.shape)}")
    f = input if input.dtype.is_floating_point else input.to(dt.float32)
    return tuple(_gradient_along(f, d, h, edge_order) for d, h in zip(dims, hs))


# ----- histogramdd --------------------------------------------------------------------------------------------------
histogramdd_return = namedtuple("histogramdd", ["hist", "bin_edges"])


def histogramdd(input, bins=10, *, range=None, weight=None, density: bool = False):
    """np.histogramdd of the rows of ``input`` (…, D): each coordinate's bin found by
    ``searchsorted`` over its edges, the flattened bin counted by ``bincount`` (weighted where asked)."""
    _check(input, "histogramdd")
    if input.dtype not in (dt.float32, dt.float64, dt.float16, dt.bfloat16):
        raise NotImplementedError(f'"histogramdd" not implemented for \'{_torch_name(input.dtype)}\'')
    if input.ndim < 1:
        raise RuntimeError("torch.histogramdd: input tensor should have at least 1 dimension, but got 0")
    D = input.shape[-1]
    pts = input.reshape(-1, D)
    if isinstance(bins, (numbers.Integral, np.integer)) and not isinstance(bins, bool):
        bins = [int(bins)] * D
    bins = list(bins)
    if len(bins) != D:
        raise RuntimeError("histogramdd: The size of bins must be equal to the innermost dimension of the input.")
    if range is not None and len(range) != 2 * D:
        raise RuntimeError(f"torch.histogramdd: for a {D}-dimensional histogram range should have {2 * D} elements, "
                           f"but got {len(range)}")
    host = pts.detach().cpu().numpy().astype(np.float64) if range is None and pts.numel() else None
    edges = []
    for d, b in enumerate(bins):
        if isinstance(b, TensorBase):
            if b.ndim != 1 or b.numel() < 2:
                raise RuntimeError("torch.histogramdd: the bin edges of each dimension must be a 1-D tensor of at "
                                   "least 2 elements")
            edges.append(b.to(input.dtype))
            continue
        if isinstance(b, bool) or not isinstance(b, (numbers.Integral, np.integer)) or b <= 0:
            raise RuntimeError(f"torch.histogramdd(): bins must be > 0, but got {b} for dimension {d}")
        if range is not None:
            lo, hi = float(range[2 * d]), float(range[2 * d + 1])
            if lo > hi:
                raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min {lo} max {hi} for "
                                   f"dimension {d}")
        elif host is not None:
            lo, hi = float(host[:, d].min()), float(host[:, d].max())
        else:
            lo, hi = 0.0, 1.0
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5  # NumPy's and torch's widening of an empty range
        edges.append(host_tensor(np.linspace(lo, hi, int(b) + 1).astype(input.dtype.np), input.device))
    counts = [e.shape[0] - 1 for e in edges]
    flat = host_tensor(np.zeros(pts.shape[0], dtype=np.int64), input.device)
    inside = host_tensor(np.ones(pts.shape[0], dtype=np.bool_), input.device)
    for d, e in enumerate(edges):
        col = pts[:, d].contiguous()
        idx = searchsorted(e.contiguous(), col, right=True) - 1
        idx = _where((col == e[-1]), counts[d] - 1, idx)  # the last edge belongs to the last bin
        inside = inside & (idx >= 0) & (idx < counts[d]) & (col >= e[0]) & (col <= e[-1])
        flat = flat * counts[d] + idx.clamp(0, counts[d] - 1)
    total = int(np.prod(counts))
    w = inside.to(input.dtype) if weight is None else _where(inside, weight.reshape(-1).to(input.dtype), 0.0)
    hist = flat.bincount(w, minlength=total).to(input.dtype).reshape(counts)
    if density:
        widths = [(e[1:] - e[:-1]).reshape([-1 if i == d else 1 for i in np.arange(D)]) for d, e in enumerate(edges)]
        vol = widths[0]
        for wd in widths[1:]:
            vol = vol * wd
        hist = hist / (hist.sum() * vol)
    return histogramdd_return(hist, tuple(edges))


# ----- samplers -----------------------------------------------------------------------------------------------------
def _uniform(shape, device, generator, op: str):
    """Float64 draws uniform in [0, 1) from the Philox stream (``generator`` or the default)."""
    u = TensorBase._empty(tuple(shape), dt.float64, device)
    return _random.uniform_(u, 0.0, 1.0, generator=generator)


def _fill(input, values, op: str):
    if not input.dtype.is_floating_point and op != "geometric_":
        kind = {"exponential_": "Exponential", "cauchy_": "Cauchy", "log_normal_": "Log-normal"}[op]
        raise RuntimeError(f"{kind} distribution is a continuous probability distribution. dtype must be a floating "
                           f"point but you specified {_torch_name(input.dtype)}")
    # a dispatched copy_: autograd refuses a leaf that requires grad, as for torch's in-place samplers,
    # and records the overwrite (no gradient reaches the old values) on any other tensor
    return input.copy_(values)


def exponential_(input, lambd: float = 1.0, *, generator=None) -> Tensor:
    """Fill with Exp(lambd) samples: -log(1 - u) / lambd."""
    _check(input, "exponential_")
    lambd = _float(lambd, "lambd", "exponential_")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd:g}")
    u = _uniform(input.shape, input.device, generator, "exponential_")
    return _fill(input, (-u).log1p() * (-1.0 / lambd), "exponential_")


def cauchy_(input, median: float = 0.0, sigma: float = 1.0, *, generator=None) -> Tensor:
    """Fill with Cauchy(median, sigma) samples: median + sigma tan(pi (u - 1/2))."""
    _check(input, "cauchy_")
    median, sigma = _float(median, "median", "cauchy_"), _float(sigma, "sigma", "cauchy_")
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma:g}")
    u = _uniform(input.shape, input.device, generator, "cauchy_")
    return _fill(input, ((u - 0.5) * math.pi).tan() * sigma + median, "cauchy_")


def log_normal_(input, mean: float = 1.0, std: float = 2.0, *, generator=None) -> Tensor:
    """Fill with samples whose log is N(mean, std**2)."""
    _check(input, "log_normal_")
    mean, std = _float(mean, "mean", "log_normal_"), _float(std, "std", "log_normal_")
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std:g}")
    if not input.dtype.is_floating_point:
        return _fill(input, input, "log_normal_")  # raises torch's message
    z = TensorBase._empty(tuple(input.shape), dt.float64, input.device)
    _random.normal_(z, mean, std, generator=generator)
    return _fill(input, z.exp(), "log_normal_")


def geometric_(input, p: float, *, generator=None) -> Tensor:
    """Fill with the number of Bernoulli(p) trials up to the first success: ceil(log(1 - u) / log(1 - p))."""
    _check(input, "geometric_")
    p = _float(p, "p", "geometric_")
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p:g}")
    u = _uniform(input.shape, input.device, generator, "geometric_")
    k = ((-u).log1p() / math.log1p(-p)).ceil().clamp(min=1.0)
    return _fill(input, k, "geometric_")


def _count_below_cdf(u, log_pmf, kmax: int):
    """The smallest k with CDF(k) > u, for k in [0, kmax]: the number of CDF values at or below u."""
    ks = host_tensor(np.arange(kmax + 1, dtype=np.float64), u.device)
    pmf = log_pmf(ks).exp()
    cdf = pmf.cumsum(-1)
    return (u.unsqueeze(-1) >= cdf).sum(-1).to(dt.float64).clamp(max=float(kmax))


def _rejection(shape, device, generator, op, propose):
    """Hörmann's transformed rejection: rounds of two uniforms each, kept where ``propose`` accepts
    and drawn again only where it rejected, until every sample is accepted."""
    out = TensorBase._empty(tuple(shape), dt.float64, device).fill_(0.0)
    pending = host_tensor(np.ones(tuple(shape), dtype=np.bool_), device)
    while bool(pending.any().item()):
        u = _uniform(shape, device, generator, op)
        v = _uniform(shape, device, generator, op)
        k, ok = propose(u, v)
        take = pending & ok
        out = _where(take, k, out)
        pending = pending & ~ok
    return out


def poisson(input, generator=None) -> Tensor:
    """Poisson samples of the rates ``input``: the CDF count below 10, PTRS above (torch's split)."""
    _check(input, "poisson")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"poisson_cpu\" not implemented for '{_torch_name(input.dtype)}'")
    lam = input.detach().to(dt.float64)
    if lam.numel() and bool((lam < 0).any().item()):
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    if lam.numel() == 0:
        return input.detach().clone()
    small = lam.clamp(max=10.0)
    safe = small.clamp(min=1e-300)
    u = _uniform(lam.shape, lam.device, generator, "poisson")
    lo = _count_below_cdf(u, lambda k: k * safe.unsqueeze(-1).log() - safe.unsqueeze(-1) - (k + 1).lgamma(), 60)
    lo = _where((lam == 0), 0.0, lo)
    if bool((lam >= 10).any().item()):
        big = lam.clamp(min=10.0)
        slam, loglam = big.sqrt(), big.log()
        b = slam * 2.53 + 0.931
        a = b * 0.02483 - 0.059
        invalpha = 1.1328 / (b - 3.4) + 1.1239
        vr = 0.9277 - 3.6224 / (b - 2)

        def propose(u1, v):
            U = u1 - 0.5
            us = 0.5 - U.abs()
            k = ((2 * a / us + b) * U + big + 0.43).floor()
            quick = (us >= 0.07) & (v <= vr)
            slow = (v * invalpha / (a / (us * us) + b)).log() <= -big + k * loglam - (k + 1).clamp(min=1).lgamma()
            ok = quick | ((k >= 0) & ~((us < 0.013) & (v > us)) & slow)
            return k, ok

        hi = _rejection(lam.shape, lam.device, generator, "poisson", propose)
        lo = _where((lam >= 10), hi, lo)
    return lo.to(input.dtype)


def binomial(count, prob, generator=None) -> Tensor:
    """Binomial(count, prob) samples: the CDF count where count * min(p, 1 - p) is below 10, BTRS above."""
    _check(count, "binomial", "count")
    _check(prob, "binomial", "prob")
    if not count.dtype.is_floating_point:
        raise ValueError(f"binomial only supports floating-point dtypes for count, got: {_torch_name(count.dtype)}")
    if not prob.dtype.is_floating_point:
        raise ValueError(f"binomial only supports floating-point dtypes for prob, got: {_torch_name(prob.dtype)}")
    n = count.detach().to(dt.float64)
    p = prob.detach().to(dt.float64)
    shape = tuple(np.broadcast_shapes(tuple(n.shape), tuple(p.shape)))
    n, p = n.expand(shape).contiguous(), p.expand(shape).contiguous()
    if n.numel() == 0:
        return n.to(count.dtype)
    if bool(((p < 0) | (p > 1) | p.isnan()).any().item()) or bool(((n < 0) | n.isnan()).any().item()):
        raise RuntimeError("binomial: expected count >= 0 and 0 <= prob <= 1")
    flip = p > 0.5
    q = _where(flip, 1 - p, p)  # sample with the smaller probability, then mirror
    small = (n * q) < 10
    qs = q.clamp(min=1e-300, max=1 - 1e-16)
    ns = _where(small, n, 0.0)
    kmax = int(min(float(ns.max().item()), 200.0))
    u = _uniform(shape, n.device, generator, "binomial")

    def log_pmf(k):
        nn, qq = ns.unsqueeze(-1), qs.unsqueeze(-1)
        valid = k <= nn
        kk = _where(valid, k, 0.0)
        lp = (nn + 1).lgamma() - (kk + 1).lgamma() - (nn - kk + 1).lgamma() + kk * qq.log() + (nn - kk) * (-qq).log1p()
        return _where(valid, lp, -math.inf)

    out = _count_below_cdf(u, log_pmf, kmax).clamp(max=ns)
    out = _where((q == 0), 0.0, out)
    if bool((~small).any().item()):
        big_n = _where(small, 100.0, n)
        big_q = _where(small, 0.25, q).clamp(min=1e-12)
        spq = (big_n * big_q * (1 - big_q)).sqrt()
        b = spq * 2.53 + 1.15
        a = b * 0.0248 - 0.0873 + big_q * 0.01
        c = big_n * big_q + 0.5
        vr = 0.92 - 4.2 / b
        alpha = (5.1 / b + 2.83) * spq
        lpq = (big_q / (1 - big_q)).log()
        m = ((big_n + 1) * big_q).floor()
        h = (m + 1).lgamma() + (big_n - m + 1).lgamma()

        def propose(u1, v):
            U = u1 - 0.5
            us = 0.5 - U.abs()
            k = ((2 * a / us + b) * U + c).floor()
            inside = (k >= 0) & (k <= big_n)
            quick = (us >= 0.07) & (v <= vr)
            kc = k.clamp(min=0.0).minimum(big_n)
            bound = h - (kc + 1).lgamma() - (big_n - kc + 1).lgamma() + (kc - m) * lpq
            slow = (v * alpha / (a / (us * us) + b)).log() <= bound
            return k, inside & (quick | slow)

        hi = _rejection(shape, n.device, generator, "binomial", propose)
        out = _where(small, out, hi)
    out = _where(flip, n - out, out)
    return out.to(count.dtype)


# ----- lobpcg ---------------------------------------------------------------------------------------------------
def _b_orthonormal(S, B):
    """An orthonormal basis (in the B inner product) of the columns of S, dropping directions whose
    Gram eigenvalue falls below the dtype's precision times the largest."""
    S = S / S.norm(dim=0).clamp(min=1e-300)  # unit columns first: small residuals keep their directions
    BS = S if B is None else B.matmul(S)
    G = S.mT.matmul(BS)
    G = (G + G.mT) * 0.5
    evals, evecs = linalg_eigh(G)
    ev = evals.cpu().numpy()
    keep = np.nonzero(ev > ev.max() * (1e-12 if S.dtype == dt.float64 else 1e-6))[0]
    idx = host_tensor(keep.astype(np.int64), S.device)
    V = evecs.index_select(1, idx) / evals.index_select(0, idx).sqrt()
    return S.matmul(V)


def lobpcg(A, k=None, B=None, X=None, n=None, iK=None, niter=None, tol=None, largest=None, method=None,
           tracker=None, ortho_iparams=None, ortho_fparams=None, ortho_bparams=None):
    """The k largest (or smallest) eigenpairs of the symmetric positive definite problem A x = λ B x
    by LOBPCG (torch's ``basic`` method; ``ortho`` is accepted and runs the same iteration, which
    B-orthonormalizes its basis every step anyway). No preconditioner (``iK``) or tracker."""
    _check(A, "lobpcg", "A")
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square matrix, got shape {list(A.shape)}")
    if A.dtype not in (dt.float32, dt.float64):
        raise ValueError(f"lobpcg: A must be float32 or float64, got {A.dtype.name}")
    if method not in (None, "basic", "ortho"):
        raise ValueError(f"lobpcg: method must be 'basic' or 'ortho', got {method!r}")
    if iK is not None or tracker is not None:
        raise NotImplementedError("lobpcg: a preconditioner (iK) and a tracker are not supported by tritensor")
    m = A.shape[0]
    k = (1 if X is None else X.shape[-1]) if k is None else int(k)
    n = (k if X is None else X.shape[-1]) if n is None else int(n)
    if m < 3 * n:
        raise ValueError(f"LPBPCG algorithm is not applicable when the number of A rows (={m}) is smaller than 3 x the "
                         f"number of requested eigenpairs (={n})")
    largest = True if largest is None else bool(largest)
    niter = 1000 if niter is None else int(niter)
    tol = float(np.finfo(A.dtype.np).eps) ** 0.5 if tol is None else float(tol)  # torch's default
    if X is None:
        X = _uniform((m, n), A.device, None, "lobpcg").to(A.dtype) - 0.5
    A = A.detach()
    a_norm = float(A.norm().item())
    b_norm = 1.0 if B is None else float(B.detach().norm().item())
    X = _b_orthonormal(X.detach().to(A.dtype), B)
    P = None
    sign = -1.0 if largest else 1.0  # eigh sorts ascending: the largest of A are the smallest of -A

    def ritz(S):
        T = S.mT.matmul(A.matmul(S)) * sign
        evals, evecs = linalg_eigh((T + T.mT) * 0.5)
        return evals * sign, evecs

    for it in range(niter):
        AX = A.matmul(X)
        BX = X if B is None else B.matmul(X)
        theta = (X * AX).sum(0) / (X * BX).sum(0)
        R = AX - BX * theta
        # torch's convergence test: |r| / (|x| (|A| + |theta| |B|)), Frobenius norms of A and B
        rnorm = R.norm(dim=0) / (X.norm(dim=0) * (theta.abs() * b_norm + a_norm))
        if float(rnorm[:k].max().item()) < tol:
            break
        parts = [X, R] if P is None else [X, R, P]
        S = parts[0].new_zeros((m, sum(t.shape[1] for t in parts)))
        at = 0
        for t in parts:
            S = S.slice_scatter(t, 1, at, at + t.shape[1])
            at += t.shape[1]
        S = _b_orthonormal(S, B)
        if S.shape[1] < n:
            break
        evals, C = ritz(S)
        Xn = S.matmul(C[:, :n])
        P = Xn - X.matmul(X.mT.matmul(Xn if B is None else B.matmul(Xn)))
        X = Xn
    AX = A.matmul(X)
    BX = X if B is None else B.matmul(X)
    theta = (X * AX).sum(0) / (X * BX).sum(0)
    order = np.argsort(-theta.cpu().numpy() if largest else theta.cpu().numpy(), kind="stable")[:k]
    idx = host_tensor(order.astype(np.int64), A.device)
    return theta.index_select(0, idx), X.index_select(1, idx)
