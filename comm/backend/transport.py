"""The engine of a process group: one object that posts, drives and fails its operations.

Why this shape:

* **One authenticated connection per pair of ranks**, set up by :func:`.mesh.connect_mesh`
  (a Unix-domain socket between ranks on one machine, TCP otherwise); the engine only
  moves bytes over them.
* **Everything is posted, in program order.** An operation (a :class:`~tritensor.comm.work.Work`) posts
  all of its sends and receives up front, per peer, in the order both sides compute from
  the same plan; a send whose data is not ready yet (a ring step waiting for a reduction)
  is posted as a placeholder and marked ready later. So the byte stream between two ranks
  is always in program order, asynchronous operations never interleave wrongly, and
  ``isend`` and ``irecv`` between the same pair progress together instead of deadlocking.
* **One non-blocking engine drives every socket** with ``poll``: full-duplex send and
  receive from a single thread, no helper thread per peer and no GIL ping-pong. The
  thread that waits for an operation drives the engine itself (no hand-off, which keeps
  small-message latency low); a background thread drives only while asynchronous work is
  outstanding and nobody else is driving.
* **Headers are checked before any payload byte lands**, and receives from any rank are
  matched as in MPI (:mod:`.peer_io`).
* **Failure is final and loud** (:mod:`.failures`): the reason goes in band to every peer,
  all sockets close, every pending and later operation raises naming the root cause, and
  the store hears it outside the engine lock, within what is left of the timeout.

:class:`Engine` composes three parts, each in its own module: :class:`~.peer_io.PeerIO`
(the sockets and the poll loop), :class:`~tritensor.comm.work.WorkTracker` (open operations, completion,
Futures) and :class:`~.failures.FailureState` (the first error and its report to the
store). The engine adds the lock, which thread drives, deadlines, and the background
thread. Peer sockets on one host are Unix-domain sockets; abort notices travel in band.
"""

from __future__ import annotations

import logging
import threading
import time

from ..errors import DistBackendError, DistNetworkError, DistTimeoutError
from ..work import Work, WorkTracker
from .failures import REPORT_TIMEOUT, FailureState, abort_notice, timeout_message
from .framing import ABORT
from .peer import Peer
from .peer_io import PeerIO

__all__ = ["Engine"]

log = logging.getLogger(__name__)


