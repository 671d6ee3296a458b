"""Process contexts: ``n`` copies of a function (multiprocessing) or a binary (subprocess).

It exists so that a launcher (the elastic agent, ``tritensor-run``) can start a job's local
workers, follow them, collect their return values or failures, and stop them -- whole process
trees, no zombies -- through one interface, ``PContext``, whatever the entrypoint is. Names,
signatures and semantics follow ``torch.distributed.elastic.multiprocessing.api``.
"""

from __future__ import annotations

import abc
import multiprocessing as mp
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from enum import IntFlag
from typing import Any, Callable, Dict, Optional, Tuple, Union

from ._tree import kill_trees
from .errors import ProcessFailure, record
from .tail_log import TailLog

__all__ = ["Std", "to_map", "RunProcsResult", "PContext", "MultiprocessContext", "SubprocessContext"]

_VALUE_REGEX = r"^[0-3]$"
_MAPPING_REGEX = r"^(\d+:[0-3],)*(\d+:[0-3])$"


class Std(IntFlag):
    """Which of a worker's streams go to its log file: ``NONE``, ``OUT``, ``ERR`` or ``ALL``."""

    NONE = 0
    OUT = 1
    ERR = 2
    ALL = OUT | ERR

    @classmethod
    def from_str(cls, vm: str) -> Union["Std", Dict[int, "Std"]]:
        """``"0"``..``"3"`` -> a ``Std``; ``"0:3,1:0"`` -> ``{0: Std.ALL, 1: Std.NONE}``; else ``ValueError``."""
        vm = str(vm).strip()
        if re.match(_VALUE_REGEX, vm):
            return cls(int(vm))
        if re.match(_MAPPING_REGEX, vm):
            d: Dict[int, Std] = {}
            for m in vm.split(","):
                i, v = m.split(":")
                d[int(i)] = cls(int(v))
            return d
        raise ValueError(f"{vm!r} does not match: <{_VALUE_REGEX}> or <{_MAPPING_REGEX}> "
                         "(0=NONE, 1=OUT, 2=ERR, 3=ALL; e.g. '3' or '0:3,1:0')")


def to_map(val_or_map: Union[Std, Dict[int, Std]], local_world_size: int) -> Dict[int, Std]:
    """A ``Std`` for every local rank: one value for all, or a map whose missing ranks get ``NONE``."""
    if isinstance(val_or_map, Std):
        return {i: val_or_map for i in range(local_world_size)}
    return {i: val_or_map.get(i, Std.NONE) for i in range(local_world_size)}


@dataclass
class RunProcsResult:
    """The outcome of a finished ``PContext``, every field keyed by local rank.

    ``return_values`` only for functions; ``failures`` the processes that failed on their own
    (the others were stopped because of them); ``stdouts``/``stderrs`` the log files' paths
    (``""`` where that stream was not redirected).
    """

    return_values: Dict[int, Any] = field(default_factory=dict)
    failures: Dict[int, ProcessFailure] = field(default_factory=dict)
    stdouts: Dict[int, str] = field(default_factory=dict)
    stderrs: Dict[int, str] = field(default_factory=dict)

    def is_failed(self) -> bool:
        """Whether any process failed."""
        return len(self.failures) > 0


def _validate_full_rank(d: Dict[int, Any], nprocs: int, what: str) -> None:
    actual = set(d.keys())
    expected = set(range(nprocs))
    if actual != expected:
        raise RuntimeError(f"{what}, local rank mapping mismatch, expected: {sorted(expected)}, "
                           f"actual: {sorted(actual)}")


