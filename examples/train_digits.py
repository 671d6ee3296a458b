"""Train a small convnet on scikit-learn's bundled 8x8 digits (no download) with tritensor.

    python examples/train_digits.py                      # from the repository root
    python examples/train_digits.py --epochs 2 --quiet   # a short run
    python examples/train_digits.py --resume             # go on from the last checkpoint
    python examples/train_digits.py --checkpoint /tmp/ck.safetensors   # where it goes (default below)
    python examples/train_digits.py --amp                # mixed precision, then the numeric-suite report
    tritensor-run --standalone --nproc-per-node 2 --max-restarts 3 examples/train_digits.py --ddp \\
        [--hook allreduce|fp16|bf16|powersgd]

Written the way a PyTorch user writes a training script (``import tritensor as tt`` where torch
would be ``import torch``): a ``TensorDataset`` and ``DataLoader``, a conv / ``BatchNorm2d`` /
MLP model, Adam with a cosine LR schedule, ``clip_grad_norm_``, a checkpoint after every epoch
(model, optimizer, scheduler and GradScaler state dicts, written atomically by ``tt.save``) and
``--resume`` to go on from it. The checkpoint goes to ``--checkpoint``, by default
``$XDG_CACHE_HOME/tritensor/digits_checkpoint.safetensors`` (``~/.cache/...``): outside the
source tree, so a run leaves no file in the checkout. Every mode runs the same loop:

- ``--amp``: the forward and loss under ``autocast`` (bfloat16 on CPU, float16 on a GPU), the loss
  scaled by a ``GradScaler``, a ``fused=True`` Adam; then the numeric-suite report of the trained
  model against its reduced-precision copy and against itself under autocast.
- ``--ddp`` (under ``tritensor-run``): the model wrapped in ``DistributedDataParallel`` (gradients
  averaged during backward, reduced by the ``--hook`` communication hook), a ``DistributedSampler``
  giving each rank its share of every epoch; rank 0 writes the checkpoint. When a worker dies the
  launcher restarts the whole group and every rank resumes from the checkpoint
  (``--kill-in-epoch N`` makes the last rank kill itself in epoch N to show it).

Everything runs on tritensor's Triton kernels; in CPU mode they run in Triton's interpreter.
Reaches >= 95% test accuracy (1797 images, 20% held out, fixed seeds) with the default flags.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time

import numpy as np

import tritensor as tt
import tritensor.comm as dist
from tritensor import nn
from tritensor.ao.ns.report import numeric_report
from tritensor.comm.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
from tritensor.elastic.multiprocessing.errors import record
from tritensor.nn.parallel import DistributedDataParallel as DDP
from tritensor.optim.lr_scheduler import CosineAnnealingLR
from tritensor.utils.data import DataLoader, DistributedSampler, TensorDataset

try:  # optional (the "examples" extra installs it): a plain progress line without it
    from tqdm import tqdm
except ImportError:
    tqdm = None


def load_digits(seed: int = 0):
    """(x_train, x_test, y_train, y_test) as NumPy arrays: images N x 1 x 8 x 8 in [-1, 1]."""
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
        nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),  # 16 x 4 x 4
        nn.Flatten(), nn.Linear(16 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10),
    )


@tt.no_grad()
def evaluate(model, loader, device: str = "cpu") -> float:
    """Accuracy of ``model`` (the bare module, never the DDP wrapper: only rank 0 evaluates)."""
    model.eval()
    correct = total = 0
    for x, y in loader:
        pred = model(x.to(device)).argmax(1)
        correct += int((pred == y.to(device)).sum())
        total += len(y)
    model.train()
    return correct / total


class PlainProgress:
    """What the loop uses of tqdm when tqdm is not installed: one line on stderr, redrawn per batch."""

    def __init__(self, iterable, desc: str = "", disable: bool = False, width: int = 30):
        self.iterable, self.desc, self.disable, self.width = iterable, desc, disable, width
        self.postfix, self.t0 = "", time.perf_counter()

    def set_postfix_str(self, s: str) -> None:
        self.postfix = s

    def __iter__(self):
        n = len(self.iterable)
        for i, item in enumerate(self.iterable, 1):
            yield item
            if not self.disable:
                done = self.width * i // n
                sys.stderr.write(f"\r{self.desc} [{'#' * done}{'.' * (self.width - done)}] {i}/{n} {self.postfix} "
                                 f"{time.perf_counter() - self.t0:5.1f}s")
                sys.stderr.flush()
        if not self.disable:
            sys.stderr.write("\n")


def progress(iterable, desc: str, disable: bool):
    return (tqdm or PlainProgress)(iterable, desc=desc, disable=disable)


def comm_hook(name: str):
    """``--hook``: the (state, hook) pair to give ``DistributedDataParallel.register_comm_hook``."""
    if name == "powersgd":
        # torch's default start_powerSGD_iter is 1,000; this run has ~100 steps, so compress from step 10.
        return powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=4,
                                           start_powerSGD_iter=10), powerSGD_hook.powerSGD_hook
    return None, {"allreduce": default_hooks.allreduce_hook, "fp16": default_hooks.fp16_compress_hook,
                  "bf16": default_hooks.bf16_compress_hook}[name]


def default_checkpoint() -> str:
    """``$XDG_CACHE_HOME/tritensor/digits_checkpoint.safetensors`` (``~/.cache`` when unset): a
    fixed place for ``--resume`` to find, outside the source tree."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "tritensor", "digits_checkpoint.safetensors")


