"""conv2d as implicit GEMM, run NHWC: forward, grad-input and grad-weight kernels, plus a direct kernel.

Implicit GEMM: a convolution *is* a matrix product once the input patches are laid out as rows,
but materialising that im2col matrix costs KH*KW times the input in memory traffic. Here each
program computes the GEMM tile's row/column/K indices and gathers the patch elements straight
from the activation (masked where the window hangs over the padding), then feeds ``tl.dot``.
The three GEMMs, per group ``g`` (grid axis 1):

============  ======================  ====================  ======================
kernel        rows (M)                cols (N)              reduction (K)
============  ======================  ====================  ======================
forward       (n, oh, ow)             out channel oc        (kh, kw, c)
grad-input    (n, ih, iw)             in channel c          (kh, kw, oc)
grad-weight   out channel oc          in channel c (a tap   (n, oh, ow), split in
                                      per program)          chunks across programs
============  ======================  ====================  ======================

The GEMM kernels run NHWC, whatever the caller's layout (``core/ops/conv.py`` repacks an NCHW
tensor on the way in and out with ``conv_repack.py``, and caches the packed weights): with the
channels at unit stride, every operand goes to shared memory by 16-byte ``cp.async`` and every
output is stored 16 bytes at a time. On NCHW the same kernels gathered 2 bytes at a time, their
address math for rows along the output width kept live across the loop, and spilled (the sm_90
report in benchmarks/RESULTS.md). The forward and grad-input weights are packed K-major ((OC, KH,
KW, Cg) and (groups, KH, KW, Cg, OCg)), which TF32's warpgroup MMA requires of B.

grad-input gathers ``grad_out[oh, ow]`` with ``oh = (ih + pad - kh*dil) / stride`` where that
divides exactly (a transposed convolution); grad-weight reduces over the whole batch and image,
split into pixel chunks so a layer's few (oc, c) tiles still fill the GPU, into an fp32 workspace
summed in order by a second kernel. Every kernel accumulates in fp32 (fp64 for fp64: the dtype
policy's ``float_compute``, which the launchers pass as the constexpr ``ACC``) and casts on store;
no atomics, so results are deterministic.

Forward and grad-input walk the window statically (KH, KW compile-time) and the reduced channels
in BLOCK_K chunks, so their inner loop is one add and one load per operand.

Few channels (under 16 a group on either side: the RGB stem, depthwise) have no channel vector
to load: those convolutions read the caller's layout in place, with no repack. The stem keeps a
flat (c, kh, kw) reduction (``_conv2d_fwd_flat_kernel``: 147 dense K values for 3 channels of
7x7); depthwise and other thin convolutions (a GEMM side under 16, which ``tl.dot`` cannot use
well) take ``_conv2d_direct_kernel``, a bandwidth kernel: one output element per lane, a plain
loop over (c, kh, kw), lanes along the output width reading neighbouring input.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.dtype_policy import FLOAT_COMPUTE_NAME
from ..runtime.launch import Site, launch
from ._common import INTERPRET, cdiv, needs_int64, per_mode
from .autotune import autotune
from ._common import grouped_tile, input_precision

# Warpgroup-sized tiles only (4 or 8 warps, 64 or 128 rows: what wgmma needs). The 2-warp 32x64
# and 64x32 tiles of the matmul kernel are for skinny products; a convolution's GEMM has a pixel
# side of N*OH*OW (1,568 at ResNet-50's smallest layer, batch 32) and a channel side of 64 and up,
# and 64x64 serves the small ones.
CONFIGS = [
    triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_stages=s, num_warps=w)
    for bm, bn, bk, s, w in [
        (128, 128, 32, 3, 8), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (64, 64, 32, 4, 4),
        (128, 128, 64, 3, 8), (64, 64, 64, 3, 4),
    ]
]
SMEM_BYTES = 232448  # shared memory one block may use on sm_90 (227 KB)


def fitting_configs(configs, named_args):
    """The configurations that fit the operands' dtype: ``num_stages`` A and B tiles in shared
    memory (at most 128 KB of them for 4-byte operands: TF32 grad-input at stride 2, whose
    per-tap parity masks are live across the loop, spilled 72 B at 255 registers in 128x128x64,
    192 KB), and at most 128 fp32 accumulators a thread for 2-byte operands, 64 for wider ones
    (what tools/sm90_report.py showed spilling, as for the matmul kernel)."""
    ptr = named_args["x"] if "x" in named_args else named_args["dy"]
    size = ptr.dtype.itemsize
    max_acc = 128 if size <= 2 else 64
    smem = SMEM_BYTES if size <= 2 else 128 * 1024
    return [c for c in configs
            if (c.kwargs["BLOCK_M"] + c.kwargs["BLOCK_N"]) * c.kwargs["BLOCK_K"] * size * c.num_stages <= smem
            and c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"] // (32 * c.num_warps) <= max_acc]


INTERPRET_CONFIG = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 8}
DIRECT_BLOCK = per_mode(8192, 256)
SUM_BLOCK = per_mode(4096, 1024)
WGRAD_PROGRAMS = per_mode(64, 264)  # grad-weight programs aimed at: two waves of 132 SMs (CPU mode: the split path runs)
WGRAD_MIN_CHUNK = per_mode(64, 1024)  # pixels a grad-weight program reduces at least
MIN_DOT = 16  # tl.dot's smallest tile side: GEMMs thinner than this take the direct kernel
_KEY = ["GEMM_M", "GEMM_N", "GEMM_K", "INPUT_PRECISION"]
_FWD_KEY = ["GEMM_M", "GEMM_N", "Cg", "KH", "KW", "INPUT_PRECISION"]
_BWD_INPUT_KEY = ["GEMM_M", "GEMM_N", "OCg", "KH", "KW", "INPUT_PRECISION"]
_WGRAD_KEY = ["GEMM_M", "GEMM_N", "P", "chunk", "KH", "KW", "INPUT_PRECISION"]


@autotune(configs=CONFIGS, key=_FWD_KEY, prune=fitting_configs)
@triton.jit
def _conv2d_fwd_kernel(x, w, bias, y, GEMM_M, GEMM_N, Cg, H, W, OH, OW, sxn, sxh, sxw, swo, swh, sww, sym, sbias,
                       stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, KH: tl.constexpr, KW: tl.constexpr,
                       INPUT_PRECISION: tl.constexpr, UPCAST: tl.constexpr, HAS_BIAS: tl.constexpr,
                       ACC: tl.constexpr, INT64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # NHWC: x (N, H, W, C), w packed (OC, KH, KW, Cg), y (N*OH*OW, OC), channels at unit stride.
    # The reduction (kh, kw, c) walks kh and kw statically (KH, KW are compile-time) and c in
    # BLOCK_K chunks: the window position, its padding mask and its row addresses are computed
    # once per (kh, kw), and a chunk costs one broadcast add and one load per operand, both
    # contiguous along c (K-major operands: 16-byte cp.async for every dtype, TF32 included).
    g = tl.program_id(1)
    pid_m, pid_n = grouped_tile(tl.program_id(0), GEMM_M, GEMM_N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (n, oh, ow)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # oc within the group
    offs_c = tl.arange(0, BLOCK_K)
    if INT64:
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
        offs_c = offs_c.to(tl.int64)
    ow = offs_m % OW
    oh = (offs_m // OW) % OH
    n = offs_m // (OW * OH)
    ih0 = oh * stride_h - pad_h
    iw0 = ow * stride_w - pad_w
    x_row = n * sxn + g * Cg
    oc = g * GEMM_N + offs_n
    m_ok = offs_m < GEMM_M
    n_ok = offs_n < GEMM_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC)
    for kh in tl.static_range(KH):
        ih = ih0 + kh * dil_h
        for kw in tl.static_range(KW):
            iw = iw0 + kw * dil_w
            row_ok = m_ok & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            a_rows = x + (x_row + ih * sxh + iw * sxw)[:, None]
            b_cols = w + (oc * swo + kh * swh + kw * sww)[None, :]
            for c0 in range(0, Cg, BLOCK_K):
                c = c0 + offs_c
                c_ok = c < Cg
                a = tl.load(a_rows + c[None, :], mask=row_ok[:, None] & c_ok[None, :], other=0.0)
                b = tl.load(b_cols + c[:, None], mask=c_ok[:, None] & n_ok[None, :], other=0.0)
                if UPCAST:
                    a = a.to(ACC)
                    b = b.to(ACC)
                acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION, out_dtype=ACC)
    if HAS_BIAS:
        acc += tl.load(bias + oc * sbias, mask=n_ok, other=0.0).to(ACC)[None, :]
    tl.store(y + (offs_m * sym)[:, None] + oc[None, :], acc.to(y.dtype.element_ty),
             mask=m_ok[:, None] & n_ok[None, :])


@autotune(configs=CONFIGS, key=_KEY)
@triton.jit
def _conv2d_fwd_flat_kernel(x, w, bias, y, GEMM_M, GEMM_N, GEMM_K, Cg, H, W, OH, OW, KH, KW,
                       sxn, sxc, sxh, sxw, swo, swc, swh, sww, syn, syc, syh, syw, sbias,
                       stride_h, stride_w, pad_h, pad_w, dil_h, dil_w,
                       INPUT_PRECISION: tl.constexpr, UPCAST: tl.constexpr, HAS_BIAS: tl.constexpr,
                       ACC: tl.constexpr, INT64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # Few input channels (the RGB stem: Cg = 3): the reduction (c, kh, kw) flattened into one K,
    # so a 7x7 window of 3 channels is 147 dense K values, not 49 mostly-masked chunks of channels.
    g = tl.program_id(1)
    pid_m, pid_n = grouped_tile(tl.program_id(0), GEMM_M, GEMM_N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (n, oh, ow)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # oc within the group
    if INT64:
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
    ow = offs_m % OW
    oh = (offs_m // OW) % OH
    n = offs_m // (OW * OH)
    ih0 = oh * stride_h - pad_h
    iw0 = ow * stride_w - pad_w
    x_row = n * sxn + (g * Cg) * sxc
    oc = g * GEMM_N + offs_n
    m_ok = offs_m < GEMM_M
    n_ok = offs_n < GEMM_N
    KHW = KH * KW
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC)
    for k0 in range(0, GEMM_K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)  # (c, kh, kw)
        c = offs_k // KHW
        kh = (offs_k % KHW) // KW
        kw = offs_k % KW
        k_ok = offs_k < GEMM_K
        ih = ih0[:, None] + (kh * dil_h)[None, :]
        iw = iw0[:, None] + (kw * dil_w)[None, :]
        a_mask = m_ok[:, None] & k_ok[None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        a = tl.load(x + x_row[:, None] + (c * sxc)[None, :] + ih * sxh + iw * sxw, mask=a_mask, other=0.0)
        b_off = (c * swc + kh * swh + kw * sww)[:, None] + (oc * swo)[None, :]
        b = tl.load(w + b_off, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        if UPCAST:
            a = a.to(ACC)
            b = b.to(ACC)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION, out_dtype=ACC)
    if HAS_BIAS:
        acc += tl.load(bias + oc * sbias, mask=n_ok, other=0.0).to(ACC)[None, :]
    y_off = (n * syn + oh * syh + ow * syw)[:, None] + (oc * syc)[None, :]
    tl.store(y + y_off, acc.to(y.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


@triton.jit
def _conv2d_direct_kernel(x, w, bias, y, total, Cg, OCg, H, W, OC, OH, OW, KH, KW,
                          sxn, sxc, sxh, sxw, swo, swc, swh, sww, syn, syc, syh, syw, sbias,
                          stride_h, stride_w, pad_h, pad_w, dil_h, dil_w,
                          HAS_BIAS: tl.constexpr, ACC: tl.constexpr, INT64: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if INT64:
        pid = pid.to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)  # flat (n, oc, oh, ow)
    ok = offs < total
    ow = offs % OW
    oh = (offs // OW) % OH
    oc = (offs // (OW * OH)) % OC
    n = offs // (OW * OH * OC)
    g = oc // OCg
    ih0 = oh * stride_h - pad_h
    iw0 = ow * stride_w - pad_w
    x_base = x + n * sxn + (g * Cg) * sxc
    w_base = w + oc * swo
    acc = tl.zeros((BLOCK,), dtype=ACC)
    for c in range(0, Cg):
        for kh in range(0, KH):
            ih = ih0 + kh * dil_h
            h_ok = ok & (ih >= 0) & (ih < H)
            for kw in range(0, KW):
                iw = iw0 + kw * dil_w
                m = h_ok & (iw >= 0) & (iw < W)
                xv = tl.load(x_base + c * sxc + ih * sxh + iw * sxw, mask=m, other=0.0).to(ACC)
                wv = tl.load(w_base + c * swc + kh * swh + kw * sww, mask=ok, other=0.0).to(ACC)
                acc += xv * wv
    if HAS_BIAS:
        acc += tl.load(bias + oc * sbias, mask=ok, other=0.0).to(ACC)
    tl.store(y + n * syn + oc * syc + oh * syh + ow * syw, acc.to(y.dtype.element_ty), mask=ok)


@autotune(configs=CONFIGS, key=_BWD_INPUT_KEY, prune=fitting_configs)
@triton.jit
def _conv2d_bwd_input_chunked_kernel(dy, w, dx, GEMM_M, GEMM_N, OCg, H, W, OH, OW, sdyn, sdyh, sdyw, sdxm,
                                     stride_h, stride_w, pad_h, pad_w, dil_h, dil_w,
                                     KH: tl.constexpr, KW: tl.constexpr, INPUT_PRECISION: tl.constexpr,
                                     UPCAST: tl.constexpr, ACC: tl.constexpr, INT64: tl.constexpr,
                                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                                     GROUP_M: tl.constexpr):
    # NHWC: dy (N, OH, OW, OC), w packed (groups, KH, KW, Cg, OCg), dx (N*H*W, C), unit channel
    # strides; both operands are contiguous along the reduced output channels (K-major).
    # As the forward kernel: (kh, kw) walked statically, the output channels in BLOCK_K chunks.
    # Tap (kh, kw) reaches input pixel (ih, iw) from output pixel ((ih + pad - kh*dil) / stride,
    # ...) where that divides exactly; the test, the pixel's address and its mask are per (kh, kw).
    g = tl.program_id(1)
    pid_m, pid_n = grouped_tile(tl.program_id(0), GEMM_M, GEMM_N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (n, ih, iw)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # c within the group
    offs_k = tl.arange(0, BLOCK_K)
    if INT64:
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
        offs_k = offs_k.to(tl.int64)
    iw = offs_m % W
    ih = (offs_m // W) % H
    n = offs_m // (W * H)
    c = g * GEMM_N + offs_n
    m_ok = offs_m < GEMM_M
    n_ok = offs_n < GEMM_N
    dy_row = n * sdyn + g * OCg
    w_group = w + g * (KH * KW * GEMM_N * OCg)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC)
    for kh in tl.static_range(KH):
        th = ih + pad_h - kh * dil_h
        oh = th // stride_h
        for kw in tl.static_range(KW):
            tw = iw + pad_w - kw * dil_w
            ow = tw // stride_w
            row_ok = m_ok & (th >= 0) & (tw >= 0) & (oh * stride_h == th) & (ow * stride_w == tw) & (oh < OH) \
                & (ow < OW)
            a_rows = dy + (dy_row + oh * sdyh + ow * sdyw)[:, None]
            b_cols = w_group + ((kh * KW + kw) * GEMM_N * OCg + offs_n * OCg)[None, :]
            for k0 in range(0, OCg, BLOCK_K):
                oc = k0 + offs_k
                k_ok = oc < OCg
                a = tl.load(a_rows + oc[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0)
                b = tl.load(b_cols + oc[:, None], mask=k_ok[:, None] & n_ok[None, :], other=0.0)
                if UPCAST:
                    a = a.to(ACC)
                    b = b.to(ACC)
                acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION, out_dtype=ACC)
    tl.store(dx + (offs_m * sdxm)[:, None] + c[None, :], acc.to(dx.dtype.element_ty),
             mask=m_ok[:, None] & n_ok[None, :])


@autotune(configs=CONFIGS, key=_KEY)
@triton.jit
def _conv2d_bwd_input_kernel(dy, w, dx, GEMM_M, GEMM_N, GEMM_K, OCg, H, W, OH, OW, KH, KW,
                             sdyn, sdyc, sdyh, sdyw, swo, swc, swh, sww, sdxn, sdxc, sdxh, sdxw,
                             stride_h, stride_w, pad_h, pad_w, dil_h, dil_w,
                             INPUT_PRECISION: tl.constexpr, UPCAST: tl.constexpr, ACC: tl.constexpr,
                             INT64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                             GROUP_M: tl.constexpr):
    g = tl.program_id(1)
    pid_m, pid_n = grouped_tile(tl.program_id(0), GEMM_M, GEMM_N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (n, ih, iw)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # c within the group
    if INT64:
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
    iw = offs_m % W
    ih = (offs_m // W) % H
    n = offs_m // (W * H)
    c = g * GEMM_N + offs_n
    m_ok = offs_m < GEMM_M
    n_ok = offs_n < GEMM_N
    dy_row = n * sdyn + (g * OCg) * sdyc
    KHW = KH * KW
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC)
    for k0 in range(0, GEMM_K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)  # (oc within group, kh, kw)
        oc = offs_k // KHW
        kh = (offs_k % KHW) // KW
        kw = offs_k % KW
        k_ok = offs_k < GEMM_K
        # Output rows that saw input row ih through tap kh: oh * stride = ih + pad - kh * dil.
        th = (ih + pad_h)[:, None] - (kh * dil_h)[None, :]
        tw = (iw + pad_w)[:, None] - (kw * dil_w)[None, :]
        oh = th // stride_h
        ow = tw // stride_w
        a_mask = (m_ok[:, None] & k_ok[None, :] & (th >= 0) & (tw >= 0) & (oh * stride_h == th)
                  & (ow * stride_w == tw) & (oh < OH) & (ow < OW))
        a = tl.load(dy + dy_row[:, None] + (oc * sdyc)[None, :] + oh * sdyh + ow * sdyw, mask=a_mask, other=0.0)
        b_off = (((g * OCg) + oc) * swo + kh * swh + kw * sww)[:, None] + (offs_n * swc)[None, :]
        b = tl.load(w + b_off, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        if UPCAST:
            a = a.to(ACC)
            b = b.to(ACC)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION, out_dtype=ACC)
    dx_off = (n * sdxn + ih * sdxh + iw * sdxw)[:, None] + (c * sdxc)[None, :]
    tl.store(dx + dx_off, acc.to(dx.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


@autotune(configs=CONFIGS, key=_KEY)
@triton.jit
def _conv2d_bwd_weight_flat_kernel(x, dy, dw, GEMM_M, GEMM_N, GEMM_K, Cg, H, W, OH, OW, KH, KW,
                                   sxn, sxc, sxh, sxw, sdyn, sdyc, sdyh, sdyw, swo, swc, swh, sww,
                                   stride_h, stride_w, pad_h, pad_w, dil_h, dil_w,
                                   INPUT_PRECISION: tl.constexpr, UPCAST: tl.constexpr, ACC: tl.constexpr,
                                   INT64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                   BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # Few channels (the RGB stem, depthwise): any layout, the (c, kh, kw) columns flattened.
    g = tl.program_id(1)
    pid_m, pid_n = grouped_tile(tl.program_id(0), GEMM_M, GEMM_N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # oc within the group
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (c, kh, kw)
    if INT64:
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
    KHW = KH * KW
    oc = g * GEMM_M + offs_m
    c = offs_n // KHW
    kh = (offs_n % KHW) // KW
    kw = offs_n % KW
    m_ok = offs_m < GEMM_M
    n_ok = offs_n < GEMM_N
    x_col = (g * Cg + c) * sxc
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC)
    for k0 in range(0, GEMM_K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)  # (n, oh, ow)
        if INT64:
            offs_k = offs_k.to(tl.int64)
        ow = offs_k % OW
        oh = (offs_k // OW) % OH
        nn = offs_k // (OW * OH)
        k_ok = offs_k < GEMM_K
        a = tl.load(dy + (oc * sdyc)[:, None] + (nn * sdyn + oh * sdyh + ow * sdyw)[None, :],
                    mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        ih = (oh * stride_h - pad_h)[:, None] + (kh * dil_h)[None, :]
        iw = (ow * stride_w - pad_w)[:, None] + (kw * dil_w)[None, :]
        b_mask = k_ok[:, None] & n_ok[None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        b = tl.load(x + (nn * sxn)[:, None] + x_col[None, :] + ih * sxh + iw * sxw, mask=b_mask, other=0.0)
        if UPCAST:
            a = a.to(ACC)
            b = b.to(ACC)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION, out_dtype=ACC)
    dw_off = (oc * swo)[:, None] + (c * swc + kh * swh + kw * sww)[None, :]
    tl.store(dw + dw_off, acc.to(dw.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


@autotune(configs=CONFIGS, key=_WGRAD_KEY, prune=fitting_configs)
@triton.jit
def _conv2d_bwd_weight_kernel(x, dy, ws, GEMM_M, GEMM_N, OC, P, chunk, H, W, OH, OW, KH, KW,
                              sxn, sxh, sxw, sdym, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w,
                              INPUT_PRECISION: tl.constexpr, UPCAST: tl.constexpr, ACC: tl.constexpr,
                              INT64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                              GROUP_M: tl.constexpr):
    # NHWC: x (N, H, W, C), dy (N*OH*OW, OC), unit channel strides. Program (tile, group * KH*KW
    # + tap, s) reduces dy^T (oc, pixels) @ x shifted by the tap (pixels, c) over pixel chunk s
    # into the fp32 (fp64) workspace ws[s, OC, KH*KW, Cg], contiguous along c: one tap per
    # program keeps c at unit stride in both x and ws, and the chunks (split-K) give the few
    # (oc, c) tiles of a layer enough programs to fill the GPU.
    gt = tl.program_id(1)
    s = tl.program_id(2)
    KHW = KH * KW
    g = gt // KHW
    tap = gt % KHW
    kh = tap // KW
    kw = tap % KW
    pid_m, pid_n = grouped_tile(tl.program_id(0), GEMM_M, GEMM_N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # oc within the group
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # c within the group
    offs_p = tl.arange(0, BLOCK_K)
    if INT64:
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
        offs_p = offs_p.to(tl.int64)
        s = s.to(tl.int64)
    oc = g * GEMM_M + offs_m
    c = g * GEMM_N + offs_n
    m_ok = offs_m < GEMM_M
    n_ok = offs_n < GEMM_N
    p_end = tl.minimum(P, (s + 1) * chunk)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC)
    for p0 in range(s * chunk, p_end, BLOCK_K):
        p = p0 + offs_p  # (n, oh, ow)
        p_ok = p < p_end
        ow = p % OW
        oh = (p // OW) % OH
        nn = p // (OW * OH)
        a = tl.load(dy + (p * sdym)[None, :] + oc[:, None], mask=m_ok[:, None] & p_ok[None, :], other=0.0)
        ih = oh * stride_h - pad_h + kh * dil_h
        iw = ow * stride_w - pad_w + kw * dil_w
        row_ok = p_ok & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        b = tl.load(x + (nn * sxn + ih * sxh + iw * sxw)[:, None] + c[None, :], mask=row_ok[:, None] & n_ok[None, :],
                    other=0.0)
        if INPUT_PRECISION == "tf32":
            # Both tiles are channel-contiguous (the reduction runs over pixels, at a stride of C),
            # and TF32's warpgroup MMA reads its operands K-major only: fed to tl.dot straight from
            # the load, each is copied into shared memory 4 bytes at a time, transposed on the way.
            # Passed through an elementwise op (a no-op select: the loads are masked already), each
            # is staged by 16-byte cp.async and transposed from registers (tools/sm90_report.py).
            a = tl.where(m_ok[:, None], a, 0.0)
            b = tl.where(n_ok[None, :], b, 0.0)
        if UPCAST:
            a = a.to(ACC)
            b = b.to(ACC)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION, out_dtype=ACC)
    row = (s * OC + oc) * KHW + tap
    tl.store(ws + (row * GEMM_N)[:, None] + offs_n[None, :], acc, mask=m_ok[:, None] & n_ok[None, :])


@triton.jit
def _wgrad_sum_kernel(ws, dw, total, split, KHW, KW, Cg, sdwo, sdwc, sdwh, sdww, INT64: tl.constexpr,
                      BLOCK: tl.constexpr):
    # dw[oc, c, tap] = sum over s of ws[s, oc, tap, c], added in order s = 0, 1 ...: deterministic.
    # Weight-sized (no activation): its reads are contiguous, its writes strided by KH*KW.
    pid = tl.program_id(0)
    if INT64:
        pid = pid.to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)  # flat (oc, tap, c) of ws[0]
    ok = offs < total
    acc = tl.load(ws + offs, mask=ok, other=0.0)
    for s in range(1, split):
        acc += tl.load(ws + s * total + offs, mask=ok, other=0.0)
    c = offs % Cg
    tap = (offs // Cg) % KHW
    oc = offs // (Cg * KHW)
    tl.store(dw + oc * sdwo + c * sdwc + (tap // KW) * sdwh + (tap % KW) * sdww, acc.to(dw.dtype.element_ty), mask=ok)


# ----- launchers: tensors are seen only as pointers, shapes and strides ---------------------------
def _gemm_grid(gm, gn, groups, split=1):
    def grid(META):
        return (cdiv(gm, META["BLOCK_M"]) * cdiv(gn, META["BLOCK_N"]), groups, split)

    return grid


def _meta():
    return dict(INTERPRET_CONFIG) if INTERPRET else {}


def _int64(*layouts) -> bool:
    """Whether offsets into operands of these (shape, strides) may not fit in int32."""
    return any(needs_int64(shape, strides) for shape, strides in layouts)


def _acc(dtype):
    """The ``triton.language`` dtype a kernel reading ``dtype`` accumulates in (the dtype policy's)."""
    return getattr(tl, FLOAT_COMPUTE_NAME[dtype.name])


def nhwc(Cg: int, OCg: int) -> bool:
    """Whether a convolution with these per-group channel counts runs the NHWC implicit-GEMM
    kernels (both GEMM sides channels: >= 16, what ``tl.dot`` tiles). The others (the RGB stem,
    depthwise and other thin convolutions) have no channel vector worth loading: they read the
    caller's layout in place, so the caller repacks nothing for them."""
    return Cg >= MIN_DOT and OCg >= MIN_DOT


class LaunchPlan:
    """One launch of this module configured once (a ``configure_*`` function's answer): ``run(*buffers)``
    launches it on buffers laid out as those it was configured for, with no configuration work
    (kernel choice, grid, int64 test, constexprs): the launches of conv2d's plans."""

    __slots__ = ("site", "grid", "args")

    def __init__(self, configured):
        kernel, grid, self.args, kwargs = configured
        self.site = Site(kernel, **kwargs)
        # the grid itself where the block sizes are fixed (the interpreter's); an autotuned kernel's
        # depends on the configuration it chose, so it stays a function of it
        self.grid = grid(kwargs) if callable(grid) and "BLOCK_M" in kwargs else grid

    def run(self, *buffers) -> None:
        launch(self.site, self.grid, *buffers, *self.args)


def configure_forward(x_layout, w_layout, y_layout, bias_stride, dtype, stride, padding, dilation, groups,
                      allow_tf32):
    """The forward launch, y = conv2d(x, w) + bias, for x (N, C, H, W), w (OC, C/groups, KH, KW)
    and y (N, OC, OH, OW), each given as its (shape, strides), ``bias_stride`` None without a bias:
    (kernel, grid, the arguments after x, w, bias (y without one) and y, the keyword arguments).

    Where :func:`nhwc` holds, x, w and y are channels-last contiguous (the NHWC kernel; w is then
    the (OC, KH, KW, Cg) packing); otherwise any strides. ``padding`` is the (top, left) padding;
    the output size in y's shape says where the window stops (that is how asymmetric ``'same'``
    padding is expressed)."""
    (N, C, H, W), x_strides = x_layout
    (OC, Cg, KH, KW), w_strides = w_layout
    (_, _, OH, OW), y_strides = y_layout
    OCg = OC // groups
    geo = (stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1])
    sb = bias_stride if bias_stride is not None else 0
    acc = _acc(dtype)
    int64 = _int64(x_layout, w_layout, y_layout)
    if OCg < MIN_DOT or Cg * KH * KW < MIN_DOT:
        total = N * OC * OH * OW
        return (_conv2d_direct_kernel, (cdiv(total, DIRECT_BLOCK),),
                (total, Cg, OCg, H, W, OC, OH, OW, KH, KW, *x_strides, *w_strides, *y_strides, sb, *geo),
                dict(HAS_BIAS=bias_stride is not None, ACC=acc, INT64=int64, BLOCK=DIRECT_BLOCK))
    gm, gn = N * OH * OW, OCg
    common = dict(INPUT_PRECISION=input_precision(dtype.name, allow_tf32), UPCAST=INTERPRET,
                  HAS_BIAS=bias_stride is not None, ACC=acc, INT64=int64, **_meta())
    if not nhwc(Cg, OCg):  # few channels: one flat (c, kh, kw) reduction
        return (_conv2d_fwd_flat_kernel, _gemm_grid(gm, gn, groups),
                (gm, gn, Cg * KH * KW, Cg, H, W, OH, OW, KH, KW, *x_strides, *w_strides, *y_strides, sb, *geo),
                common)
    sxn, _, sxh, sxw = x_strides
    swo, _, swh, sww = w_strides
    return (_conv2d_fwd_kernel, _gemm_grid(gm, gn, groups),
            (gm, gn, Cg, H, W, OH, OW, sxn, sxh, sxw, swo, swh, sww, OC, sb, *geo), dict(KH=KH, KW=KW, **common))


