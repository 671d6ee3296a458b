"""Letting peers in through a listener that anyone can connect to, without strangers crowding them out.

Why a module of its own: a process-group rank's listener (:mod:`.mesh`, during setup) and an RPC
worker's listener (:mod:`tritensor.comm.rpc.agent`, for the life of the job) face the same problem. Whoever
can reach the port can connect, and must not be able to make a real peer wait or fail. Both
use this one gate:

* **Listening side** (:class:`Gate`): every accepted connection runs the HMAC handshake of
  :mod:`.auth` and then a fixed-size hello *concurrently*, non-blocking under one
  :mod:`selectors` loop, each with a short deadline (:data:`HANDSHAKE_TIMEOUT`). An idle or
  garbage-sending connection costs one slot for at most that long and delays no real peer.
  At most ``cap`` connections are authenticating at once; one more is closed before the
  challenge is sent, so nothing is read from it, and the connecting side can tell.
* **Connecting side** (:func:`connect`, :func:`await_challenge`): a connection closed before
  the challenge arrived was turned away by a full listener, not refused for its secret
  (:class:`CrowdedOut`). The caller retries, backing off, until its deadline, then says it
  was crowded out, instead of reporting a misleading authentication failure.

The gate also makes the listeners (:func:`unix_listener`, for peers on the same machine, whose
:func:`host_id` matches) that both users accept on.
"""

from __future__ import annotations

import logging
import os
import secrets
import selectors
import socket
import struct
import tempfile
import time

from . import auth
from ..errors import DistNetworkError

__all__ = ["Gate", "Refused", "CrowdedOut", "connect", "await_challenge", "unix_listener", "host_id",
           "HANDSHAKE_TIMEOUT", "MAX_PENDING", "UNIX_ENV"]

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT = 3.0  # seconds an accepted connection has to authenticate and say hello
MAX_PENDING = 64  # connections authenticating at once, beyond the peers expected
UNIX_ENV = "TRITENSOR_COMM_UNIX"  # "0" forces TCP between peers on the same host


def host_id() -> str:
    """Identifies this machine (and boot): peers with equal ids try Unix sockets first."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}"


def unix_listener():
    """A Unix-domain listener in a private (0700) directory and its path, or (None, None)."""
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
        lst.listen(socket.SOMAXCONN)
        return lst, path
    except OSError:
        return None, None


# ------------------------------------------------------------------------ connecting side


class CrowdedOut(Exception):
    """The listener closed our connection before its challenge: it is full."""


def await_challenge(sock: socket.socket, deadline: float) -> None:
    """Wait for the first byte of the listener's challenge. Raises :class:`CrowdedOut` when the
    listener closes the connection first (it is full), ``socket.timeout`` at ``deadline``."""
    sock.settimeout(max(0.01, deadline - time.monotonic()))
    try:
        first = sock.recv(1, socket.MSG_PEEK)
    except ConnectionResetError:
        first = b""
    if not first:
        raise CrowdedOut()


def connect(open_socket, handshake, deadline: float, who: str, timeout: float, cap: int) -> socket.socket:
    """``handshake(open_socket())`` until it succeeds; retried, backing off, while the listener of
    ``who`` turns us away as crowded (``handshake`` calls :func:`await_challenge`). Any other
    error closes the socket and propagates. ``cap`` is the listener's budget, for the message."""
    crowded = 0
    delay = 0.02
    while True:
        sock = open_socket()
        try:
            handshake(sock)
            return sock
        except CrowdedOut:
            sock.close()
            crowded += 1
        except BaseException:
            sock.close()
            raise
        if time.monotonic() + delay >= deadline:
            raise DistNetworkError(
                f"could not connect to {who} within {timeout:.3g}s: its listener closed the connection before "
                f"authenticating {crowded} time(s); we were crowded out by other connections waiting to "
                f"authenticate there (more than {cap} at once: is something else flooding that port?)")
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


# ------------------------------------------------------------------------- listening side


class Refused(Exception):
    """Raised by a gate's ``on_hello`` to turn a connection away; the text says why."""


class _Pending:
    """A connection being authenticated: what we still have to send and how much we want to read."""

    __slots__ = ("sock", "name", "deadline", "out", "inbuf", "want", "stage", "nonce", "tag")

    def __init__(self, sock, name, deadline):
        self.sock = sock
        self.name = name
        self.deadline = deadline
        self.out, self.nonce = auth.server_challenge()
        self.inbuf = b""
        self.want = auth.CLIENT_REPLY_LEN
        self.stage = "reply"  # then "hello", then "done" (our reply to the hello still being sent)
        self.tag = None  # what on_hello made of the hello


