"""The event loop behind a master :class:`~tritensor.comm.store.TCPStore`, and its defences.

Why a module of its own: the server is the part of the store that faces whoever can connect,
so it carries the rules that keep strangers from taking it down, and they deserve one place:

* **Strangers cost almost nothing.** Until a connection passes the HMAC handshake of
  :mod:`.auth` it is read at most ``CLIENT_REPLY_LEN`` bytes (anything more stays in the
  kernel), it has ``auth_timeout`` seconds (2 by default) to finish, and at most
  ``max_unauthenticated`` such connections exist at once. Past the cap the *oldest* stranger
  is dropped, not the newcomer: refusing newcomers would let anyone lock legitimate clients
  out by holding the cap's worth of idle sockets, while evicting the oldest forces an
  attacker to out-connect a client's sub-millisecond handshake, over and over. Dropped and
  timed-out strangers are reset (no lingering state on either side); a client whose
  handshake was cut short that way sees a reset and reconnects.
* **Closing frees at once.** A closed connection leaves every table (connections,
  strangers, waiters, the deadline heap) immediately and its buffers are released.
* **Out of descriptors, it backs off.** When ``accept`` fails with EMFILE/ENFILE the loop
  first reclaims the oldest stranger's descriptor; when there is none it stops watching the
  listener for a growing pause (50 ms up to 1 s) instead of spinning on a listener that stays
  readable, logs once per episode, and keeps serving the clients it has.
* **Logs stay readable.** Refused connections are logged once, then counted: one summary
  line per ``REFUSAL_LOG_INTERVAL`` seconds says how many more and why.

After the handshake, requests are :mod:`.framing` frames, handled as before: a malformed
frame closes that connection only, and a ``get`` on a missing key parks until a ``set`` or
its deadline (the loop sleeps in ``select`` until the nearest deadline: no polling).
"""

from __future__ import annotations

import collections
import errno
import heapq
import itertools
import logging
import secrets
import selectors
import socket
import struct
import threading
import time

from . import auth
from ..errors import DistNetworkError
from .framing import FRAME, FrameError, decode_fields, encode_frame, parse_frame_header

log = logging.getLogger("tritensor.comm.store")

# opcodes
SET, GET, ADD, CAS, WAIT, CHECK, DELETE, NUM_KEYS, MULTI_GET, MULTI_SET, PING = range(1, 12)
# reply status; GONE answers the waits parked when the master gives up and closes the store
OK, TIMEOUT, ERROR, GONE = 0, 1, 2, 3

ROLE = b"store"
INTERNAL_PREFIX = "\x00tt/"
# The store's bookkeeping of who joined (see TCPStore): a count, a flag once world_size joined,
# and one key per rank a client joined with (TCPStore's rank=).
WORKERS_KEY = INTERNAL_PREFIX + "workers"
READY_KEY = INTERNAL_PREFIX + "workers_ready"
RANK_KEY = INTERNAL_PREFIX + "worker_rank/"
AUTH_TIMEOUT = 2.0  # seconds a connection has to authenticate (a handshake takes one round trip)
MAX_UNAUTHENTICATED = 128  # strangers held at once; past it the oldest is dropped
REFUSAL_LOG_INTERVAL = 10.0  # seconds between summary lines about refused connections
ACCEPT_BATCH = 64  # connections accepted per wake-up, so established clients are served between bursts
_BACKOFF_MIN, _BACKOFF_MAX = 0.05, 1.0
_OUT_OF_FDS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


class _Refusals:
    """Logs the first refused connection in full, then one summary per interval with counts by reason."""

    def __init__(self):
        self.until = None  # end of the current interval, or None when no interval is open
        self.reasons = collections.Counter()

    def add(self, who, reason):
        now = time.monotonic()
        if self.until is not None and now >= self.until:
            self.flush(now)
        if self.until is None:
            log.warning("TCPStore: refused %s: %s (further refusals are summarised every %gs)",
                        who, reason, REFUSAL_LOG_INTERVAL)
            self.until = now + REFUSAL_LOG_INTERVAL
        else:
            self.reasons[reason] += 1

    def due(self):
        """When the loop must wake up to write a summary (None: nothing to write)."""
        return self.until if self.reasons else None

    def flush(self, now):
        if self.until is None or now < self.until:
            return
        if self.reasons:
            n = sum(self.reasons.values())
            why = ", ".join(f"{r}: {c}" for r, c in self.reasons.most_common())
            log.warning("TCPStore: refused %d more connections in the last %gs (%s)", n, REFUSAL_LOG_INTERVAL, why)
            self.reasons.clear()
            self.until = now + REFUSAL_LOG_INTERVAL
        else:
            self.until = None


