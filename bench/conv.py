"""conv2d family: forward and both backward kernels on ResNet-like layers and a depthwise layer."""
from __future__ import annotations

import numpy as np

from .common import Case, Context

SIZE_AXIS = "H = W (input height and width)"  # what a case's size is: the plot's x axis


def numpy_conv2d(x, w, padding):
    """The CPU peer: stride-1 conv as one einsum per kernel tap over a padded copy (no im2col)."""
    N, C, H, W = x.shape
    OC, Cg, KH, KW = w.shape
    groups = C // Cg
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    OH, OW = H + 2 * padding - KH + 1, W + 2 * padding - KW + 1
    wg = w.reshape(groups, OC // groups, Cg, KH, KW)
    y = np.zeros((N, groups, OC // groups, OH, OW), dtype=np.float32)
    for kh in range(KH):
        for kw in range(KW):
            xs = xp[:, :, kh: kh + OH, kw: kw + OW].reshape(N, groups, Cg, OH, OW)
            y += np.einsum("ngchw,goc->ngohw", xs, wg[:, :, :, kh, kw])
    return y.reshape(N, OC, OH, OW)


def cases(ctx: Context) -> list:
    import tritensor as tt
    from ..core.ops import conv as ops

    # (N, C, OC, KH=KW, groups) per layer; the spatial size H = W comes from the size list.
    layers = [("conv3x3", 4 if not ctx.gpu else 32, 16 if not ctx.gpu else 128, 32 if not ctx.gpu else 128, 3, 1),
              ("depthwise3x3", 4 if not ctx.gpu else 32, 32 if not ctx.gpu else 256, 32 if not ctx.gpu else 256, 3,
               32 if not ctx.gpu else 256)]
    sizes = ctx.pick([16], [8, 16, 32], [28, 56], [14, 28, 56, 112])
    dtypes = [d for d in ctx.dtypes if d in ("float32", "float16", "bfloat16", "float64")]
    out = []
    for hw in sizes:
        for name, N, C, OC, k, groups in layers:
            for dt in dtypes:
                x, w = ctx.randn((N, C, hw, hw), dt), ctx.randn((OC, C // groups, k, k), dt)
                flops = 2.0 * N * OC * hw * hw * (C // groups) * k * k
                shape = f"N{N} C{C} {hw}x{hw} OC{OC} k{k} g{groups}"
                torch_fn = None
                if ctx.torch is not None:
                    F = ctx.torch.nn.functional
                    torch_fn = lambda a, b, g=groups: F.conv2d(a, b, padding=1, groups=g)  # noqa: E731
                peer, pname = ctx.make_peer(dt, (x, w), torch_fn, lambda a, b: numpy_conv2d(a, b, 1))
                out.append(Case("conv2d", f"{name} fwd", shape, dt, hw,
                                lambda x=x, w=w, g=groups: tt.conv2d(x, w, padding=1, groups=g), flops=flops,
                                peer=peer, peer_name=pname))
                if ctx.quick and not ctx.gpu:
                    continue  # keep the CPU quick run short: backward kernels in --full or on GPU
                dy = ctx.randn((N, OC, hw, hw), dt)
                tg = None
                if ctx.torch is not None:
                    grad = ctx.torch.nn.grad
                    tg = lambda d, b, g=groups, s=x.shape: grad.conv2d_input(s, b, d, padding=1, groups=g)  # noqa
                peer, pname = ctx.make_peer(dt, (dy, w), tg, None)
                out.append(Case("conv2d", f"{name} grad_input", shape, dt, hw,
                                lambda dy=dy, w=w, g=groups, s=x.shape: ops.conv2d_backward_input(dy, w, s, 1, 1, 1, g),
                                flops=flops, peer=peer, peer_name=pname))
                if ctx.torch is not None:
                    grad = ctx.torch.nn.grad
                    tg = lambda d, a, g=groups, s=w.shape: grad.conv2d_weight(a, s, d, padding=1, groups=g)  # noqa
                peer, pname = ctx.make_peer(dt, (dy, x), tg, None)
                out.append(Case("conv2d", f"{name} grad_weight", shape, dt, hw,
                                lambda dy=dy, x=x, g=groups, s=w.shape: ops.conv2d_backward_weight(dy, x, s, 1, 1, 1, g),
                                flops=flops, peer=peer, peer_name=pname))
    return out
