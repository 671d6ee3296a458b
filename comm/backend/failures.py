"""What a process group does when something breaks, and how it says so.

Why this module exists: failure is final and loud, and its rules are the same whichever
socket or operation hit it. A peer that closes its socket, a header that does not match,
or a deadline that passes poisons the engine: the reason goes, in band, to every peer whose
stream is at a message boundary (an ABORT header plus the text), and every pending and
later operation raises naming the root cause. The reason also goes to the store (the
first one wins, and is added to every later rank's error), outside the engine lock and
only within what is left of the operation's timeout (the store's host may be the process
that hung; no wait may outlast the timeout). Then all sockets close, which makes every
other rank fail fast instead of waiting for its timeout; closing after the report means a
rank that only sees our sockets close finds our cause already recorded as the first.

Here: the texts (:func:`peer_error`, :func:`mismatch`, :func:`timeout_message`, reading a
peer's ABORT reason) and :class:`FailureState`, the engine's first error and its pending
report to the store. Closing the sockets is :mod:`.peer_io`'s part; failing the open works
is :mod:`tritensor.comm.work`'s; :class:`~.transport.Engine` composes them in :meth:`~.transport.Engine._fail`.
"""

from __future__ import annotations

import select
import socket
import time

from ..errors import DistBackendError
from .framing import (ABORT, BYE, DATA, DATA_MAGIC, DTYPE_NAMES, OP_NAMES, P2P, ROOTED, describe_data_header,
                      pack_data_header, redop_name)

__all__ = ["FailureState", "REPORT_TIMEOUT", "MAX_REASON", "abort_notice", "mismatch", "peer_error",
           "pending_abort", "read_reason", "timeout_message"]

HDR = DATA.size
MAX_REASON = 4096
REPORT_TIMEOUT = 2.0  # at most this long (and never past the operation's deadline) to report a failure


# --------------------------------------------------------------------- in-band abort notices


def abort_notice(exc: BaseException) -> bytes:
    """The ABORT message telling a peer why this rank gave up: header + UTF-8 reason."""
    reason = str(exc).encode("utf-8", "replace")[:MAX_REASON]
    return pack_data_header(ABORT, 0, 0, 0, 0, 0, len(reason)) + reason


def read_reason(p, nbytes: int, have: bytes) -> str:
    """The rest of peer ``p``'s ABORT reason: whatever is already there, never blocking long."""
    want = min(nbytes, MAX_REASON)
    data = bytearray(have[:want])
    deadline = time.monotonic() + 0.5
    while len(data) < want and time.monotonic() < deadline:
        try:
            chunk = p.sock.recv(want - len(data))
        except (BlockingIOError, InterruptedError):
            select.select([p.sock], [], [], max(0.0, deadline - time.monotonic()))
            continue
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace") or "(no reason given)"


