"""cdist: the p-norm distance between every row of x1 and every row of x2, and its backward.

A composite (x1[:, :, None, :] - x2[:, None, :, :]).abs().pow(p).sum(-1) would hold a (B, P, R, M)
temporary; these kernels hold one (BLOCK_P, BLOCK_R) tile of differences at a time, walking the
M features. The p = 2 matrix-product form (torch's default for more than 25 rows) is composed from
matmul in core; this kernel serves p = 0, 1, 2, inf and any other p >= 0 exactly. Low precision is
loaded, accumulated in fp32 (fp64 for fp64) and cast on store.

The backward kernel computes grad_x1[i, m] = sum_j g[i, j] * d(dist_ij)/d(x1_im) for a block of rows
and features, walking the x2 rows; grad_x2 is the same kernel with the roles swapped (the derivative
is odd in the difference), g and the distances read transposed through their strides.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import launch
from ._common import cdiv, per_mode

# p as a kernel switch: each common p compiles to its own straight-line loop
P_ZERO, P_ONE, P_TWO, P_INF, P_GENERAL = 0, 1, 2, 3, 4
_BLOCK = per_mode(32, 32)
_TL = {"float32": tl.float32, "float64": tl.float64}  # the accumulation dtype, by name


def p_kind(p: float) -> int:
    if p == 0:
        return P_ZERO
    if p == 1:
        return P_ONE
    if p == 2:
        return P_TWO
    if p == float("inf"):
        return P_INF
    return P_GENERAL


@triton.jit
def _cdist_kernel(x1, x2, out, P, R, M, s1b, s1p, s1m, s2b, s2r, s2m, sob, sop, sor, p,
                  KIND: tl.constexpr, COMPUTE: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_R: tl.constexpr):
    pid_p = tl.program_id(0)
    pid_r = tl.program_id(1)
    b = tl.program_id(2).to(tl.int64)
    rows = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
    cols = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    mp = rows < P
    mr = cols < R
    a_ptr = x1 + b * s1b + rows.to(tl.int64) * s1p
    c_ptr = x2 + b * s2b + cols.to(tl.int64) * s2r
    acc = tl.zeros((BLOCK_P, BLOCK_R), dtype=COMPUTE)
    for m in range(0, M):
        a = tl.load(a_ptr + m * s1m, mask=mp, other=0.0).to(COMPUTE)
        c = tl.load(c_ptr + m * s2m, mask=mr, other=0.0).to(COMPUTE)
        d = tl.abs(a[:, None] - c[None, :])
        if KIND == 0:
            acc += (d != 0).to(COMPUTE)
        elif KIND == 1:
            acc += d
        elif KIND == 2:
            acc += d * d
        elif KIND == 3:
            acc = tl.maximum(acc, d)
        else:
            acc += tl.where(d == 0, 0.0, tl.exp(p * tl.log(d)))
    if KIND == 2:
        acc = tl.sqrt(acc)
    elif KIND == 4:
        acc = tl.where(acc == 0, 0.0, tl.exp(tl.log(acc) / p))
    o_ptr = out + b * sob + rows.to(tl.int64)[:, None] * sop + cols.to(tl.int64)[None, :] * sor
    tl.store(o_ptr, acc.to(out.dtype.element_ty), mask=mp[:, None] & mr[None, :])


@triton.jit
def _cdist_grad_kernel(x1, x2, g, dist, gx, P, R, M, s1b, s1p, s1m, s2b, s2r, s2m, sgb, sgp, sgr, sdb, sdp, sdr,
                       sxb, sxp, sxm, p, KIND: tl.constexpr, COMPUTE: tl.constexpr, BLOCK_P: tl.constexpr,
                       BLOCK_M: tl.constexpr):
    pid_p = tl.program_id(0)
    pid_m = tl.program_id(1)
    b = tl.program_id(2).to(tl.int64)
    rows = (pid_p * BLOCK_P + tl.arange(0, BLOCK_P)).to(tl.int64)
    feats = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    mp = rows < P
    mm = feats < M
    mask = mp[:, None] & mm[None, :]
    a = tl.load(x1 + b * s1b + rows[:, None] * s1p + feats[None, :] * s1m, mask=mask, other=0.0).to(COMPUTE)
    acc = tl.zeros((BLOCK_P, BLOCK_M), dtype=COMPUTE)
    for j in range(0, R):
        c = tl.load(x2 + b * s2b + j * s2r + feats * s2m, mask=mm, other=0.0).to(COMPUTE)
        gj = tl.load(g + b * sgb + rows * sgp + j * sgr, mask=mp, other=0.0).to(COMPUTE)
        dj = tl.load(dist + b * sdb + rows * sdp + j * sdr, mask=mp, other=0.0).to(COMPUTE)
        diff = a - c[None, :]
        sgn = tl.where(diff > 0, 1.0, tl.where(diff < 0, -1.0, 0.0)).to(COMPUTE)
        ad = tl.abs(diff)
        if KIND == 1:
            term = sgn
        elif KIND == 2:
            term = tl.where(dj[:, None] == 0, 0.0, diff / dj[:, None])
        elif KIND == 3:  # every coordinate attaining the max carries the gradient (torch)
            term = tl.where(ad == dj[:, None], sgn, 0.0)
        else:  # sign(d) |d|^(p-1) / dist^(p-1); zero where the difference or the distance is zero
            term = tl.where((ad == 0) | (dj[:, None] == 0), 0.0,
                            sgn * tl.exp((p - 1.0) * (tl.log(ad) - tl.log(dj[:, None]))))
        acc += gj[:, None] * term
    tl.store(gx + b * sxb + rows[:, None] * sxp + feats[None, :] * sxm, acc.to(gx.dtype.element_ty), mask=mask)


def cdist(out, x1, x2, p: float, compute: str) -> None:
    """out[b, i, j] = ||x1[b, i] - x2[b, j]||_p for 3-D x1 (B, P, M), x2 (B, R, M), out (B, P, R)."""
    B, P, M = x1.shape
    R = x2.shape[1]
    if out.numel() == 0:
        return
    grid = (cdiv(P, _BLOCK), cdiv(R, _BLOCK), B)
    launch(_cdist_kernel, grid, x1, x2, out, P, R, M, *x1.stride(), *x2.stride(), *out.stride(), float(p),
           KIND=p_kind(p), COMPUTE=_TL[compute], BLOCK_P=_BLOCK, BLOCK_R=_BLOCK)


def cdist_grad(gx, x1, x2, g, dist, p: float, compute: str) -> None:
    """gx[b, i, m] = sum_j g[b, i, j] * d dist[b, i, j] / d x1[b, i, m] (p = 0: callers pass zeros)."""
    B, P, M = x1.shape
    R = x2.shape[1]
    if gx.numel() == 0:
        return
    grid = (cdiv(P, _BLOCK), cdiv(M, _BLOCK), B)
    launch(_cdist_grad_kernel, grid, x1, x2, g, dist, gx, P, R, M, *x1.stride(), *x2.stride(), *g.stride(),
           *dist.stride(), *gx.stride(), float(p), KIND=p_kind(p), COMPUTE=_TL[compute], BLOCK_P=_BLOCK, BLOCK_M=_BLOCK)
