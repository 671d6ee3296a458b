"""Sorting and searching along one dim: ``sort`` (values and indices) and ``searchsorted``.

Rows are the tensor seen as (O, N, I) (the sorted dim N in the middle, one stride each).

- ``_sort_kernel`` (``tl.sort``): a program sorts ROWS whole rows (one on the GPU, many in the
  interpreter), each row in one block. Each value
  becomes a 32-bit key that orders as the value does (floats: their bits, negatives with the
  magnitude bits flipped, -0.0 folded into +0.0, every NaN canonical and above +inf, as PyTorch
  orders them; descending flips the key) packed above its 32-bit position into one int64, so
  one ``tl.sort`` of int64s sorts by value and keeps ties in position order (a stable sort).
  Values are then gathered from the input at the sorted positions (bit-exact). Covers every
  dtype of at most 32 bits (fp16/bf16/fp32/int32/bool) and rows up to ``MAX_SORT_BLOCK``.
- the rest (fp64/int64 values, longer rows) is a merge sort: ``_rank_kernel`` sorts runs of
  RANK_TILE elements (element i goes to rank(i) = #{j: x_j before x_i} + #{j < i: x_j ties x_i}
  within its run: stable, exact for any dtype, one vectorized tile), then ``_merge_kernel``
  merges runs pairwise, log2(N / RANK_TILE) passes of one launch each.
- ``_searchsorted_kernel``: a branch-free binary search per value (ceil(log2(N+1)) steps).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime import dtype as dt
from ..runtime.dtype_policy import exact
from ..runtime.launch import launch
from ._common import INTERPRET, cdiv, elementwise_block, grid_1d, linear_index, next_pow2, per_mode

MAX_SORT_BLOCK = 2048
# The interpreter runs tl.sort's bitonic network through a generic reduce, element by element in
# Python (~25 us per element per stage: 17 s for 4 rows of 1024), while the rank kernel's tiles are
# NumPy-vectorized (64 rows of 1024 in ~2 s). In CPU mode tl.sort takes only small sorts (at most
# this many elements in all); the GPU takes it for every row that fits a block.
INTERP_SORT_ELEMS = 2048
# Rows sorted together by one program: the interpreter pays per operation of the bitonic network,
# not per element, so it sorts many rows at once; on the GPU one row per program.
SORT_TILE = per_mode(65536, 1)
RANK_TILE = per_mode(256, 64)


@triton.jit
def _key32(v, IS_FLOAT: tl.constexpr):
    if IS_FLOAT:
        f = v.to(tl.float32) + 0.0  # -0.0 -> +0.0
        bits = f.to(tl.int32, bitcast=True)
        bits = tl.where(f != f, 0x7FC00000, bits)  # one NaN, above +inf
        key = tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)
    elif v.dtype == tl.uint32:
        key = (v.to(tl.int64) - 2**31).to(tl.int32)  # shifted into int32's range, order kept (2**31 is not negative)
    else:
        key = v.to(tl.int32)
    return key


@triton.jit
def _sort_kernel(x, vals, idx, R, N, I, xs_o, xs_n, xs_i, DESC: tl.constexpr, IS_FLOAT: tl.constexpr,
                 ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)  # row r = (o, i)
    o = row // I
    i = row % I
    n = tl.arange(0, BLOCK_N)
    mask = (row < R)[:, None] & (n < N)[None, :]
    base = (o * xs_o + i * xs_i)[:, None]
    key = _key32(tl.load(x + base + n[None, :] * xs_n, mask=mask, other=0), IS_FLOAT)
    if DESC:
        key = ~key
    packed = (key.to(tl.int64) << 32) | n.to(tl.int64)[None, :]
    packed = tl.where(mask, packed, 0x7FFFFFFFFFFFFFFF)  # padding sorts last
    s = tl.sort(packed)  # along the last dim: each row on its own
    pos = s & 0xFFFFFFFF
    out = (o * N * I + i)[:, None] + n[None, :] * I  # (O, N, I) contiguous
    tl.store(idx + out, pos, mask=mask)
    tl.store(vals + out, tl.load(x + base + pos * xs_n, mask=mask), mask=mask)


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
    """Sort each run of TILE consecutive elements of a row by rank (the runs are merged after)."""
    pid = tl.program_id(0).to(tl.int64)
    row = pid // n_iblocks
    o = row // I
    i = row % I
    base = x + o * xs_o + i * xs_i
    start = (pid % n_iblocks) * TILE
    mine = start + tl.arange(0, TILE)
    mmask = mine < N
    raw = tl.load(base + mine * xs_n, mask=mmask)
    xi = raw.to(COMPUTE)
    xj = tl.load(base + mine * xs_n, mask=mmask, other=0).to(COMPUTE)
    a = xj[None, :]
    b = xi[:, None]
    tie = (a == b) | ((a != a) & (b != b))
    first = _before(a, b, DESC) | (tie & (mine[None, :] < mine[:, None]))
    rank = tl.sum((first & mmask[None, :]).to(tl.int64), axis=1)
    out = o * N * I + (start + rank) * I + i
    tl.store(idx + out, mine, mask=mmask)
    tl.store(vals + out, raw, mask=mmask)


@triton.jit(do_not_specialize=["W", "steps"])
def _merge_kernel(src_v, src_i, dst_v, dst_i, total, N, I, W, steps, DESC: tl.constexpr, COMPUTE: tl.constexpr,
                  BLOCK: tl.constexpr):
    """Merge sorted runs of W into runs of 2W (contiguous (O, N, I) rows): an element's new place is
    its place in its own run plus the number of elements of the partner run that go first (a
    binary search; on ties the left run goes first, which keeps the sort stable)."""
    lin = linear_index(BLOCK, True)
    mask = lin < total
    i = lin % I
    n = (lin // I) % N
    o = lin // (N * I)
    run = n // W
    left = run % 2 == 0
    other = tl.where(left, run + 1, run - 1) * W
    other_len = tl.maximum(tl.minimum(other + W, N) - other, 0)
    row = o * N * I + i
    raw = tl.load(src_v + lin, mask=mask)
    x = raw.to(COMPUTE)
    lo = tl.zeros_like(lin)
    hi = other_len
    for _ in range(steps):
        active = lo < hi
        mid = (lo + hi) // 2
        y = tl.load(src_v + row + (other + mid) * I, mask=mask & active, other=0).to(COMPUTE)
        take = tl.where(left, _before(y, x, DESC), _before(x, y, DESC) == 0)
        lo = tl.where(active & take, mid + 1, lo)
        hi = tl.where(active & (take == 0), mid, hi)
    dst = row + ((run // 2) * 2 * W + (n - run * W) + lo) * I
    tl.store(dst_v + dst, raw, mask=mask)
    tl.store(dst_i + dst, tl.load(src_i + lin, mask=mask), mask=mask)


def _uses_tl_sort(itemsize: int, dims) -> bool:
    O, N, I = dims
    small = itemsize <= 4 and N <= MAX_SORT_BLOCK
    return small and (not INTERPRET or O * I * next_pow2(N) <= INTERP_SORT_ELEMS)


def merge_passes(itemsize: int, dims) -> int:
    """How many merge passes ``sort`` makes for this case (a scratch pair is needed when > 0)."""
    if dims[0] * dims[1] * dims[2] == 0 or _uses_tl_sort(itemsize, dims):
        return 0
    N = dims[1]
    return (cdiv(N, min(RANK_TILE, next_pow2(N))) - 1).bit_length()


def sort(vals, idx, x, dims, x_strides, descending: bool, scratch=None) -> None:
    """vals/idx (contiguous (O, N, I)) = x sorted along N, stably; ``x`` read through ``x_strides``.
    ``scratch``: a second (vals, idx) pair, needed when ``merge_passes(...)`` > 0."""
    O, N, I = dims
    if O * N * I == 0:
        return
    block_n = next_pow2(N)
    if _uses_tl_sort(x.dtype.itemsize, dims):
        rows = min(next_pow2(O * I), max(1, SORT_TILE // block_n))
        launch(_sort_kernel, (cdiv(O * I, rows),), x, vals, idx, O * I, N, I, *x_strides,
               DESC=bool(descending), IS_FLOAT=x.dtype.is_floating_point, ROWS=rows, BLOCK_N=block_n)
        return
    # Runs of ``tile`` sorted by rank, then merged pairwise (log2(N / tile) passes), ping-ponging
    # between the outputs and the scratch pair so that the last pass lands in the outputs.
    tile = min(RANK_TILE, block_n)
    n_runs = cdiv(N, tile)
    passes = merge_passes(x.dtype.itemsize, dims)
    bufs = [(vals, idx), scratch]
    compute = getattr(tl, exact(x.dtype).name)
    first = bufs[passes % 2]
    launch(_rank_kernel, (O * I * n_runs,), x, first[0], first[1], N, I, n_runs, *x_strides, DESC=bool(descending),
           COMPUTE=compute, TILE=tile)
    total = O * N * I
    block = elementwise_block(total)
    w = tile
    for p in range(passes):
        src, dst = bufs[(passes - p) % 2], bufs[(passes - p - 1) % 2]
        launch(_merge_kernel, grid_1d(total, block), src[0], src[1], dst[0], dst[1], total, N, I, w,
               max(1, w.bit_length()), DESC=bool(descending), COMPUTE=compute, BLOCK=block)
        w *= 2


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
    compute = getattr(tl, exact(dt.promote_types(seq.dtype, values.dtype)).name)
    block = elementwise_block(n)
    launch(_searchsorted_kernel, grid_1d(n, block), seq, values, out, n, N, V, max(1, int(N).bit_length()),
           RIGHT=bool(right), COMPUTE=compute, BLOCK=block)
