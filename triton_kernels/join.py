"""Remapping strided copies: ``flip``, ``roll``, ``repeat``/``tile``, ``tril``/``triu``.

One kernel serves them all. Output element (i_0, ..., i_{n-1}) reads the input element whose
index along each dim d is ``(a_d * i_d + b_d) mod m_d``:

- a plain dim:   a=1,  b=0,          m=n_d   (the identity)
- a flipped dim: a=-1, b=n_d-1,      m=n_d
- a rolled dim:  a=1,  b=(-s) mod n, m=n_d   (shift s)
- a repeated dim (output r*n_d long): a=1, b=0, m=n_d

b is chosen so ``a*i + b >= 0`` for every i, so C's ``%`` agrees with Python's. The input is read
through its own strides (transposed, sliced and expanded inputs need no copy first); the output
may be strided too. ``TRI`` (1: tril, 2: triu) zeroes the elements of the last two dims with
``col - row > k`` (tril) or ``col - row < k`` (triu). Values are moved, never computed on, so no
dtype needs an accumulation type.

``cat``/``stack`` and ``diag`` need no kernel of their own: they are the strided copy of
``cast.py`` into views (narrow/select/diagonal) of the output.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import launch
from ._common import elementwise_block, grid_1d, linear_index, needs_int64


@triton.jit
def _remap_kernel(x, out, n, k, shape, out_strides, x_strides, a, b, m,
                  NDIM: tl.constexpr, TRI: tl.constexpr, INT64: tl.constexpr, BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, INT64)
    mask = lin < n
    ox = tl.zeros_like(lin)
    oo = tl.zeros_like(lin)
    rem = lin
    for d in tl.static_range(NDIM - 1, -1, -1):
        i = rem % shape[d]
        rem = rem // shape[d]
        oo += i * out_strides[d]
        ox += ((a[d] * i + b[d]) % m[d]) * x_strides[d]
    v = tl.load(x + ox, mask=mask)
    if TRI != 0:
        col = lin % shape[NDIM - 1]
        row = (lin // shape[NDIM - 1]) % shape[NDIM - 2]
        if TRI == 1:
            keep = col - row <= k
        else:
            keep = col - row >= k
        v = tl.where(keep, v, tl.zeros_like(v))
    tl.store(out + oo, v, mask=mask)


def remap(out, x, a, b, m, tri: int = 0, k: int = 0) -> None:
    """out[i] = x[(a*i + b) mod m] per dim (see the module docstring); ``out`` and ``x`` have the same rank."""
    n = out.numel()
    if n == 0:
        return
    shape = tuple(out.shape) or (1,)
    os_, xs = tuple(out.stride()) or (1,), tuple(x.stride()) or (1,)
    a, b, m = (tuple(int(v) for v in a), tuple(int(v) for v in b), tuple(int(v) for v in m)) if out.ndim else \
        ((1,), (0,), (1,))
    span = sum((s - 1) * abs(st) for s, st in zip(x.shape, xs))
    int64 = needs_int64(shape, os_) or span >= 2**31 - 1 or max(abs(v) for v in a + b + m) * max(shape) >= 2**31 - 1
    block = elementwise_block(n)
    launch(_remap_kernel, grid_1d(n, block), x, out, n, int(k), shape, os_, xs, a, b, m,
           NDIM=len(shape), TRI=int(tri), INT64=int64, BLOCK=block)
