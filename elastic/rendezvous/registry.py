"""The rendezvous backends by name: ``static`` and ``c10d`` (the dynamic rendezvous on
tritensor's ``TCPStore``), as ``torch.distributed.elastic.rendezvous.registry``."""

from __future__ import annotations

from . import dynamic_rendezvous, static_tcp_rendezvous
from .api import RendezvousHandler, RendezvousParameters, rendezvous_handler_registry

__all__ = ["get_rendezvous_handler"]


def _register_default_handlers() -> None:
    rendezvous_handler_registry.register("static", static_tcp_rendezvous.create_rdzv_handler)
    rendezvous_handler_registry.register("c10d", dynamic_rendezvous.create_handler)


_register_default_handlers()


def get_rendezvous_handler(params: RendezvousParameters) -> RendezvousHandler:
    """A new handler of the backend named by ``params.backend``; an unknown name raises
    ``ValueError`` listing the known ones."""
    return rendezvous_handler_registry.create_handler(params)
