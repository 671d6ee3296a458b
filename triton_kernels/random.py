"""Counter-based random numbers (Philox, ``tl.rand``/``tl.randn``/``tl.randint4x``) and ``arange``:
the random family's kernels (core entries: ``core/ops/random.py``, ``core/factories.py``,
``core/creation.py``).

A generator is a (seed, offset) pair (``core/generator.py``): element ``i`` of a draw uses counter
``offset + i``, every call consumes ``numel`` counters, so results depend on (seed, offset,
position) only: reproducible after ``manual_seed`` and independent of block size or execution mode.

- ``random_``: uniform or normal floats (``rand``, ``randn``, ``uniform_``, ``normal_``).
- ``randint``: uniform integers (``randint``, ``random_``, ``randperm``'s keys): two 32-bit words
  of ``tl.randint4x`` taken as one 64-bit number, reduced modulo the range (bias below
  range / 2**64).
- ``bernoulli``: one ``tl.rand`` uniform compared with the probability (a tensor read through its
  strides, or a scalar), in fp32 (fp64 for fp64).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import launch
from ._common import elementwise_block, f64_bits, grid_1d, linear_index, load_f64_scalar, strided_offset


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


@triton.jit(do_not_specialize=["seed", "offset", "low", "span"])
def _randint_kernel(out, n, seed, offset, low, span, BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, True)
    mask = lin < n
    r0, r1, _, _ = tl.randint4x(seed, (lin + offset).to(tl.uint32))
    r = (r0.to(tl.uint64) << 32) | r1.to(tl.uint64)
    v = low.to(tl.int64) + (r % span.to(tl.uint64)).to(tl.int64)
    tl.store(out + lin, v.to(out.dtype.element_ty), mask=mask)


def randint(out, seed: int, offset: int, low: int, high: int) -> None:
    """Fill contiguous ``out`` with integers uniform in [low, high) (high - low < 2**63)."""
    n = out.numel()
    if n == 0:
        return
    block = elementwise_block(n)
    launch(_randint_kernel, grid_1d(n, block), out, n, seed, offset, int(low), int(high - low), BLOCK=block)


@triton.jit(do_not_specialize=["seed", "offset", "p_bits"])
def _bernoulli_kernel(p, out, n, shape, sp, seed, offset, p_bits, P_SCALAR: tl.constexpr, COMPUTE: tl.constexpr,
                      NDIM: tl.constexpr, BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, True)
    mask = lin < n
    u = tl.rand(seed, (lin + offset).to(tl.uint32)).to(COMPUTE)
    if P_SCALAR:
        prob = load_f64_scalar(p_bits).to(COMPUTE)
    else:
        prob = tl.load(p + strided_offset(lin, shape, sp, NDIM), mask=mask, other=0).to(COMPUTE)
    tl.store(out + lin, (u < prob).to(out.dtype.element_ty), mask=mask)


def bernoulli(out, p, seed: int, offset: int, compute: str = "float32") -> None:
    """Contiguous ``out`` = 1 with probability ``p`` (a tensor of out's shape, any strides, or a float), else 0."""
    n = out.numel()
    if n == 0:
        return
    scalar = not hasattr(p, "stride")
    shape, sp = ((1,), (0,)) if scalar else (tuple(out.shape) or (1,), tuple(p.stride()) or (0,))
    block = elementwise_block(n)
    launch(_bernoulli_kernel, grid_1d(n, block), out if scalar else p, out, n, shape, sp, seed, offset,
           f64_bits(float(p)) if scalar else 0, P_SCALAR=scalar, COMPUTE=getattr(tl, compute), NDIM=len(shape),
           BLOCK=block)