class PContext(abc.ABC):
    """The base of the contexts: ``start()``, ``wait(timeout, period)``, ``pids()``, ``close(death_sig)``.

    ``stdouts``/``stderrs`` map local ranks to log paths (``""``: not redirected); ``tee_*``
    name the subset that is also printed to the console, prefixed ``[{name}{local_rank}]:`` or
    by ``log_line_prefixes``. ``duplicate_stdout_filters`` (``_stderr_``): the tee'd lines that
    contain any of these strings are also written to ``filtered_stdout`` (``filtered_stderr``).
    """

    def __init__(self, name: str, entrypoint: Union[Callable, str], args: Dict[int, Tuple],
                 envs: Dict[int, Dict[str, str]], stdouts: Dict[int, str], stderrs: Dict[int, str],
                 tee_stdouts: Dict[int, str], tee_stderrs: Dict[int, str], error_files: Dict[int, str],
                 log_line_prefixes: Optional[Dict[int, str]] = None, duplicate_stdout_filters=None,
                 duplicate_stderr_filters=None, filtered_stdout: str = "", filtered_stderr: str = ""):
        self.name = name
        nprocs = len(args)
        _validate_full_rank(stdouts, nprocs, "stdouts")
        _validate_full_rank(stderrs, nprocs, "stderrs")
        self.entrypoint = entrypoint
        self.args = args
        self.envs = envs
        self.stdouts = stdouts
        self.stderrs = stderrs
        self.error_files = error_files
        self.nprocs = nprocs
        self._tails = [TailLog(name, tee_stdouts, sys.stdout, log_line_prefixes),
                       TailLog(name, tee_stderrs, sys.stderr, log_line_prefixes)]
        self._filtered_files = []
        for needles, path, tees in ((duplicate_stdout_filters, filtered_stdout, tee_stdouts),
                                    (duplicate_stderr_filters, filtered_stderr, tee_stderrs)):
            if needles:
                f = open(path, "w", errors="replace", buffering=1)
                self._filtered_files.append(f)
                self._tails.append(TailLog(name, tees, f, log_line_prefixes,
                                           log_line_filter=lambda line, n=tuple(needles): any(x in line for x in n)))
        self._result: Optional[RunProcsResult] = None
        self._closed = False

    def start(self) -> None:
        """Start the processes, then the threads that tee their logs to the console."""
        self._start()
        for tail in self._tails:
            tail.start()

    @abc.abstractmethod
    def _start(self) -> None:
        raise NotImplementedError()

    @abc.abstractmethod
    def _poll(self) -> Optional[RunProcsResult]:
        """A result once every process finished or one failed (then the rest are closed); else ``None``."""
        raise NotImplementedError()

    def wait(self, timeout: float = -1, period: float = 1) -> Optional[RunProcsResult]:
        """Poll every ``period`` s for up to ``timeout`` s (0: once; negative: forever).

        Returns the ``RunProcsResult`` once all processes finished, or as soon as one failed
        (the others are then stopped); ``None`` if they still run when ``timeout`` expires.
        """
        if self._result is not None:
            return self._result
        if timeout == 0:
            return self._finish(self._poll())
        expiry = time.monotonic() + (timeout if timeout > 0 else float("inf"))
        while True:
            pr = self._poll()
            if pr is not None:
                return self._finish(pr)
            left = expiry - time.monotonic()
            if left <= 0:
                return None
            time.sleep(min(period, left))

    def _finish(self, pr: Optional[RunProcsResult]) -> Optional[RunProcsResult]:
        if pr is not None:
            self._result = pr
            self._stop_tails()  # the tee threads read the logs to their end before wait returns
        return pr

    @abc.abstractmethod
    def pids(self) -> Dict[int, int]:
        """Local rank -> pid of each process."""
        raise NotImplementedError()

    @abc.abstractmethod
    def _leaders(self) -> Dict[int, int]:
        """Local rank -> pid of each started process (each leads its own process group)."""

    @abc.abstractmethod
    def _reap(self) -> None:
        """Collect the exit status of every started process that has exited (non-blocking)."""

    @abc.abstractmethod
    def _exited(self, pid: int) -> bool:
        """Whether the process ``pid`` was seen to exit."""

    def close(self, death_sig: Optional[signal.Signals] = None, timeout: float = 30) -> None:
        """Stop every process's whole tree: ``death_sig`` (default ``SIGTERM``) to its process
        group, ``SIGKILL`` to what still runs after ``timeout`` seconds; reap everything."""
        if death_sig is None:
            death_sig = signal.SIGTERM
        leaders = list(self._leaders().values())
        if leaders:
            kill_trees(leaders, death_sig, timeout, self._reap, self._exited)
        self._closed = True
        self._stop_tails()

    def _stop_tails(self) -> None:
        for tail in self._tails:
            tail.stop()
        for f in self._filtered_files:
            f.close()


def _open_log(path: str):
    return open(path, "w", buffering=1) if path else None


def _redirect(fd: int, path: str) -> None:
    if path:
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(f, fd)
        os.close(f)


def _wrap(local_rank: int, fn: Callable, args: Tuple, env: Dict[str, str], stdout: str, stderr: str,
          ret_q: Any) -> None:
    """A function worker's body: own session, its environment, its streams, ``@record``, its result."""
    try:
        os.setsid()  # lead a new session and process group: close() signals the whole tree
    except OSError:  # already a group leader (it cannot happen with spawn/fork, but be kind)
        pass
    os.environ.update(env)
    for stream, fd, path in ((sys.stdout, 1, stdout), (sys.stderr, 2, stderr)):
        if path:
            if stream is not None:
                stream.flush()
            _redirect(fd, path)
            if stream is not None and hasattr(stream, "reconfigure"):
                stream.reconfigure(line_buffering=True)  # tee follows the file line by line
    ret = record(fn)(*args)
    ret_q.put(ret)


