"""The RPC agent: one authenticated listener per worker, request/response matching, RRef upkeep.

Security: connections come in through a :class:`tritensor.comm.backend.gate.Gate`, the process
group's gate: every one first passes the HMAC handshake of :mod:`tritensor.comm.backend.auth` (role
``b"rpc"``) and a binary HELLO frame naming the peer's rank, concurrently and non-blocking,
each within :data:`AUTH_TIMEOUT` seconds, at most :data:`MAX_UNAUTHENTICATED` (plus one per
peer) at once; until both succeed nothing is unpickled (:func:`.wire.unpickle` is only called
by :meth:`Agent._serve` after them). Idle strangers therefore cost a slot for a few seconds
and never a peer its call: a peer turned away by a full listener retries until its call's
timeout and then says it was crowded out. A frame that breaks the protocol closes its
connection only. The listener binds to ``options.bind_addr``, else
``$TRITENSOR_COMM_BIND_ADDR``, else loopback.

Threads: an accept thread (the gate), one reader per authenticated incoming connection (it
decodes frames and hands requests to the ``num_worker_threads`` pool; a ``to_here()`` fetch
waits on the value's Future and is answered by the thread that sets it), and a housekeeping
thread that sends the control frames readers queue, ticks the
:class:`~.channel.ControlChannel` (retries), applies dead RRef handles
(:meth:`RRefContext.process`, once per :data:`RELEASE_INTERVAL`: deletions in batches) and
fails timed-out RPCs. A reader never blocks on a send (its peer may be blocked sending to it):
it queues its control frames, and answers a fetch of a value that is there only when the answer
leaves at once. Other threads send their control frames themselves; frames nothing waits for
(``channel.DEFERRABLE``) ride with the next frame to the same worker or leave at the next tick.
A ``remote()`` + ``to_here()`` thus costs two frames each way and no thread of the protocol's own.
Each worker sends over its own outgoing connection to each peer (connected lazily, checked
for a close by the peer before each send, remade once when it was lost); responses travel
the responder's outgoing connection. A worker that cannot be reached raises
:class:`~tritensor.comm.DistNetworkError` naming it and what happened. User functions are run
exactly once and never retried (a frame cut short by a lost connection is discarded unread).
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
import time
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor

from ..backend import auth, gate
from ..backend.gate import host_id, unix_listener
from .. import Future
from . import wire
from .channel import ControlChannel
from .links import ROLE, Links, tune
from .options import WorkerInfo
from .responder import Responder
from .rref import RRef
from .rref_context import RRefContext

__all__ = ["Agent", "MAX_UNAUTHENTICATED", "AUTH_TIMEOUT", "RemoteTimeoutError"]

log = logging.getLogger(__name__)
MAX_UNAUTHENTICATED = gate.MAX_PENDING  # connections authenticating at once, beyond one per peer
AUTH_TIMEOUT = gate.HANDSHAKE_TIMEOUT  # seconds a connection has to authenticate and say hello
# Dead RRef handles are applied (and their RREF_USER_DELETEs sent, one batch per owner) at most
# this often. Applying them at every wake-up of the housekeeping thread sent one delete (and drew
# one ACK) per remote() + to_here() in a loop: two frames each, a third of that row's time.
RELEASE_INTERVAL = 0.01


class RemoteTimeoutError(TimeoutError):
    """An RPC's reply did not come within its timeout."""


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


