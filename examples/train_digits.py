"""Train a small convnet on scikit-learn's bundled 8x8 digits (no download) with tritensor.

    python examples/train_digits.py                      # from the repository root
    python examples/train_digits.py --epochs 2 --quiet   # a short run
    python examples/train_digits.py --amp                # mixed precision, then the numeric-suite report
    tritensor-run --standalone --nproc-per-node 2 --max-restarts 3 examples/train_digits.py --ddp
    tritensor-run --standalone --nproc-per-node 2 examples/train_digits.py --ddp --hook powersgd

With ``--ddp`` (under ``tritensor-run``/``python -m tritensor.run``) each worker trains on its
shard of every epoch's batches under ``DistributedDataParallel``, which averages the gradients
with the comm hook named by ``--hook`` (``allreduce``, ``fp16``, ``bf16`` or ``powersgd``:
rank-4 PowerSGD with error feedback from step 20; its state is not checkpointed); rank 0
checkpoints the model and Adam's state after each epoch (``--checkpoint``), and a restarted
group (a worker was killed: the launcher restarts everyone) resumes after the last saved epoch.

Everything runs on tritensor's Triton kernels: conv2d, max-pool, linear, ReLU, the fused
cross-entropy, and a fused Adam update per parameter; in CPU mode they run in Triton's
interpreter. Reaches >= 95% test accuracy (1797 images, 20% held out, fixed seeds).
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time

import numpy as np

import tritensor as tt
from tritensor import nn
from tritensor.ao.ns.report import numeric_report


def load_digits(seed: int = 0):
    from sklearn.datasets import load_digits as _load
    from sklearn.model_selection import train_test_split

    data = _load()
    x = (data.images.astype(np.float32) / 16.0 - 0.5) / 0.5  # pixels 0..16 -> [-1, 1]
    x = x[:, None, :, :]  # N, C=1, 8, 8
    return train_test_split(x, data.target.astype(np.int64), test_size=0.2, random_state=seed,
                            stratify=data.target)


def make_model() -> nn.Module:
    # One conv block and an MLP head: in CPU mode each conv kernel costs a few hundred ms in
    # Triton's interpreter whatever its size, so a second conv block would double the run time
    # for no accuracy the 8x8 images need.
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 16 x 4 x 4
        nn.Flatten(), nn.Linear(16 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10),
    )


def progress(i: int, n: int, epoch: int, loss: float, t0: float, out=sys.stderr) -> None:
    width = 30
    done = int(width * i / n)
    out.write(f"\repoch {epoch} [{'#' * done}{'.' * (width - done)}] {i}/{n} loss {loss:.4f} "
              f"{time.perf_counter() - t0:5.1f}s")
    out.flush()


def evaluate(model, x, y, batch: int = 512, device: str = "cpu") -> float:
    model.eval()
    correct = 0
    with tt.no_grad():
        for s in range(0, len(x), batch):
            logits = model(tt.from_numpy(np.ascontiguousarray(x[s:s + batch])).to(device))
            correct += int((logits.argmax(1).cpu().numpy() == y[s:s + batch]).sum())
    model.train()
    return correct / len(x)


def default_device() -> str:
    return "cuda" if tt.cuda.is_available() else "cpu"


def train(epochs: int = 4, batch_size: int = 32, lr: float = 3e-3, seed: int = 0, quiet: bool = False,
          device: str | None = None):
    """Train on ``device`` (the GPU when there is one) and return (test accuracy, seconds)."""
    device = device or default_device()
    tt.manual_seed(seed)
    rng = np.random.default_rng(seed)
    x_train, x_test, y_train, y_test = load_digits(seed)
    model = make_model().to(device)
    opt = tt.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    t0 = time.perf_counter()
    n_batches = -(-len(x_train) // batch_size)
    for epoch in range(1, epochs + 1):
        order = rng.permutation(len(x_train))
        for b in range(n_batches):
            idx = order[b * batch_size:(b + 1) * batch_size]
            xb = tt.from_numpy(np.ascontiguousarray(x_train[idx])).to(device)
            yb = tt.from_numpy(np.ascontiguousarray(y_train[idx])).to(device)
            loss = loss_fn(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if not quiet:
                progress(b + 1, n_batches, epoch, loss.item(), t0)
        if not quiet:
            sys.stderr.write(f"  test acc {evaluate(model, x_test, y_test, device=device):.3f}\n")
    acc = evaluate(model, x_test, y_test, device=device)
    return acc, time.perf_counter() - t0


def train_amp(epochs: int = 4, batch_size: int = 32, lr: float = 3e-3, seed: int = 0, quiet: bool = False,
              device: str | None = None):
    """``--amp``: :func:`train` with the forward and loss under ``autocast`` (bfloat16 on CPU, float16
    on a GPU), the loss scaled by a ``GradScaler`` and a ``fused=True`` Adam that takes the scaler's
    found-inf flag and scale in its kernel. Returns (model, test accuracy, seconds, test inputs)."""
    device = device or default_device()
    tt.manual_seed(seed)
    rng = np.random.default_rng(seed)
    x_train, x_test, y_train, y_test = load_digits(seed)
    model = make_model().to(device)
    opt = tt.optim.Adam(model.parameters(), lr=lr, fused=True)
    scaler = tt.amp.GradScaler(device)
    low = tt.float16 if device == "cuda" else tt.bfloat16
    loss_fn = nn.CrossEntropyLoss()
    t0 = time.perf_counter()
    n_batches = -(-len(x_train) // batch_size)
    for epoch in range(1, epochs + 1):
        order = rng.permutation(len(x_train))
        for b in range(n_batches):
            idx = order[b * batch_size:(b + 1) * batch_size]
            xb = tt.from_numpy(np.ascontiguousarray(x_train[idx])).to(device)
            yb = tt.from_numpy(np.ascontiguousarray(y_train[idx])).to(device)
            with tt.autocast(device, dtype=low):
                loss = loss_fn(model(xb), yb)
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            if not quiet:
                progress(b + 1, n_batches, epoch, loss.item(), t0)
        if not quiet:
            sys.stderr.write(f"  test acc {evaluate(model, x_test, y_test, device=device):.3f} "
                             f"scale {scaler.get_scale():g}\n")
    acc = evaluate(model, x_test, y_test, device=device)
    return model, acc, time.perf_counter() - t0, x_test


def amp_report(model, x_test, device: str, n: int = 64) -> None:
    """The numeric suite on the trained float32 model: per layer, its reduced-precision copy and the
    same model under autocast against it, on ``n`` test images."""
    low = tt.float16 if device == "cuda" else tt.bfloat16
    x = tt.from_numpy(np.ascontiguousarray(x_test[:n])).to(device)
    model.eval()
    numeric_report(model, low, x)
    numeric_report(model, tt.autocast(device, dtype=low), x)
    model.train()


def save_checkpoint(path: str, model, opt, epoch: int) -> None:
    """Model weights, Adam's moments and steps, and the epoch, in one safetensors file (atomically)."""
    state = {f"model.{k}": v for k, v in model.state_dict().items()}
    for idx, st in opt.state_dict()["state"].items():
        for k, v in st.items():
            state[f"opt.{idx}.{k}"] = v if isinstance(v, tt.Tensor) else tt.tensor([int(v)], dtype=tt.int64)
    state["epoch"] = tt.tensor([epoch], dtype=tt.int64)
    tt.save({k: v.cpu() for k, v in state.items()}, path + ".tmp")
    os.replace(path + ".tmp", path)


