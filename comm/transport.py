"""Peer sockets of a process group and the engine that moves bytes over them.

Why this shape:

* **One authenticated connection per pair of ranks** (:func:`connect_mesh`), found through
  the store: a Unix-domain socket between ranks on one machine (about 3x the bandwidth of
  TCP over loopback), TCP otherwise. Lower ranks accept, higher ranks connect, so setup
  cannot deadlock; the listening sockets close as soon as every peer is in.
* **Everything is posted, in program order.** An operation (a :class:`Work`) posts all of
  its sends and receives up front, per peer, in the order both sides compute from the same
  plan; a send whose data is not ready yet (a ring step waiting for a reduction) is posted
  as a placeholder and marked ready later. So the byte stream between two ranks is always
  in program order, asynchronous operations never interleave wrongly, and ``isend`` and
  ``irecv`` between the same pair progress together instead of deadlocking.
* **One non-blocking engine drives every socket** with ``poll``: full-duplex send and
  receive from a single thread, no helper thread per peer and no GIL ping-pong. The
  thread that waits for an operation drives the engine itself (no hand-off, which keeps
  small-message latency low); a background thread drives only while asynchronous work is
  outstanding and nobody else is driving.
* **Every message carries a 32-byte header** (:mod:`.framing`) that the receiver compares
  with what it expects. Payload bytes go straight into the destination buffer: the header
  and the payload arrive with one scatter read (``recvmsg_into``).
* **Receives from any rank** (``recv(tensor, src=None)``) wait in the engine, not in one
  peer's queue. While one was posted before a peer's next own receive, that peer's next
  header is read on its own and routed (:meth:`Engine._route`): a message goes to the
  earliest-posted receive that can take it, as in MPI. An any-source receive takes only
  send/recv messages with its tag; a peer's own receives take its messages in order. So a
  specific receive posted earlier still gets its peer's earlier message, and collectives
  are never disturbed. Send/recv sequence numbers (checked in headers) count the messages
  taken from each peer and are stamped when a header arrives.
* **Failure is final and loud.** A peer that closes its socket, a header that does not
  match, or a deadline that passes poisons the engine: the reason goes to the store (the
  first one wins) and, in band, to every peer whose stream is at a message boundary (an
  ABORT header plus the text); then all sockets close, which makes every other rank fail
  fast instead of waiting for its timeout, and every pending and later operation raises
  naming the root cause.
"""

from __future__ import annotations

import collections
import logging
import os
import secrets
import select
import socket
import struct
import tempfile
import threading
import time
import zlib

from . import auth
from .errors import DistBackendError, DistNetworkError, DistTimeoutError
from .framing import DATA, DATA_MAGIC, DATA_VERSION, pack_data_header
from .future import Future

__all__ = ["Work", "Engine", "Peer", "connect_mesh", "OP_NAMES"]

log = logging.getLogger(__name__)

HDR = DATA.size
ROLE = b"pg"
AUTH_TIMEOUT = 10.0  # seconds a connecting peer has to authenticate

# Operation codes in data headers.
ALL_REDUCE, BROADCAST, REDUCE, ALL_GATHER, REDUCE_SCATTER, GATHER, SCATTER, ALL_TO_ALL, BARRIER, P2P = range(1, 11)
BYE = 255
ABORT = 254  # in-band failure notice: header + UTF-8 reason, sent only at a message boundary
MAX_REASON = 4096
OP_NAMES = {
    ALL_REDUCE: "all_reduce", BROADCAST: "broadcast", REDUCE: "reduce", ALL_GATHER: "all_gather",
    REDUCE_SCATTER: "reduce_scatter", GATHER: "gather", SCATTER: "scatter", ALL_TO_ALL: "all_to_all",
    BARRIER: "barrier", P2P: "send/recv", BYE: "destroy_process_group",
    ABORT: "abort",
}
# dtype codes in data headers (by NumPy dtype name; bfloat16 is ml_dtypes')
DTYPE_CODES = {"bool": 1, "uint8": 2, "int8": 3, "int16": 4, "int32": 5, "int64": 6,
               "float16": 7, "bfloat16": 8, "float32": 9, "float64": 10}
DTYPE_NAMES = {v: k for k, v in DTYPE_CODES.items()}

_HELLO = struct.Struct("!8sIIQ")  # magic, rank, world size, group token
_HELLO_MAGIC = b"TTPEER\x00\x01"


def _describe_header(h) -> str:
    _, _, op, dt, _redop, _, tag, seq, total, nbytes = h
    return (f"{OP_NAMES.get(op, f'op {op}')} #{seq} ({total} x {DTYPE_NAMES.get(dt, f'dtype {dt}')}, "
            f"message {tag}, {nbytes} bytes)")


