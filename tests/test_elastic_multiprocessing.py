"""tritensor.elastic.multiprocessing: start_processes, Std, the contexts, logs, tee, close, failures."""

import multiprocessing as mp
import os
import signal
import sys
import time

import pytest
from elastic_helpers import ECHO_SCRIPT, TREE_SCRIPT, echo_fn, fail_fn, tree_fn

from tritensor.elastic.multiprocessing import (MultiprocessContext, RunProcsResult, Std, SubprocessContext,
                                               start_processes, to_map)

PY = sys.executable
ENVS2 = {0: {"LOCAL_RANK": 0}, 1: {"LOCAL_RANK": 1}}
ALL_STD = [Std.NONE, Std.OUT, Std.ERR, Std.ALL]  # iterating an IntFlag skips NONE and ALL


def _state(pid):
    """'gone' when no process has this pid any more, else its /proc state letter (Z: zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


def _wait_gone(pids, within=5.0):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and any(_state(p) != "gone" for p in pids):
        time.sleep(0.05)
    return {p: _state(p) for p in pids}


# ---------------------------------------------------------------- Std

def test_std_values_and_from_str():
    assert (Std.NONE, Std.OUT, Std.ERR, Std.ALL) == (0, 1, 2, 3)
    assert Std.ALL == Std.OUT | Std.ERR
    assert Std.from_str("0") is Std.NONE and Std.from_str("3") is Std.ALL
    assert Std.from_str("0:3,1:0,2:1,3:2") == {0: Std.ALL, 1: Std.NONE, 2: Std.OUT, 3: Std.ERR}
    for bad in ("4", "ALL", "0:1,", "1:5", ""):
        with pytest.raises(ValueError, match="does not match"):
            Std.from_str(bad)
    assert to_map(Std.OUT, 2) == {0: Std.OUT, 1: Std.OUT}
    assert to_map({1: Std.ERR}, 3) == {0: Std.NONE, 1: Std.ERR, 2: Std.NONE}


# ---------------------------------------------------------------- every redirect x tee, binary

@pytest.mark.parametrize("tee", ALL_STD, ids=lambda s: f"tee={s.name}")
@pytest.mark.parametrize("redirects", ALL_STD, ids=lambda s: f"red={s.name}")
def test_redirect_tee_combinations(tmp_path, capfd, redirects, tee):
    ctx = start_processes("echo", PY, {0: ("-c", ECHO_SCRIPT), 1: ("-c", ECHO_SCRIPT)}, ENVS2,
                          str(tmp_path / "logs"), redirects=redirects, tee=tee)
    assert isinstance(ctx, SubprocessContext)
    result = ctx.wait(timeout=30, period=0.02)
    assert isinstance(result, RunProcsResult) and not result.is_failed()
    assert result.return_values == {}
    out, err = capfd.readouterr()
    logged = redirects | tee  # tee is a redirect plus a console copy
    for rank in (0, 1):
        for bit, paths, token, console in ((Std.OUT, result.stdouts, f"o-r{rank}", out),
                                           (Std.ERR, result.stderrs, f"e-r{rank}", err)):
            expected_path = str(tmp_path / "logs" / str(rank) / ("stdout.log" if bit is Std.OUT else "stderr.log"))
            if logged & bit:
                assert paths[rank] == expected_path
                with open(expected_path) as f:
                    assert f.read() == token + "\n"
            else:
                assert paths[rank] == "" and not os.path.exists(expected_path)
            lines = console.splitlines()
            if tee & bit:
                assert f"[echo{rank}]:{token}" in lines
            elif logged & bit:
                assert not any(token in line for line in lines)
            else:
                assert token in lines  # straight to the console, unprefixed


def test_seed_binary_example_args_cast_to_str(tmp_path):
    # the seed's "echo" example: a bare string per rank, and non-str args cast with str()
    ctx = start_processes("echo", "echo", {0: "hello", 1: (1, [1, 2, 3])}, {0: {}, 1: {}},
                          str(tmp_path), redirects=Std.OUT)
    result = ctx.wait(timeout=30, period=0.02)
    assert [open(result.stdouts[r]).read() for r in (0, 1)] == ["hello\n", "1 [1, 2, 3]\n"]


# ---------------------------------------------------------------- function entrypoints

def test_function_entrypoint_logs_tee_and_return_values(tmp_path, capfd):
    # the seed's usage 1: everything redirected, rank 0's stderr tee'd
    ctx = start_processes("trainer", echo_fn, {0: ("a",), 1: ("b",)}, ENVS2, str(tmp_path),
                          redirects=Std.ALL, tee={0: Std.ERR})
    assert isinstance(ctx, MultiprocessContext)
    assert set(ctx.pids()) == {0, 1} and all(p > 0 for p in ctx.pids().values())
    result = ctx.wait(timeout=60, period=0.05)
    assert result is not None and not result.is_failed()
    assert result.return_values == {0: "ret-a-r0", 1: "ret-b-r1"}
    for rank, msg in ((0, "a"), (1, "b")):
        assert open(result.stdouts[rank]).read() == f"o-{msg}-r{rank}\n"
        assert open(result.stderrs[rank]).read() == f"e-{msg}-r{rank}\n"
        assert not os.path.exists(tmp_path / str(rank) / "error.json")
    out, err = capfd.readouterr()
    assert "[trainer0]:e-a-r0" in err.splitlines()
    assert "e-b-r1" not in err and "o-a-r0" not in out and "o-b-r1" not in out
    assert ctx.wait() is result  # a finished context keeps its result


def test_function_failure_error_file_and_others_stopped(tmp_path):
    t0 = time.monotonic()
    ctx = start_processes("trainer", fail_fn, {0: (1, "boom"), 1: (1, "boom")}, ENVS2, str(tmp_path),
                          redirects=Std.ALL)
    result = ctx.wait(timeout=60, period=0.05)
    assert result.is_failed() and set(result.failures) == {1}
    f = result.failures[1]
    assert f.local_rank == 1 and f.exitcode == 1 and f.pid == ctx.pids()[1]
    assert f.error_file == str(tmp_path / "1" / "error.json") and os.path.isfile(f.error_file)
    assert f.message["message"] == "ValueError: boom"
    assert "fail_fn" in f.message["extraInfo"]["py_callstack"]
    assert abs(f.timestamp - time.time()) < 120 and f.signal_name() == "<N/A>"
    assert "ValueError: boom" in open(result.stderrs[1]).read()
    # rank 0 was sleeping 60 s: the failure stopped it
    assert time.monotonic() - t0 < 30
    assert _wait_gone(ctx.pids().values()) == {p: "gone" for p in ctx.pids().values()}


# ---------------------------------------------------------------- signals, close, hangs

def test_signal_killed_worker(tmp_path):
    ctx = start_processes("k", PY, {0: ("-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")},
                          {0: {}}, str(tmp_path))
    result = ctx.wait(timeout=30, period=0.02)
    f = result.failures[0]
    assert f.exitcode == -signal.SIGKILL and f.signal_name() == "SIGKILL"
    assert f.message == f"Signal 9 (SIGKILL) received by PID {f.pid}"


def test_close_kills_tree_that_ignores_sigterm(tmp_path):
    ctx = start_processes("tree", PY, {0: ("-c", TREE_SCRIPT)}, {0: {}}, str(tmp_path), redirects=Std.OUT)
    path = tmp_path / "0" / "stdout.log"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not path.read_text().strip():
        time.sleep(0.02)
    worker, grandchild = map(int, path.read_text().split())
    assert worker == ctx.pids()[0] and _state(grandchild) not in ("gone", "Z")
    assert ctx.wait(timeout=0) is None
    t0 = time.monotonic()
    ctx.close(timeout=1.0)
    elapsed = time.monotonic() - t0
    assert 0.9 <= elapsed < 10  # SIGTERM ignored: SIGKILL after the 1 s grace period
    # nothing left, not even a zombie: the worker is reaped by its context, the orphaned
    # grandchild by the context too (it acts as subreaper while it stops trees)
    assert _wait_gone([worker, grandchild], within=2) == {worker: "gone", grandchild: "gone"}


def test_close_function_worker_tree(tmp_path):
    pid_file = str(tmp_path / "pids")
    ctx = start_processes("tree", tree_fn, {0: (pid_file,)}, {0: {}}, str(tmp_path / "logs"))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not os.path.exists(pid_file):
        time.sleep(0.05)
    worker, grandchild = map(int, open(pid_file).read().split())
    assert worker == ctx.pids()[0]
    ctx.close(death_sig=signal.SIGTERM, timeout=0.5)
    assert _wait_gone([worker, grandchild], within=2) == {worker: "gone", grandchild: "gone"}
    assert mp.active_children() == []


def test_wait_timeout_on_hung_worker(tmp_path):
    ctx = start_processes("hang", PY, {0: ("-c", "import time; time.sleep(60)")}, {0: {}}, str(tmp_path))
    try:
        t0 = time.monotonic()
        assert ctx.wait(timeout=0.5, period=0.1) is None
        assert 0.45 <= time.monotonic() - t0 < 3
    finally:
        ctx.close(timeout=2)
    assert _state(ctx.pids()[0]) == "gone"
    t0 = time.monotonic()
    ctx.close(timeout=2)  # closing again is harmless and quick: nothing is left to signal
    assert time.monotonic() - t0 < 1


# ---------------------------------------------------------------- bad arguments, before anything starts

@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(envs={0: {}}), ValueError, r"args and envs must have the same local ranks.*args has \[0, 1\].*envs has \[0\]"),
    (dict(args={0: (), 2: ()}, envs={0: {}, 2: {}}), ValueError, r"args must be keyed by local ranks 0\.\.1"),
    (dict(args={}, envs={}), ValueError, "args is empty"),
    (dict(start_method="thread"), ValueError, r"unknown start_method 'thread'"),
    (dict(redirects="ALL"), ValueError, r"bad redirects: 'ALL' does not match"),
    (dict(tee="0:1,9"), ValueError, r"bad tee"),
    (dict(tee={5: Std.OUT}), ValueError, r"tee names local rank 5"),
    (dict(redirects=7), ValueError, r"bad redirects: 7"),
    (dict(entrypoint=42), TypeError, r"entrypoint must be a callable or a binary"),
])
def test_bad_arguments_raise_before_any_process(tmp_path, kwargs, exc, match):
    log_dir = tmp_path / "logs"
    call = dict(name="bad", entrypoint=PY, args={0: ("-c", "pass"), 1: ("-c", "pass")},
                envs={0: {}, 1: {}}, log_dir=str(log_dir))
    call.update(kwargs)
    with pytest.raises(exc, match=match):
        start_processes(**call)
    assert not log_dir.exists()  # checked before the log folder (let alone a process) was made
    assert mp.active_children() == []


def test_log_dir_must_be_empty(tmp_path):
    (tmp_path / "old").write_text("x")
    with pytest.raises(RuntimeError, match="is not empty"):
        start_processes("x", PY, {0: ("-c", "pass")}, {0: {}}, str(tmp_path))
