"""Split-K matmul: for products whose output is a few tiles and whose K is long.

``x.dot(y)`` (1 x K @ K x 1), a matrix-vector product with few rows, ``X.T @ X`` for a tall
``X`` and L-BFGS's history products all have an output of one or a few tiles and a long K. The
general kernel (``matmul.py``) gives each output tile one program that walks all of K, so such a
product runs on one or a few of the H100's 132 SMs: a 16M-element fp32 dot reads 128 MB through
one SM. Here K is cut into ``split`` chunks (multiples of :data:`K_ALIGN`): program ``(t, s)``
computes tile ``t`` over chunk ``s`` into an fp32 (fp64 for fp64) workspace ``[split, M, N]``,
and a second kernel sums the ``split`` partials of each element in a fixed order (so the result
is deterministic, no atomics), applies the bias and activation epilogue and stores in the output's
dtype and strides.

:func:`plan` decides: single-matrix problems (no batch) whose tile count leaves most SMs idle and
whose K gives every program at least :data:`MIN_CHUNK` of it. In CPU mode the thresholds are
small so that the tests run this path (the interpreter gains nothing from it).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.dtype_policy import FLOAT_COMPUTE
from ..runtime.launch import launch
from ._common import INTERPRET, apply_epilogue, cdiv, dot_over_k, grouped_tile, per_mode
from .autotune import autotune

TARGET_PROGRAMS = per_mode(4, 264)  # about two waves of the H100's 132 SMs
MIN_CHUNK = per_mode(256, 1024)  # the least K one program takes
MAX_TILES = per_mode(2, 16)  # 64 x 64 tiles of output at most: bigger outputs fill the GPU unsplit
K_ALIGN = 128  # chunks are whole BLOCK_K steps for every config

# Small tiles first: the products this serves have an M or N of 1..64 (tl.dot's least side is 16).
# No 128 x 128 tile: an output of at most MAX_TILES 64 x 64 tiles gains nothing from it, and in
# fp64 it needs 256 KB of shared memory, more than sm_90's 227 KB (tools/sm90_compile.py).
CONFIGS = [
    triton.Config({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 128, "GROUP_M": 8}, num_stages=4, num_warps=4),
    triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 128, "GROUP_M": 8}, num_stages=4, num_warps=4),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=4, num_warps=4),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=3, num_warps=4),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=3, num_warps=4),
]
INTERPRET_CONFIG = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 128, "GROUP_M": 8}
INTERPRET_SUM_BLOCK = {"BLOCK_M": 32, "BLOCK_N": 32}
SUM_BLOCK = {"BLOCK_M": 32, "BLOCK_N": 64}


@autotune(configs=CONFIGS, key=["M", "N", "K", "chunk", "stride_ak", "stride_bn", "INPUT_PRECISION"])
@triton.jit
def _matmul_splitk_kernel(a_ptr, b_ptr, w_ptr, M, N, K, chunk, stride_am, stride_ak, stride_bk, stride_bn,
                          INPUT_PRECISION: tl.constexpr, UPCAST: tl.constexpr, INT64: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          GROUP_M: tl.constexpr):
    """w[s] = A[:, ks:ke] @ B[ks:ke, :] for this program's tile, over chunk ``s = program_id(1)``."""
    ACC: tl.constexpr = w_ptr.dtype.element_ty
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    s = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    k0 = s * chunk
    if INT64:
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
        k0 = k0.to(tl.int64)
    # rows/cols past the edge wrap around, as in matmul.py: in-bounds loads, masked store
    a_ptrs = a_ptr + (offs_m % M)[:, None] * stride_am + (k0 + offs_k)[None, :] * stride_ak
    b_ptrs = b_ptr + (k0 + offs_k)[:, None] * stride_bk + (offs_n % N)[None, :] * stride_bn
    acc = dot_over_k(tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC), a_ptrs, b_ptrs, tl.minimum(chunk, K - k0), stride_ak,
                     stride_bk, offs_k, INPUT_PRECISION, UPCAST, BLOCK_K)
    w_ptrs = w_ptr + s.to(tl.int64) * M * N + offs_m[:, None] * N + offs_n[None, :]
    tl.store(w_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def _splitk_sum_kernel(w_ptr, c_ptr, bias_ptr, M, N, split, stride_cm, stride_cn, stride_bias,
                       HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr, INT64: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """c = act(sum_s w[s] + bias), the partials added in order s = 0, 1, ...: deterministic."""
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    if INT64:
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    w_ptrs = w_ptr + offs_m[:, None] * N + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=w_ptr.dtype.element_ty)
    for s in range(0, split):
        acc += tl.load(w_ptrs, mask=mask, other=0.0)
        w_ptrs += M * N
    acc = apply_epilogue(acc, bias_ptr, offs_n, N, stride_bias, HAS_BIAS, ACTIVATION)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def plan(M: int, N: int, K: int, n_batch: int) -> int:
    """How many K chunks to split this product into; 0 or 1: don't split."""
    if n_batch != 1 or K < 2 * MIN_CHUNK:
        return 0
    tiles = cdiv(M, 64) * cdiv(N, 64)
    if tiles > MAX_TILES:
        return 0
    split = min(TARGET_PROGRAMS // tiles, K // MIN_CHUNK)
    if split < 2:
        return 0
    chunk = cdiv(cdiv(K, split), K_ALIGN) * K_ALIGN
    return cdiv(K, chunk)


def matmul(out, a, b, bias, activation, split: int, input_precision: str, int64: bool) -> None:
    """out = act(a @ b + bias) for 2-D ``a`` [M, K], ``b`` [K, N] in ``split`` K chunks
    (:func:`plan`'s answer); the same contract as ``matmul.matmul``."""
    M, K = a.shape
    N = b.shape[1]
    chunk = cdiv(cdiv(K, split), K_ALIGN) * K_ALIGN
    split = cdiv(K, chunk)
    acc_dtype = FLOAT_COMPUTE[a.dtype]
    w = out.new_empty((split, M, N), dtype=acc_dtype)
    meta = dict(INTERPRET_CONFIG) if INTERPRET else {}
    int64 = int64 or split * M * N >= 2**31

    def grid(META):
        return (cdiv(M, META["BLOCK_M"]) * cdiv(N, META["BLOCK_N"]), split)

    launch(_matmul_splitk_kernel, grid, a, b, w, M, N, K, chunk, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
           INPUT_PRECISION=input_precision, UPCAST=INTERPRET, INT64=int64, **meta)
    sb = INTERPRET_SUM_BLOCK if INTERPRET else SUM_BLOCK
    launch(_splitk_sum_kernel, (cdiv(M, sb["BLOCK_M"]), cdiv(N, sb["BLOCK_N"])), w, out,
           bias if bias is not None else out, M, N, split, out.stride(0), out.stride(1),
           bias.stride(0) if bias is not None else 0, HAS_BIAS=bias is not None, ACTIVATION=activation,
           INT64=int64, **sb)
