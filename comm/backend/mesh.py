"""Connecting the ranks of a process group to each other, safely while anyone can connect.

Why a module of its own: a rank's listener is reachable by every process that can reach its
port, so setting up the mesh is the one place where an unauthenticated stranger can make a
rank wait. Connections come in through a :class:`.gate.Gate`: every one runs the HMAC
handshake of :mod:`.auth` and the hello exchange concurrently, each with a short deadline
(:data:`HANDSHAKE_TIMEOUT`), at most :data:`MAX_PENDING` beyond the ranks still expected at
once; a connecting rank crowded out by strangers retries until the group's deadline and then
says so (:func:`.gate.connect`), instead of reporting a misleading authentication failure.

Ranks find each other through the store: each rank publishes its addresses under
``prefix + "addr/<rank>"``; rank i connects to every lower rank and accepts every higher one,
so setup cannot deadlock. A rank that never publishes is named in the timeout error.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import time
import zlib

from . import auth, gate
from ..errors import DistNetworkError, DistStoreError, DistStoreTimeoutError, DistTimeoutError
from .gate import UNIX_ENV, host_id, unix_listener
from .peer import Peer
from .store_server import RANK_KEY, READY_KEY

__all__ = ["connect_mesh", "HANDSHAKE_TIMEOUT", "MAX_PENDING"]

log = logging.getLogger(__name__)

ROLE = b"pg"
HANDSHAKE_TIMEOUT = gate.HANDSHAKE_TIMEOUT  # seconds an accepted connection has to authenticate and say hello
MAX_PENDING = gate.MAX_PENDING  # connections authenticated at once per rank, beyond the ranks still expected
STORE_LOSS_SLACK = 1.0  # seconds before the deadline in which losing the store counts as the host's timeout
STORE_QUERY_TIMEOUT = 0.5  # seconds a question to the store after a timed-out wait may spend reconnecting
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


# ------------------------------------------------------------------------ connecting side


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
    try:
        gate.await_challenge(sock, deadline)  # CrowdedOut if the listener turned us away because it is full
    except socket.timeout:
        raise DistTimeoutError(f"timed out after {timeout:g}s waiting for rank {grank} at {addr} to accept "
                               "the connection (it has not reached process-group setup)") from None
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
    addr = []

    def open_socket():
        sock, a = _connect_once(tcp_addr, qpath, same_host, deadline, grank)
        addr[:] = [a]
        return sock

    def handshake(sock):
        _handshake_client(sock, secret, deadline, rank, world_size, token, q, grank, addr[0], timeout)

    sock = gate.connect(open_socket, handshake, deadline, f"rank {grank} at {tcp_addr}", timeout, MAX_PENDING)
    return Peer(q, grank, sock, addr[0])


class _Hellos:
    """This rank's side of the hello exchange, for the gate: who may connect, and our answer."""

    def __init__(self, rank, global_ranks, token, peers):
        self.rank, self.global_ranks, self.token, self.peers = rank, global_ranks, token, peers
        self.world_size = len(global_ranks)
        self.gate = None

    def on_hello(self, msg):
        magic, qr, ws, tok = _HELLO.unpack(msg)
        if magic != _HELLO_MAGIC or ws != self.world_size or tok != self.token or not self.rank < qr < ws:
            raise gate.Refused("it is not a rank of this group")
        if qr in self.peers or qr in self.gate.finishing():
            raise gate.Refused(f"rank {qr} is already connecting")
        return _HELLO.pack(_HELLO_MAGIC, self.rank, self.world_size, self.token), qr

    def on_ready(self, sock, qr, name):
        _tune(sock)
        self.peers[qr] = Peer(qr, self.global_ranks[qr], sock, name)


# ------------------------------------------------------------------------------- the mesh


def _check(store, key: str) -> bool:
    """``store.check([key])``, giving up within :data:`STORE_QUERY_TIMEOUT` when the store is gone.

    Asked after this rank's wait timed out, when the store's host may have given up at the same
    moment: a plain check would spend the store's whole timeout reconnecting to it."""
    quick = getattr(store, "_check_quick", None)
    return quick([key], STORE_QUERY_TIMEOUT) if quick is not None else store.check([key])


def _not_in_store(store, global_ranks, rank):
    """The group's ranks that never reached the store, while its host still waits for them.

    A rank that reached the store but not the group may simply be blocked behind them: the
    store's host (rank 0) publishes its address only once every rank has joined the store. So
    when the store counts its workers by rank (``init_process_group``'s does, with ``rank=``)
    and is not complete, those ranks are the ones the group waits for. [] when the store does
    not count by rank or is complete."""
    if not _check(store, f"{RANK_KEY}{global_ranks[rank]}") or _check(store, READY_KEY):
        return []
    return [g for g in global_ranks if not _check(store, f"{RANK_KEY}{g}")]


def _wait_for_rank(store, prefix, q, rank, global_ranks, deadline, timeout):
    """Wait until group rank ``q`` has published its addresses; on timeout, name the ranks the
    group waits for (not the store key): the ranks that never reached the store, if any, else
    every lower rank still missing."""
    try:
        store.wait([f"{prefix}addr/{q}"], max(0.001, deadline - time.monotonic()))
    except DistStoreTimeoutError:
        try:
            missing = _not_in_store(store, global_ranks, rank) or [
                global_ranks[k] for k in range(q, rank) if not _check(store, f"{prefix}addr/{k}")]
        except (DistStoreError, DistNetworkError):  # the store's host gave up at its own deadline and is gone
            missing = [global_ranks[q]]  # q at least
        raise DistTimeoutError(
            f"timed out after {timeout:g}s waiting for rank(s) {missing} to join the process group "
            "(they have not called init_process_group/new_group, or cannot reach the store)") from None
    except DistStoreError as e:
        never = [r for r in getattr(e, "never_joined", ()) if r in global_ranks]
        if never:
            # The store's host gave up waiting for ranks that never reached the store, and said
            # which before closing it: they are whom the group waits for (rank q, the host itself
            # perhaps, was only waiting for them too).
            raise DistTimeoutError(
                f"timed out waiting for rank(s) {never} to join the process group (they have not called "
                f"init_process_group/new_group, or cannot reach the store): {e}") from None
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
    me = host_id()
    try:
        if rank < world_size - 1:
            tcp = socket.create_server((bind_host, 0), backlog=socket.SOMAXCONN)
            listeners.append(tcp)
            host, port = tcp.getsockname()[:2]
            ulst, upath = unix_listener()
            if ulst is not None:
                listeners.append(ulst)
            store.set(f"{prefix}addr/{rank}", f"{host}:{port}\n{me}\n{upath or ''}")
        for q in range(rank):
            _wait_for_rank(store, prefix, q, rank, global_ranks, deadline, timeout)
            tcp_addr, hid, qpath = store.get(f"{prefix}addr/{q}").decode().split("\n")
            peers[q] = _connect_peer(q, tcp_addr, qpath, hid == me, secret, deadline, rank, world_size, token,
                                     global_ranks[q], timeout)
        if listeners:
            hellos = _Hellos(rank, global_ranks, token, peers)
            server = hellos.gate = gate.Gate(listeners, secret, ROLE, _HELLO.size, hellos.on_hello, hellos.on_ready,
                                             describe=f"rank {rank}", bind_host=bind_host, timeout=HANDSHAKE_TIMEOUT)
            expected = world_size - 1 - rank
            server.serve(lambda: sum(1 for q in peers if q > rank) >= expected, deadline, MAX_PENDING + expected)
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
