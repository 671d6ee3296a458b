"""Reduction kernels: sum, mean, prod, max/min (values and first indices), var/std, all/any, and
the xor of hash_tensor.

Every reduction is one problem shape: ``rows x reduced``. The caller names the reduced dims;
the launcher lists the kept dims (in order, so a flat row index is the row-major index of the
contiguous output) and the reduced dims, and collapses each group where memory allows. The
kernel never copies the input: it reads it through the two groups' strides, so transposed,
sliced and expanded (stride 0) inputs cost nothing extra.

A program owns ``BLOCK_M`` rows and walks the reduced extent in ``BLOCK_N``-wide chunks of a
2-D tile, accumulating in fp32 (fp64 for fp64, int64 for integer sums): sums, products and
all/any lane by lane across the chunks, reduced across lanes once at the end. A contiguous reduced
extent (the common last-dim case) is indexed without any div/mod. When there are too few
rows to fill the machine and the reduced extent is long, the extent is split over
``grid[1]`` programs that write partial states, and a second small kernel combines them
(sums add, extremes keep the first winner, variances merge with Chan's formula).

Numerics, identical in both stages:
- var/std: values are shifted by the slice's first element (constant rows give exactly 0);
  each chunk's mean and sum of squared deviations are computed exactly in the tile (two
  passes over registers), then merged into the running state with Chan et al.'s parallel
  formula. That is stable where E[x^2] - E[x]^2 is not, and reads the input once.
- max/min: NaN wins (like PyTorch); the index is the first occurrence. ``tl.max`` of floats
  ignores NaN on the GPU but not in the interpreter, so NaN is tracked explicitly: both
  modes give the same answer.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime import dtype as dt
from ..runtime.dtype_policy import reduce_accumulator
from ..runtime.launch import Site, launch
from ._common import cdiv, collapse, f64_bits, load_f64_scalar, needs_int64, next_pow2, per_mode, strided_offset

OPS = ("sum", "mean", "prod", "max", "min", "var", "std", "all", "any", "xor")

# Elements one program holds per chunk. The interpreter pays per program and per op, not per
# element: one wide tile. The GPU wants tiles that fit registers.
TILE = per_mode(32768, 4096)
MAX_BLOCK_N = per_mode(32768, 2048)
# Rows per tile when the kept dim, not the reduced one, is contiguous in memory.
KEPT_CONTIG_BLOCK_M = per_mode(1024, 128)
# Split the reduced extent over several programs when rows are this few and the extent this
# long (the GPU would otherwise run a handful of programs on 132 SMs). The interpreter gains
# nothing from it, but uses small thresholds so the tests exercise the split path.
SPLIT_MAX_ROWS = per_mode(4, 128)
SPLIT_MIN_LEN = per_mode(4096, 32768)
SPLIT_BLOCK_N = 2048
SPLIT_TARGET = per_mode(4, 1024)  # total programs (rows x splits) to aim for

_TL = {dt.float16: tl.float16, dt.bfloat16: tl.bfloat16, dt.float32: tl.float32, dt.float64: tl.float64,
       dt.uint8: tl.uint8, dt.int8: tl.int8, dt.int16: tl.int16, dt.int32: tl.int32, dt.int64: tl.int64,
       dt.bool_: tl.int1, dt.uint16: tl.uint16, dt.uint32: tl.uint32, dt.uint64: tl.uint64}


def _extremes(acc: dt.dtype):
    if acc.is_floating_point:
        return float("-inf"), float("inf")
    bits = 8 * acc.itemsize
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


# --------------------------------------------------------------------------------------------
# Device helpers
# --------------------------------------------------------------------------------------------
@triton.jit
def _mul(a, b):
    return a * b


@triton.jit
def _xor(a, b):
    return a ^ b


@triton.jit
def _col_offsets(cols, rshape, rstrides, RNDIM: tl.constexpr, RCONTIG: tl.constexpr):
    if RCONTIG:
        off = cols
    elif RNDIM == 1:
        off = cols * rstrides[0]
    else:
        off = strided_offset(cols, rshape, rstrides, RNDIM)
    return off


@triton.jit
def _tile_extreme(v, mask, idx, SENTINEL: tl.constexpr, IS_MAX: tl.constexpr, IS_FLOAT: tl.constexpr,
                  BIG_INDEX: tl.constexpr):
    """Per-row extreme of a tile and the smallest ``idx`` where it occurs (NaN wins)."""
    v = tl.where(mask, v, SENTINEL)
    if IS_FLOAT:
        isnan = v != v
        clean = tl.where(isnan, SENTINEL, v)
        has_nan = tl.max(isnan.to(tl.int32), 1) > 0
        if IS_MAX:
            best = tl.max(clean, 1)
        else:
            best = tl.min(clean, 1)
        best = tl.where(has_nan, float("nan"), best)
        hit = (v == best[:, None]) | (isnan & has_nan[:, None])
    else:
        if IS_MAX:
            best = tl.max(v, 1)
        else:
            best = tl.min(v, 1)
        hit = v == best[:, None]
    first = tl.min(tl.where(hit & mask, idx, BIG_INDEX), 1)
    return best, first


@triton.jit
def _better(new, old, IS_MAX: tl.constexpr, IS_FLOAT: tl.constexpr):
    """Does ``new`` replace ``old``? Strictly better only, so the earlier index is kept on ties."""
    if IS_MAX:
        b = new > old
    else:
        b = new < old
    if IS_FLOAT:
        b = b | ((new != new) & (old == old))
    return b


@triton.jit
def _finalize(acc, m2, n_red, corr_bits, OP: tl.constexpr):
    """Turn an accumulator into the op's value: mean divides, var/std apply the correction."""
    if OP == "mean":
        r = acc / n_red
    elif OP == "var" or OP == "std":
        corr = load_f64_scalar(corr_bits).to(m2.dtype)
        r = m2 / tl.maximum(n_red - corr, 0.0)
        if OP == "std":
            r = tl.sqrt(r)
    else:
        r = acc
    return r