class MultiprocessContext(PContext):
    """``PContext`` holding worker processes invoked as a function (``multiprocessing``)."""

    def __init__(self, name: str, entrypoint: Callable, args: Dict[int, Tuple], envs: Dict[int, Dict[str, str]],
                 stdouts: Dict[int, str], stderrs: Dict[int, str], tee_stdouts: Dict[int, str],
                 tee_stderrs: Dict[int, str], error_files: Dict[int, str], start_method: str, **logs):
        super().__init__(name, entrypoint, args, envs, stdouts, stderrs, tee_stdouts, tee_stderrs, error_files, **logs)
        self.start_method = start_method
        self._ctx = mp.get_context(start_method)
        self._ret_vals: Dict[int, Any] = {}
        self._queues: Dict[int, Any] = {}
        self._procs: Dict[int, Any] = {}

    def _start(self) -> None:
        if self._procs:
            raise ValueError("The process context already initialized. Most likely the start method got called twice.")
        for rank in range(self.nprocs):
            q = self._ctx.SimpleQueue()
            p = self._ctx.Process(target=_wrap, name=f"{self.name}{rank}", args=(
                rank, self.entrypoint, self.args[rank], self.envs[rank], self.stdouts[rank],
                self.stderrs[rank], q))
            p.start()
            self._queues[rank] = q
            self._procs[rank] = p

    def _drain(self, rank: int) -> None:
        q = self._queues[rank]
        if rank not in self._ret_vals and not q.empty():
            self._ret_vals[rank] = q.get()

    def _poll(self) -> Optional[RunProcsResult]:
        done, failures = 0, {}
        for rank, p in self._procs.items():
            exitcode = p.exitcode  # checked before draining: a finished worker's value is in the pipe
            self._drain(rank)
            if exitcode is None:
                continue
            done += 1
            if exitcode != 0:
                failures[rank] = ProcessFailure(local_rank=rank, pid=p.pid, exitcode=exitcode,
                                                error_file=self.error_files[rank])
        if failures:  # one failure stops the rest
            self.close()
        elif done < self.nprocs:
            return None
        return RunProcsResult(return_values={} if failures else dict(self._ret_vals), failures=failures,
                              stdouts=self.stdouts, stderrs=self.stderrs)

    def pids(self) -> Dict[int, int]:
        """local rank -> pid of each started process."""
        return {rank: p.pid for rank, p in self._procs.items()}

    _leaders = pids

    def _reap(self) -> None:
        for p in self._procs.values():
            p.exitcode  # noqa: B018 -- polls (waitpid WNOHANG) and so reaps an exited worker

    def _exited(self, pid: int) -> bool:
        return any(p.pid == pid and p.exitcode is not None for p in self._procs.values())

    def close(self, death_sig: Optional[signal.Signals] = None, timeout: float = 30) -> None:
        """Terminate the processes (``death_sig``, then SIGKILL after ``timeout``), join them and close their result
        queues."""
        super().close(death_sig, timeout)
        for p in self._procs.values():
            p.join(timeout=5)
        for q in self._queues.values():
            q.close()


class SubprocessContext(PContext):
    """``PContext`` holding worker processes invoked as a binary (``subprocess.Popen``)."""

    def __init__(self, name: str, entrypoint: str, args: Dict[int, Tuple], envs: Dict[int, Dict[str, str]],
                 stdouts: Dict[int, str], stderrs: Dict[int, str], tee_stdouts: Dict[int, str],
                 tee_stderrs: Dict[int, str], error_files: Dict[int, str], **logs):
        super().__init__(name, entrypoint, args, envs, stdouts, stderrs, tee_stdouts, tee_stderrs, error_files, **logs)
        self._popens: Dict[int, subprocess.Popen] = {}

    def _start(self) -> None:
        if self._popens:
            raise ValueError("The subprocess handlers already initialized. Most likely the start method got called twice.")
        for rank in range(self.nprocs):
            env = os.environ.copy()
            env.update(self.envs[rank])
            out, err = _open_log(self.stdouts[rank]), _open_log(self.stderrs[rank])
            try:
                self._popens[rank] = subprocess.Popen(
                    [self.entrypoint, *(str(a) for a in self.args[rank])], env=env, stdout=out, stderr=err,
                    start_new_session=True)  # a session of its own: close() signals the whole tree
            finally:
                for f in (out, err):
                    if f is not None:
                        f.close()

    def _poll(self) -> Optional[RunProcsResult]:
        done, failures = 0, {}
        for rank, p in self._popens.items():
            exitcode = p.poll()
            if exitcode is None:
                continue
            done += 1
            if exitcode != 0:
                failures[rank] = ProcessFailure(local_rank=rank, pid=p.pid, exitcode=exitcode,
                                                error_file=self.error_files[rank])
        if failures:
            self.close()
        elif done < self.nprocs:
            return None
        return RunProcsResult(failures=failures, stdouts=self.stdouts, stderrs=self.stderrs)

    def pids(self) -> Dict[int, int]:
        """local rank -> pid of each started subprocess."""
        return {rank: p.pid for rank, p in self._popens.items()}

    _leaders = pids

    def _reap(self) -> None:
        for p in self._popens.values():
            p.poll()

    def _exited(self, pid: int) -> bool:
        return any(p.pid == pid and p.returncode is not None for p in self._popens.values())

    def close(self, death_sig: Optional[signal.Signals] = None, timeout: float = 30) -> None:
        """Terminate the subprocesses (``death_sig``, then SIGKILL after ``timeout``) and reap them."""
        super().close(death_sig, timeout)
        for p in self._popens.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

