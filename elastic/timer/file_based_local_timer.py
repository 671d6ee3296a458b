"""Timers over a named pipe: ``FileTimerServer`` (in the agent) reads JSON requests that
``FileTimerClient``s (in any process on the host) write to a FIFO, and signals the workers
whose timers expired with the signal each client chose (``SIGKILL`` by default).

The agent starts one when ``TORCHELASTIC_ENABLE_FILE_TIMER=1`` and hands its path to the
workers in ``TORCHELASTIC_TIMER_FILE``.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import select
import signal
import threading
import time
from typing import Callable, Dict, List, Optional, Set, Tuple

from .api import TimerClient, TimerRequest

__all__ = ["FileTimerClient", "FileTimerRequest", "FileTimerServer"]

log = logging.getLogger(__name__)


class FileTimerRequest(TimerRequest):
    """A ``TimerRequest`` that also carries the ``signal`` to reap the worker with."""

    __slots__ = ["version", "signal"]

    def __init__(self, worker_pid: int, scope_id: str, expiration_time: float, signal: int = 0):
        super().__init__(worker_pid, scope_id, expiration_time)
        self.version = 1
        self.signal = signal

    @property
    def worker_pid(self) -> int:
        """The requesting process's pid (torch's name for ``worker_id`` here)."""
        return self.worker_id

    def to_json(self) -> str:
        """The request as the one-line JSON the FIFO carries, torch's field names."""
        return json.dumps({"version": self.version, "pid": self.worker_id, "scope_id": self.scope_id,
                           "expiration_time": self.expiration_time, "signal": self.signal})


