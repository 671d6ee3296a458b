"""``TCPStore``: the key-value store ranks use to find each other, as in torch.distributed.

One process (``is_master=True``) runs the server in a background thread; every process,
the master included, talks to it through a client connection. The server is a single
``selectors`` event loop with non-blocking sockets, so one slow or hostile client cannot
stall the others, and waits are event driven: a ``get`` on a missing key parks the request
until a ``set`` arrives or its deadline passes (the loop sleeps in ``select`` until the
nearest deadline -- no polling).

Safety: every connection first passes the HMAC handshake of :mod:`.backend.auth`; until it does,
the server reads at most the fixed-size reply and never parses it, and strangers are
bounded in number, time and memory (see :mod:`.backend.store_server`, which holds the server).
After that, requests are :mod:`.backend.framing` frames; a frame with a bad magic or version, an
oversized length or a malformed body closes *that* connection only. Keys whose name starts with ``"\\0tt/"`` are
the store's own bookkeeping and are not counted by :meth:`TCPStore.num_keys`.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
import weakref
from datetime import timedelta

from .backend import auth
from .backend.framing import FRAME, FrameError, decode_fields, encode_frame, parse_frame_header
from .backend.store_server import (  # noqa: F401  (opcodes and limits are part of this module's surface)
    ADD, AUTH_TIMEOUT, CAS, CHECK, DELETE, ERROR, GET, GONE, INTERNAL_PREFIX, MAX_UNAUTHENTICATED, MULTI_GET,
    MULTI_SET, NUM_KEYS, OK, PING, RANK_KEY, READY_KEY, ROLE, SET, TIMEOUT, WAIT, WORKERS_KEY, StoreServer,
)
from .errors import DistNetworkError, DistStoreError, DistStoreTimeoutError

__all__ = ["TCPStore", "Store", "PrefixStore"]

log = logging.getLogger(__name__)

_WORKERS_KEY = WORKERS_KEY
_READY_KEY = READY_KEY
_RANK_KEY = RANK_KEY  # + a client's rank, set when it joins with rank=
DEFAULT_TIMEOUT = timedelta(seconds=300)
DEFAULT_MAX_FRAME = 64 << 20  # a store value is metadata, not tensor data


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


# ---------------------------------------------------------------------------------- client


# No whitespace or control characters (a NUL among them); anything else goes to the resolver, which
# encodes non-ASCII names (IDNA) and refuses what it cannot encode (the UnicodeError below).
_HOST_CHARS = re.compile(r"[^\s\x00-\x1f\x7f]+")


def _check_host(host_name: str, port: int) -> None:
    """Resolve ``host_name`` once, up front: a name that can never resolve is the caller's
    mistake (a ValueError naming it), not something to retry until the timeout."""
    if not host_name.strip():
        raise ValueError(f"host_name: expected a host name or IP address (e.g. '127.0.0.1'), got {host_name!r}")
    # What no resolver can answer is refused before one is asked: a machine without DNS answers every
    # name "temporary failure", which must stay a retryable network error for a well-formed name.
    if not _HOST_CHARS.fullmatch(host_name) or len(host_name) > 253 or \
            any(len(label) > 63 for label in host_name.split(".")):
        raise ValueError(f"host_name: {host_name!r} is not a valid host name or IP address")
    if host_name.rstrip(".").lower().endswith(".invalid"):  # reserved never to resolve (RFC 6761)
        raise ValueError(f"host_name: cannot resolve {host_name!r}: the .invalid domain never resolves")
    try:
        socket.getaddrinfo(host_name, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        if e.errno in (socket.EAI_AGAIN, getattr(socket, "EAI_SYSTEM", None)):  # a resolver hiccup, not a bad name
            raise DistNetworkError(f"TCPStore: host_name {host_name!r}: name resolution failed: {e}") from None
        raise ValueError(f"host_name: cannot resolve {host_name!r}: {e.strerror or e}") from None
    except (UnicodeError, ValueError) as e:  # a label over 63 characters, an embedded NUL ...
        raise ValueError(f"host_name: {host_name!r} is not a valid host name: {e}") from None


class Store:
    """Base class, as ``torch.distributed.Store``."""


class PrefixStore(Store):
    """A store whose keys are ``prefix + "/" + key`` in ``store``, as ``torch.distributed.PrefixStore``:
    what a backend created through ``Backend.register_backend`` (without the extended API) gets,
    so the keys of different groups never meet."""

    def __init__(self, prefix: str, store: Store):
        if not isinstance(prefix, str):
            raise TypeError(f"prefix: expected str, got {type(prefix).__name__}")
        if not isinstance(store, Store):
            raise TypeError(f"store: expected a tritensor.comm.Store, got {type(store).__name__}")
        self._prefix = prefix
        self._store = store

    @property
    def underlying_store(self) -> Store:
        """torch's PrefixStore.underlying_store: the store the prefixed keys live in."""
        return self._store

    def _k(self, key) -> str:
        return f"{self._prefix}/{_key(key).decode('utf-8')}"

    def set(self, key, value) -> None:
        """Store.set under the prefix."""
        self._store.set(self._k(key), value)

    def get(self, key) -> bytes:
        """Store.get under the prefix (waits for the key)."""
        return self._store.get(self._k(key))

    def add(self, key, amount: int) -> int:
        """Store.add under the prefix: the counter after adding ``amount``."""
        return self._store.add(self._k(key), amount)

    def compare_set(self, key, expected_value, desired_value) -> bytes:
        """Store.compare_set under the prefix."""
        return self._store.compare_set(self._k(key), expected_value, desired_value)

    def wait(self, keys, timeout=None) -> None:
        """Store.wait for the prefixed keys."""
        if isinstance(keys, (str, bytes)):
            raise TypeError("keys: expected a list of str")
        self._store.wait([self._k(k) for k in keys], timeout)

    def check(self, keys) -> bool:
        """Store.check: whether all the prefixed keys exist."""
        if isinstance(keys, (str, bytes)):
            raise TypeError("keys: expected a list of str")
        return self._store.check([self._k(k) for k in keys])

    def delete_key(self, key) -> bool:
        """Store.delete_key under the prefix: whether it existed."""
        return self._store.delete_key(self._k(key))

    def multi_get(self, keys) -> list:
        """Store.multi_get of the prefixed keys."""
        return self._store.multi_get([self._k(k) for k in keys])

    def multi_set(self, keys, values) -> None:
        """Store.multi_set of the prefixed keys."""
        self._store.multi_set([self._k(k) for k in keys], values)

    def num_keys(self) -> int:
        """Store.num_keys of the underlying store (as torch's PrefixStore counts)."""
        return self._store.num_keys()

    @property
    def timeout(self):
        """The underlying store's timeout."""
        return self._store.timeout

    def __repr__(self):
        return f"PrefixStore({self._prefix!r}, {self._store!r})"


