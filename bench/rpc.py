"""``python -m tritensor.bench rpc``: RPC latency and throughput of tritensor.comm.rpc vs torch's.

Why this exists: RPC's cost is almost all per-message host work (pickling, framing, thread
hand-offs, the reply's wake-up), so the only honest yardstick is torch.distributed.rpc
(TensorPipe backend) on the same machine in the same run. Rows, all from worker 0 calling
worker 1 (two processes on this host, loopback TCP):

* ``rpc_sync no-op``: the round trip of ``rpc_sync(w1, noop)``, median per call;
* ``rpc_sync echo 1 MB``: a 1 MB float32 tensor sent and returned, median per call;
* ``remote + to_here 1 MB``: ``remote(w1, echo, (t,)).to_here()`` of the same tensor;
* ``requests/s, 16 callers``: 16 threads of worker 0 each calling ``rpc_sync(w1, noop)`` in a
  loop for ``--seconds``; completed calls per second.

The peer runs under ``--peer-python`` (an interpreter that has torch; tritensor never imports
torch), default this interpreter when it has torch. Each backend runs ``--rounds`` times,
alternating, each round in fresh processes; a latency row keeps the best round's median, the
throughput row the best round; a second table gives every row's min / median / max over the
rounds and the ratio of the medians.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

from .comm import _free_port

# One script for both backends: worker 0 measures and prints one JSON line; worker 1 serves.
# Functions are defined in __main__ on both workers, so they pickle by reference.
_SCRIPT = r'''
import json, os, statistics, sys, threading, time
backend, rank, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
iters, big_iters, seconds, callers = (int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7]))
if backend == "torch":
    import torch
    import torch.distributed.rpc as rpc
    def make(n):
        return torch.ones(n)
else:
    import numpy as np
    import tritensor as tt
    import tritensor.comm.rpc as rpc
    def make(n):
        return tt.from_numpy(np.ones(n, np.float32))

def noop():
    return None

def echo(x):
    return x

def timed(fn, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)

opts = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{port}", num_worker_threads=16,
                                       rpc_timeout=120)
rpc.init_rpc(f"w{rank}", rank=rank, world_size=2, rpc_backend_options=opts)
if rank == 0:
    t = make(1 << 18)  # 1 MB of float32
    for _ in range(20):
        rpc.rpc_sync("w1", noop)
        rpc.rpc_sync("w1", echo, args=(t,))
        rpc.remote("w1", echo, args=(t,)).to_here()
    res = {"noop_s": timed(lambda: rpc.rpc_sync("w1", noop), iters),
           "echo_1mb_s": timed(lambda: rpc.rpc_sync("w1", echo, args=(t,)), big_iters),
           "remote_1mb_s": timed(lambda: rpc.remote("w1", echo, args=(t,)).to_here(), big_iters)}
    done = [0] * callers
    stop = time.perf_counter() + seconds
    def caller(i):
        while time.perf_counter() < stop:
            rpc.rpc_sync("w1", noop)
            done[i] += 1
    threads = [threading.Thread(target=caller, args=(i,)) for i in range(callers)]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    res["rps"] = sum(done) / (time.perf_counter() - t0)
    print("RESULT " + json.dumps(res), flush=True)
rpc.shutdown()
'''

ROWS = (("noop_s", "rpc_sync no-op round trip", "us"), ("echo_1mb_s", "rpc_sync echo 1 MB tensor", "us"),
        ("remote_1mb_s", "remote() + to_here() 1 MB", "us"), ("rps", "requests/s, 16 concurrent callers", "/s"))
TARGETS = {"noop_s": 0.8, "echo_1mb_s": 1.0, "remote_1mb_s": 1.0}  # our time / torch's time, at most


def run_once(python: str, backend: str, script: str, args, timeout: float) -> dict:
    """Start worker 0 and 1 of ``backend`` under ``python``; worker 0's measurements."""
    port = _free_port()
    env = dict(os.environ)
    env.setdefault("TRITENSOR_COMM_SECRET", __import__("secrets").token_hex(32))
    cmd = [python, script, backend, None, str(port), str(args.iters), str(args.big_iters), str(args.seconds),
           str(args.callers)]
    procs = []
    for rank in (0, 1):
        c = list(cmd)
        c[3] = str(rank)
        procs.append(subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=timeout))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (out, err) in zip(procs, outs):
        if p.returncode != 0:
            raise RuntimeError(f"{backend} RPC worker exited {p.returncode}:\n{err[-3000:]}")
    line = next((ln for ln in outs[0][0].splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"{backend} worker 0 printed no result:\n{outs[0][1][-3000:]}")
    return json.loads(line[len("RESULT "):])


def _best(rounds):
    out = {}
    for key, _, _ in ROWS:
        vals = [r[key] for r in rounds]
        out[key] = max(vals) if key == "rps" else min(vals)
    return out


def table(ours: dict, peer: dict | None) -> str:
    lines = ["| row | tritensor | torch (TensorPipe) | tritensor / torch |", "|---|---:|---:|---:|"]
    for key, name, unit in ROWS:
        scale = 1e6 if unit == "us" else 1.0
        mine = f"{ours[key] * scale:.0f} {unit}"
        if peer is None:
            lines.append(f"| {name} | {mine} | - | - |")
            continue
        ratio = ours[key] / peer[key]
        what = "time" if unit == "us" else "rate"
        target = f" (target <= {TARGETS[key]}x)" if key in TARGETS else ""
        lines.append(f"| {name} | {mine} | {peer[key] * scale:.0f} {unit} | {ratio:.2f}x {what}{target} |")
    return "\n".join(lines)


def spread(ours: list, theirs: list) -> str:
    """Every round's figure, not only the best: min / median / max over the rounds, and the
    ratio of the medians (on a loaded machine the best round can flatter either side)."""
    lines = ["| row | tritensor min / median / max | torch min / median / max | ratio of medians |",
             "|---|---:|---:|---:|"]
    for key, name, unit in ROWS:
        scale = 1e6 if unit == "us" else 1.0

        def cell(rounds):
            vals = sorted(r[key] * scale for r in rounds)
            return f"{vals[0]:.0f} / {statistics.median(vals):.0f} / {vals[-1]:.0f} {unit}", statistics.median(vals)

        mine, m = cell(ours)
        if not theirs:
            lines.append(f"| {name} | {mine} | - | - |")
            continue
        peer, p = cell(theirs)
        lines.append(f"| {name} | {mine} | {peer} | {m / p:.2f}x |")
    return "\n".join(lines)


def _default_peer() -> str | None:
    try:
        return sys.executable if importlib.util.find_spec("torch") is not None else None
    except (ImportError, ValueError):
        return None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tritensor.bench rpc", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds per backend; best kept (default 3)")
    p.add_argument("--iters", type=int, default=300, help="no-op calls timed per round (default 300)")
    p.add_argument("--big-iters", type=int, default=30, help="1 MB calls timed per row and round (default 30)")
    p.add_argument("--seconds", type=float, default=2.0, help="length of the 16-caller run (default 2)")
    p.add_argument("--callers", type=int, default=16, help="concurrent callers of the throughput row (default 16)")
    p.add_argument("--peer-python", metavar="PATH", default=None,
                   help="a Python with torch for the torch.distributed.rpc peer (default: this one if it has torch)")
    p.add_argument("--no-peer", action="store_true", help="time tritensor only")
    p.add_argument("--json", metavar="PATH", help="also write every round as JSON")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per round before giving up")
    args = p.parse_args(argv)
    for name in ("rounds", "iters", "big_iters", "callers"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')}: expected a positive integer")
    if not args.seconds > 0:
        p.error("--seconds: expected a positive number")
    peer_python = None if args.no_peer else (args.peer_python or _default_peer())
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    print(f"# RPC benchmark {stamp} on {platform.node()} ({os.cpu_count()} CPUs), python {platform.python_version()}; "
          f"peer: {peer_python or 'none (pass --peer-python PATH, a Python that has torch)'}", flush=True)
    with tempfile.TemporaryDirectory(prefix="tt-bench-rpc-") as d:
        script = os.path.join(d, "rpc_worker.py")
        with open(script, "w") as f:
            f.write(_SCRIPT)
        ours, theirs = [], []
        for i in range(args.rounds):
            ours.append(run_once(sys.executable, "tritensor", script, args, args.timeout))
            if peer_python:
                theirs.append(run_once(peer_python, "torch", script, args, args.timeout))
            print(f"# round {i + 1}: tritensor {ours[-1]}" + (f"; torch {theirs[-1]}" if theirs else ""), flush=True)
    best_ours, best_theirs = _best(ours), (_best(theirs) if theirs else None)
    print(table(best_ours, best_theirs))
    print(f"\nSpread over the {args.rounds} rounds:\n" + spread(ours, theirs))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": stamp, "cpus": os.cpu_count(), "tritensor": ours, "torch": theirs,
                       "best": {"tritensor": best_ours, "torch": best_theirs}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
