"""A transformer training step captured once into a CUDA graph and replayed: the same losses as eager, to the bit.

    python examples/graphed_step.py                  # GPU: 6 layers, d=512, bf16 autocast, fused AdamW
    python examples/graphed_step.py --layers 2 --d-model 128 --steps 5

Two copies of one model (same seed) train on the same batches. The eager copy runs each step as
ordinary Python: forward under ``tritensor.autocast``, backward, ``clip_grad_norm_``, fused AdamW
through a ``GradScaler`` (its unscale, finite check and scale update all stay on the device). The
graphed copy runs the very same step a few times on a side stream to warm up (every kernel
compiled and autotuned, every launch key checked, every address table on the device), captures
one step with ``tritensor.cuda.graph`` and replays it: each later step is one copy of the batch
into the static input tensors and one ``replay()``, no Python per op. The script prints both
losses per step, asserts they are equal bit for bit, and the time per step of each.

CPU mode has no CUDA graphs: the script says so and exits with status 2.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import tritensor as tt
import tritensor.nn.functional as F
from tritensor import nn

VOCAB = 256


class Model(nn.Module):
    def __init__(self, layers: int, d: int, heads: int, seq: int):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, d)
        self.pos = nn.Parameter(tt.randn(seq, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, VOCAB)
        # PyTorch asks for the causal mask with the is_causal hint; given both, attention runs the
        # fused causal kernel without reading the mask. A buffer: it moves with .cuda(), so the
        # captured step makes no host-to-device copy of it.
        self.register_buffer("causal_mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

    def forward(self, x):
        h = self.tok(x) + self.pos
        h = self.blocks(h, mask=self.causal_mask, is_causal=True)
        return self.head(self.norm(h))


def make(args, seed):
    tt.manual_seed(seed)
    model = Model(args.layers, args.d_model, args.heads, args.seq).cuda()
    opt = tt.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    scaler = tt.amp.GradScaler("cuda", init_scale=2.0**10)
    return model, opt, scaler


def step(copy, x, y):
    model, opt, scaler = copy
    with tt.autocast("cuda", dtype=tt.bfloat16):
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB).float(), y.reshape(-1))
    opt.zero_grad(set_to_none=False)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
    return loss


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args(argv)
    if not tt.cuda.is_available():
        print("graphed_step.py: CUDA graphs need a GPU; tritensor runs in CPU mode here", file=sys.stderr)
        return 2

    rng = np.random.default_rng(0)
    batches = [rng.integers(0, VOCAB, (args.batch, args.seq + 1)) for _ in range(args.warmup + args.steps)]
    data = [(tt.tensor(b[:, :-1], device="cuda"), tt.tensor(b[:, 1:], device="cuda")) for b in batches]

    eager = make(args, 0)
    graphed = make(args, 0)
    static_x, static_y = tt.empty_like(data[0][0]), tt.empty_like(data[0][1])
    side = tt.cuda.Stream()
    side.wait_stream(tt.cuda.current_stream())
    eager_losses, graphed_losses = [], []
    with tt.cuda.stream(side):  # warm-up: the same steps on both copies, the graphed one on the side stream
        for x, y in data[:args.warmup]:
            static_x.copy_(x)
            static_y.copy_(y)
            graphed_losses.append(step(graphed, static_x, static_y).float().item())
    for x, y in data[:args.warmup]:
        eager_losses.append(step(eager, x, y).float().item())
    tt.cuda.current_stream().wait_stream(side)
    tt.cuda.synchronize()

    g = tt.cuda.CUDAGraph()
    with tt.cuda.graph(g):
        static_loss = step(graphed, static_x, static_y)

    t_eager = t_graph = 0.0
    for i, (x, y) in enumerate(data[args.warmup:]):
        t0 = time.perf_counter()
        le = step(eager, x, y).float()
        tt.cuda.synchronize()
        t_eager += time.perf_counter() - t0
        t0 = time.perf_counter()  # the capture recorded the step without running it: replay i is step i
        static_x.copy_(x)
        static_y.copy_(y)
        g.replay()
        tt.cuda.synchronize()
        t_graph += time.perf_counter() - t0
        eager_losses.append(le.item())
        graphed_losses.append(static_loss.float().item())
        print(f"step {i:3d}  eager {eager_losses[-1]:.6f}  graphed {graphed_losses[-1]:.6f}")
    same = np.array(eager_losses, np.float32).tobytes() == np.array(graphed_losses, np.float32).tobytes()
    n = len(data) - args.warmup
    print(f"eager {1e3 * t_eager / n:.2f} ms/step, graphed {1e3 * t_graph / n:.2f} ms/step "
          f"({t_eager / max(t_graph, 1e-9):.2f}x); losses equal to the bit: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
