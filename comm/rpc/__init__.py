"""tritensor.comm.rpc: ``torch.distributed.rpc`` on tritensor's authenticated sockets.

``init_rpc``, ``rpc_sync``, ``rpc_async``, ``remote``, ``RRef``, ``get_worker_info``,
``WorkerInfo``, ``functions.async_execution``, ``shutdown``, ``TensorPipeRpcBackendOptions``;
``FaultInjector``/``FaultRule`` inject faults into RRef control messages for tests.
Modules: :mod:`.api` (the functions), :mod:`.agent` (sockets and threads; :mod:`.responder`
runs the requests it receives and answers them), :mod:`.links`
(outgoing connections: made, checked, remade, failures named), :mod:`.wire`
(frames), :mod:`.rref` (the RRef handle), :mod:`.rref_context` (the RRef protocol),
:mod:`.channel` (retried, acknowledged control messages), :mod:`.faults` (the injector).

Security: every connection is authenticated (HMAC, ``TRITENSOR_COMM_SECRET``) before a frame
is read; pickled payloads are accepted from authenticated peers only, so they are
**trusted-peer-only**: anyone holding the secret can run code on every worker.
"""

from . import functions
from .api import get_worker_info, init_rpc, remote, rpc_async, rpc_sync, shutdown
from .faults import FaultInjector, FaultRule
from .options import BackendType, RpcBackendOptions, TensorPipeRpcBackendOptions, WorkerInfo
from .rref import RRef

__all__ = ["init_rpc", "rpc_sync", "rpc_async", "remote", "shutdown", "get_worker_info", "RRef", "WorkerInfo",
           "BackendType", "RpcBackendOptions", "TensorPipeRpcBackendOptions", "FaultInjector", "FaultRule",
           "functions"]
