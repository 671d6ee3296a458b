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

Backward (``layer_norm_backward``): two kernels, two launches (one where one program does it all,
or only dx is asked for).
The first reads x and dy in place through their strides (no copy), w and the saved mean/rstd;
per row it computes, in fp32 (fp64 for fp64), ``xhat = (x - mean) * rstd`` and
``dx = rstd * (w*dy - mean(w*dy) - xhat * mean(w*dy*xhat))``, written contiguous in x's dtype.
A program owns every ``P``-th block of rows (``P`` programs, at most ``MAX_BWD_PROGRAMS``), adds
``dy * xhat`` and ``dy`` over its rows, and stores those column sums as its row of a ``[2, P, N]``
buffer; the second kernel adds the ``P`` rows in order into dw and db in their own dtypes. No
atomics, so the result is the same bit for bit on every run. With one program its sums are
dw and db already, stored directly: one launch. A row longer than one tile walks its chunks
twice (the two row means, then dx and the column sums, added into the program's buffer row).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.dtype_policy import FLOAT_COMPUTE_NAME
from ..runtime.launch import launch
from ._common import (cdiv, collapse, f64_bits, load_f64_scalar, needs_int64, next_pow2, per_mode, strided_offset,
                      strided_offset2)
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


def _rows(shape: tuple, n_norm_dims: int) -> tuple:
    """(number of leading dims, rows, row length) of a tensor normalized over its last ``n_norm_dims`` dims."""
    lead = len(shape) - n_norm_dims
    n = 1
    for s in shape[lead:]:
        n *= s
    n_rows = 1
    for s in shape[:lead]:
        n_rows *= s
    return lead, n_rows, n


def layer_norm(y, x, n_norm_dims: int, weight, bias, eps: float, mean=None, rstd=None) -> None:
    """y = layer_norm(x) over x's last ``n_norm_dims`` dims.

    ``y`` is contiguous with x's shape; ``weight``/``bias`` (or None) are contiguous with the
    normalized shape; ``mean``/``rstd`` (both or neither) are contiguous, one value per row,
    in the statistics dtype (fp32, or fp64 for fp64 inputs).
    """
    shape, stride = tuple(x.shape), tuple(x.stride())
    lead, n_rows, n = _rows(shape, n_norm_dims)
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


# The backward's programs, each owning every P-th block of rows: the column sums (dw, db) take a
# [2, P, N] fp32 buffer and a second pass over it, so P is capped where the GPU is full (132 SMs
# on an H100, a few programs each); the interpreter pays per program, so it keeps few.
MAX_BWD_PROGRAMS = per_mode(4, 512)
# A block of the backward holds x, dy, xhat and w*dy at once, so it is smaller than the forward's
# on the GPU: half the tile, about 8 fp32 values of each per thread (4 fp64) and at most 16 warps
# (32 would cap a thread at 64 registers), and rows up to 4096 columns in one tile (2048 in fp64);
# longer ones take the chunked path. That compiles for sm_90 without spills; with the forward's
# sizes this kernel spilled in fp64 at 4096 and 8192 columns, and with 32 warps at 8192 in fp32.
BWD_TILE = per_mode(32768, 2048)
BWD_MAX_SINGLE_N = per_mode(MAX_SINGLE_N, 4096)
BWD_VALUES_PER_THREAD = 8
SUM_BLOCK_P = per_mode(64, 32)
SUM_BLOCK_N = per_mode(4096, 128)


@triton.jit
def _col_offsets2(cols, rshape, rsx, rsg, RNDIM: tl.constexpr, RCONTIG: tl.constexpr):
    """``_col_offsets`` of two operands (x, dy) sharing the collapsed normalized shape."""
    if RCONTIG:
        ox = cols
        og = cols
    elif RNDIM == 1:
        ox = cols * rsx[0]
        og = cols * rsg[0]
    else:
        ox, og = strided_offset2(cols, rshape, rsx, rsg, RNDIM)
    return ox, og


@triton.jit
def _bwd_tile(x, dy, w, row_x, row_g, row_mask, cols, n, mean, rstd, rshape, rsx, rsg,
              HAS_W: tl.constexpr, COMPUTE: tl.constexpr, RNDIM: tl.constexpr, RCONTIG: tl.constexpr):
    """One [rows, cols] tile: dy, xhat and w * dy (0 outside the tile's mask), and the mask."""
    col_mask = cols < n
    mask = row_mask[:, None] & col_mask[None, :]
    ox, og = _col_offsets2(cols, rshape, rsx, rsg, RNDIM, RCONTIG)
    v = tl.load(x + row_x[:, None] + ox[None, :], mask=mask, other=0).to(COMPUTE)
    g = tl.load(dy + row_g[:, None] + og[None, :], mask=mask, other=0).to(COMPUTE)
    xhat = tl.where(mask, (v - mean[:, None]) * rstd[:, None], 0.0)
    if HAS_W:
        wg = g * tl.load(w + cols, mask=col_mask, other=0).to(COMPUTE)[None, :]
    else:
        wg = g
    return g, xhat, wg, mask


@triton.jit
def _layer_norm_bwd_kernel(x, dy, w, mean_in, rstd_in, dx, dwp, dbp, db_off, n_rows, n, n_blocks, kshape, ksx, ksg,
                           rshape, rsx, rsg, HAS_W: tl.constexpr, NEED_DX: tl.constexpr, NEED_DW: tl.constexpr,
                           NEED_DB: tl.constexpr, COMPUTE: tl.constexpr, KNDIM: tl.constexpr, RNDIM: tl.constexpr,
                           RCONTIG: tl.constexpr, SINGLE: tl.constexpr, INT64: tl.constexpr, BLOCK_M: tl.constexpr,
                           BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    n_prog = tl.num_programs(0)
    cols0 = tl.arange(0, BLOCK_N)
    if INT64:
        cols0 = cols0.to(tl.int64)
    part = pid * n  # this program's row of the [P, N] column-sum buffers (db's ``db_off`` further on)
    if INT64:
        part = pid.to(tl.int64) * n
    dbp += db_off
    if SINGLE:
        col_mask = cols0 < n
        acc_dw = tl.zeros([BLOCK_N], COMPUTE)
        acc_db = tl.zeros([BLOCK_N], COMPUTE)
    for rb in range(pid, n_blocks, n_prog):
        rows = rb * BLOCK_M + tl.arange(0, BLOCK_M)
        if INT64:
            rows = rows.to(tl.int64)
        row_mask = rows < n_rows
        row_x, row_g = strided_offset2(rows, kshape, ksx, ksg, KNDIM)
        mean = tl.load(mean_in + rows, mask=row_mask, other=0).to(COMPUTE)
        rstd = tl.load(rstd_in + rows, mask=row_mask, other=0).to(COMPUTE)
        if SINGLE:
            g, xhat, wg, mask = _bwd_tile(x, dy, w, row_x, row_g, row_mask, cols0, n, mean, rstd, rshape, rsx, rsg,
                                          HAS_W, COMPUTE, RNDIM, RCONTIG)
            if NEED_DX:
                c1 = tl.sum(wg * xhat, 1) / n
                c2 = tl.sum(wg, 1) / n
                r = (wg - c2[:, None] - xhat * c1[:, None]) * rstd[:, None]
                tl.store(dx + rows[:, None] * n + cols0[None, :], r.to(dx.dtype.element_ty), mask=mask)
            if NEED_DW:
                acc_dw += tl.sum(g * xhat, 0)
            if NEED_DB:
                acc_db += tl.sum(g, 0)
        else:
            if NEED_DX:
                c1 = tl.zeros([BLOCK_M], COMPUTE)
                c2 = tl.zeros([BLOCK_M], COMPUTE)
                for start in range(0, n, BLOCK_N):
                    g, xhat, wg, mask = _bwd_tile(x, dy, w, row_x, row_g, row_mask, start + cols0, n, mean, rstd,
                                                  rshape, rsx, rsg, HAS_W, COMPUTE, RNDIM, RCONTIG)
                    c1 += tl.sum(wg * xhat, 1)
                    c2 += tl.sum(wg, 1)
                c1 = c1 / n
                c2 = c2 / n
            # The program's first block stores its column sums, the later ones add to them (the
            # first block's loads are masked off: they read 0): each buffer row has one writer.
            first = (rb == pid).to(tl.int32) * n
            for start in range(0, n, BLOCK_N):
                cols = start + cols0
                col_mask = cols < n
                g, xhat, wg, mask = _bwd_tile(x, dy, w, row_x, row_g, row_mask, cols, n, mean, rstd, rshape, rsx,
                                              rsg, HAS_W, COMPUTE, RNDIM, RCONTIG)
                if NEED_DX:
                    r = (wg - c2[:, None] - xhat * c1[:, None]) * rstd[:, None]
                    tl.store(dx + rows[:, None] * n + cols[None, :], r.to(dx.dtype.element_ty), mask=mask)
                if NEED_DW:
                    prev = tl.load(dwp + part + cols, mask=col_mask & (cols >= first), other=0).to(COMPUTE)
                    tl.store(dwp + part + cols, (prev + tl.sum(g * xhat, 0)).to(dwp.dtype.element_ty),
                             mask=col_mask)
                if NEED_DB:
                    prev = tl.load(dbp + part + cols, mask=col_mask & (cols >= first), other=0).to(COMPUTE)
                    tl.store(dbp + part + cols, (prev + tl.sum(g, 0)).to(dbp.dtype.element_ty), mask=col_mask)
    if SINGLE:
        if NEED_DW:
            tl.store(dwp + part + cols0, acc_dw.to(dwp.dtype.element_ty), mask=col_mask)
        if NEED_DB:
            tl.store(dbp + part + cols0, acc_db.to(dbp.dtype.element_ty), mask=col_mask)


@triton.jit
def _layer_norm_bwd_sum_kernel(dwp, dbp, db_off, dw, db, n_parts, n, NEED_DW: tl.constexpr, NEED_DB: tl.constexpr,
                               COMPUTE: tl.constexpr, INT64: tl.constexpr, BLOCK_P: tl.constexpr,
                               BLOCK_N: tl.constexpr):
    # dw[c] = sum over p of dwp[p, c] (db alike), the rows added in the same order on every run
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    if INT64:
        cols = cols.to(tl.int64)
    col_mask = cols < n
    dbp += db_off
    acc_dw = tl.zeros([BLOCK_P, BLOCK_N], COMPUTE)
    acc_db = tl.zeros([BLOCK_P, BLOCK_N], COMPUTE)
    for start in range(0, n_parts, BLOCK_P):
        p = start + tl.arange(0, BLOCK_P)
        if INT64:
            p = p.to(tl.int64)
        mask = (p < n_parts)[:, None] & col_mask[None, :]
        offs = p[:, None] * n + cols[None, :]
        if NEED_DW:
            acc_dw += tl.load(dwp + offs, mask=mask, other=0).to(COMPUTE)
        if NEED_DB:
            acc_db += tl.load(dbp + offs, mask=mask, other=0).to(COMPUTE)
    if NEED_DW:
        tl.store(dw + cols, tl.sum(acc_dw, 0).to(dw.dtype.element_ty), mask=col_mask)
    if NEED_DB:
        tl.store(db + cols, tl.sum(acc_db, 0).to(db.dtype.element_ty), mask=col_mask)


def layer_norm_backward(dx, dw, db, dy, x, n_norm_dims: int, weight, mean, rstd) -> None:
    """The gradients of ``layer_norm`` over x's last ``n_norm_dims`` dims, given ``dy``.

    ``dx`` (contiguous, x's shape and dtype), ``dw`` and ``db`` (contiguous, the normalized
    shape, each in its parameter's dtype) are written where not None; ``x`` and ``dy`` (same
    shape) are read through their strides; ``weight`` (or None) is contiguous; ``mean``/``rstd``
    are the forward's statistics (contiguous, one per row). Empty rows give zero dw and db.
    """
    shape = tuple(x.shape)
    lead, n_rows, n = _rows(shape, n_norm_dims)
    need_dx, need_dw, need_db = dx is not None, dw is not None, db is not None
    sums = dw if need_dw else db  # a real tensor for the pointer arguments that go unused
    if n == 0 or (n_rows == 0 and sums is None) or not (need_dx or sums is not None):
        return
    compute = getattr(tl, FLOAT_COMPUTE_NAME[x.dtype.name])
    if n_rows == 0:  # sums over no rows: zeros, from the summing kernel over no partials
        _sum_partials(sums, 0, dw, db, 0, n, compute, False)
        return
    xs, gs = tuple(x.stride()), tuple(dy.stride())
    kshape, (ksx, ksg), _ = collapse(shape[:lead], xs[:lead], gs[:lead])
    rshape, (rsx, rsg), rcontig = collapse(shape[lead:], xs[lead:], gs[lead:])
    wide = 2 if x.dtype.name == "float64" else 1  # 32-bit registers per value
    single = n <= BWD_MAX_SINGLE_N // wide
    block_n = next_pow2(n) if single else CHUNK_N
    block_m = max(1, min(BWD_TILE // block_n, next_pow2(n_rows)))
    n_blocks = cdiv(n_rows, block_m)
    programs = min(n_blocks, MAX_BWD_PROGRAMS)
    int64 = (needs_int64(tuple(kshape) + tuple(rshape), tuple(ksx) + tuple(rsx), tuple(ksg) + tuple(rsg))
             or n_rows * n >= 2**31 or 2 * programs * n >= 2**31)
    direct = programs == 1 or sums is None
    if direct:  # one program's column sums are the result: stored in the parameters' dtype
        dwp, dbp, db_off = dw if need_dw else sums, db if need_db else sums, 0
    else:  # dw's partials, then db's, in one [2, P, N] buffer
        dwp = dbp = x.new_empty((2 * programs * n,), dtype=mean.dtype)
        db_off = programs * n
    num_warps = min(16, max(4, block_m * block_n * wide // (32 * BWD_VALUES_PER_THREAD)))
    dummy = dx if need_dx else sums
    launch(_layer_norm_bwd_kernel, (programs,), x, dy, weight if weight is not None else dummy, mean, rstd, dummy,
           dwp if dwp is not None else dummy, dbp if dbp is not None else dummy, db_off, n_rows, n, n_blocks, kshape,
           ksx, ksg, rshape, rsx, rsg, HAS_W=weight is not None, NEED_DX=need_dx, NEED_DW=need_dw, NEED_DB=need_db,
           COMPUTE=compute, KNDIM=len(kshape), RNDIM=len(rshape), RCONTIG=rcontig, SINGLE=single, INT64=int64,
           BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps)
    if not direct:
        _sum_partials(dwp, db_off, dw, db, programs, n, compute, int64)


def _sum_partials(parts, db_off: int, dw, db, n_parts: int, n: int, compute, int64: bool) -> None:
    """dw, db (where not None) = the column sums of the ``[n_parts, n]`` buffers at ``parts`` and
    ``db_off`` elements further."""
    out = dw if dw is not None else db
    block_n = min(SUM_BLOCK_N, next_pow2(n))
    block_p = max(1, min(SUM_BLOCK_P, next_pow2(n_parts)))
    launch(_layer_norm_bwd_sum_kernel, (cdiv(n, block_n),), parts, parts, db_off, dw if dw is not None else out,
           db if db is not None else out, n_parts, n, NEED_DW=dw is not None, NEED_DB=db is not None,
           COMPUTE=compute, INT64=int64, BLOCK_P=block_p, BLOCK_N=block_n, num_warps=4)
