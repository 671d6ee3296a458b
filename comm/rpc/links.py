"""A worker's outgoing RPC connections: one per peer, made on first use, checked, remade once.

Why a module of its own: sending is where a worker meets the two ways a peer can be out of
reach, and each must end in one clear error naming the peer rather than a bare socket error.
A listener crowded by strangers turns the connection away before authenticating; the
connection is retried until the send's deadline (:func:`tritensor.comm.backend.gate.connect`), then
reported as crowded out. A peer that died leaves a connection its kernel closed: it is
noticed before the send (:func:`still_open`; over TCP a send would still succeed once and its
reply never come), and the reconnection is refused, "the worker is not running". A send that
fails on a connection that had worked is retried once on a new one; the peer discards a frame
cut short, so nothing runs twice.
"""

from __future__ import annotations

import os
import socket
import threading
import time

from ..backend import auth, gate
from .. import DistNetworkError
from . import wire

__all__ = ["Links", "tune", "still_open", "ROLE", "SOCKET_BUFFER"]

ROLE = b"rpc"
SOCKET_BUFFER = int(os.environ.get("TRITENSOR_RPC_SOCKBUF", 4 << 20))


def tune(sock):
    """No Nagle delay for small frames; socket buffers that hold a 1 MB tensor whole, so a
    sender hands it to the kernel in one call instead of waking up as the reader drains it
    (the kernel caps them at net.core.{w,r}mem_max)."""
    if sock.family != getattr(socket, "AF_UNIX", None):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if SOCKET_BUFFER > 0:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)


def still_open(sock) -> bool:
    """Whether the peer has not closed this connection (on which it never sends anything)."""
    try:
        return sock.recv(1, wire.PEEK_NOWAIT) != b""
    except (BlockingIOError, InterruptedError):
        return True
    except OSError:
        return False


class Links:
    """The outgoing connections of worker ``rank`` to ``workers`` (their addresses from the
    rendezvous); ``cap`` is the peers' listener budget, named when crowded out."""

    def __init__(self, rank, workers, addrs, unix_paths, secret, connect_timeout, cap):
        self.rank, self.workers, self.addrs, self.unix_paths = rank, workers, addrs, unix_paths
        self.secret, self.connect_timeout, self.cap = secret, connect_timeout, cap
        self.out: dict = {}  # dst -> (socket, send lock)
        self._lock = threading.Lock()  # guards out
        self._connecting = [threading.Lock() for _ in workers]  # one connect at a time per peer

    def who(self, dst) -> str:
        """Worker ``dst`` as errors name it: its name, id, host and port."""
        host, port = self.addrs[dst]
        return f"worker '{self.workers[dst].name}' (id {dst}) at {host}:{port}"

    def send(self, dst, head_env, bufs, deadline=None, before=()):
        """Send one frame to ``dst`` (after the buffer-less frames ``before``, in the same system
        call); ``deadline`` (time.monotonic) bounds making a connection."""
        deadline = deadline or time.monotonic() + self.connect_timeout
        for attempt in (0, 1):
            sock, lock, fresh = self._get(dst, deadline)
            try:
                with lock:
                    wire.send_frame(sock, head_env, bufs, before)
                return
            except OSError as e:
                self._drop(dst, sock)
                if fresh or attempt:
                    raise DistNetworkError(f"RPC to {self.who(dst)}: the connection was lost while sending "
                                           f"({type(e).__name__}: {e}); the worker may have died") from None

    def try_send(self, dst, head_env, bufs, before, run_blocking) -> bool:
        """Send a frame without blocking, for a thread that must never block (a reader). False
        when that cannot begin now (no open connection to ``dst``, or another thread is sending
        on it): nothing was sent, the caller sends it from a thread that may block. Otherwise
        the frame leaves at once, or, when the socket fills up part-way, ``run_blocking(fn)``
        gets ``fn`` to run on such a thread: it sends the rest (the connection stays this
        frame's until then) or, when that fails, the whole frame again on a new connection."""
        c = self.out.get(dst)
        if c is None:
            return False
        sock, lock = c
        if not lock.acquire(blocking=False):
            return False
        try:
            rest = wire.send_parts(sock, wire.frame_parts(head_env, bufs, before), nowait=True) \
                if still_open(sock) else None
        except OSError:
            rest = None
        if not rest:  # sent, or nothing could be: the connection is free again
            lock.release()
            if rest is None:
                self._drop(dst, sock)
                return False
            return True

        def finish():
            try:
                wire.send_parts(sock, rest)
            except OSError:  # cut short: the peer discards it; the whole frame again, once
                lock.release()
                self._drop(dst, sock)
                self.send(dst, head_env, bufs)
                return
            lock.release()

        run_blocking(finish)
        return True

    def close(self):
        """Close every outgoing connection."""
        with self._lock:
            for sock, _ in self.out.values():
                sock.close()
            self.out.clear()

    def _get(self, dst, deadline):
        """(socket, send lock, fresh) of the connection to ``dst``: the open one, or a new one."""
        with self._connecting[dst]:
            c = self.out.get(dst)
            if c is not None and still_open(c[0]):
                return c + (False,)
            if c is not None:
                self._drop(dst, c[0])
            c = (self._connect(dst, deadline), threading.Lock())
            with self._lock:
                self.out[dst] = c
            return c + (True,)

    def _drop(self, dst, sock):
        with self._lock:
            if self.out.get(dst, (None,))[0] is sock:
                del self.out[dst]
        sock.close()

    def _connect(self, dst, deadline):
        """Connect, authenticate and say HELLO to ``dst`` before ``deadline`` (Unix socket first
        on the same host), retried while its listener is crowded by strangers."""
        who = self.who(dst)
        timeout = max(0.0, deadline - time.monotonic())

        def open_socket():
            if self.unix_paths[dst]:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.settimeout(max(0.01, deadline - time.monotonic()))
                    sock.connect(self.unix_paths[dst])
                    return sock
                except OSError:  # gone or not ours to reach: TCP as across hosts
                    sock.close()
            return socket.create_connection(self.addrs[dst], timeout=max(0.01, deadline - time.monotonic()))

        def handshake(sock):
            tune(sock)
            gate.await_challenge(sock, deadline)
            auth.client_handshake(sock, self.secret, ROLE, max(0.01, deadline - time.monotonic()))
            sock.sendall(wire.HEADER.pack(wire.MAGIC, wire.VERSION, wire.HELLO, self.rank, 0, 0))
            sock.settimeout(None)

        try:
            return gate.connect(open_socket, handshake, deadline, who, timeout, self.cap)
        except auth.AuthenticationError as e:
            raise auth.AuthenticationError(f"{who}: {e}") from None
        except ConnectionRefusedError as e:
            raise DistNetworkError(f"could not connect to {who}: {e}: nothing listens there, the worker is not "
                                   "running (it may have died)") from None
        except TimeoutError:
            raise DistNetworkError(f"could not connect to {who}: no answer within {timeout:.3g}s") from None
        except OSError as e:
            raise DistNetworkError(f"could not connect to {who}: {type(e).__name__}: {e}") from None
