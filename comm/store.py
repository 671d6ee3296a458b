"""``TCPStore``: the key-value store ranks use to find each other, as in torch.distributed.

One process (``is_master=True``) runs the server in a background thread; every process,
the master included, talks to it through a client connection. The server is a single
``selectors`` event loop with non-blocking sockets, so one slow or hostile client cannot
stall the others, and waits are event driven: a ``get`` on a missing key parks the request
until a ``set`` arrives or its deadline passes (the loop sleeps in ``select`` until the
nearest deadline -- no polling).

Safety: every connection first passes the HMAC handshake of :mod:`.auth`; until it does,
the server reads at most the fixed-size reply and never parses it. After that, requests
are :mod:`.framing` frames; a frame with a bad magic or version, an oversized length or a
malformed body closes *that* connection only. Keys whose name starts with ``"\\0tt/"`` are
the store's own bookkeeping and are not counted by :meth:`TCPStore.num_keys`.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import selectors
import socket
import struct
import threading
import time
import weakref
from datetime import timedelta

from . import auth
from .errors import DistNetworkError, DistStoreError, DistStoreTimeoutError
from .framing import FRAME, FrameError, decode_fields, encode_frame, parse_frame_header

__all__ = ["TCPStore", "Store"]

log = logging.getLogger(__name__)

# opcodes
SET, GET, ADD, CAS, WAIT, CHECK, DELETE, NUM_KEYS, MULTI_GET, MULTI_SET, PING = range(1, 12)
# reply status
OK, TIMEOUT, ERROR = 0, 1, 2

ROLE = b"store"
INTERNAL_PREFIX = "\x00tt/"
_WORKERS_KEY = INTERNAL_PREFIX + "workers"
_READY_KEY = INTERNAL_PREFIX + "workers_ready"
DEFAULT_TIMEOUT = timedelta(seconds=300)
DEFAULT_MAX_FRAME = 64 << 20  # a store value is metadata, not tensor data
AUTH_TIMEOUT = 10.0  # seconds an unauthenticated connection may stay open


def _seconds(timeout, name="timeout") -> float:
    if isinstance(timeout, timedelta):
        timeout = timeout.total_seconds()
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"{name}: expected a datetime.timedelta or seconds as a number, got {timeout!r}")
    if not timeout > 0:
        raise ValueError(f"{name}: expected a positive duration, got {timeout!r}")
    return float(timeout)


def _key(key, name="key") -> bytes:
    if isinstance(key, bytes):
        return key
    if not isinstance(key, str):
        raise TypeError(f"{name}: expected str, got {type(key).__name__}")
    return key.encode("utf-8")


def _value(value, name="value") -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{name}: expected str or bytes, got {type(value).__name__}")


# ---------------------------------------------------------------------------------- server


class _Conn:
    __slots__ = ("sock", "addr", "authed", "nonce", "inbuf", "outbuf", "pending", "auth_deadline")

    def __init__(self, sock, addr, nonce):
        self.sock = sock
        self.addr = addr
        self.authed = False
        self.nonce = nonce
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.pending = None  # (opcode, keys, deadline) of a parked waiting request
        self.auth_deadline = time.monotonic() + AUTH_TIMEOUT


class _StoreServer:
    """The event loop behind a master TCPStore. Runs in one daemon thread."""

    def __init__(self, host: str, port: int, secret: bytes, max_frame: int):
        self.secret = secret
        self.max_frame = max_frame
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _, _, _, addr = infos[0]
        self.listener = socket.socket(family, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.listener.bind(addr)
        except OSError as e:
            self.listener.close()
            raise DistNetworkError(f"TCPStore: cannot listen on {host}:{port}: {e}") from None
        self.listener.listen(128)
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.listener, selectors.EVENT_READ, None)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self.sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self.data: dict[bytes, bytes] = {}
        self.waiters: dict[bytes, set] = {}
        self.deadlines: list = []  # heap of (deadline, tiebreak, conn)
        self._tiebreak = itertools.count()
        self.conns: set[_Conn] = set()
        self._stop = False
        self.thread = threading.Thread(target=self._run, name=f"TCPStore-server:{self.port}", daemon=True)
        self.thread.start()

    def stop(self):
        self._stop = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        if threading.current_thread() is not self.thread:
            self.thread.join(timeout=5)

    # -- loop ------------------------------------------------------------------------
    def _run(self):
        try:
            while not self._stop:
                timeout = None
                if self.deadlines:
                    timeout = max(0.0, self.deadlines[0][0] - time.monotonic())
                for key, mask in self.sel.select(timeout):
                    if key.data == "wake":
                        try:
                            self._wake_r.recv(64)
                        except OSError:
                            pass
                    elif key.data is None:
                        self._accept()
                    else:
                        conn = key.data
                        if mask & selectors.EVENT_READ:
                            self._on_readable(conn)
                        if mask & selectors.EVENT_WRITE and conn in self.conns:
                            self._flush(conn)
                self._expire()
        except Exception:  # pragma: no cover - a bug in the loop must be loud
            log.exception("TCPStore server loop crashed")
        finally:
            for conn in list(self.conns):
                self._close(conn)
            self.sel.close()
            self.listener.close()
            self._wake_r.close()
            self._wake_w.close()

    def _accept(self):
        while True:
            try:
                sock, addr = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # e.g. EMFILE: keep serving the connections we have
                log.warning("TCPStore: accept failed: %s", e)
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            hello, nonce = auth.server_challenge()
            conn = _Conn(sock, addr, nonce)
            conn.outbuf += hello
            self.conns.add(conn)
            self.sel.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)
            heapq.heappush(self.deadlines, (conn.auth_deadline, next(self._tiebreak), conn))

    def _close(self, conn: _Conn):
        if conn not in self.conns:
            return
        self.conns.discard(conn)
        if conn.pending is not None:
            for k in conn.pending[1]:
                s = self.waiters.get(k)
                if s is not None:
                    s.discard(conn)
                    if not s:
                        del self.waiters[k]
            conn.pending = None
        try:
            self.sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()

    def _expire(self):
        now = time.monotonic()
        while self.deadlines and self.deadlines[0][0] <= now:
            deadline, _, conn = heapq.heappop(self.deadlines)
            if conn not in self.conns:
                continue
            if not conn.authed:
                if deadline == conn.auth_deadline:
                    log.info("TCPStore: closing %s: not authenticated within %.0fs", conn.addr, AUTH_TIMEOUT)
                    self._close(conn)
            elif conn.pending is not None and conn.pending[2] == deadline:
                op, keys, _ = conn.pending
                missing = [k for k in keys if k not in self.data]
                self._unpark(conn)
                self._reply(conn, TIMEOUT, missing)

    def _on_readable(self, conn: _Conn):
        try:
            chunk = conn.sock.recv(1 << 18)
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
            reply = bytes(conn.inbuf[: auth.CLIENT_REPLY_LEN])
            del conn.inbuf[: auth.CLIENT_REPLY_LEN]
            proof = auth.server_verify(self.secret, ROLE, conn.nonce, reply)
            if proof is None:
                log.warning("TCPStore: refused %s: authentication failed", conn.addr)
                self._close(conn)
                return
            conn.authed = True
            conn.outbuf += proof
            self._want_write(conn)
        self._process(conn)

    def _process(self, conn: _Conn):
        while conn in self.conns and conn.pending is None and len(conn.inbuf) >= FRAME.size:
            try:
                opcode, status, length = parse_frame_header(bytes(conn.inbuf[: FRAME.size]), self.max_frame)
            except FrameError as e:
                log.warning("TCPStore: closing %s: %s", conn.addr, e)
                self._close(conn)
                return
            if len(conn.inbuf) < FRAME.size + length:
                return
            body = bytes(conn.inbuf[FRAME.size: FRAME.size + length])
            del conn.inbuf[: FRAME.size + length]
            try:
                fields = decode_fields(body)
                self._handle(conn, opcode, status, fields)
            except (FrameError, ValueError, struct.error) as e:
                log.warning("TCPStore: closing %s: malformed request: %s", conn.addr, e)
                self._close(conn)
                return
        # A client never has more than one request in flight; anything queued behind a
        # parked request is bounded so a misbehaving client cannot grow our memory.
        if conn in self.conns and len(conn.inbuf) > self.max_frame + FRAME.size:
            log.warning("TCPStore: closing %s: too much unsolicited data", conn.addr)
            self._close(conn)

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
                heapq.heappush(self.deadlines, (deadline, next(self._tiebreak), conn))
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
            self._reply(conn, OK, [])
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


# ---------------------------------------------------------------------------------- client


class Store:
    """Base class, as ``torch.distributed.Store``."""


class TCPStore(Store):
    """A TCP key-value store with torch.distributed.TCPStore's constructor and methods.

    ``TCPStore(host_name, port, world_size=None, is_master=False, timeout=timedelta(seconds=300),
    wait_for_workers=True, *, secret=None)``. The master listens on ``host_name``
    (``"127.0.0.1"``/``"localhost"`` keep it on loopback; ``port=0`` picks a free port,
    see :attr:`port`). ``secret`` overrides ``$TRITENSOR_COMM_SECRET``; the master
    generates one into the environment when neither is set, so processes it starts inherit it.

    Values are bytes (``str`` values are UTF-8 encoded on ``set``); ``get`` waits up to the
    store's timeout for a missing key. The client is thread-safe (one request at a time).
    """

    def __init__(self, host_name: str, port: int, world_size: int | None = None, is_master: bool = False,
                 timeout=DEFAULT_TIMEOUT, wait_for_workers: bool = True, *, secret=None,
                 max_frame: int = DEFAULT_MAX_FRAME):
        if not isinstance(host_name, str):
            raise TypeError(f"host_name: expected str, got {type(host_name).__name__}")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < 65536:
            raise ValueError(f"port: expected an int in [0, 65535], got {port!r}")
        if world_size is not None and (isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1):
            raise ValueError(f"world_size: expected None or a positive int, got {world_size!r}")
        if not is_master and port == 0:
            raise ValueError("port: a client (is_master=False) needs the master's actual port, not 0")
        self._timeout = _seconds(timeout)
        self._host = host_name
        self._max_frame = max_frame
        if secret is None and is_master:
            auth.ensure_secret()
        self._secret = auth.get_secret(secret)
        self._lock = threading.Lock()
        self._sock = None
        self._server = None
        self.world_size = world_size
        if is_master:
            self._server = _StoreServer(host_name, port, self._secret, max_frame)
            port = self._server.port
            weakref.finalize(self, self._server.stop)
        self._port = port
        self._connect(time.monotonic() + self._timeout)
        self._call(ADD, [_WORKERS_KEY.encode(), b"1"])  # counted like torch's init key
        if world_size is not None:
            count = int(self._call(ADD, [_WORKERS_KEY.encode(), b"0"])[0])
            if count >= world_size:
                self._call(SET, [_READY_KEY.encode(), b"1"])
            if is_master and wait_for_workers:
                try:
                    self._wait_keys([_READY_KEY.encode()], self._timeout)
                except DistStoreTimeoutError:
                    n = int(self._call(ADD, [_WORKERS_KEY.encode(), b"0"])[0])
                    raise DistStoreTimeoutError(
                        f"TCPStore: timed out after {self._timeout:g}s waiting for {world_size} "
                        f"workers to connect to {host_name}:{port}; {n} connected"
                    ) from None

    # -- properties as in torch ----------------------------------------------------
    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        return self._port

    @property
    def timeout(self) -> timedelta:
        return timedelta(seconds=self._timeout)

    def set_timeout(self, timeout) -> None:
        self._timeout = _seconds(timeout)

    # -- connection ------------------------------------------------------------------
    def _connect(self, deadline):
        delay = 0.01
        last = None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DistNetworkError(
                    f"TCPStore: could not connect to {self._host}:{self._port} within "
                    f"{self._timeout:g}s: {last}")
            try:
                sock = socket.create_connection((self._host, self._port), timeout=min(remaining, 10.0))
            except OSError as e:
                last = e
                time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
                delay = min(delay * 2, 1.0)
                continue
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                auth.client_handshake(sock, self._secret, ROLE, min(remaining, AUTH_TIMEOUT))
            except auth.AuthenticationError as e:
                sock.close()
                raise DistStoreError(f"TCPStore: {self._host}:{self._port}: {e}") from None
            except (OSError, TimeoutError) as e:
                sock.close()
                last = e
                continue
            self._sock = sock
            return

    def _drop(self):
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def _call(self, op, fields, status=0, reply_timeout=None, connect_timeout=None):
        """Send one request and read its reply; returns the reply's fields.

        ``connect_timeout`` bounds reconnecting (default: the store's timeout); failure
        paths pass a short one so that a dead store host cannot stall error reporting."""
        frame = encode_frame(op, fields, status)
        if len(frame) - FRAME.size > self._max_frame:
            raise ValueError(f"TCPStore: request of {len(frame)} bytes exceeds the {self._max_frame}-byte frame limit")
        wait = self._timeout if reply_timeout is None else reply_timeout
        with self._lock:
            if self._sock is None:
                self._connect(time.monotonic() + (self._timeout if connect_timeout is None else connect_timeout))
            deadline = time.monotonic() + wait + 5.0  # the server answers timeouts itself
            try:
                self._sock.settimeout(max(0.001, deadline - time.monotonic()))
                self._sock.sendall(frame)
                header = auth.recv_exact(self._sock, FRAME.size, deadline, "the store's reply")
                _, rstatus, length = parse_frame_header(header, self._max_frame)
                body = auth.recv_exact(self._sock, length, deadline, "the store's reply") if length else b""
                rfields = decode_fields(body) if length else []
            except (OSError, TimeoutError, FrameError) as e:
                # The stream is in an unknown state: drop it, the next call reconnects.
                self._drop()
                if isinstance(e, TimeoutError):
                    raise DistStoreTimeoutError(f"TCPStore {self._host}:{self._port}: no reply: {e}") from None
                raise DistStoreError(f"TCPStore {self._host}:{self._port}: connection lost: {e}") from None
        if rstatus == TIMEOUT:
            missing = ", ".join(repr(k.decode("utf-8", "replace")) for k in rfields)
            raise DistStoreTimeoutError(
                f"TCPStore {self._host}:{self._port}: timed out after {wait:g}s waiting for key(s) {missing}")
        if rstatus == ERROR:
            raise DistStoreError(f"TCPStore: {rfields[0].decode('utf-8', 'replace') if rfields else 'error'}")
        return rfields

    def _wait_keys(self, keys, timeout, op=WAIT):
        ms = max(1, min(int(timeout * 1000), 0xFFFFFFFF))
        return self._call(op, keys, status=ms, reply_timeout=timeout)

    # -- the torch.distributed.Store API --------------------------------------------
    def set(self, key: str, value) -> None:
        self._call(SET, [_key(key), _value(value)])

    def get(self, key: str) -> bytes:
        return self._wait_keys([_key(key)], self._timeout, GET)[0]

    def add(self, key: str, amount: int) -> int:
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise TypeError(f"amount: expected int, got {type(amount).__name__}")
        return int(self._call(ADD, [_key(key), str(amount).encode()])[0])

    def compare_set(self, key: str, expected_value, desired_value) -> bytes:
        return self._call(CAS, [_key(key), _value(expected_value, "expected_value"),
                                _value(desired_value, "desired_value")])[0]

    def _compare_set_quick(self, key, expected_value, desired_value, timeout: float = 2.0) -> bytes:
        """compare_set that gives up within seconds: used to report failures, when the
        rank hosting the store may be the one that died."""
        return self._call(CAS, [_key(key), _value(expected_value), _value(desired_value)],
                          reply_timeout=timeout, connect_timeout=timeout)[0]

    def wait(self, keys, timeout=None) -> None:
        if isinstance(keys, (str, bytes)):
            raise TypeError("keys: expected a list of str")
        t = self._timeout if timeout is None else _seconds(timeout)
        ks = [_key(k, "keys") for k in keys]
        if ks:
            self._wait_keys(ks, t)

    def check(self, keys) -> bool:
        if isinstance(keys, (str, bytes)):
            raise TypeError("keys: expected a list of str")
        return self._call(CHECK, [_key(k, "keys") for k in keys])[0] == b"1"

    def delete_key(self, key: str) -> bool:
        return self._call(DELETE, [_key(key)])[0] == b"1"

    def num_keys(self) -> int:
        return int(self._call(NUM_KEYS, [])[0])

    def multi_get(self, keys) -> list[bytes]:
        ks = [_key(k, "keys") for k in keys]
        return self._wait_keys(ks, self._timeout, MULTI_GET) if ks else []

    def multi_set(self, keys, values) -> None:
        keys, values = list(keys), list(values)
        if len(keys) != len(values):
            raise ValueError(f"multi_set: got {len(keys)} keys but {len(values)} values")
        fields = []
        for k, v in zip(keys, values):
            fields += [_key(k, "keys"), _value(v, "values")]
        if fields:
            self._call(MULTI_SET, fields)

    def close(self) -> None:
        """Close this client (and stop the server if this is the master). Not in torch."""
        with self._lock:
            self._drop()
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __repr__(self):
        return f"TCPStore({self._host!r}, {self._port}, master={self._server is not None})"
