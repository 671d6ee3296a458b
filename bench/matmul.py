"""Matmul family: square GEMMs, and the fused linear + gelu epilogue (triton_kernels/matmul.py)."""
from __future__ import annotations

from .common import Case, Context


def cases(ctx: Context) -> list:
    import tritensor as tt
    from ..core.ops.matmul import fused_linear

    out = []
    sizes = ctx.pick([128, 256], [64, 128, 256, 512], [1024, 4096], [256, 512, 1024, 2048, 4096, 8192])
    for n in sizes:
        for dt in ctx.dtypes:
            a, b = ctx.randn((n, n), dt), ctx.randn((n, n), dt)
            peer, name = ctx.make_peer(dt, (a, b), lambda x, y: x @ y, lambda x, y: x @ y)
            out.append(Case("matmul", "a @ b", f"{n}x{n}x{n}", dt, n, lambda a=a, b=b: a @ b, flops=2.0 * n**3,
                            peer=peer, peer_name=name))
            if not ctx.quick:
                bias = ctx.randn((n,), dt)
                torch_fn = None
                if ctx.torch is not None:
                    F = ctx.torch.nn.functional
                    torch_fn = lambda x, w, c: F.gelu(F.linear(x, w, c))  # noqa: E731
                peer, name = ctx.make_peer(dt, (a, b, bias), torch_fn, None)
                out.append(Case("matmul", "linear+gelu (fused)", f"{n}x{n}x{n}", dt, n,
                                lambda a=a, b=b, c=bias: fused_linear(a, b, c, "gelu"), flops=2.0 * n**3,
                                peer=peer, peer_name=name))
    return out
