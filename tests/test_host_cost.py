"""The GPU path's host cost per op, pinned as Python-level calls (simulated device only).

On a GPU a training step is as fast as its host side: every op's dispatch, checks, allocation,
argument conversion and launch run in Python, and each Python call costs about a tenth of a
microsecond. Timings vary with the machine and are not asserted in tests (they are shown by
``python -m tritensor.bench launch --sim``); the number of Python calls one op makes does not
vary, so it is pinned here: a change that puts work back on the hot path (a key rebuilt per
launch, a lookup chain, a per-argument wrapper) fails this test on any machine.

Counted as ``sys.setprofile`` counts them ('call' events: Python functions, not C builtins),
around one op in the steady state (its kernels' plans made, the allocator's cache warm), with the
driver's launch a no-op (``runtime/sim.py: HOST_ONLY``, as the bench has it) and the garbage
collector paused so that no unrelated ``__del__`` is counted. The pins are the counts reached
when the test was written: lower them when the path gets cheaper, and raise one only with a
reason that says what the extra calls buy.
"""
from __future__ import annotations

import gc
import sys

import pytest

import tritensor as tt
from tritensor.runtime import mode

pytestmark = pytest.mark.skipif(not mode.SIM, reason="counts the GPU path's calls on the simulated device")

PINNED = {  # op -> most Python calls it may make (2026-11-26; before the plan launches: 115, 152, 911)
    "add": 22,
    "(a * b + c).relu()": 65,
    "a.sum()": 27,
    "matmul 64x64": 41,
    "recorded (a*b).sum().backward()": 287,  # counted 286: one call of slack for what earlier tests leave
    "tt.empty(1)": 20,
}


def _calls(fn) -> int:
    """Python-level calls made by one ``fn()`` in the steady state, the driver's launch a no-op."""
    from tritensor.runtime import sim

    for _ in range(5):  # first launches go through Triton's checks; from the third they run direct
        fn()
    tt.cuda.synchronize()
    n = [0]

    def count(frame, event, arg):
        if event == "call":
            n[0] += 1

    gc.collect()
    gc.disable()
    sim.HOST_ONLY = True
    try:
        sys.setprofile(count)
        fn()
        sys.setprofile(None)
    finally:
        sys.setprofile(None)
        sim.HOST_ONLY = False
        gc.enable()
    return n[0] - 1  # fn itself


def test_python_calls_per_op_on_the_gpu_path():
    a, b = tt.ones(1, device="cuda"), tt.ones(1, device="cuda")
    m = tt.ones(64, 64, device="cuda")
    ga = tt.ones(1, device="cuda", requires_grad=True)
    gb = tt.ones(1, device="cuda", requires_grad=True)
    c = tt.ones(1, device="cuda")
    rows = {
        "add": lambda: a + b,
        "(a * b + c).relu()": lambda: (a * b + c).relu(),
        "a.sum()": lambda: a.sum(),
        "matmul 64x64": lambda: m @ m,
        "recorded (a*b).sum().backward()": lambda: (ga * gb).sum().backward(),
        "tt.empty(1)": lambda: tt.empty(1, device="cuda"),
    }
    counts = {name: _calls(fn) for name, fn in rows.items()}
    over = {name: (n, PINNED[name]) for name, n in counts.items() if n > PINNED[name]}
    assert not over, f"Python calls per op (counted, pinned) grew: {over}; all counts: {counts}"
