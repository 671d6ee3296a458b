"""Long-K family: products with a long K and a tiny output, ``x.dot(y)`` and the Gram matrix
``A @ A.T`` of an 8-row ``A``, which the split-K kernel serves (triton_kernels/matmul_splitk.py).

Their arithmetic is negligible; reading the two operands is the work, so they report GB/s
against the copy bandwidth, and a time near ``bytes / bandwidth`` is the target (the general
matmul kernel ran each on one SM).
"""
from __future__ import annotations

from .common import Case, Context

SIZE_AXIS = "K (elements of each operand)"  # what a case's size is: the plot's x axis


def cases(ctx: Context) -> list:
    out = []
    for k in ctx.pick([1 << 12], [1 << 14, 1 << 16], [1 << 24], [1 << 20, 1 << 22, 1 << 24]):
        for dt in ctx.dtypes:
            x, y = ctx.randn((k,), dt), ctx.randn((k,), dt)
            peer, name = ctx.make_peer(dt, (x, y), lambda u, v: u.dot(v), lambda u, v: u @ v)
            out.append(Case("long_k", "x.dot(y)", f"{k}", dt, k, lambda x=x, y=y: x.dot(y),
                            nbytes=2.0 * k * x.element_size(), peer=peer, peer_name=name))
            cols = max(k // 8, 1)  # the same bytes as the dot
            a = ctx.randn((8, cols), dt)
            peer, name = ctx.make_peer(dt, (a,), lambda u: u @ u.T, lambda u: u @ u.T)
            out.append(Case("long_k", "A @ A.T, A 8 x K/8", f"8x{cols}", dt, k, lambda a=a: a @ a.T,
                            nbytes=8.0 * cols * a.element_size(), peer=peer, peer_name=name))
    return out
