"""Indexing kernels: advanced (integer-tensor) indexing, ``gather``/``scatter_add`` along a dim,
and ``nonzero`` for boolean masks.

Two index layouts cover every op:

- ``index_nd``: the indexed tensor ``base`` has K dims picked by K index tensors broadcast to a
  shape B (passed as one contiguous int64 buffer of shape (K, *B)) and R dims kept as they are.
  The "dense" operand has shape B + R (any strides). MODE "gather": dense = base[idx] (``x[idx]``,
  ``index_select``); "put": base[idx] = dense (``x[idx] = v``; where index rows repeat, the last
  row's value is written, as in NumPy); "add": base[idx] += dense with
  atomics (``index_add``, the backward of ``x[idx]``).
- ``index_dim``: ``gather``/``scatter_add``: one index tensor with the dense operand's shape
  picks the position along one dim of ``base``.

Index tensors in host memory are bounds-checked on the host before any launch (core/ops/index.py);
index tensors in device memory are checked by the kernels themselves (``check``: out-of-range lanes
are masked off and recorded in the device's error flag, ``runtime/device_asserts.py``, which the
host reads at its next sync), so no indexing op waits for the device. Kernels wrap negative
indices where the op allows them. "add" uses ``tl.atomic_add`` (fp32, fp64, int32, int64; fp16/bf16 callers pass
an fp32 buffer), so on GPU the order of a sum over duplicate indices is not deterministic, as in
PyTorch's CUDA kernels. Values are loaded and stored in their own dtype (gather/put are copies
with a cast), arithmetic of "add" happens in the base's dtype.
"""
from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from ..runtime.launch import launch
from ._common import (ELEMENTWISE_BLOCK, check_index, grid_1d, linear_index, needs_int64, strided_offset,
                      strided_offset3)


