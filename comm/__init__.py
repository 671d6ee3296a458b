"""tritensor.comm: torch.distributed for tritensor, over authenticated TCP sockets.

Use it as PyTorch users use ``torch.distributed``::

    import tritensor.comm as dist
    dist.init_process_group("tcp", init_method="env://")
    dist.all_reduce(t, op=dist.ReduceOp.SUM)

Modules: :mod:`.auth` (shared-secret HMAC handshake), :mod:`.framing` (binary frames),
:mod:`.store` (TCPStore), :mod:`.future` (Future), :mod:`.transport` (peer sockets and the
progress engine), :mod:`.process_group` (init/new_group/ranks), :mod:`.collectives`
(all_reduce and friends), :mod:`.bench` (``python -m tritensor.comm.bench``).
"""

from .auth import SECRET_ENV, AuthenticationError
from .collectives import (all_gather, all_gather_into_tensor, all_reduce, all_to_all, barrier, broadcast,
                          gather, irecv, isend, recv, reduce, reduce_scatter, reduce_scatter_tensor, scatter,
                          send)
from .errors import (DistBackendError, DistError, DistNetworkError, DistStoreError, DistStoreTimeoutError,
                     DistTimeoutError)
from .future import Future, collect_all, wait_all
from .process_group import (Backend, GroupMember, ProcessGroup, ReduceOp, default_pg_timeout,
                            destroy_process_group, get_backend, get_global_rank, get_group_rank,
                            get_process_group_ranks, get_rank, get_world_size, group, init_process_group,
                            is_available, is_initialized, new_group)
from .store import Store, TCPStore
from .transport import Work

__all__ = [
    "SECRET_ENV", "AuthenticationError",
    "all_gather", "all_gather_into_tensor", "all_reduce", "all_to_all", "barrier", "broadcast", "gather",
    "irecv", "isend", "recv", "reduce", "reduce_scatter", "reduce_scatter_tensor", "scatter", "send",
    "DistBackendError", "DistError", "DistNetworkError", "DistStoreError", "DistStoreTimeoutError",
    "DistTimeoutError", "Future", "collect_all", "wait_all",
    "Backend", "GroupMember", "ProcessGroup", "ReduceOp", "default_pg_timeout", "destroy_process_group",
    "get_backend", "get_global_rank", "get_group_rank", "get_process_group_ranks", "get_rank",
    "get_world_size", "group", "init_process_group", "is_available", "is_initialized", "new_group",
    "Store", "TCPStore", "Work",
]