def pending_abort(p) -> str | None:
    """Peer ``p``'s ABORT notice, if one waits unread where our next header would start.

    A send can fail (broken pipe) before we read what the peer said on its way out."""
    if p.sock is None or p.shpos or (p.recvq and p.recvq[0].hpos > 0):
        return None
    try:
        data = p.sock.recv(HDR, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except OSError:
        return None
    if len(data) < HDR or data[:2] != DATA_MAGIC or DATA.unpack(data)[2] != ABORT:
        return None
    try:
        p.sock.recv(HDR)
    except OSError:
        return None
    return read_reason(p, DATA.unpack(data)[9], b"")


# -------------------------------------------------------------------------- error texts


def peer_error(p, err, doing: str, what: str) -> DistBackendError:
    """The error for peer ``p``'s connection failing (``err``; None: closed) while ``doing``
    ("sending", "receiving", "idle"); ``what`` names the operation this rank is in ("" if none)."""
    notice = pending_abort(p)
    if notice is not None:
        msg = f"{p.name()} aborted the group: {notice}"
    elif p.left:
        msg = f"{p.name()} has left the group (destroy_process_group)"
    elif err is None:
        msg = f"{p.name()} closed its connection"
    elif doing == "idle":
        # Nothing was expected from this peer right now; but this rank may well be inside an
        # operation (waiting on other peers), which `what` names.
        msg = f"connection to {p.name()} failed{'' if what else ' while the group was idle'}: {err}"
    else:
        msg = f"connection to {p.name()} failed while {doing}: {err}"
    return DistBackendError(f"{what}: {msg}" if what else msg)


def mismatch(p, req, global_rank: int, have: bytes = b"") -> DistBackendError:
    """The error for a header from ``p`` that is not the one ``req`` expects, saying how they differ."""
    got = DATA.unpack(bytes(req.hdr))
    exp = DATA.unpack(req.expect)
    me = f"this rank ({global_rank})"
    if got[0] != DATA_MAGIC or got[1] != exp[1]:
        return DistBackendError(f"{req.work.what}: {p.name()} sent bytes that are not a tritensor message "
                                "header (protocol desynchronised)")
    if got[2] == ABORT:
        return DistBackendError(f"{req.work.what}: {p.name()} aborted the group: "
                                f"{read_reason(p, got[9], have)}")
    if got[2] == BYE:
        return DistBackendError(f"{req.work.what}: {p.name()} left the group (destroy_process_group) "
                                "while this rank still expected data from it")
    g_op, e_op = got[2], exp[2]
    if g_op != e_op or got[7] != exp[7]:
        return DistBackendError(
            f"{req.work.what}: ranks disagree on the order of operations: {p.name()} is at "
            f"{OP_NAMES.get(g_op, g_op)} #{got[7]} while {me} is at {OP_NAMES.get(e_op, e_op)} #{exp[7]}")
    if got[5] != exp[5] and g_op in ROOTED:
        side = ROOTED[g_op]
        return DistBackendError(
            f"{req.work.what}: ranks disagree on the {side} of {OP_NAMES[g_op]}: {p.name()} named "
            f"{side}={got[5]}, {me} named {side}={exp[5]}")
    gdt, edt = DTYPE_NAMES.get(got[3], got[3]), DTYPE_NAMES.get(exp[3], exp[3])
    if got[3] != exp[3] or got[8] != exp[8]:
        return DistBackendError(
            f"{req.work.what}: tensor sizes or dtypes disagree across ranks: {p.name()} has "
            f"{got[8]} elements of {gdt}, {me} has {exp[8]} elements of {edt}")
    if got[4] != exp[4]:
        return DistBackendError(f"{req.work.what}: ranks use different reduce ops "
                                f"({p.name()}: {redop_name(got[4])}, {me}: {redop_name(exp[4])})")
    if got[6] != exp[6] and g_op == P2P:
        return DistBackendError(f"{req.work.what}: {p.name()} sent tag {got[6]} but this rank "
                                f"receives tag {exp[6]} (messages between two ranks match in order)")
    return DistBackendError(f"{req.work.what}: unexpected message from {p.name()}: "
                            f"got {describe_data_header(got)}, expected {describe_data_header(exp)}")


def timeout_message(work, anyq, peers) -> str:
    """What ``work`` was still waiting for, and from whom, when its deadline passed."""
    waits = [f"to receive {a.describe()}" for a in anyq if a.work is work]
    for p in peers.values():
        r = next((r for r in p.recvq if r.work is work), None)
        if r is not None:
            waits.append(f"to receive {r.tlen - r.tpos + HDR - r.hpos} more bytes from {p.name()}")
        s = next((s for s in p.sendq if s.work is work), None)
        if s is not None:
            waits.append(f"to send {sum(b.nbytes for b in s.bufs)} bytes to {p.name()}"
                         + ("" if s.ready else " (waiting for earlier data)"))
    detail = "; ".join(waits[:4]) or "for the operation to complete"
    return f"{work.what} timed out: still waiting {detail}"


# ------------------------------------------------------------------------- failure state


class FailureState:
    """An engine's first error (which makes it unusable) and its report to the store.

    ``report_failure(text, budget) -> first text recorded in the group, or None`` is the
    process group's store call; None for an engine without a store (tests)."""

    def __init__(self, report_failure=None):
        self.error: BaseException | None = None
        self._report_failure = report_failure
        self._report = None  # (error, deadline) still to report to the store, outside the lock
        self.reporting = False  # a thread is reporting right now

    @property
    def reports(self) -> bool:
        """Whether a failure is reported to the group's store (an engine with a store; tests run without)."""
        return self._report_failure is not None

    def record(self, exc: BaseException, deadline: float | None) -> bool:
        """Keep ``exc`` as the engine's error unless one is already kept (lock held); True if it is the first."""
        if self.error is not None:
            return False
        if self._report_failure is not None:
            self._report = (exc, deadline)
        self.error = exc
        return True

    def check_usable(self, what: str) -> None:
        """Raise the engine's first error again, naming ``what``, once the group has failed: a failed group
        refuses later collectives, as torch's do."""
        if self.error is not None:
            raise type(self.error)(f"{what}: the process group is unusable after an earlier failure: {self.error}")

    @property
    def report_due(self) -> bool:
        """Whether a recorded failure still waits to be reported to the store."""
        return self._report is not None

    def report(self, lock) -> None:
        """Tell the store why the engine failed (outside ``lock``: the store's host may be hung).

        Waits at most until the failed operation's deadline (and REPORT_TIMEOUT); a report
        still under way then goes on in the background. When another rank's failure was
        recorded first, the error's text says so."""
        with lock:
            pending, self._report = self._report, None
            if pending is None:
                return
            self.reporting = True
        exc, deadline = pending
        budget = max(0.0, min(REPORT_TIMEOUT, deadline - time.monotonic()))
        try:
            first = self._report_failure(str(exc), budget)
        except Exception:  # the store may be gone with the rank that hosted it
            first = None
        finally:
            with lock:
                self.reporting = False
        if first and first != str(exc) and exc.args:
            exc.args = (f"{exc}\n  first failure reported in this group: {first}",) + exc.args[1:]