class Engine:
    """Posts operations' requests, drives the sockets while someone waits, fails loudly.

    ``report_failure(text, budget)`` tells the store about this group's failure (see
    :class:`~.failures.FailureState`); ``group_desc`` names the background thread."""

    def __init__(self, rank: int, global_rank: int, peers: dict, report_failure=None,
                 group_desc: str = "process group"):
        self.rank = rank
        self.global_rank = global_rank
        self.group_desc = group_desc
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self.works = WorkTracker(self._cond)
        self.failures = FailureState(report_failure)
        self.io = PeerIO(global_rank, peers, self.works.request_done, self.works.any_what)
        self.peers: dict[int, Peer] = peers
        self._driver = None  # the thread inside io.drive, if any
        self._closed = False
        self._bg = None

    # -- posting (caller holds the lock: use `with engine.posting():`) ----------------
    def posting(self):
        """A context in which a collective posts its sends and receives; the I/O thread starts on them when it
        ends."""
        return _Posting(self)

    def new_work(self, what: str, timeout: float, result=None) -> Work:
        """A Work for a new operation ``what`` with ``timeout`` seconds; refused once the group has failed or
        been destroyed."""
        self.failures.check_usable(what)
        if self._closed:
            raise DistBackendError(f"{what}: the process group has been destroyed")
        return self.works.new(self, what, timeout, result)

    def send(self, work: Work, peer: int, header: bytes, payload=None, ready=True, on_done=None):
        """Queue a message to ``peer`` for ``work`` (PeerIO.send)."""
        return self.io.send(work, peer, header, payload, ready, on_done)

    def recv(self, work: Work, peer: int, expect: bytes, target=None, on_done=None, p2p=False):
        """Expect a message from ``peer`` for ``work`` (PeerIO.recv)."""
        return self.io.recv(work, peer, expect, target, on_done, p2p)

    def recv_any(self, work: Work, expect: bytes, target=None, on_done=None):
        """Post a send/recv receive that takes a message from whichever peer (see :mod:`.peer_io`)."""
        return self.io.recv_any(work, expect, target, on_done)

    def finish_posting(self, work: Work, async_op: bool):
        """After posting: complete a Work with nothing to transfer at once; a blocking call waits for it here."""
        if work._pending == 0 and not work._done:
            work._finish()
        if async_op and not work._done:
            self.works.background.append(work)
            self._ensure_bg()
            self._cond.notify_all()
        self._wake()

    def _wake(self):
        """Interrupt the driving thread's poll (from any other thread, lock held)."""
        if self._driver is not None and self._driver != threading.get_ident():
            self.io.wake()

    def mark_ready(self, reqs):
        """From a helper thread: placeholders whose data is now in place may be sent.

        Lock-free on purpose: the driver may be inside a callback that waits for this
        helper's next step while holding the lock."""
        self.io.mark_ready(reqs)

    def fail_from_thread(self, exc: BaseException):
        """From a helper thread: fail the group (e.g. a device copy failed)."""
        with self._cond:
            self._fail(exc)
            self._wake()
        self._report_then_close()

    # -- waiting and driving -------------------------------------------------------------
    def wait(self, work: Work, deadline: float):
        """Block until ``work`` is done or ``deadline`` (monotonic) passes, then deliver the completion
        notifications."""
        with self._cond:
            self._wait_locked(work, deadline)
        self._flush_notifications()

    def _wait_locked(self, work: Work, deadline: float):
        me = threading.get_ident()
        while not work._done:
            now = time.monotonic()
            if now >= deadline:
                self._fail(DistTimeoutError(timeout_message(work, self.io.anyq, self.peers)), deadline)
                break
            if self._driver is None:
                self._driver = me
                try:
                    self.io.drive(work, deadline, self._lock)
                except (DistBackendError, DistNetworkError) as e:
                    self._fail(e, deadline)
                except Exception as e:  # a bug or a numpy error inside a reduction
                    self._fail(DistBackendError(f"{work.what}: {type(e).__name__}: {e}"), deadline)
                    log.exception("error while progressing %s", work.what)
                finally:
                    self._driver = None
                    self._cond.notify_all()
            else:
                self._cond.wait(deadline - now)

    def _ensure_bg(self):
        if self._bg is None:
            self._bg = threading.Thread(target=self._bg_loop, name=f"tritensor-comm-{self.group_desc}", daemon=True)
            self._bg.start()

    def _bg_loop(self):
        """Drive asynchronous work that nobody is waiting for yet."""
        pending = self.works.background
        while True:
            with self._cond:
                while pending and pending[0]._done:
                    pending.popleft()
                if self._closed and not pending:
                    return
                if not pending:
                    self._cond.wait()
                    continue
                w = pending[0]
                self._wait_locked(w, w.deadline)
            self._flush_notifications()

    def _flush_notifications(self):
        """Complete futures outside the lock (user callbacks may call collectives); report a
        failure to the store first, so that the errors they see name the first failure."""
        self._report_then_close()
        with self._lock:
            done = self.works.take_completed()
        WorkTracker.deliver(done)

    # -- failure and shutdown --------------------------------------------------------------
    def _fail(self, exc: BaseException, deadline: float | None = None):
        """Poison the engine: send ABORT notices, fail every pending work (lock held).

        With a store, the sockets close only after the store has heard why, outside the lock
        (:meth:`_report_then_close`, within what is left until ``deadline``, by default the
        earliest deadline of the failed works). A peer that sees our sockets close then finds
        our report already recorded as the group's first failure, so its error names the root
        cause: when rank 2 dies mid-ring, rank 1 reads "rank 0 closed its connection" plus
        "first failure: rank 2 ...", not rank 0 alone (CI saw that order race)."""
        if self.failures.error is not None:
            return
        if deadline is None and self.failures.reports:
            deadline = self.works.earliest_deadline(default=time.monotonic() + REPORT_TIMEOUT)
        self.failures.record(exc, deadline)
        log.debug("process group failed: %s", exc)
        self.io.abort(abort_notice(exc), close=not self.failures.reports)
        self.works.fail_all(lambda w: exc)
        self._cond.notify_all()

    def _report_then_close(self):
        """Outside the lock: tell the store why this engine failed, then close its sockets."""
        if self.failures.report_due:
            self.failures.report(self._lock)
        if self.failures.error is not None:
            with self._lock:
                # a report not yet taken, or under way in another thread: that thread closes after it
                if not self.failures.report_due and not self.failures.reporting:
                    self.io.close_all()  # idempotent: closed sockets are skipped

    def shutdown(self):
        """Say goodbye to every peer and close (destroy_process_group)."""
        with self._cond:
            self._closed = True
            self.io.say_goodbye(bye=self.failures.error is None)
            self.works.fail_all(lambda w: DistBackendError(f"{w.what}: the process group was destroyed"))
            self._cond.notify_all()
        self._flush_notifications()
        self.io.wake()
        if self._bg is not None and self._bg is not threading.current_thread():
            self._bg.join(timeout=5)
        self.io.close_wake_pipe()


class _Posting:
    """``with engine.posting():`` holds the engine lock while an operation posts its requests."""

    __slots__ = ("engine",)

    def __init__(self, engine):
        self.engine = engine

    def __enter__(self):
        self.engine._lock.acquire()
        return self.engine

    def __exit__(self, *exc):
        self.engine._lock.release()