def load_checkpoint(path: str, model, opt, device: str) -> int:
    """Restore what :func:`save_checkpoint` wrote; returns the last finished epoch."""
    state = tt.load(path)
    model.load_state_dict({k[6:]: v.to(device) for k, v in state.items() if k.startswith("model.")})
    opt_state: dict = {}
    for k, v in state.items():
        if k.startswith("opt."):
            _, idx, name = k.split(".", 2)
            opt_state.setdefault(int(idx), {})[name] = int(v.numpy()[0]) if name == "step" else v.to(device)
    opt.load_state_dict({"state": opt_state, "param_groups": opt.state_dict()["param_groups"]})
    return int(state["epoch"].numpy()[0])


def _comm_hook(name: str):
    """(state, hook) for ``--hook``; state None means the default process group."""
    from tritensor.comm.algorithms.ddp_comm_hooks import default_hooks as D, powerSGD_hook as P

    if name == "powersgd":
        return P.PowerSGDState(None, matrix_approximation_rank=4, start_powerSGD_iter=20), P.powerSGD_hook
    return None, {"allreduce": D.allreduce_hook, "fp16": D.fp16_compress_hook, "bf16": D.bf16_compress_hook}[name]


def train_ddp(epochs: int, batch_size: int, lr: float, seed: int, quiet: bool, device: str, checkpoint: str,
              kill_in_epoch: int = 0, hook: str = "allreduce"):
    """Data-parallel training under tritensor-run (see the module's docstring); returns rank 0's
    (test accuracy, seconds), other ranks (None, seconds)."""
    import tritensor.comm as dist
    from tritensor.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("tcp")  # env://: RANK, WORLD_SIZE, MASTER_ADDR/PORT from the launcher
    rank, world = dist.get_rank(), dist.get_world_size()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    tt.manual_seed(seed)  # the same initial weights on every rank
    x_train, x_test, y_train, y_test = load_digits(seed)
    model = make_model().to(device)
    opt = tt.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    first = 1
    if os.path.exists(checkpoint):
        first = load_checkpoint(checkpoint, model, opt, device) + 1
        print(f"[rank {rank}] attempt {restart}: resumed from {checkpoint} after epoch {first - 1}", flush=True)
    ddp = DDP(model)  # the same parameter objects: opt, checkpoints and evaluate keep using `model`
    ddp.register_comm_hook(*_comm_hook(hook))
    t0 = time.perf_counter()
    per_rank = len(x_train) // world
    n_batches = -(-per_rank // batch_size)
    for epoch in range(first, epochs + 1):
        order = np.random.default_rng([seed, epoch]).permutation(len(x_train))
        shard = order[rank * per_rank:(rank + 1) * per_rank]
        for b in range(n_batches):
            if kill_in_epoch == epoch and restart == 0 and rank == world - 1 and b == n_batches // 2:
                os.kill(os.getpid(), signal.SIGKILL)  # --kill-in-epoch: a crash in the middle of an epoch
            idx = shard[b * batch_size:(b + 1) * batch_size]
            xb = tt.from_numpy(np.ascontiguousarray(x_train[idx])).to(device)
            yb = tt.from_numpy(np.ascontiguousarray(y_train[idx])).to(device)
            loss = loss_fn(ddp(xb), yb)
            opt.zero_grad()
            loss.backward()  # DDP averages the gradients over the ranks (through the comm hook)
            opt.step()
            if not quiet and rank == 0:
                progress(b + 1, n_batches, epoch, loss.item(), t0)
        if rank == 0:
            save_checkpoint(checkpoint, model, opt, epoch)
            if not quiet:
                sys.stderr.write(f"  test acc {evaluate(model, x_test, y_test, device=device):.3f}\n")
        dist.barrier()  # nobody starts the next epoch before the checkpoint is on disk
    acc = evaluate(model, x_test, y_test, device=device) if rank == 0 else None
    dist.destroy_process_group()
    return acc, time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--device", default=None, help="cpu or cuda (default: cuda when a GPU is present)")
    ap.add_argument("--ddp", action="store_true", help="data-parallel under tritensor-run, with checkpoints")
    ap.add_argument("--amp", action="store_true",
                    help="mixed precision (autocast + GradScaler), then the numeric-suite report")
    ap.add_argument("--checkpoint", default="digits_checkpoint.safetensors", help="--ddp: the checkpoint file")
    ap.add_argument("--target-acc", type=float, default=0.95, help="exit 1 below this test accuracy")
    ap.add_argument("--kill-in-epoch", type=int, default=0,
                    help="--ddp demo: the last rank kills itself in the middle of this epoch (first attempt only)")
    ap.add_argument("--hook", default="allreduce", choices=("allreduce", "fp16", "bf16", "powersgd"),
                    help="--ddp: DistributedDataParallel's communication hook (default allreduce)")
    args = ap.parse_args(argv)
    device = args.device or default_device()
    if args.ddp:
        acc, secs = train_ddp(args.epochs, args.batch_size, args.lr, args.seed, args.quiet, device,
                              args.checkpoint, args.kill_in_epoch, args.hook)
        if acc is None:
            return 0
        print(f"test accuracy {acc:.4f} after {args.epochs} epochs in {secs:.1f}s on {device} "
              f"(rank 0 of {os.environ.get('WORLD_SIZE')}, restart {os.environ.get('TORCHELASTIC_RESTART_COUNT')}, "
              f"hook {args.hook})")
        return 0 if acc >= args.target_acc else 1
    if args.amp:
        model, acc, secs, x_test = train_amp(args.epochs, args.batch_size, args.lr, args.seed, args.quiet, device)
        print(f"test accuracy {acc:.4f} after {args.epochs} epochs in {secs:.1f}s on {device} with autocast "
              f"({'float16' if device == 'cuda' else 'bfloat16'}) + GradScaler + fused Adam")
        amp_report(model, x_test, device)
        return 0 if acc >= args.target_acc else 1
    acc, secs = train(args.epochs, args.batch_size, args.lr, args.seed, args.quiet, device)
    print(f"test accuracy {acc:.4f} after {args.epochs} epochs in {secs:.1f}s on {device} "
          f"({'GPU' if tt.cuda.is_available() else 'CPU'} mode)")
    return 0 if acc >= args.target_acc else 1


if __name__ == "__main__":
    sys.exit(main())
