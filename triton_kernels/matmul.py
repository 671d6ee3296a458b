"""Matmul: C[b] = act(A[b] @ B[b] + bias), tiled, grouped, autotuned; any strides, any batch.

The kernel follows Triton's matmul tutorial: each program owns one BLOCK_M x BLOCK_N tile of C
and walks K in BLOCK_K steps with ``tl.dot``. Tiles are visited in *grouped* order (GROUP_M rows
of tiles share the same columns of B) so a wave of programs reuses A and B out of L2.

* **Strides, not copies.** A and B are read through their own (row, col) strides, so ``x.T`` or a
  sliced operand is multiplied in place; a stride of 1 is specialised by Triton and vectorises.
* **Batches.** Broadcast batch dims arrive as stride-0 dims; the launcher collapses them into as
  few dims as the layouts allow and each program walks its batches along grid axis 1.
* **Precision.** Low-precision inputs feed ``tl.dot`` natively with an fp32 accumulator (fp64 for
  fp64); the result is cast to the input dtype on store. fp32 uses IEEE fp32 unless the TF32
  switch (``tritensor.backends.cuda.matmul.allow_tf32``) is on. In the interpreter, fp16/bf16
  tiles are upcast to fp32 before the dot (its bf16 arithmetic is wrong, see DESIGN.md).
* **Epilogue.** ``bias`` (one value per output column) and an activation (relu or exact gelu)
  are applied to the fp32 accumulator before the store: that is ``linear`` (+ activation) in
  one pass over C.

On Hopper, ``matmul_tma.py`` holds a persistent, TMA-descriptor variant that the launcher
below prefers for contiguous operands; a 2-D product of a few output tiles with a long K
(``dot``, matrix-vector, ``X.T @ X``) is split along K instead (``matmul_splitk.py``).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.dtype_policy import float_compute
from ..runtime.launch import Site, launch
from . import matmul_splitk, matmul_tma
from ._common import (INTERPRET, apply_epilogue, cdiv, collapse, dot_over_k, grouped_tile, input_precision,
                      needs_int64)
from .autotune import autotune

ACTIVATIONS = (None, "relu", "gelu")

# GPU configurations (Triton tutorial's set, plus small tiles for skinny and fp64 problems).
# Configs whose tiles overflow shared memory for the operands' dtype are pruned before compiling
# (fitting_configs); the autotuner times the rest.
CONFIGS = [
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=3, num_warps=8),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 32, "GROUP_M": 8}, num_stages=4, num_warps=4),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, num_stages=4, num_warps=4),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=3, num_warps=8),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, num_stages=4, num_warps=4),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, num_stages=4, num_warps=4),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, num_stages=4, num_warps=4),
    # 4 warps: at 2 it spilled 8 B a thread in fp16/bf16 (96 registers, tools/sm90_report.py)
    triton.Config({"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, num_stages=5, num_warps=4),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 8}, num_stages=5, num_warps=2),
    triton.Config({"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=4, num_warps=4),
]
SMEM_BYTES = 232448  # shared memory one block may use on sm_90 (227 KB)


def fitting_configs(configs, named_args):
    """The configurations that fit the operands' dtype. Shared memory: ``num_stages`` A and B tiles
    of its element size; fp32 feeding TF32 tensor cores doubles fp16's bytes, so 128x256x64 at 3
    stages needs 288 KB there, fp64 more still. Registers: with 4-byte (or wider) operands a thread
    holding more than 64 accumulators spills (64x256 and 128x128 at 4 warps: 264 and 56 B in TF32;
    fp16 holds 128 without). Both found by tools/sm90_report.py."""
    size = named_args["a_ptr"].dtype.itemsize
    max_acc = 128 if size <= 2 else 64
    return [c for c in configs
            if (c.kwargs["BLOCK_M"] + c.kwargs["BLOCK_N"]) * c.kwargs["BLOCK_K"] * size * c.num_stages <= SMEM_BYTES
            and c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"] // (32 * c.num_warps) <= max_acc]


# The interpreter pays per program and per loop trip: few, large tiles.
INTERPRET_CONFIG = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 8}
MAX_GRID_Y = 65535  # CUDA's limit on gridDim.y; programs stride over larger batches


@autotune(configs=CONFIGS, key=["M", "N", "K", "stride_ak", "stride_bn", "INPUT_PRECISION"], prune=fitting_configs)
@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K, n_batch, batch_shape, sab, sbb, scb,
                   stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, stride_bias,
                   ACC: tl.constexpr, INPUT_PRECISION: tl.constexpr, UPCAST: tl.constexpr, HAS_BIAS: tl.constexpr,
                   ACTIVATION: tl.constexpr, NBATCH: tl.constexpr, INT64: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    if INT64:
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
    # Rows/cols past the edge wrap around (the tutorial's trick): loads need no M/N mask and stay
    # in bounds; the store mask throws those rows away.
    offs_am = offs_m % M
    offs_bn = offs_n % N
    for bi in range(tl.program_id(1), n_batch, tl.num_programs(1)):
        # Batch index -> element offsets in A, B, C (batch dims are row-major, any strides).
        oa = 0
        ob = 0
        oc = 0
        rem = bi.to(tl.int64) if INT64 else bi
        for d in tl.static_range(NBATCH - 1, -1, -1):
            i = rem % batch_shape[d]
            rem = rem // batch_shape[d]
            oa += i * sab[d]
            ob += i * sbb[d]
            oc += i * scb[d]
        a_ptrs = a_ptr + oa + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
        b_ptrs = b_ptr + ob + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
        acc = dot_over_k(tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC), a_ptrs, b_ptrs, K, stride_ak, stride_bk, offs_k,
                         INPUT_PRECISION, UPCAST, BLOCK_K)
        acc = apply_epilogue(acc, bias_ptr, offs_n, N, stride_bias, HAS_BIAS, ACTIVATION)
        c_ptrs = c_ptr + oc + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
        c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


_geometries: dict = {}  # (a's shape and strides, b's, out's strides) -> the launch geometry
_GEOMETRIES_KEPT = 4096


def _geometry(a_shape, a_stride, b_shape, b_stride, out_stride, out_shape):
    """Batch dims collapsed, per-operand strides, whether offsets need int64: once per layout."""
    nb = len(a_shape) - 2
    bshape, (sab, sbb, scb), _ = collapse(tuple(a_shape[:nb]), a_stride[:nb], b_stride[:nb], out_stride[:nb])
    n_batch = 1
    for s in bshape:
        n_batch *= s
    int64 = needs_int64(a_shape, a_stride) or needs_int64(b_shape, b_stride) or needs_int64(out_shape, out_stride)
    return n_batch, bshape, sab, sbb, scb, a_stride[nb:], b_stride[nb:], out_stride[nb:], int64


def matmul(out, a, b, bias=None, activation=None, allow_tf32: bool = False) -> None:
    """out[..., M, N] = act(a[..., M, K] @ b[..., K, N] + bias[N]).

    ``a``, ``b`` and ``out`` already share one batch shape (broadcast dims have stride 0), one
    dtype and one device; ``bias`` is a 1-D tensor of N values or None; ``activation`` is one of
    :data:`ACTIVATIONS`. Checking all that is ``core/ops/matmul.py``'s job.
    """
    assert activation in ACTIVATIONS, activation
    *batch, M, K = a.shape
    N = b.shape[-1]
    if out.numel() == 0:
        return
    if not batch:
        split = matmul_splitk.plan(M, N, K, 1)
        if split > 1:  # a few output tiles and a long K: spread K over the SMs
            int64 = needs_int64(a.shape, a.stride()) or needs_int64(b.shape, b.stride()) or \
                needs_int64(out.shape, out.stride())
            matmul_splitk.matmul(out, a, b, bias, activation, split, input_precision(a.dtype.name, allow_tf32), int64)
            return
    if bias is None and activation is None and K > 0:
        if matmul_tma.usable(out, a, b):
            matmul_tma.matmul(out, a, b, allow_tf32)
            return
    key = (tuple(a.shape), a.stride(), tuple(b.shape), b.stride(), out.stride())
    geometry = _geometries.get(key)
    if geometry is None:
        geometry = _geometries[key] = _geometry(*key, out.shape)
        if len(_geometries) > _GEOMETRIES_KEPT:
            _geometries.clear()
    n_batch, bshape, sab, sbb, scb, sa, sb, so, int64 = geometry
    # The launch site (kernel and constexprs, ``runtime/launch.py: Site``) of these options: the
    # accumulator (the dtype policy's float_compute, a tl.dtype) is hashed once, when the site is made.
    skey = (a.dtype, input_precision(a.dtype.name, allow_tf32), bias is not None, activation, len(bshape), int64)
    site = _sites.get(skey)
    if site is None:
        site = _site(*skey)

    def grid(META):
        return (cdiv(M, META["BLOCK_M"]) * cdiv(N, META["BLOCK_N"]), min(n_batch, MAX_GRID_Y))

    launch(site, grid, a, b, out, bias if bias is not None else out, M, N, K, n_batch,
           bshape, sab, sbb, scb, sa[0], sa[1], sb[0], sb[1], so[0], so[1],
           bias.stride(0) if bias is not None else 0)


_sites: dict = {}  # (dtype, input precision, has bias, activation, batch dims, int64) -> Site


def _site(d, precision, has_bias, activation, nbatch, int64) -> Site:
    meta = dict(INTERPRET_CONFIG) if INTERPRET else {}
    site = _sites[(d, precision, has_bias, activation, nbatch, int64)] = Site(
        _matmul_kernel, ACC=getattr(tl, float_compute(d).name), INPUT_PRECISION=precision, UPCAST=INTERPRET,
        HAS_BIAS=has_bias, ACTIVATION=activation, NBATCH=nbatch, INT64=int64, **meta)
    return site

