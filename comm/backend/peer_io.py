"""Socket I/O of a process group: framed, non-blocking sends and receives on its peers.

Why this module exists: moving bytes is one concern with its own invariants, separate
from what an operation is (:mod:`tritensor.comm.work`) and from what happens when one fails
(:mod:`.failures`). :class:`PeerIO` owns the peers' sockets, the queues of posted
requests and the ``poll`` loop; it knows nothing of deadlines or Futures beyond calling
back when a request has moved its last byte.

* **Everything is posted, in program order**, per peer (:class:`Peer`'s ``sendq`` and
  ``recvq``); a send whose data is not ready yet is a placeholder marked ready later.
* **Every message carries a 32-byte header** (:mod:`.framing`) that the receiver reads on
  its own and compares with what it expects *before* a payload byte is read: a message
  whose size or kind disagrees never touches the destination. Then the payload goes
  straight into the destination buffer.
* **Receives from any rank** (``recv(tensor, src=None)``) wait here (``anyq``), not in one
  peer's queue. While one was posted before a peer's next own receive, that peer's next
  header is read on its own and routed (:meth:`PeerIO._route`): a message goes to the
  earliest-posted receive that can take it, as in MPI. An any-source receive takes only
  send/recv messages with its tag; a peer's own receives take its messages in order.
  Send/recv sequence numbers (checked in headers) count the messages taken from each peer
  and are stamped when a header arrives.

Every method runs with the engine lock held, except :meth:`PeerIO.mark_ready` and
:meth:`PeerIO.wake`; :meth:`PeerIO.drive` releases the lock only while it polls.
"""

from __future__ import annotations

import collections
import os
import select
import socket
import time

from ..errors import DistBackendError
from .failures import mismatch, peer_error, read_reason
from .framing import ABORT, BYE, DATA, DATA_MAGIC, DATA_VERSION, P2P, pack_data_header
from .peer import HDR, AnyRecvRequest, Peer, RecvRequest, SendRequest

__all__ = ["Peer", "PeerIO"]


# --------------------------------------------------------------------------------- the I/O


