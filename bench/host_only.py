"""``python -m tritensor.bench launch --host-only``: what tritensor's host side costs per op.

On a GPU a training step is a thousand small launches, and the host time around each launch
(dispatch, autograd, checks, allocation, argument conversion) decides the step's speed. This
benchmark times that host path alone: the last step of every launch (Triton running the kernel,
``runtime/launch.py: triton_launch``) is swapped for a no-op here, and only here, so the figures
are measurable without a GPU and are not swamped by the interpreter in CPU mode.

Rows, on one-element fp32 tensors (matmul: 64 x 64): ``a + b``; ``(a * b + c).relu()`` (three
ops); ``a.sum()``; ``m @ m``; a recorded ``(a * b).sum().backward()`` on leaves that require
grad; ``tt.empty(1)``. The peer, in its own process with the same rows: torch CPU eager (real
arithmetic; on one element it is nearly all host time). Times are microseconds of the calling
thread's CPU time per call (``time.thread_time``: a machine shared with other work inflates wall
time, not this): the fastest of ``--repeat`` batches, each the mean of a batch of calls.
"""
from __future__ import annotations

import json
import subprocess
import time

# (name, ops in the row, statement, setup), shared by both sides: ``T`` is tritensor or torch,
# ``D`` the device the tensors are made on.
ROWS = [
    ("add", 1, "a + b", "a = T.ones(1, device=D); b = T.ones(1, device=D)"),
    ("mul-add-relu", 3, "(a * b + c).relu()", "a = T.ones(1, device=D); b = T.ones(1, device=D); c = T.ones(1, device=D)"),
    ("sum", 1, "a.sum()", "a = T.ones(1, device=D)"),
    ("matmul 64x64", 1, "m @ m", "m = T.ones(64, 64, device=D)"),
    ("recorded (a*b).sum().backward()", 3, "(a * b).sum().backward()",
     "a = T.ones(1, device=D, requires_grad=True); b = T.ones(1, device=D, requires_grad=True)"),
    ("empty", 1, "T.empty(1, device=D)", ""),
]

_BATCH_US = 5_000  # each timed batch lasts about this long (short batches: some escape the noise)


def time_rows(T, repeat: int, device: str = "cpu", clock=None) -> dict:
    """{name: [ops, microseconds per call]} for module ``T`` (tritensor or torch) on ``device``.

    On "cuda" each batch ends with a device synchronize, so a row's time is its real time per
    call when the GPU is the bottleneck and its host time when the host is."""
    out = {}
    sync = T.cuda.synchronize if device == "cuda" else (lambda: None)
    for name, ops, stmt, setup in ROWS:
        scope = {"T": T, "D": device}
        exec(setup, scope)
        fn = eval(f"lambda: {stmt}", scope)
        if clock is None:
            clock = time.thread_time if device == "cpu" else time.perf_counter  # the GPU's time is wall time
        for _ in range(20):
            fn()
        t0 = time.perf_counter()
        fn()
        one = max(time.perf_counter() - t0, 1e-7)  # sizes the batches: wall time is fine here
        batch = max(1, int(_BATCH_US * 1e-6 / one))
        best = float("inf")
        for _ in range(repeat):
            sync()
            t0 = clock()
            for _ in range(batch):
                fn()
            sync()
            best = min(best, (clock() - t0) / batch)
        out[name] = [ops, best * 1e6]
    return out


def measure_device(repeat: int) -> dict:
    """tritensor's rows on the GPU with real launches (GPU mode only)."""
    import tritensor as tt

    return time_rows(tt, repeat, "cuda")


def measure_sim(repeat: int) -> dict:
    """tritensor's rows on device tensors of the simulated device, the driver's launch call a no-op
    (``runtime/sim.py: HOST_ONLY``): the GPU path's host cost (allocator, streams, argument
    packing, the direct launcher), which ``measure`` (the CPU path) leaves out. Thread CPU time."""
    import tritensor as tt
    from tritensor.runtime import sim

    for _ in range(3):  # each row's kernels are through their checked launches and run direct
        time_rows(tt, 1, "cuda", time.thread_time)
    tt.cuda.synchronize()
    sim.HOST_ONLY = True
    try:
        return time_rows(tt, repeat, "cuda", time.thread_time)
    finally:
        sim.HOST_ONLY = False


def measure(repeat: int) -> dict:
    """tritensor's rows with every kernel launch a no-op (restored afterwards)."""
    import tritensor as tt
    from tritensor.runtime import launch as launch_mod

    real = launch_mod._final
    launch_mod._final = lambda kernel, grid, args, kwargs, stream: None
    try:
        return time_rows(tt, repeat)
    finally:
        launch_mod._final = real


# The peer: torch CPU eager, in its own process (tritensor never imports torch).
_PEER = r"""
import json, sys, torch
sys.path.insert(0, sys.argv[2])
import host_only_rows
torch.set_num_threads(1)
dev = sys.argv[3]
rows = host_only_rows.time_rows(torch, int(sys.argv[1]), dev)
print(json.dumps({"peer": f"torch {torch.__version__} {dev.upper()} eager", "rows": rows}))
"""


def run_peer(python: str, repeat: int, device: str = "cpu") -> dict:
    """torch's rows, timed by this very file's :func:`time_rows` in ``python``'s process."""
    import os
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        shutil.copy(__file__, os.path.join(d, "host_only_rows.py"))  # this file has no tritensor import at its top
        env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTHONPATH")}
        proc = subprocess.run([python, "-c", _PEER, str(repeat), d, device], capture_output=True, text=True, env=env,
                              timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"the peer ({python}) failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def report(rows: dict, peer: dict | None, title: str = "host path, per call") -> str:
    head = f"{title:<34}{'ops':>4}{'us/call':>10}{'us/op':>8}"
    if peer:
        head += f"{'torch us/call':>15}{'ours/torch':>12}"
    lines = [head]
    for name, (ops, us) in rows.items():
        line = f"{name:<34}{ops:>4}{us:>10.2f}{us / ops:>8.2f}"
        if peer and name in peer["rows"]:
            _, pus = peer["rows"][name]
            line += f"{pus:>15.2f}{us / pus:>12.2f}"
        lines.append(line)
    if peer:
        lines.append(f"peer: {peer['peer']} on the same rows, real arithmetic; ours/torch < 1: tritensor is cheaper")
    return "\n".join(lines)
