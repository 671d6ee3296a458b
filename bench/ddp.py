"""``python -m tritensor.bench ddp``: DDP's per-step communication time with each comm hook vs torch DDP on gloo.

Why this exists: DDP's cost on top of the local backward is the gradient reduction, and the
comm hooks (fp16/bf16 compression, PowerSGD) trade bytes for host work. This benchmark
isolates that part: a model of ``--params`` parameters of mixed shapes (an embedding, six
transformer-like blocks, two conv kernels, biases and norms), gradients filled directly, then
the reducer runs as in a real backward (buckets, the comm thread, the hook, the copy back).
Forward and backward compute are left out, so the rows compare communication and hook work.

* tritensor: ``DistributedDataParallel(..., gradient_as_bucket_view=True)``; each step marks
  every parameter ready in backward order after copying its gradient into its bucket slot
  (what the post-accumulate-grad hooks do).
* torch (same processes, gloo group): the same parameters; the step is ``ddp().backward()``
  through an autograd Function whose backward returns the prefilled gradients, which
  ``AccumulateGrad`` adds into the bucket views (one pass over memory, as ours).

``--device cuda`` puts parameters and gradients on the GPU (every rank on device 0: two ranks
share one GPU), so the GPU row compares like with like: tritensor's collectives stage the buckets through
pinned host memory, torch's gloo does the same; each timed round ends with a device
synchronize. Both backends alternate in every round inside the same processes (so both see the same
machine load); a row keeps each backend's best round of the slowest rank's mean step time.
Bytes per step: the payload handed to the process group's ``all_reduce`` by the hook in one
step (counted by wrapping it), per rank; for PowerSGD also what the formula predicts:
``4 * (sum of uncompressed numel + sum over compressed matrices of (rows + cols) * rank)``.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time

from .comm import _torch_version, run_ranks

HOOKS = ("allreduce", "fp16", "bf16", "powersgd1", "powersgd4", "powersgd16")


def model_shapes(target: int) -> list:
    """Parameter shapes of about ``target`` elements: mixed 1-D, 2-D and 4-D tensors."""
    d = 512 if target >= 8_000_000 else 128 if target >= 2_000_000 else 64
    shapes = [(64, 32, 3, 3), (64,), (128, 64, 3, 3), (128,)]
    for _ in range(6):
        shapes += [(3 * d, d), (3 * d,), (d, d), (d,), (4 * d, d), (4 * d,), (d, 4 * d), (d,), (d,), (d,)]
    rest = target - sum(math.prod(s) for s in shapes)
    shapes.insert(0, (max(1, rest // d), d))  # the embedding takes the remainder
    return shapes


def powersgd_formula_bytes(shapes, rank: int, min_compression_rate: float = 2.0, itemsize: int = 4) -> int:
    """Bytes PowerSGD all-reduces per step (torch's rule for which tensors it compresses)."""
    total = 0
    for s in shapes:
        n = math.prod(s)
        if len(s) <= 1:
            total += n
            continue
        rows, cols = s[0], n // s[0]
        r = min(rows, cols, rank)
        compressed = (rows + cols) * r
        total += compressed if compressed * min_compression_rate < n else n
    return total * itemsize


def _tt_hook(name, dist):
    from tritensor.comm.algorithms.ddp_comm_hooks import default_hooks as D, powerSGD_hook as P

    if name.startswith("powersgd"):
        return P.PowerSGDState(None, matrix_approximation_rank=int(name[8:]), start_powerSGD_iter=2), P.powerSGD_hook
    return None, {"allreduce": D.allreduce_hook, "fp16": D.fp16_compress_hook, "bf16": D.bf16_compress_hook}[name]


def _torch_hook(name):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks as D, powerSGD_hook as P

    if name.startswith("powersgd"):
        state = P.PowerSGDState(None, matrix_approximation_rank=int(name[8:]), start_powerSGD_iter=2)
        return state, _serialized(P.powerSGD_hook)
    return None, {"allreduce": D.allreduce_hook, "fp16": D.fp16_compress_hook, "bf16": D.bf16_compress_hook}[name]


def _serialized(inner):
    """torch's PowerSGD posts its P and Q all-reduces from future callbacks; with every gradient
    ready at once, bucket 1's first all-reduce races bucket 0's callbacks and gloo sees the
    ranks' collectives in different orders (it aborts). Waiting for the previous bucket's
    future first is what tritensor's reducer does anyway (one bucket's hook at a time)."""
    prev = [None]

    def hook(state, bucket):
        if bucket.index() != 0 and prev[0] is not None:
            prev[0].wait()
        prev[0] = inner(state, bucket)
        return prev[0]

    return hook


class _Counter:
    """Wraps a module's ``all_reduce`` to add up the bytes handed to it while ``on``."""

    def __init__(self, module):
        self.module, self.real, self.bytes, self.on = module, module.all_reduce, 0, False

        def counting(tensor, *a, **k):
            if self.on:
                self.bytes += tensor.numel() * tensor.element_size()
            return self.real(tensor, *a, **k)

        module.all_reduce = counting


def _tt_setup(name, shapes, grads, device):
    import numpy as np

    import tritensor as tt
    import tritensor.comm as dist
    from tritensor import nn
    from tritensor.nn.parallel import DistributedDataParallel as DDP

    m = nn.Module()
    for i, s in enumerate(shapes):
        setattr(m, f"p{i}", nn.Parameter(tt.from_numpy(np.zeros(s, np.float32)).to(device)))
    ddp = DDP(m, gradient_as_bucket_view=True)
    state, hook = _tt_hook(name, dist)
    ddp.register_comm_hook(state, hook)
    red = ddp.reducer
    params = red.params
    for i, p in enumerate(params):
        p.grad = red.views[i]  # gradients live in their bucket slots, as after a first backward
    order = list(reversed(range(len(params))))
    if device == "cpu":
        views = [red.views[i].numpy() for i in range(len(params))]

        def fill(i):
            np.copyto(views[i], grads[i])
    else:  # a device-to-device copy into the bucket slot, as accumulating a gradient there is
        src = [tt.from_numpy(g).to(device) for g in grads]

        def fill(i):
            red.views[i].copy_(src[i])

    def step():
        red.prepare_for_backward(set())
        for i in order:
            fill(i)
            red._on_grad_ready(i)
    return step


def _torch_setup(name, shapes, grads, device):
    import torch
    from torch.nn.parallel import DistributedDataParallel as TDDP

    class Filled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *ps):
            return ps[0].new_zeros(())

        @staticmethod
        def backward(ctx, g):
            return tuple(tgrads)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ps = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(s, device=device)) for s in shapes])

        def forward(self):
            return Filled.apply(*self.ps)

    tgrads = [torch.from_numpy(g).to(device) for g in grads]
    ddp = TDDP(M(), gradient_as_bucket_view=True)
    state, hook = _torch_hook(name)
    ddp.register_comm_hook(state, hook)

    def step():
        ddp().backward()
    return step


