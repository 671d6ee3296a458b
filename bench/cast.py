"""Cast family: dtype conversion to/from float32 (triton_kernels/copies.py): one read, one write."""
from __future__ import annotations

import numpy as np

from .common import Case, Context

SIZE_AXIS = "elements"  # what a case's size is: the plot's x axis


def cases(ctx: Context) -> list:
    import tritensor as tt

    out = []
    sizes = ctx.pick([1 << 16, 1 << 20], [1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22],
                     [1 << 20, 1 << 24, 1 << 26], [1 << k for k in range(16, 29, 2)])
    for n in sizes:
        for dt in ctx.dtypes:
            dst = "float16" if dt == "float32" else "float32"
            x = ctx.randn((n,), dt)
            target = getattr(tt, dst)
            nbytes = n * (x.element_size() + target.itemsize)
            torch_fn = (lambda t, d=dst: t.to(getattr(ctx.torch, d))) if ctx.torch is not None else None
            peer, name = ctx.make_peer(dt, (x,), torch_fn, lambda a, d=dst: a.astype(getattr(np, d)))
            out.append(Case("cast", f"to({dst})", f"[{n}]", dt, n, lambda x=x, t=target: x.to(t), nbytes=nbytes,
                            peer=peer, peer_name=name))
    return out
