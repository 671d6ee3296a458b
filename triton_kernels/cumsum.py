"""cumsum: the inclusive prefix sum along one dim, forwards or backwards (``tl.cumsum``).

The core entry (``core/ops/cumsum.py``) presents the tensor as (O, N, I): O = the dims before
the scanned one, N = the scanned dim, I = the dims after it, each with one stride, so a strided
input is read in place whenever those three strides describe it. One program takes one o and
BLOCK_I columns of I, and walks N in chunks of BLOCK_N, scanning each chunk with ``tl.cumsum``
and carrying the running total into the next. ``REVERSE`` walks N from its end (the derivative
of cumsum is the reversed cumsum of the gradient). Values are loaded, summed and carried in
``ACC`` (fp32 for fp16/bf16/fp32, fp64 for fp64, int64 for integers) and cast on store.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import launch
from ._common import cdiv, needs_int64, next_pow2, per_mode

# The interpreter pays per program and per loop trip, not per element: wide tiles.
MAX_TILE = per_mode(65536, 2048)
MAX_BLOCK_N = per_mode(1024, 64)


@triton.jit
def _cumsum_kernel(out, x, N, I, n_iblocks, xs_o, xs_n, xs_i, os_o, os_n, os_i,
                   REVERSE: tl.constexpr, ACC: tl.constexpr, INT64: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_I: tl.constexpr):
    pid = tl.program_id(0)
    if INT64:
        pid = pid.to(tl.int64)
    o = pid // n_iblocks
    cols = (pid % n_iblocks) * BLOCK_I + tl.arange(0, BLOCK_I)
    cmask = cols < I
    carry = tl.zeros((BLOCK_I,), ACC)
    for start in range(0, N, BLOCK_N):
        k = start + tl.arange(0, BLOCK_N)
        if REVERSE:
            n = N - 1 - k
        else:
            n = k
        mask = (k < N)[:, None] & cmask[None, :]
        v = tl.load(x + o * xs_o + n[:, None] * xs_n + cols[None, :] * xs_i, mask=mask, other=0).to(ACC)
        c = tl.cumsum(v, axis=0) + carry[None, :]
        tl.store(out + o * os_o + n[:, None] * os_n + cols[None, :] * os_i, c.to(out.dtype.element_ty), mask=mask)
        carry += tl.sum(v, axis=0)


def tiling(dims, x_strides, out_strides):
    """The (O, N, I) scan layout's launch: ``(grid, n_iblocks, meta)`` for a kernel taking
    ``INT64``, ``BLOCK_N`` and ``BLOCK_I`` (cumsum here, cumprod/logcumsumexp in ``scan.py``)."""
    O, N, I = dims
    block_n = min(next_pow2(N), MAX_BLOCK_N)
    block_i = min(next_pow2(I), max(1, MAX_TILE // block_n))
    n_iblocks = cdiv(I, block_i)
    int64 = needs_int64(dims, x_strides, out_strides) or O * n_iblocks >= 2**31 - 1
    return (O * n_iblocks,), n_iblocks, dict(INT64=int64, BLOCK_N=block_n, BLOCK_I=block_i)


def cumsum(out, x, dims, x_strides, out_strides, acc: str, reverse: bool) -> None:
    """out[o, n, i] = sum of x[o, :n+1, i] (``reverse``: of x[o, n:, i]); (O, N, I) = ``dims``."""
    O, N, I = dims
    if O * N * I == 0:
        return
    grid, n_iblocks, meta = tiling(dims, x_strides, out_strides)
    launch(_cumsum_kernel, grid, out, x, N, I, n_iblocks, *x_strides, *out_strides,
           REVERSE=bool(reverse), ACC=getattr(tl, acc), **meta)
