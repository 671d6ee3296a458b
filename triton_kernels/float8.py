"""Casts to and from torch's five float8 formats, written on the bits.

Triton's interpreter converts fp8 wrongly and the GPU's fp8 conversions do not follow torch's rules
(e4m3fn saturates finite overflow and inf to +-448 in torch; e8m0fnu drops the sign and rounds its
own way), so every conversion here unpacks sign, exponent and mantissa with integer arithmetic,
rounds to nearest even by hand and applies each format's overflow and NaN rules, exactly as c10's
``fp8*_from_fp32_value`` and ``*_to_fp32_value`` do. The same integer code runs in the interpreter
and on a GPU, so both modes give the same bits.

The launchers see a float8 tensor as its raw bytes (a uint8 tensor over the same storage) and get
its format as a code: 1 e4m3fn, 2 e5m2, 3 e4m3fnuz, 4 e5m2fnuz, 5 e8m0fnu (0: not float8). As in
torch, a value reaches float8 through float32 (a float64 or int64 is rounded to float32 first) and
leaves it through float32 (then cast to the destination as any float32 is).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import launch
from ._common import (collapse, elementwise_block, f64_bits, float_to_int, grid_1d, linear_index, load_f64_scalar,
                      needs_int64, strided_offset, strided_offset2)

E4M3FN, E5M2, E4M3FNUZ, E5M2FNUZ, E8M0FNU = 1, 2, 3, 4, 5
FORMATS = {"float8_e4m3fn": E4M3FN, "float8_e5m2": E5M2, "float8_e4m3fnuz": E4M3FNUZ, "float8_e5m2fnuz": E5M2FNUZ,
           "float8_e8m0fnu": E8M0FNU}


@triton.jit
def _sign_bit(bits, sign):
    """``bits`` with bit 31 set where ``sign`` is 1 (int32 arithmetic: bit 31 is the value -2**31)."""
    return tl.where(sign == 1, bits | -2147483648, bits)


@triton.jit
def encode(x, FMT: tl.constexpr):
    """The float8 code (int32, 0..255) of the float32 values ``x``, by torch's rules for format ``FMT``."""
    bits = x.to(tl.int32, bitcast=True)
    sign = (bits >> 31) & 1
    a = bits & 0x7FFFFFFF
    if FMT == 5:
        # e8m0fnu: the exponent alone, rounded up past the half-way point (ties up from a nonzero exponent,
        # c10's rule); the sign is dropped, inf and NaN are 255
        e = a >> 23
        g = (a >> 22) & 1
        r = (a >> 21) & 1
        s = (a & 0x1FFFFF) != 0
        up = (g == 1) & ((r == 1) | s | (e > 0))
        return tl.where(e == 255, 255, e + up.to(tl.int32))
    MB: tl.constexpr = 3 if (FMT == 1 or FMT == 3) else 2
    BIAS: tl.constexpr = 7 if FMT == 1 else (15 if FMT == 2 else (8 if FMT == 3 else 16))
    SH: tl.constexpr = 23 - MB
    # normal range: move the exponent to the new bias and round the mantissa to MB bits, nearest even
    # (a carry out of the mantissa steps the exponent, as it should)
    odd = (a >> SH) & 1
    normal = (a + (((BIAS - 127) << 23) + (1 << (SH - 1)) - 1) + odd) >> SH
    # subnormal range: the significand (implicit bit included) shifted right to units of the smallest
    # subnormal, 2**(1 - BIAS - MB), rounded to nearest even; float32 subnormals count as exponent 1
    e32 = a >> 23
    m = tl.where(e32 > 0, (a & 0x7FFFFF) | 0x800000, a & 0x7FFFFF)
    shift = tl.minimum(151 - BIAS - MB - tl.maximum(e32, 1), 30)
    q = m >> shift
    rem = m & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    sub = q + ((rem > half) | ((rem == half) & ((q & 1) == 1))).to(tl.int32)
    is_sub = a < ((128 - BIAS) << 23)
    code = tl.where(is_sub, sub, normal)
    if FMT == 1:
        # no inf: finite overflow, inf and a rounding carry into the NaN code all saturate to 448
        code = tl.where((a >= (1087 << 20)) | (code == 0x7F), 0x7E, code)
        code = tl.where(a > 0x7F800000, 0x7F, code)
        code = code | (sign << 7)
    elif FMT == 2:
        # from 65536 up (and inf) it is inf; a rounding carry into the top exponent gives inf too
        code = tl.where(a >= (143 << 23), 0x7C, code)
        code = tl.where(a > 0x7F800000, 0x7F, code)
        code = code | (sign << 7)
    else:
        # fnuz: no negative zero, and the one NaN code 0x80 stands for overflow, inf and NaN alike
        # (a rounding carry past the top code lands on 0x80 as well)
        code = tl.where(is_sub & (code == 0), 0, code | (sign << 7))
        FNUZ_MAX: tl.constexpr = 0x87 << 23 if FMT == 3 else 0x8F << 23  # 256 and 65536 as float32 bits
        code = tl.where(a >= FNUZ_MAX, 0x80, code)
    return code


