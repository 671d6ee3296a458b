"""``tritensor.nn.parallel``: :class:`DistributedDataParallel` (data parallelism over
``tritensor.comm`` process groups) and :class:`DataParallel` with its functional pieces
(``data_parallel``, ``replicate``, ``scatter``, ``gather``, ``parallel_apply``: one process over
several devices, no collective)."""
from .data_parallel import DataParallel, data_parallel
from .distributed import DistributedDataParallel
from .parallel_apply import parallel_apply
from .replicate import replicate
from .scatter_gather import gather, scatter

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel", "gather", "parallel_apply", "replicate",
           "scatter"]
