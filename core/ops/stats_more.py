"""torch's statistics and products beyond the plain reductions: ``quantile nanquantile cov corrcoef
dist inner vdot addr addr_ addbmm addbmm_ chain_matmul trapezoid trapz cumulative_trapezoid
histogram isin renorm renorm_ index_reduce index_reduce_ fill_diagonal_ cumsum_ cumprod_``.

Why no kernel: each is a short chain of ops that have kernels (sort, gather, searchsorted, mm,
sum, cumsum, bincount, scatter_reduce, index_put), each dispatched, so autograd records them and
none needs a derivative of its own; none makes more than a few passes over its input, where a
fused kernel would save launches, not passes. ``quantile`` is a sort along the dim and two
gathers, as torch's own. ``isin`` sorts the test elements once and binary-searches every element
(``searchsorted``): O((n + m) log m), where the broadcast comparison would be O(n m) in time and
memory. ``histogram`` finds each element's bin by ``searchsorted`` over the edges and counts by
``bincount`` (weighted where asked).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import math
import numbers
import warnings

import numpy as np

from ...runtime import dtype as dt
from ..shape import normalize_dim
from ..tensor_base import TensorBase
from . import host_tensor
from . import math_ops as _math
from .sort import searchsorted  # no gradient: called as the core entry, as random.py's multinomial does

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor


def _check(input, op: str, name: str = "input") -> None:
    if not isinstance(input, TensorBase):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(input).__name__}")


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


# ----- quantile ---------------------------------------------------------------------------------------
def _quantile(input, q, dim, keepdim, interpolation, op, ignore_nan):
    _check(input, op)
    if input.dtype not in (dt.float32, dt.float64):
        raise RuntimeError(f"{op}() input tensor must be either float or double dtype")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{op}() interpolation must be one of linear, lower, higher, midpoint or nearest, but got "
                           f"{interpolation}")
    if input.numel() == 0:
        raise RuntimeError(f"{op}() input tensor must be non-empty")
    scalar_q = not isinstance(q, TensorBase)
    if scalar_q:
        if not isinstance(q, numbers.Real) or isinstance(q, bool):
            raise TypeError(f"{op}(): argument 'q' must be float or Tensor, not {type(q).__name__}")
        if not 0 <= q <= 1:
            raise RuntimeError(f"{op}() q must be in the range [0, 1] but got {q}")
        qt = host_tensor(np.array([q], dtype=input.dtype.np), input.device)
    else:
        if q.ndim > 1:
            raise RuntimeError(f"{op}() q must be a scalar or 1D tensor")
        if q.dtype is not input.dtype:
            raise RuntimeError(f"{op}() q tensor must be same dtype as the input tensor")
        if q.device != input.device:
            raise RuntimeError(f"{op}() q tensor must be on the same device as the input tensor")
        scalar_q = q.ndim == 0
        qt = q.reshape(-1)
        if qt.numel() and not bool(((qt >= 0) & (qt <= 1)).all().item()):
            raise RuntimeError(f"{op}() q values must be in the range [0, 1]")
    if dim is None:
        x, d = input.reshape(-1), None
    else:
        d = normalize_dim(dim, input.ndim)
        x = input.unsqueeze(0) if input.ndim == 0 else input.movedim(d, -1)
    s = x.sort(-1).values  # NaN sorts last, as torch's
    batch = tuple(s.shape[:-1])
    n = s.shape[-1]
    Q = qt.shape[0]
    qv = qt.reshape((Q,) + (1,) * (len(batch) + 1))
    if ignore_nan:
        valid = s.isnan().logical_not().sum(-1, keepdim=True).to(s.dtype)  # batch + (1,)
    else:
        valid = s.new_full(batch + (1,), float(n))
    rank = qv * (valid - 1).clamp(min=0)  # (Q,) + batch + (1,)
    if interpolation == "nearest":
        rank = rank.round()  # half to even, as torch's
    lo = rank.floor()
    hi = rank.ceil()
    full = s.unsqueeze(0).expand((Q,) + tuple(s.shape))
    a = full.gather(-1, lo.to(dt.int64))
    if interpolation in ("lower", "nearest"):
        out = a
    else:
        b = full.gather(-1, hi.to(dt.int64))
        if interpolation == "higher":
            out = b
        elif interpolation == "midpoint":
            out = a + (b - a) * 0.5
        else:
            out = a + (b - a) * (rank - lo)
    out = out.squeeze(-1)  # (Q,) + batch
    nan_slice = valid.squeeze(-1).eq(0) if ignore_nan else s.select(-1, n - 1).isnan()
    out = out.masked_fill(nan_slice.unsqueeze(0), math.nan)
    if keepdim:
        shape = (1,) * input.ndim if d is None else tuple(1 if i == d else input.shape[i] for i in range(input.ndim))
        out = out.reshape((Q,) + shape)
    return out.squeeze(0) if scalar_q else out


def quantile(input, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear") -> Tensor:
    """The ``q``-th quantiles over ``dim`` (all elements without one); a slice holding NaN gives NaN."""
    return _quantile(input, q, dim, keepdim, interpolation, "quantile", False)


def nanquantile(input, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear") -> Tensor:
    """``quantile`` of the elements that are not NaN (NaN where a slice has none)."""
    return _quantile(input, q, dim, keepdim, interpolation, "nanquantile", True)


# ----- covariance ---------------------------------------------------------------------------------------
def cov(input, *, correction: int = 1, fweights=None, aweights=None) -> Tensor:
    """The covariance of the variables in ``input``'s rows (observations in its columns; a 1-D
    input is one variable), weighted by ``fweights`` (integer repeats) and ``aweights``, as NumPy's."""
    _check(input, "cov")
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not x.dtype.is_floating_point:
        x = x.to(dt.get_default_dtype())
    n_obs = x.shape[1]
    w = None
    for name, wt in (("fweights", fweights), ("aweights", aweights)):
        if wt is None:
            continue
        _check(wt, "cov", name)
        if wt.ndim > 1:
            raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with "
                               f"{wt.ndim} dimensions")
        if wt.numel() != n_obs:
            raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations in the "
                               f"input but got {wt.numel()} != {n_obs}")
        if name == "fweights" and wt.dtype.is_floating_point:
            raise RuntimeError("cov(): expected fweights to have integral dtype but got fweights with "
                               f"{wt.dtype.name.capitalize()} dtype")
        if name == "aweights" and not wt.dtype.is_floating_point:
            raise RuntimeError("cov(): expected aweights to have floating point dtype but got aweights with "
                               f"{wt.dtype.name.capitalize()} dtype")
        if n_obs and bool((wt < 0).any().item()):
            raise RuntimeError(f"cov(): {name} cannot be negative")
        w = wt.to(x.dtype) if w is None else w * wt.to(x.dtype)
    if w is None:
        w_sum = float(n_obs)
        avg = x.mean(1)
    else:
        w_sum_t = w.sum()
        w_sum = w_sum_t
        avg = (x * w).sum(1) / w_sum_t
    if w is None:
        norm = w_sum - correction
    elif correction == 0:
        norm = w_sum
    elif aweights is None:
        norm = w_sum - correction
    else:
        norm = w_sum - correction * (w * aweights.to(x.dtype)).sum() / w_sum
    norm_host = float(norm.item()) if isinstance(norm, TensorBase) else norm
    if norm_host <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number of "
                      "observations.", UserWarning, stacklevel=3)
        norm = norm.clamp(min=0) if isinstance(norm, TensorBase) else 0.0
    xm = x - avg.unsqueeze(1)
    xw = xm if w is None else xm * w
    c = xm.mm(xw.transpose(0, 1)) / norm
    return c.squeeze()


def corrcoef(input) -> Tensor:
    """Pearson's correlation coefficients of the variables in ``input``'s rows: ``cov`` divided by
    the outer product of the standard deviations, clipped to [-1, 1] as NumPy's."""
    _check(input, "corrcoef")
    if input.ndim > 2:
        raise RuntimeError(f"corrcoef(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    c = cov(input)
    if c.ndim == 0:
        return c / c
    std = c.diagonal().sqrt()
    c = c / std.unsqueeze(1)
    c = c / std.unsqueeze(0)
    return c.clamp(-1, 1)


# ----- distances and products -------------------------------------------------------------------------
def dist(input, other, p=2) -> Tensor:
    """The ``p``-norm of ``input - other`` (broadcast), over all elements."""
    _check(input, "dist")
    _check(other, "dist", "other")
    return (input - other).norm(p)


def inner(input, other, *, out=None) -> Tensor:
    """The sum over the last dims of both (a product when either is 0-D)."""
    _check(input, "inner")
    _check(other, "inner", "other")
    if out is not None:
        raise TypeError("inner(): out= is not supported")
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(input.shape)} and {list(other.shape)}")
    return _math.tensordot(input, other, ([-1], [-1]))


def vdot(input, other, *, out=None) -> Tensor:
    """``dot`` of two 1-D tensors (no conjugation: tritensor has no complex dtype)."""
    _check(input, "vdot")
    _check(other, "vdot", "other")
    if out is not None:
        raise TypeError("vdot(): out= is not supported")
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    if input.dtype is not other.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{_math._TORCH_NAME[input.dtype]} and {_math._TORCH_NAME[other.dtype]}")
    return input.dot(other)


