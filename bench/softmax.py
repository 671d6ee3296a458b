"""Softmax family: softmax over the last dim of a (rows, 1024) matrix (triton_kernels/softmax.py)."""
from __future__ import annotations

import numpy as np

from .common import Case, Context

SIZE_AXIS = "elements (rows x 1024)"  # what a case's size is: the plot's x axis

COLS = 1024


def _np_softmax(a):
    e = np.exp(a - a.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def cases(ctx: Context) -> list:
    import tritensor as tt

    out = []
    sizes = ctx.pick([1 << 16, 1 << 20], [1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22],
                     [1 << 20, 1 << 24, 1 << 26], [1 << k for k in range(16, 29, 2)])
    for n in sizes:
        rows = max(1, n // COLS)
        for dt in ctx.dtypes:
            x = ctx.randn((rows, COLS), dt)
            peer, name = ctx.make_peer(dt, (x,), lambda t: t.softmax(-1), _np_softmax)
            out.append(Case("softmax", "softmax(dim=-1)", f"[{rows}, {COLS}]", dt, rows * COLS,
                            lambda x=x: tt.softmax(x, dim=-1), nbytes=2 * x.nbytes, peer=peer, peer_name=name))
    return out
