"""How collectives move data, and torch.distributed.algorithms' public paths.

:mod:`.plan` holds what every algorithm shares (the posting context of one operation,
scratch buffers, confirmations, ordered reductions, the direct-or-ring choice);
:mod:`.ring` the pipelined ring (all_reduce, all_gather, reduce_scatter of large tensors);
:mod:`.direct` the exchanges where every rank talks to the others at once (small
all_reduce/all_gather/reduce_scatter, rooted and pairwise collectives, barrier, send/recv).
The public functions, with torch.distributed's signatures and argument checks, are in
:mod:`tritensor.comm.collectives`. :mod:`.ddp_comm_hooks` follows torch's
``torch.distributed.algorithms.ddp_comm_hooks`` (DDP communication hooks).
"""
from . import ddp_comm_hooks

__all__ = ["ddp_comm_hooks"]