# ------------------------------------------------------------------------------- requests


class _Send:
    __slots__ = ("bufs", "ready", "work", "on_done", "nbytes", "started")

    def __init__(self, header: bytes, payload: memoryview | None, work, ready, on_done):
        self.bufs = [memoryview(header)]
        if payload is not None and payload.nbytes:
            self.bufs.append(payload)
        self.nbytes = sum(b.nbytes for b in self.bufs)
        self.ready = ready
        self.work = work
        self.on_done = on_done
        self.started = False  # some bytes are on the wire: nothing may be injected before the rest

    def advance(self, n: int) -> None:
        self.started = True
        bufs = self.bufs
        while n:
            first = bufs[0]
            if n >= first.nbytes:
                n -= first.nbytes
                bufs.pop(0)
            else:
                bufs[0] = first[n:]
                n = 0


class _Recv:
    __slots__ = ("expect", "hdr", "hview", "hpos", "target", "tpos", "tlen", "work", "on_done", "order", "p2p")

    def __init__(self, expect: bytes, target: memoryview | None, work, on_done, order: int = 0, p2p: bool = False):
        self.expect = expect
        self.order = order  # posting order among all receives of the engine (see _AnyRecv)
        # A send/recv receive: its sequence number is stamped when its header arrives (the
        # count of send/recv messages taken from that peer), because an any-source receive
        # posted earlier may take one of that peer's messages first.
        self.p2p = p2p
        self.hdr = bytearray(HDR)
        self.hview = memoryview(self.hdr)
        self.hpos = 0
        self.target = target
        self.tpos = 0
        self.tlen = 0 if target is None else target.nbytes
        self.work = work
        self.on_done = on_done


class _AnyRecv:
    """A send/recv receive from any rank (``recv(tensor, src=None)``), not yet matched.

    It waits in the engine's ``anyq`` rather than in one peer's queue. When it claims a
    peer's message it becomes an ordinary :class:`_Recv` at the front of that peer's queue,
    with the header already read (see :meth:`Engine._route`)."""

    __slots__ = ("expect", "tag", "target", "work", "on_done", "order")

    def __init__(self, expect: bytes, target: memoryview | None, work, on_done, order: int):
        self.expect = expect  # sequence number 0: stamped for the peer it claims
        self.tag = DATA.unpack(expect)[6]
        self.target = target
        self.work = work
        self.on_done = on_done
        self.order = order

    def describe(self) -> str:
        h = DATA.unpack(self.expect)
        return f"a message ({h[8]} x {DTYPE_NAMES.get(h[3], h[3])}, tag {self.tag}) from any rank"


class Peer:
    """One connected peer: its socket and the FIFO queues of posted sends and receives."""

    __slots__ = ("rank", "grank", "sock", "fd", "addr", "sendq", "recvq", "wblocked", "early", "left", "mask",
                 "p2p_recvd", "shdr", "sview", "shpos")

    def __init__(self, rank: int, grank: int, sock: socket.socket, addr: str):
        self.rank = rank  # rank in the group
        self.grank = grank  # global rank, used in messages
        self.sock = sock
        self.fd = sock.fileno()
        self.addr = addr
        self.sendq: collections.deque[_Send] = collections.deque()
        self.recvq: collections.deque[_Recv] = collections.deque()
        self.wblocked = False  # last send hit a full socket buffer: wait for POLLOUT
        self.early = False  # bytes of a later operation are waiting: stop watching until a recv is posted
        self.left = False  # the peer said goodbye (destroy_process_group)
        self.mask = 0
        self.p2p_recvd = 0  # send/recv messages taken from this peer: the next one's sequence number - 1
        # A header read on its own, before we know which receive takes its message (only
        # while an any-source receive may claim it; see Engine._route). shpos: bytes read.
        self.shdr = bytearray(HDR)
        self.sview = memoryview(self.shdr)
        self.shpos = 0

    def name(self) -> str:
        return f"rank {self.grank} ({self.addr})"


# ----------------------------------------------------------------------------------- work