def _scaled_sum(input, product, beta, alpha):
    """``beta * input + alpha * product``; ``beta == 0`` ignores ``input`` (NaN in it too), as torch."""
    term = product if alpha == 1 else product * alpha
    if beta == 0:
        return term.expand(tuple(np.broadcast_shapes(tuple(input.shape), tuple(term.shape)))).clone()
    return (input if beta == 1 else input * beta) + term


def addr(input, vec1, vec2, *, beta=1, alpha=1, out=None) -> Tensor:
    """``beta * input + alpha * outer(vec1, vec2)``."""
    _check(input, "addr")
    _check(vec1, "addr", "vec1")
    _check(vec2, "addr", "vec2")
    if out is not None:
        raise TypeError("addr(): out= is not supported")
    if vec1.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(f"addr: Expected 1-D argument vec1, but got {vec1.ndim}-D" if vec1.ndim != 1 else
                           f"addr: Expected 1-D argument vec2, but got {vec2.ndim}-D")
    return _scaled_sum(input, vec1.outer(vec2), beta, alpha)


def addr_(input, vec1, vec2, *, beta=1, alpha=1) -> Tensor:
    """``addr`` written into ``input``."""
    _check(input, "addr_")
    return input.copy_(addr(_operand(input), vec1, vec2, beta=beta, alpha=alpha))


def addbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None) -> Tensor:
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``."""
    _check(input, "addbmm")
    _check(batch1, "addbmm", "batch1")
    _check(batch2, "addbmm", "batch2")
    if out is not None:
        raise TypeError("addbmm(): out= is not supported")
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise RuntimeError(f"batch1 must be a 3D tensor" if batch1.ndim != 3 else "batch2 must be a 3D tensor")
    return _scaled_sum(input, batch1.bmm(batch2).sum(0), beta, alpha)


def addbmm_(input, batch1, batch2, *, beta=1, alpha=1) -> Tensor:
    """``addbmm`` written into ``input``."""
    _check(input, "addbmm_")
    return input.copy_(addbmm(_operand(input), batch1, batch2, beta=beta, alpha=alpha))


def chain_matmul(*matrices, out=None) -> Tensor:
    """The product of 2-D matrices, left to right (torch deprecates it for ``linalg.multi_dot``)."""
    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
                  "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than "
                  "multiple parameters.", UserWarning, stacklevel=3)
    if out is not None:
        raise TypeError("chain_matmul(): out= is not supported")
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for i, m in enumerate(matrices):
        _check(m, "chain_matmul", f"matrices[{i}]")
        if m.ndim != 2:
            raise RuntimeError(f"Tensor dimension is {m.ndim}, expected 2 instead.")
    if len(matrices) == 1:
        return matrices[0].clone()
    out = matrices[0]
    for m in matrices[1:]:
        out = out.mm(m)
    return out


# ----- integration --------------------------------------------------------------------------------------
def _trapezoid_terms(y, x, dx, dim, op):
    """The trapezoids' areas along ``dim``: ``(y[i] + y[i+1]) / 2 * spacing``."""
    _check(y, op, "y")
    d = normalize_dim(dim, y.ndim)
    n = y.shape[d]
    if n == 0:
        return None, d
    mids = (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) / 2
    if x is None:
        return mids * dx, d
    _check(x, op, "x")
    if x.ndim == 1:
        if x.shape[0] != n:
            raise RuntimeError(f"{op}: There must be one `x` value for each sample point")
        spacing = x.diff()
        spacing = spacing.reshape((n - 1,) + (1,) * (y.ndim - 1 - d))
    else:
        spacing = x.diff(dim=dim)
    return mids * spacing, d


