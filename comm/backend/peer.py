"""A connected peer of a process group and the requests posted to it.

Why this module exists: these are the data that :mod:`.peer_io` moves bytes for and that
:mod:`.failures` describes when something breaks; keeping them apart lets both read them
without importing each other. A :class:`Peer` holds its socket and two FIFO queues, of
posted sends and of posted receives, in program order; a request remembers its
:class:`~tritensor.comm.work.Work` and how far its bytes have moved.
"""

from __future__ import annotations

import collections
import socket

from .framing import DATA, DTYPE_NAMES

__all__ = ["Peer", "SendRequest", "RecvRequest", "AnyRecvRequest", "HDR"]

HDR = DATA.size  # bytes of a data header


class SendRequest:
    """One queued send to a peer: its header and payload buffers, the Work it belongs to, whether it may start
    yet and what runs when it is sent."""
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
        """Mark ``n`` more bytes as written by the socket, dropping buffers sent in full."""
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


class RecvRequest:
    """One expected message from a peer: the header it must carry, where its payload goes, the Work it belongs
    to and what runs when it has arrived."""
    __slots__ = ("expect", "hdr", "hview", "hpos", "target", "tpos", "tlen", "work", "on_done", "order", "p2p")

    def __init__(self, expect: bytes, target: memoryview | None, work, on_done, order: int = 0, p2p: bool = False):
        self.expect = expect
        self.order = order  # posting order among all receives of the engine (see AnyRecvRequest)
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


class AnyRecvRequest:
    """A send/recv receive from any rank (``recv(tensor, src=None)``), not yet matched.

    It waits in ``PeerIO.anyq`` rather than in one peer's queue. When it claims a peer's
    message it becomes an ordinary :class:`RecvRequest` at the front of that peer's queue, with
    the header already read (see :meth:`.peer_io.PeerIO._route`)."""

    __slots__ = ("expect", "tag", "target", "work", "on_done", "order")

    def __init__(self, expect: bytes, target: memoryview | None, work, on_done, order: int):
        self.expect = expect  # sequence number 0: stamped for the peer it claims
        self.tag = DATA.unpack(expect)[6]
        self.target = target
        self.work = work
        self.on_done = on_done
        self.order = order

    def describe(self) -> str:
        """The expected message in words, for a timeout's error (recv from any rank)."""
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
        self.sendq: collections.deque[SendRequest] = collections.deque()
        self.recvq: collections.deque[RecvRequest] = collections.deque()
        self.wblocked = False  # last send hit a full socket buffer: wait for POLLOUT
        self.early = False  # bytes of a later operation are waiting: stop watching until a recv is posted
        self.left = False  # the peer said goodbye (destroy_process_group)
        self.mask = 0
        self.p2p_recvd = 0  # send/recv messages taken from this peer: the next one's sequence number - 1
        # A header read on its own, before we know which receive takes its message (only
        # while an any-source receive may claim it; see PeerIO._route). shpos: bytes read.
        self.shdr = bytearray(HDR)
        self.sview = memoryview(self.shdr)
        self.shpos = 0

    def name(self) -> str:
        """The peer as errors name it: its global rank and address."""
        return f"rank {self.grank} ({self.addr})"
