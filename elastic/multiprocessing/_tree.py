"""Stopping whole worker process trees, and leaving no zombies behind.

It exists because a worker is rarely one process: a training script starts data loaders,
shells and compilers. Every worker is started as the leader of its own session (so its
process group id is its pid) and :func:`kill_trees` signals the whole group: ``death_sig``
first, then ``SIGKILL`` for whatever is still alive after the grace period.

A descendant whose parent dies is handed to the nearest "child subreaper", normally PID 1.
Not every PID 1 reaps (a bare container init does not), so while it stops trees this process
marks itself a subreaper (Linux ``prctl``), inherits the group's orphans and reaps exactly
those: processes whose process group is a worker's and whose parent is now us. Nothing else
is waited for, so children owned by other code are never stolen.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Dict, Iterable, List, Tuple

__all__ = ["kill_trees", "group_members"]

_PR_SET_CHILD_SUBREAPER = 36
_subreaper_lock = threading.Lock()
_subreaper_users = 0
_libc = None


def _prctl_subreaper(on: bool) -> None:
    global _libc
    if not sys.platform.startswith("linux"):
        return
    try:
        if _libc is None:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0)
    except Exception:  # no prctl: orphans go to PID 1 as usual
        pass


@contextmanager
def _subreaper():
    global _subreaper_users
    with _subreaper_lock:
        if _subreaper_users == 0:
            _prctl_subreaper(True)
        _subreaper_users += 1
    try:
        yield
    finally:
        with _subreaper_lock:
            _subreaper_users -= 1
            if _subreaper_users == 0:
                _prctl_subreaper(False)


def _proc_table() -> Dict[int, Tuple[str, int, int]]:
    """pid -> (state, ppid, pgid) from /proc; empty where /proc does not exist."""
    table: Dict[int, Tuple[str, int, int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        table[int(name)] = (fields[0], int(fields[1]), int(fields[2]))
    return table


def group_members(pgids: Iterable[int]) -> List[int]:
    """Pids (zombies included) whose process group is one of ``pgids``."""
    wanted = set(pgids)
    return [pid for pid, (_, _, pgid) in _proc_table().items() if pgid in wanted]


def _signal_groups(leaders: Iterable[int], sig: int, exited: Callable[[int], bool]) -> None:
    for pid in leaders:
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            if exited(pid):  # reaped already: its pid may belong to a stranger now
                continue
            try:  # not yet a group leader (a function worker before its setsid): the leader alone
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        except PermissionError:
            pass


def _alive(leaders: List[int], exited: Callable[[int], bool]) -> bool:
    """Whether any leader, or any member of a leader's group, still runs (zombies do not)."""
    table = _proc_table()
    if not table:  # no /proc: ask the kernel about the groups
        for pid in leaders:
            try:
                os.killpg(pid, 0)
                return True
            except (ProcessLookupError, PermissionError):
                if not exited(pid):
                    return True
        return False
    groups = set(leaders)
    running = {pid for pid in leaders if not exited(pid)}  # an exited leader's pid may be reused
    for pid, (state, _, pgid) in table.items():
        if (pgid in groups or pid in running) and state not in ("Z", "X"):
            return True
    return False


def _reap_orphans(leaders: List[int]) -> None:
    me, groups = os.getpid(), set(leaders)
    for pid, (_, ppid, pgid) in _proc_table().items():
        if ppid == me and pgid in groups and pid not in groups:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def kill_trees(leaders: List[int], death_sig: int, timeout: float, poll_leaders: Callable[[], None],
               exited: Callable[[int], bool]) -> None:
    """Send ``death_sig`` to every leader's process group; ``SIGKILL`` what lives after ``timeout`` s.

    ``poll_leaders`` reaps the leaders themselves (their owner's ``poll``/``join``), ``exited``
    says whether the owner saw a leader exit. Returns once no process of any group runs.
    """
    leaders = list(leaders)
    with _subreaper():
        _signal_groups(leaders, death_sig, exited)
        deadline = time.monotonic() + max(0.0, timeout)
        killed = False
        while True:
            poll_leaders()
            _reap_orphans(leaders)
            if not _alive(leaders, exited):
                break
            if not killed and time.monotonic() >= deadline:
                _signal_groups(leaders, signal.SIGKILL, exited)
                killed = True
                deadline = time.monotonic() + 10.0  # SIGKILL cannot be refused: this only bounds a D-state
            elif killed and time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        poll_leaders()
        _reap_orphans(leaders)
