"""``python -m tritensor.bench amp``: what mixed precision's bookkeeping costs.

1. Unscale-and-check of ``--grads`` gradients of mixed sizes (seeded: many bias-sized, some
   weight-sized): the fused multi-tensor launch that ``GradScaler.unscale_`` makes, the
   read-only check a fused optimizer step needs, and the same work as one launch per tensor.
   Launches per call are counted at the launch point, not assumed.
2. ``GradScaler.step`` on an Adam over the same gradients: the plain optimizer (``unscale_``,
   one host read of the flag, one update per parameter) against ``Adam(fused=True)`` (a read-only
   check, the flag and the scale read inside each update, no host read).
3. One training step of an MLP with ``autocast`` against the float32 step (GPU mode; in CPU mode
   only with ``--train-step``: the interpreter's bf16 is emulated, so the figure says nothing about
   mixed precision there).

Times are wall clock after warm-up (GPU: synchronised), the minimum and median of ``--repeat``.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import statistics
import sys
import time

import numpy as np

import tritensor as tt
from tritensor import nn
from tritensor.core.ops import amp as amp_ops

from .common import device_name

_KERNELS = "tritensor.triton_kernels."


def grad_sizes(n: int, seed: int = 0, big: int = 65536) -> list:
    """``n`` gradient sizes: 3/4 bias- or norm-sized (16..1024 elements), 1/4 weight-sized (4K..big)."""
    rng = np.random.default_rng(seed)
    small = rng.integers(16, 1025, size=n - n // 4)
    large = rng.integers(4096, big + 1, size=n // 4)
    sizes = np.concatenate([small, large])
    rng.shuffle(sizes)
    return [int(s) for s in sizes]


@contextlib.contextmanager
def count_launches():
    """Count every kernel launch: each kernel module's ``launch`` (the one launch point, imported
    by name into ``triton_kernels/*``) is wrapped while the block runs."""
    counts = {"n": 0}
    mods = [m for name, m in list(sys.modules.items())
            if name.startswith(_KERNELS) and m is not None and callable(getattr(m, "launch", None))]
    saved = [m.launch for m in mods]

    def counting(real):
        def launch(*args, **kwargs):
            counts["n"] += 1
            return real(*args, **kwargs)
        return launch

    for m, real in zip(mods, saved):
        m.launch = counting(real)
    try:
        yield counts
    finally:
        for m, real in zip(mods, saved):
            m.launch = real


def timed(fn, repeat: int, sync) -> tuple:
    """(min ms, median ms, launches per call) of ``fn()`` after one warm-up call."""
    fn()
    sync()
    ts = []
    with count_launches() as c:
        fn()
        sync()
        launches = c["n"]
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append((time.perf_counter() - t0) * 1e3)
    return min(ts), statistics.median(ts), launches


def unscale_rows(sizes, dtype, dev, repeat, sync) -> dict:
    rng = np.random.default_rng(1)
    grads = [tt.tensor(rng.standard_normal(n).astype(np.float32)).to(dtype).to(dev) for n in sizes]
    found = tt.zeros(1, device=dev)
    one = tt.ones(1, device=dev)  # unscale by 1: every repeat sees the same values
    return {
        "unscale_and_check_, fused": timed(lambda: amp_ops.unscale_and_check_(grads, found, one), repeat, sync),
        "check only (fused-step pre-check)": timed(lambda: amp_ops.check_finite_(grads, found), repeat, sync),
        "unscale_and_check_, one launch/tensor": timed(
            lambda: [amp_ops.unscale_and_check_([g], found, one) for g in grads], repeat, sync),
    }


def scaler_step_rows(sizes, dev, repeat, sync) -> dict:
    rows = {}
    for name, fused in (("GradScaler.step, Adam (unscale_ + host read)", False),
                        ("GradScaler.step, Adam(fused=True)", True)):
        params = [nn.Parameter(tt.zeros(n, device=dev)) for n in sizes]
        grads = [tt.ones(n, device=dev) for n in sizes]
        opt = tt.optim.Adam(params, lr=1e-3, fused=fused)
        scaler = tt.amp.GradScaler(dev, init_scale=1.0, growth_interval=1 << 30)
        scaler.scale(tt.ones(1, device=dev))

        def step(params=params, grads=grads, opt=opt, scaler=scaler):
            for p, g in zip(params, grads):
                p.grad = g  # scale 1: the same gradient every repeat
            scaler.step(opt)
            scaler.update()
        rows[name] = timed(step, repeat, sync)
    return rows


def train_step_rows(dev, width, batch, repeat, sync) -> dict:
    tt.manual_seed(0)
    low = tt.float16 if dev == "cuda" else tt.bfloat16
    rows = {}
    for name, use_amp in (("train step, float32", False), (f"train step, autocast {str(low).split('.')[-1]}", True)):
        model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                              nn.Linear(width, 10)).to(dev)
        opt = tt.optim.Adam(model.parameters(), lr=1e-3, fused=use_amp)
        scaler = tt.amp.GradScaler(dev, enabled=use_amp)
        x = tt.randn(batch, width, device=dev)
        y = tt.from_numpy(np.arange(batch, dtype=np.int64) % 10).to(dev)
        loss_fn = nn.CrossEntropyLoss()

        def step(model=model, opt=opt, scaler=scaler, use_amp=use_amp):
            with tt.autocast(dev, dtype=low, enabled=use_amp):
                loss = loss_fn(model(x), y)
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        rows[name] = timed(step, repeat, sync)
    return rows


def print_rows(title, rows, base=None) -> None:
    print(f"\n== {title} ==")
    print(f"{'case':<46}{'launches':>9}{'min ms':>10}{'median ms':>11}" + (f"{'/ first':>9}" if base else ""))
    first = None
    for name, (lo, med, n) in rows.items():
        first = first or med
        print(f"{name:<46}{n:>9}{lo:>10.3f}{med:>11.3f}" + (f"{med / first:>8.2f}x" if base else ""))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tritensor.bench amp", description=__doc__.split("\n\n")[0])
    p.add_argument("--grads", type=int, default=200, help="number of gradients (default 200)")
    p.add_argument("--repeat", type=int, default=None, help="timed calls per row (default: 5 on CPU, 50 on GPU)")
    p.add_argument("--train-step", action="store_true", help="also time the training step in CPU mode")
    p.add_argument("--width", type=int, default=None, help="MLP width for the training step (CPU 64, GPU 4096)")
    p.add_argument("--json", metavar="PATH", help="also write the measurements as JSON")
    args = p.parse_args(argv)
    if args.grads < 4:
        p.error("--grads must be at least 4")
    if args.repeat is not None and args.repeat < 1:
        p.error("--repeat must be a positive integer")

    gpu = tt.cuda.is_available()
    dev = "cuda" if gpu else "cpu"
    sync = tt.cuda.synchronize if gpu else (lambda: None)
    repeat = args.repeat or (50 if gpu else 5)
    stamp = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    print(f"tritensor {tt.__version__} AMP benchmark -- {device_name(gpu)} -- {stamp}")
    sizes = grad_sizes(args.grads)
    print(f"{len(sizes)} gradients, {sum(sizes)} elements (sizes {min(sizes)}..{max(sizes)}); "
          f"times: min and median of {repeat} calls")
    out = {"date": stamp, "mode": "gpu" if gpu else "cpu", "grads": len(sizes), "elements": sum(sizes)}
    for dtype in (tt.float32, tt.float16):
        rows = unscale_rows(sizes, dtype, dev, repeat, sync)
        print_rows(f"unscale + inf check, {str(dtype).split('.')[-1]} gradients", rows, base=True)
        out[f"unscale_{str(dtype).split('.')[-1]}"] = rows
    rows = scaler_step_rows(sizes, dev, repeat, sync)
    print_rows("GradScaler.step + update, Adam over the same parameters (float32)", rows, base=True)
    out["scaler_step"] = rows
    if gpu or args.train_step:
        width = args.width or (4096 if gpu else 64)
        batch = 256 if gpu else 32
        rows = train_step_rows(dev, width, batch, repeat, sync)
        print_rows(f"training step, MLP {width}x{width} x2 + head, batch {batch}", rows, base=True)
        out["train_step"] = rows
    else:
        print("\n(training step with autocast vs float32: GPU mode, or --train-step in CPU mode)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