def save_checkpoint(path: str, model, optimizer, epoch: int, scheduler=None, scaler=None) -> None:
    """Everything needed to go on after ``epoch``, in one safetensors file (``tt.save`` is atomic);
    the folder is made when missing."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    checkpoint = {"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict()}
    if scheduler is not None:
        checkpoint["scheduler"] = scheduler.state_dict()
    if scaler is not None:
        checkpoint["scaler"] = scaler.state_dict()
    tt.save(checkpoint, path)


def load_checkpoint(path: str, model, optimizer, device: str, scheduler=None, scaler=None) -> int:
    """Restore what :func:`save_checkpoint` wrote; returns the last finished epoch."""
    checkpoint = tt.load(path, map_location=device)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    if scheduler is not None:
        scheduler.load_state_dict(checkpoint["scheduler"])
    if scaler is not None:
        scaler.load_state_dict(checkpoint["scaler"])
    return checkpoint["epoch"]


def default_device() -> str:
    return "cuda" if tt.cuda.is_available() else "cpu"


def train(args):
    """One training loop for every mode; returns (model, test accuracy or None off rank 0, seconds)."""
    device = args.device or default_device()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if args.ddp:
        dist.init_process_group("tcp")  # env://: RANK, WORLD_SIZE, MASTER_ADDR/PORT from the launcher
    rank, world = (dist.get_rank(), dist.get_world_size()) if args.ddp else (0, 1)
    tt.manual_seed(args.seed)  # the same initial weights on every rank (DDP broadcasts rank 0's anyway)

    x_train, x_test, y_train, y_test = load_digits(args.seed)
    train_set = TensorDataset(tt.from_numpy(x_train), tt.from_numpy(y_train))
    test_set = TensorDataset(tt.from_numpy(x_test), tt.from_numpy(y_test))
    sampler = DistributedSampler(train_set, seed=args.seed) if args.ddp else None
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=sampler is None, sampler=sampler)
    test_loader = DataLoader(test_set, batch_size=512)

    model = make_model().to(device)
    optimizer = tt.optim.Adam(model.parameters(), lr=args.lr, fused=args.amp)
    scheduler = CosineAnnealingLR(optimizer, T_max=args.epochs)
    scaler = tt.amp.GradScaler(device, enabled=args.amp)
    low = tt.float16 if device == "cuda" else tt.bfloat16
    loss_fn = nn.CrossEntropyLoss()

    start_epoch = 1
    if (args.resume or restart > 0) and os.path.exists(args.checkpoint):  # a restarted group always resumes
        start_epoch = load_checkpoint(args.checkpoint, model, optimizer, device, scheduler, scaler) + 1
        print(f"[rank {rank}] attempt {restart}: resumed from {args.checkpoint} after epoch {start_epoch - 1}",
              flush=True)
    net = model
    if args.ddp:
        net = DDP(model)
        net.register_comm_hook(*comm_hook(args.hook))  # PowerSGD's error feedback starts afresh on a resume

    t0 = time.perf_counter()
    for epoch in range(start_epoch, args.epochs + 1):
        if sampler is not None:
            sampler.set_epoch(epoch)  # every rank draws the same new order
        bar = progress(train_loader, desc=f"epoch {epoch}", disable=args.quiet or rank != 0)
        for step, (x, y) in enumerate(bar):
            if (epoch == args.kill_in_epoch and step == len(train_loader) // 2 and rank == world - 1
                    and restart == 0 and not args.resume):
                os.kill(os.getpid(), signal.SIGKILL)  # --kill-in-epoch: a crash in the middle of an epoch
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            with tt.autocast(device, dtype=low, enabled=args.amp):
                loss = loss_fn(net(x), y)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
            nn.utils.clip_grad_norm_(model.parameters(), args.max_norm)
            scaler.step(optimizer)
            scaler.update()
            if not bar.disable:
                bar.set_postfix_str(f"loss {loss:.4f}")
        lr = scheduler.get_last_lr()[0]  # this epoch's
        scheduler.step()
        if rank == 0:
            save_checkpoint(args.checkpoint, model, optimizer, epoch, scheduler, scaler)
            if not args.quiet:
                print(f"epoch {epoch}: test acc {evaluate(model, test_loader, device):.3f} "
                      f"lr {lr:.2e}" + (f" scale {scaler.get_scale():g}" if args.amp else ""),
                      file=sys.stderr)
        if args.ddp:
            dist.barrier()  # nobody starts the next epoch before the checkpoint is on disk
    seconds = time.perf_counter() - t0
    acc = evaluate(model, test_loader, device) if rank == 0 else None
    if args.ddp:
        dist.destroy_process_group()
    return model, acc, seconds


def amp_report(model, device: str, seed: int = 0, n: int = 64) -> None:
    """The numeric suite on the trained float32 model: per layer, its reduced-precision copy and the
    same model under autocast against it, on ``n`` test images."""
    low = tt.float16 if device == "cuda" else tt.bfloat16
    x = tt.from_numpy(np.ascontiguousarray(load_digits(seed)[1][:n])).to(device)
    model.eval()
    numeric_report(model, low, x)
    numeric_report(model, tt.autocast(device, dtype=low), x)
    model.train()


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3, help="Adam's initial learning rate (cosine-annealed)")
    ap.add_argument("--max-norm", type=float, default=1.0, help="clip_grad_norm_ bound on the gradients' norm")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quiet", action="store_true", help="no progress bar, no per-epoch line")
    ap.add_argument("--device", default=None, help="cpu or cuda (default: cuda when a GPU is present)")
    ap.add_argument("--amp", action="store_true",
                    help="mixed precision (autocast + GradScaler + fused Adam), then the numeric-suite report")
    ap.add_argument("--ddp", action="store_true", help="DistributedDataParallel under tritensor-run")
    ap.add_argument("--hook", choices=("allreduce", "fp16", "bf16", "powersgd"), default="allreduce",
                    help="--ddp: the gradient communication hook")
    ap.add_argument("--checkpoint", default=default_checkpoint(), metavar="PATH",
                    help="written after every epoch (default: %(default)s, outside the source tree)")
    ap.add_argument("--resume", action="store_true",
                    help="go on from --checkpoint, with its LR schedule (a restarted --ddp group always resumes)")
    ap.add_argument("--target-acc", type=float, default=0.95, help="exit 1 below this test accuracy")
    ap.add_argument("--kill-in-epoch", type=int, default=0,
                    help="demo: the last rank kills itself in the middle of this epoch (first attempt, no --resume)")
    return ap.parse_args(argv)


@record  # under tritensor-run, an exception's traceback reaches the launcher's failure report
def main(argv=None) -> int:
    args = parse_args(argv)
    device = args.device or default_device()
    model, acc, seconds = train(args)
    if acc is None:  # a --ddp rank other than 0
        return 0
    how = f"{'GPU' if device == 'cuda' else 'CPU'} mode"
    if args.amp:
        how += f", autocast ({'float16' if device == 'cuda' else 'bfloat16'}) + GradScaler + fused Adam"
    if args.ddp:
        how += (f", rank 0 of {os.environ.get('WORLD_SIZE')}, restart {os.environ.get('TORCHELASTIC_RESTART_COUNT')}, "
                f"hook {args.hook}")
    print(f"test accuracy {acc:.4f} after {args.epochs} epochs in {seconds:.1f}s on {device} ({how})", flush=True)
    if args.amp:
        amp_report(model, device, args.seed)
    return 0 if acc >= args.target_acc else 1


if __name__ == "__main__":
    sys.exit(main())
