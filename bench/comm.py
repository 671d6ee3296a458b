"""``python -m tritensor.bench comm``: time, algbw and busbw of tritensor.comm vs gloo.

Spawns ``world`` processes on this machine for each requested world size. When torch is
importable *in the benchmark's environment* (it is never a dependency of tritensor), each
process also joins a torch.distributed gloo group, and every (op, size) point is timed for
both backends in alternating rounds inside the same processes, so both see the same machine
load; each backend's best round is reported.

Definitions follow nccl-tests: ``time`` is the mean per iteration of the slowest rank;
``algbw = size / time`` with ``size`` the bytes per rank (for all_gather, the gathered total);
``busbw = algbw * factor`` with factor ``2(n-1)/n`` for all_reduce, ``(n-1)/n`` for
all_gather and ``1`` for broadcast.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import multiprocessing as mp
import os
import platform
import socket
import sys
import time

from .comm_soak import main_soak

OPS = ("all_reduce", "all_gather", "broadcast")
DEFAULT_SIZES = "8,64,512,4K,32K,256K,2M,16M,64M,256M"


def _parse_size(text: str) -> int:
    text = text.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text[:-1] if mult > 1 else text) * mult


def _fmt_bytes(n: int) -> str:
    for unit, div in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return f"{n}B"


def _busbw_factor(op: str, n: int) -> float:
    return {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "broadcast": 1.0}[op]


def _iters(nbytes: int, quick: bool) -> int:
    if nbytes <= 64 << 10:
        it = 200
    elif nbytes <= 4 << 20:
        it = 20
    elif nbytes <= 64 << 20:
        it = 4
    else:
        it = 2
    return max(2, it // 4) if quick else it


def _worker(rank, world, port, tport, sizes, ops, rounds, quick, use_gloo, q):
    try:
        import numpy as np

        import tritensor as tt
        import tritensor.comm as dist

        dist.init_process_group("tcp", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=600)
        tdist = None
        if use_gloo:
            import torch
            import torch.distributed as tdist

            tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{tport}", rank=rank,
                                     world_size=world)
        rows = []
        for op in ops:
            for nbytes in sizes:
                elems = max(1, nbytes // 4)
                n_out = elems * world if op == "all_gather" else elems
                ours = {"in": tt.from_numpy(np.ones(elems, np.float32)),
                        "out": tt.from_numpy(np.zeros(n_out, np.float32))}
                theirs = None
                if tdist is not None:
                    theirs = {"in": torch.ones(elems), "out": torch.zeros(n_out)}
                iters = _iters(nbytes, quick)
                best = {"tritensor": math.inf, "gloo": math.inf}
                for _ in range(rounds):
                    for backend, d, bufs in (("tritensor", dist, ours), ("gloo", tdist, theirs)):
                        if d is None:
                            continue
                        run = _op(d, op, bufs)
                        run()  # warm-up
                        d.barrier()
                        t0 = time.perf_counter()
                        for _ in range(iters):
                            run()
                        el = (time.perf_counter() - t0) / iters
                        slowest = _max_over_ranks(dist, el)
                        best[backend] = min(best[backend], slowest)
                rows.append({"op": op, "bytes": elems * 4, "world": world, "iters": iters,
                             "tritensor_s": best["tritensor"],
                             "gloo_s": best["gloo"] if tdist is not None else None})
        dist.barrier()
        if tdist is not None:
            tdist.destroy_process_group()
        dist.destroy_process_group()
        q.put((rank, rows, None))
    except BaseException as e:  # reported by the parent
        import traceback

        q.put((rank, None, traceback.format_exc()))


def _max_over_ranks(dist, seconds: float) -> float:
    import numpy as np

    a = np.array([seconds], np.float64)
    dist.all_reduce(a, op=dist.ReduceOp.MAX)
    return float(a[0])


def _op(d, op, bufs):
    x, out = bufs["in"], bufs["out"]
    if op == "all_reduce":
        return lambda: d.all_reduce(x)
    if op == "broadcast":
        return lambda: d.broadcast(x, src=0)
    if op == "all_gather":
        return lambda: d.all_gather_into_tensor(out, x)
    raise ValueError(op)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(worker, world: int, args: tuple, timeout: float):
    """Start ``world`` spawned processes ``worker(rank, world, port, tport, *args, queue)`` (two free
    loopback ports: tritensor's store and the peer's), collect each rank's ``(rank, rows, error)``
    within ``timeout`` seconds, raise the first error, and return rank 0's rows."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port, tport = _free_port(), _free_port()
    procs = [ctx.Process(target=worker, args=(r, world, port, tport, *args, q), daemon=True) for r in range(world)]
    for p in procs:
        p.start()
    results = {}
    try:
        deadline = time.monotonic() + timeout
        while len(results) < world:
            rank, rows, err = q.get(timeout=max(1.0, deadline - time.monotonic()))
            if err:
                raise RuntimeError(f"rank {rank} failed:\n{err}")
            results[rank] = rows
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
    return results[0]


