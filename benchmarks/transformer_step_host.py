"""Host time of a small transformer training step on the simulated device, the driver's launch a no-op.

    TRITENSOR_DEVICE=sim python benchmarks/transformer_step_host.py

The GPU path's host cost of measure.py's `gpt` step (bf16 autocast, TransformerEncoder pre-norm
layers, AdamW) at toy sizes: launches per step (the simulator counts them) and thread CPU time
per step, min of 15 batches of 5 steps. On an H200 the eager step was host-bound (75.6 ms eager
against 29.1 ms replayed as a CUDA graph), so launches and host time per step are what move it.
"""
import time
import numpy as np
import tritensor as tt
from tritensor.runtime import sim
from tritensor.nn.modules.transformer import generate_square_subsequent_mask
B, L, Dm, NL = 2, 16, 64, 2
dev = "cuda"
m = tt.nn.TransformerEncoder(tt.nn.TransformerEncoderLayer(Dm, 4, 4 * Dm, dropout=0.0, activation="gelu", batch_first=True, norm_first=True), NL).to(dev)
opt = tt.optim.AdamW(m.parameters(), lr=1e-4)
mask = generate_square_subsequent_mask(L, device=dev)
x = tt.tensor(np.random.default_rng(0).standard_normal((B, L, Dm)).astype(np.float32)).to(dev)
def step():
    opt.zero_grad()
    with tt.autocast("cuda", dtype=tt.bfloat16):
        y = m(x, mask=mask, is_causal=True)
        loss = (y.float() ** 2).mean()
    loss.backward()
    opt.step()
for _ in range(3): step()
tt.cuda.synchronize()
sim.HOST_ONLY = True
with sim.counting() as c:
    step()
print("counts", c)
best = 1e9
for _ in range(15):
    t0 = time.thread_time()
    for _ in range(5): step()
    best = min(best, (time.thread_time() - t0) / 5 * 1e3)
print("host ms per step (sim, launches no-op), min of 15 x 5:", round(best, 2))
