"""Scans along one dim: ``cumsum`` (``tl.cumsum``), ``cumprod`` (``tl.cumprod``), ``logcumsumexp``
and ``cummax``/``cummin`` (``tl.associative_scan``; the extremes scan (value, position) pairs, a
later element winning ties and NaN winning, as torch's). The interpreter runs ``tl.cumsum`` and
``tl.cumprod`` with NumPy but a custom combine function element by element in Python: those are
slow in CPU mode (not on the GPU).

The core entries (``core/ops/scan.py``) present the tensor as (O, N, I): O = the dims before the
scanned one, N = the scanned dim, I = the dims after it, each with one stride, so a strided input
is read in place whenever those three strides describe it. One program takes one o and BLOCK_I
columns of I, and walks N in chunks of BLOCK_N. Each chunk is scanned and combined with the carry
of the chunks before it: for a sum, the chunk's scan plus the running total, which then grows by
the chunk's ``tl.sum``; otherwise the scan's last row is the next carry (masked lanes hold the
operation's identity: 1 for prod, -inf for logaddexp). ``REVERSE`` walks N from its end (the
derivative of cumsum is the reversed cumsum of the gradient). Values are loaded, combined and
carried in ``ACC`` (fp32 for fp16/bf16/fp32, fp64 for fp64, int64 for integer sums and products)
and cast on store.
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
def _logaddexp(a, b):
    hi = tl.maximum(a, b)
    lo = tl.minimum(a, b)
    r = hi + tl.log(1.0 + tl.exp(lo - hi))
    r = tl.where(lo == float("-inf"), hi, r)  # also -inf + -inf = -inf, without inf - inf = nan
    r = tl.where(hi == float("inf"), hi, r)
    return tl.where((a != a) | (b != b), a + b, r)  # nan propagates


@triton.jit
def _max_last(v1, i1, v2, i2):
    """cummax's combine: the later element where it is >= (ties move the index on) or NaN."""
    take = (v2 >= v1) | (v2 != v2)
    return tl.where(take, v2, v1), tl.where(take, i2, i1)


@triton.jit
def _min_last(v1, i1, v2, i2):
    take = (v2 <= v1) | (v2 != v2)
    return tl.where(take, v2, v1), tl.where(take, i2, i1)


@triton.jit
def _scan_kernel(out, idx, x, N, I, n_iblocks, xs_o, xs_n, xs_i, os_o, os_n, os_i,
                 OP: tl.constexpr, REVERSE: tl.constexpr, ACC: tl.constexpr, INT64: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_I: tl.constexpr):
    pid = tl.program_id(0)
    if INT64:
        pid = pid.to(tl.int64)
    o = pid // n_iblocks
    cols = (pid % n_iblocks) * BLOCK_I + tl.arange(0, BLOCK_I)
    cmask = cols < I
    if OP == "prod":
        carry = tl.full((BLOCK_I,), 1, ACC)
    elif OP == "logcumsumexp":
        carry = tl.full((BLOCK_I,), float("-inf"), ACC)
    else:  # sum; cummax/cummin do not read it before the first chunk has set it
        carry = tl.zeros((BLOCK_I,), ACC)
    carry_i = tl.zeros((BLOCK_I,), tl.int64)
    for start in range(0, N, BLOCK_N):
        k = start + tl.arange(0, BLOCK_N)
        if REVERSE:
            n = N - 1 - k
        else:
            n = k
        mask = (k < N)[:, None] & cmask[None, :]
        ptr = x + o * xs_o + n[:, None] * xs_n + cols[None, :] * xs_i
        if OP == "sum":
            v = tl.load(ptr, mask=mask, other=0).to(ACC)
            c = tl.cumsum(v, axis=0) + carry[None, :]
            carry += tl.sum(v, axis=0)
        elif OP == "prod":
            v = tl.load(ptr, mask=mask, other=1).to(ACC)
            c = tl.cumprod(v, 0) * carry[None, :]
        elif OP == "cummax" or OP == "cummin":
            # Masked lanes come after every valid one (or are columns past I): whatever they
            # hold is never stored, and no identity is needed: the first chunk takes no carry.
            v = tl.load(ptr, mask=mask, other=0).to(ACC)
            pos = tl.broadcast_to(n[:, None].to(tl.int64), (BLOCK_N, BLOCK_I))
            if OP == "cummax":
                c, ci = tl.associative_scan((v, pos), 0, _max_last)
                cc, cci = _max_last(carry[None, :], carry_i[None, :], c, ci)
            else:
                c, ci = tl.associative_scan((v, pos), 0, _min_last)
                cc, cci = _min_last(carry[None, :], carry_i[None, :], c, ci)
            c = tl.where(start > 0, cc, c)
            ci = tl.where(start > 0, cci, ci)
            last_i = (tl.arange(0, BLOCK_N) == BLOCK_N - 1)[:, None]
            carry_i = tl.sum(tl.where(last_i, ci, 0), axis=0)
            tl.store(idx + o * os_o + n[:, None] * os_n + cols[None, :] * os_i, ci, mask=mask)
        else:
            tl.static_assert(OP == "logcumsumexp")
            v = tl.load(ptr, mask=mask, other=float("-inf")).to(ACC)
            c = _logaddexp(tl.associative_scan(v, 0, _logaddexp), carry[None, :])
        if OP != "sum":  # the new carry: the scan's last row (masked lanes hold the identity)
            last = (tl.arange(0, BLOCK_N) == BLOCK_N - 1)[:, None]
            carry = tl.sum(tl.where(last, c, 0), axis=0)
        tl.store(out + o * os_o + n[:, None] * os_n + cols[None, :] * os_i, c.to(out.dtype.element_ty), mask=mask)


def tiling(dims, x_strides, out_strides):
    """The (O, N, I) scan layout's launch: ``(grid, n_iblocks, meta)``."""
    O, N, I = dims
    block_n = min(next_pow2(N), MAX_BLOCK_N)
    block_i = min(next_pow2(I), max(1, MAX_TILE // block_n))
    n_iblocks = cdiv(I, block_i)
    int64 = needs_int64(dims, x_strides, out_strides) or O * n_iblocks >= 2**31 - 1
    return (O * n_iblocks,), n_iblocks, dict(INT64=int64, BLOCK_N=block_n, BLOCK_I=block_i)


def scan(op: str, out, x, dims, x_strides, out_strides, acc: str, reverse: bool = False, idx=None) -> None:
    """out[o, n, i] = op-scan of x[o, :n+1, i] (``reverse``: of x[o, n:, i]); (O, N, I) = ``dims``;
    ``op``: "sum", "prod", "logcumsumexp", "cummax" or "cummin". cummax/cummin also write ``idx`` (int64, ``out``'s strides): where each running extreme is."""
    O, N, I = dims
    if O * N * I == 0:
        return
    grid, n_iblocks, meta = tiling(dims, x_strides, out_strides)
    launch(_scan_kernel, grid, out, out if idx is None else idx, x, N, I, n_iblocks, *x_strides, *out_strides,
           OP=op, REVERSE=bool(reverse), ACC=getattr(tl, acc), **meta)
