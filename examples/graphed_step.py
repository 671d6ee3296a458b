"""A transformer training step compiled with ``tritensor.compile``: captured once into a CUDA graph and
replayed, with the same losses as eager, to the bit.

    python examples/graphed_step.py                  # GPU: 6 layers, d=512, bf16 autocast, fused AdamW
    python examples/graphed_step.py --layers 2 --d-model 128 --steps 5
    TRITENSOR_DEVICE=sim python examples/graphed_step.py --layers 1 --d-model 32 --heads 2 --seq 16 --batch 2 --steps 3

Two copies of one model (same seed) train on the same batches. The eager copy runs each step as
ordinary Python: forward under ``tritensor.autocast``, backward, ``clip_grad_norm_``, fused AdamW
through a ``GradScaler`` (its unscale, finite check and scale update all stay on the device). The
other copy runs the very same function through ``tritensor.compile(mode="reduce-overhead")``
(PyTorch's ``torch.compile``): its first call is a warm-up on a side stream (every kernel compiled
and autotuned, every address table on the device), its second captures the whole step into a CUDA
graph, and every later call is one copy of the batch into the graph's static inputs and one
replay, no Python per op. The script prints both losses per step, checks that they are equal bit
for bit and that the compiled step never fell back to eager, and prints the time per step of each.

CPU mode has no CUDA graphs: the script says so and exits with status 2.
"""
from __future__ import annotations

import argparse
import functools
import sys
import time
import warnings

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
    opt.zero_grad()  # torch's default, set_to_none=True: backward makes the gradients, in the graph's pool
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
    p.add_argument("--steps", type=int, default=20, help="steps after the warm-up and the capture")
    args = p.parse_args(argv)
    if not tt.cuda.is_available():
        print("graphed_step.py: CUDA graphs need a GPU; tritensor runs in CPU mode here", file=sys.stderr)
        return 2

    rng = np.random.default_rng(0)
    batches = [rng.integers(0, VOCAB, (args.batch, args.seq + 1)) for _ in range(2 + args.steps)]
    data = [(tt.tensor(b[:, :-1], device="cuda"), tt.tensor(b[:, 1:], device="cuda")) for b in batches]

    eager = make(args, 0)
    graphed = make(args, 0)
    # The compiled step returns the graph's static loss, overwritten by the next call: read it
    # (here with .item()) before calling again, or keep a .clone().
    compiled = tt.compile(functools.partial(step, graphed), mode="reduce-overhead")
    eager_losses, graphed_losses = [], []
    t_eager = t_graph = 0.0
    with warnings.catch_warnings(record=True) as fell_back:  # compile warns when it runs a step eagerly
        warnings.simplefilter("always")
        for i, (x, y) in enumerate(data):
            t0 = time.perf_counter()
            le = step(eager, x, y).float()
            tt.cuda.synchronize()
            t1 = time.perf_counter()
            lg = compiled(x, y).float()  # call 0: warm-up, call 1: capture (and replay), then replays
            tt.cuda.synchronize()
            t2 = time.perf_counter()
            if i >= 2:
                t_eager, t_graph = t_eager + t1 - t0, t_graph + t2 - t1
            eager_losses.append(le.item())
            graphed_losses.append(lg.item())
            print(f"step {i:3d}  eager {eager_losses[-1]:.6f}  compiled {graphed_losses[-1]:.6f}"
                  f"{'  (warm-up)' if i == 0 else '  (capture)' if i == 1 else ''}")
    for w in fell_back:
        print(f"graphed_step.py: {w.message}", file=sys.stderr)
    same = np.array(eager_losses, np.float32).tobytes() == np.array(graphed_losses, np.float32).tobytes()
    n = max(len(data) - 2, 1)
    print(f"eager {1e3 * t_eager / n:.2f} ms/step, compiled {1e3 * t_graph / n:.2f} ms/step "
          f"({t_eager / max(t_graph, 1e-9):.2f}x); losses equal to the bit: {same}; replayed: {not fell_back}")
    return 0 if same and not fell_back else 1


if __name__ == "__main__":
    sys.exit(main())