def run(world: int, sizes, ops, rounds: int, quick: bool, use_gloo: bool, timeout: float):
    return run_ranks(_worker, world, (sizes, ops, rounds, quick, use_gloo), timeout)


def _table(rows, world):
    lines = [f"\n## world size {world}",
             "| op | size | tritensor time (us) | algbw (GB/s) | busbw (GB/s) | gloo time (us) | gloo busbw (GB/s) "
             "| busbw ratio |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        f = _busbw_factor(r["op"], world)
        t = r["tritensor_s"]
        alg = r["bytes"] * (world if r["op"] == "all_gather" else 1) / t / 1e9
        line = f"| {r['op']} | {_fmt_bytes(r['bytes'])} | {t * 1e6:.1f} | {alg:.3f} | {alg * f:.3f} |"
        if r["gloo_s"]:
            g = r["gloo_s"]
            galg = r["bytes"] * (world if r["op"] == "all_gather" else 1) / g / 1e9
            line += f" {g * 1e6:.1f} | {galg * f:.3f} | {g / t:.2f}x |"
        else:
            line += " - | - | - |"
        lines.append(line)
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tritensor.bench comm", description=__doc__.split("\n\n")[0])
    p.add_argument("--world", default="2,4", help="comma-separated world sizes (default 2,4)")
    p.add_argument("--ops", default=",".join(OPS), help=f"comma-separated, from {', '.join(OPS)}")
    p.add_argument("--sizes", default=DEFAULT_SIZES, help=f"bytes per rank, K/M/G suffixes (default {DEFAULT_SIZES})")
    p.add_argument("--rounds", type=int, default=3, help="alternating timing rounds per point; best is kept")
    p.add_argument("--quick", action="store_true", help="fewer iterations per point")
    p.add_argument("--no-gloo", action="store_true", help="do not time torch.distributed gloo even if installed")
    p.add_argument("--json", default=None, help="also write the raw rows to this file")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per world size before giving up")
    p.add_argument("--soak", action="store_true",
                   help="instead: 4 ranks run checked collectives, quietly then under a flood of "
                        "unauthenticated connections (see tritensor.bench.comm_soak)")
    p.add_argument("--seconds", type=float, default=30.0, help="length of the --soak run (default 30)")
    args = p.parse_args(argv)
    if args.soak:
        if not args.seconds > 0:
            p.error("--seconds: expected a positive number")
        return main_soak(args.seconds, args.json)
    worlds = [int(w) for w in args.world.split(",") if w.strip()]
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    bad = [o for o in ops if o not in OPS]
    if bad or not ops:
        p.error(f"--ops: unknown {bad}; choose from {', '.join(OPS)}")
    if not worlds or min(worlds) < 1:
        p.error("--world: expected positive integers")
    sizes = [_parse_size(s) for s in args.sizes.split(",") if s.strip()]
    use_gloo = False
    if not args.no_gloo:
        try:
            import importlib.util

            use_gloo = importlib.util.find_spec("torch") is not None
        except (ImportError, ValueError):
            use_gloo = False
    os.environ.setdefault("TRITENSOR_COMM_SECRET", __import__("secrets").token_hex(32))
    print(f"# tritensor.comm benchmark {datetime.date.today()} on {platform.node()} "
          f"({os.cpu_count()} CPUs), python {platform.python_version()}; gloo: "
          f"{'torch ' + _torch_version() if use_gloo else 'not installed'}")
    print(f"# command: python -m tritensor.bench comm {' '.join(argv if argv is not None else sys.argv[1:])}")
    all_rows = []
    for w in worlds:
        rows = run(w, sizes, ops, args.rounds, args.quick, use_gloo, args.timeout)
        all_rows += rows
        print(_table(rows, w), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(all_rows, f, indent=1)
    return 0


def _torch_version() -> str:
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