class FileTimerClient(TimerClient):
    """Client of ``FileTimerServer``: writes requests to the FIFO at ``file_path`` (which the
    server created); ``signal`` is what the server reaps this process with (<= 0: never)."""

    def __init__(self, file_path: str, signal=signal.SIGKILL):
        super().__init__()
        self._file_path = file_path
        self.signal = signal
        self._lock = threading.Lock()

    def _send_request(self, request: FileTimerRequest) -> None:
        try:
            fd = os.open(self._file_path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno in (errno.ENXIO, errno.ENOENT):
                raise BrokenPipeError(f"Could not send the FileTimerRequest because the FileTimerServer is not "
                                      f"available at {self._file_path}") from None
            raise
        with self._lock:
            try:
                os.write(fd, (request.to_json() + "\n").encode())  # < PIPE_BUF bytes: one atomic write
            finally:
                os.close(fd)

    def acquire(self, scope_id: str, expiration_time: float) -> None:
        """Ask the server to kill this process with ``signal`` if ``scope_id`` is not released by ``expiration_time``
        (time.time() seconds)."""
        self._send_request(FileTimerRequest(os.getpid(), scope_id, expiration_time, int(self.signal)))

    def release(self, scope_id: str) -> None:
        """Cancel the timer of ``scope_id`` for this process."""
        self._send_request(FileTimerRequest(os.getpid(), scope_id, -1, 0))


class FileTimerServer:
    """Watchdog reading ``FileTimerClient`` requests from the FIFO it creates at ``file_path``;
    wakes at least every ``max_interval`` s. ``log_event(name, request)`` is called on each reap."""

    def __init__(self, file_path: str, max_interval: float = 10, daemon: bool = True,
                 log_event: Optional[Callable[[str, Optional[FileTimerRequest]], None]] = None):
        self._file_path = file_path
        self._max_interval = max_interval
        self._daemon = daemon
        self._timers: Dict[Tuple[int, str], FileTimerRequest] = {}
        self._lock = threading.Lock()  # the watchdog thread and the agent (clear_timers) share _timers
        self._stop_signaled = False
        self._watchdog_thread: Optional[threading.Thread] = None
        self._log_event = log_event or (lambda name, request: None)
        self._rfd: Optional[int] = None
        self._wfd: Optional[int] = None
        self._buf = b""

    @property
    def file_path(self) -> str:
        """The FIFO clients write requests to."""
        return self._file_path

    def start(self) -> None:
        """Create the FIFO and start the watchdog thread."""
        if os.path.exists(self._file_path):
            os.remove(self._file_path)
        os.mkfifo(self._file_path, 0o600)
        self._rfd = os.open(self._file_path, os.O_RDONLY | os.O_NONBLOCK)
        self._wfd = os.open(self._file_path, os.O_WRONLY | os.O_NONBLOCK)  # keeps the pipe open: no EOF
        self._stop_signaled = False
        self._watchdog_thread = threading.Thread(target=self._watchdog_loop, daemon=self._daemon,
                                                 name="file-timer-watchdog")
        self._watchdog_thread.start()

    def stop(self) -> None:
        """Stop the watchdog and remove the FIFO."""
        self._stop_signaled = True
        if self._watchdog_thread is not None:
            self._watchdog_thread.join(self._max_interval + 5)
            self._watchdog_thread = None
        for fd in (self._rfd, self._wfd):
            if fd is not None:
                os.close(fd)
        self._rfd = self._wfd = None
        try:
            os.remove(self._file_path)
        except FileNotFoundError:
            pass

    def _read_requests(self) -> List[FileTimerRequest]:
        ready, _, _ = select.select([self._rfd], [], [], self._max_interval)
        if not ready:
            return []
        try:
            self._buf += os.read(self._rfd, 1 << 16)
        except BlockingIOError:
            return []
        *lines, self._buf = self._buf.split(b"\n")
        out = []
        for line in lines:
            try:
                d = json.loads(line)
                out.append(FileTimerRequest(int(d["pid"]), str(d["scope_id"]), float(d["expiration_time"]),
                                            int(d.get("signal", 0))))
            except (ValueError, KeyError, TypeError) as e:
                log.warning("FileTimerServer: ignoring a malformed request %r: %s", line[:200], e)
        return out

    def register_timers(self, timer_requests: List[FileTimerRequest]) -> None:
        """Apply requests: a negative expiration releases the scope's timer, a client with signal <= 0 is never
        armed, others arm or replace it."""
        with self._lock:
            for request in timer_requests:
                key = (request.worker_id, request.scope_id)
                if request.expiration_time < 0:
                    self._timers.pop(key, None)
                elif request.signal > 0:  # a client with signal <= 0 is never killed
                    self._timers[key] = request

    def clear_timers(self, worker_pids: Set[int]) -> None:
        """Drop every timer of ``worker_pids`` (the agent calls it for workers it stopped, so a
        recycled pid is never signalled)."""
        with self._lock:
            for key in [k for k in self._timers if k[0] in worker_pids]:
                del self._timers[key]

    def get_expired_timers(self, deadline: float) -> Dict[int, List[FileTimerRequest]]:
        """pid -> the armed requests whose expiration time is at or before ``deadline``."""
        expired: Dict[int, List[FileTimerRequest]] = {}
        with self._lock:
            for request in self._timers.values():
                if request.expiration_time <= deadline:
                    expired.setdefault(request.worker_id, []).append(request)
        return expired

    def _watchdog_loop(self) -> None:
        while not self._stop_signaled:
            try:
                self.run_once()
            except Exception:
                log.exception("Error running the file timer watchdog")

    def run_once(self) -> None:
        """One watchdog round: read pending requests, kill each process with an expired timer (its request's signal),
        drop its timers."""
        self.register_timers(self._read_requests())
        reaped = set()
        for pid, expired in self.get_expired_timers(time.time()).items():
            log.info("Reaping worker_pid=[%s]. Expired timers: %s", pid, [t.scope_id for t in expired])
            try:
                os.kill(pid, expired[0].signal)
            except ProcessLookupError:
                pass
            except OSError:
                log.exception("Error terminating pid=%s", pid)
                continue
            self._log_event("timer expired", expired[0])
            reaped.add(pid)
        if reaped:
            self.clear_timers(reaped)