class Gate:
    """Authenticates every connection to ``listeners`` at once (see the module docstring).

    ``on_hello(msg) -> (reply, tag)`` judges the peer's ``hello_len``-byte hello (raising
    :class:`Refused`); once ``reply`` is sent, ``on_ready(sock, tag, name)`` receives the
    blocking socket. ``describe`` names this side in log lines ("rank 0")."""

    def __init__(self, listeners, secret: bytes, role: bytes, hello_len: int, on_hello, on_ready, *,
                 describe: str, bind_host: str, timeout: float = HANDSHAKE_TIMEOUT):
        self.sel = selectors.DefaultSelector()
        self.secret, self.role, self.hello_len = secret, role, hello_len
        self.on_hello, self.on_ready = on_hello, on_ready
        self.describe, self.bind_host, self.timeout = describe, bind_host, timeout
        self.pending: dict[int, _Pending] = {}
        self.crowded = 0  # connections turned away because too many were authenticating
        self.refused = 0  # connections that failed the handshake or the hello
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self.sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        for lst in listeners:
            lst.setblocking(False)
            self.sel.register(lst, selectors.EVENT_READ, None)

    def finishing(self):
        """The tags of connections whose hello was accepted and whose reply is still being sent."""
        return [pc.tag for pc in self.pending.values() if pc.stage == "done"]

    def wake(self):
        """Make :meth:`serve` look at its ``done`` condition now (from another thread)."""
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def close(self):
        """Drop every connection still waiting to be authenticated and close the selector."""
        for pc in list(self.pending.values()):
            self._drop(pc)
        self.sel.close()
        self._wake_r.close()
        self._wake_w.close()

    def summary(self) -> str:
        """What the gate turned away (too many waiting to authenticate, failed authentication or not a peer),
        for the error a caller sees."""
        parts = []
        if self.crowded:
            parts.append(f"{self.crowded} connection(s) were turned away because too many were waiting to "
                         "authenticate")
        if self.refused:
            parts.append(f"{self.refused} connection(s) failed authentication or were not peers of this group")
        return f" ({'; '.join(parts)})" if parts else ""

    def serve(self, done, deadline: float, cap: int) -> None:
        """Accept and authenticate until ``done()`` or ``deadline``; at most ``cap`` at once."""
        while not done():
            now = time.monotonic()
            if now >= deadline:
                return
            for pc in [pc for pc in self.pending.values() if pc.deadline <= now]:
                self._refuse(pc, f"it did not authenticate within {self.timeout:g}s")
            wake = min([deadline] + [pc.deadline for pc in self.pending.values()])
            for key, events in self.sel.select(min(max(0.0, wake - time.monotonic()), 3600.0)):
                if key.data == "wake":
                    while self._drain_wake():
                        pass
                    continue
                if key.data is None:
                    self._accept(key.fileobj, deadline, cap)
                    continue
                pc = key.data
                if pc.sock.fileno() not in self.pending:
                    continue  # dropped earlier in this round
                try:
                    if events & selectors.EVENT_WRITE:
                        self._write(pc)
                    if events & selectors.EVENT_READ and pc.sock.fileno() in self.pending:
                        self._read(pc)
                except (OSError, struct.error) as e:
                    self._refuse(pc, str(e) or type(e).__name__)

    def _drain_wake(self) -> bool:
        try:
            return bool(self._wake_r.recv(4096))
        except OSError:
            return False

    def _refuse(self, pc: _Pending, why: str):
        self.refused += 1
        (log.warning if self.refused == 1 else log.debug)(
            "%s: refused a connection from %s: %s%s", self.describe, pc.name, why,
            " (further refusals are logged at debug level)" if self.refused == 1 else "")
        self._drop(pc)

    def _drop(self, pc: _Pending, close: bool = True):
        self.pending.pop(pc.sock.fileno(), None)
        try:
            self.sel.unregister(pc.sock)
        except (KeyError, ValueError):
            pass
        if close:
            pc.sock.close()

    def _accept(self, lst, deadline, cap):
        while True:
            try:
                sock, addr = lst.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # e.g. out of descriptors: retry on the next round
                log.debug("%s: accept failed: %s", self.describe, e)
                return
            unix = lst.family == getattr(socket, "AF_UNIX", None)
            name = f"{self.bind_host} via unix socket" if unix else f"{addr[0]}:{addr[1]}"
            if len(self.pending) >= cap:
                self.crowded += 1
                if self.crowded == 1:
                    log.warning("%s: %d connections are waiting to authenticate; turning new ones away "
                                "(is something flooding this port?)", self.describe, len(self.pending))
                sock.close()
                continue
            sock.setblocking(False)
            pc = _Pending(sock, name, min(deadline, time.monotonic() + self.timeout))
            self.pending[sock.fileno()] = pc
            self.sel.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, pc)

    def _write(self, pc: _Pending):
        if pc.out:
            try:
                n = pc.sock.send(pc.out)
            except (BlockingIOError, InterruptedError):
                return
            pc.out = pc.out[n:]
        if pc.out:
            return
        if pc.stage == "done":
            self._admit(pc)
        else:
            self.sel.modify(pc.sock, selectors.EVENT_READ, pc)

    def _admit(self, pc: _Pending):
        """Our last byte is out: the connection is a peer's now."""
        self._drop(pc, close=False)
        pc.sock.setblocking(True)
        self.on_ready(pc.sock, pc.tag, pc.name)

    def _read(self, pc: _Pending):
        try:
            data = pc.sock.recv(pc.want - len(pc.inbuf))  # never more than the step needs
        except (BlockingIOError, InterruptedError):
            return
        if not data:
            self._refuse(pc, "it closed the connection during the handshake")
            return
        pc.inbuf += data
        if len(pc.inbuf) < pc.want:
            return
        msg, pc.inbuf = pc.inbuf, b""
        if pc.stage == "reply":
            proof = auth.server_verify(self.secret, self.role, pc.nonce, msg)
            if proof is None:
                self._refuse(pc, "it failed authentication (wrong or missing secret)")
                return
            pc.out, pc.stage, pc.want = proof, "hello", self.hello_len
        elif pc.stage == "hello":
            try:
                pc.out, pc.tag = self.on_hello(msg)
            except Refused as e:
                self._refuse(pc, str(e))
                return
            pc.stage = "done"
            if not pc.out:
                self._admit(pc)
                return
        else:
            self._refuse(pc, "it sent bytes before the handshake finished")
            return
        self.sel.modify(pc.sock, selectors.EVENT_WRITE, pc)
