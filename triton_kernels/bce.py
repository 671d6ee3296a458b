"""Fused, numerically stable binary cross-entropy with logits (``BCEWithLogitsLoss``).

Per element, with ``sp = softplus(-x) = log1p(exp(-|x|)) + max(-x, 0)`` (never overflows) and
``lw = 1 + (pos_weight - 1) * y``:

    loss = w * ((1 - y) * x + lw * sp)
    dloss/dx = w * ((1 - y) - lw * sigmoid(-x))

One kernel computes either (BACKWARD switch) over the broadcast shape; every operand is read
through its own strides (stride 0 where broadcast: weight, pos_weight, a 0-d incoming gradient),
so nothing is expanded in memory. The output is contiguous, in fp32 (fp64 for fp64 inputs) for
the loss, in the input's dtype for the gradient. The backward multiplies by ``scale`` (1/n for
the mean reduction, passed as float64 bits).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import launch
from ._common import elementwise_block, f64_bits, grid_1d, linear_index, load_f64_scalar, needs_int64, strided_offset
from .elementwise import _log1p, _sigmoid


@triton.jit(do_not_specialize=["scale_bits"])
def _bce_logits_kernel(x, y, w, pw, g, out, n, shape, sx, sy, sw, spw, sg, scale_bits, HAS_W: tl.constexpr,
                       HAS_PW: tl.constexpr, BACKWARD: tl.constexpr, COMPUTE: tl.constexpr, NDIM: tl.constexpr,
                       INT64: tl.constexpr, BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, INT64)
    mask = lin < n
    xv = tl.load(x + strided_offset(lin, shape, sx, NDIM), mask=mask, other=0).to(COMPUTE)
    yv = tl.load(y + strided_offset(lin, shape, sy, NDIM), mask=mask, other=0).to(COMPUTE)
    if HAS_PW:
        lw = 1.0 + (tl.load(pw + strided_offset(lin, shape, spw, NDIM), mask=mask, other=0).to(COMPUTE) - 1.0) * yv
    else:
        lw = tl.full(xv.shape, 1.0, COMPUTE)
    if BACKWARD:
        r = (1.0 - yv) - lw * _sigmoid(-xv)
        gv = tl.load(g + strided_offset(lin, shape, sg, NDIM), mask=mask, other=0).to(COMPUTE)
        r = r * gv * load_f64_scalar(scale_bits).to(COMPUTE)
    else:
        sp = _log1p(tl.exp(-tl.abs(xv))) + tl.maximum(-xv, 0.0)
        r = (1.0 - yv) * xv + lw * sp
    if HAS_W:
        r = r * tl.load(w + strided_offset(lin, shape, sw, NDIM), mask=mask, other=0).to(COMPUTE)
    tl.store(out + lin, r.to(out.dtype.element_ty), mask=mask)


def _strides(t, ndim):
    return tuple(t.stride()) if ndim else (0,)


def bce_with_logits(out, x, y, w=None, pw=None, g=None, scale: float = 1.0) -> None:
    """Forward (``g`` None): out = elementwise loss. Backward: out = dloss/dx * g * scale.
    Every operand already has ``out``'s shape (broadcast operands expanded with stride 0)."""
    n = out.numel()
    if n == 0:
        return
    nd = out.ndim
    shape = tuple(out.shape) if nd else (1,)
    ops = [x, y, w if w is not None else x, pw if pw is not None else x, g if g is not None else x]
    st = [_strides(t, nd) for t in ops]
    compute = tl.float64 if x.dtype.name == "float64" else tl.float32
    block = elementwise_block(n)
    launch(_bce_logits_kernel, grid_1d(n, block), *ops, out, n, shape, *st, f64_bits(scale),
           HAS_W=w is not None, HAS_PW=pw is not None, BACKWARD=g is not None, COMPUTE=compute, NDIM=len(shape),
           INT64=needs_int64(shape, *st), BLOCK=block)