@triton.jit
def _store_as(ptr, val, mask):
    if ptr.dtype.element_ty == tl.int1:
        val = val != 0
    tl.store(ptr, val.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def _target(idx, b, mask, numel_b, adv_sizes, adv_lows, K: tl.constexpr):
    """The position index row ``b`` names in the indexed dims' grid, row-major (int64), and
    ``mask`` without the rows holding an index out of range (the main kernel records those)."""
    t = tl.zeros(b.shape, tl.int64)
    for k in tl.static_range(K):
        i = tl.load(idx + k * numel_b + b, mask=mask, other=0)
        mask = mask & (i >= adv_lows[k]) & (i < adv_sizes[k])
        t = t * adv_sizes[k] + tl.where(i < 0, i + adv_sizes[k], i)
    return t, mask


@triton.jit
def _claim_kernel(idx, winner, numel_b, adv_sizes, adv_lows, K: tl.constexpr, BLOCK: tl.constexpr):
    b = linear_index(BLOCK, True)
    t, mask = _target(idx, b, b < numel_b, numel_b, adv_sizes, adv_lows, K)
    tl.atomic_max(winner + t, b.to(winner.dtype.element_ty), mask=mask, sem="relaxed")


@triton.jit
def _index_nd_kernel(dense, base, idx, winner, err, n, numel_r, numel_b, shape, dense_strides, shape_r,
                     base_strides_r, adv_strides, adv_sizes, adv_lows, headers, MODE: tl.constexpr, K: tl.constexpr,
                     NDIM: tl.constexpr, NDIM_R: tl.constexpr, INT64: tl.constexpr, LAST_WINS: tl.constexpr,
                     CHECK: tl.constexpr, BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, INT64)
    live = lin < n
    mask = live
    b = lin // numel_r
    r = lin % numel_r
    od = strided_offset(lin, shape, dense_strides, NDIM)
    ob = strided_offset(r, shape_r, base_strides_r, NDIM_R).to(tl.int64)
    for k in tl.static_range(K):
        i = tl.load(idx + k * numel_b + b, mask=live, other=0)
        mask = mask & check_index(i, live, adv_lows[k], adv_sizes[k], err, headers[k], CHECK)
        i = tl.where(i < 0, i + adv_sizes[k], i)
        ob += i * adv_strides[k]
    if MODE == "gather":  # a lane with a bad index reads nothing and writes 0
        _store_as(dense + od, tl.load(base + ob, mask=mask, other=0), live)
    elif MODE == "put":
        if LAST_WINS:  # of the index rows naming one position, only the last (the claim's winner) writes
            t, mask = _target(idx, b, mask, numel_b, adv_sizes, adv_lows, K)
            mask = mask & (tl.load(winner + t, mask=mask, other=-1) == b)
        _store_as(base + ob, tl.load(dense + od, mask=mask), mask)
    else:
        tl.static_assert(MODE == "add")
        v = tl.load(dense + od, mask=mask).to(base.dtype.element_ty)
        tl.atomic_add(base + ob, v, mask=mask, sem="relaxed")


@triton.jit
def _index_dim_kernel(dense, base, idx, err, n, shape, dense_strides, idx_strides, base_strides, dim_stride, dim_size,
                      header, MODE: tl.constexpr, NDIM: tl.constexpr, INT64: tl.constexpr, CHECK: tl.constexpr,
                      BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, INT64)
    live = lin < n
    od, oi, ob = strided_offset3(lin, shape, dense_strides, idx_strides, base_strides, NDIM)
    i = tl.load(idx + oi, mask=live, other=0)
    mask = check_index(i, live, 0, dim_size, err, header, CHECK)
    ob = ob + i * dim_stride
    if MODE == "gather":  # a lane with a bad index reads nothing and writes 0
        _store_as(dense + od, tl.load(base + ob, mask=mask, other=0), live)
    else:
        tl.static_assert(MODE == "add")
        v = tl.load(dense + od, mask=mask).to(base.dtype.element_ty)
        tl.atomic_add(base + ob, v, mask=mask, sem="relaxed")


@triton.jit
def _mask_count_kernel(m, counts, n, shape, strides, NDIM: tl.constexpr, INT64: tl.constexpr, BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, INT64)
    valid = lin < n
    v = tl.load(m + strided_offset(lin, shape, strides, NDIM), mask=valid, other=0) != 0
    tl.store(counts + tl.program_id(0), tl.sum(v.to(tl.int64), axis=0))


@triton.jit
def _nonzero_kernel(m, starts, out, n, total, shape, strides, NDIM: tl.constexpr, INT64: tl.constexpr,
                    BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, INT64)
    valid = lin < n
    v = (tl.load(m + strided_offset(lin, shape, strides, NDIM), mask=valid, other=0) != 0) & valid
    pos = tl.load(starts + tl.program_id(0)) + tl.cumsum(v.to(tl.int64), axis=0) - 1
    rem = lin.to(tl.int64)
    for d in tl.static_range(NDIM - 1, -1, -1):
        tl.store(out + d * total + pos, rem % shape[d], mask=v)
        rem = rem // shape[d]


def _shape_or_one(shape, strides):
    return (tuple(shape), tuple(strides)) if len(shape) else ((1,), (0,))


def index_nd(mode: str, dense, base, idx, adv_strides, adv_sizes, rest_shape, base_rest_strides,
             winner=None, check=None) -> None:
    """See the module docstring. ``dense`` has shape B + rest_shape; ``idx`` is contiguous int64 (K, *B).

    ``check``: None (every index is known to be in range) or ``(flag, lows, headers)``: the
    device's error flag and, per indexed dim, the lowest index allowed (-size where negatives
    wrap, 0 where they do not) and the header to record a failure with (``runtime/device_asserts.py``).

    ``winner`` ("put" only): a contiguous int32/int64 buffer of prod(adv_sizes) elements, all -1,
    given when index rows may repeat: a first launch has every row claim its position with an
    atomic max of its number, then only the claiming (last) row writes, so duplicates resolve to
    the last value as in NumPy, whatever order the GPU runs the programs in.
    """
    n = dense.numel()
    if n == 0:
        return
    k = len(adv_strides)
    numel_r = int(np.prod(rest_shape, dtype=np.int64)) if rest_shape else 1
    numel_b = n // numel_r
    shape, dstr = _shape_or_one(dense.shape, dense.stride())
    shape_r, bstr = _shape_or_one(rest_shape, base_rest_strides)
    int64 = needs_int64(dense.shape, dense.stride()) or needs_int64(rest_shape, base_rest_strides)
    last_wins = winner is not None
    if check is None:
        err, lows, headers = idx, tuple(-int(s) for s in adv_sizes), (0,) * k
    else:
        err, lows, headers = check
    if last_wins:
        launch(_claim_kernel, grid_1d(numel_b, ELEMENTWISE_BLOCK), idx, winner, numel_b, tuple(adv_sizes),
               tuple(lows), K=k, BLOCK=ELEMENTWISE_BLOCK)
    launch(_index_nd_kernel, grid_1d(n, ELEMENTWISE_BLOCK), dense, base, idx, winner if last_wins else idx, err, n,
           numel_r, numel_b, shape, dstr, shape_r, bstr, tuple(adv_strides), tuple(adv_sizes), tuple(lows),
           tuple(headers), MODE=mode, K=k, NDIM=len(shape), NDIM_R=len(shape_r), INT64=int64, LAST_WINS=last_wins,
           CHECK=check is not None, BLOCK=ELEMENTWISE_BLOCK)


def index_dim(mode: str, dense, base, idx, dim: int, check=None) -> None:
    """gather (dense = base.gather(dim, idx)) or scatter add (base.scatter_add_(dim, idx, dense)).
    ``dense`` and ``idx`` share a shape; ``base`` has the same rank; indices are in [0, size).
    ``check``: None (known to be in range) or ``(flag, header)`` (see :func:`index_nd`)."""
    n = idx.numel()
    if n == 0:
        return
    bstr = list(base.stride())
    dim_stride, dim_size = bstr[dim], base.shape[dim]
    bstr[dim] = 0
    shape, dstr = _shape_or_one(idx.shape, dense.stride())
    _, istr = _shape_or_one(idx.shape, idx.stride())
    _, bstr = _shape_or_one(idx.shape, bstr)
    int64 = needs_int64(base.shape, base.stride()) or needs_int64(idx.shape, dense.stride(), idx.stride())
    err, header = (idx, 0) if check is None else check
    launch(_index_dim_kernel, grid_1d(n, ELEMENTWISE_BLOCK), dense, base, idx, err, n, shape, dstr, istr, bstr,
           dim_stride, dim_size, header, MODE=mode, NDIM=len(shape), INT64=int64, CHECK=check is not None,
           BLOCK=ELEMENTWISE_BLOCK)


@triton.jit
def _check_kernel(idx, err, n, shape, strides, low, size, header, NDIM: tl.constexpr, INT64: tl.constexpr,
                  BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, INT64)
    live = lin < n
    i = tl.load(idx + strided_offset(lin, shape, strides, NDIM), mask=live, other=0)
    check_index(i, live, low, size, err, header, True)


def check_bounds(idx, low: int, size: int, check) -> None:
    """Record in the device's error flag (``check``: ``(flag, header)``) any index of ``idx`` outside
    [low, size), reading nothing else: for ops written with other ops (``index_fill``,
    ``index_copy``), whose error must name them, not the op they run."""
    n = idx.numel()
    if n == 0:
        return
    shape, strides = _shape_or_one(idx.shape, idx.stride())
    flag, header = check
    launch(_check_kernel, grid_1d(n, ELEMENTWISE_BLOCK), idx, flag, n, shape, strides, int(low), int(size), header,
           NDIM=len(shape), INT64=needs_int64(shape, strides), BLOCK=ELEMENTWISE_BLOCK)


def mask_block_counts(mask, counts) -> None:
    """counts[b] = number of nonzero elements of ``mask`` (row-major) in block b of ``nonzero_block()``."""
    n = mask.numel()
    shape, strides = _shape_or_one(mask.shape, mask.stride())
    launch(_mask_count_kernel, grid_1d(n, ELEMENTWISE_BLOCK), mask, counts, n, shape, strides, NDIM=len(shape),
           INT64=needs_int64(shape, strides), BLOCK=ELEMENTWISE_BLOCK)


def nonzero_block() -> int:
    return ELEMENTWISE_BLOCK


def nonzero_fill(mask, starts, out) -> None:
    """out[:, starts[b] + j] = coordinates of the j-th nonzero element of block b (out: int64 (ndim, total))."""
    n, total = mask.numel(), out.shape[1]
    shape, strides = _shape_or_one(mask.shape, mask.stride())
    launch(_nonzero_kernel, grid_1d(n, ELEMENTWISE_BLOCK), mask, starts, out, n, total, shape, strides,
           NDIM=len(shape), INT64=needs_int64(shape, strides), BLOCK=ELEMENTWISE_BLOCK)
