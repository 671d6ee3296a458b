"""Hopper (sm_90) attention forward: ``attention.py``'s FlashAttention-2 loop with every tile moved by TMA.

Why a second forward kernel: on H100 the Tensor Memory Accelerator copies a whole Q, K or V
tile global->shared in one instruction, with the bounds handled in hardware (rows past L or S
arrive as zeros, the O store is clipped), so the loop spends no registers or instructions on
pointer and mask arithmetic, and Triton can pipeline the K/V copies ahead of the two dots.
The scores are kept in base 2 (``scale · log2 e`` folded into one multiply, ``exp2`` instead
of ``exp``), as FlashAttention and Triton's tutorial do; the log-sum-exp written for the
backward kernels is converted back to the natural log, so ``attention_bwd.py`` runs unchanged.

Scope: the plain case that dominates training and inference: fp16/bf16, head dims 64 and 128
(key and value alike), no ``attn_mask``, no dropout, causal or not (any diagonal offset),
grouped-query heads, one outer batch dim (``core/ops/attention.py`` collapses the others where
the layout allows). Operands are addressed as 4-D ``(batch, heads, rows, head_dim)``
descriptors, so any 16-byte-aligned strides work and no tile ever reads across a head. Every
other call runs ``attention.py``'s kernel, which is also what CPU mode and pre-Hopper GPUs run:
:func:`usable` selects this kernel in GPU mode on compute capability 9.x only. Triton's
interpreter emulates TMA descriptors, so the tests call :func:`forward` directly in CPU mode
(tiles upcast to fp32 there: the interpreter's bf16 arithmetic is wrong), and
``tests/test_sm90_compile.py`` compiles it for sm_90 in every configuration.

Not warp-specialised: Triton 3.9 compiles ``tl.range(..., warp_specialize=True)`` on this loop for
sm_90 in 2 of its 18 configurations ("PassManager::run failed" in the others; its warp
specialisation targets Blackwell), so the loop relies on the software pipelining that
``num_stages`` sets. Speed against the general kernel and torch's flash backend is measured by
``python -m tritensor.bench attention`` on a GPU (``attention_tma.ENABLED = False`` runs the
general kernel for comparison).
"""
from __future__ import annotations

import math

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from ..runtime import cuda, mode
from ..runtime.launch import launch
from ._common import HOPPER_SMEM_BYTES, INTERPRET, cdiv
from .attention_common import (MAX_GRID_Y, causal_key_bounds, interpret_blocks, online_softmax_step, score_mask,
                               seq_bucket)
from .autotune import autotune

ENABLED = True  # set False to force the general kernel (the benchmark compares the two)
HEAD_DIMS = (64, 128)
MIN_SEQ = 128  # below this one tile covers the sequence and the general kernel is as good
LOG2E = 1.4426950408889634


def _set_block_shapes(nargs):
    """Autotuner pre-hook: each descriptor's block is one (BLOCK rows x D) tile of one head."""
    bm, bn, d = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["D"]
    nargs["q_desc"].block_shape = [1, 1, bm, d]
    nargs["o_desc"].block_shape = [1, 1, bm, d]
    nargs["k_desc"].block_shape = [1, 1, bn, d]
    nargs["v_desc"].block_shape = [1, 1, bn, d]


def _keep(conf):
    """Drop 8-warp configs on small tiles (too little work per warp), as ``attention.py`` does, and
    pipelines that do not fit Hopper's shared memory at the largest head dim: ``num_stages`` K and
    V tiles plus the Q tile, 2 bytes an element (BLOCK_N = 128 at 4 stages needs 280-296 KB at
    D = 128: found by tools/sm90_compile.py)."""
    bm, bn, d = conf.kwargs["BLOCK_M"], conf.kwargs["BLOCK_N"], max(HEAD_DIMS)
    if bm * bn < 128 * 128 and conf.num_warps == 8:
        return False
    return conf.num_stages * 2 * bn * d * 2 + bm * d * 2 <= HOPPER_SMEM_BYTES


CONFIGS = [c for c in (triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_stages=s, num_warps=w,
                                     pre_hook=_set_block_shapes)
                       for bm in (64, 128) for bn in (32, 64, 128) for s in (2, 3, 4) for w in (4, 8))
           if _keep(c)]


@triton.jit
def _tile(acc, l_i, m_i, q, k_desc, v_desc, b, hk, start_n, offs_m, L, S, qk_scale, causal_offset,
          D: tl.constexpr, EDGE: tl.constexpr, IS_CAUSAL: tl.constexpr, UPCAST: tl.constexpr,
          BLOCK_N: tl.constexpr):
    k = k_desc.load([b, hk, start_n, 0]).reshape(BLOCK_N, D)  # rows past S arrive as zeros
    v = v_desc.load([b, hk, start_n, 0]).reshape(BLOCK_N, D)
    if UPCAST:
        k = k.to(tl.float32)
        v = v.to(tl.float32)
    s = tl.dot(q, k.T) * qk_scale  # base-2 scores
    if EDGE:  # the causal band and the tail past S; whole blocks before them need no mask
        offs_n = start_n + tl.arange(0, BLOCK_N)
        s = score_mask(s, offs_m[:, None], offs_n[None, :], L, S, causal_offset, L, IS_CAUSAL, 0, True)
    p, alpha, l_i, m_new = online_softmax_step(s, m_i, l_i, True)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, l_i, m_new