class _Conn:
    __slots__ = ("sock", "addr", "authed", "nonce", "inbuf", "outbuf", "pending", "auth_deadline", "wait_entry")

    def __init__(self, sock, addr, nonce, auth_deadline):
        self.sock = sock
        self.addr = addr
        self.authed = False
        self.nonce = nonce
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.pending = None  # (opcode, keys, deadline) of a parked waiting request
        self.auth_deadline = auth_deadline
        self.wait_entry = None  # its [deadline, tiebreak, conn] entry in the deadline heap


class StoreServer:
    """The event loop behind a master TCPStore. Runs in one daemon thread."""

    def __init__(self, host: str, port: int, secret: bytes, max_frame: int, *,
                 auth_timeout: float = AUTH_TIMEOUT, max_unauthenticated: int = MAX_UNAUTHENTICATED):
        self.secret = secret
        self.instance = secrets.token_bytes(16)  # which store this is: PING answers it (see TCPStore._connect)
        self.max_frame = max_frame
        self.auth_timeout = auth_timeout
        self.max_unauthenticated = max_unauthenticated
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _, _, _, addr = infos[0]
        self.listener = socket.socket(family, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.listener.bind(addr)
        except OSError as e:
            self.listener.close()
            raise DistNetworkError(f"TCPStore: cannot listen on {host}:{port}: {e}") from None
        self.listener.listen(socket.SOMAXCONN)
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.listener, selectors.EVENT_READ, None)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self.sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self.data: dict[bytes, bytes] = {}
        self.waiters: dict[bytes, set] = {}
        self.deadlines: list = []  # heap of [deadline, tiebreak, conn or None when cancelled]
        self._cancelled = 0
        self._tiebreak = itertools.count()
        self.conns: set[_Conn] = set()
        self.unauthed: dict[_Conn, None] = {}  # insertion order = accept order = auth deadline order
        self.refusals = _Refusals()
        self._accept_paused_until = None  # while out of descriptors: when to look at the listener again
        self._accept_backoff = _BACKOFF_MIN
        self._out_of_fds_since = None
        self._stop = False
        self._farewell = None  # (reason, ranks that never joined) told to parked waits on stop
        self.thread = threading.Thread(target=self._run, name=f"TCPStore-server:{self.port}", daemon=True)
        self.thread.start()

    def stop(self, reason: str | None = None, never_joined=()):
        """Stop the loop and close every connection. With a ``reason`` (the master gave up
        waiting for ``never_joined``), each request parked in a wait is first answered GONE with
        the reason and those ranks, so a rank waiting for another's key learns whom the group
        lacks instead of seeing a bare lost connection."""
        if reason is not None and self._farewell is None:
            self._farewell = (reason, list(never_joined))
        self._stop = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        if threading.current_thread() is not self.thread:
            self.thread.join(timeout=5)

    # -- loop ------------------------------------------------------------------------
    def _next_timeout(self):
        times = [t for t in (self.deadlines[0][0] if self.deadlines else None,
                             next(iter(self.unauthed)).auth_deadline if self.unauthed else None,
                             self.refusals.due(), self._accept_paused_until) if t is not None]
        return max(0.0, min(times) - time.monotonic()) if times else None

    def _run(self):
        try:
            while not self._stop:
                for key, mask in self.sel.select(self._next_timeout()):
                    if key.data == "wake":
                        try:
                            self._wake_r.recv(64)
                        except OSError:
                            pass
                    elif key.data is None:
                        self._accept()
                    else:
                        conn = key.data
                        if mask & selectors.EVENT_READ and conn in self.conns:
                            self._on_readable(conn)
                        if mask & selectors.EVENT_WRITE and conn in self.conns:
                            self._flush(conn)
                self._expire()
        except Exception:  # pragma: no cover - a bug in the loop must be loud
            log.exception("TCPStore server loop crashed")
        finally:
            if self._farewell is not None:
                reason, never = self._farewell
                fields = [reason.encode("utf-8"), ",".join(str(r) for r in never).encode()]
                for conn in list(self.conns):
                    if conn.pending is not None:
                        self._unpark(conn)
                        self._reply(conn, GONE, fields)  # a small frame: it fits the empty send buffer
            for conn in list(self.conns):
                self._close(conn)
            self.sel.close()
            self.listener.close()
            self._wake_r.close()
            self._wake_w.close()

    def _accept(self):
        for _ in range(ACCEPT_BATCH):
            try:
                sock, addr = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno not in _OUT_OF_FDS:  # e.g. ECONNABORTED: that one connection is gone
                    continue
                if self.unauthed:  # reclaim a stranger's descriptor for the newcomer
                    self._refuse(next(iter(self.unauthed)), "out of file descriptors, oldest unauthenticated dropped")
                    continue
                self._pause_accepting(e)
                return
            if self._out_of_fds_since is not None:
                log.warning("TCPStore: accepting connections again after %.1fs without file descriptors",
                            time.monotonic() - self._out_of_fds_since)
                self._out_of_fds_since = None
                self._accept_backoff = _BACKOFF_MIN
            if len(self.unauthed) >= self.max_unauthenticated:
                self._refuse(next(iter(self.unauthed)),
                             f"more than {self.max_unauthenticated} unauthenticated connections, oldest dropped")
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            hello, nonce = auth.server_challenge()
            conn = _Conn(sock, addr, nonce, time.monotonic() + self.auth_timeout)
            conn.outbuf += hello
            self.conns.add(conn)
            self.unauthed[conn] = None
            self.sel.register(sock, selectors.EVENT_READ, conn)
            self._flush(conn)

    def _pause_accepting(self, err):
        now = time.monotonic()
        if self._out_of_fds_since is None:
            self._out_of_fds_since = now
            log.warning("TCPStore: cannot accept connections: %s; pausing accepts (retrying every %gs at most) "
                        "and serving the %d connected clients", err, _BACKOFF_MAX, len(self.conns))
        try:
            self.sel.unregister(self.listener)
        except (KeyError, ValueError):
            pass
        self._accept_paused_until = now + self._accept_backoff
        self._accept_backoff = min(self._accept_backoff * 2, _BACKOFF_MAX)

    def _close(self, conn: _Conn, reset: bool = False):
        if conn not in self.conns:
            return
        self.conns.discard(conn)
        self.unauthed.pop(conn, None)
        if conn.pending is not None:
            self._unpark(conn)
        self._cancel_wait(conn)
        conn.inbuf = conn.outbuf = bytearray()  # free the buffers now, not when the last reference goes
        try:
            self.sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        if reset:  # RST: no orderly shutdown owed to a stranger, and the client can tell it from a refusal
            try:
                conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
        conn.sock.close()

    def _refuse(self, conn, reason, reset=True):
        self.refusals.add(conn.addr, reason)
        self._close(conn, reset=reset)

    def _cancel_wait(self, conn):
        if conn.wait_entry is not None:
            conn.wait_entry[2] = None
            conn.wait_entry = None
            self._cancelled += 1
            if self._cancelled > 64 and self._cancelled > len(self.deadlines) // 2:
                self.deadlines = [e for e in self.deadlines if e[2] is not None]
                heapq.heapify(self.deadlines)
                self._cancelled = 0

    def _expire(self):
        now = time.monotonic()
        while self.unauthed:
            conn = next(iter(self.unauthed))
            if conn.auth_deadline > now:
                break
            self._refuse(conn, f"not authenticated within {self.auth_timeout:g}s")
        while self.deadlines and self.deadlines[0][0] <= now:
            _, _, conn = heapq.heappop(self.deadlines)
            if conn is None:
                self._cancelled -= 1
                continue
            conn.wait_entry = None
            op, keys, _ = conn.pending
            missing = [k for k in keys if k not in self.data]
            self._unpark(conn)
            self._reply(conn, TIMEOUT, missing)
        self.refusals.flush(now)
        if self._accept_paused_until is not None and now >= self._accept_paused_until:
            self._accept_paused_until = None
            self.sel.register(self.listener, selectors.EVENT_READ, None)

    def _on_readable(self, conn: _Conn):
        # A stranger is read no further than its handshake reply: whatever else it sends stays
        # in the kernel's buffer, which the kernel bounds, and is dropped with the socket.
        budget = (1 << 18) if conn.authed else auth.CLIENT_REPLY_LEN - len(conn.inbuf)
        try:
            chunk = conn.sock.recv(budget)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if not chunk:
            self._close(conn)
            return
        conn.inbuf += chunk
        if not conn.authed:
            if len(conn.inbuf) < auth.CLIENT_REPLY_LEN:
                return
            reply = bytes(conn.inbuf)
            conn.inbuf.clear()
            proof = auth.server_verify(self.secret, ROLE, conn.nonce, reply)
            if proof is None:
                self._refuse(conn, "authentication failed", reset=False)
                return
            conn.authed = True
            del self.unauthed[conn]
            conn.outbuf += proof
            self._flush(conn)
            return
        self._process(conn)

    def _process(self, conn: _Conn):
        while conn in self.conns and conn.pending is None and len(conn.inbuf) >= FRAME.size:
            try:
                opcode, status, length = parse_frame_header(bytes(conn.inbuf[: FRAME.size]), self.max_frame)
            except FrameError as e:
                self._refuse(conn, f"bad frame: {e}", reset=False)
                return
            if len(conn.inbuf) < FRAME.size + length:
                return
            body = bytes(conn.inbuf[FRAME.size: FRAME.size + length])
            del conn.inbuf[: FRAME.size + length]
            try:
                fields = decode_fields(body)
                self._handle(conn, opcode, status, fields)
            except (FrameError, ValueError, struct.error) as e:
                self._refuse(conn, f"malformed request: {e}", reset=False)
                return
        # A client never has more than one request in flight; anything queued behind a
        # parked request is bounded so a misbehaving client cannot grow our memory.
        if conn in self.conns and len(conn.inbuf) > self.max_frame + FRAME.size:
            self._refuse(conn, "too much unsolicited data", reset=False)

    # -- requests --------------------------------------------------------------------
    def _handle(self, conn, op, status, f):
        data = self.data
        if op == SET:
            self._need(f, 2)
            self._set(f[0], f[1])
            self._reply(conn, OK, [])
        elif op == GET or op == WAIT or op == MULTI_GET:
            self._need(f, 1, exact=(op == GET))
            # status carries the wait timeout in milliseconds
            if all(k in data for k in f):
                self._answer_wait(conn, op, f)
            else:
                deadline = time.monotonic() + status / 1000.0
                conn.pending = (op, f, deadline)
                for k in f:
                    if k not in data:
                        self.waiters.setdefault(k, set()).add(conn)
                conn.wait_entry = [deadline, next(self._tiebreak), conn]
                heapq.heappush(self.deadlines, conn.wait_entry)
        elif op == ADD:
            self._need(f, 2)
            cur = data.get(f[0], b"0")
            try:
                new = int(cur) + int(f[1])
            except ValueError:
                self._reply(conn, ERROR, [b"add: the key's value is not an integer"])
                return
            self._set(f[0], str(new).encode())
            self._reply(conn, OK, [str(new).encode()])
        elif op == CAS:
            self._need(f, 3)
            key, expected, desired = f
            cur = data.get(key)
            if cur is None:
                if expected == b"":
                    self._set(key, desired)
                    out = desired
                else:
                    out = expected
            elif cur == expected:
                self._set(key, desired)
                out = desired
            else:
                out = cur
            self._reply(conn, OK, [out])
        elif op == CHECK:
            self._reply(conn, OK, [b"1" if all(k in data for k in f) else b"0"])
        elif op == DELETE:
            self._need(f, 1)
            existed = data.pop(f[0], None) is not None
            self._reply(conn, OK, [b"1" if existed else b"0"])
        elif op == NUM_KEYS:
            n = sum(1 for k in data if not k.startswith(INTERNAL_PREFIX.encode()))
            self._reply(conn, OK, [str(n).encode()])
        elif op == MULTI_SET:
            if len(f) % 2:
                raise ValueError("multi_set needs key/value pairs")
            for i in range(0, len(f), 2):
                self._set(f[i], f[i + 1])
            self._reply(conn, OK, [])
        elif op == PING:
            self._reply(conn, OK, [self.instance])
        else:
            raise ValueError(f"unknown opcode {op}")

    @staticmethod
    def _need(fields, n, exact=True):
        if (len(fields) != n) if exact else (len(fields) < n):
            raise ValueError(f"expected {n} fields, got {len(fields)}")

    def _set(self, key, value):
        self.data[key] = value
        parked = self.waiters.pop(key, None)
        if not parked:
            return
        for conn in parked:
            if conn.pending is None or conn not in self.conns:
                continue
            op, keys, _ = conn.pending
            if all(k in self.data for k in keys):
                self._unpark(conn)
                self._answer_wait(conn, op, keys)
                self._process(conn)

    def _unpark(self, conn):
        for k in conn.pending[1]:
            s = self.waiters.get(k)
            if s is not None:
                s.discard(conn)
                if not s:
                    del self.waiters[k]
        conn.pending = None
        self._cancel_wait(conn)

    def _answer_wait(self, conn, op, keys):
        if op == WAIT:
            self._reply(conn, OK, [])
        else:
            self._reply(conn, OK, [self.data[k] for k in keys])

    def _reply(self, conn, status, fields):
        conn.outbuf += encode_frame(0, fields, status)
        self._flush(conn)

    def _want_write(self, conn):
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.outbuf else 0)
        try:
            self.sel.modify(conn.sock, events, conn)
        except (KeyError, ValueError):
            pass

    def _flush(self, conn):
        while conn.outbuf:
            try:
                n = conn.sock.send(conn.outbuf)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self._close(conn)
                return
            del conn.outbuf[:n]
        self._want_write(conn)
