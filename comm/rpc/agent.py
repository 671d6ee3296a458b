"""The RPC agent: one authenticated listener per worker, request/response matching, RRef upkeep.

Security: every accepted connection first passes the HMAC handshake of
:mod:`tritensor.comm.auth` (role ``b"rpc"``) and then a binary HELLO frame naming the peer's
rank; until both succeed nothing is unpickled (:func:`.wire.unpickle` is only called by
:meth:`Agent._serve` after them). At most :data:`MAX_UNAUTHENTICATED` connections are
authenticating at once (more are closed at once), each for at most :data:`AUTH_TIMEOUT`
seconds; a frame that breaks the protocol closes its connection only. The listener binds to
``options.bind_addr``, else ``$TRITENSOR_COMM_BIND_ADDR``, else loopback.

Threads: an accept thread, one reader per authenticated incoming connection (it decodes
frames and hands requests to the ``num_worker_threads`` pool), and a housekeeping thread that
sends queued control frames, ticks the :class:`~.channel.ControlChannel` (retries), applies
dead RRef handles (:meth:`RRefContext.process`) and fails timed-out RPCs. Each worker sends
over its own outgoing connection to each peer (connected lazily); responses travel the
responder's outgoing connection. User functions are run exactly once and never retried.
"""

from __future__ import annotations

import itertools
import logging
import os
import pickle
import socket
import threading
import time
import traceback
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor

from .. import auth
from ..gate import host_id, unix_listener
from ...futures import Future
from . import wire
from .channel import ControlChannel
from .options import WorkerInfo
from .rref import RRef
from .rref_context import RRefContext

__all__ = ["Agent", "MAX_UNAUTHENTICATED", "AUTH_TIMEOUT", "RemoteTimeoutError"]

log = logging.getLogger(__name__)
ROLE = b"rpc"
MAX_UNAUTHENTICATED = 64
AUTH_TIMEOUT = 3.0
SOCKET_BUFFER = int(os.environ.get("TRITENSOR_RPC_SOCKBUF", 4 << 20))


class RemoteTimeoutError(TimeoutError):
    """An RPC's reply did not come within its timeout."""


def _tune(sock):
    """No Nagle delay for small frames; socket buffers that hold a 1 MB tensor whole, so a
    sender hands it to the kernel in one call instead of waking up as the reader drains it
    (the kernel caps them at net.core.{w,r}mem_max)."""
    if sock.family != getattr(socket, "AF_UNIX", None):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if SOCKET_BUFFER > 0:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)


def _rebuild_error(payload, worker):
    _, exc, type_name, message, tb = payload
    note = f"[remote traceback from worker '{worker}']\n{tb}"
    if isinstance(exc, BaseException):
        exc.remote_traceback = tb
        exc.add_note(note)
        return exc
    err = RuntimeError(f"{type_name}: {message}\n{note}")
    err.remote_traceback = tb
    return err


