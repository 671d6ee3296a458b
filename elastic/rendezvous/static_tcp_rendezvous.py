"""The ``static`` rendezvous: a fixed number of nodes, each told its rank (``--node-rank``).

It exists for jobs that are not elastic: node 0 hosts the store at the endpoint
(``--master-addr:--master-port`` when the launcher has no ``--rdzv-endpoint``), the others
join it. Every call to ``next_rendezvous`` returns the same rank and world size, with a store
view private to that call's number (nodes restart together).
"""

from __future__ import annotations

from typing import Optional

from .api import RendezvousClosedError, RendezvousHandler, RendezvousInfo, RendezvousParameters
from .utils import PrefixStore, connect_store, parse_rendezvous_endpoint

__all__ = ["StaticTCPRendezvous", "create_rdzv_handler"]

_default_timeout_seconds = 600


class StaticTCPRendezvous(RendezvousHandler):
    """Static rendezvous of ``world_size`` nodes on the store at ``master_addr:master_port``."""

    def __init__(self, master_addr: str, master_port: int, rank: int, world_size: int, run_id: str,
                 timeout: float = _default_timeout_seconds):
        self.master_addr = master_addr
        self.master_port = master_port
        self.rank = rank
        self.world_size = world_size
        self.run_id = run_id
        self.timeout = timeout
        self._store = None
        self._calls = 0
        self._closed = False

    def get_backend(self) -> str:
        """'static'."""
        return "static"

    def next_rendezvous(self) -> RendezvousInfo:
        """Connect to (node rank 0: host) the store at master_addr:master_port and return this node's fixed rank and
        world size; RendezvousClosedError once closed."""
        if self._closed:
            raise RendezvousClosedError(f"static rendezvous '{self.run_id}' is closed")
        if self._store is None:
            what = f"static rendezvous '{self.run_id}' (node rank {self.rank} of {self.world_size})"
            self._store, _ = connect_store(self.master_addr, self.master_port, self.rank == 0, self.timeout, what)
        self._calls += 1
        store = PrefixStore(f"torchelastic/{self.run_id}/{self._calls}", self._store)
        return RendezvousInfo(store, self.rank, self.world_size)

    def is_closed(self) -> bool:
        """Whether this node closed the rendezvous (static rendezvous is not shared)."""
        return self._closed

    def set_closed(self) -> None:
        """Close the rendezvous on this node."""
        self._closed = True

    def num_nodes_waiting(self) -> int:
        """Always 0: a static membership never has nodes waiting to join."""
        return 0

    def get_run_id(self) -> str:
        """The run id given at construction."""
        return self.run_id

    def shutdown(self) -> bool:
        """Close the store connection (if open); returns True."""
        if self._store is not None:
            self._store.close()
            self._store = None
        return True


def create_rdzv_handler(params: RendezvousParameters) -> StaticTCPRendezvous:
    """The handler for ``params``: needs ``rank`` (the node rank) and ``min_nodes == max_nodes``;
    ``timeout`` (600 s) bounds reaching the store."""
    if "rank" not in params.config:
        raise ValueError("rank is absent in RendezvousParameters. Try add --node-rank to the cmd request")
    if params.min_nodes != params.max_nodes:
        raise ValueError(f"the static rendezvous needs a fixed number of nodes, got "
                         f"min_nodes={params.min_nodes} max_nodes={params.max_nodes}: use --rdzv-backend c10d")
    rank = params.get_as_int("rank")
    world_size = params.max_nodes
    if not 0 <= rank < world_size:
        raise ValueError(f"rank (--node-rank): expected 0..{world_size - 1}, got {rank}")
    host, port = parse_rendezvous_endpoint(params.endpoint, 29400)
    timeout: Optional[float] = params.get_as_float("timeout", _default_timeout_seconds)
    return StaticTCPRendezvous(host, port, rank, world_size, params.run_id, timeout)
