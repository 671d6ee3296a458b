"""tritensor.comm: torch.distributed for tritensor, over authenticated TCP sockets.

Use it as PyTorch users use ``torch.distributed``::

    import tritensor.comm as dist
    dist.init_process_group("tcp", init_method="env://")
    dist.all_reduce(t, op=dist.ReduceOp.SUM)

The public API, torch.distributed's: :mod:`.collectives` (all_reduce and friends),
:mod:`.process_group` (init/new_group/ranks), :mod:`.store` (TCPStore, PrefixStore), :mod:`.work`
(Work), :mod:`.reduce_op` (ReduceOp), :mod:`.grad_bucket` (what DDP hands a communication hook),
:mod:`.errors` (the exceptions); ``Future`` is :mod:`tritensor.futures`' class. The collectives
call a group's backend through the interface of :mod:`.backend_api` (torch's ProcessGroup
backend API, and ``Backend.register_backend``); the built-in backend, "tcp", is
:mod:`.backend.tcp` over the transport in :mod:`.backend` (handshake, frames, the rank mesh, the
progress engine, the ring and direct algorithms, staging, the store's server), none of which is
a public name. This package loads it, which registers it; no public module imports a backend.

Clients of this API, which use its public names only: :mod:`.algorithms` (the DDP
communication hooks at torch's ``torch.distributed.algorithms`` paths) and :mod:`.rpc`
(``torch.distributed.rpc``). This package imports neither (they sit on it):
``tritensor.comm.algorithms`` is loaded with DistributedDataParallel, which ``import tritensor``
imports, and by ``from tritensor.comm import *``. Its benchmarks are
``python -m tritensor.bench comm``.
"""

from .backend import tcp as _tcp  # noqa: F401  (registers the "tcp" backend)
from .backend.auth import SECRET_ENV, AuthenticationError
from .collectives import (all_gather, all_gather_into_tensor, all_reduce, all_to_all, barrier, broadcast,
                          gather, irecv, isend, recv, reduce, reduce_scatter, reduce_scatter_tensor, scatter,
                          send)
from .errors import (DistBackendError, DistError, DistNetworkError, DistStoreError, DistStoreTimeoutError,
                     DistTimeoutError)
from ..futures import Future, collect_all, wait_all
from .grad_bucket import DEFAULT_FIRST_BUCKET_BYTES as _DEFAULT_FIRST_BUCKET_BYTES, GradBucket  # torch's private name
from .process_group import (Backend, GroupMember, ProcessGroup, ReduceOp, default_pg_timeout,
                            destroy_process_group, get_backend, get_global_rank, get_group_rank,
                            get_process_group_ranks, get_rank, get_world_size, group, init_process_group,
                            is_available, is_initialized, new_group)
from .store import PrefixStore, Store, TCPStore
from .work import Work
import sys as _sys

from ..nn.modules._functions import register_distributed as _register_sync_batch_norm

__all__ = [
    "SECRET_ENV", "AuthenticationError",
    "all_gather", "all_gather_into_tensor", "all_reduce", "all_to_all", "barrier", "broadcast", "gather",
    "irecv", "isend", "recv", "reduce", "reduce_scatter", "reduce_scatter_tensor", "scatter", "send",
    "DistBackendError", "DistError", "DistNetworkError", "DistStoreError", "DistStoreTimeoutError",
    "DistTimeoutError", "Future", "collect_all", "wait_all",
    "Backend", "GroupMember", "ProcessGroup", "ReduceOp", "default_pg_timeout", "destroy_process_group",
    "get_backend", "get_global_rank", "get_group_rank", "get_process_group_ranks", "get_rank",
    "get_world_size", "group", "init_process_group", "is_available", "is_initialized", "new_group",
    "PrefixStore", "Store", "TCPStore", "Work", "GradBucket", "algorithms",
]

# nn.SyncBatchNorm synchronizes through this package, as torch's through torch.distributed; nn sits below comm and
# cannot import it, so comm hands itself over
_register_sync_batch_norm(_sys.modules[__name__])
