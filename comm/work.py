"""Operations in flight: :class:`Work` handles and the engine's bookkeeping of them.

Why this module exists: what an operation *is* (its deadline, how many of its sends and
receives are still pending, the finalizers that run after its last byte, its Future, the
plan it keeps alive) is independent of how bytes move (the tcp backend's
:mod:`.backend.peer_io`) and of what happens when something breaks (:mod:`.backend.failures`);
every backend returns these handles (:mod:`.backend_api`). ``engine`` is whatever drives the
backend's operations while a caller waits: an object with ``wait(work, deadline)``.
:class:`WorkTracker` holds the engine's open operations and completes them; the tcp
backend's :class:`~.backend.transport.Engine` composes the three.

Completion happens in two steps, because user callbacks may call collectives: under the
engine lock a finished work is marked done and queued (:meth:`WorkTracker.completed`);
outside the lock its Future is set (:meth:`WorkTracker.deliver`).
"""

from __future__ import annotations

import collections
import time

from ..futures import Future

__all__ = ["Work", "WorkTracker"]


class Work:
    """Handle of one operation, as torch.distributed's ``Work``: wait, is_completed, get_future."""

    def __init__(self, engine, tracker: "WorkTracker", what: str, deadline: float, result=None):
        self._engine = engine  # drives the sockets while we wait (Engine.wait)
        self._tracker = tracker  # told when we complete
        self.what = what  # e.g. "all_reduce #12"
        self.deadline = deadline
        self._pending = 0
        self._finalizers: list = []
        self._done = False
        self._exc: BaseException | None = None
        self._result = result  # the value of get_future(): the output tensors
        self._future = Future(name=what)
        self._keep = None  # what the operation reads and writes (its plan): held until it completes
        # Receives: the sender's group rank; -1 for an any-source receive until it matches.
        self._source = None

    # torch.distributed.Work API ----------------------------------------------------
    def is_completed(self) -> bool:
        """torch's Work.is_completed: whether the operation has finished, successfully or not."""
        return self._done

    def is_success(self) -> bool:
        """torch's Work.is_success: whether it finished without error."""
        return self._done and self._exc is None

    def exception(self):
        """torch's Work.exception: the error it failed with, or None."""
        return self._exc

    def wait(self, timeout=None) -> bool:
        """Block until the operation finished (driving the sockets meanwhile); raise on failure.

        ``timeout`` (seconds or timedelta) shortens the operation's own deadline; when it
        passes, the operation fails and the group becomes unusable, as in torch."""
        deadline = self.deadline
        if timeout is not None:
            secs = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
            deadline = min(deadline, time.monotonic() + secs)
        self._engine.wait(self, deadline)  # returns at once when done; completes the futures
        self._future.wait()  # set right after completion, maybe by another thread
        if self._exc is not None:
            raise self._exc
        return True

    def get_future(self) -> Future:
        """torch's Work.get_future: a Future completed with the result when the operation is."""
        return self._future

    def _source_rank(self) -> int:
        """Group rank a completed receive got its message from, as torch's ``Work._source_rank()``
        (``recv(src=None)`` turns it into a global rank)."""
        if self._source is None:
            raise RuntimeError(f"{self.what}: _source_rank() is only defined for receives")
        if not self.is_success():
            raise RuntimeError(f"{self.what}: _source_rank() needs a receive that completed; call wait() first")
        return self._source

    def result(self):
        """torch's Work.result: wait, then the output tensors."""
        self.wait()
        return self._result

    def __repr__(self):
        state = "pending" if not self._done else ("failed" if self._exc else "completed")
        return f"<Work {self.what} {state}>"

    def _finish(self):
        """Called when no request is pending: run finalizers, then complete."""
        while self._finalizers:
            fn = self._finalizers.pop(0)
            fn()
            if self._pending:  # a finalizer posted another phase
                return
        self._done = True
        self._tracker.completed(self)


class WorkTracker:
    """The open operations of one engine, and the ones whose Futures are still to be set.

    Every method but :meth:`deliver` runs with the engine lock held (``cond`` is the
    engine's condition, notified whenever a work completes)."""

    def __init__(self, cond):
        self._cond = cond
        self.open: set[Work] = set()
        # Asynchronous works nobody waits for yet: the engine's background thread drives them.
        self.background: collections.deque[Work] = collections.deque()
        self._notify: list[Work] = []

    def new(self, engine, what: str, timeout: float, result=None) -> Work:
        """A new Work for ``what`` with a deadline ``timeout`` seconds from now, tracked until it completes."""
        w = Work(engine, self, what, time.monotonic() + timeout, result)
        self.open.add(w)
        return w

    def request_done(self, req) -> None:
        """One send or receive of ``req.work`` has moved its last byte."""
        if req.on_done is not None:
            req.on_done()
        work = req.work
        work._pending -= 1
        if work._pending == 0 and not work._done:
            work._finish()

    def completed(self, work: Work) -> None:
        """Stop tracking ``work``, drop its hold on the caller's tensors, and queue its notifications."""
        work._keep = None  # done or failed: nothing reads the caller's tensors any more
        self.open.discard(work)
        self._notify.append(work)
        self._cond.notify_all()

    def complete(self, work: Work, exc: BaseException | None = None) -> None:
        """Mark ``work`` done (failed with ``exc`` when given): for a backend that completes each
        operation as a whole, with no requests to count (its Futures still go through
        :meth:`take_completed` and :meth:`deliver`)."""
        if not work._done:
            work._exc = exc
            work._done = True
            self.completed(work)

    def fail_all(self, exc_for) -> None:
        """Complete every open work with the error ``exc_for(work)``."""
        for w in list(self.open):
            if not w._done:
                w._exc = exc_for(w)
                w._done = True
                self.completed(w)

    def earliest_deadline(self, default: float) -> float:
        """The nearest deadline of an unfinished Work (``default`` when none): when the I/O thread must next
        wake."""
        return min((w.deadline for w in self.open if not w._done), default=default)

    def any_what(self) -> str:
        """The name of some open work ("" when none): what this rank is busy with."""
        for w in self.open:
            return w.what
        return ""

    def take_completed(self) -> list[Work]:
        """The Works completed since the last call, their notifications delivered outside the lock."""
        done, self._notify = self._notify, []
        return done

    @staticmethod
    def deliver(done: list[Work]) -> None:
        """Set the Futures of completed works (outside the lock: callbacks may call collectives)."""
        for w in done:
            if w._exc is not None:
                w._future.set_exception(w._exc)
            else:
                w._future.set_result(w._result)
