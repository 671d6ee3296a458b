"""``python -m tritensor.bench elastic``: how long ``tritensor-run`` takes to start and to restart workers.

Rows: the time from starting the launcher to every worker running, for 2 and 4 workers
(``--standalone``), and the restart latency: from a worker's crash to every worker of the
next attempt running (``--max-restarts 1``). Workers are a tiny script that only records
``time.time()``, so the rows measure the launcher, its rendezvous and process start-up.

With ``--peer-python PATH`` (an interpreter that has torch; tritensor never imports torch) the
same run times ``torchrun`` (``PATH -m torch.distributed.run``) on the same script with the
same flags. Each row is the median (and minimum) of ``--repeat`` runs, in milliseconds.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

# Each worker writes "<attempt> <time>" to OUT/<attempt>.<rank>; with CRASH set, rank 0 of attempt 0
# writes OUT/crash (the crash time) and exits 1; the others of attempt 0 wait to be stopped.
_SCRIPT = r'''
import os, sys, time
now = time.time()
out, attempt, rank = os.environ["OUT"], os.environ["TORCHELASTIC_RESTART_COUNT"], os.environ["RANK"]
with open(os.path.join(out, attempt + "." + rank), "w") as f:
    f.write(repr(now))
if os.environ.get("CRASH") and attempt == "0":
    if rank == "0":
        with open(os.path.join(out, "crash"), "w") as f:
            f.write(repr(time.time()))
        sys.exit(1)
    time.sleep(60)
'''


def _launcher(which: str, peer_python: str | None):
    if which == "tritensor-run":
        return [sys.executable, "-m", "tritensor.run"]
    return [peer_python, "-m", "torch.distributed.run"]


def _one(cmd, nproc: int, crash: bool) -> float:
    with tempfile.TemporaryDirectory(prefix="tt-bench-elastic-") as out:
        script = os.path.join(out, "w.py")
        with open(script, "w") as f:
            f.write(_SCRIPT)
        env = dict(os.environ, OUT=out)
        if crash:
            env["CRASH"] = "1"
        args = cmd + ["--standalone", "--nproc-per-node", str(nproc), "--monitor-interval", "0.1",
                      "--max-restarts", "1" if crash else "0", script]
        t0 = time.time()
        p = subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300)
        attempt = "1" if crash else "0"
        stamps = []
        for r in range(nproc):
            path = os.path.join(out, f"{attempt}.{r}")
            if not os.path.exists(path):
                raise RuntimeError(f"{' '.join(cmd)}: worker {r} of attempt {attempt} never ran "
                                   f"(exit {p.returncode}): {p.stderr[-2000:]}")
            stamps.append(float(open(path).read()))
        start = float(open(os.path.join(out, "crash")).read()) if crash else t0
        return (max(stamps) - start) * 1000.0


def measure(launchers, repeat: int, peer_python):
    rows = []
    for nproc, crash in ((2, False), (4, False), (2, True), (4, True)):
        what = f"restart after a crash, {nproc} workers" if crash else f"launch to all running, {nproc} workers"
        for which in launchers:
            times = [_one(_launcher(which, peer_python), nproc, crash) for _ in range(repeat)]
            rows.append({"row": what, "launcher": which, "median_ms": statistics.median(times),
                         "min_ms": min(times), "repeat": repeat})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tritensor.bench elastic", description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3, help="runs per row (default 3)")
    p.add_argument("--peer-python", metavar="PATH", help="a Python with torch: also time torchrun")
    p.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat: expected a positive integer")
    launchers = ["tritensor-run"] + (["torchrun"] if args.peer_python else [])
    rows = measure(launchers, args.repeat, args.peer_python)
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    print(f"elastic launcher benchmark -- {platform.node()}, {os.cpu_count()} CPUs, {stamp}; "
          f"median (min) of {args.repeat} runs")
    print(f"{'row':<40} {'launcher':<14} {'median ms':>10} {'min ms':>10}")
    for r in rows:
        print(f"{r['row']:<40} {r['launcher']:<14} {r['median_ms']:>10.0f} {r['min_ms']:>10.0f}")
    if not args.peer_python:
        print("(no torchrun peer: pass --peer-python PATH, a Python that has torch)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": stamp, "cpus": os.cpu_count(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