def trapezoid(y, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """The integral of ``y`` along ``dim`` by the trapezoid rule, at points ``x`` or spacing ``dx``."""
    if x is not None and dx is not None:
        raise RuntimeError("trapezoid: received both x and dx; only one may be given")
    terms, d = _trapezoid_terms(y, x, 1 if dx is None else dx, dim, "trapezoid")
    if terms is None:
        return y.sum(d) * 0 if y.dtype.is_floating_point else y.sum(d)
    return terms.sum(d)


def trapz(y, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """``trapezoid`` under its older name."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """The running integral of ``y`` along ``dim`` (one shorter than ``y`` there)."""
    if x is not None and dx is not None:
        raise RuntimeError("cumulative_trapezoid: received both x and dx; only one may be given")
    terms, d = _trapezoid_terms(y, x, 1 if dx is None else dx, dim, "cumulative_trapezoid")
    if terms is None:
        return y.clone()
    return terms.cumsum(d)


# ----- membership, histogram -----------------------------------------------------------------------------
def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """Whether each of ``elements`` is among ``test_elements`` (either may be a number): the test
    elements sorted once, each element binary-searched (``searchsorted``) and compared with the
    one found."""
    if not isinstance(elements, TensorBase) and not isinstance(test_elements, TensorBase):
        raise TypeError("isin(): argument 'elements' must be Tensor, not " + type(elements).__name__)
    for t in (elements, test_elements):
        if isinstance(t, TensorBase):
            dt.refuse_barebones(t.dtype, f"isin_default_{t.device.type}")
    if not isinstance(elements, TensorBase):
        elements = test_elements.new_full((), elements)
    if not isinstance(test_elements, TensorBase):
        test_elements = elements.new_full((), test_elements)
    result = dt.promote_types(elements.dtype, test_elements.dtype)
    e, te = elements.to(result), test_elements.to(result).reshape(-1)
    if te.numel() == 0:
        found = e.new_zeros(e.shape, dtype=dt.bool_)
    else:
        s = te.sort().values
        pos = searchsorted(s, e.reshape(-1)).clamp(max=s.numel() - 1)
        found = s.index_select(0, pos).eq(e.reshape(-1)).reshape(e.shape)
    return found.logical_not() if invert else found


def histogram(input, bins=100, *, range=None, weight=None, density: bool = False):
    """Counts (or ``weight`` sums) of ``input``'s elements in ``bins`` equal bins over ``range``
    (the elements' min to max without one) or between the edges of a 1-D ``bins`` tensor; the last
    bin holds its right edge. ``(hist, bin_edges)``, in the input's dtype."""
    _check(input, "histogram")
    if not input.dtype.is_floating_point or input.dtype in (dt.float16, dt.bfloat16):
        raise NotImplementedError(f"\"histogramdd\" not implemented for '{_math._TORCH_NAME[input.dtype]}'")
    x = input.reshape(-1)
    if isinstance(bins, TensorBase):
        if bins.ndim != 1 or bins.numel() < 1:
            raise RuntimeError("torch.histogramdd(): bins tensor should have one dimension and at least 1 element")
        edges = bins.to(input.dtype)
    else:
        if isinstance(bins, bool) or not isinstance(bins, numbers.Integral) or bins <= 0:
            raise RuntimeError(f"torch.histogramdd(): bins must be > 0, but got {bins} for dimension 0")
        if range is not None:
            lo, hi = float(range[0]), float(range[1])
            if lo > hi:
                raise RuntimeError(f"torch.histogramdd(): for dimension 0, min ({lo}) should be less than or equal "
                                   f"to max ({hi})")
        elif x.numel():
            lo, hi = float(x.amin().item()), float(x.amax().item())
        else:
            lo, hi = 0.0, 0.0
        if lo == hi:  # torch widens an empty range to one of width 1 around the value
            lo, hi = lo - 0.5, hi + 0.5
        edges = host_tensor(_linspace(lo, hi, bins + 1, input.dtype.np), input.device)
    nb = edges.numel() - 1
    w = None
    if weight is not None:
        _check(weight, "histogram", "weight")
        if tuple(weight.shape) != tuple(input.shape):
            raise RuntimeError("torch.histogramdd(): if weight tensor is provided it should have the same shape as "
                               "the input tensor excluding its innermost dimension")
        w = weight.reshape(-1).to(input.dtype)
    inside = (x >= edges[0]) & (x <= edges[-1])
    idx = searchsorted(edges, x, right=True) - 1
    idx = idx.clamp(0, max(nb - 1, 0))  # the right edge belongs to the last bin
    if nb == 0:
        hist = x.new_zeros((0,))
    else:
        picked = idx.masked_select(inside)
        wsel = w.masked_select(inside) if w is not None else None
        hist = picked.bincount(wsel, minlength=nb).to(input.dtype)
    if density:
        widths = edges.diff()
        hist = hist / (hist.sum() * widths)
    return hist, edges


def _linspace(lo, hi, steps, np_dtype):
    """torch's linspace on the host (the bin edges depend on two numbers and a count): from the
    start for the first half, from the end for the second, in the result's dtype."""
    i = np.arange(steps)
    step = (np_dtype.type(hi) - np_dtype.type(lo)) / np_dtype.type(max(steps - 1, 1))
    half = steps // 2
    out = np.where(i < half, np_dtype.type(lo) + step * i.astype(np_dtype),
                   np_dtype.type(hi) - step * (steps - 1 - i).astype(np_dtype))
    return out.astype(np_dtype)


def _operand(input):
    """What an in-place composite computes from: ``input`` itself, or a copy when autograd tracks it,
    since the out-of-place op may save its input for backward and the copy_ back would overwrite it
    (torch's version check then refuses the backward)."""
    return input.clone() if input.requires_grad else input


# ----- renorm, index_reduce, fill_diagonal_, the in-place scans --------------------------------------------
def renorm(input, p, dim: int, maxnorm) -> Tensor:
    """Each slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` scaled down to it (by
    ``maxnorm / (norm + 1e-7)``, as torch)."""
    _check(input, "renorm")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"renorm: expected a floating point input, got {_math._TORCH_NAME[input.dtype]}")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    d = normalize_dim(dim, input.ndim)
    others = tuple(i for i in range(input.ndim) if i != d)
    norms = _math.linalg_vector_norm(input, p, others, keepdim=True) if others else input.abs()
    factor = (maxnorm / (norms + 1e-7)).where(norms > maxnorm, norms.new_ones(()))
    return input * factor


def renorm_(input, p, dim: int, maxnorm) -> Tensor:
    """``renorm`` written into ``input``."""
    _check(input, "renorm_")
    return input.copy_(renorm(_operand(input), p, dim, maxnorm))


_INDEX_REDUCE = ("prod", "mean", "amax", "amin")


def index_reduce(input, dim: int, index, source, reduce: str, *, include_self: bool = True) -> Tensor:
    """``input`` with ``source``'s slices along ``dim`` reduced into the slices ``index`` names
    (``prod mean amax amin``): ``scatter_reduce`` with the index spread over ``source``'s shape."""
    _check(input, "index_reduce")
    _check(index, "index_reduce", "index")
    _check(source, "index_reduce", "source")
    if reduce not in _INDEX_REDUCE:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    if index.ndim > 1:
        raise IndexError("index_reduce_(): Index is supposed to be a vector")
    if index.dtype not in (dt.int64, dt.int32):
        raise IndexError("index_reduce_(): Expected dtype int32/int64 for index but got: "
                         f"{_math._TORCH_NAME[index.dtype]}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"index_reduce_(): self ({_math._TORCH_NAME[input.dtype]}) and source "
                           f"({_math._TORCH_NAME[source.dtype]}) must have the same scalar type")
    d = normalize_dim(dim, input.ndim)
    src = source.reshape(1) if source.ndim == 0 else source
    n = index.numel()
    if src.shape[d if src.ndim > d else 0] != n:
        raise IndexError(f"index_reduce_(): Number of indices ({n}) should be equal to source.size(dim) "
                         f"({src.shape[d]})")
    shape = [1] * src.ndim
    shape[d] = n
    spread = index.to(dt.int64).reshape(shape).expand(tuple(src.shape))
    base = input.reshape(1) if input.ndim == 0 else input
    return base.scatter_reduce(d, spread, src, reduce, include_self=include_self).reshape(input.shape)


def index_reduce_(input, dim: int, index, source, reduce: str, *, include_self: bool = True) -> Tensor:
    """``index_reduce`` written into ``input``."""
    _check(input, "index_reduce_")
    return input.copy_(index_reduce(_operand(input), dim, index, source, reduce, include_self=include_self))


def fill_diagonal_(input, fill_value, wrap: bool = False) -> Tensor:
    """``fill_value`` written on the main diagonal (every dim the same length, or a 2-D matrix;
    ``wrap`` restarts a tall matrix's diagonal below the square, as NumPy's)."""
    _check(input, "fill_diagonal_")
    if input.ndim < 2:
        raise RuntimeError("dimensions must larger than 1")
    shape = tuple(input.shape)
    if input.ndim > 2 and len(set(shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    numel = input.numel()
    strides = np.cumprod((1,) + shape[:0:-1])[::-1]  # row-major strides of the logical order
    step = int(strides.sum())
    if input.ndim == 2:
        h, w = shape
        end = numel if (wrap and h > w + 1) else min(h, w) * w
    else:
        end = numel
    positions = np.arange(0, end, step, dtype=np.int64)
    if positions.size == 0:
        return input
    # the positions as coordinates: one index_put_ on input through its strides, no flat view of it
    coords = tuple(host_tensor(c, input.device) for c in np.unravel_index(positions, shape))
    input.index_put_(coords, input.new_full((), fill_value))
    return input


def cumsum_(input, dim: int, *, dtype=None) -> Tensor:
    """``cumsum`` written into ``input``."""
    _check(input, "cumsum_")
    return input.copy_(input.cumsum(dim, dtype=dtype))


def cumprod_(input, dim: int, *, dtype=None) -> Tensor:
    """``cumprod`` written into ``input``."""
    _check(input, "cumprod_")
    return input.copy_(_operand(input).cumprod(dim, dtype=dtype))
