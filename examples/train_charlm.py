"""Train a small GPT-style character language model on the Python standard library's own source.

    python examples/train_charlm.py                 # GPU: a 4-layer model, bf16/fp16 autocast + GradScaler
    python examples/train_charlm.py                 # CPU mode: a short configuration (20 steps, 2 layers),
                                                    # about 35 s in Triton's interpreter on 2 idle
                                                    # cores (1.5-2 min when they are busy)

The text is every machine's: the ``.py`` files of the running interpreter's standard library
(``os.__file__``'s directory), read as bytes, 128 ASCII symbols (others become '?'). The model is
a causal transformer: token (``nn.Embedding``) + position embeddings, ``--layers`` pre-norm
``nn.TransformerEncoderLayer`` blocks (self-attention on the fused FlashAttention kernel with
``is_causal=True``, GELU MLP), a final LayerNorm and a linear head; AdamW, cross-entropy. On a GPU
it trains under ``tritensor.autocast`` (bf16 where supported, else fp16 with a ``GradScaler``).
It reports the training and held-out loss (nats per character; ln 128 = 4.85 is a uniform guess)
and samples text from a prompt at the end.
"""
from __future__ import annotations

import argparse
import glob
import math
import os
import sys
import time

import numpy as np

import tritensor as tt
import tritensor.nn.functional as F
from tritensor import nn

VOCAB = 128


def load_text(max_bytes: int) -> np.ndarray:
    """The standard library's source as uint8 codes < 128 (sorted file order: the same on every run)."""
    root = os.path.dirname(os.__file__)
    chunks, total = [], 0
    for path in sorted(glob.glob(os.path.join(root, "*.py"))):
        with open(path, "rb") as f:
            data = np.frombuffer(f.read(), np.uint8)
        chunks.append(data)
        total += data.size
        if total >= max_bytes:
            break
    text = np.concatenate(chunks)[:max_bytes].copy()
    text[text >= VOCAB] = ord("?")
    return text.astype(np.int64)


class CharGPT(nn.Module):
    def __init__(self, context: int, dim: int, heads: int, layers: int, dropout: float):
        super().__init__()
        self.context = context
        self.tok = nn.Embedding(VOCAB, dim)
        nn.init.normal_(self.tok.weight, std=0.02)  # GPT-2's initialisation (torch's default is std 1)
        self.pos = nn.Parameter(tt.randn(context, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=4 * dim, dropout=dropout, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, VOCAB)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(context))

    def forward(self, ids):
        T = ids.shape[1]
        x = self.tok(ids) + self.pos[:T]
        # is_causal=True with the mask as the hint: the attention kernel masks causally itself.
        x = self.blocks(x, mask=self.causal[:T, :T], is_causal=True)
        return self.head(self.norm(x))


def batches(text: np.ndarray, context: int, batch: int, rng):
    starts = rng.integers(0, text.size - context - 1, batch)
    x = np.stack([text[s:s + context] for s in starts])
    y = np.stack([text[s + 1:s + context + 1] for s in starts])
    return x, y


def loss_of(model, x, y, device, amp_dtype):
    xt, yt = tt.tensor(x, device=device), tt.tensor(y, device=device)
    with tt.autocast("cuda", dtype=amp_dtype, enabled=amp_dtype is not None):
        logits = model(xt)
        return F.cross_entropy(logits.reshape(-1, VOCAB).float(), yt.reshape(-1))


def sample(model, prompt: str, n: int, device, temperature: float, rng) -> str:
    model.eval()
    ids = [min(ord(c), VOCAB - 1) for c in prompt]
    with tt.no_grad():
        for _ in range(n):
            ctx = np.array([ids[-model.context:]], np.int64)
            logits = model(tt.tensor(ctx, device=device))[0, -1].float().cpu().numpy().astype(np.float64)
            p = np.exp((logits - logits.max()) / temperature)
            ids.append(int(rng.choice(VOCAB, p=p / p.sum())))
    model.train()
    return "".join(chr(i) for i in ids)


def main(argv=None) -> int:
    gpu = tt.cuda.is_available()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=2000 if gpu else 20)
    p.add_argument("--context", type=int, default=256 if gpu else 32)
    p.add_argument("--batch", type=int, default=64 if gpu else 8)
    p.add_argument("--dim", type=int, default=256 if gpu else 32)
    p.add_argument("--heads", type=int, default=4 if gpu else 2)
    p.add_argument("--layers", type=int, default=4 if gpu else 2)
    p.add_argument("--dropout", type=float, default=0.1 if gpu else 0.0)
    p.add_argument("--lr", type=float, default=1e-3 if gpu else 3e-3)
    p.add_argument("--text-bytes", type=int, default=4_000_000 if gpu else 200_000)
    p.add_argument("--sample", type=int, default=300 if gpu else 40, help="characters to sample at the end")
    p.add_argument("--prompt", default="def ")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=100 if gpu else 5)
    args = p.parse_args(argv)

    tt.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    text = load_text(args.text_bytes)
    split = int(0.95 * text.size)
    train, held = text[:split], text[split:]
    device = "cuda" if gpu else "cpu"
    model = CharGPT(args.context, args.dim, args.heads, args.layers, args.dropout).to(device)
    opt = tt.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    amp_dtype = None
    scaler = None
    if gpu:
        amp_dtype = tt.bfloat16 if tt.cuda.get_device_capability()[0] >= 8 else tt.float16
        scaler = tt.amp.GradScaler("cuda", enabled=amp_dtype is tt.float16)
    n_params = sum(q.numel() for q in model.parameters())
    print(f"{'GPU' if gpu else 'CPU (Triton interpreter)'}: {n_params / 1e6:.2f}M parameters, "
          f"{text.size / 1e6:.2f}M characters of stdlib source, context {args.context}, "
          f"autocast {amp_dtype.name if amp_dtype else 'off'}")
    t0 = time.perf_counter()
    for step in range(1, args.steps + 1):
        lr = args.lr * min(1.0, step / max(1, args.steps // 10))  # linear warm-up over the first 10%
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = batches(train, args.context, args.batch, rng)
        loss = loss_of(model, x, y, device, amp_dtype)
        opt.zero_grad()
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        if step % args.log_every == 0 or step == args.steps:
            model.eval()
            with tt.no_grad():
                hx, hy = batches(held, args.context, args.batch, rng)
                held_loss = loss_of(model, hx, hy, device, amp_dtype).item()
            model.train()
            print(f"step {step:5d}  loss {loss.item():.3f}  held-out {held_loss:.3f}  "
                  f"({time.perf_counter() - t0:.1f}s)", flush=True)
    print(f"uniform guess: {math.log(VOCAB):.3f} nats/char")
    print("--- sample ---")
    print(sample(model, args.prompt, args.sample, device, 0.8, rng))
    return 0


if __name__ == "__main__":
    sys.exit(main())
