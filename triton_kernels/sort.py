"""Sorting and searching along one dim: ``sort`` (values and indices) and ``searchsorted``.

Rows are the tensor seen as (O, N, I) (the sorted dim N in the middle, one stride each).

- ``_sort_kernel`` (``tl.sort``): one program per row, the whole row in one block. Each value
  becomes a 32-bit key that orders as the value does (floats: their bits, negatives with the
  magnitude bits flipped, -0.0 folded into +0.0, every NaN canonical and above +inf, as PyTorch
  orders them; descending flips the key) packed above its 32-bit position into one int64, so
  one ``tl.sort`` of int64s sorts by value and keeps ties in position order (a stable sort).
  Values are then gathered from the input at the sorted positions (bit-exact). Covers every
  dtype of at most 32 bits (fp16/bf16/fp32/int32/bool) and rows up to ``MAX_SORT_BLOCK``.
- ``_rank_kernel``: the rest (fp64/int64 values, longer rows). Element i goes to position
  rank(i) = #{j: x_j before x_i} + #{j < i: x_j ties x_i}, counted over tiles of the row: stable,
  exact for any dtype, but O(N^2) work per row (a merge of sorted blocks would do better for
  long rows; not written yet).
- ``_searchsorted_kernel``: a branch-free binary search per value (ceil(log2(N+1)) steps).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import launch
from ._common import INTERPRET, elementwise_block, grid_1d, linear_index

MAX_SORT_BLOCK = 16384 if INTERPRET else 2048
RANK_TILE = 256 if INTERPRET else 64


@triton.jit
def _key32(v, IS_FLOAT: tl.constexpr):
    if IS_FLOAT:
        f = v.to(tl.float32) + 0.0  # -0.0 -> +0.0
        bits = f.to(tl.int32, bitcast=True)
        bits = tl.where(f != f, 0x7FC00000, bits)  # one NaN, above +inf
        key = tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)
    else:
        key = v.to(tl.int32)
    return key


@triton.jit
def _sort_kernel(x, vals, idx, N, I, xs_o, xs_n, xs_i, DESC: tl.constexpr, IS_FLOAT: tl.constexpr,
                 BLOCK_N: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    o = pid // I
    i = pid % I
    n = tl.arange(0, BLOCK_N)
    mask = n < N
    base = x + o * xs_o + i * xs_i
    key = _key32(tl.load(base + n * xs_n, mask=mask, other=0), IS_FLOAT)
    if DESC:
        key = ~key
    packed = (key.to(tl.int64) << 32) | n.to(tl.int64)
    packed = tl.where(mask, packed, 0x7FFFFFFFFFFFFFFF)  # padding sorts last
    s = tl.sort(packed)
    pos = s & 0xFFFFFFFF
    out = o * N * I + n * I + i  # (O, N, I) contiguous
    tl.store(idx + out, pos, mask=mask)
    tl.store(vals + out, tl.load(base + pos * xs_n, mask=mask), mask=mask)


@triton.jit
def _before(a, b, DESC: tl.constexpr):
    """a sorts strictly before b (NaN after every number ascending, before every number descending)."""
    if DESC:
        r = (a > b) | ((a != a) & (b == b))
    else:
        r = (a < b) | ((b != b) & (a == a))
    return r


@triton.jit
def _rank_kernel(x, vals, idx, N, I, n_iblocks, xs_o, xs_n, xs_i, DESC: tl.constexpr, COMPUTE: tl.constexpr,
                 TILE: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    row = pid // n_iblocks
    o = row // I
    i = row % I
    base = x + o * xs_o + i * xs_i
    mine = (pid % n_iblocks) * TILE + tl.arange(0, TILE)
    mmask = mine < N
    raw = tl.load(base + mine * xs_n, mask=mmask)
    xi = raw.to(COMPUTE)
    rank = tl.zeros((TILE,), tl.int64)
    for start in range(0, N, TILE):
        j = start + tl.arange(0, TILE)
        jmask = j < N
        xj = tl.load(base + j * xs_n, mask=jmask, other=0).to(COMPUTE)
        a = xj[None, :]
        b = xi[:, None]
        tie = (a == b) | ((a != a) & (b != b))
        first = _before(a, b, DESC) | (tie & (j[None, :] < mine[:, None]))
        rank += tl.sum((first & jmask[None, :]).to(tl.int64), axis=1)
    out = o * N * I + rank * I + i
    tl.store(idx + out, mine, mask=mmask)
    tl.store(vals + out, raw, mask=mmask)


def sort(vals, idx, x, dims, x_strides, descending: bool) -> None:
    """vals/idx (contiguous (O, N, I)) = x sorted along N, stably; ``x`` read through ``x_strides``."""
    O, N, I = dims
    if O * N * I == 0:
        return
    small = x.dtype.itemsize <= 4 and N <= MAX_SORT_BLOCK
    if small:
        launch(_sort_kernel, (O * I,), x, vals, idx, N, I, *x_strides, DESC=bool(descending),
               IS_FLOAT=x.dtype.is_floating_point, BLOCK_N=triton.next_power_of_2(N))
        return
    tile = min(RANK_TILE, triton.next_power_of_2(N))
    n_iblocks = triton.cdiv(N, tile)
    compute = tl.float64 if x.dtype.is_floating_point else tl.int64
    launch(_rank_kernel, (O * I * n_iblocks,), x, vals, idx, N, I, n_iblocks, *x_strides, DESC=bool(descending),
           COMPUTE=compute, TILE=tile)


@triton.jit
def _searchsorted_kernel(seq, values, out, n, N, V, steps, RIGHT: tl.constexpr, COMPUTE: tl.constexpr,
                         BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, True)
    mask = lin < n
    row = lin // V
    v = tl.load(values + lin, mask=mask, other=0).to(COMPUTE)
    lo = tl.zeros((BLOCK,), tl.int64)
    hi = tl.zeros((BLOCK,), tl.int64) + N
    for _ in range(steps):
        active = lo < hi
        mid = (lo + hi) // 2
        s = tl.load(seq + row * N + mid, mask=mask & active, other=0).to(COMPUTE)
        if RIGHT:
            go = (s <= v) | ((s == s) & (v != v))
        else:
            go = (s < v) | ((s == s) & (v != v))  # NaN values go after every number
        lo = tl.where(active & go, mid + 1, lo)
        hi = tl.where(active & (go == 0), mid, hi)
    tl.store(out + lin, lo.to(out.dtype.element_ty), mask=mask)


def searchsorted(out, seq, values, right: bool) -> None:
    """out[r, v] = insertion point of values[r, v] in the sorted row seq[r] (all contiguous;
    seq (R, N), values and out (R, V))."""
    n = values.numel()
    if n == 0:
        return
    N = seq.shape[-1]
    V = values.shape[-1] if values.ndim else 1
    floating = seq.dtype.is_floating_point or values.dtype.is_floating_point
    compute = tl.float64 if floating else tl.int64  # exact for every input dtype
    block = elementwise_block(n)
    launch(_searchsorted_kernel, grid_1d(n, block), seq, values, out, n, N, V, max(1, int(N).bit_length()),
           RIGHT=bool(right), COMPUTE=compute, BLOCK=block)