@triton.jit
def _store(ptr, offs, r, mask):
    if ptr.dtype.element_ty == tl.int1:
        r = r != 0
    tl.store(ptr + offs, r.to(ptr.dtype.element_ty), mask=mask)


# --------------------------------------------------------------------------------------------
# Stage 1: rows x (a slice of) the reduced extent
# --------------------------------------------------------------------------------------------
@triton.jit(do_not_specialize=["corr_bits"])
def _reduce_kernel(x, out, out2, n_rows, n_red, split_len, kshape, kstrides, rshape, rstrides, corr_bits,
                   OP: tl.constexpr, CAST: tl.constexpr, ACC: tl.constexpr, SENTINEL: tl.constexpr,
                   STORE_VALUES: tl.constexpr, STORE_INDEX: tl.constexpr, SPLIT: tl.constexpr,
                   KNDIM: tl.constexpr, RNDIM: tl.constexpr, RCONTIG: tl.constexpr, INT64: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    IS_FLOAT: tl.constexpr = ACC.is_floating()
    IS_MAX: tl.constexpr = OP == "max"
    EXTREME: tl.constexpr = (OP == "max") or (OP == "min")
    VARIANCE: tl.constexpr = (OP == "var") or (OP == "std")
    BIG_INDEX: tl.constexpr = 2**62

    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    split = tl.program_id(1)
    if INT64:
        rows = rows.to(tl.int64)
        split = split.to(tl.int64)
    row_mask = rows < n_rows
    row_off = strided_offset(rows, kshape, kstrides, KNDIM)
    lo = split * split_len
    hi = tl.minimum(lo + split_len, n_red)

    # sum, mean, prod, all, any fold each chunk into a tile of lane-wise partials and reduce the
    # tile across lanes once, after the loop (a cross-lane reduction per chunk costs a barrier
    # and shuffles for every BLOCK_N elements read: the GPU then waits instead of streaming).
    LANEWISE: tl.constexpr = ((OP == "sum") or (OP == "mean") or (OP == "prod") or (OP == "all") or (OP == "any")
                              or (OP == "xor"))
    if EXTREME:
        acc = tl.full([BLOCK_M], SENTINEL, ACC)
    elif OP == "prod" or OP == "all":
        acc = tl.full([BLOCK_M], 1, ACC)
    else:
        acc = tl.zeros([BLOCK_M], ACC)
    if LANEWISE:
        lanes = tl.full([BLOCK_M, BLOCK_N], 1 if (OP == "prod" or OP == "all") else 0, ACC)
    m2 = tl.zeros([BLOCK_M], ACC)
    idx = tl.zeros([BLOCK_M], tl.int64) + lo
    if VARIANCE:
        # Work on x - (the slice's first element): a constant row gives exactly 0 (as Welford
        # does), and a large mean no longer eats the chunk sums' precision.
        first = tl.zeros([BLOCK_M], tl.int32) + lo
        first_off = _col_offsets(first, rshape, rstrides, RNDIM, RCONTIG)
        pivot = tl.load(x + row_off + first_off, mask=row_mask & (first < hi), other=0).to(CAST).to(ACC)

    for start in range(lo, hi, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = row_mask[:, None] & (cols < hi)[None, :]
        ptrs = x + row_off[:, None] + _col_offsets(cols, rshape, rstrides, RNDIM, RCONTIG)[None, :]
        if OP == "xor":
            # hash_tensor: each element widened to its 64-bit kind (CAST) and its bits taken as uint64
            v = tl.load(ptrs, mask=mask, other=0).to(CAST).to(ACC, bitcast=True)
        else:
            v = tl.load(ptrs, mask=mask, other=0).to(CAST).to(ACC)
        if OP == "sum" or OP == "mean":
            lanes += tl.where(mask, v, 0)
        elif OP == "xor":
            lanes ^= tl.where(mask, v, 0)
        elif OP == "prod":
            lanes *= tl.where(mask, v, 1)
        elif OP == "all":
            lanes = tl.minimum(lanes, tl.where(mask, v != 0, 1).to(ACC))
        elif OP == "any":
            lanes = tl.maximum(lanes, tl.where(mask, v != 0, 0).to(ACC))
        elif EXTREME:
            best, first = _tile_extreme(v, mask, cols[None, :].to(tl.int64), SENTINEL, IS_MAX, IS_FLOAT, BIG_INDEX)
            take = _better(best, acc, IS_MAX, IS_FLOAT)
            acc = tl.where(take, best, acc)
            idx = tl.where(take, first, idx)
        else:
            tl.static_assert(VARIANCE)
            nb = tl.minimum(hi - start, BLOCK_N).to(ACC)
            na = (start - lo).to(ACC)
            v = tl.where(mask, v - pivot[:, None], 0)
            mean_b = tl.sum(v, 1) / nb
            d = tl.where(mask, v - mean_b[:, None], 0)
            m2_b = tl.sum(d * d, 1)
            delta = mean_b - acc
            n = na + nb
            acc += delta * (nb / n)
            m2 += m2_b + delta * delta * (na * nb / n)
    if VARIANCE:
        acc += pivot  # the running mean was of the shifted values
    if OP == "sum" or OP == "mean":
        acc = tl.sum(lanes, 1)
    elif OP == "prod":
        acc = tl.reduce(lanes, 1, _mul)
    elif OP == "all":
        acc = tl.min(lanes, 1)
    elif OP == "any":
        acc = tl.max(lanes, 1)
    elif OP == "xor":
        acc = tl.reduce(lanes, 1, _xor)

    if SPLIT:
        # Partial states, row-major [row, split]: combined by _combine_kernel.
        nsplit = tl.num_programs(1)
        poff = rows * nsplit + split
        tl.store(out + poff, acc, mask=row_mask)
        if EXTREME:
            tl.store(out2 + poff, idx, mask=row_mask)
        elif VARIANCE:
            tl.store(out2 + poff, m2, mask=row_mask)
    else:
        if STORE_VALUES:
            _store(out, rows, _finalize(acc, m2, n_red, corr_bits, OP), row_mask)
        if STORE_INDEX:
            tl.store(out2 + rows, idx, mask=row_mask)


# --------------------------------------------------------------------------------------------
# Stage 2: combine [rows, nsplit] partial states
# --------------------------------------------------------------------------------------------
@triton.jit(do_not_specialize=["corr_bits"])
def _combine_kernel(p0, p1, out, out2, n_rows, nsplit, split_len, n_red, corr_bits,
                    OP: tl.constexpr, ACC: tl.constexpr, SENTINEL: tl.constexpr, STORE_VALUES: tl.constexpr,
                    STORE_INDEX: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_S: tl.constexpr):
    IS_FLOAT: tl.constexpr = ACC.is_floating()
    IS_MAX: tl.constexpr = OP == "max"
    EXTREME: tl.constexpr = (OP == "max") or (OP == "min")
    VARIANCE: tl.constexpr = (OP == "var") or (OP == "std")

    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < n_rows
    s = tl.arange(0, BLOCK_S).to(tl.int64)
    mask = row_mask[:, None] & (s < nsplit)[None, :]
    offs = rows[:, None] * nsplit + s[None, :]
    part = tl.load(p0 + offs, mask=mask, other=0)
    m2 = tl.zeros([BLOCK_M], ACC)
    idx = tl.zeros([BLOCK_M], tl.int64)
    if OP == "sum" or OP == "mean":
        acc = tl.sum(tl.where(mask, part, 0), 1)
    elif OP == "prod":
        acc = tl.reduce(tl.where(mask, part, 1), 1, _mul)
    elif OP == "all":
        acc = tl.min(tl.where(mask, part, 1), 1)
    elif OP == "any":
        acc = tl.max(tl.where(mask, part, 0), 1)
    elif OP == "xor":
        acc = tl.reduce(tl.where(mask, part, 0), 1, _xor)
    elif EXTREME:
        # Splits are in index order, so the first winning split holds the first winning index.
        acc, first = _tile_extreme(part, mask, s[None, :], SENTINEL, IS_MAX, IS_FLOAT, 2**62)
        pidx = tl.load(p1 + offs, mask=mask, other=0)
        idx = tl.sum(tl.where(s[None, :] == first[:, None], pidx, 0), 1)
    else:
        tl.static_assert(VARIANCE)
        pm2 = tl.load(p1 + offs, mask=mask, other=0)
        cnt = tl.minimum(split_len, n_red - s * split_len).to(ACC)
        cnt = tl.where(s < nsplit, cnt, 0)
        acc = tl.sum(tl.where(mask, part * cnt[None, :], 0), 1) / n_red
        d = tl.where(mask, part - acc[:, None], 0)
        m2 = tl.sum(tl.where(mask, pm2, 0), 1) + tl.sum(cnt[None, :] * d * d, 1)
    if STORE_VALUES:
        _store(out, rows, _finalize(acc, m2, n_red, corr_bits, OP), row_mask)
    if STORE_INDEX:
        tl.store(out2 + rows, idx, mask=row_mask)


# --------------------------------------------------------------------------------------------
# Launcher
# --------------------------------------------------------------------------------------------
_ONE_BITS = f64_bits(1.0)  # the correction every reduction but var/std passes


def _pow2(n: int) -> int:
    return next_pow2(max(1, n))


def _num_warps(elems: int) -> int:
    return 4 if elems <= 2048 else 8


def reduce(op: str, x, dims, out=None, indices=None, *, cast=None, correction: float = 1.0) -> None:
    """Reduce ``x`` over ``dims`` (sorted, normalized) into ``out`` and/or ``indices``.

    ``out``/``indices`` are contiguous with the kept dims' shape (keepdim is the caller's view).
    ``cast`` (a dtype) rounds every input element to it before accumulating, which is what
    PyTorch's ``dtype=`` argument means. ``indices`` (int64) only for max/min: the first index
    of the extreme within the flattened reduced dims. ``correction`` only for var/std. The
    launch geometry is planned once per (op, layout, dims, outputs, dtypes) and kept.
    """
    if op not in OPS:
        raise ValueError(f"reduce: unknown op {op!r}; expected one of {OPS}")
    cast = cast or x.dtype
    key = (op, x._shape, x._stride, tuple(dims), out is not None, indices is not None, cast)
    plan = _plans.get(key)
    if plan is None:
        plan = _plan(*key)
        if len(_plans) >= _PLANS_KEPT:
            _plans.clear()
        _plans[key] = plan
    if plan is _EMPTY:
        return
    corr_bits = _ONE_BITS if correction == 1.0 else f64_bits(correction)
    n_rows, n_red, kshape, kstrides, rshape, rstrides = plan.geometry
    if plan.nsplit == 1:
        launch(plan.site, plan.grid, x, out if out is not None else indices,
               indices if indices is not None else out, n_rows, n_red, plan.split_len, kshape, kstrides, rshape,
               rstrides, corr_bits)
        return
    p0 = x.new_empty((n_rows * plan.nsplit,), dtype=plan.acc)
    p1 = x.new_empty((n_rows * plan.nsplit,), dtype=dt.int64 if op in ("max", "min") else plan.acc)
    launch(plan.site, plan.grid, x, p0, p1, n_rows, n_red, plan.split_len, kshape, kstrides, rshape, rstrides,
           corr_bits)
    target = out if out is not None else indices
    launch(plan.combine_site, plan.combine_grid, p0, p1, target, indices if indices is not None else target, n_rows,
           plan.nsplit, plan.split_len, n_red, corr_bits)


class _Plan:
    """How one reduction launches: its geometry, grid and launch sites (the kernel with its
    compile-time arguments, ``runtime/launch.py: Site``): one pass, or a split pass and a combine pass."""

    __slots__ = ("geometry", "acc", "nsplit", "split_len", "grid", "site", "combine_grid", "combine_site")


_EMPTY = _Plan()  # nothing to launch: no output rows
_plans: dict = {}  # (op, shape, strides, dims, has out, has indices, cast) -> _Plan
_PLANS_KEPT = 4096


def _plan(op, shape, stride, dims, has_out, has_indices, cast) -> _Plan:
    kept = [d for d in range(len(shape)) if d not in dims]
    n_rows = 1
    for d in kept:
        n_rows *= shape[d]
    n_red = 1
    for d in dims:
        n_red *= shape[d]
    if n_rows == 0:
        return _EMPTY
    acc = reduce_accumulator(op, cast)
    kshape, (kstrides,), _ = collapse([shape[d] for d in kept], [stride[d] for d in kept])
    rdims = list(dims)
    if not has_indices:
        # Without indices the visiting order is free: walk the smallest stride innermost.
        rdims.sort(key=lambda d: -abs(stride[d]))
    rshape, (rstrides,), rcontig = collapse([shape[d] for d in rdims], [stride[d] for d in rdims])
    int64 = needs_int64(tuple(kshape) + tuple(rshape), tuple(kstrides) + tuple(rstrides)) or n_rows * n_red >= 2**31
    lowest, highest = _extremes(acc)
    sentinel = lowest if op == "max" else highest
    common = dict(OP=op, ACC=_TL[acc], SENTINEL=sentinel, STORE_VALUES=has_out, STORE_INDEX=has_indices)
    plan = _Plan()
    plan.geometry = (n_rows, n_red, kshape, kstrides, rshape, rstrides)
    plan.acc, plan.nsplit, plan.split_len = acc, 1, max(n_red, 1)

    split = n_rows < SPLIT_MAX_ROWS and n_red >= SPLIT_MIN_LEN and n_red > 0
    if split:
        want = max(2, min(cdiv(n_red, SPLIT_BLOCK_N), SPLIT_TARGET // n_rows))
        block_n = min(_pow2(cdiv(n_red, want)), SPLIT_BLOCK_N)
        split_len = cdiv(cdiv(n_red, want), block_n) * block_n
        nsplit = cdiv(n_red, split_len)
        split = nsplit > 1
    if not split:
        if kstrides[-1] == 1 and not rcontig:
            # The kept dim is the contiguous one (x.sum(0) of a row-major matrix): a tile wide
            # in rows and short in the reduced dim makes each load one coalesced row segment.
            block_m = min(_pow2(n_rows), KEPT_CONTIG_BLOCK_M)
            block_n = max(1, min(_pow2(n_red), TILE // block_m))
        else:
            block_n = min(_pow2(n_red), MAX_BLOCK_N)
            block_m = max(1, min(TILE // block_n, _pow2(n_rows)))
        plan.grid = (cdiv(n_rows, block_m), 1)
        plan.site = Site(_reduce_kernel, CAST=_TL[cast], SPLIT=False, KNDIM=len(kshape), RNDIM=len(rshape),
                         RCONTIG=rcontig, INT64=int64, BLOCK_M=block_m, BLOCK_N=block_n,
                         num_warps=_num_warps(block_m * block_n), **common)
        return plan

    plan.nsplit, plan.split_len = nsplit, split_len
    block_m = max(1, min(TILE // block_n, _pow2(n_rows)))
    plan.grid = (cdiv(n_rows, block_m), nsplit)
    plan.site = Site(_reduce_kernel, CAST=_TL[cast], SPLIT=True, KNDIM=len(kshape), RNDIM=len(rshape),
                     RCONTIG=rcontig, INT64=int64, BLOCK_M=block_m, BLOCK_N=block_n,
                     num_warps=_num_warps(block_m * block_n), **common)
    block_s = _pow2(nsplit)
    block_m = max(1, min(TILE // block_s, _pow2(n_rows)))
    plan.combine_grid = (cdiv(n_rows, block_m),)
    plan.combine_site = Site(_combine_kernel, BLOCK_M=block_m, BLOCK_S=block_s, num_warps=_num_warps(block_m * block_s),
                             **common)
    return plan
