"""Scatter kernels along one dim: ``scatter`` (a write) and ``scatter_reduce``'s ``prod amax amin``.

One layout, as ``index.index_dim``: ``src`` and ``idx`` share a shape S; ``base`` has the same
rank, and element p of S lands at ``base[..., idx[p], ...]`` (position p with its coordinate
along ``dim`` replaced by ``idx[p]``). Host index tensors are bounds-checked on the host before any
launch (``core/ops/scatter.py``); device ones by the kernel (``check``: out-of-range lanes masked
off and recorded in the device's error flag, ``runtime/device_asserts.py``).

MODE "claim" / "put": where several elements of S name one position of ``base``, the last of
them (row-major in S, so the last along ``dim``) is written, as NumPy's ``put_along_axis``, in
both modes: a first launch has each element claim its target with an atomic max of its flat
number in a contiguous ``winner`` buffer shaped like ``base`` (all -1 at first); the put then
writes only the claiming element. Without repeats possible (S has size 1 along ``dim``) the put
runs alone, ``LAST_WINS`` off.

MODE "max" / "min" / "mul": ``tl.atomic_max``/``tl.atomic_min`` (int32, int64, fp32, fp64;
fp16/bf16/bool callers pass an fp32/int32 buffer) and a compare-and-swap loop on the value's bits
for the product, which Triton has no atomic for. A CAS never compares floats (a NaN would never
match): it compares the bits. Float max/min go through Triton's integer-bit trick, which does not
propagate NaN: the core entry marks NaN targets afterwards. Sums are ``index.index_dim("add")``.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import launch
from ._common import ELEMENTWISE_BLOCK, check_index, grid_1d, linear_index, needs_int64, strided_offset4


@triton.jit
def _atomic_mul(ptr, v, mask, safe):
    """``*ptr *= v`` where ``mask``, atomically: a CAS loop on the bits; lanes off the mask (or done)
    swap their own value back at ``safe`` (a valid address), which changes nothing."""
    BITS: tl.constexpr = ptr.dtype.element_ty.primitive_bitwidth
    ity = tl.int32 if BITS == 32 else tl.int64
    iptr = tl.where(mask, ptr, safe).to(tl.pointer_type(ity), bitcast=True)
    cur = tl.load(iptr)
    pending = mask
    while tl.max(pending.to(tl.int32), axis=0) > 0:
        val = cur.to(ptr.dtype.element_ty, bitcast=True)
        new = tl.where(pending, (val * v).to(ptr.dtype.element_ty).to(ity, bitcast=True), cur)
        old = tl.atomic_cas(iptr, cur, new, sem="relaxed")
        pending = pending & (old != cur)
        cur = old


@triton.jit
def _scatter_dim_kernel(src, base, idx, winner, err, n, shape, src_strides, idx_strides, base_strides, win_strides,
                        dim_stride, win_dim_stride, dim_size, header, MODE: tl.constexpr, LAST_WINS: tl.constexpr,
                        NDIM: tl.constexpr, INT64: tl.constexpr, CHECK: tl.constexpr, BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, INT64)
    live = lin < n
    os_, oi, ob, ow = strided_offset4(lin, shape, src_strides, idx_strides, base_strides, win_strides, NDIM)
    i = tl.load(idx + oi, mask=live, other=0).to(tl.int64)
    mask = check_index(i, live, 0, dim_size, err, header, CHECK)
    ob = ob + i * dim_stride
    if MODE == "claim":
        tl.atomic_max(winner + ow + i * win_dim_stride, lin.to(winner.dtype.element_ty), mask=mask, sem="relaxed")
    else:
        v = tl.load(src + os_, mask=mask, other=0)
        if base.dtype.element_ty == tl.int1:
            v = v != 0
        v = v.to(base.dtype.element_ty)
        if MODE == "put":
            if LAST_WINS:
                mask = mask & (tl.load(winner + ow + i * win_dim_stride, mask=mask, other=-1) == lin)
            tl.store(base + ob, v, mask=mask)
        elif MODE == "max":
            tl.atomic_max(base + ob, v, mask=mask, sem="relaxed")
        elif MODE == "min":
            tl.atomic_min(base + ob, v, mask=mask, sem="relaxed")
        else:
            tl.static_assert(MODE == "mul")
            _atomic_mul(base + ob, v, mask, base)


def _strides_or_one(shape, strides):
    return tuple(strides) if len(shape) else (0,)


def scatter_dim(mode: str, src, base, idx, dim: int, winner=None, check=None) -> None:
    """``base[..., idx[p], ...] (=|max=|min=|*=) src[p]`` along ``dim`` for every p of idx's shape
    (``src`` is read at the same p: any strides, 0 for a broadcast scalar), 0 <= idx < size.
    ``winner`` ("put" only, when idx repeats along dim): a contiguous int32/int64 buffer of base's
    shape, all -1. ``check``: None (indices known to be in range) or ``(flag, header)``."""
    n = idx.numel()
    if n == 0:
        return
    shape = tuple(idx.shape) or (1,)
    bstr = list(base.stride())
    dim_stride, dim_size = bstr[dim], base.shape[dim]
    bstr[dim] = 0
    last_wins = winner is not None
    wstr = list(winner.stride()) if last_wins else [0] * base.ndim
    win_dim_stride = wstr[dim]
    wstr[dim] = 0
    sstr, istr = _strides_or_one(idx.shape, src.stride()), _strides_or_one(idx.shape, idx.stride())
    bstr, wstr = _strides_or_one(idx.shape, bstr), _strides_or_one(idx.shape, wstr)
    int64 = (needs_int64(base.shape, base.stride()) or needs_int64(shape, sstr, istr)
             or (last_wins and needs_int64(winner.shape, winner.stride())))
    grid = grid_1d(n, ELEMENTWISE_BLOCK)
    err, header = (idx, 0) if check is None else check
    common = (err, n, shape, sstr, istr, bstr, wstr, dim_stride, win_dim_stride, dim_size, header)
    if last_wins:
        launch(_scatter_dim_kernel, grid, src, base, idx, winner, *common, MODE="claim", LAST_WINS=True,
               NDIM=len(shape), INT64=int64, CHECK=check is not None, BLOCK=ELEMENTWISE_BLOCK)
    launch(_scatter_dim_kernel, grid, src, base, idx, winner if last_wins else idx, *common, MODE=mode,
           LAST_WINS=last_wins, NDIM=len(shape), INT64=int64, CHECK=check is not None, BLOCK=ELEMENTWISE_BLOCK)