def _worker(rank, world, port, tport, hooks, target, steps, warmup, rounds, use_torch, device, q):
    try:
        import numpy as np

        import tritensor as tt
        import tritensor.comm as dist
        from tritensor.comm import collectives

        if device != "cpu":
            tt.cuda.set_device(0)

        dist.init_process_group("tcp", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=1200)
        tdist = None
        if use_torch:
            import torch
            import torch.distributed as tdist

            torch.set_num_threads(1)
            if device != "cpu":
                torch.cuda.set_device(0)
            tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{tport}", rank=rank, world_size=world)
        shapes = model_shapes(target)
        rng = np.random.default_rng(rank)
        grads = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
        counters = {"tritensor": _Counter(collectives)}
        if tdist is not None:
            counters["torch"] = _Counter(tdist)
        syncs = {"tritensor": tt.cuda.synchronize}
        if tdist is not None:
            syncs["torch"] = torch.cuda.synchronize
        if device == "cpu":  # nothing queued on a device to wait for
            syncs = dict.fromkeys(syncs, lambda: None)
        rows = []
        for name in hooks:
            steppers = {"tritensor": _tt_setup(name, shapes, grads, device)}
            if tdist is not None:
                try:
                    steppers["torch"] = _torch_setup(name, shapes, grads, device)
                except Exception as e:  # e.g. a dtype gloo cannot reduce
                    steppers["torch"] = e
            best = {k: math.inf for k in steppers}
            sent = {}
            for backend, step in steppers.items():
                if isinstance(step, Exception):
                    continue
                try:
                    for _ in range(warmup):
                        step()
                    c = counters[backend]
                    c.bytes, c.on = 0, True
                    step()
                    c.on = False
                    sent[backend] = c.bytes
                except Exception as e:
                    steppers[backend] = e
            for _ in range(rounds):
                for backend, step in steppers.items():
                    if isinstance(step, Exception):
                        continue
                    dist.barrier()
                    t0 = time.perf_counter()
                    for _ in range(steps):
                        step()
                    syncs[backend]()
                    el = (time.perf_counter() - t0) / steps
                    a = np.array([el], np.float64)
                    dist.all_reduce(a, op=dist.ReduceOp.MAX)
                    best[backend] = min(best[backend], float(a[0]))
            rows.append({"hook": name, "world": world, "params": sum(math.prod(s) for s in shapes),
                         "tritensor_s": best["tritensor"], "torch_s": best.get("torch") if "torch" in best and
                         not isinstance(steppers.get("torch"), Exception) else None,
                         "torch_error": repr(steppers["torch"])[:200] if isinstance(steppers.get("torch"), Exception)
                         else None, "tritensor_error": repr(steppers["tritensor"])[:300]
                         if isinstance(steppers["tritensor"], Exception) else None,
                         "tritensor_bytes": sent.get("tritensor"), "torch_bytes": sent.get("torch"),
                         "formula_bytes": powersgd_formula_bytes(shapes, int(name[8:])) if name.startswith("powersgd")
                         else None})
        dist.barrier()
        if tdist is not None:
            tdist.destroy_process_group()
        dist.destroy_process_group()
        q.put((rank, rows, None))
    except BaseException:  # reported by the parent
        import traceback

        q.put((rank, None, traceback.format_exc()))


