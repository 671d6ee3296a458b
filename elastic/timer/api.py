"""Expiration timers: the client/server protocol (``torch.distributed.elastic.timer.api``).

It exists to unstick jobs: a worker wraps code that may hang in ``with expires(after=60):``;
its ``TimerClient`` tells a ``TimerServer`` (a watchdog thread in the agent's process) the
deadline, and the server reaps (kills) the worker if the scope is not released in time.
"""

from __future__ import annotations

import abc
import inspect
import logging
import threading
import time
from contextlib import contextmanager
from typing import Any, Dict, List, Optional, Set

__all__ = ["TimerRequest", "TimerClient", "RequestQueue", "TimerServer", "configure", "expires"]

log = logging.getLogger(__name__)


class TimerRequest:
    """Acquire (``expiration_time`` >= 0, seconds since the epoch) or release (negative) the timer
    ``scope_id`` of ``worker_id`` (whatever identifies a worker to the server: a pid here)."""

    __slots__ = ["worker_id", "scope_id", "expiration_time"]

    def __init__(self, worker_id: Any, scope_id: str, expiration_time: float):
        self.worker_id = worker_id
        self.scope_id = scope_id
        self.expiration_time = expiration_time

    def __eq__(self, other):
        return isinstance(other, TimerRequest) and (self.worker_id, self.scope_id, self.expiration_time) == (
            other.worker_id, other.scope_id, other.expiration_time)

    def __repr__(self):
        return f"TimerRequest(worker_id={self.worker_id!r}, scope_id={self.scope_id!r}, " \
               f"expiration_time={self.expiration_time!r})"


class TimerClient(abc.ABC):
    """Acquires and releases countdown timers by talking to its ``TimerServer``."""

    @abc.abstractmethod
    def acquire(self, scope_id: str, expiration_time: float) -> None:
        """Register the timer ``scope_id`` of this worker, expiring at ``expiration_time``."""

    @abc.abstractmethod
    def release(self, scope_id: str) -> None:
        """Release the timer ``scope_id`` of this worker."""


class RequestQueue(abc.ABC):
    """The server's view of the incoming requests."""

    @abc.abstractmethod
    def size(self) -> int:
        """Requests waiting now (a lower bound is fine)."""

    @abc.abstractmethod
    def get(self, size: int, timeout: float) -> List[TimerRequest]:
        """Up to ``size`` requests, blocking at most ``timeout`` s for the first."""


class TimerServer(abc.ABC):
    """Keeps the active timers and reaps the workers whose timers expired, from a watchdog
    thread waking at least every ``max_interval`` s."""

    def __init__(self, request_queue: RequestQueue, max_interval: float, daemon: bool = True):
        self._request_queue = request_queue
        self._max_interval = max_interval
        self._daemon = daemon
        self._watchdog_thread: Optional[threading.Thread] = None
        self._stop_signaled = False

    @abc.abstractmethod
    def register_timers(self, timer_requests: List[TimerRequest]) -> None:
        """Apply acquire and release (negative ``expiration_time``) requests."""

    @abc.abstractmethod
    def clear_timers(self, worker_ids: Set[Any]) -> None:
        """Drop every timer of ``worker_ids``."""

    @abc.abstractmethod
    def get_expired_timers(self, deadline: float) -> Dict[Any, List[TimerRequest]]:
        """Worker id -> its timers whose ``expiration_time`` <= ``deadline``."""

    @abc.abstractmethod
    def _reap_worker(self, worker_id: Any) -> bool:
        """Kill the worker; ``True`` when it is gone (its timers can be cleared)."""

    def _reap_worker_no_throw(self, worker_id: Any) -> bool:
        try:
            return self._reap_worker(worker_id)
        except Exception:
            log.exception("Uncaught exception thrown from _reap_worker, check that the implementation "
                          "correctly catches exceptions")
            return True

    def _watchdog_loop(self) -> None:
        while not self._stop_signaled:
            try:
                self._run_watchdog()
            except Exception:
                log.exception("Error running watchdog")

    def _run_watchdog(self) -> None:
        batch_size = max(1, self._request_queue.size())
        self.register_timers(self._request_queue.get(batch_size, self._max_interval))
        now = time.time()
        reaped = set()
        for worker_id, expired in self.get_expired_timers(now).items():
            log.info("Reaping worker_id=[%s]. Expired timers: %s", worker_id, [t.scope_id for t in expired])
            if self._reap_worker_no_throw(worker_id):
                reaped.add(worker_id)
        if reaped:
            self.clear_timers(reaped)

    def start(self) -> None:
        """Start the watchdog thread (non-blocking)."""
        self._stop_signaled = False
        self._watchdog_thread = threading.Thread(target=self._watchdog_loop, daemon=self._daemon,
                                                 name="timer-watchdog")
        self._watchdog_thread.start()

    def stop(self) -> None:
        """Stop the watchdog thread (it finishes its current wait of at most ``max_interval`` s)."""
        self._stop_signaled = True
        if self._watchdog_thread is not None:
            self._watchdog_thread.join(self._max_interval + 5)
            self._watchdog_thread = None


_timer_client: Optional[TimerClient] = None


def configure(timer_client: TimerClient) -> None:
    """Set the process's default timer client (call it before ``expires``)."""
    global _timer_client
    _timer_client = timer_client


@contextmanager
def expires(after: float, scope: Optional[str] = None, client: Optional[TimerClient] = None):
    """Acquire a timer expiring ``after`` s from now for the ``with`` block; released at its end.
    Past the deadline the worker is *eligible* to be reaped by the server."""
    if client is None:
        if _timer_client is None:
            raise RuntimeError("Configure timer client before using countdown timers.")
        client = _timer_client
    if scope is None:
        caller = inspect.getframeinfo(inspect.currentframe().f_back.f_back)  # type: ignore[union-attr]
        scope = f"{caller.filename}#{caller.lineno}"
    client.acquire(scope, time.time() + after)
    try:
        yield
    finally:
        client.release(scope)
