"""Layer normalization forward: per row, ``(x - mean) * rstd * weight + bias``.

A row is the trailing ``normalized_shape`` dims (collapsed; a strided input is read in place),
the other dims are rows. Statistics are fp32 (fp64 for fp64 inputs) whatever the input dtype,
and the variance is the biased one (divide by N), as in PyTorch.

The per-row ``mean`` and ``rstd = 1 / sqrt(var + eps)`` can be written out too: they are what
the backward kernel needs (``native_layer_norm`` returns them), so nothing is recomputed.

Two schedules: a row that fits one tile stays in registers (one read: exact two-pass
statistics, then normalize); a longer row takes a statistics pass in chunks (each chunk's
mean and squared deviations exact, merged with Chan's formula, like ``reduce.py``'s var) and
a normalize pass (two reads).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.dtype_policy import FLOAT_COMPUTE_NAME
from ..runtime.launch import launch
from ._common import cdiv, collapse, f64_bits, load_f64_scalar, needs_int64, next_pow2, per_mode, strided_offset
from .reduce import _col_offsets  # the same strided walk of a collapsed reduced extent

TILE = per_mode(32768, 4096)
MAX_SINGLE_N = per_mode(32768, 8192)
CHUNK_N = per_mode(32768, 2048)


@triton.jit
def _normalize_store(v, cols, col_mask, mask, rows, mean, rstd, w, b, y, n,
                     HAS_W: tl.constexpr, HAS_B: tl.constexpr, COMPUTE: tl.constexpr):
    r = (v - mean[:, None]) * rstd[:, None]
    if HAS_W:
        r = r * tl.load(w + cols, mask=col_mask, other=0).to(COMPUTE)[None, :]
    if HAS_B:
        r = r + tl.load(b + cols, mask=col_mask, other=0).to(COMPUTE)[None, :]
    tl.store(y + rows[:, None] * n + cols[None, :], r.to(y.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["eps_bits"])
def _layer_norm_fwd_kernel(x, w, b, y, mean_out, rstd_out, n_rows, n, kshape, kstrides, rshape, rstrides, eps_bits,
                           HAS_W: tl.constexpr, HAS_B: tl.constexpr, STATS: tl.constexpr, COMPUTE: tl.constexpr,
                           KNDIM: tl.constexpr, RNDIM: tl.constexpr, RCONTIG: tl.constexpr, SINGLE: tl.constexpr,
                           INT64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    if INT64:
        rows = rows.to(tl.int64)
    row_mask = rows < n_rows
    row_off = strided_offset(rows, kshape, kstrides, KNDIM)
    cols0 = tl.arange(0, BLOCK_N)
    if INT64:
        cols0 = cols0.to(tl.int64)
    eps = load_f64_scalar(eps_bits).to(COMPUTE)
    # Statistics of x - (the row's first element): a constant row normalizes to exactly 0 (to the
    # bias), and a large mean no longer eats the sums' precision. ``mean`` is of shifted values
    # until it is stored.
    pivot = tl.load(x + row_off, mask=row_mask, other=0).to(COMPUTE)

    if SINGLE:
        col_mask = cols0 < n
        mask = row_mask[:, None] & col_mask[None, :]
        offs = row_off[:, None] + _col_offsets(cols0, rshape, rstrides, RNDIM, RCONTIG)[None, :]
        v = tl.where(mask, tl.load(x + offs, mask=mask, other=0).to(COMPUTE) - pivot[:, None], 0.0)
        mean = tl.sum(v, 1) / n
        d = tl.where(mask, v - mean[:, None], 0.0)
        var = tl.sum(d * d, 1) / n
    else:
        mean = tl.zeros([BLOCK_M], COMPUTE)
        m2 = tl.zeros([BLOCK_M], COMPUTE)
        for start in range(0, n, BLOCK_N):
            cols = start + cols0
            mask = row_mask[:, None] & (cols < n)[None, :]
            offs = row_off[:, None] + _col_offsets(cols, rshape, rstrides, RNDIM, RCONTIG)[None, :]
            v = tl.where(mask, tl.load(x + offs, mask=mask, other=0).to(COMPUTE) - pivot[:, None], 0.0)
            nb = tl.minimum(n - start, BLOCK_N).to(COMPUTE)
            na = tl.zeros([], COMPUTE) + start
            mean_b = tl.sum(v, 1) / nb
            d = tl.where(mask, v - mean_b[:, None], 0.0)
            delta = mean_b - mean
            mean += delta * (nb / (na + nb))
            m2 += tl.sum(d * d, 1) + delta * delta * (na * nb / (na + nb))
        var = m2 / n
    rstd = 1.0 / tl.sqrt(var + eps)
    if STATS:
        tl.store(mean_out + rows, (mean + pivot).to(mean_out.dtype.element_ty), mask=row_mask)
        tl.store(rstd_out + rows, rstd.to(rstd_out.dtype.element_ty), mask=row_mask)

    if SINGLE:
        _normalize_store(v, cols0, col_mask, mask, rows, mean, rstd, w, b, y, n, HAS_W, HAS_B, COMPUTE)
    else:
        for start in range(0, n, BLOCK_N):
            cols = start + cols0
            col_mask = cols < n
            mask = row_mask[:, None] & col_mask[None, :]
            offs = row_off[:, None] + _col_offsets(cols, rshape, rstrides, RNDIM, RCONTIG)[None, :]
            v = tl.load(x + offs, mask=mask, other=0).to(COMPUTE) - pivot[:, None]
            _normalize_store(v, cols, col_mask, mask, rows, mean, rstd, w, b, y, n, HAS_W, HAS_B, COMPUTE)


def layer_norm(y, x, n_norm_dims: int, weight, bias, eps: float, mean=None, rstd=None) -> None:
    """y = layer_norm(x) over x's last ``n_norm_dims`` dims.

    ``y`` is contiguous with x's shape; ``weight``/``bias`` (or None) are contiguous with the
    normalized shape; ``mean``/``rstd`` (both or neither) are contiguous, one value per row,
    in the statistics dtype (fp32, or fp64 for fp64 inputs).
    """
    shape, stride = tuple(x.shape), tuple(x.stride())
    lead = len(shape) - n_norm_dims
    n = 1
    for s in shape[lead:]:
        n *= s
    n_rows = 1
    for s in shape[:lead]:
        n_rows *= s
    if n_rows == 0 or n == 0:
        return  # nothing to normalize; the caller fills the statistics of empty rows
    kshape, (kstrides,), _ = collapse(shape[:lead], stride[:lead])
    rshape, (rstrides,), rcontig = collapse(shape[lead:], stride[lead:])
    single = n <= MAX_SINGLE_N
    block_n = next_pow2(n) if single else CHUNK_N
    block_m = max(1, min(TILE // block_n, next_pow2(n_rows)))
    int64 = needs_int64(tuple(kshape) + tuple(rshape), tuple(kstrides) + tuple(rstrides)) or n_rows * n >= 2**31
    compute = getattr(tl, FLOAT_COMPUTE_NAME[x.dtype.name])
    elems = block_m * block_n
    stats = mean is not None
    launch(_layer_norm_fwd_kernel, (cdiv(n_rows, block_m),),
           x, weight if weight is not None else y, bias if bias is not None else y, y,
           mean if stats else y, rstd if stats else y, n_rows, n, kshape, kstrides, rshape, rstrides, f64_bits(eps),
           HAS_W=weight is not None, HAS_B=bias is not None, STATS=stats, COMPUTE=compute, KNDIM=len(kshape),
           RNDIM=len(rshape), RCONTIG=rcontig, SINGLE=single, INT64=int64, BLOCK_M=block_m, BLOCK_N=block_n,
           num_warps=4 if elems <= 2048 else (8 if elems <= 8192 else 16))