def run(world, hooks, target, steps, warmup, rounds, use_torch, timeout, device="cpu"):
    return run_ranks(_worker, world, (hooks, target, steps, warmup, rounds, use_torch, device), timeout)


def _mb(n):
    return "-" if n is None else f"{n / 1e6:.3f}"


def table(rows, world) -> str:
    lines = [f"\n## world size {world}, {rows[0]['params'] / 1e6:.1f} M parameters",
             "| hook | tritensor step (ms) | torch+gloo step (ms) | time ratio (ours/torch) | MB sent/step ours "
             "| MB sent/step torch | PowerSGD formula (MB) | compression |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    full = rows[0]["params"] * 4
    for r in rows:
        t = r["tritensor_s"]
        ours = f"{t * 1e3:.1f}" if math.isfinite(t) else f"failed: {r['tritensor_error']}"
        theirs = f"{r['torch_s'] * 1e3:.1f}" if r["torch_s"] else ("n/a: " + r["torch_error"] if r["torch_error"]
                                                                   else "-")
        ratio = f"{t / r['torch_s']:.2f}x" if r["torch_s"] and math.isfinite(t) else "-"
        comp = f"{full / r['tritensor_bytes']:.1f}x" if r["tritensor_bytes"] else "-"
        lines.append(f"| {r['hook']} | {ours} | {theirs} | {ratio} | {_mb(r['tritensor_bytes'])} | "
                     f"{_mb(r['torch_bytes'])} | {_mb(r['formula_bytes'])} | {comp} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tritensor.bench ddp", description=__doc__.split("\n\n")[0])
    p.add_argument("--world", default="2,4", help="comma-separated world sizes (default 2,4)")
    p.add_argument("--hooks", default=",".join(HOOKS), help=f"comma-separated, from {', '.join(HOOKS)}")
    p.add_argument("--params", type=float, default=25.0, help="model size in millions of parameters (default 25)")
    p.add_argument("--quick", action="store_true",
                   help="CPU-mode size: 0.5 M parameters, 1 step per round, 2 rounds (the Triton interpreter runs "
                        "the hooks' kernels; PowerSGD's take seconds a step even so)")
    p.add_argument("--steps", type=int, default=5, help="timed steps per round (default 5)")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds; best kept (default 3)")
    p.add_argument("--no-torch", action="store_true", help="do not time torch DDP even if torch is importable")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where parameters and gradients live (cuda: every rank on GPU 0)")
    p.add_argument("--json", default=None, help="also write the rows to this file")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per world size before giving up")
    args = p.parse_args(argv)
    hooks = [h.strip() for h in args.hooks.split(",") if h.strip()]
    bad = [h for h in hooks if h not in HOOKS]
    if bad or not hooks:
        p.error(f"--hooks: unknown {bad}; choose from {', '.join(HOOKS)}")
    try:
        worlds = [int(w) for w in args.world.split(",") if w.strip()]
    except ValueError:
        p.error(f"--world: expected comma-separated integers, got {args.world!r}")
    if not worlds or min(worlds) < 2:
        p.error("--world: expected world sizes >= 2")
    if args.steps < 1 or args.rounds < 1 or not args.params > 0:
        p.error("--steps, --rounds, --params: expected positive numbers")
    if args.device == "cuda":
        import tritensor as tt

        if not tt.cuda.is_available():
            p.error("--device cuda: no GPU here (CPU mode); leave it out to run on CPU tensors")
    target = int(0.5e6) if args.quick else int(args.params * 1e6)
    steps, rounds = (1, 2) if args.quick else (args.steps, args.rounds)
    use_torch = False
    if not args.no_torch:
        import importlib.util

        try:
            use_torch = importlib.util.find_spec("torch") is not None
        except (ImportError, ValueError):
            use_torch = False
    os.environ.setdefault("TRITENSOR_COMM_SECRET", __import__("secrets").token_hex(32))
    print(f"# DDP communication benchmark {datetime.datetime.now():%Y-%m-%d %H:%M} on {platform.node()} "
          f"({os.cpu_count()} CPUs), python {platform.python_version()}; torch: "
          f"{_torch_version() + ' (gloo)' if use_torch else 'not installed'}", flush=True)
    print(f"# command: python -m tritensor.bench ddp {' '.join(argv if argv is not None else sys.argv[1:])}")
    all_rows = []
    for w in worlds:
        rows = run(w, hooks, target, steps, 3, rounds, use_torch, args.timeout, args.device)
        all_rows += rows
        print(table(rows, w), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(all_rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
