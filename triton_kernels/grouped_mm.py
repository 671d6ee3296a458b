"""Grouped GEMM (``torch._grouped_mm``, ``F.grouped_mm``): many matrix products of different sizes
in ONE launch, as a mixture-of-experts layer multiplies each expert's tokens by its weight.

The groups are cut from one operand along one dimension by ``offs`` (each group's end, int32,
cumulative) or are a batch dimension. Program ``(m, n, g)`` computes one output tile of group
``g``; the mode says which extent of the product ``offs`` cuts:

- ``MODE == 0``: 3-D x 3-D, no offsets: a batched product (A[g] @ B[g]);
- ``MODE == 1``: 2-D x 3-D, rows of A: out[lo:hi] = A[lo:hi] @ B[g];
- ``MODE == 2``: 2-D x 2-D, K: out[g] = A[:, lo:hi] @ B[lo:hi];
- ``MODE == 3``: 3-D x 2-D, columns of B: out[:, lo:hi] = A[g] @ B[:, lo:hi].

A tile of a cut extent starts at its group's ``lo``, and the grid covers the longest group a
group can be (the whole extent), so programs past their group's end store nothing. Operands are
read in place through their strides (a 2-D operand has group stride 0); the K loop is the matmul
kernels' (``_common.dot_over_k``), accumulating in fp32 (fp64 for fp64).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.dtype_policy import FLOAT_COMPUTE_NAME
from ..runtime.launch import launch
from ._common import INTERPRET, cdiv, dot_over_k, input_precision

BLOCK = (16, 16, 32) if INTERPRET else (64, 64, 32)  # (M, N, K); tl.dot's least side is 16


@triton.jit
def _grouped_mm_kernel(a_ptr, b_ptr, c_ptr, offs_ptr, M, N, K, sag, sam, sak, sbg, sbk, sbn, scg, scm, scn,
                       ACC: tl.constexpr, MODE: tl.constexpr, INPUT_PRECISION: tl.constexpr, UPCAST: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    g = tl.program_id(2)
    lo = 0
    hi = 0
    if MODE != 0:
        hi = tl.load(offs_ptr + g).to(tl.int32)
        lo = tl.load(offs_ptr + tl.maximum(g - 1, 0)).to(tl.int32)
        lo = tl.where(g > 0, lo, 0)
    row_lo, row_hi = 0, M
    col_lo, col_hi = 0, N
    k_lo, k_hi = 0, K
    if MODE == 1:
        row_lo, row_hi = lo, tl.minimum(hi, M)
    if MODE == 2:
        k_lo, k_hi = lo, tl.minimum(hi, K)
    if MODE == 3:
        col_lo, col_hi = lo, tl.minimum(hi, N)
    rows = row_lo + pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = col_lo + pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # loads stay in bounds (clamped rows and columns); the store is masked to the group
    rows_in = tl.minimum(rows, M - 1)
    cols_in = tl.minimum(cols, N - 1)
    offs_k = tl.arange(0, BLOCK_K)
    g64 = g.to(tl.int64)
    a_ptrs = a_ptr + g64 * sag + rows_in[:, None].to(tl.int64) * sam + (k_lo + offs_k)[None, :].to(tl.int64) * sak
    b_ptrs = b_ptr + g64 * sbg + (k_lo + offs_k)[:, None].to(tl.int64) * sbk + cols_in[None, :].to(tl.int64) * sbn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC)
    acc = dot_over_k(acc, a_ptrs, b_ptrs, tl.maximum(k_hi - k_lo, 0), sak, sbk, offs_k, INPUT_PRECISION, UPCAST,
                     BLOCK_K)
    c_ptrs = c_ptr + g64 * scg + rows[:, None].to(tl.int64) * scm + cols[None, :].to(tl.int64) * scn
    mask = (rows[:, None] < row_hi) & (cols[None, :] < col_hi)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def grouped_mm(out, a3, b3, offs, mode: int, M: int, N: int, K: int, groups: int, a_group_stride: int,
               b_group_stride: int, out_group_stride: int, allow_tf32: bool = False) -> None:
    """out (written in place) = the grouped product of ``mode`` (module docstring). ``a3``/``b3``
    are the operands (2-D or 3-D, any strides: the last two dims are read as (M, K) / (K, N));
    the group strides are 0 for a 2-D operand; ``offs`` the int32 group ends (None in mode 0)."""
    if groups == 0 or M == 0 or N == 0:
        return
    bm, bn, bk = BLOCK
    sa, sb, sc = a3.stride(), b3.stride(), out.stride()
    offs_arg = offs if offs is not None else out  # never read in mode 0
    launch(_grouped_mm_kernel, (cdiv(M, bm), cdiv(N, bn), groups), a3, b3, out, offs_arg, M, N, K,
           a_group_stride, sa[-2], sa[-1], b_group_stride, sb[-2], sb[-1], out_group_stride, sc[-2], sc[-1],
           ACC=getattr(tl, FLOAT_COMPUTE_NAME[a3.dtype.name]), MODE=mode, INPUT_PRECISION=input_precision(a3.dtype.name, allow_tf32),
           UPCAST=INTERPRET, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
