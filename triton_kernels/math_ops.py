"""Small elementwise math the elementwise family does not cover: ``round`` (half to even, with
``decimals``), ``isnan``/``isinf``/``isfinite``, ``nan_to_num``, ``isclose``, and the
``linspace``/``logspace`` ranges.

Like ``elementwise.py``, operands are read in place through their strides (broadcast operands
have stride 0), values are computed in fp32 (fp64 for fp64) and cast on store. Float64 scalars
(``nan=``, ``rtol``, range ends) travel as int64 bit patterns (``f64_bits``), since Triton passes
Python floats as fp32.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import launch
from ._common import (collapse, elementwise_block, f64_bits, grid_1d, linear_index, load_f64_scalar, needs_int64,
                      strided_offset2, strided_offset3)

UNARY = ("round", "isnan", "isinf", "isfinite", "nan_to_num")


@triton.jit
def _round_half_even(x):
    f = tl.floor(x)
    d = x - f
    half = f * 0.5
    f_even = tl.floor(half) == half
    return tl.where(d > 0.5, f + 1.0, tl.where(d < 0.5, f, tl.where(f_even, f, f + 1.0)))


@triton.jit(do_not_specialize=["p0", "p1", "p2"])
def _unary_kernel(x, out, n, shape, sx, so, p0, p1, p2, OP: tl.constexpr, COMPUTE: tl.constexpr,
                  NDIM: tl.constexpr, INT64: tl.constexpr, BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, INT64)
    mask = lin < n
    ox, oo = strided_offset2(lin, shape, sx, so, NDIM)
    v = tl.load(x + ox, mask=mask).to(COMPUTE)
    if OP == "round":  # p0: 10**decimals (1.0 for decimals=0), as float64 bits
        scale = load_f64_scalar(p0).to(COMPUTE)
        r = _round_half_even(v * scale) / scale
        r = tl.where(r == 0, v * 0.0, r)  # -0.4 rounds to -0.0, as in NumPy and PyTorch
        r = tl.where(v == v + v, v, r)  # 0, inf: as they are
    elif OP == "isnan":
        r = v != v
    elif OP == "isinf":
        r = (v == float("inf")) | (v == float("-inf"))
    elif OP == "isfinite":
        r = (v == v) & (v != float("inf")) & (v != float("-inf"))
    else:
        tl.static_assert(OP == "nan_to_num")  # p0, p1, p2: the replacements of nan, +inf, -inf
        r = tl.where(v != v, load_f64_scalar(p0).to(COMPUTE), v)
        r = tl.where(v == float("inf"), load_f64_scalar(p1).to(COMPUTE), r)
        r = tl.where(v == float("-inf"), load_f64_scalar(p2).to(COMPUTE), r)
    if out.dtype.element_ty == tl.int1:
        r = r != 0
    tl.store(out + oo, r.to(out.dtype.element_ty), mask=mask)


def unary(op: str, out, x, compute: str, params=(0.0, 0.0, 0.0)) -> None:
    """out = op(x) elementwise; ``x`` has ``out``'s shape (any strides)."""
    n = out.numel()
    if n == 0:
        return
    shape, (sx, so), _ = collapse(out.shape, x.stride(), out.stride())
    bits = [f64_bits(p) for p in params]
    block = elementwise_block(n)
    launch(_unary_kernel, grid_1d(n, block), x, out, n, shape, sx, so, *bits, OP=op, COMPUTE=getattr(tl, compute),
           NDIM=len(shape), INT64=needs_int64(shape, sx, so), BLOCK=block)


@triton.jit(do_not_specialize=["rtol_bits", "atol_bits"])
def _isclose_kernel(a, b, out, n, shape, sa, sb, so, rtol_bits, atol_bits, EQUAL_NAN: tl.constexpr,
                    COMPUTE: tl.constexpr, NDIM: tl.constexpr, INT64: tl.constexpr, BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, INT64)
    mask = lin < n
    oa, ob, oo = strided_offset3(lin, shape, sa, sb, so, NDIM)
    x = tl.load(a + oa, mask=mask).to(COMPUTE)
    y = tl.load(b + ob, mask=mask).to(COMPUTE)
    tol = load_f64_scalar(atol_bits).to(COMPUTE) + load_f64_scalar(rtol_bits).to(COMPUTE) * tl.abs(y)
    finite = (x - x == 0) & (y - y == 0)  # neither is inf nor nan
    r = (x == y) | (finite & (tl.abs(x - y) <= tol))
    if EQUAL_NAN:
        r = r | ((x != x) & (y != y))
    tl.store(out + oo, r, mask=mask)


def isclose(out, a, b, rtol: float, atol: float, equal_nan: bool, compute: str) -> None:
    """out (bool) = |a - b| <= atol + rtol * |b| (or a == b); a, b have out's shape."""
    n = out.numel()
    if n == 0:
        return
    shape, (sa, sb, so), _ = collapse(out.shape, a.stride(), b.stride(), out.stride())
    block = elementwise_block(n)
    launch(_isclose_kernel, grid_1d(n, block), a, b, out, n, shape, sa, sb, so, f64_bits(rtol), f64_bits(atol),
           EQUAL_NAN=bool(equal_nan), COMPUTE=getattr(tl, compute), NDIM=len(shape),
           INT64=needs_int64(shape, sa, sb, so), BLOCK=block)


@triton.jit(do_not_specialize=["start_bits", "end_bits", "step_bits", "base_bits"])
def _linspace_kernel(out, n, start_bits, end_bits, step_bits, base_bits, LOG: tl.constexpr, BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, True)
    mask = lin < n
    start, end = load_f64_scalar(start_bits), load_f64_scalar(end_bits)
    step = load_f64_scalar(step_bits)
    i = lin.to(tl.float64)
    # PyTorch's symmetric formula: the first half counts up from start, the second down from end,
    # so both ends are exact.
    v = tl.where(lin < n // 2, start + step * i, end - step * ((n - 1) - i))
    if LOG:
        v = tl.exp(v * tl.log(load_f64_scalar(base_bits)))
    if not out.dtype.element_ty.is_floating():
        v = tl.where(v < 0, tl.ceil(v), tl.floor(v))  # float -> int truncates toward zero
    tl.store(out + lin, v.to(out.dtype.element_ty), mask=mask)


def linspace(out, start: float, end: float, base: float | None = None) -> None:
    """Fill contiguous 1-D ``out`` with evenly spaced values (``base``: ``base ** value``)."""
    n = out.numel()
    if n == 0:
        return
    step = (end - start) / (n - 1) if n > 1 else 0.0
    block = elementwise_block(n)
    launch(_linspace_kernel, grid_1d(n, block), out, n, f64_bits(start), f64_bits(end), f64_bits(step),
           f64_bits(base or 1.0), LOG=base is not None, BLOCK=block)
