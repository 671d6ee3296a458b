"""The layout repack conv2d runs on an NCHW caller's tensors: (B, R, S) -> (B, S, R), a tiled transpose.

Why it exists: the convolution kernels run NHWC inside (``conv.py``), where the reduced channels
are contiguous, so both GEMM operands go to shared memory by 128-bit ``cp.async`` and the output
is stored 128 bits at a time; on NCHW the same kernels gather 16 bits at a time and spill. A
caller's NCHW input (N, C, H*W) becomes NHWC (N, H*W, C) here once per call, and an NHWC result
goes back to NCHW, at copy speed: cuDNN does the same on the way in and out of its NHWC kernels.

The general strided copy (``copies.py``) walks the destination's flat index, so a transpose is a
gather on one side: 16-bit accesses for fp16. This kernel takes a (BLOCK_R, BLOCK_S) tile that is
contiguous along S in the source, and Triton re-lays it through shared memory so the store is
contiguous along R in the destination: both sides go by full vectors. A row of the NCHW side
starts every H*W elements, which Triton's integer specialisation sees as 16-aligned only when H*W
is a multiple of 16 (56x56, 28x28): ``VEC_SRC``/``VEC_DST`` carry the power of two that divides
the row stride (4 at 14x14, 1 at 7x7), so the accesses are as wide as the rows' alignment allows.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import Site, launch
from ._common import cdiv, needs_int64, per_mode

BLOCK_R = per_mode(64, 64)
BLOCK_S = per_mode(64, 64)


@triton.jit
def _transpose_kernel(src, dst, R_V, S_V, ssb, ssr, sdb, sdr, VEC_SRC: tl.constexpr, VEC_DST: tl.constexpr,
                      INT64: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_S: tl.constexpr):
    # dst[b, s, r] = src[b, r, s]: src is contiguous along s, dst along r (unit strides, not passed).
    # The extents come as multiples of the vector widths (R = R_V * VEC_DST, S = S_V * VEC_SRC), so
    # the compiler sees the edge masks constant over each vector and keeps the accesses wide.
    R = R_V * VEC_DST
    S = S_V * VEC_SRC
    pid = tl.program_id(0)
    n_r = tl.cdiv(R, BLOCK_R)
    n_s = tl.cdiv(S, BLOCK_S)
    tiles = n_r * n_s
    if INT64:
        pid = pid.to(tl.int64)
    b = pid // tiles
    t = pid % tiles
    r = (t // n_s) * BLOCK_R + tl.arange(0, BLOCK_R)
    s = (t % n_s) * BLOCK_S + tl.arange(0, BLOCK_S)
    mask = (r < R)[:, None] & (s < S)[None, :]
    src_row = tl.multiple_of(b * ssb + r * ssr, VEC_SRC)
    v = tl.load(src + src_row[:, None] + s[None, :], mask=mask)
    dst_row = tl.multiple_of(b * sdb + s * sdr, VEC_DST)
    tl.store(dst + dst_row[None, :] + r[:, None], v, mask=mask)


def _vec(n: int, itemsize: int) -> int:
    """The largest power of two, up to a 16-byte vector, that divides ``n`` (elements)."""
    v = 16 // itemsize
    while v > 1 and n % v:
        v //= 2
    return v


def _configure(B: int, R: int, S: int, src_strides, dst_strides, itemsize: int):
    """The transpose's grid, scalar arguments and constexprs (see :func:`transpose`)."""
    ssb, ssr = src_strides
    sdb, sdr = dst_strides
    # the vector width each side can use: what divides its row stride, its batch stride (when
    # there is more than one batch) and its extent along the vector
    vs = min(_vec(ssr, itemsize), _vec(ssb if B > 1 else 0, itemsize), _vec(S, itemsize))
    vd = min(_vec(sdr, itemsize), _vec(sdb if B > 1 else 0, itemsize), _vec(R, itemsize))
    int64 = needs_int64((B, R, S), (ssb, ssr, 1)) or needs_int64((B, S, R), (sdb, sdr, 1))
    return ((B * cdiv(R, BLOCK_R) * cdiv(S, BLOCK_S),), (R // vd, S // vs, ssb, ssr, sdb, sdr),
            dict(VEC_SRC=vs, VEC_DST=vd, INT64=int64, BLOCK_R=BLOCK_R, BLOCK_S=BLOCK_S))


def transpose(dst, src, B: int, R: int, S: int, src_strides, dst_strides) -> None:
    """dst[b, s, r] = src[b, r, s] for a (B, R, S) source contiguous along S and a (B, S, R)
    destination contiguous along R; ``src_strides`` = (batch, row) strides of the source,
    ``dst_strides`` those of the destination, in elements. Same dtype on both sides."""
    if B * R * S == 0:
        return
    grid, args, kwargs = _configure(B, R, S, src_strides, dst_strides, src.dtype.itemsize)
    launch(_transpose_kernel, grid, src, dst, *args, **kwargs)


class TransposePlan:
    """:func:`transpose` configured once for a geometry, its strides and element size: ``run(dst,
    src)`` launches it on any tensors laid out so, with no configuration work (conv2d's plans)."""

    __slots__ = ("site", "grid", "args")

    def __init__(self, B: int, R: int, S: int, src_strides, dst_strides, itemsize: int):
        self.grid, self.args, kwargs = _configure(B, R, S, src_strides, dst_strides, itemsize)
        self.site = Site(_transpose_kernel, **kwargs)

    def run(self, dst, src) -> None:
        launch(self.site, self.grid, src, dst, *self.args)
