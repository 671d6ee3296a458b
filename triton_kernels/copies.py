"""Strided copy with dtype conversion: what ``contiguous()``, ``clone()``, ``copy_()`` and
``.to(dtype)`` run, plus ``fill_``.

Conversions are Triton's ``.to``: float narrowing rounds to nearest even, keeps inf/NaN and
overflows to inf; float -> int truncates toward zero and saturates (inf and values past the range
give the type's max or min, NaN gives 0: ``_common.float_to_int``, what the GPU does, in both
modes); anything -> bool is ``!= 0``.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import launch
from ._common import (collapse, elementwise_block, f64_bits, float_to_int, grid_1d, linear_index, load_f64_scalar,
                      needs_int64, strided_offset, strided_offset2)


@triton.jit
def _copy_kernel(src, dst, n, shape, s_src, s_dst,
                 NDIM: tl.constexpr, CONTIG: tl.constexpr, INT64: tl.constexpr, BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, INT64)
    mask = lin < n
    if CONTIG:
        o_src = lin
        o_dst = lin
    else:
        o_src, o_dst = strided_offset2(lin, shape, s_src, s_dst, NDIM)
    v = tl.load(src + o_src, mask=mask)
    if dst.dtype.element_ty == tl.int1:
        if v.dtype.is_floating():
            v = v.to(tl.float32) if v.dtype.primitive_bitwidth < 32 else v  # compare in fp32: -0.0 is 0
        v = v != 0
    elif v.dtype.is_floating() and dst.dtype.element_ty.is_int():
        v = float_to_int(v, dst.dtype.element_ty)
    tl.store(dst + o_dst, v.to(dst.dtype.element_ty), mask=mask)


def copy(dst, src) -> None:
    """dst[...] = src, same shape (the caller broadcasts), any strides, any dtypes."""
    n = dst.numel()
    if n == 0:
        return
    shape, (s_src, s_dst), contig = collapse(dst.shape, src.stride(), dst.stride())
    block = elementwise_block(n)
    launch(_copy_kernel, grid_1d(n, block), src, dst, n, shape, s_src, s_dst,
           NDIM=len(shape), CONTIG=contig, INT64=needs_int64(shape, s_src, s_dst), BLOCK=block)


@triton.jit(do_not_specialize=["fbits", "ival"])
def _fill_kernel(dst, n, shape, s_dst, fbits, ival,
                 IS_FLOAT: tl.constexpr, NDIM: tl.constexpr, CONTIG: tl.constexpr, INT64: tl.constexpr,
                 BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, INT64)
    mask = lin < n
    o = lin if CONTIG else strided_offset(lin, shape, s_dst, NDIM)
    if IS_FLOAT:
        v = load_f64_scalar(fbits)
    else:
        v = ival.to(tl.int64)
    if dst.dtype.element_ty == tl.int1:
        v = v != 0
    elif IS_FLOAT and dst.dtype.element_ty.is_int():
        v = float_to_int(v, dst.dtype.element_ty)
    tl.store(dst + o, tl.broadcast_to(v.to(dst.dtype.element_ty), (BLOCK,)), mask=mask)


def fill(dst, value) -> None:
    n = dst.numel()
    if n == 0:
        return
    shape, (s_dst,), contig = collapse(dst.shape, dst.stride())
    is_float = isinstance(value, float) or dst.dtype.is_floating_point
    launch_args = (f64_bits(float(value)) if is_float else 0, 0 if is_float else int(value))
    block = elementwise_block(n)
    launch(_fill_kernel, grid_1d(n, block), dst, n, shape, s_dst, *launch_args,
           IS_FLOAT=is_float, NDIM=len(shape), CONTIG=contig, INT64=needs_int64(shape, s_dst),
           BLOCK=block)
