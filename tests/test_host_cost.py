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

Beside the counts, the premises the hot path's shortcuts stand on, checked in both modes: devices
are one object each (identity checks replace ``==``), the dispatcher's flag gate (autocast)
switches its layer on and off as the flag does, and on the GPU path Triton's launch hooks still
reach the launcher when one is registered.
"""
from __future__ import annotations

import gc
import sys

import numpy as np
import pytest

import tritensor as tt
from tritensor.core.ops import conv as _ops_conv
from tritensor.runtime import mode

sim_only = pytest.mark.skipif(not mode.SIM, reason="counts the GPU path's calls on the simulated device")

PINNED = {  # op -> most Python calls it may make (2026-11-26; before the plan launches: 115, 152, 911)
    "add": 15,
    "(a * b + c).relu()": 46,
    "a.sum()": 23,
    "matmul 64x64": 42,  # 41 until allow_tf32 became a view of float32_matmul_precision (a property, as torch)
    "recorded (a*b).sum().backward()": 201,  # counted 200: one call of slack for what earlier tests leave
    "tt.empty(1)": 20,
    # conv2d's plan (core/ops/conv.py): 3 allocations and 3 launches (input repack, kernel, output
    # repack); the pointwise NCHW GEMM 1 and 1 (before the plans: 209 and 122)
    "conv2d 3x3 (NHWC inside)": 36,
    "conv2d 1x1 (NCHW GEMM)": 27,
    "conv2d backward 3x3 (both maps, NCHW)": 73,  # 6 launches (before the plans: 433 with 6)
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


@sim_only
def test_python_calls_per_op_on_the_gpu_path():
    a, b = tt.ones(1, device="cuda"), tt.ones(1, device="cuda")
    m = tt.ones(64, 64, device="cuda")
    ga = tt.ones(1, device="cuda", requires_grad=True)
    gb = tt.ones(1, device="cuda", requires_grad=True)
    c = tt.ones(1, device="cuda")
    half = dict(dtype=tt.float16, device="cuda")
    x3, w3 = tt.ones(1, 16, 4, 4, **half), tt.ones(16, 16, 3, 3, **half)
    x1, w1 = tt.ones(1, 16, 2, 4, **half), tt.ones(24, 16, 1, 1, **half)
    rows = {
        "add": lambda: a + b,
        "(a * b + c).relu()": lambda: (a * b + c).relu(),
        "a.sum()": lambda: a.sum(),
        "matmul 64x64": lambda: m @ m,
        "recorded (a*b).sum().backward()": lambda: (ga * gb).sum().backward(),
        "tt.empty(1)": lambda: tt.empty(1, device="cuda"),
        "conv2d 3x3 (NHWC inside)": lambda: tt.conv2d(x3, w3, padding=1),
        "conv2d 1x1 (NCHW GEMM)": lambda: tt.conv2d(x1, w1),
        "conv2d backward 3x3 (both maps, NCHW)": lambda: (_ops_conv.conv2d_backward_input(x3, w3, x3.shape, 1, 1),
                                                          _ops_conv.conv2d_backward_weight(x3, x3, w3.shape, 1, 1)),
    }
    counts = {name: _calls(fn) for name, fn in rows.items()}
    over = {name: (n, PINNED[name]) for name, n in counts.items() if n > PINNED[name]}
    assert not over, f"Python calls per op (counted, pinned) grew: {over}; all counts: {counts}"


def test_devices_are_one_object_each():
    import copy
    import pickle

    from tritensor.runtime.device import device

    assert device("cuda", 0) is device("cuda:0") is device(0) is device(device("cuda:0")) is tt.device(" cuda:0")
    assert device("cpu") is tt.ones(1, device="cpu").device and device("cuda") is not device("cuda:0")
    assert pickle.loads(pickle.dumps(device("cuda:1"))) is device("cuda", 1)
    assert copy.deepcopy(device("cpu")) is device("cpu")
    assert device("cuda") == "cuda" and device("cuda:1") != device("cuda:0")
    assert hash(device("cuda:1")) == hash(device("cuda", 1))
    for bad, err in ((("cuda:x",), ValueError), (("gpu",), ValueError), ((True,), TypeError), (("cpu", 1), ValueError),
                     (("cuda:0", 0), ValueError), (("cuda", -1), ValueError), ((None,), TypeError)):
        with pytest.raises(err, match="device"):
            device(*bad)


def test_a_flag_gated_layer_runs_exactly_while_its_flag_is_set(monkeypatch):
    from tritensor.core import dispatch

    class Flag:
        on = False

    seen = []
    monkeypatch.setattr(dispatch, "_layers", dict(dispatch._layers))
    monkeypatch.setattr(dispatch, "_needed", dict(dispatch._needed))
    monkeypatch.setattr(dispatch, "_flags_by_name", dict(dispatch._flags_by_name))
    monkeypatch.setattr(dispatch, "_gates", dispatch._gates)
    monkeypatch.setattr(dispatch, "_flags", dispatch._flags)
    monkeypatch.setattr(dispatch, "_entry", dispatch._entry)
    dispatch.register_layer("autocast", lambda op, args, kwargs, next: seen.append(op.name) or next(op, args, kwargs),
                            flag=(Flag, "on"))
    x = tt.ones(2)
    x + x
    assert seen == []
    Flag.on = True
    y = x + x
    assert seen == ["add"]
    Flag.on = False
    np.testing.assert_array_equal(y.cpu().numpy(), [2.0, 2.0])
    with pytest.raises(TypeError, match="needed or flag, not both"):
        dispatch.register_layer("autocast", lambda *a: None, needed=lambda *a: True, flag=(Flag, "on"))
    with pytest.raises(TypeError, match="flag must be an"):
        dispatch.register_layer("autocast", lambda *a: None, flag=Flag)
    with pytest.raises(AttributeError):
        dispatch.register_layer("autocast", lambda *a: None, flag=(Flag, "missing"))


@sim_only
def test_launch_hooks_reach_the_launcher_on_the_plan_path(monkeypatch):
    from triton.knobs import HookChain

    from tritensor.runtime import launch

    a, b = tt.ones(3, device="cuda"), tt.ones(3, device="cuda")
    for _ in range(3):
        a + b  # through the checked launches: from here on the plan runs
    from tritensor.runtime import direct

    got = []
    for fast in direct._launchers.values():  # a plan holds its launcher's bound run: wrap each
        for plan in (fast.plans.values() if fast is not None else ()):
            def run(*args, _real=plan.run):
                got.append(args[7:9])  # (enter hook, exit hook)
                return _real(*args)
            monkeypatch.setattr(plan, "run", run)

    class Knobs:  # where Triton keeps them (knobs.runtime): an empty chain is no hook
        launch_enter_hook, launch_exit_hook = HookChain(), HookChain(reversed=True)

    monkeypatch.setattr(launch, "_hook_knobs", Knobs)
    a + b
    Knobs.launch_enter_hook.add(lambda metadata: None)
    c = a + b
    assert got == [(None, None), (Knobs.launch_enter_hook, None)]
    np.testing.assert_array_equal(c.cpu().numpy(), [2.0] * 3)