class Work:
    """Handle of one operation, as torch.distributed's ``Work``: wait, is_completed, get_future."""

    def __init__(self, engine: "Engine", what: str, deadline: float, result=None):
        self._engine = engine
        self.what = what  # e.g. "all_reduce #12"
        self.deadline = deadline
        self._pending = 0
        self._finalizers: list = []
        self._done = False
        self._exc: BaseException | None = None
        self._result = result  # the value of get_future(): the output tensors
        self._future = Future(name=what)
        # Receives: the sender's group rank; -1 for an any-source receive until it matches.
        self._source = None

    # torch.distributed.Work API ----------------------------------------------------
    def is_completed(self) -> bool:
        return self._done

    def is_success(self) -> bool:
        return self._done and self._exc is None

    def exception(self):
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
        self.wait()
        return self._result

    def __repr__(self):
        state = "pending" if not self._done else ("failed" if self._exc else "completed")
        return f"<Work {self.what} {state}>"

    def _finish(self):
        """Called by the engine when no request is pending: run finalizers, then complete."""
        while self._finalizers:
            fn = self._finalizers.pop(0)
            fn()
            if self._pending:  # a finalizer posted another phase
                return
        self._done = True
        self._engine._completed(self)


# --------------------------------------------------------------------------------- engine


class Engine:
    def __init__(self, rank: int, global_rank: int, peers: dict, report_failure=None,
                 group_desc: str = "process group"):
        self.rank = rank
        self.global_rank = global_rank
        self.peers: dict[int, Peer] = peers
        self._by_fd = {p.fd: p for p in peers.values()}
        self._report_failure = report_failure
        self.group_desc = group_desc
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._driver = None
        self._error: BaseException | None = None
        self._closed = False
        self._works: set[Work] = set()
        self._async: collections.deque[Work] = collections.deque()
        self._notify: list[Work] = []
        self._poll = select.poll()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._poll.register(self._wake_r, select.POLLIN)
        for p in peers.values():
            p.sock.setblocking(False)
        self._bg = None
        self._order = 0  # receives posted so far: orders specific and any-source receives
        self._anyq: collections.deque[_AnyRecv] = collections.deque()  # unmatched, in posting order
        self._reroute = False  # a receive was posted: a header read earlier may have a taker now

    # -- posting (caller holds the lock: use `with engine.posting():`) ----------------
    def posting(self):
        return _Posting(self)

    def new_work(self, what: str, timeout: float, result=None) -> Work:
        if self._error is not None:
            raise type(self._error)(f"{what}: the process group is unusable after an earlier failure: {self._error}")
        if self._closed:
            raise DistBackendError(f"{what}: the process group has been destroyed")
        w = Work(self, what, time.monotonic() + timeout, result)
        self._works.add(w)
        return w

    def send(self, work: Work, peer: int, header: bytes, payload=None, ready=True, on_done=None) -> _Send:
        p = self.peers[peer]
        req = _Send(header, payload, work, ready, on_done)
        work._pending += 1
        p.sendq.append(req)
        return req

    def recv(self, work: Work, peer: int, expect: bytes, target=None, on_done=None, p2p=False) -> _Recv:
        p = self.peers[peer]
        self._order += 1
        req = _Recv(expect, target, work, on_done, self._order, p2p)
        work._pending += 1
        p.recvq.append(req)
        p.early = False
        self._reroute = self._reroute or p.shpos == HDR
        return req

    def recv_any(self, work: Work, expect: bytes, target=None, on_done=None) -> _AnyRecv:
        """Post a send/recv receive that takes a message from whichever peer (see :meth:`_route`)."""
        self._order += 1
        req = _AnyRecv(expect, target, work, on_done, self._order)
        work._pending += 1
        work._source = -1
        self._anyq.append(req)
        for p in self.peers.values():
            p.early = False  # look at every peer's next message again: it may be for this receive
            self._reroute = self._reroute or p.shpos == HDR
        return req

    def finish_posting(self, work: Work, async_op: bool):
        if work._pending == 0 and not work._done:
            work._finish()
        if async_op and not work._done:
            self._async.append(work)
            self._ensure_bg()
            self._cond.notify_all()
        self._wake()

    def _wake(self):
        """Interrupt the driving thread's poll (from any other thread, lock held)."""
        if self._driver is not None and self._driver != threading.get_ident() and self._wake_w >= 0:
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass

    def mark_ready(self, reqs):
        """From a helper thread: placeholders whose data is now in place may be sent.

        Lock-free on purpose: the driver may be inside a callback that waits for this
        helper's next step while holding the lock. Setting a flag is atomic under the GIL,
        and the wake-up byte makes a driver blocked in poll look again."""
        for r in reqs:
            r.ready = True
        fd = self._wake_w
        if fd >= 0:  # -1 once the group is destroyed
            try:
                os.write(fd, b"x")
            except OSError:
                pass

    def fail_from_thread(self, exc: BaseException):
        """From a helper thread: fail the group (e.g. a device copy failed)."""
        with self._cond:
            self._fail(exc)
            self._wake()

    # -- completion --------------------------------------------------------------------
    def _completed(self, work: Work):
        self._works.discard(work)
        self._notify.append(work)
        self._cond.notify_all()

    def _req_done(self, req):
        if req.on_done is not None:
            req.on_done()
        work = req.work
        work._pending -= 1
        if work._pending == 0 and not work._done:
            work._finish()

    def _flush_notifications(self):
        """Complete futures outside the lock (user callbacks may call collectives)."""
        with self._lock:
            done, self._notify = self._notify, []
        for w in done:
            if w._exc is not None:
                w._future.set_exception(w._exc)
            else:
                w._future.set_result(w._result)

    # -- waiting and driving -------------------------------------------------------------
    def wait(self, work: Work, deadline: float):
        with self._cond:
            self._wait_locked(work, deadline)
        self._flush_notifications()

    def _wait_locked(self, work: Work, deadline: float):
        me = threading.get_ident()
        while not work._done:
            now = time.monotonic()
            if now >= deadline:
                self._fail(DistTimeoutError(self._timeout_message(work, deadline)))
                break
            if self._driver is None:
                self._driver = me
                try:
                    self._drive(work, deadline)
                except (DistBackendError, DistNetworkError) as e:
                    self._fail(e)
                except Exception as e:  # a bug or a numpy error inside a reduction
                    self._fail(DistBackendError(f"{work.what}: {type(e).__name__}: {e}"))
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
        while True:
            with self._cond:
                while self._async and self._async[0]._done:
                    self._async.popleft()
                if self._closed and not self._async:
                    return
                if not self._async:
                    self._cond.wait()
                    continue
                w = self._async[0]
                self._wait_locked(w, w.deadline)
            self._flush_notifications()

    def _update_masks(self):
        for p in self.peers.values():
            if p.sock is None:
                continue
            mask = 0
            if p.recvq or not (p.early or p.left):
                mask |= select.POLLIN
            if p.wblocked and p.sendq and p.sendq[0].ready:
                mask |= select.POLLOUT
            if mask != p.mask:
                if mask:
                    self._poll.register(p.fd, mask)
                elif p.mask:
                    self._poll.unregister(p.fd)
                p.mask = mask

    def _drive(self, work: Work, deadline: float):
        """Progress every socket until ``work`` is done or ``deadline`` passes (lock held)."""
        peers = self.peers
        while not work._done:
            if self._reroute:  # a new receive may take a header that waits, already read
                self._reroute = False
                for p in peers.values():
                    if p.shpos == HDR and p.sock is not None:
                        self._pump(p)
                if work._done:
                    return
            # Push whatever is ready and not known to be blocked: cheap and usually enough
            # for small messages to leave without waiting for poll.
            for p in peers.values():
                if p.sendq and not p.wblocked and p.sendq[0].ready:
                    self._flush(p)
            if work._done:
                return
            self._update_masks()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._lock.release()
            try:
                events = self._poll.poll(min(remaining, 3600.0) * 1000.0)
            finally:
                self._lock.acquire()
            if self._error is not None:
                return
            for fd, ev in events:
                if fd == self._wake_r:
                    try:
                        os.read(self._wake_r, 4096)
                    except BlockingIOError:
                        pass
                    continue
                p = self._by_fd.get(fd)
                if p is None or p.sock is None:
                    continue
                if ev & (select.POLLIN | select.POLLHUP | select.POLLERR):
                    if p.recvq or p.shpos or self._any_first(p):
                        self._pump(p)
                    else:
                        self._idle_readable(p)
                if ev & select.POLLOUT:
                    p.wblocked = False
                    self._flush(p)

    # -- socket I/O (lock held) -----------------------------------------------------------
    def _peer_error(self, p: Peer, err, doing: str) -> DistBackendError:
        what = self._current_what(p)
        notice = self._pending_abort(p)
        if notice is not None:
            msg = f"{p.name()} aborted the group: {notice}"
        elif p.left:
            msg = f"{p.name()} has left the group (destroy_process_group)"
        elif err is None:
            msg = f"{p.name()} closed its connection"
        else:
            msg = f"connection to {p.name()} failed while {doing}: {err}"
        return DistBackendError(f"{what}: {msg}" if what else msg)

    def _current_what(self, p: Peer) -> str:
        if p.recvq:
            return p.recvq[0].work.what
        if self._anyq:
            return self._anyq[0].work.what
        if p.sendq:
            return p.sendq[0].work.what
        for w in self._works:
            return w.what
        return ""

    def _flush(self, p: Peer):
        q = p.sendq
        sock = p.sock
        while q:
            req = q[0]
            if not req.ready:
                return
            try:
                n = sock.sendmsg(req.bufs) if len(req.bufs) > 1 else sock.send(req.bufs[0])
            except (BlockingIOError, InterruptedError):
                p.wblocked = True
                return
            except OSError as e:
                err = self._peer_error(p, e, "sending")  # reads the peer's abort notice if it left one
                if "aborted the group" in str(err):
                    raise err from None
                # Otherwise what the peer sent before it went away may say why (a header that
                # shows a mismatch): read that first.
                try:
                    if p.recvq:
                        self._pump(p)
                    if not p.recvq:
                        self._idle_readable(p)
                except DistBackendError as better:
                    raise better from None
                raise err from None
            req.advance(n)
            if req.bufs:
                p.wblocked = True  # the kernel took part of it: its buffer is full
                return
            q.popleft()
            self._req_done(req)
        p.wblocked = False

    def _pump(self, p: Peer):
        """Read p's messages into the receives that take them, until the socket is drained.

        Messages from one peer are taken in the order the receives were posted: the head of
        ``p.recvq`` reads header and payload straight into place. Where an any-source receive
        was posted before that head (or p has no receive posted), the next header is read on
        its own first and :meth:`_route` decides who takes the message."""
        q = p.recvq
        while True:
            if p.shpos or self._any_first(p):
                if not self._read_header(p) or not self._route(p):
                    return  # drained mid-header, the peer left, or nobody takes the message yet
            if not q:
                return
            req = q[0]
            if req.hpos < HDR or req.tpos < req.tlen:
                sock = p.sock
                try:
                    if req.hpos < HDR:
                        if req.tpos < req.tlen:
                            n = sock.recvmsg_into([req.hview[req.hpos:], req.target[req.tpos:]])[0]
                        else:
                            n = sock.recv_into(req.hview[req.hpos:])
                        want = HDR - req.hpos + req.tlen - req.tpos
                        h = min(n, HDR - req.hpos)
                        req.hpos += h
                        req.tpos += n - h
                        if req.hpos == HDR:
                            self._check_header(p, req, bytes(req.target[:req.tpos]) if req.tpos else b"")
                    else:
                        want = req.tlen - req.tpos
                        n = sock.recv_into(req.target[req.tpos:])
                        req.tpos += n
                except (BlockingIOError, InterruptedError):
                    return
                except OSError as e:
                    raise self._peer_error(p, e, "receiving") from None
                if n == 0:
                    raise self._peer_error(p, None, "receiving")
                if not (req.hpos == HDR and req.tpos == req.tlen):
                    if n < want:
                        return  # drained the socket; poll will tell us when more arrives
                    continue
            q.popleft()
            self._req_done(req)

    def _check_header(self, p: Peer, req: _Recv, have: bytes = b""):
        """Compare a complete header with what ``req`` expects (stamping a send/recv sequence number)."""
        if req.p2p:
            p.p2p_recvd += 1
            h = list(DATA.unpack(req.expect))
            h[7] = p.p2p_recvd & 0xFFFFFFFF
            req.expect = DATA.pack(*h)
        if req.hdr != req.expect:
            raise self._mismatch(p, req, have)

    def _any_first(self, p: Peer) -> bool:
        """Whether an any-source receive was posted before p's next own receive (which has not
        started reading), so that it may claim p's next message."""
        if not self._anyq or p.left or p.sock is None:
            return False
        q = p.recvq
        return not q or (q[0].hpos == 0 and self._anyq[0].order < q[0].order)

    def _read_header(self, p: Peer) -> bool:
        """Read p's next header into ``p.shdr``; True once it is complete."""
        if p.shpos == HDR:
            return True
        try:
            n = p.sock.recv_into(p.sview[p.shpos:])
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as e:
            raise self._peer_error(p, e, "receiving") from None
        if n == 0:
            raise self._peer_error(p, None, "receiving")
        p.shpos += n
        return p.shpos == HDR

    def _route(self, p: Peer) -> bool:
        """Hand the header in ``p.shdr`` to the receive that takes its message; False if none does yet.

        The matching rule (MPI's): a message goes to the earliest-posted receive that can
        take it. An any-source receive can take a send/recv message with its tag; p's own
        receives (``p.recvq``, posted in order) take p's messages in order, whatever they
        are. So the earliest-posted any-source receive with that tag, if posted before the
        head of ``p.recvq``, claims the message; otherwise that head takes it and checks the
        header as usual (a collective's message, another tag, or a mismatch it reports). A
        message that nobody takes stays here until a receive is posted."""
        h = DATA.unpack(bytes(p.shdr))
        ours = h[0] == DATA_MAGIC and h[1] == DATA_VERSION
        if ours and h[2] == ABORT:
            p.shpos = 0
            what = self._current_what(p)
            raise DistBackendError(f"{what + ': ' if what else ''}{p.name()} aborted the group: "
                                   f"{self._read_reason(p, h[9], b'')}")
        if ours and h[2] == BYE:
            p.shpos = 0
            p.left = True
            return False
        q = p.recvq
        head = q[0].order if q else None
        a = None
        if ours and h[2] == P2P:
            a = next((a for a in self._anyq if (head is None or a.order < head) and a.tag == h[6]), None)
        if a is not None:
            self._anyq.remove(a)
            req = _Recv(a.expect, a.target, a.work, a.on_done, a.order, p2p=True)
            q.appendleft(req)
            a.work._source = p.rank
        elif q:
            req = q[0]
        else:
            p.early = True  # stop watching p until a receive is posted (then _reroute)
            return False
        req.hdr[:] = p.shdr
        req.hpos = HDR
        p.shpos = 0
        self._check_header(p, req)
        return True

    def _idle_readable(self, p: Peer):
        """Bytes or EOF from a peer we expect nothing from right now."""
        try:
            data = p.sock.recv(HDR, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            if p.left:
                self._drop_peer(p)
                return
            raise self._peer_error(p, e, "idle") from None
        if not data:
            if p.left:
                self._drop_peer(p)
                return
            raise self._peer_error(p, None, "idle")
        if len(data) == HDR and data[:2] == DATA_MAGIC and DATA.unpack(data)[2] == BYE:
            p.sock.recv(HDR)
            p.left = True
            return
        if len(data) == HDR and data[:2] == DATA_MAGIC and DATA.unpack(data)[2] == ABORT:
            p.sock.recv(HDR)
            raise DistBackendError(f"{p.name()} aborted the group: {self._read_reason(p, DATA.unpack(data)[9], b'')}")
        p.early = True  # the start of a later operation: read it when that op posts its recv

    def _drop_peer(self, p: Peer):
        if p.mask:
            self._poll.unregister(p.fd)
            p.mask = 0
        p.sock.close()
        p.sock = None

    def _pending_abort(self, p: Peer) -> str | None:
        """The peer's ABORT notice, if one waits unread where our next header would start.

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
        return self._read_reason(p, DATA.unpack(data)[9], b"")

    def _read_reason(self, p: Peer, nbytes: int, have: bytes) -> str:
        """The rest of an ABORT message's reason: whatever is already there, never blocking long."""
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

    def _mismatch(self, p: Peer, req: _Recv, have: bytes = b"") -> DistBackendError:
        got = DATA.unpack(bytes(req.hdr))
        exp = DATA.unpack(req.expect)
        me = f"this rank ({self.global_rank})"
        if got[0] != DATA_MAGIC or got[1] != exp[1]:
            return DistBackendError(f"{req.work.what}: {p.name()} sent bytes that are not a tritensor message "
                                    "header (protocol desynchronised)")
        if got[2] == ABORT:
            return DistBackendError(f"{req.work.what}: {p.name()} aborted the group: "
                                    f"{self._read_reason(p, got[9], have)}")
        if got[2] == BYE:
            return DistBackendError(f"{req.work.what}: {p.name()} left the group (destroy_process_group) "
                                    "while this rank still expected data from it")
        g_op, e_op = got[2], exp[2]
        if g_op != e_op or got[7] != exp[7]:
            return DistBackendError(
                f"{req.work.what}: ranks disagree on the order of operations: {p.name()} is at "
                f"{OP_NAMES.get(g_op, g_op)} #{got[7]} while {me} is at {OP_NAMES.get(e_op, e_op)} #{exp[7]}")
        gdt, edt = DTYPE_NAMES.get(got[3], got[3]), DTYPE_NAMES.get(exp[3], exp[3])
        if got[3] != exp[3] or got[8] != exp[8]:
            return DistBackendError(
                f"{req.work.what}: tensor sizes or dtypes disagree across ranks: {p.name()} has "
                f"{got[8]} elements of {gdt}, {me} has {exp[8]} elements of {edt}")
        if got[4] != exp[4]:
            return DistBackendError(f"{req.work.what}: ranks use different reduce ops "
                                    f"({p.name()}: {got[4]}, {me}: {exp[4]})")
        if got[6] != exp[6] and g_op == P2P:
            return DistBackendError(f"{req.work.what}: {p.name()} sent tag {got[6]} but this rank "
                                    f"receives tag {exp[6]} (messages between two ranks match in order)")
        return DistBackendError(f"{req.work.what}: unexpected message from {p.name()}: "
                                f"got {_describe_header(got)}, expected {_describe_header(exp)}")

    # -- failure -----------------------------------------------------------------------
    def _timeout_message(self, work: Work, deadline: float) -> str:
        waits = [f"to receive {a.describe()}" for a in self._anyq if a.work is work]
        for p in self.peers.values():
            r = next((r for r in p.recvq if r.work is work), None)
            if r is not None:
                waits.append(f"to receive {r.tlen - r.tpos + HDR - r.hpos} more bytes from {p.name()}")
            s = next((s for s in p.sendq if s.work is work), None)
            if s is not None:
                waits.append(f"to send {sum(b.nbytes for b in s.bufs)} bytes to {p.name()}"
                             + ("" if s.ready else " (waiting for earlier data)"))
        detail = "; ".join(waits[:4]) or "for the operation to complete"
        return f"{work.what} timed out: still waiting {detail}"

    def _fail(self, exc: BaseException):
        """Poison the engine: report, close every socket, fail every pending work (lock held)."""
        if self._error is not None:
            return
        if self._report_failure is not None:
            try:
                first = self._report_failure(str(exc))
            except Exception:  # the store may be gone with the rank that hosted it
                first = None
            if first and first != str(exc):
                exc = type(exc)(f"{exc}\n  first failure reported in this group: {first}")
        self._error = exc
        self._anyq.clear()
        log.debug("process group failed: %s", exc)
        reason = str(exc).encode("utf-8", "replace")[:MAX_REASON]
        notice = pack_data_header(ABORT, 0, 0, 0, 0, 0, len(reason)) + reason
        for p in self.peers.values():
            if p.sock is not None:
                # Tell the peer why, in band, when our stream to it is at a message
                # boundary (so it reads this header where it expects the next one).
                if not (p.sendq and p.sendq[0].started) and not p.left:
                    try:
                        p.sock.send(notice)
                    except OSError:
                        pass
                try:
                    p.sock.close()
                except OSError:
                    pass
                p.sock = None
        for w in list(self._works):
            if not w._done:
                w._exc = exc
                w._done = True
                self._completed(w)
        self._cond.notify_all()

    def shutdown(self):
        """Say goodbye to every peer and close (destroy_process_group)."""
        with self._cond:
            self._closed = True
            self._anyq.clear()
            bye = pack_data_header(BYE, 0, 0, 0, 0, 0, 0)
            for p in self.peers.values():
                if p.sock is None:
                    continue
                if self._error is None and not p.sendq:
                    try:
                        p.sock.send(bye)
                    except OSError:
                        pass
                try:
                    p.sock.close()
                except OSError:
                    pass
                p.sock = None
            for w in list(self._works):
                if not w._done:
                    w._exc = DistBackendError(f"{w.what}: the process group was destroyed")
                    w._done = True
                    self._completed(w)
            self._cond.notify_all()
        self._flush_notifications()
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass
        if self._bg is not None and self._bg is not threading.current_thread():
            self._bg.join(timeout=5)
        fds = (self._wake_r, self._wake_w)
        self._wake_w = -1
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass


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


# ---------------------------------------------------------------------------- mesh setup


SOCKET_BUFFER = int(os.environ.get("TRITENSOR_COMM_SOCKBUF", 4 << 20))


def _tune(sock: socket.socket):
    if sock.family != getattr(socket, "AF_UNIX", None):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if SOCKET_BUFFER > 0:
        # Large buffers let a whole ring chunk sit in flight while the peer reduces the
        # previous one (the kernel caps these at net.core.{w,r}mem_max).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)


UNIX_ENV = "TRITENSOR_COMM_UNIX"  # "0" forces TCP between ranks on the same host


def _host_id() -> str:
    """Identifies this machine (and boot): ranks with equal ids try Unix sockets first."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}"


def _unix_listener():
    """A Unix-domain listener in a private (0700) directory, or None where unavailable."""
    if not hasattr(socket, "AF_UNIX") or os.environ.get(UNIX_ENV, "1") == "0":
        return None, None
    try:
        d = os.path.join(tempfile.gettempdir(), f"tritensor-{os.getuid()}")
        os.makedirs(d, mode=0o700, exist_ok=True)
        if os.stat(d).st_uid != os.getuid():
            return None, None
        path = os.path.join(d, f"pg-{os.getpid()}-{secrets.token_hex(6)}.sock")
        lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lst.bind(path)
        lst.listen(128)
        return lst, path
    except OSError:
        return None, None


def _peer_handshake_client(sock, secret, deadline, rank, world_size, token, q, grank, addr):
    _tune(sock)
    auth.client_handshake(sock, secret, ROLE, max(0.1, deadline - time.monotonic()))
    sock.settimeout(max(0.1, deadline - time.monotonic()))
    sock.sendall(_HELLO.pack(_HELLO_MAGIC, rank, world_size, token))
    reply = auth.recv_exact(sock, _HELLO.size, deadline, f"the hello of rank {grank}")
    magic, qr, ws, tok = _HELLO.unpack(reply)
    if magic != _HELLO_MAGIC or qr != q or ws != world_size or tok != token:
        raise DistNetworkError(f"{addr} is not rank {grank} of this group")


def connect_mesh(store, prefix: str, rank: int, world_size: int, global_ranks: list, bind_host: str,
                 secret: bytes, timeout: float) -> dict:
    """Connect this rank to every other rank of a group; return {group rank: Peer}.

    Each rank listens on an ephemeral TCP port of ``bind_host`` (and, for ranks on the same
    machine, on a Unix-domain socket in a private directory: several times the bandwidth
    of TCP over loopback) and publishes both under ``prefix``; rank i connects to every
    lower rank and accepts every higher one. Each new connection runs the HMAC handshake,
    then both sides exchange a fixed-size hello (rank, world size, group token) so that a
    connection from another group or job is refused. The listeners close when all peers
    are in."""
    deadline = time.monotonic() + timeout
    token = zlib.crc32(prefix.encode()) | (world_size << 32)
    peers: dict[int, Peer] = {}
    listeners = []
    upath = None
    me = _host_id()
    try:
        if rank < world_size - 1:
            tcp = socket.create_server((bind_host, 0), backlog=world_size)
            listeners.append(tcp)
            host, port = tcp.getsockname()[:2]
            ulst, upath = _unix_listener()
            if ulst is not None:
                listeners.append(ulst)
            store.set(f"{prefix}addr/{rank}", f"{host}:{port}\n{me}\n{upath or ''}")
        for q in range(rank):
            tcp_addr, hid, qpath = store.get(f"{prefix}addr/{q}").decode().split("\n")
            sock = None
            addr = tcp_addr
            if qpath and hid == me and os.environ.get(UNIX_ENV, "1") != "0":
                try:
                    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    sock.settimeout(max(0.1, deadline - time.monotonic()))
                    sock.connect(qpath)
                    addr = f"{tcp_addr.rsplit(':', 1)[0]} via unix socket"
                except OSError:
                    sock.close()
                    sock = None
            if sock is None:
                host, port = tcp_addr.rsplit(":", 1)
                sock = _connect_retry(host, int(port), deadline, global_ranks[q])
            try:
                _peer_handshake_client(sock, secret, deadline, rank, world_size, token, q, global_ranks[q], addr)
            except BaseException:
                sock.close()
                raise
            peers[q] = Peer(q, global_ranks[q], sock, addr)
        while len(peers) < world_size - 1:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = [global_ranks[q] for q in range(world_size) if q != rank and q not in peers]
                raise DistTimeoutError(f"timed out after {timeout:g}s waiting for rank(s) {missing} to connect")
            ready, _, _ = select.select(listeners, [], [], remaining)
            for lst in ready:
                try:
                    sock, addr = lst.accept()
                except OSError:
                    continue
                name = f"{addr[0]}:{addr[1]}" if lst.family != getattr(socket, "AF_UNIX", None) else "unix socket"
                try:
                    sock.settimeout(None)
                    _tune(sock)
                    auth.server_handshake(sock, secret, ROLE, min(remaining, AUTH_TIMEOUT))
                    hello = auth.recv_exact(sock, _HELLO.size, deadline, f"the hello of {name}")
                    magic, qr, ws, tok = _HELLO.unpack(hello)
                    if (magic != _HELLO_MAGIC or ws != world_size or tok != token
                            or not rank < qr < world_size or qr in peers):
                        raise DistNetworkError(f"{name} is not a missing rank of this group")
                    sock.settimeout(max(0.1, deadline - time.monotonic()))
                    sock.sendall(_HELLO.pack(_HELLO_MAGIC, rank, world_size, token))
                except (OSError, TimeoutError, DistNetworkError, struct.error) as e:
                    log.warning("refused a connection from %s: %s", name, e)
                    sock.close()
                    continue
                if name == "unix socket":
                    name = f"{bind_host} via unix socket"
                peers[qr] = Peer(qr, global_ranks[qr], sock, name)
    except BaseException:
        for p in peers.values():
            p.sock.close()
        raise
    finally:
        for lst in listeners:
            lst.close()
        if upath:
            try:
                os.unlink(upath)
            except OSError:
                pass
    return peers


def _connect_retry(host, port, deadline, grank):
    delay = 0.01
    while True:
        try:
            return socket.create_connection((host, port), timeout=max(0.1, min(10.0, deadline - time.monotonic())))
        except OSError as e:
            if time.monotonic() + delay >= deadline:
                raise DistNetworkError(f"could not connect to rank {grank} at {host}:{port}: {e}") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
