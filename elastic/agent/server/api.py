"""The agent's model and its generic control loop (``torch.distributed.elastic.agent.server.api``).

It exists so that a launcher can hand a ``WorkerSpec`` to an agent and get back a
``RunResult``: ``SimpleElasticAgent.run()`` rendezvouses with the other nodes, assigns every
worker its global and role ranks, starts the workers, watches them every
``monitor_interval`` s and, on a failure or a membership change (a node waiting to join),
stops the whole group and restarts it through a new rendezvous round, up to
``max_restarts`` times. Subclasses say how workers are started, watched and stopped.
"""

from __future__ import annotations

import abc
import logging
import os
import signal
import socket
import threading
import time
import warnings
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from ...events import Event, EventSource, record as record_event
from ...metrics import prof, put_metric
from ...multiprocessing import ProcessFailure, Std
from ...rendezvous import RendezvousHandler

__all__ = ["WorkerSpec", "Worker", "WorkerState", "WorkerGroup", "RunResult", "ElasticAgent",
           "SimpleElasticAgent", "SignalException", "DEFAULT_ROLE", "SIGNALS_TO_HANDLE_ENV",
           "DEFAULT_SIGNALS_TO_HANDLE", "parse_signals", "signals_to_handle"]

DEFAULT_ROLE = "default"
log = logging.getLogger(__name__)


SIGNALS_TO_HANDLE_ENV = "TORCHELASTIC_SIGNALS_TO_HANDLE"
DEFAULT_SIGNALS_TO_HANDLE = "SIGTERM,SIGINT,SIGHUP,SIGQUIT"


def parse_signals(text: str) -> List[signal.Signals]:
    """``"SIGTERM,SIGUSR1"`` -> the signals; ValueError naming a name that is not a signal this
    process can handle (SIGKILL and SIGSTOP cannot be)."""
    out = []
    for name in filter(None, (n.strip() for n in text.split(","))):
        sig = getattr(signal.Signals, name, None)
        if sig is None or sig in (signal.SIGKILL, signal.SIGSTOP):
            raise ValueError(f"{name!r} is not a signal that can be handled (e.g. SIGTERM, SIGUSR1)")
        out.append(sig)
    return out


def signals_to_handle() -> List[signal.Signals]:
    """The signals the agent turns into ``SignalException``: ``$TORCHELASTIC_SIGNALS_TO_HANDLE``
    (set by ``tritensor-run --signals-to-handle``), else torch's four."""
    text = os.environ.get(SIGNALS_TO_HANDLE_ENV, DEFAULT_SIGNALS_TO_HANDLE)
    try:
        return parse_signals(text)
    except ValueError as e:  # as torch: a bad name is skipped with a warning, the rest handled
        log.warning("%s=%r: %s; handling %s instead", SIGNALS_TO_HANDLE_ENV, text, e, DEFAULT_SIGNALS_TO_HANDLE)
        return parse_signals(DEFAULT_SIGNALS_TO_HANDLE)


class SignalException(Exception):
    """Raised in the agent when it receives a termination signal (``sigval``)."""

    def __init__(self, msg: str, sigval: signal.Signals):
        super().__init__(msg)
        self.sigval = sigval