class Agent(Responder):
    """One worker's RPC endpoint: its listener and readers, sending and calls, RRef upkeep;
    running received requests and answering them is :class:`~.responder.Responder`'s."""

    def __init__(self, name: str, rank: int, world_size: int, store, options):
        self.name, self.rank, self.world_size, self.store, self.options = name, rank, world_size, store, options
        self._secret = auth.get_secret()
        bind = options.bind_addr or os.environ.get("TRITENSOR_COMM_BIND_ADDR", "127.0.0.1")
        self._listener = socket.create_server((bind, 0), backlog=socket.SOMAXCONN)
        self.port = self._listener.getsockname()[1]
        # Peers on this machine connect over a Unix-domain socket (same handshake, fewer
        # copies and no TCP stack: the 1 MB round trip is the win); TRITENSOR_COMM_UNIX=0 disables it.
        self._ulistener, self._upath = unix_listener()
        self._gate = gate.Gate([lst for lst in (self._listener, self._ulistener) if lst], self._secret, ROLE,
                               wire.HEADER.size, self._on_hello, self._on_ready, describe=f"RPC worker {name!r}",
                               bind_host=bind, timeout=AUTH_TIMEOUT)
        self._stats: Counter = Counter()
        self.control_log: deque = deque(maxlen=100000)
        self.channel = ControlChannel(rank, self._queue_control, time.monotonic, injector=options.fault_injector,
                                      base_delay=options.control_retry_delay,
                                      max_attempts=options.control_max_attempts, recorder=self._record,
                                      transmit_later=self._transmit_later)
        self.ctx = RRefContext(rank, self.channel)
        self.executor = ThreadPoolExecutor(options.num_worker_threads, thread_name_prefix=f"rpc-{name}")
        self._pending: dict = {}
        self._pending_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._ctl_q: deque = deque()
        self._reader = threading.local()  # .on in the threads that read peers' frames
        self._later: dict = {}  # dst -> [packed control frames] riding with the next frame to dst
        self._later_lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = False
        self.active = 0  # requests being run
        self._incoming: set = set()
        self._accept_thread = threading.Thread(target=self._accept_loop, name=f"rpc-accept-{name}", daemon=True)
        self._accept_thread.start()
        self._threads = [self._accept_thread]
        self._rendezvous(bind)
        t = options.rpc_timeout  # how long a send that is not a call may take to connect
        self.links = Links(rank, self.workers, self.addrs, self.unix_paths, self._secret,
                           max(t, 5.0) if t > 0 else 60.0, MAX_UNAUTHENTICATED)
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
        """torch's get_worker_info for ``to``: a WorkerInfo, a worker name or an id, resolved to its
        WorkerInfo."""
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
    @property
    def stats(self) -> Counter:
        """Connection counts: ``refused_unauthenticated`` (strangers turned away, for any reason),
        ``refused_crowded`` (those of them turned away because the listener was full),
        ``closed`` and ``closed_bad_frame`` (authenticated connections that ended)."""
        c = Counter(self._stats)
        c["refused_unauthenticated"] += self._gate.refused + self._gate.crowded
        c["refused_crowded"] += self._gate.crowded
        return c

    def _accept_loop(self):
        try:
            self._gate.serve(lambda: self._closing, float("inf"), MAX_UNAUTHENTICATED + self.world_size - 1)
        except Exception:
            if not self._closing:
                log.exception("%s: the RPC listener failed", self.name)
        finally:
            self._gate.close()

    def _on_hello(self, msg):
        """The gate's check of a peer's HELLO frame: it names a worker of this group, and nothing more."""
        magic, version, kind, src, env_len, nbufs = wire.HEADER.unpack(msg)
        if magic != wire.MAGIC or version != wire.VERSION or kind != wire.HELLO or env_len or nbufs \
                or not 0 <= src < self.world_size:
            raise gate.Refused("expected a HELLO frame naming a worker")
        return b"", src

    def _on_ready(self, conn, src, _name):
        tune(conn)
        self._incoming.add(conn)
        threading.Thread(target=self._serve, args=(conn, src), name=f"rpc-read-{self.name}-{src}",
                         daemon=True).start()

    def _serve(self, conn, src):
        """Read an authenticated peer's frames until it closes the connection. A small frame that
        has already arrived behind the one in hand is read before that one is acted on, so the
        two are acted on back to back (:func:`.wire.read_buffered_frame`)."""
        self._reader.on = True
        try:
            frame = wire.read_frame(conn)
            while not self._closing:
                try:
                    ahead = wire.read_buffered_frame(conn)
                finally:
                    self._dispatch(src, *frame)
                frame = ahead if ahead is not None else wire.read_frame(conn)
        except (ConnectionError, OSError, wire.FrameError) as e:
            if not self._closing:
                self._stats["closed_bad_frame" if isinstance(e, wire.FrameError) else "closed"] += 1
                log.debug("RPC connection to %s closed: %s", self.name, e)
        finally:
            self._incoming.discard(conn)
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
            elif msg[0] == "fetch":
                self._fetch(src, msg_id, msg[1])
                return
            self.executor.submit(self._run, src, msg_id, msg, recs)

    def _fetch(self, src, msg_id, rref_id):
        """Answer a ``to_here()`` when its value is set: in the thread that sets it (the one that
        ran the ``remote()``, no thread of its own), or, when the value was there already, from
        this reader thread if the answer leaves without blocking (else a worker thread sends it)."""
        def answer(f):
            self._respond_future(src, msg_id, f, nowait=getattr(self._reader, "on", False))

        try:
            self.ctx.owner_future(rref_id).add_done_callback(answer)
        except Exception as e:  # the owner already deleted it
            self.executor.submit(self._respond, src, msg_id, self._error(e))

    # -- sending ---------------------------------------------------------------------
    def send(self, dst, kind, msg_id, obj, deadline=None, nowait=False):
        """Pickle ``obj`` (forking the RRefs in it for ``dst``) and send it; undo forks on failure.
        ``deadline`` (time.monotonic) bounds making a connection (:meth:`.links.Links.send`).
        ``nowait`` (a reader thread's answer): this thread never blocks; what cannot leave at
        once is sent by a worker thread (:meth:`.links.Links.try_send`)."""
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
            before = self._take_later(dst)
            if nowait:
                if not self.links.try_send(dst, head_env, bufs, before, self.executor.submit):
                    self.executor.submit(self._send_packed, dst, head_env, bufs, before, forks)
                return
            self.links.send(dst, head_env, bufs, deadline, before)
        except BaseException:
            for data in forks:
                self.ctx.fork_failed(data)
            raise

    def _send_packed(self, dst, head_env, bufs, before, forks):
        """A worker thread's send of a frame a reader packed (:meth:`send` with ``nowait``)."""
        try:
            self.links.send(dst, head_env, bufs, None, before)
        except Exception as e:
            for data in forks:
                self.ctx.fork_failed(data)
            log.warning("%s: could not answer worker %s: %s", self.name, dst, e)

    def call(self, dst, msg, timeout) -> Future:
        """Send ``msg`` to worker ``dst`` and return a Future of its answer (failed with a timeout error after
        ``timeout`` seconds)."""
        msg_id = next(self._ids)
        name = self.workers[dst].name
        fut = Future(name=f"rpc to '{name}'")
        start = time.monotonic()
        deadline = start + timeout if timeout and timeout > 0 else float("inf")
        with self._pending_lock:
            self._pending[msg_id] = (fut, dst, start, deadline, timeout)
        self._record("send", self.rank, dst, msg[0].upper(), None)
        try:
            self.send(dst, wire.REQUEST, msg_id, msg, None if deadline == float("inf") else deadline)
        except BaseException:
            with self._pending_lock:
                self._pending.pop(msg_id, None)
            raise
        return fut

    def fetch(self, owner, rref_id, timeout) -> Future:
        """A Future of the value of RRef ``rref_id`` held by ``owner`` (what to_here asks)."""
        return self.call(owner, ("fetch", rref_id), timeout)

    def remote(self, dst, fn, args, kwargs) -> RRef:
        """torch's rpc.remote: run ``fn(*args, **kwargs)`` on ``dst`` and return an RRef to its result at
        once."""
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
        """The channel's transmit: a control frame leaves at once from a thread that may block
        on a send (the caller's, a request's); a reader thread must not (its peer may be
        blocked sending to it), so from one it is queued for the housekeeping thread."""
        if dst != self.rank and not getattr(self._reader, "on", False):
            self.send(dst, wire.CONTROL, 0, frame)  # an error is the channel's to retry
            return
        self._ctl_q.append((dst, frame))
        self._wake.set()

    def _transmit_later(self, dst, frame):
        """The channel's transmit for frames nothing waits for (``channel.DEFERRABLE``): they
        leave with the next frame this worker sends to ``dst``, or at the housekeeping thread's
        next tick (:meth:`pump`), without a thread woken or a system call of their own. A frame
        lost with a failed send is recovered by the channel's retry, as any lost frame is."""
        if dst == self.rank:
            self._queue_control(dst, frame)
            return
        head_env, _ = wire.pack(wire.CONTROL, 0, frame)
        with self._later_lock:
            self._later.setdefault(dst, []).append(head_env)

    def _take_later(self, dst) -> list:
        with self._later_lock:
            return self._later.pop(dst, [])

    def _housekeeping(self):
        next_release = 0.0
        while not self._closing:
            self._wake.wait(RELEASE_INTERVAL)
            self._wake.clear()
            now = time.monotonic()
            releases = now >= next_release
            if releases:
                next_release = now + RELEASE_INTERVAL
            try:
                self.pump(releases)
            except Exception:
                log.exception("%s: RPC housekeeping failed", self.name)

    def pump(self, releases=True):
        """Send queued control frames, run the channel's timers and fail expired RPCs; with
        ``releases``, also apply dead RRef handles (the housekeeping thread does that once per
        :data:`RELEASE_INTERVAL`, not at every wake-up, so deletions go out in batches)."""
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
        if releases:
            self.ctx.process()
        with self._later_lock:
            later, self._later = self._later, {}
        for dst, frames in later.items():
            try:
                self.links.send(dst, frames[-1], [], None, frames[:-1])
            except Exception as e:  # retried by the channel
                log.debug("%s: control frames to %s failed: %s", self.name, dst, e)
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
        """The number of calls still waiting for an answer."""
        with self._pending_lock:
            return len(self._pending)

    def close(self):
        """Stop the agent: wake its threads to end and close its listener and links."""
        self._closing = True
        self._wake.set()
        self._gate.wake()
        self._accept_thread.join(5.0)  # the gate stops accepting before its listeners close
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
        self.links.close()
        for c in list(self._incoming):
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.executor.shutdown(wait=False, cancel_futures=True)