class PeerIO:
    """The peers' sockets, their posted requests and the poll loop that progresses them.

    ``request_done(req)`` is called when a request has moved its last byte; ``busy_what()``
    names the operation this rank is in, for errors from a peer nothing was expected from."""

    def __init__(self, global_rank: int, peers: dict, request_done, busy_what):
        self.global_rank = global_rank
        self.peers: dict[int, Peer] = peers
        self._by_fd = {p.fd: p for p in peers.values()}
        self._request_done = request_done
        self._busy_what = busy_what
        self._poll = select.poll()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._poll.register(self._wake_r, select.POLLIN)
        for p in peers.values():
            p.sock.setblocking(False)
        self._order = 0  # receives posted so far: orders specific and any-source receives
        self.anyq: collections.deque[AnyRecvRequest] = collections.deque()  # unmatched, in posting order
        self._reroute = False  # a receive was posted: a header read earlier may have a taker now
        self.torn_down = False  # every socket closed (failure or shutdown)

    # -- posting ------------------------------------------------------------------------
    def send(self, work, peer: int, header: bytes, payload=None, ready=True, on_done=None) -> SendRequest:
        """Queue ``header`` and ``payload`` to ``peer`` for ``work`` (held back until ``ready``); the I/O
        thread writes it."""
        p = self.peers[peer]
        req = SendRequest(header, payload, work, ready, on_done)
        work._pending += 1
        p.sendq.append(req)
        return req

    def recv(self, work, peer: int, expect: bytes, target=None, on_done=None, p2p=False) -> RecvRequest:
        """Expect a message with ``expect``'s header from ``peer`` for ``work``, its payload read into
        ``target``; matched in posting order."""
        p = self.peers[peer]
        self._order += 1
        req = RecvRequest(expect, target, work, on_done, self._order, p2p)
        work._pending += 1
        p.recvq.append(req)
        p.early = False
        self._reroute = self._reroute or p.shpos == HDR
        return req

    def recv_any(self, work, expect: bytes, target=None, on_done=None) -> AnyRecvRequest:
        """Post a send/recv receive that takes a message from whichever peer (see :meth:`_route`)."""
        self._order += 1
        req = AnyRecvRequest(expect, target, work, on_done, self._order)
        work._pending += 1
        work._source = -1
        self.anyq.append(req)
        for p in self.peers.values():
            p.early = False  # look at every peer's next message again: it may be for this receive
            self._reroute = self._reroute or p.shpos == HDR
        return req

    def mark_ready(self, reqs):
        """From a helper thread, without the lock: placeholders whose data is now in place may be sent.

        Setting a flag is atomic under the GIL, and the wake-up byte makes a driver blocked
        in poll look again."""
        for r in reqs:
            r.ready = True
        self.wake()

    def wake(self):
        """Interrupt a thread blocked in :meth:`drive`'s poll (from any thread)."""
        fd = self._wake_w
        if fd >= 0:  # -1 once the group is destroyed
            try:
                os.write(fd, b"x")
            except OSError:
                pass

    # -- the loop -----------------------------------------------------------------------
    def drive(self, work, deadline: float, lock):
        """Progress every socket until ``work`` is done or ``deadline`` passes (``lock`` held,
        released while polling)."""
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
            lock.release()
            try:
                events = self._poll.poll(min(remaining, 3600.0) * 1000.0)
            finally:
                lock.acquire()
            if self.torn_down:
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

    # -- sending ------------------------------------------------------------------------
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
            self._request_done(req)
        p.wblocked = False

    # -- receiving ----------------------------------------------------------------------
    def _pump(self, p: Peer):
        """Read p's messages into the receives that take them, until the socket is drained.

        Messages from one peer are taken in the order the receives were posted: the head of
        ``p.recvq`` reads the header, checks it, then reads the payload straight into place.
        Where an any-source receive was posted before that head (or p has no receive
        posted), the next header is read on its own first and :meth:`_route` decides who
        takes the message."""
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
                        # The header alone: it is checked before a payload byte may land in
                        # the destination (a mismatched message must leave it untouched).
                        want = HDR - req.hpos
                        n = sock.recv_into(req.hview[req.hpos:])
                        req.hpos += n
                        if req.hpos == HDR:
                            self._check_header(p, req)
                            if req.tpos < req.tlen:
                                continue  # the payload, straight into place
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
            self._request_done(req)
            self._kick_sends()

    def _kick_sends(self):
        """Send what a completed receive made ready (a ring's next chunk) before reading on:
        the next peer starts on it while this rank reads and reduces what is queued."""
        for p in self.peers.values():
            if p.sendq and not p.wblocked and p.sendq[0].ready and p.sock is not None:
                self._flush(p)

    def _check_header(self, p: Peer, req: RecvRequest, have: bytes = b""):
        """Compare a complete header with what ``req`` expects (stamping a send/recv sequence number)."""
        if req.p2p:
            p.p2p_recvd += 1
            h = list(DATA.unpack(req.expect))
            h[7] = p.p2p_recvd & 0xFFFFFFFF
            req.expect = DATA.pack(*h)
        if req.hdr != req.expect:
            raise mismatch(p, req, self.global_rank, have)

    def _any_first(self, p: Peer) -> bool:
        """Whether an any-source receive was posted before p's next own receive (which has not
        started reading), so that it may claim p's next message."""
        if not self.anyq or p.left or p.sock is None:
            return False
        q = p.recvq
        return not q or (q[0].hpos == 0 and self.anyq[0].order < q[0].order)

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
                                   f"{read_reason(p, h[9], b'')}")
        if ours and h[2] == BYE:
            p.shpos = 0
            p.left = True
            return False
        q = p.recvq
        head = q[0].order if q else None
        a = None
        if ours and h[2] == P2P:
            a = next((a for a in self.anyq if (head is None or a.order < head) and a.tag == h[6]), None)
        if a is not None:
            self.anyq.remove(a)
            req = RecvRequest(a.expect, a.target, a.work, a.on_done, a.order, p2p=True)
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
            raise DistBackendError(f"{p.name()} aborted the group: {read_reason(p, DATA.unpack(data)[9], b'')}")
        p.early = True  # the start of a later operation: read it when that op posts its recv

    def _drop_peer(self, p: Peer):
        if p.mask:
            self._poll.unregister(p.fd)
            p.mask = 0
        p.sock.close()
        p.sock = None

    def _peer_error(self, p: Peer, err, doing: str) -> DistBackendError:
        return peer_error(p, err, doing, self._current_what(p))

    def _current_what(self, p: Peer) -> str:
        if p.recvq:
            return p.recvq[0].work.what
        if self.anyq:
            return self.anyq[0].work.what
        if p.sendq:
            return p.sendq[0].work.what
        return self._busy_what()

    # -- closing ------------------------------------------------------------------------
    def abort(self, notice: bytes, close: bool = True):
        """Tell each peer why we give up (``notice``, an ABORT message) where our stream to it
        is at a message boundary, so it reads it where it expects a header; then close every
        socket, or leave that to :meth:`close_all` (``close=False``)."""
        self.torn_down = True
        self.anyq.clear()
        for p in self.peers.values():
            if p.sock is not None and not (p.sendq and p.sendq[0].started) and not p.left:
                try:
                    p.sock.send(notice)
                except OSError:
                    pass
        if close:
            self.close_all()

    def close_all(self):
        """Close the socket of every peer."""
        for p in self.peers.values():
            if p.sock is not None:
                self._close(p)

    def say_goodbye(self, bye: bool):
        """Close every socket (destroy_process_group), saying goodbye first where ``bye`` and
        nothing is queued to that peer."""
        self.torn_down = True
        self.anyq.clear()
        notice = pack_data_header(BYE, 0, 0, 0, 0, 0, 0)
        for p in self.peers.values():
            if p.sock is None:
                continue
            if bye and not p.sendq:
                try:
                    p.sock.send(notice)
                except OSError:
                    pass
            self._close(p)

    @staticmethod
    def _close(p: Peer):
        try:
            p.sock.close()
        except OSError:
            pass
        p.sock = None

    def close_wake_pipe(self):
        """Close the pipe that wakes the I/O thread, once it has stopped."""
        fds = (self._wake_r, self._wake_w)
        self._wake_w = -1
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass
