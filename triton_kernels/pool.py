"""2-D pooling over NCHW: max_pool2d (values + argmax indices) and avg_pool2d, forward and backward.

Forward: one output element per lane; the kernel window is unrolled at compile time (kernel
sizes are small constants), out-of-image taps are masked. Max pooling follows PyTorch exactly:
a NaN in the window wins (and is what the index points at), ties keep the first position, and
the index is flat within the input's H*W plane.

Backward is written as a *gather*, not a scatter: each lane owns one input element and walks
the taps that could have read it (``oh * stride = ih + pad - kh * dil``), adding the matching
output gradients. Overlapping windows (stride < kernel) then need no atomics, every element is
written exactly once, and results are deterministic in every dtype.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.dtype_policy import FLOAT_COMPUTE_NAME
from ..runtime.launch import launch
from ._common import grid_1d, needs_int64, per_mode

POOL_BLOCK = per_mode(16384, 256)


@triton.jit
def _nchw(offs, C, H, W):
    """Flat row-major index -> (n, c, h, w)."""
    w = offs % W
    h = (offs // W) % H
    c = (offs // (W * H)) % C
    n = offs // (W * H * C)
    return n, c, h, w


@triton.jit
def _lanes(total, INT64: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if INT64:
        pid = pid.to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    return offs, offs < total


@triton.jit
def _max_pool2d_fwd_kernel(x, y, idx, total, C, H, W, OH, OW, sxn, sxc, sxh, sxw,
                           stride_h, stride_w, pad_h, pad_w, dil_h, dil_w,
                           KH: tl.constexpr, KW: tl.constexpr, INT64: tl.constexpr, ACC: tl.constexpr,
                           BLOCK: tl.constexpr):
    offs, ok = _lanes(total, INT64, BLOCK)
    n, c, oh, ow = _nchw(offs, C, OH, OW)
    ih0 = oh * stride_h - pad_h
    iw0 = ow * stride_w - pad_w
    base = x + n * sxn + c * sxc
    best = tl.full((BLOCK,), float("-inf"), ACC)
    best_i = tl.zeros((BLOCK,), tl.int64)
    found = tl.zeros((BLOCK,), tl.int1)
    for kh in tl.static_range(KH):
        ih = ih0 + kh * dil_h
        h_ok = ok & (ih >= 0) & (ih < H)
        for kw in tl.static_range(KW):
            iw = iw0 + kw * dil_w
            m = h_ok & (iw >= 0) & (iw < W)
            v = tl.load(base + ih * sxh + iw * sxw, mask=m, other=float("-inf")).to(ACC)
            # PyTorch's rule: take a strictly greater value or any NaN; the first valid tap seeds.
            take = m & ((v > best) | (v != v) | ~found)
            best = tl.where(take, v, best)
            best_i = tl.where(take, (ih * W + iw).to(tl.int64), best_i)
            found = found | m
    tl.store(y + offs, best.to(y.dtype.element_ty), mask=ok)
    tl.store(idx + offs, best_i, mask=ok)


@triton.jit
def _max_pool2d_bwd_kernel(dy, idx, dx, total, C, H, W, OH, OW, sdyn, sdyc, sdyh, sdyw, sin, sic, sih, siw,
                           stride_h, stride_w, pad_h, pad_w, dil_h, dil_w,
                           KH: tl.constexpr, KW: tl.constexpr, INT64: tl.constexpr, ACC: tl.constexpr,
                           BLOCK: tl.constexpr):
    offs, ok = _lanes(total, INT64, BLOCK)
    n, c, ih, iw = _nchw(offs, C, H, W)
    me = (ih * W + iw).to(tl.int64)
    acc = tl.zeros((BLOCK,), ACC)
    for kh in tl.static_range(KH):
        th = ih + pad_h - kh * dil_h
        oh = th // stride_h
        h_ok = ok & (th >= 0) & (oh * stride_h == th) & (oh < OH)
        for kw in tl.static_range(KW):
            tw = iw + pad_w - kw * dil_w
            ow = tw // stride_w
            m = h_ok & (tw >= 0) & (ow * stride_w == tw) & (ow < OW)
            src = tl.load(idx + n * sin + c * sic + oh * sih + ow * siw, mask=m, other=-1)
            g = tl.load(dy + n * sdyn + c * sdyc + oh * sdyh + ow * sdyw, mask=m & (src == me), other=0.0)
            acc += g.to(ACC)
    tl.store(dx + offs, acc.to(dx.dtype.element_ty), mask=ok)


@triton.jit
def _avg_divisor(oh, ow, H, W, stride_h, stride_w, pad_h, pad_w, KH: tl.constexpr, KW: tl.constexpr,
                 COUNT_INCLUDE_PAD: tl.constexpr, DIVISOR):
    """PyTorch's avg_pool2d divisor for output (oh, ow): override, padded window, or valid taps."""
    h0 = oh * stride_h - pad_h
    w0 = ow * stride_w - pad_w
    h1 = tl.minimum(h0 + KH, H + pad_h)
    w1 = tl.minimum(w0 + KW, W + pad_w)
    if COUNT_INCLUDE_PAD:
        d = (h1 - h0) * (w1 - w0)
    else:
        d = (tl.minimum(h1, H) - tl.maximum(h0, 0)) * (tl.minimum(w1, W) - tl.maximum(w0, 0))
    return tl.where(DIVISOR > 0, DIVISOR, d)


@triton.jit
def _avg_pool2d_fwd_kernel(x, y, total, C, H, W, OH, OW, sxn, sxc, sxh, sxw,
                           stride_h, stride_w, pad_h, pad_w, DIVISOR,
                           KH: tl.constexpr, KW: tl.constexpr, COUNT_INCLUDE_PAD: tl.constexpr,
                           INT64: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    offs, ok = _lanes(total, INT64, BLOCK)
    n, c, oh, ow = _nchw(offs, C, OH, OW)
    ih0 = oh * stride_h - pad_h
    iw0 = ow * stride_w - pad_w
    base = x + n * sxn + c * sxc
    acc = tl.zeros((BLOCK,), ACC)
    for kh in tl.static_range(KH):
        ih = ih0 + kh
        h_ok = ok & (ih >= 0) & (ih < H)
        for kw in tl.static_range(KW):
            iw = iw0 + kw
            m = h_ok & (iw >= 0) & (iw < W)
            acc += tl.load(base + ih * sxh + iw * sxw, mask=m, other=0.0).to(ACC)
    d = _avg_divisor(oh, ow, H, W, stride_h, stride_w, pad_h, pad_w, KH, KW, COUNT_INCLUDE_PAD, DIVISOR)
    tl.store(y + offs, (acc / d.to(ACC)).to(y.dtype.element_ty), mask=ok)


@triton.jit
def _avg_pool2d_bwd_kernel(dy, dx, total, C, H, W, OH, OW, sdyn, sdyc, sdyh, sdyw,
                           stride_h, stride_w, pad_h, pad_w, DIVISOR,
                           KH: tl.constexpr, KW: tl.constexpr, COUNT_INCLUDE_PAD: tl.constexpr,
                           INT64: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    offs, ok = _lanes(total, INT64, BLOCK)
    n, c, ih, iw = _nchw(offs, C, H, W)
    acc = tl.zeros((BLOCK,), ACC)
    for kh in tl.static_range(KH):
        th = ih + pad_h - kh
        oh = th // stride_h
        h_ok = ok & (th >= 0) & (oh * stride_h == th) & (oh < OH)
        for kw in tl.static_range(KW):
            tw = iw + pad_w - kw
            ow = tw // stride_w
            m = h_ok & (tw >= 0) & (ow * stride_w == tw) & (ow < OW)
            g = tl.load(dy + n * sdyn + c * sdyc + oh * sdyh + ow * sdyw, mask=m, other=0.0).to(ACC)
            d = _avg_divisor(oh, ow, H, W, stride_h, stride_w, pad_h, pad_w, KH, KW, COUNT_INCLUDE_PAD, DIVISOR)
            acc += g / tl.where(m, d, 1).to(ACC)
    tl.store(dx + offs, acc.to(dx.dtype.element_ty), mask=ok)


# ----- launchers: outputs are freshly allocated and contiguous; inputs may have any strides --------
def _int64(*tensors) -> bool:
    return any(needs_int64(t.shape, t.stride()) for t in tensors)


def max_pool2d_forward(y, idx, x, kernel_size, stride, padding, dilation) -> None:
    """y, idx (N, C, OH, OW) = max and flat argmax over each window of x (N, C, H, W)."""
    total = y.numel()
    if total == 0:
        return
    N, C, H, W = x.shape
    acc = getattr(tl, FLOAT_COMPUTE_NAME[x.dtype.name])  # the policy's compute dtype
    launch(_max_pool2d_fwd_kernel, grid_1d(total, POOL_BLOCK), x, y, idx, total, C, H, W, y.shape[2], y.shape[3],
           *x.stride(), *stride, *padding, *dilation, KH=kernel_size[0], KW=kernel_size[1],
           INT64=_int64(x, y), ACC=acc, BLOCK=POOL_BLOCK)


def max_pool2d_backward(dx, dy, idx, kernel_size, stride, padding, dilation) -> None:
    """dx (N, C, H, W) = sum of dy over the outputs whose argmax is that input element."""
    total = dx.numel()
    if total == 0:
        return
    N, C, H, W = dx.shape
    acc = getattr(tl, FLOAT_COMPUTE_NAME[dy.dtype.name])  # the policy's compute dtype
    launch(_max_pool2d_bwd_kernel, grid_1d(total, POOL_BLOCK), dy, idx, dx, total, C, H, W, dy.shape[2], dy.shape[3],
           *dy.stride(), *idx.stride(), *stride, *padding, *dilation, KH=kernel_size[0], KW=kernel_size[1],
           INT64=_int64(dx, dy, idx), ACC=acc, BLOCK=POOL_BLOCK)


def avg_pool2d_forward(y, x, kernel_size, stride, padding, count_include_pad, divisor_override) -> None:
    total = y.numel()
    if total == 0:
        return
    N, C, H, W = x.shape
    acc = getattr(tl, FLOAT_COMPUTE_NAME[x.dtype.name])  # the policy's compute dtype
    launch(_avg_pool2d_fwd_kernel, grid_1d(total, POOL_BLOCK), x, y, total, C, H, W, y.shape[2], y.shape[3],
           *x.stride(), *stride, *padding, divisor_override or 0, KH=kernel_size[0], KW=kernel_size[1],
           COUNT_INCLUDE_PAD=bool(count_include_pad), INT64=_int64(x, y), ACC=acc, BLOCK=POOL_BLOCK)


def avg_pool2d_backward(dx, dy, kernel_size, stride, padding, count_include_pad, divisor_override) -> None:
    total = dx.numel()
    if total == 0:
        return
    N, C, H, W = dx.shape
    acc = getattr(tl, FLOAT_COMPUTE_NAME[dy.dtype.name])  # the policy's compute dtype
    launch(_avg_pool2d_bwd_kernel, grid_1d(total, POOL_BLOCK), dy, dx, total, C, H, W, dy.shape[2], dy.shape[3],
           *dy.stride(), *stride, *padding, divisor_override or 0, KH=kernel_size[0], KW=kernel_size[1],
           COUNT_INCLUDE_PAD=bool(count_include_pad), INT64=_int64(dx, dy), ACC=acc, BLOCK=POOL_BLOCK)
