"""The public RPC functions: ``init_rpc``, ``rpc_sync``, ``rpc_async``, ``remote``, ``shutdown``.

Names and arguments follow ``torch.distributed.rpc``. One agent per process
(:class:`~.agent.Agent`); workers find each other through an authenticated
:class:`~tritensor.comm.TCPStore` (``init_method``: ``env://`` reads ``MASTER_ADDR`` and
``MASTER_PORT``; ``tcp://host:port``); rank 0 hosts it.

``shutdown(graceful=True)``: every worker waits for its outstanding RPCs, then (a store
barrier) lets every UserRRef go, reporting those still referenced (a leak: id, owner and
creation site), waits until its deletions are acknowledged, then (a second barrier) reports
OwnerRRefs still holding values for forks that were never deleted, and (a third barrier)
closes. The report is logged and kept in :func:`_last_shutdown_leaks`.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time

from .. import DistStoreTimeoutError, TCPStore
from . import current
from .agent import Agent
from .options import BackendType, RpcBackendOptions, WorkerInfo

__all__ = ["init_rpc", "shutdown", "rpc_sync", "rpc_async", "remote", "get_worker_info",
           "_rref_context_info", "_control_log", "_last_shutdown_leaks"]

log = logging.getLogger(__name__)
_store = None
_leaks: list = []
_lock = threading.Lock()
_UNSET = object()


def _require_agent(what: str) -> Agent:
    return current.require(what)


def init_rpc(name, backend=None, rank=-1, world_size=None, rpc_backend_options=None):
    """Start this worker's agent and wait until all ``world_size`` workers have joined."""
    global _store
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"name: expected a non-empty worker name without ':', got {name!r}")
    if backend not in (None, BackendType.TENSORPIPE):
        raise ValueError(f"backend: only BackendType.TENSORPIPE (or None) exists, got {backend!r}")
    rank = int(os.environ.get("RANK", -1)) if rank == -1 else rank
    world_size = int(os.environ["WORLD_SIZE"]) if world_size is None and "WORLD_SIZE" in os.environ else world_size
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size: expected a positive int, got {world_size!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"rank: expected an int in [0, {world_size}), got {rank!r}")
    opts = rpc_backend_options if rpc_backend_options is not None else RpcBackendOptions()
    if not isinstance(opts, RpcBackendOptions):
        raise TypeError(f"rpc_backend_options: expected TensorPipeRpcBackendOptions, got {type(opts).__name__}")
    with _lock:
        if current.agent() is not None:
            raise RuntimeError("init_rpc: RPC is already initialized on this process")
        if opts.init_method.startswith("env://"):
            host, port = os.environ.get("MASTER_ADDR", "127.0.0.1"), os.environ.get("MASTER_PORT")
            if port is None:
                raise ValueError("init_method 'env://' needs MASTER_PORT (and MASTER_ADDR) in the environment")
        else:
            host, _, port = opts.init_method[len("tcp://"):].rpartition(":")
        timeout = opts.rpc_timeout if opts.rpc_timeout > 0 else 300
        _store = TCPStore(host, int(port), world_size, is_master=rank == 0, timeout=max(timeout, 30), rank=rank)
        current.set_agent(Agent(name, rank, world_size, _store, opts))
    # Nobody returns before every worker's agent is installed: a worker that published its
    # address is already served requests, and a function run there (``_rref_context_info``,
    # an RRef) needs the agent as this process's current one (CI: worker0's first call reached
    # worker1 between its rendezvous and ``set_agent``).
    try:
        _barrier("init", max(timeout, 30))
    except BaseException:
        shutdown(graceful=False)
        raise


def _barrier(tag: str, timeout: float):
    """Wait until every worker has reached ``tag``; a timeout names the workers that have not."""
    a = _require_agent(tag)
    key = f"rpc/barrier/{tag}"
    _store.set(f"{key}/arrived/{a.rank}", "1")  # before the count: a worker counted is a worker named
    if _store.add(key, 1) == a.world_size:
        _store.set(key + "/done", "1")
    try:  # the store answers when the key is set (no polling: a worker done early sleeps)
        _store.wait([key + "/done"], timeout)
    except DistStoreTimeoutError:
        missing = [w for w in a.workers if not _store.check([f"{key}/arrived/{w.id}"])]
        names = ", ".join(f"'{w.name}' (id {w.id})" for w in missing)
        raise TimeoutError(f"rpc: timed out after {timeout:g}s waiting for every worker at '{tag}': "
                           f"{a.world_size - len(missing)} of {a.world_size} arrived; waiting for {names}") from None


def _wait(cond, timeout):
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        gc.collect()
        current.require("shutdown").pump()
        time.sleep(0.01)
    return cond()


def shutdown(graceful=True, timeout=60.0):
    """Stop RPC on this worker; ``graceful`` waits for every worker's RPCs and RRefs first."""
    global _store
    a = _require_agent("shutdown")
    leaks = []
    try:
        if graceful:
            _wait(lambda: a.outstanding() == 0, timeout)
            _barrier("calls_done", timeout)
            _wait(lambda: a.active == 0, timeout)
            gc.collect()
            a.pump()
            leaks += a.ctx.delete_all_users()
            settled = _wait(a.ctx.settled, timeout)
            _barrier("users_deleted", timeout)
            _wait(lambda: not a.ctx.forks, 1.0)
            leaks += [x for x in a.ctx.leaks() if x["why"] != "OwnerRRef still referenced locally"]
            if not settled:
                log.warning("shutdown: worker %s did not settle its RRefs within %gs", a.name, timeout)
            _barrier("done", timeout)
            # the master's store must outlive every other worker's last store call
            if a.rank == 0:
                deadline = time.monotonic() + timeout
                while int(_store.add("rpc/barrier/exit", 0)) < a.world_size - 1 and time.monotonic() < deadline:
                    time.sleep(0.01)
            else:
                _store.add("rpc/barrier/exit", 1)
    finally:
        for x in leaks:
            log.warning("RRef leak on worker '%s': %s", a.name, x)
        _leaks[:] = leaks
        a.close()
        with _lock:
            current.set_agent(None)
            store, _store = _store, None
        if store is not None:
            store.close()


def _timeout(a, timeout):
    return a.options.rpc_timeout if timeout is _UNSET else timeout


def _check_call(func, args, kwargs):
    if not callable(func):
        raise TypeError(f"func: expected a callable, got {type(func).__name__}")
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"args: expected a tuple, got {type(args).__name__}")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise TypeError(f"kwargs: expected a dict, got {type(kwargs).__name__}")
    return tuple(args), dict(kwargs or {})


def rpc_async(to, func, args=(), kwargs=None, timeout=_UNSET):
    """Run ``func(*args, **kwargs)`` on worker ``to``; a Future of its result."""
    a = _require_agent("rpc_async")
    args, kwargs = _check_call(func, args, kwargs)
    return a.call(a.worker(to).id, ("call", func, args, kwargs), _timeout(a, timeout))


def rpc_sync(to, func, args=(), kwargs=None, timeout=_UNSET):
    """Run ``func(*args, **kwargs)`` on worker ``to`` and return its result (or raise its error)."""
    return rpc_async(to, func, args, kwargs, timeout).wait()


def remote(to, func, args=(), kwargs=None, timeout=_UNSET):
    """Run ``func`` on worker ``to`` (its owner) and return an RRef to the result at once."""
    a = _require_agent("remote")
    args, kwargs = _check_call(func, args, kwargs)
    return a.remote(a.worker(to).id, func, args, kwargs)


def get_worker_info(worker_name=None) -> WorkerInfo:
    """This worker's :class:`WorkerInfo`, or that of ``worker_name``."""
    a = _require_agent("get_worker_info")
    return a.workers[a.rank] if worker_name is None else a.worker(worker_name)


def _rref_context_info() -> dict:
    """Counts of owner RRefs, forks, user RRefs and pending forks/users/control messages here."""
    return _require_agent("_rref_context_info").ctx.info()


def _control_log() -> list:
    """The RRef control messages (and RPCs) this worker sent and received, in order."""
    return list(_require_agent("_control_log").control_log)


def _last_shutdown_leaks() -> list:
    """The leak report of the last graceful shutdown on this process."""
    return list(_leaks)
