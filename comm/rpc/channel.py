"""Control messages of the RRef protocol: re-sent until acknowledged, handled idempotently.

Why: the seed assumes transient network failures (a message may be lost), out-of-order
delivery and duplicates. This channel gives each control message an id, keeps it until the
receiver's ``RREF_ACK`` for that id arrives and re-sends it with exponential back-off
(``base_delay`` doubling up to ``max_delay``) at most ``max_attempts`` times; a message that
exhausts its attempts is recorded in :attr:`failures` (and reported by the leak check) instead
of being retried forever. Receivers acknowledge *every* copy they get, and the handlers
behind the channel (:class:`~.rref_context.RRefContext`) are idempotent, so a duplicate or a
retry of an already-processed message changes nothing.

The channel owns no socket and no thread: ``transmit(dst, frame)`` hands a frame to the
network (the agent's sockets, or the model check's simulated network); ``transmit_later``,
when given, takes the frames nothing waits for (:data:`DEFERRABLE` messages and their ACKs:
their only effect is bookkeeping), which the agent lets ride with its next frame to that
worker or its next timer tick instead of waking a thread for each; ``clock()`` tells the
time, and whoever drives it calls :meth:`tick` now and then (the agent's housekeeping thread;
the model check's scheduler, on a virtual clock). The optional
:class:`~.faults.FaultInjector` decides, per transmission, whether a copy is dropped,
delayed, duplicated or reordered; delayed copies wait in a heap until :meth:`tick`.

Frames are tuples: ``("ctl", msg_id, mtype, payload)`` and ``("ack", msg_id)``.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading

__all__ = ["ControlChannel", "DEFERRABLE"]

log = logging.getLogger(__name__)

# Messages (and ACKs of messages) that no call waits for: a REMOTE_RET only lets its user be
# deleted later, a CHILD_ACCEPT lets a parent go, a USER_DELETE frees an owner's value. An
# RREF_FORK_REQUEST is not among them: the call carrying the fork runs once it is acknowledged.
DEFERRABLE = frozenset({"REMOTE_RET", "RREF_CHILD_ACCEPT", "RREF_USER_DELETE"})


class ControlChannel:
    """RRef control messages between workers, delivered at least once: each is resent with backoff until
    acknowledged, and handled idempotently by the receiver."""
    def __init__(self, me: int, transmit, clock, handler=None, injector=None, *, base_delay: float = 0.05,
                 max_delay: float = 1.0, max_attempts: int = 30, recorder=None, transmit_later=None):
        self.me = me
        self._transmit = transmit
        self._transmit_later = transmit_later or transmit
        self._clock = clock
        self.handler = handler  # handler(src, mtype, payload): must be idempotent
        self.injector = injector
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.max_attempts = max_attempts
        self.recorder = recorder  # recorder(event, src, dst, mtype, payload) for tests, or None
        self.failures: list = []  # (dst, mtype, payload) given up on
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._unacked: dict = {}  # msg_id -> [dst, frame, attempts, due, delay, on_ack]
        self._delayed: list = []  # heap of (due, seq, dst, frame)
        self._seq = itertools.count()

    # -- sending ---------------------------------------------------------------------
    def send(self, dst: int, mtype: str, payload, on_ack=None) -> int:
        """Send a control message; ``on_ack()`` runs once, when the first acknowledgement arrives."""
        with self._lock:
            msg_id = (self.me, next(self._ids))
            frame = ("ctl", msg_id, mtype, payload)
            self._unacked[msg_id] = [dst, frame, 1, self._clock() + self.base_delay, self.base_delay, on_ack]
        if self.recorder:
            self.recorder("send", self.me, dst, mtype, payload)
        self._emit(dst, frame, mtype, msg_id, mtype in DEFERRABLE)
        return msg_id

    def _emit(self, dst, frame, mtype, key, later=False) -> None:
        plan = self.injector.plan(mtype, key) if self.injector is not None else [0.0]
        now = None
        for d in plan:
            if d <= 0:
                self._safe_transmit(dst, frame, later)
            else:
                now = self._clock() if now is None else now
                with self._lock:
                    heapq.heappush(self._delayed, (now + d, next(self._seq), dst, frame))

    def _safe_transmit(self, dst, frame, later=False) -> None:
        try:
            (self._transmit_later if later else self._transmit)(dst, frame)
        except Exception as e:  # a transient failure: the retry timer sends it again
            log.debug("control frame to worker %s not sent (%s); will retry", dst, e)

    # -- receiving -------------------------------------------------------------------
    def on_frame(self, src: int, frame) -> None:
        """Handle a frame from worker ``src`` (any copy, any order)."""
        if frame[0] == "ctl":
            _, msg_id, mtype, payload = frame
            if self.recorder:
                self.recorder("recv", src, self.me, mtype, payload)
            self.handler(src, mtype, payload)
            self._emit(src, ("ack", msg_id), "RREF_ACK", ("ack", msg_id), mtype in DEFERRABLE)
        elif frame[0] == "ack":
            with self._lock:
                entry = self._unacked.pop(frame[1], None)
            if entry is not None and entry[5] is not None:
                entry[5]()
        else:
            raise ValueError(f"unknown control frame kind {frame[0]!r}")

    # -- timers ----------------------------------------------------------------------
    def tick(self) -> None:
        """Hand due delayed copies to the network and retry unacknowledged messages."""
        now = self._clock()
        out, given_up = [], []
        with self._lock:
            while self._delayed and self._delayed[0][0] <= now:
                _, _, dst, frame = heapq.heappop(self._delayed)
                out.append((dst, frame, None))
            for msg_id, e in list(self._unacked.items()):
                if e[3] > now:
                    continue
                if e[2] >= self.max_attempts:
                    del self._unacked[msg_id]
                    given_up.append(e)
                    continue
                e[2] += 1
                e[4] = min(e[4] * 2, self.max_delay)
                e[3] = now + e[4]
                out.append((e[0], e[1], msg_id))
        for dst, frame, msg_id in out:
            if msg_id is None:
                self._safe_transmit(dst, frame)
            else:
                self._emit(dst, frame, frame[2], msg_id)
        for e in given_up:
            mtype, payload = e[1][2], e[1][3]
            log.error("RRef control message %s to worker %s not acknowledged after %d attempts", mtype, e[0], e[2])
            self.failures.append((e[0], mtype, payload))

    def next_due(self):
        """The earliest time :meth:`tick` has something to do, or None."""
        with self._lock:
            times = [e[3] for e in self._unacked.values()]
            if self._delayed:
                times.append(self._delayed[0][0])
        return min(times) if times else None

    def pending(self) -> int:
        """Messages sent and not yet acknowledged, plus copies waiting out a delay."""
        with self._lock:
            return len(self._unacked) + len(self._delayed)
