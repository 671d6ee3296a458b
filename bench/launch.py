"""``python -m tritensor.bench launch``: what one op costs beyond its arithmetic.

Rows: a one-element ``x + 0.0`` (nearly all launch overhead), a 1M-element ``x + y`` (the
interpreter's per-lane cost in CPU mode), one autograd node forward and backward on one
element, and 100 ``empty(1024)`` calls with one synchronize (the allocator's host cost: the peer
row is ``torch.empty``; the target is at most 1.5x its time). With ``--peer-python PATH`` (an interpreter that has torch and Triton, never this
process: tritensor does not import torch), the same run also times a peer: Triton's own
``@triton.jit`` add kernel of five lines launched on torch tensors (CPU mode: stock Triton's
interpreter on torch CPU tensors; GPU mode: compiled, on CUDA tensors), with the smallest block
that covers the tensor.

Times are wall clock: the minimum and the median of ``--repeat`` calls after warm-up.

``--sim``: the GPU path's host cost per op on the simulated device, the driver's launch a no-op
(``bench/host_only.py: measure_sim``). ``--host-only``: the CPU path's host cost per op, every launch a no-op,
beside torch CPU eager with ``--peer-python``.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from . import host_only

# The peer runs in its own process; it prints {"rows": {name: [min_ms, median_ms]}}.
_PEER = r'''
import json, os, statistics, sys, time
gpu = sys.argv[1] == "gpu"
if not gpu:
    os.environ["TRITON_INTERPRET"] = "1"
import torch, triton, triton.language as tl

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

def add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    block = min(triton.next_power_of_2(n), 1024 if gpu else 32768)
    add_kernel[(triton.cdiv(n, block),)](x, y, out, n, BLOCK=block)
    return out

def timed(fn, repeat):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter(); fn()
        if gpu: torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    return [min(ts), statistics.median(ts)]

dev = "cuda" if gpu else "cpu"
repeat = int(sys.argv[2])
x1, y1 = torch.ones(1, device=dev), torch.zeros(1, device=dev)
xb, yb = torch.ones(1 << 20, device=dev), torch.ones(1 << 20, device=dev)
assert add(x1, y1).item() == 1.0 and bool((add(xb, yb) == 2).all())
def empties():
    for _ in range(100):
        torch.empty(1024, device=dev)
rows = {"add [1]": timed(lambda: add(x1, y1), repeat), "add [1048576]": timed(lambda: add(xb, yb), max(3, repeat // 20)),
        "empty [1024] x100": timed(empties, max(3, repeat // 10))}
print(json.dumps({"peer": f"stock Triton {triton.__version__} on torch {torch.__version__}", "rows": rows}))
'''


def _timed(fn, repeat: int, sync) -> list:
    for _ in range(3):
        fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append((time.perf_counter() - t0) * 1e3)
    return [min(ts), statistics.median(ts)]


def measure(repeat: int) -> dict:
    """tritensor's rows: name -> [min ms, median ms]."""
    import tritensor as tt

    dev = "cuda" if tt.cuda.is_available() else "cpu"
    sync = tt.cuda.synchronize if dev == "cuda" else (lambda: None)
    x1 = tt.ones(1, device=dev)
    xb, yb = tt.ones(1 << 20, device=dev), tt.ones(1 << 20, device=dev)
    leaf = tt.ones(1, device=dev, requires_grad=True)
    g = tt.ones(1, device=dev)

    def node():
        (leaf * 2.0).backward(g)

    def empties():
        for _ in range(100):
            tt.empty(1024, device=dev)

    return {
        "add [1]": _timed(lambda: x1 + 0.0, repeat, sync),
        "add [1048576]": _timed(lambda: xb + yb, max(3, repeat // 20), sync),
        "autograd mul [1] fwd+bwd": _timed(node, repeat, sync),
        "empty [1024] x100": _timed(empties, max(3, repeat // 10), sync),
    }


def run_peer(python: str, gpu: bool, repeat: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTHONPATH")}
    # The script defines a Triton kernel, and compiled Triton (a real GPU) refuses a @jit function
    # that is not in a file ("@jit functions should be defined in a Python file"): not ``python -c``.
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "tritensor_launch_peer.py")
        with open(script, "w") as f:
            f.write(_PEER)
        proc = subprocess.run([python, script, "gpu" if gpu else "cpu", str(repeat)], capture_output=True,
                              text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"the peer ({python}) failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tritensor.bench launch", description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=200, help="timed calls per one-element row (default 200)")
    p.add_argument("--peer-python", metavar="PATH",
                   help="a Python with torch and Triton: also time stock Triton's add kernel on torch tensors")
    p.add_argument("--json", metavar="PATH", help="also write the measurements as JSON")
    p.add_argument("--sim", action="store_true",
                   help="time the GPU path's host cost per op on the simulated device (TRITENSOR_DEVICE=sim), the "
                        "driver's launch call a no-op; with --peer-python, beside torch CPU eager on the same rows")
    p.add_argument("--host-only", action="store_true",
                   help="time tritensor's host path per op with every kernel launch a no-op (bench/host_only.py); "
                        "with --peer-python, beside torch CPU eager on the same rows")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be a positive integer")

    if args.sim and os.environ.get("TRITENSOR_DEVICE") != "sim":  # the mode is chosen at import: a process of its own
        env = dict(os.environ, TRITENSOR_DEVICE="sim")
        return subprocess.run([sys.executable, "-m", "tritensor.bench", "launch", *(argv if argv is not None else
                                                                                    sys.argv[2:])], env=env).returncode

    import tritensor as tt

    gpu = tt.cuda.is_available()
    stamp = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    if args.sim:
        print(f"tritensor {tt.__version__} GPU path per op on the simulated device, the driver's launch a no-op -- "
              f"{stamp}")
        rows = host_only.measure_sim(max(3, args.repeat // 20))
        peer = host_only.run_peer(args.peer_python, max(3, args.repeat // 20)) if args.peer_python else None
        print(host_only.report(rows, peer, "GPU path (simulated), per call"))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"date": stamp, "mode": "sim", "host_only": rows, "peer": peer}, f, indent=1)
            print(f"wrote {args.json}")
        return 0
    if args.host_only:
        print(f"tritensor {tt.__version__} host path per op, launches replaced by a no-op -- "
              f"{'GPU' if gpu else 'CPU mode'} -- {stamp}")
        rows = host_only.measure(max(3, args.repeat // 20))
        peer = host_only.run_peer(args.peer_python, max(3, args.repeat // 20)) if args.peer_python else None
        print(host_only.report(rows, peer))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"date": stamp, "mode": "gpu" if gpu else "cpu", "host_only": rows, "peer": peer}, f,
                          indent=1)
            print(f"wrote {args.json}")
        return 0
    print(f"tritensor {tt.__version__} launch overhead -- {'GPU' if gpu else 'CPU mode (Triton interpreter)'} -- {stamp}")
    rows = measure(args.repeat)
    peer = run_peer(args.peer_python, gpu, args.repeat) if args.peer_python else None
    if gpu:  # the GPU rows: the same ops with real launches, beside torch CUDA eager
        dev_rows = host_only.measure_device(max(3, args.repeat // 20))
        dev_peer = host_only.run_peer(args.peer_python, max(3, args.repeat // 20), "cuda") if args.peer_python else None
        print(host_only.report(dev_rows, dev_peer, "per op on the GPU, real launches"))
    print(f"{'case':<28}{'min ms':>10}{'median ms':>11}" + (f"{'peer min':>10}{'peer med':>10}{'peer/ours':>10}" if peer else ""))
    for name, (lo, med) in rows.items():
        line = f"{name:<28}{lo:>10.3f}{med:>11.3f}"
        if peer and name in peer["rows"]:
            plo, pmed = peer["rows"][name]
            line += f"{plo:>10.3f}{pmed:>10.3f}{pmed / med:>10.2f}"
        print(line)
    if peer:
        print(f"peer: {peer['peer']} (its own add kernel, launched the same way); peer/ours > 1: tritensor is faster")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": stamp, "mode": "gpu" if gpu else "cpu", "rows": rows, "peer": peer}, f, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