def conv2d_backward_input(dx, dy, w, stride, padding, dilation, groups, allow_tf32=False) -> None:
    """dx = d(conv2d)/dx contracted with dy; dx (N, C, H, W) allocated, dy (N, OC, OH, OW).

    Where :func:`nhwc` holds, dx and dy are channels-last contiguous and ``w`` is the weight packed
    as (groups, KH, KW, Cg, OCg) contiguous (:func:`pack_weight_for_input_grad`'s layout, passed
    with its own 5-D shape); otherwise w is the (OC, Cg, KH, KW) weight in any strides."""
    if dx.numel() == 0:
        return
    kernel, grid, args, kwargs = configure_input_grad((dx.shape, dx.stride()), (dy.shape, dy.stride()),
                                                      (w.shape, w.stride()), dy.dtype, stride, padding, dilation,
                                                      groups, allow_tf32)
    launch(kernel, grid, dy, w, dx, *args, **kwargs)


def configure_input_grad(dx_layout, dy_layout, w_layout, dtype, stride, padding, dilation, groups, allow_tf32):
    """The grad-input launch for these operands, each given as its (shape, strides): (kernel, grid,
    the arguments after dy, w and dx, the keyword arguments)."""
    (N, C, H, W), dx_strides = dx_layout
    (_, OC, OH, OW), dy_strides = dy_layout
    w_shape, w_strides = w_layout
    geo = (stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1])
    common = dict(INPUT_PRECISION=input_precision(dtype.name, allow_tf32), UPCAST=INTERPRET, ACC=_acc(dtype),
                  INT64=_int64(dx_layout, dy_layout, w_layout), **_meta())
    if len(w_shape) == 5:
        _, KH, KW, Cg, OCg = w_shape
        sdyn, _, sdyh, sdyw = dy_strides
        return (_conv2d_bwd_input_chunked_kernel, _gemm_grid(N * H * W, Cg, groups),
                (N * H * W, Cg, OCg, H, W, OH, OW, sdyn, sdyh, sdyw, C, *geo), dict(KH=KH, KW=KW, **common))
    _, Cg, KH, KW = w_shape
    OCg = OC // groups
    return (_conv2d_bwd_input_kernel, _gemm_grid(N * H * W, Cg, groups),
            (N * H * W, Cg, OCg * KH * KW, OCg, H, W, OH, OW, KH, KW, *dy_strides, *w_strides, *dx_strides, *geo),
            common)


