"""Timers over a ``multiprocessing`` queue: ``LocalTimerServer`` in the parent, ``LocalTimerClient``
in its worker processes (workers are known by pid; an expired worker gets ``SIGKILL``)."""

from __future__ import annotations

import logging
import os
import queue
import signal
import time
from typing import Any, Dict, List, Set, Tuple

from .api import RequestQueue, TimerClient, TimerRequest, TimerServer

__all__ = ["LocalTimerClient", "LocalTimerServer", "MultiprocessingRequestQueue"]

log = logging.getLogger(__name__)


class LocalTimerClient(TimerClient):
    """Client of ``LocalTimerServer``: sends this process's pid with each request."""

    def __init__(self, mp_queue):
        super().__init__()
        self._mp_queue = mp_queue

    def acquire(self, scope_id, expiration_time):
        """Ask the server to reap this process if ``scope_id`` is not released by ``expiration_time`` (time.time()
        seconds)."""
        self._mp_queue.put(TimerRequest(os.getpid(), scope_id, expiration_time), block=True)

    def release(self, scope_id):
        """Cancel the timer of ``scope_id`` for this process."""
        self._mp_queue.put(TimerRequest(os.getpid(), scope_id, -1), block=True)


class MultiprocessingRequestQueue(RequestQueue):
    """A ``RequestQueue`` over a ``multiprocessing.Queue``."""

    def __init__(self, mp_queue):
        super().__init__()
        self._mp_queue = mp_queue

    def size(self) -> int:
        """The number of queued requests (1 where the platform cannot tell, so the server still reads)."""
        try:
            return self._mp_queue.qsize()
        except NotImplementedError:  # macOS
            return 1

    def get(self, size, timeout: float) -> List[TimerRequest]:
        """Up to ``size`` requests, waiting at most ``timeout`` s in all."""
        requests = []
        wait = timeout
        for _ in range(size):
            start = time.time()
            try:
                r = self._mp_queue.get(block=True, timeout=wait)
            except queue.Empty:
                break
            requests.append(r)
            wait = max(0.0, wait - (time.time() - start))
        return requests


class LocalTimerServer(TimerServer):
    """Server of ``LocalTimerClient``s: the parent of the workers, one per host."""

    def __init__(self, mp_queue, max_interval: float = 60, daemon: bool = True):
        super().__init__(MultiprocessingRequestQueue(mp_queue), max_interval, daemon)
        self._timers: Dict[Tuple[Any, str], TimerRequest] = {}

    def register_timers(self, timer_requests: List[TimerRequest]) -> None:
        """Apply requests: a negative expiration releases the scope's timer, others arm or replace it."""
        for request in timer_requests:
            key = (request.worker_id, request.scope_id)
            if request.expiration_time < 0:
                self._timers.pop(key, None)
            else:
                self._timers[key] = request

    def clear_timers(self, worker_ids: Set[int]) -> None:
        """Drop every timer of the given workers (after they are reaped)."""
        for key in [k for k in self._timers if k[0] in worker_ids]:
            del self._timers[key]

    def get_expired_timers(self, deadline: float) -> Dict[Any, List[TimerRequest]]:
        """worker -> the requests whose expiration time is at or before ``deadline``."""
        expired: Dict[Any, List[TimerRequest]] = {}
        for request in self._timers.values():
            if request.expiration_time <= deadline:
                expired.setdefault(request.worker_id, []).append(request)
        return expired

    def _reap_worker(self, worker_id: int) -> bool:
        try:
            os.kill(worker_id, signal.SIGKILL)
            return True
        except ProcessLookupError:
            log.info("Process with pid=%s does not exist. Skipping", worker_id)
            return True
        except Exception:
            log.exception("Error terminating pid=%s", worker_id)
        return False
