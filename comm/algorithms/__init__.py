"""torch.distributed.algorithms' public paths: :mod:`.ddp_comm_hooks` follows torch's
``torch.distributed.algorithms.ddp_comm_hooks`` (DDP communication hooks).

How collectives move data (the ring and direct exchanges) is the transport's, in
:mod:`tritensor.comm.backend`.
"""
from . import ddp_comm_hooks

__all__ = ["ddp_comm_hooks"]
