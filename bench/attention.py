"""Attention family: fused ``scaled_dot_product_attention`` forward and forward+backward
(triton_kernels/attention.py, attention_bwd.py) against torch's SDPA (flash backend) on a GPU,
or the materialised NumPy softmax(QKᵀ)V in CPU mode. On a GPU the fp16/bf16 forward runs whatever the
core entry selects (on Hopper: ``attention_tma.py``'s TMA kernel); a second row, "(general
kernel)", times ``attention.py``'s kernel with the Hopper one switched off.

Shapes follow FlashAttention's benchmark: batch 4, heads 2048 / head_dim (32 heads at 64, 16 at
128), L = S = the size, causal and not. FLOPs: forward 4·B·H·L·S·D (two GEMMs; halved when
causal), backward 2.5× that (five GEMMs), so forward+backward is 3.5×.

Memory: the op label carries the scratch memory the fused forward+backward needs beyond its
inputs, outputs and gradients (measured with ``tritensor.cuda.max_memory_allocated`` on a GPU;
on CPU the buffers it allocates: lse and delta, L floats per head each) next to what a
materialised attention would hold (the fp32 scores and the probabilities, B·H·L·S each).
"""
from __future__ import annotations

import numpy as np

from ..triton_kernels import attention_tma
from .common import Case, Context, with_kernel_off

SIZE_AXIS = "L = S (sequence length)"  # what a case's size is: the plot's x axis

BATCH = 4


def _mb(n: float) -> str:
    return f"{n / 2**20:.3g} MB" if n < 2**30 else f"{n / 2**30:.3g} GB"


def _np_attention(q, k, v, causal):
    s = q @ np.swapaxes(k, -1, -2) * (1.0 / np.sqrt(q.shape[-1]))
    if causal:
        L, S = s.shape[-2:]
        s = np.where(np.tril(np.ones((L, S), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return p @ v, p


def _np_fwd_bwd(q, k, v, do, causal):
    o, p = _np_attention(q, k, v, causal)
    dv = np.swapaxes(p, -1, -2) @ do
    dp = do @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    return o, ds @ k, np.swapaxes(ds, -1, -2) @ q, dv


def _torch_fns(torch, causal):
    F = torch.nn.functional
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # older torch: whatever backend it picks
        SDPBackend = sdpa_kernel = None

    def ctx_for(q):
        if sdpa_kernel is None or q.dtype == torch.float32:  # flash has no fp32 kernel
            return _Null()
        return sdpa_kernel(SDPBackend.FLASH_ATTENTION)

    def fwd(q, k, v):
        with torch.no_grad(), ctx_for(q):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def fwd_bwd(q, k, v, do):
        q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
        with ctx_for(q):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return torch.autograd.grad(o, (q, k, v), do)

    return fwd, fwd_bwd


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _scratch_bytes(ctx, run, B, H, L, io_bytes) -> float:
    """Bytes the fused forward+backward allocates beyond q, k, v, dO and its results (out, dq, dk,
    dv: ``io_bytes``)."""
    import tritensor as tt

    if not ctx.gpu:
        return 2 * B * H * L * 4  # lse and delta (fp32)
    tt.cuda.synchronize()
    base = tt.cuda.memory_allocated()
    tt.cuda.reset_peak_memory_stats()
    run()
    tt.cuda.synchronize()
    return tt.cuda.max_memory_allocated() - base - io_bytes


def cases(ctx: Context) -> list:
    import tritensor as tt
    import tritensor.nn.functional as F

    out = []
    seqs = ctx.pick([64], [64, 128], [1024, 4096], [512, 1024, 2048, 4096, 8192, 16384])
    head_dims = [32] if not ctx.gpu else [64, 128]
    batch = BATCH if ctx.gpu else 1
    torch_fwd = torch_fwd_bwd = None
    for causal in (False, True):
        if ctx.torch is not None:
            torch_fwd, torch_fwd_bwd = _torch_fns(ctx.torch, causal)
        for D in head_dims:
            H = 2048 // D if ctx.gpu else 2
            for n in seqs:
                for dt in ctx.dtypes:
                    q, k, v, do = (ctx.randn((batch, H, n, D), dt) for _ in range(4))
                    flops = 4.0 * batch * H * n * n * D * (0.5 if causal else 1.0)
                    shape = f"B{batch} H{H} L=S={n} D{D}" + (" causal" if causal else "")
                    variant = f" D{D}" + (" causal" if causal else "")  # the plot's series: one line each
                    peer, name = ctx.make_peer(dt, (q, k, v), torch_fwd,
                                               lambda a, b, c, causal=causal: _np_attention(a, b, c, causal)[0])
                    out.append(Case("attention", "sdpa fwd", shape, dt, n,
                                    lambda q=q, k=k, v=v, c=causal: F.scaled_dot_product_attention(q, k, v, is_causal=c),
                                    flops=flops, peer=peer, peer_name=name + ("(flash)" if name == "torch" and dt !=
                                                                                 "float32" else ""),
                                    series="sdpa fwd" + variant))
                    if ctx.gpu and dt != "float32" and D in attention_tma.HEAD_DIMS:
                        out.append(Case("attention", "sdpa fwd (general kernel)", shape, dt, n,
                                        with_kernel_off(attention_tma, lambda q=q, k=k, v=v, c=causal:
                                                        F.scaled_dot_product_attention(q, k, v, is_causal=c)),
                                        flops=flops, peer=peer, peer_name=out[-1].peer_name,
                                        series="sdpa fwd (general kernel)" + variant))
                    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))

                    def run(q=qg, k=kg, v=vg, do=do, c=causal):
                        o = F.scaled_dot_product_attention(q, k, v, is_causal=c)
                        return tt.autograd.grad(o, (q, k, v), do)

                    peer, name = ctx.make_peer(dt, (q, k, v, do), torch_fwd_bwd,
                                               lambda a, b, c, d, causal=causal: _np_fwd_bwd(a, b, c, d, causal))
                    scratch = _scratch_bytes(ctx, run, batch, H, n, 4 * q.nbytes)
                    materialised = batch * H * n * n * (4 + q.dtype.itemsize)
                    out.append(Case("attention", f"sdpa fwd+bwd (scratch {_mb(scratch)} vs materialised "
                                                 f"{_mb(materialised)})", shape, dt, n, run, flops=3.5 * flops,
                                    peer=peer, peer_name=name, series="sdpa fwd+bwd" + variant))
    return out
