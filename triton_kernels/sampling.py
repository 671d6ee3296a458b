"""Sampling kernels on the counter-based Philox stream: uniform integers (``randint``,
``random_``, ``randperm``'s keys) and Bernoulli draws (``bernoulli``, ``bernoulli_``).

Like ``random.py``, element ``i`` of a draw uses counter ``offset + i`` of the generator's stream
(``core/generator.py``), so results depend on (seed, offset, position) only, in both execution
modes. ``randint`` takes two 32-bit words of ``tl.randint4x`` as one 64-bit number and reduces
it modulo the range (bias below range / 2**64). ``bernoulli`` compares one ``tl.rand`` uniform
with the probability (a tensor read through its strides, or a scalar), in fp32 (fp64 for fp64).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import launch
from ._common import elementwise_block, f64_bits, grid_1d, linear_index, load_f64_scalar, strided_offset


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