@dataclass
class WorkerSpec:
    """The blueprint of one role's workers, the same on every node (see the seed's fields)."""

    role: str
    local_world_size: int
    rdzv_handler: RendezvousHandler
    fn: Optional[Callable] = None
    entrypoint: Union[Callable, str, None] = None
    args: Tuple = ()
    max_restarts: int = 3
    monitor_interval: float = 30.0
    master_port: Optional[int] = None
    master_addr: Optional[str] = None
    local_addr: Optional[str] = None
    redirects: Union[Std, Dict[int, Std]] = Std.NONE
    tee: Union[Std, Dict[int, Std]] = Std.NONE
    event_log_handler: str = "null"  # where the agent's events go (elastic.events destinations)
    duplicate_stdout_filters: Optional[List[str]] = None  # tee'd lines with any of these: filtered_stdout.log
    duplicate_stderr_filters: Optional[List[str]] = None
    virtual_local_rank: bool = False  # LOCAL_RANK=0, CUDA_VISIBLE_DEVICES=the worker's own GPU

    def __post_init__(self):
        if isinstance(self.local_world_size, bool) or not isinstance(self.local_world_size, int) \
                or self.local_world_size <= 0:
            raise ValueError(f"WorkerSpec: local_world_size must be a positive int, got {self.local_world_size!r}")
        if not self.monitor_interval > 0:
            raise ValueError(f"WorkerSpec: monitor_interval must be positive, got {self.monitor_interval!r}")
        if isinstance(self.max_restarts, bool) or not isinstance(self.max_restarts, int) or self.max_restarts < 0:
            raise ValueError(f"WorkerSpec: max_restarts must be an int >= 0, got {self.max_restarts!r}")
        if self.fn:
            warnings.warn("WorkerSpec.fn will be deprecated, please use WorkerSpec.entrypoint instead",
                          category=DeprecationWarning)
            self.entrypoint = self.fn
        if self.entrypoint is None:
            raise ValueError("WorkerSpec: entrypoint (a function or a binary) is required")

    def get_entrypoint_name(self):
        """A function's ``__qualname__``, or a binary's file name."""
        if isinstance(self.entrypoint, str):
            return os.path.basename(self.entrypoint)
        return self.entrypoint.__qualname__


class Worker:
    """One worker of a ``WorkerGroup``: its ``id`` (a pid for the local agent) and ranks."""

    __slots__ = ["id", "local_rank", "global_rank", "role_rank", "world_size", "role_world_size"]

    def __init__(self, local_rank: int, global_rank: int = -1, role_rank: int = -1, world_size: int = -1,
                 role_world_size: int = -1):
        self.id: Any = None
        self.local_rank = local_rank
        self.global_rank = global_rank
        self.role_rank = role_rank
        self.world_size = world_size
        self.role_world_size = role_world_size

    def __repr__(self):
        return (f"Worker(local_rank={self.local_rank}, global_rank={self.global_rank}, role_rank={self.role_rank}, "
                f"world_size={self.world_size}, role_world_size={self.role_world_size}, id={self.id})")


class WorkerState(str, Enum):
    """The state of a ``WorkerGroup``; its workers change state as a unit."""

    UNKNOWN = "UNKNOWN"
    INIT = "INIT"
    HEALTHY = "HEALTHY"
    UNHEALTHY = "UNHEALTHY"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"

    @staticmethod
    def is_running(state: "WorkerState") -> bool:
        """Whether the workers' processes exist (healthy or not)."""
        return state in {WorkerState.HEALTHY, WorkerState.UNHEALTHY}


class WorkerGroup:
    """The ``Worker`` instances of one ``WorkerSpec`` managed by an agent."""

    __slots__ = ["spec", "workers", "store", "group_rank", "group_world_size", "state", "master_addr", "master_port"]

    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self.workers = [Worker(local_rank=i) for i in range(spec.local_world_size)]
        self.store = None
        self.group_rank: Optional[int] = None
        self.group_world_size: Optional[int] = None
        self.master_addr: Optional[str] = None
        self.master_port: Optional[int] = None
        self.state = WorkerState.INIT


@dataclass
class RunResult:
    """The outcome of ``run()``: ``state``, and by GLOBAL rank the ``return_values`` (functions
    only) or the ``failures`` (each a ``ProcessFailure`` with its error file)."""

    state: WorkerState
    return_values: Dict[int, Any] = field(default_factory=dict)
    failures: Dict[int, ProcessFailure] = field(default_factory=dict)

    def is_failed(self) -> bool:
        """Whether the worker group ended in the FAILED state."""
        return self.state == WorkerState.FAILED


def _free_port(addr: str) -> int:
    """A port free on ``addr`` now (any interface when ``addr`` is not this host's)."""
    with socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((addr, 0))
        except OSError:
            s.bind(("", 0))
        return s.getsockname()[1]


class ElasticAgent(abc.ABC):
    """An agent managing one or more worker processes (see the seed)."""

    @abc.abstractmethod
    def run(self, role: str = DEFAULT_ROLE) -> RunResult:
        """Run the job, restarting the worker group on failures up to ``max_restarts``."""

    @abc.abstractmethod
    def get_worker_group(self, role: str = DEFAULT_ROLE) -> WorkerGroup:
        """The ``WorkerGroup`` of ``role``."""