@triton.jit
def decode(c, FMT: tl.constexpr):
    """The float32 values of the float8 codes ``c`` (int32, 0..255) of format ``FMT``, NaNs with torch's bits."""
    if FMT == 5:
        bits = tl.where(c == 0, 0x00400000, tl.where(c == 255, 0x7F800001, c << 23))
        return bits.to(tl.float32, bitcast=True)
    MB: tl.constexpr = 3 if (FMT == 1 or FMT == 3) else 2
    BIAS: tl.constexpr = 7 if FMT == 1 else (15 if FMT == 2 else (8 if FMT == 3 else 16))
    EMAX: tl.constexpr = (1 << (7 - MB)) - 1
    UNIT_BITS: tl.constexpr = (128 - BIAS - MB) << 23  # the smallest subnormal, 2**(1 - BIAS - MB), as float32 bits
    sign = (c >> 7) & 1
    e = (c >> MB) & EMAX
    m = c & ((1 << MB) - 1)
    normal = ((e - BIAS + 127) << 23) | (m << (23 - MB))
    unit = tl.full([], UNIT_BITS, tl.int32).to(tl.float32, bitcast=True)
    sub = (m.to(tl.float32) * unit).to(tl.int32, bitcast=True)  # exact: a small integer times a power of 2
    bits = _sign_bit(tl.where(e == 0, sub, normal), sign)
    if FMT == 1:
        bits = tl.where((c & 0x7F) == 0x7F, _sign_bit(0x7FF00000 + 0 * c, sign), bits)
    elif FMT == 2:
        special = tl.where(m == 0, 0x7F800000, 0x7FC00000 | (m << 21))  # inf, or the quieted NaN torch gives
        bits = tl.where(e == EMAX, _sign_bit(special, sign), bits)
    else:
        bits = tl.where(c == 0x80, 0x7F800001, bits)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _cast_kernel(src, dst, n, shape, s_src, s_dst, SRC_FMT: tl.constexpr, DST_FMT: tl.constexpr,
                 NDIM: tl.constexpr, CONTIG: tl.constexpr, INT64: tl.constexpr, BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, INT64)
    mask = lin < n
    if CONTIG:
        o_src = lin
        o_dst = lin
    else:
        o_src, o_dst = strided_offset2(lin, shape, s_src, s_dst, NDIM)
    v = tl.load(src + o_src, mask=mask)
    if SRC_FMT != 0:
        v = decode(v.to(tl.int32), SRC_FMT)
    if DST_FMT != 0:
        tl.store(dst + o_dst, encode(v.to(tl.float32), DST_FMT).to(tl.uint8), mask=mask)
    else:
        if dst.dtype.element_ty == tl.int1:
            v = v != 0
        elif dst.dtype.element_ty.is_int():
            v = float_to_int(v, dst.dtype.element_ty)
        tl.store(dst + o_dst, v.to(dst.dtype.element_ty), mask=mask)


def cast(dst, src, dst_fmt: int, src_fmt: int) -> None:
    """dst[...] = src, same shape, any strides, where at least one side is float8: that side is passed as
    its bytes (a uint8 tensor) and named by its format code."""
    n = dst.numel()
    if n == 0:
        return
    shape, (s_src, s_dst), contig = collapse(dst.shape, src.stride(), dst.stride())
    block = elementwise_block(n)
    launch(_cast_kernel, grid_1d(n, block), src, dst, n, shape, s_src, s_dst, SRC_FMT=src_fmt, DST_FMT=dst_fmt,
           NDIM=len(shape), CONTIG=contig, INT64=needs_int64(shape, s_src, s_dst), BLOCK=block)


@triton.jit(do_not_specialize=["fbits"])
def _fill_kernel(dst, n, shape, s_dst, fbits, FMT: tl.constexpr, NDIM: tl.constexpr, CONTIG: tl.constexpr,
                 INT64: tl.constexpr, BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, INT64)
    mask = lin < n
    o = lin if CONTIG else strided_offset(lin, shape, s_dst, NDIM)
    code = encode(load_f64_scalar(fbits).to(tl.float32), FMT)
    tl.store(dst + o, tl.broadcast_to(code.to(tl.uint8), (BLOCK,)), mask=mask)


def fill(dst, value: float, fmt: int) -> None:
    """Every element of the float8 tensor ``dst`` (passed as its bytes) set to ``value`` rounded to format ``fmt``."""
    n = dst.numel()
    if n == 0:
        return
    shape, (s_dst,), contig = collapse(dst.shape, dst.stride())
    block = elementwise_block(n)
    launch(_fill_kernel, grid_1d(n, block), dst, n, shape, s_dst, f64_bits(float(value)), FMT=fmt,
           NDIM=len(shape), CONTIG=contig, INT64=needs_int64(shape, s_dst), BLOCK=block)
