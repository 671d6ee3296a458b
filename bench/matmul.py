"""Matmul family: square GEMMs, and the fused linear + gelu epilogue (triton_kernels/matmul.py).

On a GPU the fp16/bf16 rows run whatever the launcher selects (on Hopper: the persistent TMA
kernel of ``matmul_tma.py``); a second row, "(general kernel)", times ``matmul.py``'s kernel with
the Hopper one switched off.
"""
from __future__ import annotations

from ..triton_kernels import matmul_tma
from .common import Case, Context, with_kernel_off

SIZE_AXIS = "M = N = K"  # what a case's size is: the plot's x axis


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
            if ctx.gpu and dt != "float32":
                out.append(Case("matmul", "a @ b (general kernel)", f"{n}x{n}x{n}", dt, n,
                                with_kernel_off(matmul_tma, lambda a=a, b=b: a @ b), flops=2.0 * n**3,
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