class SimpleElasticAgent(ElasticAgent):
    """An ``ElasticAgent`` for a single ``WorkerSpec``: the control loop, rank assignment, the
    exit barrier, metrics and events; subclasses implement ``_start_workers``,
    ``_stop_workers``, ``_monitor_workers`` and ``_shutdown``."""

    def __init__(self, spec: WorkerSpec, exit_barrier_timeout: float = 300, shutdown_timeout: float = 30):
        if not shutdown_timeout >= 0:
            raise ValueError(f"shutdown_timeout: expected seconds >= 0, got {shutdown_timeout!r}")
        self._worker_group = WorkerGroup(spec)
        self._remaining_restarts = spec.max_restarts
        self._store = None
        self._exit_barrier_timeout = exit_barrier_timeout
        self._shutdown_timeout = shutdown_timeout  # a stopped worker's grace before SIGKILL
        self._total_execution_time = 0

    def get_worker_group(self, role: str = DEFAULT_ROLE) -> WorkerGroup:
        """The agent's one worker group (``role`` is accepted for torch's signature: there is only one)."""
        return self._worker_group

    @property
    def restart_count(self) -> int:
        """How many times the workers have been restarted so far (max_restarts minus those left)."""
        return self._worker_group.spec.max_restarts - self._remaining_restarts

    @abc.abstractmethod
    def _start_workers(self, worker_group: WorkerGroup) -> Dict[int, Any]:
        """Start ``local_world_size`` workers; local rank -> worker id."""

    @abc.abstractmethod
    def _stop_workers(self, worker_group: WorkerGroup, is_restart: bool = False) -> None:
        """Stop every worker of the group, whatever state it is in."""

    @abc.abstractmethod
    def _monitor_workers(self, worker_group: WorkerGroup) -> RunResult:
        """The group's current state as a ``RunResult``."""

    @abc.abstractmethod
    def _shutdown(self, death_sig: signal.Signals = signal.SIGTERM, is_restart: bool = False) -> None:
        """Release what the agent holds, stopping the workers with ``death_sig``."""

    # -- rendezvous and ranks -----------------------------------------------------------
    @prof
    def _rendezvous(self, worker_group: WorkerGroup) -> None:
        """Join the next round; assign the workers' ranks; agree on the workers' master address."""
        spec = worker_group.spec
        t0 = time.monotonic()
        store, group_rank, group_world_size = spec.rdzv_handler.next_rendezvous()  # RendezvousInfo or a tuple
        self._store = store
        worker_group.workers = self._assign_worker_ranks(store, group_rank, group_world_size, spec)
        worker_group.store = store
        worker_group.group_rank = group_rank
        worker_group.group_world_size = group_world_size
        if group_rank == 0:
            addr = spec.master_addr or spec.local_addr or self._default_master_addr(spec)
            port = spec.master_port or _free_port("127.0.0.1" if addr == "localhost" else addr)
            store.multi_set(["MASTER_ADDR", "MASTER_PORT"], [addr, str(port)])
        addr_b, port_b = store.multi_get(["MASTER_ADDR", "MASTER_PORT"])
        worker_group.master_addr, worker_group.master_port = addr_b.decode(), int(port_b)
        put_metric("agent.rendezvous.duration.ms", int((time.monotonic() - t0) * 1000))
        log.info("[%s] rendezvous complete: group_rank=%d group_world_size=%d master=%s:%d restart_count=%d",
                 spec.role, group_rank, group_world_size, worker_group.master_addr, worker_group.master_port,
                 self.restart_count)

    @staticmethod
    def _default_master_addr(spec: WorkerSpec) -> str:
        """Loopback when the rendezvous store is on this machine's loopback, else the host name."""
        store = getattr(spec.rdzv_handler, "endpoint", "") or ""
        host = store.rsplit(":", 1)[0].strip("[]")
        if host in ("localhost", "127.0.0.1", "::1", ""):
            return "127.0.0.1"
        return socket.getfqdn()

    def _assign_worker_ranks(self, store, group_rank: int, group_world_size: int, spec: WorkerSpec) -> List[Worker]:
        """Each agent publishes ``(role, local_world_size)``; global ranks are offsets by group
        rank, role ranks offsets among the agents of the same role."""
        store.set(f"ROLE_INFO/{group_rank}", f"{spec.role}\n{spec.local_world_size}")
        raw = store.multi_get([f"ROLE_INFO/{i}" for i in range(group_world_size)])
        infos = [(r.decode().split("\n")[0], int(r.decode().split("\n")[1])) for r in raw]
        base = sum(n for _, n in infos[:group_rank])
        world = sum(n for _, n in infos)
        role_base = sum(n for role, n in infos[:group_rank] if role == spec.role)
        role_world = sum(n for role, n in infos if role == spec.role)
        return [Worker(local_rank=i, global_rank=base + i, role_rank=role_base + i, world_size=world,
                       role_world_size=role_world) for i in range(spec.local_world_size)]

    # -- the loop -------------------------------------------------------------------------
    @prof
    def _initialize_workers(self, worker_group: WorkerGroup) -> None:
        """A rendezvous, then a fresh start of the workers (the caller stopped the old ones)."""
        self._rendezvous(worker_group)
        for local_rank, wid in self._start_workers(worker_group).items():
            worker_group.workers[local_rank].id = wid
        self._set_state(worker_group, WorkerState.HEALTHY)

    @prof
    def _restart_workers(self, worker_group: WorkerGroup) -> None:
        """Stop, rendezvous, start."""
        self._stop_workers(worker_group, is_restart=True)
        self._set_state(worker_group, WorkerState.STOPPED)
        self._initialize_workers(worker_group)

    def _set_state(self, worker_group: WorkerGroup, state: WorkerState) -> None:
        if worker_group.state != state:
            worker_group.state = state
            record_event(self._agent_event(state), worker_group.spec.event_log_handler)

    def _agent_event(self, state: WorkerState, raw_error: Optional[str] = None) -> Event:
        wg = self._worker_group
        md = {"run_id": wg.spec.rdzv_handler.get_run_id(), "role": wg.spec.role, "state": state.value,
              "group_rank": wg.group_rank, "group_world_size": wg.group_world_size,
              "restart_count": self.restart_count, "hostname": socket.getfqdn(), "pid": os.getpid(),
              "raw_error": raw_error}
        return Event(f"torchelastic.agent.state.{state.value}", EventSource.AGENT, int(time.time() * 1000), md)

    def run(self, role: str = DEFAULT_ROLE) -> RunResult:
        """Run the job (see the module's docstring). A signal of ``$TORCHELASTIC_SIGNALS_TO_HANDLE``
        (torch's variable; default SIGTERM, SIGINT, SIGHUP and SIGQUIT) received meanwhile stops
        every worker with that signal (then SIGKILL after ``shutdown_timeout`` s) and raises
        ``SignalException``."""
        start = time.monotonic()
        shutdown_called = False
        old = self._install_signal_handlers()
        try:
            result = self._invoke_run(role)
            self._total_execution_time = int(time.monotonic() - start)
            self._record_metrics(result)
            self._record_worker_events(result)
            return result
        except SignalException as e:
            log.warning("Received %s death signal, shutting down workers", e.sigval)
            for sig in old:  # a second signal must not cut the shutdown short and orphan workers
                signal.signal(sig, signal.SIG_IGN)
            self._shutdown(e.sigval)
            shutdown_called = True
            raise
        finally:
            self._restore_signal_handlers(old)
            if not shutdown_called:
                self._shutdown()

    @staticmethod
    def _install_signal_handlers():
        if threading.current_thread() is not threading.main_thread():
            return {}

        def raise_signal(signum, frame):
            raise SignalException(f"Process {os.getpid()} got signal: {signum}", sigval=signal.Signals(signum))

        old = {}
        for sig in signals_to_handle():
            old[sig] = signal.signal(sig, raise_signal)
        return old

    @staticmethod
    def _restore_signal_handlers(old) -> None:
        for sig, handler in old.items():
            signal.signal(sig, handler)

    def _invoke_run(self, role: str = DEFAULT_ROLE) -> RunResult:
        spec = self._worker_group.spec
        role = spec.role
        log.info("[%s] starting workers for entrypoint: %s", role, spec.get_entrypoint_name())
        self._initialize_workers(self._worker_group)
        rdzv_handler = spec.rdzv_handler
        while True:
            time.sleep(spec.monitor_interval)
            run_result = self._monitor_workers(self._worker_group)
            state = run_result.state
            self._set_state(self._worker_group, state)
            put_metric(f"workers.{role}.remaining_restarts", self._remaining_restarts)
            put_metric(f"workers.{role}.{state.name.lower()}", 1)
            if state == WorkerState.SUCCEEDED:
                log.info("[%s] worker group successfully finished; waiting for the other agents", role)
                self._exit_barrier()
                return run_result
            if state in {WorkerState.UNHEALTHY, WorkerState.FAILED}:
                if self._remaining_restarts > 0:
                    log.info("[%s] worker group failed; %d/%d restarts left; restarting", role,
                             self._remaining_restarts, spec.max_restarts)
                    self._remaining_restarts -= 1
                    self._restart_workers(self._worker_group)
                else:
                    self._stop_workers(self._worker_group)
                    self._set_state(self._worker_group, WorkerState.FAILED)
                    return run_result
            elif state == WorkerState.HEALTHY:
                waiting = rdzv_handler.num_nodes_waiting()
                if waiting > 0 and self._remaining_restarts > 0:
                    log.info("[%s] detected %d new nodes from group_rank=%s; restarting workers", role, waiting,
                             self._worker_group.group_rank)
                    self._remaining_restarts -= 1
                    self._restart_workers(self._worker_group)
            else:
                raise RuntimeError(f"[{role}] worker group in {state.name} state")

    @prof
    def _exit_barrier(self) -> None:
        """Wait up to ``exit_barrier_timeout`` s for every agent's workers to finish."""
        store, n = self._store, self._worker_group.group_world_size
        start = time.monotonic()
        try:
            if store.add("EXIT_BARRIER/count", 1) >= n:
                store.set("EXIT_BARRIER/done", "1")
            store.wait(["EXIT_BARRIER/done"], self._exit_barrier_timeout)
            log.info("Done waiting for other agents. Elapsed: %.3f seconds", time.monotonic() - start)
        except Exception as e:
            log.warning("Error waiting on exit barrier (%.1f s): %s", time.monotonic() - start, e)

    # -- telemetry ------------------------------------------------------------------------
    def _record_metrics(self, group_results: RunResult) -> None:
        is_failed = group_results.is_failed()
        spec = self._worker_group.spec
        restarts_happened = self._remaining_restarts != spec.max_restarts
        flakiness = 100.0 if is_failed else 100.0 - 100.0 * (self._remaining_restarts + 1) / (spec.max_restarts + 1)
        put_metric(f"workers.{spec.role}.flakiness", int(flakiness))
        put_metric(f"workers.{spec.role}.run_total", 1)
        for name, cond in (("run_success_with_retries", not is_failed and restarts_happened),
                           ("run_success_no_retries", not is_failed and not restarts_happened),
                           ("run_failed_with_retries", is_failed and restarts_happened),
                           ("run_failed_no_retries", is_failed and not restarts_happened)):
            put_metric(f"workers.{spec.role}.{name}", 1 if cond else 0)

    def _record_worker_events(self, result: RunResult) -> None:
        wg = self._worker_group
        for worker in wg.workers:
            failure = result.failures.get(worker.global_rank)
            state = WorkerState.FAILED if failure else (
                WorkerState.SUCCEEDED if result.state == WorkerState.SUCCEEDED else result.state)
            md = {"run_id": wg.spec.rdzv_handler.get_run_id(), "global_rank": worker.global_rank,
                  "group_rank": wg.group_rank, "worker_id": str(worker.id), "role": wg.spec.role,
                  "hostname": socket.getfqdn(), "state": state.value, "total_run_time": self._total_execution_time,
                  "rdzv_backend": wg.spec.rdzv_handler.get_backend(),
                  "raw_error": str(failure.message) if failure else None,
                  "agent_restarts": self.restart_count}
            record_event(Event(f"torchelastic.worker.status.{state.value}", EventSource.WORKER,
                               int(time.time() * 1000), md), wg.spec.event_log_handler)
