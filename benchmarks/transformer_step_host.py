"""Host time of a small transformer training step on the simulated device, the driver's launch a no-op.

    TRITENSOR_DEVICE=sim python benchmarks/transformer_step_host.py [--layers N] [--by-node]

The GPU path's host cost of measure.py's `gpt` step (bf16 autocast, TransformerEncoder pre-norm
layers, AdamW) at toy sizes: launches per step and per phase (the simulator counts them) and thread
CPU time per phase, min of 15 steps. On GPUs the eager step was host-bound (H100, 2026-11-27: wall
time per step equal to the host's CPU time, the GPU idle), so launches and host time per step are
what move it. ``--by-node`` also counts the backward's launches per kernel and per autograd node
(a node's launches are those made while its backward runs; "engine" is the engine's own work
between nodes: summing gradients, converting one to its input's dtype).
"""
import argparse
import collections
import time

import numpy as np

import tritensor as tt
from tritensor.autograd import engine, graph
from tritensor.nn.modules.transformer import generate_square_subsequent_mask
from tritensor.runtime import sim

ap = argparse.ArgumentParser()
ap.add_argument("--layers", type=int, default=2)
ap.add_argument("--by-node", action="store_true")
args = ap.parse_args()

per_kernel, per_node, current = collections.Counter(), collections.Counter(), ["engine"]
if args.by_node:  # before any kernel is loaded: launchers keep the bound method they find
    _run = sim.SimCompiled.run

    def _counted_run(self, *a):
        per_kernel[self.name] += 1
        per_node[current[0]] += 1
        return _run(self, *a)
    sim.SimCompiled.run = _counted_run

    def _naming(apply):
        def wrapped(self, *a, **k):
            prev, current[0] = current[0], self.name()
            try:
                return apply(self, *a, **k)
            finally:
                current[0] = prev
        return wrapped
    for cls in {graph.Node, graph.AccumulateGrad, *graph.Node.__subclasses__(),
                *(c for s in graph.Node.__subclasses__() for c in s.__subclasses__())}:
        if "apply" in vars(cls):
            cls.apply = _naming(vars(cls)["apply"])

B, L, Dm, NL = 2, 16, 64, args.layers
dev = "cuda"
m = tt.nn.TransformerEncoder(tt.nn.TransformerEncoderLayer(Dm, 4, 4 * Dm, dropout=0.0, activation="gelu", batch_first=True,
                                                           norm_first=True), NL).to(dev)
opt = tt.optim.AdamW(m.parameters(), lr=1e-4)
mask = generate_square_subsequent_mask(L, device=dev)
x = tt.tensor(np.random.default_rng(0).standard_normal((B, L, Dm)).astype(np.float32)).to(dev)


def forward():
    opt.zero_grad()
    with tt.autocast("cuda", dtype=tt.bfloat16):
        y = m(x, mask=mask, is_causal=True)
        return (y.float() ** 2).mean()


for _ in range(3):
    forward().backward()
    opt.step()
tt.cuda.synchronize()
sim.HOST_ONLY = True
counts = {}
with sim.counting() as c:
    loss = forward()
counts["forward"] = c["launch"]
per_kernel.clear(), per_node.clear()
with sim.counting() as c:
    loss.backward()
counts["backward"] = c["launch"]
bwd_kernels, bwd_nodes = per_kernel.copy(), per_node.copy()
with sim.counting() as c:
    opt.step()
counts["optimizer"] = c["launch"]
print(f"{NL} layers; launches per step {sum(counts.values())}:", counts)
best = collections.defaultdict(lambda: 1e9)
for _ in range(15):
    t0 = time.thread_time()
    loss = forward()
    t1 = time.thread_time()
    loss.backward()
    t2 = time.thread_time()
    opt.step()
    t3 = time.thread_time()
    for k, v in (("forward", t1 - t0), ("backward", t2 - t1), ("optimizer", t3 - t2), ("step", t3 - t0)):
        best[k] = min(best[k], v * 1e3)
print("host ms (sim, launches no-op), min of 15:", {k: round(v, 2) for k, v in best.items()})
if args.by_node:
    print("backward launches per kernel:", dict(bwd_kernels.most_common()))
    print("backward launches per node:", dict(bwd_nodes.most_common()))
