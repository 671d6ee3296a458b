"""A worker's outgoing RPC connections: one per peer, made on first use.

Why a module of its own: connecting is where a worker meets a listener crowded by strangers,
which turns the connection away before authenticating; the connection is retried until the
send's deadline (:func:`tritensor.comm.gate.connect`), then reported as crowded out, naming
the peer, rather than as a bad secret.
"""

from __future__ import annotations

import os
import socket
import threading
import time

from .. import auth, gate
from . import wire

__all__ = ["Links", "tune", "ROLE", "SOCKET_BUFFER"]

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
        host, port = self.addrs[dst]
        return f"worker '{self.workers[dst].name}' (id {dst}) at {host}:{port}"

    def send(self, dst, head_env, bufs, deadline=None):
        """Send one frame to ``dst``; ``deadline`` (time.monotonic) bounds making a connection."""
        sock, lock = self._get(dst, deadline or time.monotonic() + self.connect_timeout)
        try:
            with lock:
                wire.send_frame(sock, head_env, bufs)
        except BaseException:
            self._drop(dst, sock)
            raise

    def close(self):
        with self._lock:
            for sock, _ in self.out.values():
                sock.close()
            self.out.clear()

    def _get(self, dst, deadline):
        """(socket, send lock) of the connection to ``dst``, made on first use."""
        with self._connecting[dst]:
            c = self.out.get(dst)
            if c is None:
                c = (self._connect(dst, deadline), threading.Lock())
                with self._lock:
                    self.out[dst] = c
            return c

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