class Agent:
    def __init__(self, name: str, rank: int, world_size: int, store, options):
        self.name, self.rank, self.world_size, self.store, self.options = name, rank, world_size, store, options
        self._secret = auth.get_secret()
        bind = options.bind_addr or os.environ.get("TRITENSOR_COMM_BIND_ADDR", "127.0.0.1")
        self._listener = socket.create_server((bind, 0))
        self.port = self._listener.getsockname()[1]
        # Peers on this machine connect over a Unix-domain socket (same handshake, fewer
        # copies and no TCP stack: the 1 MB round trip is the win); TRITENSOR_COMM_UNIX=0 disables it.
        self._ulistener, self._upath = unix_listener()
        self.stats: Counter = Counter()
        self.control_log: deque = deque(maxlen=100000)
        self.channel = ControlChannel(rank, self._queue_control, time.monotonic, injector=options.fault_injector,
                                      base_delay=options.control_retry_delay,
                                      max_attempts=options.control_max_attempts, recorder=self._record)
        self.ctx = RRefContext(rank, self.channel)
        self.executor = ThreadPoolExecutor(options.num_worker_threads, thread_name_prefix=f"rpc-{name}")
        self._pending: dict = {}
        self._pending_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._out: dict = {}
        self._conn_lock = threading.Lock()
        self._ctl_q: deque = deque()
        self._wake = threading.Event()
        self._closing = False
        self._unauth = 0
        self.active = 0  # requests being run
        self._incoming: list = []
        self._threads = [threading.Thread(target=self._accept_loop, args=(lst,), name=f"rpc-accept-{name}",
                                          daemon=True) for lst in (self._listener, self._ulistener) if lst]
        for t in self._threads:
            t.start()
        self._rendezvous(bind)
        hk = threading.Thread(target=self._housekeeping, name=f"rpc-house-{name}", daemon=True)
        self._threads.append(hk)
        hk.start()

    # -- rendezvous ------------------------------------------------------------------
    def _rendezvous(self, host):
        me = host_id()
        self.store.set(f"rpc/worker/{self.rank}", f"{self.name}\t{host}\t{self.port}\t{me}\t{self._upath or ''}")
        self.workers, self.addrs, self.unix_paths, seen = [], [], [], {}
        for r in range(self.world_size):
            name, h, p, hid, upath = self.store.get(f"rpc/worker/{r}").decode().split("\t")
            self.unix_paths.append(upath if upath and hid == me and self._upath else None)
            if name in seen:
                raise ValueError(f"name: worker names must be unique, but ranks {seen[name]} and {r} are both {name!r}")
            seen[name] = r
            self.workers.append(WorkerInfo(name, r))
            self.addrs.append((h, int(p)))
        self.by_name = {w.name: w for w in self.workers}

    def worker(self, to) -> WorkerInfo:
        if isinstance(to, WorkerInfo):
            to = to.id
        if isinstance(to, str):
            if to not in self.by_name:
                raise ValueError(f"to: unknown worker {to!r}; workers are {sorted(self.by_name)}")
            return self.by_name[to]
        if isinstance(to, int) and not isinstance(to, bool) and 0 <= to < self.world_size:
            return self.workers[to]
        raise ValueError(f"to: expected a worker name, WorkerInfo or id in [0, {self.world_size}), got {to!r}")

    # -- incoming connections --------------------------------------------------------
    def _accept_loop(self, listener):
        while not self._closing:
            try:
                conn, _ = listener.accept()
            except OSError:
                if self._closing:
                    return
                time.sleep(0.01)
                continue
            if self._unauth >= MAX_UNAUTHENTICATED:
                self.stats["refused_crowded"] += 1
                conn.close()
                continue
            self._unauth += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        authed = False
        try:
            try:
                auth.server_handshake(conn, self._secret, ROLE, AUTH_TIMEOUT)
                conn.settimeout(AUTH_TIMEOUT)
                kind, src, env_len_check, bufs = wire.read_frame(conn, max_envelope=0)
                if kind != wire.HELLO or bufs or env_len_check or not 0 <= src < self.world_size:
                    raise wire.FrameError("expected a HELLO frame")
            except Exception as e:
                self.stats["refused_unauthenticated"] += 1
                log.debug("RPC listener of %s refused a connection: %s", self.name, e)
                return
            finally:
                self._unauth -= 1
            authed = True
            conn.settimeout(None)
            _tune(conn)
            self._incoming.append(conn)
            while not self._closing:
                kind, msg_id, env, bufs = wire.read_frame(conn)
                self._dispatch(src, kind, msg_id, env, bufs)
        except (ConnectionError, OSError, wire.FrameError) as e:
            if authed and not self._closing:
                self.stats["closed_bad_frame" if isinstance(e, wire.FrameError) else "closed"] += 1
                log.debug("RPC connection to %s closed: %s", self.name, e)
        finally:
            conn.close()

    def _unfork_hook(self, recs):
        def hook(data):
            kind, rref_id, rec = self.ctx.unfork(data)
            if rec is not None and not rec.confirmed:
                recs.append(rec)
            return RRef._handle(self, rref_id, data[1], rec)
        return hook

    def _dispatch(self, src, kind, msg_id, env, bufs):
        if kind == wire.CONTROL:
            self.channel.on_frame(src, wire.unpickle(env, bufs))
            return
        recs: list = []
        try:
            msg = wire.unpickle(env, bufs, self._unfork_hook(recs))
        except Exception as e:
            if kind == wire.REQUEST and msg_id:
                self._respond(src, msg_id, self._error(e))
            log.error("%s: undecodable %s from worker %s: %s", self.name, wire.KINDS[kind], src, e)
            return
        if kind == wire.RESPONSE:
            with self._pending_lock:
                entry = self._pending.pop(msg_id, None)
            if entry is not None:
                fut, dst = entry[0], entry[1]
                if msg[0] == "ok":
                    fut.set_result(msg[1])
                else:
                    fut.set_exception(_rebuild_error(msg, self.workers[dst].name))
        elif kind == wire.REQUEST:
            self._record("recv", src, self.rank, msg[0].upper(), (msg[4], msg[5]) if msg[0] == "remote" else None)
            if msg[0] == "remote":
                self.ctx.on_remote_call(msg[4], msg[5], src)
            self.executor.submit(self._run, src, msg_id, msg, recs)

    # -- running requests ------------------------------------------------------------
    def _error(self, e):
        try:
            pickle.dumps(e)
            obj = e
        except Exception:
            obj = None
        return ("err", obj, type(e).__qualname__, str(e), "".join(traceback.format_exception(e)))

    def _run(self, src, msg_id, msg, recs):
        with self._pending_lock:
            self.active += 1
        try:
            self._run_inner(src, msg_id, msg, recs)
        finally:
            with self._pending_lock:
                self.active -= 1

    def _run_inner(self, src, msg_id, msg, recs):
        try:
            t = self.options.rpc_timeout
            for rec in recs:  # the seed: the function runs once the owner confirmed each child RRef
                rec.confirmation.wait(t if t > 0 else None)
            if msg[0] == "fetch":
                self.ctx.owner_future(msg[1]).add_done_callback(lambda f: self._respond_future(src, msg_id, f))
                return
            fn, args, kwargs = msg[1], msg[2], msg[3]
            out = fn(*args, **kwargs)
            if getattr(fn, "_tritensor_async_execution", False):
                if not isinstance(out, Future):
                    raise TypeError(f"{getattr(fn, '__name__', fn)} is marked async_execution but returned "
                                    f"{type(out).__name__}, not a Future")
                out.add_done_callback(lambda f: self._finish(src, msg_id, msg, f))
                return
            if msg[0] != "remote":  # the common case answers at once, without a Future
                self._respond(src, msg_id, ("ok", out))
                return
            fut = Future()
            fut.set_result(out)
        except Exception as e:
            fut = Future()
            fut.set_exception(e)
        self._finish(src, msg_id, msg, fut)

    def _finish(self, src, msg_id, msg, fut):
        if msg[0] == "remote":
            try:
                self.ctx.set_value(msg[4], fut.value())
            except Exception as e:
                self.ctx.set_value(msg[4], exc=e)
            return
        self._respond_future(src, msg_id, fut)

    def _respond_future(self, src, msg_id, fut):
        try:
            payload = ("ok", fut.value())
        except Exception as e:
            payload = self._error(e)
        self._respond(src, msg_id, payload)

    def _respond(self, dst, msg_id, payload):
        try:
            self.send(dst, wire.RESPONSE, msg_id, payload)
        except Exception as e:
            if payload[0] == "ok":  # e.g. an unpicklable result: tell the caller why
                try:
                    self.send(dst, wire.RESPONSE, msg_id, self._error(e))
                    return
                except Exception:
                    pass
            log.warning("%s: could not answer worker %s: %s", self.name, dst, e)

    # -- sending ---------------------------------------------------------------------
    def _conn(self, dst):
        with self._conn_lock:
            c = self._out.get(dst)
            if c is not None:
                return c
            host, port = self.addrs[dst]
            t = max(self.options.rpc_timeout, 5.0) if self.options.rpc_timeout > 0 else 60.0
            sock = None
            if self.unix_paths[dst]:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.settimeout(t)
                    sock.connect(self.unix_paths[dst])
                except OSError:  # gone or not ours to reach: TCP as across hosts
                    sock.close()
                    sock = None
            if sock is None:
                sock = socket.create_connection((host, port), timeout=t)
            try:
                _tune(sock)
                auth.client_handshake(sock, self._secret, ROLE, t)
                sock.sendall(wire.HEADER.pack(wire.MAGIC, wire.VERSION, wire.HELLO, self.rank, 0, 0))
                sock.settimeout(None)
            except BaseException:
                sock.close()
                raise
            c = self._out[dst] = (sock, threading.Lock())
            return c

    def send(self, dst, kind, msg_id, obj):
        """Pickle ``obj`` (forking the RRefs in it for ``dst``) and send it; undo forks on failure."""
        forks = []

        def fork_hook(o):
            if isinstance(o, RRef):
                data = self.ctx.fork(o._rref_id, o._owner, None if o._rec is None else o._rec.fork_id, dst)
                forks.append(data)
                return data
            return None

        try:
            head_env, bufs = wire.pack(kind, msg_id, obj, fork_hook)
            if dst == self.rank:  # to ourselves: no socket, but the same (copying) decode path
                env = head_env[wire.HEADER.size + 8 * len(bufs):]
                self.executor.submit(self._dispatch, dst, kind, msg_id, env, [bytearray(b) for b in bufs])
                return
            sock, lock = self._conn(dst)
            with lock:
                wire.send_frame(sock, head_env, bufs)
        except BaseException:
            for data in forks:
                self.ctx.fork_failed(data)
            if dst != self.rank:
                with self._conn_lock:
                    c = self._out.pop(dst, None)
                if c is not None:
                    c[0].close()
            raise

    def call(self, dst, msg, timeout) -> Future:
        msg_id = next(self._ids)
        name = self.workers[dst].name
        fut = Future(name=f"rpc to '{name}'")
        start = time.monotonic()
        deadline = start + timeout if timeout and timeout > 0 else float("inf")
        with self._pending_lock:
            self._pending[msg_id] = (fut, dst, start, deadline, timeout)
        self._record("send", self.rank, dst, msg[0].upper(), None)
        try:
            self.send(dst, wire.REQUEST, msg_id, msg)
        except BaseException:
            with self._pending_lock:
                self._pending.pop(msg_id, None)
            raise
        return fut

    def fetch(self, owner, rref_id, timeout) -> Future:
        return self.call(owner, ("fetch", rref_id), timeout)

    def remote(self, dst, fn, args, kwargs) -> RRef:
        if dst == self.rank:
            rref_id = self.ctx.create_pending_owner()
            handle = RRef._handle(self, rref_id, dst, None)
            self.executor.submit(self._run, dst, 0, ("remote", fn, args, kwargs, rref_id, None), [])
            return handle
        rref_id, fork_id = self.ctx.create_remote_user(dst)
        handle = RRef._handle(self, rref_id, dst, self.ctx.users[fork_id])
        self._record("send", self.rank, dst, "REMOTE", (rref_id, fork_id))
        self.send(dst, wire.REQUEST, 0, ("remote", fn, args, kwargs, rref_id, fork_id))
        return handle

    # -- housekeeping ----------------------------------------------------------------
    def _record(self, event, src, dst, mtype, payload):
        self.control_log.append((event, src, dst, mtype, payload))

    def _queue_control(self, dst, frame):
        self._ctl_q.append((dst, frame))
        self._wake.set()

    def _housekeeping(self):
        while not self._closing:
            self._wake.wait(0.01)
            self._wake.clear()
            try:
                self.pump()
            except Exception:
                log.exception("%s: RPC housekeeping failed", self.name)

    def pump(self):
        while self._ctl_q:
            dst, frame = self._ctl_q.popleft()
            if dst == self.rank:
                self.channel.on_frame(dst, frame)
            else:
                try:
                    self.send(dst, wire.CONTROL, 0, frame)
                except Exception as e:  # retried by the channel
                    log.debug("%s: control frame to %s failed: %s", self.name, dst, e)
        self.channel.tick()
        self.ctx.process()
        now = time.monotonic()
        expired = []
        with self._pending_lock:
            for msg_id, (fut, dst, start, deadline, timeout) in list(self._pending.items()):
                if now >= deadline:
                    del self._pending[msg_id]
                    expired.append((fut, dst, now - start, timeout))
        for fut, dst, elapsed, timeout in expired:
            fut.set_exception(RemoteTimeoutError(
                f"RPC to worker '{self.workers[dst].name}' (id {dst}) timed out after {elapsed:.3f} s "
                f"(timeout {timeout:g} s)"))

    def outstanding(self) -> int:
        with self._pending_lock:
            return len(self._pending)

    def close(self):
        self._closing = True
        self._wake.set()
        for lst in (self._listener, self._ulistener):
            try:
                if lst is not None:
                    lst.close()
            except OSError:
                pass
        if self._upath:
            try:
                os.unlink(self._upath)
            except OSError:
                pass
        with self._conn_lock:
            for sock, _ in self._out.values():
                sock.close()
            self._out.clear()
        for c in self._incoming:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.executor.shutdown(wait=False, cancel_futures=True)