def wgrad_split(OC: int, Cg: int, taps: int, groups: int, pixels: int) -> int:
    """How many pixel chunks the NHWC grad-weight kernel splits its reduction into: enough
    programs for about two waves of an H100's 132 SMs (counted with 128x128 tiles), each chunk at
    least WGRAD_MIN_CHUNK pixels long."""
    tiles = cdiv(OC // groups, 128) * cdiv(Cg, 128) * groups * taps
    return max(1, min(WGRAD_PROGRAMS // tiles, pixels // WGRAD_MIN_CHUNK, 65535))


def configure_weight_grad(dw_layout, dy_layout, x_layout, dtype, stride, padding, dilation, groups, allow_tf32):
    """The grad-weight launches for these operands, each given as its (shape, strides):
    ``(workspace shape, first, second)``, each launch (kernel, grid, the arguments after its
    buffers, the keyword arguments). Few channels: no workspace (None), ``first`` over (x, dy, dw),
    no ``second``. NHWC: ``first`` over (x, dy, ws), ``second`` over (ws, dw), ``ws`` an fp32
    (fp64 for fp64: the dtype policy's float_compute) contiguous tensor of the workspace shape."""
    (N, C, H, W), x_strides = x_layout
    (OC, Cg, KH, KW), dw_strides = dw_layout
    (_, _, OH, OW), dy_strides = dy_layout
    geo = (stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1])
    prec = input_precision(dtype.name, allow_tf32)
    OCg = OC // groups
    if not nhwc(Cg, OCg):
        gm, gn, gk = OCg, Cg * KH * KW, N * OH * OW
        return None, (_conv2d_bwd_weight_flat_kernel, _gemm_grid(gm, gn, groups),
                      (gm, gn, gk, Cg, H, W, OH, OW, KH, KW, *x_strides, *dy_strides, *dw_strides, *geo),
                      dict(INPUT_PRECISION=prec, UPCAST=INTERPRET, ACC=_acc(dtype),
                           INT64=_int64(x_layout, dy_layout, dw_layout),
                           **_meta())), None
    P, taps = N * OH * OW, KH * KW
    split = wgrad_split(OC, Cg, taps, groups, P)
    chunk = max(cdiv(cdiv(P, split), 64) * 64, 64)
    split = max(cdiv(P, chunk), 1)  # an empty batch: one chunk of nothing, so dw = 0 is written
    ws_layout = ((split, OC, taps, Cg), (OC * taps * Cg, taps * Cg, Cg, 1))
    sxn, _, sxh, sxw = x_strides
    first = (_conv2d_bwd_weight_kernel, _gemm_grid(OCg, Cg, groups * taps, split),
             (OCg, Cg, OC, P, chunk, H, W, OH, OW, KH, KW, sxn, sxh, sxw, OC, *geo),
             dict(INPUT_PRECISION=prec, UPCAST=INTERPRET, ACC=_acc(dtype),
                  INT64=_int64(x_layout, dy_layout, ws_layout), **_meta()))
    total = OC * taps * Cg
    second = (_wgrad_sum_kernel, (cdiv(total, SUM_BLOCK),), (total, split, taps, KW, Cg, *dw_strides),
              dict(INT64=needs_int64(*ws_layout), BLOCK=SUM_BLOCK))
    return ws_layout[0], first, second