class TCPStore(Store):
    """A TCP key-value store with torch.distributed.TCPStore's constructor and methods.

    ``TCPStore(host_name, port, world_size=None, is_master=False, timeout=timedelta(seconds=300),
    wait_for_workers=True, *, secret=None, rank=None)``. The master listens on ``host_name``
    (``"127.0.0.1"``/``"localhost"`` keep it on loopback; ``port=0`` picks a free port,
    see :attr:`port`). ``secret`` overrides ``$TRITENSOR_COMM_SECRET``; the master
    generates one into the environment when neither is set, so processes it starts inherit it.

    Values are bytes (``str`` values are UTF-8 encoded on ``set``); ``get`` waits up to the
    store's timeout for a missing key. The client is thread-safe (one request at a time).

    ``rank`` (not in torch) is the rank this client joins as: a master that times out waiting for
    ``world_size`` workers then names the ranks that never joined. ``init_process_group`` and
    ``init_rpc`` pass it; a client without one is only counted.
    """

    def __init__(self, host_name: str, port: int, world_size: int | None = None, is_master: bool = False,
                 timeout=DEFAULT_TIMEOUT, wait_for_workers: bool = True, *, secret=None,
                 max_frame: int = DEFAULT_MAX_FRAME, auth_timeout=AUTH_TIMEOUT,
                 max_unauthenticated: int = MAX_UNAUTHENTICATED, rank: int | None = None):
        if not isinstance(host_name, str):
            raise TypeError(f"host_name: expected str, got {type(host_name).__name__}")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < 65536:
            raise ValueError(f"port: expected an int in [0, 65535], got {port!r}")
        if world_size is not None and (isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1):
            raise ValueError(f"world_size: expected None or a positive int, got {world_size!r}")
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 0
                                 or (world_size is not None and rank >= world_size)):
            raise ValueError(f"rank: expected None or an int in [0, world_size), got {rank!r}")
        if not is_master and port == 0:
            raise ValueError("port: a client (is_master=False) needs the master's actual port, not 0")
        if isinstance(max_unauthenticated, bool) or not isinstance(max_unauthenticated, int) or max_unauthenticated < 1:
            raise ValueError(f"max_unauthenticated: expected a positive int, got {max_unauthenticated!r}")
        self._auth_timeout = _seconds(auth_timeout, "auth_timeout")
        _check_host(host_name, port)
        self._timeout = _seconds(timeout)
        self._host = host_name
        self._max_frame = max_frame
        if secret is None and is_master:
            auth.ensure_secret()
        self._secret = auth.get_secret(secret)
        self._lock = threading.Lock()
        self._sock = None
        self._instance = None  # the master's instance id, learned on the first connection
        self._server = None
        self.world_size = world_size
        if is_master:
            self._server = StoreServer(host_name, port, self._secret, max_frame, auth_timeout=self._auth_timeout,
                                       max_unauthenticated=max_unauthenticated)
            port = self._server.port
            weakref.finalize(self, self._server.stop)
        self._port = port
        self._connect(time.monotonic() + self._timeout)
        if rank is not None:  # before the count: a counted client's rank is always there to read
            self._call(SET, [f"{_RANK_KEY}{rank}".encode(), b"1"])
        self._call(ADD, [_WORKERS_KEY.encode(), b"1"])  # counted like torch's init key
        if world_size is not None:
            count = int(self._call(ADD, [_WORKERS_KEY.encode(), b"0"])[0])
            if count >= world_size:
                self._call(SET, [_READY_KEY.encode(), b"1"])
            if is_master and wait_for_workers:
                self._wait_for_workers(world_size, self._timeout)

    def _wait_for_workers(self, world_size: int, timeout: float) -> None:
        """The master's wait for ``world_size`` workers. On timeout it gives up: the store closes,
        and first tells every rank parked in a wait which ranks never joined (so their errors
        name those ranks, not the rank whose key they were waiting for: this one, which had
        joined), then this raises naming them."""
        try:
            self._wait_keys([_READY_KEY.encode()], timeout)
        except DistStoreTimeoutError:
            text, missing = self._who_joined(world_size)
            msg = (f"TCPStore: timed out after {timeout:g}s waiting for {world_size} workers to connect to "
                   f"{self._host}:{self._port}; {text}")
            self._drop()
            if self._server is not None:
                self._server.stop(msg, missing)
                self._server = None
            raise DistStoreTimeoutError(msg) from None

    def _who_joined(self, world_size: int):
        """How many workers joined and, by the ranks they joined with, which ranks are missing:
        (the text, the missing ranks)."""
        n = int(self._call(ADD, [_WORKERS_KEY.encode(), b"0"])[0])
        seen = [r for r in range(world_size) if self._call(CHECK, [f"{_RANK_KEY}{r}".encode()])[0] == b"1"]
        missing = [r for r in range(world_size) if r not in seen]
        if len(seen) == n:
            return f"{n} connected; missing rank(s) {missing}", missing
        return (f"{n} connected, {n - len(seen)} of them without a rank (TCPStore's rank=) or with a repeated one; "
                f"rank(s) not seen: {missing}"), missing

    # -- properties as in torch ----------------------------------------------------
    @property
    def host(self) -> str:
        """torch's TCPStore.host: the server's host name."""
        return self._host

    @property
    def port(self) -> int:
        """torch's TCPStore.port: the server's port."""
        return self._port

    @property
    def timeout(self) -> timedelta:
        """torch's TCPStore.timeout: how long get and wait wait for a key."""
        return timedelta(seconds=self._timeout)

    def set_timeout(self, timeout) -> None:
        """torch's Store.set_timeout: the wait limit for later calls."""
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
                auth.client_handshake(sock, self._secret, ROLE, min(remaining, self._auth_timeout))
            except auth.AuthenticationError as e:
                sock.close()
                raise DistStoreError(f"TCPStore: {self._host}:{self._port}: {e}") from None
            except (OSError, TimeoutError) as e:  # e.g. reset by a master shedding a flood: try again
                sock.close()
                last = e
                time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
                delay = min(delay * 2, 1.0)
                continue
            self._sock = sock
            self._check_instance()
            return

    def _check_instance(self):
        """Make sure a (re)connection reached the store this client joined, not another one.

        A client reconnects after a dropped connection. If the master died meanwhile and some
        other job's master now listens on the same port with the same secret (tests on one
        machine share both), the reconnect would land in a stranger's key space: a barrier count
        there would pass without the ranks it waits for. The server's random instance id (its
        PING reply) is read on the first connection and compared on every later one."""
        rstatus, rfields = self._exchange_status(encode_frame(PING, []), self._auth_timeout + 5.0)
        if rstatus != OK or len(rfields) != 1:
            self._drop()
            raise DistStoreError(f"TCPStore {self._host}:{self._port}: unexpected reply to a ping (status {rstatus})")
        instance = rfields[0]
        if self._instance is None:
            self._instance = instance
        elif instance != self._instance:
            self._drop()
            raise DistStoreError(
                f"TCPStore {self._host}:{self._port}: reconnected to a different store than the one this "
                f"client joined (its master restarted, or another job took the port); refusing to use it")

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
            rstatus, rfields = self._exchange_status(frame, wait + 5.0)  # the server answers timeouts itself
        if rstatus == TIMEOUT:
            missing = ", ".join(repr(k.decode("utf-8", "replace")) for k in rfields)
            raise DistStoreTimeoutError(
                f"TCPStore {self._host}:{self._port}: timed out after {wait:g}s waiting for key(s) {missing}")
        if rstatus == ERROR:
            raise DistStoreError(f"TCPStore: {rfields[0].decode('utf-8', 'replace') if rfields else 'error'}")
        if rstatus == GONE:  # the master gave up waiting for its workers and closed the store
            with self._lock:
                self._drop()
            reason = rfields[0].decode("utf-8", "replace") if rfields else "closed"
            err = DistStoreError(f"TCPStore {self._host}:{self._port}: the store's host closed it: {reason}")
            # Which ranks never joined, for a caller that was waiting on a rank's key (process-group setup).
            err.never_joined = [int(r) for r in rfields[1].decode().split(",") if r] if len(rfields) > 1 else []
            raise err
        return rfields

    def _exchange_status(self, frame, wait):
        """Send ``frame`` on the open connection and read one reply: (status, fields)."""
        deadline = time.monotonic() + wait
        try:
            self._sock.settimeout(max(0.001, deadline - time.monotonic()))
            self._sock.sendall(frame)
            header = auth.recv_exact(self._sock, FRAME.size, deadline, "the store's reply")
            _, rstatus, length = parse_frame_header(header, self._max_frame)
            body = auth.recv_exact(self._sock, length, deadline, "the store's reply") if length else b""
            return rstatus, (decode_fields(body) if length else [])
        except (OSError, TimeoutError, FrameError) as e:
            # The stream is in an unknown state: drop it, the next call reconnects.
            self._drop()
            if isinstance(e, TimeoutError):
                raise DistStoreTimeoutError(f"TCPStore {self._host}:{self._port}: no reply: {e}") from None
            raise DistStoreError(f"TCPStore {self._host}:{self._port}: connection lost: {e}") from None

    def _wait_keys(self, keys, timeout, op=WAIT):
        ms = max(1, min(int(timeout * 1000), 0xFFFFFFFF))
        return self._call(op, keys, status=ms, reply_timeout=timeout)

    # -- the torch.distributed.Store API --------------------------------------------
    def set(self, key: str, value) -> None:
        """torch's Store.set: ``value`` (str or bytes) under ``key``, waking waiters."""
        self._call(SET, [_key(key), _value(value)])

    def get(self, key: str) -> bytes:
        """torch's Store.get: the value of ``key``, waiting up to the timeout for it to be set."""
        return self._wait_keys([_key(key)], self._timeout, GET)[0]

    def add(self, key: str, amount: int) -> int:
        """torch's Store.add: add ``amount`` to the counter ``key`` (0 if unset) and return the new value."""
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise TypeError(f"amount: expected int, got {type(amount).__name__}")
        return int(self._call(ADD, [_key(key), str(amount).encode()])[0])

    def compare_set(self, key: str, expected_value, desired_value) -> bytes:
        """torch's Store.compare_set: set ``desired_value`` if ``key`` holds ``expected_value`` (torch's rule for
        a missing key); the value it holds after."""
        return self._call(CAS, [_key(key), _value(expected_value, "expected_value"),
                                _value(desired_value, "desired_value")])[0]

    def _compare_set_quick(self, key, expected_value, desired_value, timeout: float = 2.0) -> bytes:
        """compare_set that gives up within seconds: used to report failures, when the
        rank hosting the store may be the one that died."""
        return self._call(CAS, [_key(key), _value(expected_value), _value(desired_value)],
                          reply_timeout=timeout, connect_timeout=timeout)[0]

    def _check_quick(self, keys, timeout: float = 0.5) -> bool:
        """check that gives up reconnecting within ``timeout``: asked after a wait timed out, when
        the store's host may have given up at the same moment and be gone."""
        return self._call(CHECK, [_key(k, "keys") for k in keys], reply_timeout=timeout,
                          connect_timeout=timeout)[0] == b"1"

    def wait(self, keys, timeout=None) -> None:
        """torch's Store.wait: block until every key is set, or raise after ``timeout`` (the store's by
        default)."""
        if isinstance(keys, (str, bytes)):
            raise TypeError("keys: expected a list of str")
        t = self._timeout if timeout is None else _seconds(timeout)
        ks = [_key(k, "keys") for k in keys]
        if ks:
            self._wait_keys(ks, t)

    def check(self, keys) -> bool:
        """torch's Store.check: whether every key is set (no waiting)."""
        if isinstance(keys, (str, bytes)):
            raise TypeError("keys: expected a list of str")
        return self._call(CHECK, [_key(k, "keys") for k in keys])[0] == b"1"

    def delete_key(self, key: str) -> bool:
        """torch's Store.delete_key: remove ``key``; whether it existed."""
        return self._call(DELETE, [_key(key)])[0] == b"1"

    def num_keys(self) -> int:
        """torch's Store.num_keys: the number of keys set."""
        return int(self._call(NUM_KEYS, [])[0])

    def multi_get(self, keys) -> list[bytes]:
        """torch's Store.multi_get: the values of ``keys``, waiting for all of them."""
        ks = [_key(k, "keys") for k in keys]
        return self._wait_keys(ks, self._timeout, MULTI_GET) if ks else []

    def multi_set(self, keys, values) -> None:
        """torch's Store.multi_set: set each key to its value in one call."""
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
