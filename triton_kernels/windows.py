"""The window functions of spectral analysis (``hann_window hamming_window blackman_window
bartlett_window kaiser_window``), written on the device by one kernel (core entries:
``core/ops/windows.py``).

Element ``k`` of a window of denominator ``N`` (the length for a periodic window, one less for a
symmetric one) is computed in fp64 from ``k`` alone and cast on store, so a window is the same in
every dtype up to its rounding, and one launch writes it where it is used:

- ``cosine``: the generalized cosine window ``a0 - a1 cos(2 pi k / N) + a2 cos(4 pi k / N)``
  (Hann: 0.5, 0.5, 0; Hamming: alpha, beta, 0; Blackman: 0.42, 0.5, 0.08);
- ``bartlett``: the triangle ``1 - |2k / N - 1|``;
- ``kaiser``: ``I0(beta sqrt(1 - (2k / N - 1)^2)) / I0(beta)``, with the modified Bessel function
  ``I0`` summed from its power series (``sum ((x/2)^m / m!)^2``) until its terms stop counting in
  fp64; the interpreter has no libdevice Bessel function, and the series is exact enough for the
  betas windows use.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import launch
from ._common import elementwise_block, f64_bits, grid_1d, linear_index, load_f64_scalar

# terms of I0's series: the terms peak near m = x/2 and fall below fp64's epsilon of the sum by
# m = x + 40 for x <= 200 (beta above that overflows I0(beta) in fp64 anyway)
I0_TERMS = 260


@triton.jit
def _i0(x, TERMS: tl.constexpr):
    q = x * x * 0.25
    term = tl.full(x.shape, 1.0, tl.float64)
    total = term
    for m in range(1, TERMS):
        mm = m * 1.0
        term = term * q / (mm * mm)
        total += term
    return total


@triton.jit(do_not_specialize=["n", "denom_bits", "a0_bits", "a1_bits", "a2_bits", "beta_bits"])
def _window_kernel(out, n, denom_bits, a0_bits, a1_bits, a2_bits, beta_bits, KIND: tl.constexpr,
                   TERMS: tl.constexpr, BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, True)
    mask = lin < n
    k = lin.to(tl.float64)
    denom = load_f64_scalar(denom_bits)
    if KIND == "cosine":
        ang = (2.0 * 3.141592653589793) * k / denom
        v = load_f64_scalar(a0_bits) - load_f64_scalar(a1_bits) * tl.cos(ang) + \
            load_f64_scalar(a2_bits) * tl.cos(2.0 * ang)
    elif KIND == "bartlett":
        v = 1.0 - tl.abs(2.0 * k / denom - 1.0)
    else:
        beta = load_f64_scalar(beta_bits)
        r = 2.0 * k / denom - 1.0
        arg = beta * tl.sqrt(tl.maximum(1.0 - r * r, 0.0))
        v = _i0(arg, TERMS) / _i0(tl.zeros_like(k) + beta, TERMS)
    tl.store(out + lin, v.to(out.dtype.element_ty), mask=mask)


def window(out, kind: str, denom: float, a0: float = 0.0, a1: float = 0.0, a2: float = 0.0,
           beta: float = 0.0) -> None:
    """Fill the contiguous 1-D ``out`` with the window ``kind`` of denominator ``denom``."""
    n = out.numel()
    if n == 0:
        return
    block = elementwise_block(n)
    launch(_window_kernel, grid_1d(n, block), out, n, f64_bits(denom), f64_bits(a0), f64_bits(a1), f64_bits(a2),
           f64_bits(beta), KIND=kind, TERMS=I0_TERMS if kind == "kaiser" else 1, BLOCK=block)
