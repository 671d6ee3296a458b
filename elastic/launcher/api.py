"""Launching an elastic job from Python (``torch.distributed.launcher.api``): what ``tritensor-run`` runs.

It exists so that ``tritensor-run`` and a custom launcher share one path: ``LaunchConfig``
describes the job, ``elastic_launch(config, entrypoint)(*args)`` builds the rendezvous
handler, the ``WorkerSpec`` and a ``LocalElasticAgent``, runs it and returns the workers'
return values by global rank, or raises ``ChildFailedError`` naming the failures.
"""

from __future__ import annotations

import logging
import os
import sys
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Set, Union

from ..agent.server import (DEFAULT_SIGNALS_TO_HANDLE, SIGNALS_TO_HANDLE_ENV, LocalElasticAgent, SignalException,
                            WorkerSpec)
from ..multiprocessing import Std
from ..multiprocessing.errors import ChildFailedError
from ..rendezvous import RendezvousParameters
from ..rendezvous.registry import get_rendezvous_handler
from ..rendezvous.utils import parse_rendezvous_endpoint

__all__ = ["LaunchConfig", "elastic_launch", "launch_agent"]

log = logging.getLogger(__name__)
SHUTDOWN_TIMEOUT_ENV = "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"  # torch's name


@dataclass
class LaunchConfig:
    """The job: ``min_nodes``..``max_nodes`` nodes of ``nproc_per_node`` workers, its rendezvous,
    restart policy and logging (the fields of torch's ``LaunchConfig``, but ``logs_specs`` and
    ``numa_options``: tritensor has no LogsSpecs classes, ``local_ranks_filter`` stands for
    the one option of torch's DefaultLogsSpecs that ``log_dir``/``redirects``/``tee`` do not
    cover, and workers are not bound to CPUs)."""

    min_nodes: int
    max_nodes: int
    nproc_per_node: int
    run_id: str = ""
    role: str = "default_role"
    rdzv_endpoint: str = ""
    rdzv_backend: str = "c10d"
    rdzv_configs: Dict[str, Any] = field(default_factory=dict)
    rdzv_timeout: int = -1
    max_restarts: int = 3
    monitor_interval: float = 0.1
    start_method: str = "spawn"
    log_dir: Optional[str] = None
    redirects: Union[Std, Dict[int, Std]] = Std.NONE
    tee: Union[Std, Dict[int, Std]] = Std.NONE
    metrics_cfg: Dict[str, str] = field(default_factory=dict)
    local_addr: Optional[str] = None
    log_line_prefix_template: Optional[str] = None
    event_log_handler: str = "null"
    signals_to_handle: str = DEFAULT_SIGNALS_TO_HANDLE
    duplicate_stdout_filters: Optional[List[str]] = None
    duplicate_stderr_filters: Optional[List[str]] = None
    virtual_local_rank: bool = False
    shutdown_timeout: Optional[int] = None  # None: $TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30 s
    local_ranks_filter: Optional[Set[int]] = None  # torch keeps it in its DefaultLogsSpecs

    def __post_init__(self):
        default_timeout = 900
        if self.rdzv_timeout != -1:
            self.rdzv_configs["timeout"] = self.rdzv_timeout
        elif "timeout" not in self.rdzv_configs:
            self.rdzv_configs["timeout"] = default_timeout
        self.rdzv_configs.setdefault("join_timeout", self.rdzv_configs["timeout"])
        if self.shutdown_timeout is None:
            self.shutdown_timeout = int(os.environ.get(SHUTDOWN_TIMEOUT_ENV, "30"))


class elastic_launch:
    """``elastic_launch(config, entrypoint)(*args)``: run ``entrypoint`` (a function or a binary)
    as an elastic job; returns ``{global_rank: return value}`` of this node's workers."""

    def __init__(self, config: LaunchConfig, entrypoint: Union[Callable, str, None]):
        self._config = config
        self._entrypoint = entrypoint

    def __call__(self, *args):
        return launch_agent(self._config, self._entrypoint, list(args))


def _entrypoint_name(entrypoint, args) -> str:
    """What a failure report is headed with, by torch's rule: a Python interpreter is named by
    its first argument that is not an option (the script, or the module of ``-m``), another
    binary by itself, a function by its name (``run_script_path``'s: the script it runs)."""
    if isinstance(entrypoint, str):
        if entrypoint in (sys.executable, os.environ.get("PYTHON_EXEC")):
            return next((str(a) for a in args if not str(a).startswith("-")), "")
        return entrypoint
    if getattr(entrypoint, "__name__", "") == "run_script_path" and args:
        return str(args[0])
    return getattr(entrypoint, "__qualname__", repr(entrypoint))


def launch_agent(config: LaunchConfig, entrypoint: Union[Callable, str, None], args) -> Dict[int, Any]:
    """Run one node's agent for ``config`` (see :class:`elastic_launch`)."""
    if not config.run_id:
        config.run_id = str(uuid.uuid4().int)
        log.warning("config has no run_id, generated a random run_id: %s", config.run_id)
    params = RendezvousParameters(backend=config.rdzv_backend, endpoint=config.rdzv_endpoint, run_id=config.run_id,
                                  min_nodes=config.min_nodes, max_nodes=config.max_nodes,
                                  local_addr=config.local_addr, **config.rdzv_configs)
    master_addr = None
    if config.rdzv_backend == "static":  # the workers' store goes beside the rendezvous store (another port)
        master_addr = parse_rendezvous_endpoint(config.rdzv_endpoint, -1)[0]
    log.info("Starting elastic_operator with launch configs: entrypoint=%s nodes=%d:%d nproc_per_node=%d "
             "run_id=%s rdzv=%s@%s max_restarts=%d monitor_interval=%s log_dir=%s", _entrypoint_name(entrypoint, args),
             config.min_nodes, config.max_nodes, config.nproc_per_node, config.run_id, config.rdzv_backend,
             config.rdzv_endpoint, config.max_restarts, config.monitor_interval, config.log_dir)
    os.environ[SIGNALS_TO_HANDLE_ENV] = config.signals_to_handle  # as torch: the agent reads it
    handler = get_rendezvous_handler(params)
    spec = WorkerSpec(role=config.role, local_world_size=config.nproc_per_node, entrypoint=entrypoint,
                      args=tuple(args), rdzv_handler=handler, max_restarts=config.max_restarts,
                      monitor_interval=config.monitor_interval, redirects=config.redirects, tee=config.tee,
                      master_addr=master_addr, local_addr=config.local_addr,
                      event_log_handler=config.event_log_handler,
                      duplicate_stdout_filters=config.duplicate_stdout_filters,
                      duplicate_stderr_filters=config.duplicate_stderr_filters,
                      virtual_local_rank=config.virtual_local_rank)
    agent = LocalElasticAgent(spec=spec, start_method=config.start_method, log_dir=config.log_dir,
                              log_line_prefix_template=config.log_line_prefix_template,
                              shutdown_timeout=config.shutdown_timeout, local_ranks_filter=config.local_ranks_filter)
    shutdown_rdzv = True
    try:
        result = agent.run()
        if result.is_failed():
            raise ChildFailedError(name=_entrypoint_name(entrypoint, args), failures=result.failures)
        return result.return_values
    except SignalException:
        shutdown_rdzv = False  # as torchrun: a signalled agent may be restarted into the same rendezvous
        raise
    finally:
        if shutdown_rdzv:
            handler.shutdown()
