"""Worker failures as data: ``ProcessFailure``, ``ChildFailedError`` and the ``@record`` decorator.

It exists so that "worker 3 died" becomes a report a user can act on: which rank, which pid,
which exit code or signal, when, and the worker's own traceback read back from the error file
that ``@record`` wrote (``TORCHELASTIC_ERROR_FILE``). Names and formats follow
``torch.distributed.elastic.multiprocessing.errors``.

Usage, in the worker's main module::

    from tritensor.elastic.multiprocessing.errors import record

    @record
    def main():
        ...

    if __name__ == "__main__":
        main()
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from datetime import datetime
from functools import wraps
from string import Template
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar

from .error_handler import ERROR_FILE_ENV, ErrorHandler

__all__ = ["ProcessFailure", "ChildFailedError", "record", "ErrorHandler", "get_error_handler",
           "ERROR_FILE_ENV"]

log = logging.getLogger(__name__)

JSON = Dict[str, Any]
_EMPTY_ERROR_DATA: JSON = {"message": "<NONE>"}
_NOT_AVAILABLE = "<N/A>"

T = TypeVar("T")


def get_error_handler() -> ErrorHandler:
    """A new ErrorHandler (torch's factory; tritensor has only the one kind)."""
    return ErrorHandler()


@dataclass
class ProcessFailure:
    """One failed process: ``local_rank``, ``pid``, ``exitcode`` (negative: killed by that signal)
    and ``error_file``; ``message``, ``timestamp`` and ``error_file_data`` are read from the
    error file when the worker wrote one, otherwise made up (the signal, or a hint)."""

    local_rank: int
    pid: int
    exitcode: int
    error_file: str
    error_file_data: JSON = field(init=False)
    message: Any = field(init=False)
    timestamp: int = field(init=False)

    def __post_init__(self):
        self.error_file_data = _EMPTY_ERROR_DATA
        self.message = ""
        self.timestamp = int(time.time())
        if self.error_file and os.path.isfile(self.error_file):
            try:
                with open(self.error_file) as fp:
                    self.error_file_data = json.load(fp)
                self.message, self.timestamp = self._get_error_data(self.error_file_data)
            except Exception:
                log.exception("Failed to parse reply file: %s", self.error_file)
                raise
        if not self.message:
            if self.exitcode < 0:  # signals typically leave no error file
                self.message = f"Signal {-self.exitcode} ({self.signal_name()}) received by PID {self.pid}"
            else:
                self.message = ("To enable traceback see: decorate the worker's main with "
                                "tritensor.elastic.multiprocessing.errors.record")

    @staticmethod
    def _get_error_data(error_file_data: JSON) -> Tuple[Any, int]:
        message = error_file_data["message"]
        if isinstance(message, str):
            timestamp = int(error_file_data.get("timestamp", 0))
        else:
            timestamp = int(message["extraInfo"]["timestamp"])
        return message, timestamp

    def signal_name(self) -> str:
        """The name of the signal that killed the process (``SIGKILL``), or ``<N/A>``."""
        if self.exitcode < 0:
            try:
                return signal.Signals(-self.exitcode).name
            except Exception:
                return _NOT_AVAILABLE
        return _NOT_AVAILABLE

    def timestamp_isoformat(self) -> str:
        """The failure time as ISO 8601 with '_' between date and time, as torch's error reports write it."""
        return datetime.fromtimestamp(self.timestamp).isoformat(sep="_")


GlobalRank = int

_FAILURE_FORMAT_TEMPLATE = """[${idx}]:
  time      : ${time}
  host      : ${hostname}
  rank      : ${rank} (local_rank: ${local_rank})
  exitcode  : ${exitcode} (pid: ${pid})
  error_file: ${error_file}
  traceback : ${message}"""

_MSG_FORMAT_TEMPLATE = """
${boarder}
${title}
${section}
Failures:
${other_failures}
${section}
Root Cause (first observed failure):
${root_failure}
${boarder}"""


class ChildFailedError(Exception):
    """Raised when child processes failed: ``name`` (the job), ``failures`` by global rank.

    Its message names the first failure (the smallest timestamp) as the root cause and lists
    the others above it, as TorchElastic prints it::

        ============================================================
        trainer FAILED
        ------------------------------------------------------------
        Failures:
        [1]:
          time      : 2024-05-01_12:00:01
          host      : node0
          rank      : 1 (local_rank: 1)
          exitcode  : -9 (pid: 4242)
          error_file: <N/A>
          traceback : Signal 9 (SIGKILL) received by PID 4242
        ------------------------------------------------------------
        Root Cause (first observed failure):
        [0]:
          ...
        ============================================================
    """

    def __init__(self, name: str, failures: Dict[GlobalRank, ProcessFailure]):
        if not failures:
            raise ValueError("ChildFailedError: failures must name at least one failed process")
        self.name = name
        self.failures = failures
        super().__init__(self.format_msg())

    def get_first_failure(self) -> Tuple[GlobalRank, ProcessFailure]:
        """(rank, failure) of the earliest failure by timestamp: the root cause torch's report puts first."""
        rank = min(self.failures.keys(), key=lambda r: self.failures[r].timestamp)
        return rank, self.failures[rank]

    def format_msg(self, boarder_delim: str = "=", section_delim: str = "-") -> str:
        """The multi-line failure report torch prints: the root cause first, then the other failures, each with rank,
        pid, exit code and error file."""
        title = f"{self.name} FAILED"
        root_rank, _ = self.get_first_failure()
        root_failure_fmt = ""
        other_failures_fmt: List[str] = []
        width = len(title)
        for idx, (rank, failure) in enumerate(self.failures.items()):
            fmt, w = self._format_failure(idx, rank, failure)
            width = max(width, w)
            if rank == root_rank:
                root_failure_fmt = fmt
            else:
                other_failures_fmt.append(fmt)
        width = min(width, 60)  # upper bound on the rules' width
        return Template(_MSG_FORMAT_TEMPLATE).substitute(
            boarder=boarder_delim * width, title=title, section=section_delim * width,
            root_failure=root_failure_fmt,
            other_failures="\n".join(other_failures_fmt or ["  <NO_OTHER_FAILURES>"]))

    def _format_failure(self, idx: int, rank: int, failure: ProcessFailure) -> Tuple[str, int]:
        # message is a str (signals, no error file) or the error file's dict: show its traceback
        msg = failure.message
        if isinstance(msg, dict):
            msg = msg.get("extraInfo", {}).get("py_callstack", msg.get("message", _NOT_AVAILABLE))
            msg = msg.replace("\n", "\n  ")
        fmt = Template(_FAILURE_FORMAT_TEMPLATE).substitute(
            idx=idx, time=failure.timestamp_isoformat(), hostname=socket.getfqdn(), rank=rank,
            local_rank=failure.local_rank, exitcode=failure.exitcode, pid=failure.pid,
            error_file=failure.error_file or _NOT_AVAILABLE, message=msg)
        return fmt, max(len(line) for line in fmt.split("\n"))


def record(fn: Optional[Callable[..., T]] = None,
           error_handler: Optional[ErrorHandler] = None) -> Callable[..., T]:
    """Decorator: an exception escaping ``fn`` is written to ``TORCHELASTIC_ERROR_FILE``, then re-raised.

    ``SystemExit(0)`` (or ``None``) counts as success. A ``ChildFailedError`` (a launcher whose own
    workers failed) copies the root cause's error file instead, so the real traceback travels
    up. Usable bare (``@record``) or with a handler (``@record(error_handler=h)``).
    """
    if not error_handler:
        error_handler = get_error_handler()

    def wrap(f: Callable[..., T]) -> Callable[..., T]:
        @wraps(f)
        def wrapper(*args, **kwargs):
            assert error_handler is not None
            error_handler.initialize()
            try:
                return f(*args, **kwargs)
            except SystemExit as se:
                if se.code == 0 or se.code is None:
                    return None
                raise
            except ChildFailedError as e:
                _, failure = e.get_first_failure()
                if failure.error_file != _NOT_AVAILABLE and os.path.isfile(failure.error_file):
                    error_handler.dump_error_file(failure.error_file, failure.exitcode)
                else:
                    log.info("local_rank %s FAILED with no error file. Decorate your entrypoint fn with "
                             "@record for traceback info.", failure.local_rank)
                raise
            except Exception as e:
                error_handler.record_exception(e)
                raise

        return wrapper

    if fn is None:
        return wrap
    return wrap(fn)
