"""Connecting the ranks of a process group to each other, safely while anyone can connect.

Why a module of its own: a rank's listener is reachable by every process that can reach its
port, so setting up the mesh is the one place where an unauthenticated stranger can make a
rank wait. The listener therefore never waits on one connection: every accepted connection
runs the HMAC handshake of :mod:`.auth` and the hello exchange *concurrently*, non-blocking
under one :mod:`selectors` loop, each with a short deadline (:data:`HANDSHAKE_TIMEOUT`). An
idle or garbage-sending connection costs one slot for at most that long and delays no real
peer. At most :data:`MAX_PENDING` connections beyond the ranks still expected are
authenticated at once; one more is closed before the challenge is sent, which the
connecting rank recognises ("crowded out"): it retries until the group's deadline and then
says so, instead of reporting a misleading authentication failure.

Ranks find each other through the store: each rank publishes its addresses under
``prefix + "addr/<rank>"``; rank i connects to every lower rank and accepts every higher one,
so setup cannot deadlock. A rank that never publishes is named in the timeout error.
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
import zlib

from . import auth
from .errors import DistNetworkError, DistStoreError, DistStoreTimeoutError, DistTimeoutError
from .peer import Peer

__all__ = ["connect_mesh", "HANDSHAKE_TIMEOUT", "MAX_PENDING"]

log = logging.getLogger(__name__)

ROLE = b"pg"
HANDSHAKE_TIMEOUT = 3.0  # seconds an accepted connection has to authenticate and say hello
MAX_PENDING = 64  # connections authenticated at once per rank, beyond the ranks still expected
STORE_LOSS_SLACK = 1.0  # seconds before the deadline in which losing the store counts as the host's timeout
UNIX_ENV = "TRITENSOR_COMM_UNIX"  # "0" forces TCP between ranks on the same host
SOCKET_BUFFER = int(os.environ.get("TRITENSOR_COMM_SOCKBUF", 4 << 20))  # Unix-domain sockets
TCP_SOCKET_BUFFER = int(os.environ.get("TRITENSOR_COMM_TCP_SOCKBUF", 0))  # 0: the kernel's autotuning

_HELLO = struct.Struct("!8sIIQ")  # magic, rank, world size, group token
_HELLO_MAGIC = b"TTPEER\x00\x01"


def _tune(sock: socket.socket):
    if sock.family != getattr(socket, "AF_UNIX", None):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if not TCP_SOCKET_BUFFER:
            # TCP sizes its own buffers (net.ipv4.tcp_{w,r}mem, up to 32 MB received here);
            # a fixed size switches that off and capped the ring at 8 MB in flight per link.
            return
        size = TCP_SOCKET_BUFFER
    else:
        size = SOCKET_BUFFER
    if size > 0:
        # Large buffers let a whole ring chunk sit in flight while the peer reduces the
        # previous one (the kernel caps these at net.core.{w,r}mem_max).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)


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
        lst.listen(socket.SOMAXCONN)
        return lst, path
    except OSError:
        return None, None


# ------------------------------------------------------------------------ connecting side


class _CrowdedOut(Exception):
    """The listener closed our connection before its challenge: it is full."""


def _connect_once(tcp_addr: str, qpath: str, same_host: bool, deadline: float, grank: int):
    """One connection to rank ``grank``'s listener (Unix socket first on the same host)."""
    if qpath and same_host and os.environ.get(UNIX_ENV, "1") != "0":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            sock.connect(qpath)
            return sock, f"{tcp_addr.rsplit(':', 1)[0]} via unix socket"
        except OSError:
            sock.close()
    host, port = tcp_addr.rsplit(":", 1)
    return _connect_retry(host, int(port), deadline, grank), tcp_addr


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


def _handshake_client(sock, secret, deadline, rank, world_size, token, q, grank, addr, timeout):
    """Authenticate to rank ``grank``'s listener and exchange hellos (blocking, until ``deadline``)."""
    _tune(sock)
    # The first byte of the challenge, or EOF if the listener turned us away because it is full.
    sock.settimeout(max(0.01, deadline - time.monotonic()))
    try:
        first = sock.recv(1, socket.MSG_PEEK)
    except socket.timeout:
        raise DistTimeoutError(f"timed out after {timeout:g}s waiting for rank {grank} at {addr} to accept "
                               "the connection (it has not reached process-group setup)") from None
    except ConnectionResetError:
        first = b""
    if not first:
        raise _CrowdedOut()
    try:
        auth.client_handshake(sock, secret, ROLE, max(0.01, deadline - time.monotonic()))
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        sock.sendall(_HELLO.pack(_HELLO_MAGIC, rank, world_size, token))
        reply = auth.recv_exact(sock, _HELLO.size, deadline, f"the hello of rank {grank}")
    except TimeoutError as e:
        raise DistTimeoutError(f"timed out after {timeout:g}s authenticating with rank {grank} at {addr}: "
                               f"{e}") from None
    magic, qr, ws, tok = _HELLO.unpack(reply)
    if magic != _HELLO_MAGIC or qr != q or ws != world_size or tok != token:
        raise DistNetworkError(f"{addr} is not rank {grank} of this group")


