"""``tritensor.nn.parallel``: :class:`DistributedDataParallel` (data parallelism over
``tritensor.comm`` process groups)."""
from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
