"""Softmax and log-softmax along any one dim, read and written in place through strides.

Rows are every index of the other dims (collapsed where memory allows); the softmax dim is
walked with its own stride, so ``dim=0`` of a row-major matrix or a transposed input needs no
copy. Values are loaded, computed in fp32 (fp64 for fp64) and cast on store.

Two schedules, chosen by the row length:
- a row that fits one tile is loaded once: max, exp, sum, write (one read, one write);
- a longer row takes an online pass (running max and a running sum rescaled by
  ``exp(old_max - new_max)`` whenever the max grows, Milakov & Gimelshein 2018) and a second
  pass that writes: two reads, one write, any length.
The max is subtracted before ``exp`` so nothing overflows. A row that is entirely ``-inf``
gives NaN (``-inf - -inf``), as in PyTorch; the online pass guards its rescaling so such a
prefix cannot poison a row that later meets a finite value.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.dtype_policy import FLOAT_COMPUTE_NAME
from ..runtime.launch import launch
from ._common import cdiv, collapse, needs_int64, next_pow2, per_mode, strided_offset2

# Elements per tile; the longest row loaded whole (one read) and the chunk for longer rows.
TILE = per_mode(32768, 4096)
MAX_SINGLE_N = per_mode(32768, 8192)
CHUNK_N = per_mode(32768, 2048)
KEPT_CONTIG_BLOCK_M = per_mode(1024, 128)


@triton.jit
def _load_row_tile(x, offs, mask, CAST: tl.constexpr, COMPUTE: tl.constexpr):
    v = tl.load(x + offs, mask=mask, other=0).to(CAST).to(COMPUTE)
    return tl.where(mask, v, float("-inf"))


@triton.jit
def _softmax_kernel(x, y, n_rows, n, kshape, kx, ky, sx, sy,
                    LOG: tl.constexpr, CAST: tl.constexpr, COMPUTE: tl.constexpr, KNDIM: tl.constexpr,
                    SINGLE: tl.constexpr, INT64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    if INT64:
        rows = rows.to(tl.int64)
    row_mask = rows < n_rows
    xo, yo = strided_offset2(rows, kshape, kx, ky, KNDIM)
    cols = tl.arange(0, BLOCK_N)
    if INT64:
        cols = cols.to(tl.int64)

    if SINGLE:
        mask = row_mask[:, None] & (cols < n)[None, :]
        v = _load_row_tile(x, xo[:, None] + cols[None, :] * sx, mask, CAST, COMPUTE)
        m = tl.max(v, 1)
        e = tl.where(mask, tl.exp(v - m[:, None]), 0.0)
        s = tl.sum(e, 1)
        if LOG:
            r = v - m[:, None] - tl.log(s)[:, None]
        else:
            r = e / s[:, None]
        tl.store(y + yo[:, None] + cols[None, :] * sy, r.to(y.dtype.element_ty), mask=mask)
    else:
        m = tl.full([BLOCK_M], float("-inf"), COMPUTE)
        s = tl.zeros([BLOCK_M], COMPUTE)
        for start in range(0, n, BLOCK_N):
            c = start + cols
            mask = row_mask[:, None] & (c < n)[None, :]
            v = _load_row_tile(x, xo[:, None] + c[None, :] * sx, mask, CAST, COMPUTE)
            m_new = tl.maximum(m, tl.max(v, 1))
            # exp(-inf - -inf) is NaN: while a row has seen only -inf, rescale against 0 instead.
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            e = tl.where(mask, tl.exp(v - m_safe[:, None]), 0.0)
            s = s * tl.exp(m - m_safe) + tl.sum(e, 1)
            m = m_new
        log_s = tl.log(s)
        for start in range(0, n, BLOCK_N):
            c = start + cols
            mask = row_mask[:, None] & (c < n)[None, :]
            v = _load_row_tile(x, xo[:, None] + c[None, :] * sx, mask, CAST, COMPUTE)
            if LOG:
                r = v - m[:, None] - log_s[:, None]
            else:
                r = tl.exp(v - m[:, None]) / s[:, None]
            tl.store(y + yo[:, None] + c[None, :] * sy, r.to(y.dtype.element_ty), mask=mask)


def softmax(out, x, dim: int, *, log: bool = False, cast=None) -> None:
    """out = (log_)softmax(x) along ``dim`` (normalized); ``out`` has ``x``'s shape, any strides.

    ``cast`` (a floating dtype) rounds the input to it first: PyTorch's ``dtype=`` argument.
    """
    shape = tuple(x.shape)
    n = shape[dim] if shape else 1
    n_rows = x.numel() // n if n else 0
    if x.numel() == 0:
        return
    kept = [d for d in range(len(shape)) if d != dim]
    kshape, (kx, ky), _ = collapse([shape[d] for d in kept], [x.stride(d) for d in kept],
                                   [out.stride(d) for d in kept])
    sx, sy = (x.stride(dim), out.stride(dim)) if shape else (1, 1)
    if kx[-1] == 1 and sx != 1:
        # The kept dim is the contiguous one (softmax over dim 0 of a row-major matrix): a tile
        # wide in rows makes each load a coalesced segment; long rows then take the chunked
        # schedule rather than a tall, uncoalesced single tile.
        block_m = min(next_pow2(n_rows), KEPT_CONTIG_BLOCK_M)
        block_n = max(1, min(next_pow2(n), TILE // block_m))
    else:
        block_n = next_pow2(n) if n <= MAX_SINGLE_N else CHUNK_N
        block_m = max(1, min(TILE // block_n, next_pow2(n_rows)))
    single = n <= block_n
    int64 = needs_int64(tuple(kshape) + (n,), tuple(kx) + (sx,), tuple(ky) + (sy,))
    cast = cast or x.dtype
    compute = FLOAT_COMPUTE_NAME[cast.name]
    elems = block_m * block_n

    launch(_softmax_kernel, (cdiv(n_rows, block_m),), x, out, n_rows, n, kshape, kx, ky, sx, sy,
           LOG=log, CAST=getattr(tl, cast.name), COMPUTE=getattr(tl, compute), KNDIM=len(kshape), SINGLE=single,
           INT64=int64, BLOCK_M=block_m, BLOCK_N=block_n,
           num_warps=4 if elems <= 2048 else (8 if elems <= 8192 else 16))