def _connect_peer(q, tcp_addr, qpath, same_host, secret, deadline, rank, world_size, token, grank, timeout):
    """Connect to lower rank ``q``; retry while its listener is crowded out by other connections."""
    crowded = 0
    delay = 0.02
    while True:
        sock, addr = _connect_once(tcp_addr, qpath, same_host, deadline, grank)
        try:
            _handshake_client(sock, secret, deadline, rank, world_size, token, q, grank, addr, timeout)
            return Peer(q, grank, sock, addr)
        except _CrowdedOut:
            sock.close()
            crowded += 1
        except BaseException:
            sock.close()
            raise
        if time.monotonic() + delay >= deadline:
            raise DistNetworkError(
                f"could not connect to rank {grank} at {tcp_addr} within {timeout:g}s: its listener closed "
                f"the connection before authenticating {crowded} time(s); this rank was crowded out by other "
                f"connections waiting to authenticate there (more than {MAX_PENDING} at once: is something "
                "else flooding that port?)")
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


# ------------------------------------------------------------------------- listening side


class _Pending:
    """A connection being authenticated: what we still have to send and how much we want to read."""

    __slots__ = ("sock", "name", "deadline", "out", "inbuf", "want", "stage", "nonce", "qr")

    def __init__(self, sock, name, deadline):
        self.sock = sock
        self.name = name
        self.deadline = deadline
        self.out, self.nonce = auth.server_challenge()
        self.inbuf = b""
        self.want = auth.CLIENT_REPLY_LEN
        self.stage = "reply"  # then "hello", then "done" (our hello still being sent)
        self.qr = -1  # the group rank its hello claims


class _Listener:
    """Authenticates every connection to this rank's listeners at once (see the module docstring)."""

    def __init__(self, listeners, secret, rank, global_ranks, token, bind_host):
        self.sel = selectors.DefaultSelector()
        self.secret = secret
        self.rank = rank
        self.global_ranks = global_ranks
        self.world_size = len(global_ranks)
        self.token = token
        self.bind_host = bind_host
        self.pending: dict[int, _Pending] = {}
        self.peers: dict[int, Peer] = {}
        self.crowded = 0  # connections turned away because too many were authenticating
        self.refused = 0  # connections that failed the handshake or the hello
        for lst in listeners:
            lst.setblocking(False)
            self.sel.register(lst, selectors.EVENT_READ, None)

    def close(self):
        for pc in list(self.pending.values()):
            self._drop(pc)
        self.sel.close()

    def _refuse(self, pc: _Pending, why: str):
        self.refused += 1
        (log.warning if self.refused == 1 else log.debug)(
            "rank %d: refused a connection from %s: %s%s", self.rank, pc.name, why,
            " (further refusals are logged at debug level)" if self.refused == 1 else "")
        self._drop(pc)

    def _drop(self, pc: _Pending):
        self.pending.pop(pc.sock.fileno(), None)
        try:
            self.sel.unregister(pc.sock)
        except (KeyError, ValueError):
            pass
        pc.sock.close()

    def summary(self) -> str:
        parts = []
        if self.crowded:
            parts.append(f"{self.crowded} connection(s) were turned away because too many were waiting to "
                         "authenticate")
        if self.refused:
            parts.append(f"{self.refused} connection(s) failed authentication or were not ranks of this group")
        return f" ({'; '.join(parts)})" if parts else ""

    def serve(self, peers: dict, deadline: float) -> None:
        """Accept and authenticate until every higher rank is in ``peers`` or ``deadline`` passes."""
        expected = self.world_size - 1 - self.rank
        self.peers = peers
        while sum(1 for q in peers if q > self.rank) < expected:
            now = time.monotonic()
            if now >= deadline:
                return
            for pc in [pc for pc in self.pending.values() if pc.deadline <= now]:
                self._refuse(pc, f"it did not authenticate within {HANDSHAKE_TIMEOUT:g}s")
            wake = min([deadline] + [pc.deadline for pc in self.pending.values()])
            for key, events in self.sel.select(max(0.0, wake - time.monotonic())):
                if key.data is None:
                    self._accept(key.fileobj, deadline, cap=MAX_PENDING + expected)
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

    def _accept(self, lst, deadline, cap):
        while True:
            try:
                sock, addr = lst.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # e.g. out of descriptors: retry on the next round
                log.debug("rank %d: accept failed: %s", self.rank, e)
                return
            unix = lst.family == getattr(socket, "AF_UNIX", None)
            name = f"{self.bind_host} via unix socket" if unix else f"{addr[0]}:{addr[1]}"
            if len(self.pending) >= cap:
                self.crowded += 1
                if self.crowded == 1:
                    log.warning("rank %d: %d connections are waiting to authenticate; turning new ones away "
                                "(is something flooding this port?)", self.rank, len(self.pending))
                sock.close()
                continue
            sock.setblocking(False)
            pc = _Pending(sock, name, min(deadline, time.monotonic() + HANDSHAKE_TIMEOUT))
            self.pending[sock.fileno()] = pc
            self.sel.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, pc)

    def _write(self, pc: _Pending):
        if pc.out:
            try:
                n = pc.sock.send(pc.out)
            except (BlockingIOError, InterruptedError):
                return
            pc.out = pc.out[n:]
        if not pc.out:
            if pc.stage == "done":  # our hello is out: this is a peer now
                self._drop_keep_socket(pc)
                _tune(pc.sock)
                pc.sock.setblocking(True)
                self.peers[pc.qr] = Peer(pc.qr, self.global_ranks[pc.qr], pc.sock, pc.name)
            else:
                self.sel.modify(pc.sock, selectors.EVENT_READ, pc)

    def _drop_keep_socket(self, pc: _Pending):
        self.pending.pop(pc.sock.fileno(), None)
        self.sel.unregister(pc.sock)

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
            proof = auth.server_verify(self.secret, ROLE, pc.nonce, msg)
            if proof is None:
                self._refuse(pc, "it failed authentication (wrong or missing secret)")
                return
            pc.out, pc.stage, pc.want = proof, "hello", _HELLO.size
        elif pc.stage == "hello":
            magic, qr, ws, tok = _HELLO.unpack(msg)
            if magic != _HELLO_MAGIC or ws != self.world_size or tok != self.token or not self.rank < qr < ws:
                self._refuse(pc, "it is not a rank of this group")
                return
            if qr in self.peers or any(p.qr == qr for p in self.pending.values() if p.stage == "done"):
                self._refuse(pc, f"rank {qr} is already connecting")
                return
            pc.qr = qr
            pc.out, pc.stage = _HELLO.pack(_HELLO_MAGIC, self.rank, self.world_size, self.token), "done"
        else:
            self._refuse(pc, "it sent bytes before the handshake finished")
            return
        self.sel.modify(pc.sock, selectors.EVENT_WRITE, pc)


