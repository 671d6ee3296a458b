"""``tritensor.multiprocessing`` (torch.multiprocessing): Python's multiprocessing, plus ``spawn``.

Training scripts start one process per device with ``torch.multiprocessing.spawn(fn, args,
nprocs)`` and use ``torch.multiprocessing`` wherever they would use ``multiprocessing``. This
module is both: every name of the standard library's ``multiprocessing`` (``get_context``,
``Process``, ``Queue`` ...), and torch's ``spawn``/``start_processes`` with its ``ProcessContext``
and its errors (``ProcessRaisedException`` carrying the child's traceback,
``ProcessExitedException`` for a child that died without one), messages as torch's.

Why it is not built on ``elastic.multiprocessing``: that is the elastic launcher's layer, the top
of the package, and this module sits at the bottom (it needs nothing of tritensor), as torch's
``torch.multiprocessing`` is independent of ``torch.distributed.elastic``. Why the file is not named
``multiprocessing.py``: with the checkout on ``sys.path`` (``python -m pytest`` from its root) a
top-level file of that name would shadow the standard library's; the package root binds it as
``tritensor.multiprocessing`` (as the package ``gpu`` is ``tritensor.cuda``).

Tensors cross process boundaries by pickling (their values are copied): tritensor has no
shared-memory tensor transport, so the sharing strategy is accepted and recorded, and changes
nothing.
"""
from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import tempfile
import time
import traceback
import warnings
from multiprocessing import *  # noqa: F401,F403  (torch.multiprocessing re-exports the standard library's names)

log = logging.getLogger(__name__)

__all__ = ["set_sharing_strategy", "get_sharing_strategy", "get_all_sharing_strategies", "spawn", "start_processes",
           "ProcessContext", "ProcessException", "ProcessRaisedException", "ProcessExitedException"]
__all__ += multiprocessing.__all__

_all_sharing_strategies = {"file_descriptor", "file_system"}
_sharing_strategy = "file_descriptor"


def set_sharing_strategy(new_strategy: str) -> None:
    """Accepted and recorded (see the module docstring: no shared-memory transport here)."""
    global _sharing_strategy
    if new_strategy not in _all_sharing_strategies:
        raise AssertionError(f"Invalid sharing strategy {new_strategy!r}")
    _sharing_strategy = new_strategy


def get_sharing_strategy() -> str:
    """The recorded sharing strategy ('file_descriptor' by default); it changes nothing here (see the module
    docstring)."""
    return _sharing_strategy


def get_all_sharing_strategies() -> set:
    """{'file_descriptor', 'file_system'}: the strategies set_sharing_strategy accepts, as torch's on Linux."""
    return set(_all_sharing_strategies)


class ProcessException(Exception):
    """The base of spawn's errors, as torch's: ``error_index`` is the failed process's index, ``error_pid`` its pid."""

    __slots__ = ["error_index", "error_pid"]

    def __init__(self, msg: str, error_index: int, error_pid: int):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.error_pid = error_pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.error_pid)


class ProcessRaisedException(ProcessException):
    """A child raised: the message carries its traceback."""


class ProcessExitedException(ProcessException):
    """A child exited with a nonzero code, or was killed by a signal, without raising."""

    __slots__ = ["exit_code"]

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int, signal_name: str | None = None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.error_pid, self.exit_code, self.signal_name)


def _wrap(fn, i, args, error_file):
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # the parent is stopping the children
    except Exception:
        with open(error_file, "wb") as fh:
            pickle.dump(traceback.format_exc(), fh)
        sys.exit(1)


class ProcessContext:
    """The processes ``start_processes(join=False)`` started; ``join()`` waits and raises a child's error."""

    def __init__(self, processes, error_files):
        self.error_files = error_files
        self.processes = processes
        self.sentinels = {process.sentinel: index for index, process in enumerate(processes)}

    def pids(self):
        """The pids of the spawned processes, in index order."""
        return [int(process.pid) for process in self.processes]

    def _join_procs_with_timeout(self, timeout: float):
        end = time.monotonic() + timeout
        for process in self.processes:
            process.join(max(0, end - time.monotonic()))

    def join(self, timeout: float | None = None, grace_period: float | None = None) -> bool:
        """``True`` once every process ended well; on the first failure, the others are stopped
        (SIGTERM, then SIGKILL after ``grace_period`` or 30 s) and the failure is raised."""
        if len(self.sentinels) == 0:
            return True
        ready = multiprocessing.connection.wait(self.sentinels.keys(), timeout=timeout)
        error_index = None
        for sentinel in ready:
            index = self.sentinels.pop(sentinel)
            process = self.processes[index]
            process.join()
            if process.exitcode != 0:
                error_index = index
                break
        if error_index is None:
            return len(self.sentinels) == 0
        if grace_period is not None:
            self._join_procs_with_timeout(grace_period)
        for process in self.processes:
            if process.is_alive():
                log.warning("Terminating process %s via signal SIGTERM", process.pid)
                process.terminate()
        self._join_procs_with_timeout(30 if grace_period is None else grace_period)
        for process in self.processes:
            if process.is_alive():
                log.warning("Unable to shutdown process %s via SIGTERM , forcefully exiting via SIGKILL", process.pid)
                process.kill()
            process.join()
        failed_process = self.processes[error_index]
        if not os.access(self.error_files[error_index], os.R_OK):
            exitcode = failed_process.exitcode
            if exitcode < 0:
                try:
                    name = signal.Signals(-exitcode).name
                except ValueError:
                    name = f"<Unknown signal {-exitcode}>"
                raise ProcessExitedException(f"process {error_index:d} terminated with signal {name}",
                                             error_index=error_index, error_pid=failed_process.pid,
                                             exit_code=exitcode, signal_name=name)
            raise ProcessExitedException(f"process {error_index:d} terminated with exit code {exitcode:d}",
                                         error_index=error_index, error_pid=failed_process.pid, exit_code=exitcode)
        with open(self.error_files[error_index], "rb") as fh:
            original_trace = pickle.load(fh)
        os.unlink(self.error_files[error_index])
        msg = f"\n\n-- Process {error_index:d} terminated with the following error:\n"
        msg += original_trace
        raise ProcessRaisedException(msg, error_index, failed_process.pid)


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Run ``fn(i, *args)`` in ``nprocs`` processes of ``start_method``; with ``join``, wait for
    them all (raising the first failure), else return their :class:`ProcessContext`."""
    mp = multiprocessing.get_context(start_method)
    error_files, processes = [], []
    for i in range(nprocs):
        # a path for the child's traceback, left absent: its existence says the child raised
        tf = tempfile.NamedTemporaryFile(prefix="tritensor-errorfile-", suffix=".pickle", delete=False)
        tf.close()
        os.unlink(tf.name)
        process = mp.Process(target=_wrap, args=(fn, i, args, tf.name), daemon=daemon)
        process.start()
        error_files.append(tf.name)
        processes.append(process)
    context = ProcessContext(processes, error_files)
    if not join:
        return context
    while not context.join():
        pass


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """``torch.multiprocessing.spawn``: :func:`start_processes` with the ``spawn`` start method."""
    if start_method != "spawn":
        msg = (f"This method only supports start_method=spawn (got: {start_method}).\n"
               "To use a different start_method use:\n\t\t tritensor.multiprocessing.start_processes(...)")
        warnings.warn(msg, FutureWarning, stacklevel=2)
    return start_processes(fn, args, nprocs, join, daemon, start_method="spawn")
