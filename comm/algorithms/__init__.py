"""torch.distributed.algorithms' public paths: :mod:`.ddp_comm_hooks` follows torch's
``torch.distributed.algorithms.ddp_comm_hooks`` (DDP communication hooks).

How collectives move data (the ring and direct exchanges) is a backend's: the "tcp" one's is
in :mod:`tritensor.comm.backend`.
"""
from . import ddp_comm_hooks

__all__ = ["ddp_comm_hooks"]
