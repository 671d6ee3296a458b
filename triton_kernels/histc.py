"""histc: equal-width histogram counts of a tensor's elements in one pass.

Each program bins a block of elements and adds one per element into an int32 count per bin with
atomics (counts are exact; the core entry casts them to the input's dtype). A composite
(bin indices, then bincount) would write and read an int64 index per element first. The range
arrives as fp64 bit patterns (a Python float reaches a compiled kernel as fp32), and the bin is
computed as torch's: (x - min) * bins / (max - min), the maximum itself in the last bin; elements
outside [min, max] and NaNs are not counted.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import launch
from ._common import elementwise_block, f64_bits, grid_1d, load_f64_scalar

_TL = {"float32": tl.float32, "float64": tl.float64}


@triton.jit(do_not_specialize=["lo_bits", "hi_bits"])
def _histc_kernel(x, counts, n, lo_bits, hi_bits, BINS: tl.constexpr, COMPUTE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x + offs, mask=mask, other=0.0).to(COMPUTE)
    lo = load_f64_scalar(lo_bits).to(COMPUTE)
    hi = load_f64_scalar(hi_bits).to(COMPUTE)
    inside = mask & (v >= lo) & (v <= hi)
    pos = tl.where(inside, (v - lo) * BINS / (hi - lo), 0.0)
    b = tl.minimum(tl.maximum(pos.to(tl.int32), 0), BINS - 1)
    tl.atomic_add(counts + b, tl.full((BLOCK,), 1, tl.int32), mask=inside)


def histc(counts, x, bins: int, lo: float, hi: float, compute: str) -> None:
    """counts[bins] (int32, zeroed) += the number of contiguous ``x``'s elements in each bin of [lo, hi]."""
    n = x.numel()
    if n == 0:
        return
    block = elementwise_block(n)
    launch(_histc_kernel, grid_1d(n, block), x, counts, n, f64_bits(lo), f64_bits(hi), BINS=bins,
           COMPUTE=_TL[compute], BLOCK=block)
