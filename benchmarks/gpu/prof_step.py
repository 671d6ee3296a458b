"""Where the eager transformer step's time goes on a GPU: wall vs host CPU, and a cProfile of steps."""
import cProfile, io, os, pstats, time
import numpy as np
import tritensor as tt
from tritensor.nn.modules.transformer import generate_square_subsequent_mask
B, L, Dm, NL = [int(v) for v in os.environ.get("SIZES", "8,1024,1024,6").split(",")]
dev = "cuda"
m = tt.nn.TransformerEncoder(tt.nn.TransformerEncoderLayer(Dm, 16 if Dm >= 256 else 4, 4 * Dm, dropout=0.0, activation="gelu", batch_first=True, norm_first=True), NL).to(dev)
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
def fwd():
    with tt.autocast("cuda", dtype=tt.bfloat16):
        return (m(x, mask=mask, is_causal=True).float() ** 2).mean()
for _ in range(3): step()
tt.cuda.synchronize()
for name, fn in (("step", step), ("forward only", fwd)):
    for _ in range(3):
        w0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(3): fn()
        c1, wi = time.thread_time(), time.perf_counter(); tt.cuda.synchronize(); w1 = time.perf_counter()
        print(f"{name}: wall {(w1-w0)/3*1e3:.1f} ms/step; issuing: wall {(wi-w0)/3*1e3:.1f} ms, host CPU {(c1-c0)/3*1e3:.1f} ms", flush=True)
# host wall until the last launch returns, then the drain
w0 = time.perf_counter(); step(); w1 = time.perf_counter(); tt.cuda.synchronize(); w2 = time.perf_counter()
print(f"one step: {(w1-w0)*1e3:.1f} ms issuing, {(w2-w1)*1e3:.1f} ms draining", flush=True)
def phases():
    t = [time.perf_counter()]
    opt.zero_grad()
    with tt.autocast("cuda", dtype=tt.bfloat16):
        loss = (m(x, mask=mask, is_causal=True).float() ** 2).mean()
    t.append(time.perf_counter()); loss.backward(); t.append(time.perf_counter()); opt.step(); t.append(time.perf_counter())
    tt.cuda.synchronize(); t.append(time.perf_counter())
    return [round((b - a) * 1e3, 1) for a, b in zip(t, t[1:])]
for _ in range(2): print("issue fwd/bwd/opt, drain (ms):", phases(), flush=True)
pr = cProfile.Profile()
pr.enable()
for _ in range(2): step()
tt.cuda.synchronize()
pr.disable()
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(35); print(s.getvalue()[:9000])
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("cumtime").print_stats(30); print(s.getvalue()[:7000])