# ------------------------------------------------------------------------------- the mesh


def _wait_for_rank(store, prefix, q, rank, global_ranks, deadline, timeout):
    """Wait until group rank ``q`` has published its addresses; on timeout, name every lower
    rank still missing (not the store key)."""
    try:
        store.wait([f"{prefix}addr/{q}"], max(0.001, deadline - time.monotonic()))
    except DistStoreTimeoutError:
        try:
            missing = [global_ranks[k] for k in range(q, rank) if not store.check([f"{prefix}addr/{k}"])]
        except DistStoreError:  # the store's host gave up at its own deadline and is gone: q at least
            missing = [global_ranks[q]]
        raise DistTimeoutError(
            f"timed out after {timeout:g}s waiting for rank(s) {missing} to join the process group "
            "(they have not called init_process_group/new_group, or cannot reach the store)") from None
    except DistStoreError as e:
        # The store's host went away during the wait. Near our deadline that is the host giving
        # up on the same missing rank (its timeout began a moment before ours): report it as the
        # timeout it is. Either way, name the rank we were waiting for, not a store key.
        why = (f"waiting for rank(s) [{global_ranks[q]}] to join the process group (and any later rank "
               f"below {global_ranks[rank]}); the store was lost meanwhile: {e}")
        if time.monotonic() >= deadline - STORE_LOSS_SLACK:
            raise DistTimeoutError(f"timed out after {timeout:g}s {why}") from None
        raise DistNetworkError(f"lost the store while {why}") from None


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
    server = None
    me = _host_id()
    try:
        if rank < world_size - 1:
            tcp = socket.create_server((bind_host, 0), backlog=socket.SOMAXCONN)
            listeners.append(tcp)
            host, port = tcp.getsockname()[:2]
            ulst, upath = _unix_listener()
            if ulst is not None:
                listeners.append(ulst)
            store.set(f"{prefix}addr/{rank}", f"{host}:{port}\n{me}\n{upath or ''}")
        for q in range(rank):
            _wait_for_rank(store, prefix, q, rank, global_ranks, deadline, timeout)
            tcp_addr, hid, qpath = store.get(f"{prefix}addr/{q}").decode().split("\n")
            peers[q] = _connect_peer(q, tcp_addr, qpath, hid == me, secret, deadline, rank, world_size, token,
                                     global_ranks[q], timeout)
        if listeners:
            server = _Listener(listeners, secret, rank, global_ranks, token, bind_host)
            server.serve(peers, deadline)
            if len(peers) < world_size - 1:
                missing = [global_ranks[q] for q in range(world_size) if q != rank and q not in peers]
                raise DistTimeoutError(f"timed out after {timeout:g}s waiting for rank(s) {missing} to "
                                       f"connect{server.summary()}")
            if server.refused > 1 or server.crowded:
                log.warning("rank %d: process group set up;%s", rank, server.summary())
    except BaseException:
        for p in peers.values():
            p.sock.close()
        raise
    finally:
        if server is not None:
            server.close()
        for lst in listeners:
            lst.close()
        if upath:
            try:
                os.unlink(upath)
            except OSError:
                pass
    return peers