@autotune(configs=CONFIGS, key=["D", "IS_CAUSAL", "SEQ_BUCKET", "DTYPE"])
@triton.jit(do_not_specialize=["causal_offset"])
def _attn_fwd_tma(q_desc, k_desc, v_desc, o_desc, LSE, H, GROUP, L, S, qk_scale, causal_offset, SEQ_BUCKET,
                  D: tl.constexpr, IS_CAUSAL: tl.constexpr, UPCAST: tl.constexpr, DTYPE: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # DTYPE (the operands' dtype name) only keys the autotuner: it adds the dtypes of arguments
    # that have one, and descriptors have none, so fp16 and bf16 would share one tuning.
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    hk = h // GROUP  # grouped-query attention: query head h reads key/value head h // GROUP
    offs_m = start_m + tl.arange(0, BLOCK_M)
    q = q_desc.load([b, h, start_m, 0]).reshape(BLOCK_M, D)
    if UPCAST:
        q = q.to(tl.float32)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    full, hi = causal_key_bounds(start_m, L, S, causal_offset, IS_CAUSAL, BLOCK_M, BLOCK_N)
    for start_n in tl.range(0, full, BLOCK_N):
        acc, l_i, m_i = _tile(acc, l_i, m_i, q, k_desc, v_desc, b, hk, start_n, offs_m, L, S, qk_scale,
                              causal_offset, D, False, IS_CAUSAL, UPCAST, BLOCK_N)
    for start_n in tl.range(full, hi, BLOCK_N):
        acc, l_i, m_i = _tile(acc, l_i, m_i, q, k_desc, v_desc, b, hk, start_n, offs_m, L, S, qk_scale,
                              causal_offset, D, True, IS_CAUSAL, UPCAST, BLOCK_N)
    empty = l_i == 0.0  # every key masked out: output 0, lse +inf (the backward's exp(s - lse) is 0)
    out = acc / tl.where(empty, 1.0, l_i)[:, None]
    lse2 = tl.where(empty, 0.0, m_i) + tl.math.log2(tl.where(empty, 1.0, l_i))
    lse = tl.where(empty, float("inf"), lse2 * 0.6931471805599453)  # natural log, as attention.py's
    tl.store(LSE + bh.to(tl.int64) * L + offs_m, lse, mask=offs_m < L)
    o_desc.store([b, h, start_m, 0], out.to(o_desc.dtype).reshape(1, 1, BLOCK_M, D))  # clipped at L


def _desc_dims(t, nb: int, nbatch: int):
    """(shape, strides) of ``t`` (*B, H, rows, D) as 4-D (batch, H, rows, D); None if TMA cannot
    address it. A dim of size 1 is never indexed past 0: it takes a valid stride whatever its own."""
    if nb > 1 or t.stride()[-1] != 1 or t.data_ptr() % 16:
        return None
    shape = [nbatch if nb else 1, *t.shape[-3:]]
    strides = list(t.stride()[-4:] if nb else (0, *t.stride()[-3:]))
    isz = t.dtype.itemsize
    for i in range(3):
        if shape[i] == 1:
            strides[i] = strides[i + 1] * shape[i + 1] if strides[i + 1] else 16 // isz * shape[-1]
        if strides[i] <= 0 or (strides[i] * isz) % 16:
            return None
    return shape, strides


def usable(out, q, k, v, mask_kind, dropout_p) -> bool:
    """Is this call one the Hopper kernel handles (and should)? GPU mode only."""
    if not (ENABLED and mode.GPU and q.device.type == "cuda" and mask_kind is None and dropout_p == 0):
        return False
    if q.dtype.name not in ("float16", "bfloat16") or q.shape[-1] not in HEAD_DIMS or v.shape[-1] != q.shape[-1]:
        return False
    if max(q.shape[-2], k.shape[-2]) < MIN_SEQ or q.ndim > 4 or q.shape[-3] * math.prod(q.shape[:-3]) > MAX_GRID_Y:
        return False
    if cuda.get_device_capability(q.device.index)[0] != 9:
        return False
    nb = q.ndim - 3
    return all(_desc_dims(t, nb, math.prod(q.shape[:-3])) is not None for t in (q, k, v, out))


def forward(out, lse, q, k, v, group: int, scale: float, causal_offset: int, is_causal: bool) -> None:
    """out = attention(q, k, v) and lse = its natural log-sum-exp per (batch·head, row), for
    (*B, H, L, D) operands with at most one batch dim (K/V with H // group heads) that
    :func:`usable` accepted (the tests call it directly in CPU mode)."""
    nb = q.ndim - 3
    nbatch = math.prod(q.shape[:-3])
    H, L, D = q.shape[-3], q.shape[-2], q.shape[-1]
    S = k.shape[-2]
    if out.numel() == 0:
        return
    descs = []
    for t in (q, k, v, out):
        dims = _desc_dims(t, nb, nbatch)
        assert dims is not None, "attention_tma.forward: an operand TMA cannot address (see usable())"
        descs.append(TensorDescriptor(t, dims[0], dims[1], [1, 1, 64, D]))  # blocks: set per config
    meta = dict(D=D, IS_CAUSAL=bool(is_causal), UPCAST=INTERPRET, DTYPE=q.dtype.name)
    if INTERPRET:
        meta.update(interpret_blocks(L, S))
        _set_block_shapes({"q_desc": descs[0], "k_desc": descs[1], "v_desc": descs[2], "o_desc": descs[3], **meta})
    grid = lambda META: (cdiv(L, META["BLOCK_M"]), nbatch * H)  # noqa: E731
    launch(_attn_fwd_tma, grid, *descs, lse, H, group, L, S, float(scale * LOG2E), int(causal_offset),
           seq_bucket(L, S), **meta)
