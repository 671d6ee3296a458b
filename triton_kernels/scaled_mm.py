"""``F.scaled_mm``'s kernel: ``out = (A @ B) * scale_a * scale_b (+ bias)`` for float8 operands.

Each program computes one (BLOCK_M, BLOCK_N) tile. The float8 operands arrive as their bytes
(uint8 tensors, the format named by a code, ``float8.py``) and are decoded to float32 in the kernel,
tile by tile, with the same bit-level code as the casts, so the interpreter and a GPU read the same
values. A decoded float8 value has at most 4 significant bits, so TF32 holds it exactly and every
product is exact: the tensor-core dot (TF32 on a GPU) sums exact products in float32, as torch's
CPU path does after upcasting. The scales are applied once to the float32 sum (a scalar each for
TensorWise, scale_a per row and scale_b per column for RowWise), then the bias, then one rounding
to the output dtype (float8 outputs through the bit-level encoder).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import launch
from ._common import GPU_SHAPES, INTERPRET, cdiv, float_to_int, input_precision
from .float8 import decode, encode

BLOCK = (16, 16, 32) if INTERPRET else (64, 64, 64)  # (M, N, K); tl.dot's least side is 16


@triton.jit
def _scaled_mm_kernel(a, b, out, sa, sb, bias, M, N, K, s_am, s_ak, s_bk, s_bn, s_om, s_on,
                      FMT_A: tl.constexpr, FMT_B: tl.constexpr, ROWWISE: tl.constexpr, HAS_BIAS: tl.constexpr,
                      OUT_FMT: tl.constexpr, INPUT_PRECISION: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < M
    n_ok = rn < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        ca = tl.load(a + rm[:, None] * s_am + kk[None, :] * s_ak, mask=m_ok[:, None] & (kk[None, :] < K), other=0)
        cb = tl.load(b + kk[:, None] * s_bk + rn[None, :] * s_bn, mask=(kk[:, None] < K) & n_ok[None, :], other=0)
        fa = decode(ca.to(tl.int32), FMT_A)
        fb = decode(cb.to(tl.int32), FMT_B)
        # past K the codes read as 0: every format's 0 is +0.0 but e8m0fnu's (2**-127), so zero them outright
        fa = tl.where(kk[None, :] < K, fa, 0.0)
        fb = tl.where(kk[:, None] < K, fb, 0.0)
        acc = tl.dot(fa, fb, acc, input_precision=INPUT_PRECISION, out_dtype=tl.float32)
    if ROWWISE:
        acc = acc * tl.load(sa + rm, mask=m_ok, other=0.0)[:, None] * tl.load(sb + rn, mask=n_ok, other=0.0)[None, :]
    else:
        acc = acc * tl.load(sa) * tl.load(sb)
    if HAS_BIAS:
        acc = acc + tl.load(bias + rn, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    o = out + rm[:, None] * s_om + rn[None, :] * s_on
    mask = m_ok[:, None] & n_ok[None, :]
    if OUT_FMT != 0:
        tl.store(o, encode(acc, OUT_FMT).to(tl.uint8), mask=mask)
    elif out.dtype.element_ty.is_int():
        tl.store(o, float_to_int(acc, out.dtype.element_ty), mask=mask)
    else:
        tl.store(o, acc.to(out.dtype.element_ty), mask=mask)


def scaled_mm(out, a, b, scale_a, scale_b, bias, fmt_a: int, fmt_b: int, out_fmt: int, rowwise: bool) -> None:
    """out (M, N) = a (M, K) @ b (K, N) scaled: ``a``/``b`` (and ``out`` when ``out_fmt``) are float8 tensors'
    bytes, any strides; the float32 scales are contiguous (a scalar each, or (M,) and (N,) when ``rowwise``);
    ``bias`` an (N,) tensor or None."""
    M, K = a.shape
    N = b.shape[1]
    if M == 0 or N == 0:
        return
    bm, bn, bk = BLOCK
    launch(_scaled_mm_kernel, (cdiv(M, bm), cdiv(N, bn)), a, b, out, scale_a, scale_b,
           bias if bias is not None else scale_a, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
           out.stride(0), out.stride(1), FMT_A=fmt_a, FMT_B=fmt_b, ROWWISE=rowwise, HAS_BIAS=bias is not None,
           OUT_FMT=out_fmt, INPUT_PRECISION=input_precision("float32", GPU_SHAPES),
           BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
