"""``LocalElasticAgent``: the agent that runs a node's workers as local processes.

It exists as the engine of ``tritensor-run``: each worker gets torchrun's environment
(``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` ... and ``TRITENSOR_COMM_SECRET`` so
it can join the job's stores), its logs go to ``<log_dir>/attempt_<restart>/<local_rank>/``,
and a named-pipe watchdog (``TORCHELASTIC_ENABLE_FILE_TIMER=1``) kills workers whose
``timer.expires`` scope ran out.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import tempfile
from string import Template
from typing import Any, Dict, Optional, Set

from ....comm import SECRET_ENV
from ...multiprocessing import PContext, start_processes
from ...timer import FileTimerServer
from .api import RunResult, SimpleElasticAgent, WorkerGroup, WorkerSpec, WorkerState

__all__ = ["LocalElasticAgent", "TORCHELASTIC_ENABLE_FILE_TIMER", "TORCHELASTIC_TIMER_FILE"]

log = logging.getLogger(__name__)
TORCHELASTIC_ENABLE_FILE_TIMER = "TORCHELASTIC_ENABLE_FILE_TIMER"
TORCHELASTIC_TIMER_FILE = "TORCHELASTIC_TIMER_FILE"


class LocalElasticAgent(SimpleElasticAgent):
    """Runs ``spec.local_world_size`` workers on this host and restarts them as a unit.

    ``log_dir``: where the attempts' logs go (``log_dir/attempt_<n>/<local_rank>/``); a fresh
    ``<run_id>_<random>`` folder inside it is used when it already holds files, and a
    temporary folder when it is ``None``. ``exit_barrier_timeout``: how long a node whose
    workers finished waits for the others. ``shutdown_timeout``: how long a stopped worker has
    to exit before ``SIGKILL``. ``local_ranks_filter``: the local ranks whose output reaches the
    console (torch's ``DefaultLogsSpecs`` option; None: all). ``log_line_prefix_template``:
    the tee'd lines' prefix, ``string.Template`` text with ``${role_name}``, ``${rank}`` and
    ``${local_rank}`` (default ``[{role}{local_rank}]:``).
    """

    def __init__(self, spec: WorkerSpec, start_method: str = "spawn", exit_barrier_timeout: float = 300,
                 log_dir: Optional[str] = None, logs_specs=None, log_line_prefix_template: Optional[str] = None,
                 shutdown_timeout: float = 30, local_ranks_filter: Optional[Set[int]] = None):
        super().__init__(spec, exit_barrier_timeout, shutdown_timeout)
        self._log_line_prefix_template = log_line_prefix_template
        self._local_ranks_filter = local_ranks_filter
        self._start_method = start_method
        self._pcontext: Optional[PContext] = None
        self._rdzv_handler = spec.rdzv_handler
        self._log_dir = self._make_log_dir(log_dir, spec.rdzv_handler.get_run_id())
        self._worker_watchdog: Optional[FileTimerServer] = None

    @staticmethod
    def _make_log_dir(log_dir: Optional[str], run_id: str) -> str:
        if log_dir is None:
            return tempfile.mkdtemp(prefix=f"torchelastic_{run_id}_")
        os.makedirs(log_dir, exist_ok=True)
        if os.listdir(log_dir):
            return tempfile.mkdtemp(prefix=f"{run_id}_", dir=log_dir)
        return log_dir

    @property
    def log_dir(self) -> str:
        """The directory this run's worker logs (and error files) are written under."""
        return self._log_dir

    def _setup_local_watchdog(self, envs: Dict[int, Dict[str, str]]) -> None:
        if os.environ.get(TORCHELASTIC_ENABLE_FILE_TIMER) != "1":
            return
        if self._worker_watchdog is None:
            path = os.environ.get(TORCHELASTIC_TIMER_FILE) or os.path.join(self._log_dir, "watchdog.fifo")
            self._worker_watchdog = FileTimerServer(file_path=path, max_interval=0.1, daemon=True)
            self._worker_watchdog.start()
            log.info("FileTimerServer started on %s", path)
        for env in envs.values():
            env[TORCHELASTIC_TIMER_FILE] = self._worker_watchdog.file_path

    def _start_workers(self, worker_group: WorkerGroup) -> Dict[int, Any]:
        spec = worker_group.spec
        # the rendezvous store already needed the job's secret here; a custom handler may not have:
        # then this node's workers share a fresh one (into os.environ, as the master TCPStore does)
        secret = os.environ.get(SECRET_ENV) or os.environ.setdefault(SECRET_ENV, secrets.token_hex(32))
        args: Dict[int, tuple] = {}
        envs: Dict[int, Dict[str, str]] = {}
        prefixes: Dict[int, str] = {}
        for worker in worker_group.workers:
            envs[worker.local_rank] = {
                **self._local_rank_env(worker.local_rank, spec),
                "RANK": str(worker.global_rank),
                "GROUP_RANK": str(worker_group.group_rank),
                "ROLE_RANK": str(worker.role_rank),
                "ROLE_NAME": spec.role,
                "LOCAL_WORLD_SIZE": str(spec.local_world_size),
                "WORLD_SIZE": str(worker.world_size),
                "GROUP_WORLD_SIZE": str(worker_group.group_world_size),
                "ROLE_WORLD_SIZE": str(worker.role_world_size),
                "MASTER_ADDR": worker_group.master_addr,
                "MASTER_PORT": str(worker_group.master_port),
                "TORCHELASTIC_RESTART_COUNT": str(self.restart_count),
                "TORCHELASTIC_MAX_RESTARTS": str(spec.max_restarts),
                "TORCHELASTIC_RUN_ID": spec.rdzv_handler.get_run_id(),
                "TORCHELASTIC_USE_AGENT_STORE": "False",
                SECRET_ENV: secret,
            }
            if "OMP_NUM_THREADS" in os.environ:
                envs[worker.local_rank]["OMP_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"]
            args[worker.local_rank] = tuple(spec.args)
            if self._log_line_prefix_template:
                prefixes[worker.local_rank] = Template(self._log_line_prefix_template).safe_substitute(
                    role_name=spec.role, rank=worker.global_rank, local_rank=worker.local_rank)
        self._setup_local_watchdog(envs)
        attempt_dir = os.path.join(self._log_dir, f"attempt_{self.restart_count}")
        self._pcontext = start_processes(name=spec.role, entrypoint=spec.entrypoint, args=args, envs=envs,
                                         log_dir=attempt_dir, start_method=self._start_method,
                                         redirects=spec.redirects, tee=spec.tee, log_line_prefixes=prefixes or None,
                                         local_ranks_filter=self._local_ranks_filter,
                                         duplicate_stdout_filters=spec.duplicate_stdout_filters,
                                         duplicate_stderr_filters=spec.duplicate_stderr_filters)
        return self._pcontext.pids()

    @staticmethod
    def _local_rank_env(local_rank: int, spec: WorkerSpec) -> Dict[str, str]:
        """``LOCAL_RANK``, and with ``spec.virtual_local_rank`` (as torch's) ``LOCAL_RANK=0`` and a
        ``CUDA_VISIBLE_DEVICES`` of the worker's own GPU: the ``local_rank``-th of this process's
        ``CUDA_VISIBLE_DEVICES``, or GPU ``local_rank`` when that is unset."""
        if not spec.virtual_local_rank:
            return {"LOCAL_RANK": str(local_rank)}
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is None:
            return {"LOCAL_RANK": "0", "CUDA_VISIBLE_DEVICES": str(local_rank)}
        gpus = visible.split(",")
        if local_rank >= len(gpus):
            raise ValueError(f"virtual_local_rank: local rank {local_rank} has no GPU in "
                             f"CUDA_VISIBLE_DEVICES={visible} ({len(gpus)} listed)")
        return {"LOCAL_RANK": "0", "CUDA_VISIBLE_DEVICES": gpus[local_rank].strip()}

    def _stop_workers(self, worker_group: WorkerGroup, is_restart: bool = False) -> None:
        self._shutdown(is_restart=is_restart)

    def _shutdown(self, death_sig: signal.Signals = signal.SIGTERM, is_restart: bool = False) -> None:
        if self._worker_watchdog is not None and not is_restart:
            self._worker_watchdog.stop()
            self._worker_watchdog = None
        if self._pcontext is not None:
            pids = set(self._pcontext.pids().values())
            self._pcontext.close(death_sig, self._shutdown_timeout)
            if self._worker_watchdog is not None:  # their timers die with them
                self._worker_watchdog.clear_timers(pids)

    def _monitor_workers(self, worker_group: WorkerGroup) -> RunResult:
        assert self._pcontext is not None
        result = self._pcontext.wait(0)
        if result is None:
            return RunResult(state=WorkerState.HEALTHY)
        if result.is_failed():
            failures = {worker_group.workers[lr].global_rank: f for lr, f in result.failures.items()}
            return RunResult(state=WorkerState.FAILED, failures=failures)
        values = {worker_group.workers[lr].global_rank: v for lr, v in result.return_values.items()}
        return RunResult(state=WorkerState.SUCCEEDED, return_values=values)
