"""tritensor.elastic.rendezvous: how the nodes of a job find each other, round after round.

As ``torch.distributed.elastic.rendezvous``: a ``RendezvousHandler`` (built from
``RendezvousParameters`` by ``registry.get_rendezvous_handler``) gives the agent, per round,
a store shared by the round's nodes, this node's rank and the number of nodes. Backends:
``static`` (fixed nodes, ranks given) and ``c10d`` (elastic, on tritensor's authenticated
``TCPStore``; see :mod:`.dynamic_rendezvous`)::

    from tritensor.elastic.rendezvous import RendezvousParameters
    from tritensor.elastic.rendezvous.registry import get_rendezvous_handler

    params = RendezvousParameters("c10d", "node0:29400", "job7", min_nodes=2, max_nodes=4,
                                  join_timeout=60, last_call_timeout=5)
    store, rank, world_size = get_rendezvous_handler(params).next_rendezvous()
"""

from .api import (RendezvousClosedError, RendezvousConnectionError, RendezvousError, RendezvousGracefulExitError,
                  RendezvousHandler, RendezvousHandlerRegistry, RendezvousInfo, RendezvousParameters,
                  RendezvousStateError, RendezvousStoreInfo, RendezvousTimeoutError, rendezvous_handler_registry)
from . import registry  # noqa: F401  (registers the default backends)

__all__ = ["RendezvousClosedError", "RendezvousConnectionError", "RendezvousError", "RendezvousGracefulExitError",
           "RendezvousHandler", "RendezvousHandlerRegistry", "RendezvousInfo", "RendezvousParameters",
           "RendezvousStateError", "RendezvousStoreInfo", "RendezvousTimeoutError", "rendezvous_handler_registry"]
