"""``WorkerInfo``, ``BackendType`` and the backend options of :func:`~.api.init_rpc`."""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["WorkerInfo", "BackendType", "RpcBackendOptions", "TensorPipeRpcBackendOptions"]


@dataclass(frozen=True)
class WorkerInfo:
    """A worker's globally unique ``name`` and ``id`` (its rank), as torch's WorkerInfo."""

    name: str
    id: int


class BackendType(enum.Enum):
    """torch.distributed.rpc.BackendType: TENSORPIPE, the one backend (here tritensor's authenticated
    sockets)."""
    TENSORPIPE = "TENSORPIPE"  # the only backend: tritensor's authenticated sockets


class RpcBackendOptions:
    """``num_worker_threads`` (callee thread pool), ``rpc_timeout`` (seconds; 0 or less: none),
    ``init_method`` (``env://`` or ``tcp://host:port``), ``bind_addr`` (the RPC listener's
    address; default ``$TRITENSOR_COMM_BIND_ADDR`` or loopback), ``fault_injector`` (a
    :class:`~.faults.FaultInjector` for RRef control messages), ``control_retry_delay`` and
    ``control_max_attempts`` (the retry schedule of control messages)."""

    def __init__(self, num_worker_threads: int = 16, rpc_timeout: float = 60.0, init_method: str = "env://",
                 *, bind_addr: str | None = None, fault_injector=None, control_retry_delay: float = 0.05,
                 control_max_attempts: int = 30, device_maps=None, devices=None, _transports=None,
                 _channels=None):
        if isinstance(num_worker_threads, bool) or not isinstance(num_worker_threads, int) or num_worker_threads < 1:
            raise ValueError(f"num_worker_threads: expected a positive int, got {num_worker_threads!r}")
        if isinstance(rpc_timeout, bool) or not isinstance(rpc_timeout, (int, float)):
            raise TypeError(f"rpc_timeout: expected seconds as a number, got {rpc_timeout!r}")
        if not isinstance(init_method, str) or not (init_method.startswith("env://") or init_method.startswith("tcp://")):
            raise ValueError(f"init_method: expected 'env://' or 'tcp://host:port', got {init_method!r}")
        if not control_retry_delay > 0 or not (isinstance(control_max_attempts, int) and control_max_attempts >= 1):
            raise ValueError("control_retry_delay: expected > 0; control_max_attempts: expected a positive int")
        self.num_worker_threads = num_worker_threads
        self.rpc_timeout = float(rpc_timeout)
        self.init_method = init_method
        self.bind_addr = bind_addr
        self.fault_injector = fault_injector
        self.control_retry_delay = control_retry_delay
        self.control_max_attempts = control_max_attempts
        self.device_maps = device_maps or {}
        self.devices = devices or []


TensorPipeRpcBackendOptions = RpcBackendOptions
