"""tt.multiprocessing: the standard library's names, and torch's spawn/start_processes with its errors.

Most cases use the fork start method (no interpreter to start); one case spawns, as
``spawn`` always does, with a standard-library function as the worker so that the child needs
nothing of this test file.
"""
import operator
import os
import signal

import pytest

import tritensor as tt
import tritensor.multiprocessing as ttmp
import multiprocessing


def _ok(i, q):
    q.put(i * 10)


def _raise(i):
    if i == 1:
        raise ValueError(f"worker {i} failed")


def _exit(i, code):
    if i == 1:
        os._exit(code)


def _killed(i):
    if i == 0:
        os.kill(os.getpid(), signal.SIGKILL)


def test_reexports_the_standard_library():
    assert tt.multiprocessing is ttmp
    for name in ("get_context", "Process", "Queue", "Pool", "Event", "Lock", "cpu_count", "set_start_method"):
        assert getattr(ttmp, name) is getattr(multiprocessing, name)
        assert name in ttmp.__all__
    assert ttmp.get_sharing_strategy() == "file_descriptor"
    assert ttmp.get_all_sharing_strategies() == {"file_descriptor", "file_system"}
    ttmp.set_sharing_strategy("file_system")
    assert ttmp.get_sharing_strategy() == "file_system"
    ttmp.set_sharing_strategy("file_descriptor")
    with pytest.raises(AssertionError):
        ttmp.set_sharing_strategy("shm")


def test_start_processes_runs_each_rank():
    q = multiprocessing.get_context("fork").SimpleQueue()
    assert ttmp.start_processes(_ok, args=(q,), nprocs=3, start_method="fork") is None
    assert sorted(q.get() for _ in range(3)) == [0, 10, 20]
    ctx = ttmp.start_processes(_ok, args=(q,), nprocs=2, join=False, start_method="fork")
    assert isinstance(ctx, ttmp.ProcessContext) and len(ctx.pids()) == 2
    while not ctx.join():
        pass
    assert sorted(q.get() for _ in range(2)) == [0, 10]


def test_a_child_that_raises():
    with pytest.raises(ttmp.ProcessRaisedException) as info:
        ttmp.start_processes(_raise, nprocs=2, start_method="fork")
    e = info.value
    assert e.error_index == 1 and isinstance(e.error_pid, int)
    assert str(e).startswith("\n\n-- Process 1 terminated with the following error:\nTraceback (most recent call last)")
    assert "ValueError: worker 1 failed" in str(e)


def test_a_child_that_exits_or_is_killed():
    with pytest.raises(ttmp.ProcessExitedException, match="^process 1 terminated with exit code 3$") as info:
        ttmp.start_processes(_exit, args=(3,), nprocs=2, start_method="fork")
    assert info.value.exit_code == 3 and info.value.signal_name is None
    with pytest.raises(ttmp.ProcessExitedException, match="^process 0 terminated with signal SIGKILL$") as info:
        ttmp.start_processes(_killed, nprocs=1, start_method="fork")
    assert info.value.exit_code == -signal.SIGKILL and info.value.signal_name == "SIGKILL"


def test_spawn():
    with pytest.raises(ttmp.ProcessRaisedException, match="(?s)-- Process 0 terminated with the following error:"
                                                          ".*ZeroDivisionError"):
        ttmp.spawn(operator.truediv, args=(0,), nprocs=1)
    with pytest.warns(FutureWarning, match="This method only supports start_method=spawn \\(got: fork\\)"):
        assert ttmp.spawn(operator.truediv, args=(1,), nprocs=0, start_method="fork") is None
