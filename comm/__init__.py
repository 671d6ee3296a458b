"""tritensor.comm: torch.distributed for tritensor, over authenticated TCP sockets.

Use it as PyTorch users use ``torch.distributed``::

    import tritensor.comm as dist
    dist.init_process_group("tcp", init_method="env://")
    dist.all_reduce(t, op=dist.ReduceOp.SUM)

Modules: :mod:`.auth` (shared-secret HMAC handshake), :mod:`.framing` (binary frames),
:mod:`.store` (TCPStore), :mod:`.future` (Future), :mod:`.gate` (letting authenticated peers
in through a listener strangers can reach: process groups' and RPC's), :mod:`.mesh` (connecting
and authenticating the ranks of a group), :mod:`.transport` (the progress engine, composing
:mod:`.peer_io` (peer sockets, the poll loop; :mod:`.peer` holds a peer and its posted
requests), :mod:`.work` (Work, completion) and :mod:`.failures` (aborts, error texts,
reporting to the store)), :mod:`.process_group` (init/new_group/ranks),
:mod:`.collectives` (all_reduce and friends: the public front), :mod:`.staging`
(tensors as host buffers), :mod:`.grad_bucket` (what DDP hands a communication hook),
:mod:`.algorithms` (ring and direct exchanges; DDP communication hooks); its benchmarks
are ``python -m tritensor.bench comm``.
"""

from .auth import SECRET_ENV, AuthenticationError
from .collectives import (all_gather, all_gather_into_tensor, all_reduce, all_to_all, barrier, broadcast,
                          gather, irecv, isend, recv, reduce, reduce_scatter, reduce_scatter_tensor, scatter,
                          send)
from .errors import (DistBackendError, DistError, DistNetworkError, DistStoreError, DistStoreTimeoutError,
                     DistTimeoutError)
from ..futures import Future, collect_all, wait_all
from .grad_bucket import _DEFAULT_FIRST_BUCKET_BYTES, GradBucket
from .process_group import (Backend, GroupMember, ProcessGroup, ReduceOp, default_pg_timeout,
                            destroy_process_group, get_backend, get_global_rank, get_group_rank,
                            get_process_group_ranks, get_rank, get_world_size, group, init_process_group,
                            is_available, is_initialized, new_group)
from .store import Store, TCPStore
from .work import Work
from . import algorithms  # noqa: E402  (DDP communication hooks; imports the names above)

__all__ = [
    "SECRET_ENV", "AuthenticationError",
    "all_gather", "all_gather_into_tensor", "all_reduce", "all_to_all", "barrier", "broadcast", "gather",
    "irecv", "isend", "recv", "reduce", "reduce_scatter", "reduce_scatter_tensor", "scatter", "send",
    "DistBackendError", "DistError", "DistNetworkError", "DistStoreError", "DistStoreTimeoutError",
    "DistTimeoutError", "Future", "collect_all", "wait_all",
    "Backend", "GroupMember", "ProcessGroup", "ReduceOp", "default_pg_timeout", "destroy_process_group",
    "get_backend", "get_global_rank", "get_group_rank", "get_process_group_ranks", "get_rank",
    "get_world_size", "group", "init_process_group", "is_available", "is_initialized", "new_group",
    "Store", "TCPStore", "Work", "GradBucket", "algorithms",
]
