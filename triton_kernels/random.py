"""Counter-based random numbers (Philox, ``tl.rand``/``tl.randn``) and ``arange``.

A generator is a (seed, offset) pair: every call consumes ``numel`` counters, so results are
reproducible after ``manual_seed`` and independent of block size or execution mode.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import launch
from ._common import elementwise_block, f64_bits, grid_1d, linear_index, load_f64_scalar


@triton.jit(do_not_specialize=["seed", "offset", "lo_bits", "span_bits"])
def _random_kernel(out, n, seed, offset, lo_bits, span_bits, NORMAL: tl.constexpr, BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, True)
    mask = lin < n
    if NORMAL:
        r = tl.randn(seed, (lin + offset).to(tl.uint32))
    else:
        r = tl.rand(seed, (lin + offset).to(tl.uint32))
    v = load_f64_scalar(lo_bits) + load_f64_scalar(span_bits) * r.to(tl.float64)
    tl.store(out + lin, v.to(out.dtype.element_ty), mask=mask)


def random_(out, seed: int, offset: int, normal: bool, lo: float = 0.0, span: float = 1.0) -> None:
    """Fill a contiguous ``out`` with U[lo, lo+span) or N(lo, span**2) numbers."""
    n = out.numel()
    if n == 0:
        return
    block = elementwise_block(n)
    launch(_random_kernel, grid_1d(n, block), out, n, seed, offset, f64_bits(lo), f64_bits(span),
           NORMAL=normal, BLOCK=block)


@triton.jit(do_not_specialize=["start_bits", "step_bits", "start_int", "step_int"])
def _arange_kernel(out, n, start_bits, step_bits, start_int, step_int, IS_FLOAT: tl.constexpr, BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, True)
    mask = lin < n
    if IS_FLOAT:
        v = load_f64_scalar(start_bits) + lin.to(tl.float64) * load_f64_scalar(step_bits)
    else:
        v = start_int.to(tl.int64) + lin * step_int.to(tl.int64)
    tl.store(out + lin, v.to(out.dtype.element_ty), mask=mask)


def arange(out, start, step) -> None:
    n = out.numel()
    if n == 0:
        return
    is_float = out.dtype.is_floating_point
    args = (f64_bits(start), f64_bits(step), 0, 0) if is_float else (0, 0, int(start), int(step))
    block = elementwise_block(n)
    launch(_arange_kernel, grid_1d(n, block), out, n, *args, IS_FLOAT=is_float, BLOCK=block)
