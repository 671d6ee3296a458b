"""Elementwise family: a binary op (add: two reads, one write) and a transcendental unary op (gelu)."""
from __future__ import annotations

import numpy as np

from .common import Case, Context

SIZE_AXIS = "elements"  # what a case's size is: the plot's x axis


def _np_gelu(x):
    # NumPy has no erf ufunc: the peer computes gelu's tanh form, the same passes over memory.
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def cases(ctx: Context) -> list:
    import tritensor as tt

    torch_gelu = ctx.torch.nn.functional.gelu if ctx.torch is not None else None
    out = []
    sizes = ctx.pick([1 << 16, 1 << 20], [1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22],
                     [1 << 20, 1 << 24, 1 << 26], [1 << k for k in range(16, 29, 2)])
    for n in sizes:
        for dt in ctx.dtypes:
            a, b = ctx.randn((n,), dt), ctx.randn((n,), dt)
            isz = a.element_size()
            peer, name = ctx.make_peer(dt, (a, b), lambda x, y: x + y, np.add)
            out.append(Case("elementwise", "add", f"[{n}]", dt, n, lambda a=a, b=b: a + b, nbytes=3 * n * isz,
                            peer=peer, peer_name=name))
            peer, name = ctx.make_peer(dt, (a,), torch_gelu, _np_gelu)
            out.append(Case("elementwise", "gelu", f"[{n}]", dt, n, lambda a=a: tt.gelu(a), nbytes=2 * n * isz,
                            peer=peer, peer_name=name))
    return out
