"""``DistributedSampler``: each DDP rank's share of a dataset, the same partition as PyTorch's.

The index list (shuffled with ``seed + epoch``, bit-exact with torch's ``randperm``), padded by
repeating its head to a multiple of ``num_replicas`` (or cut down to one with ``drop_last``), is
dealt out round-robin: rank ``r`` gets ``indices[r::num_replicas]``. Call ``set_epoch(epoch)``
before each epoch so every rank draws the same new order.
"""
from __future__ import annotations

import math

from ... import comm as dist
from . import _random
from .sampler import Sampler, _SeededOnce


class DistributedSampler(Sampler):
    """Each rank's share of a dataset, the same indices as torch's DistributedSampler for the same seed and epoch
    (see the module docstring); rank and world size default to the process group's."""

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False):
        if num_replicas is None:
            num_replicas = dist.get_world_size()
        if rank is None:
            rank = dist.get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        if self.drop_last and len(self.dataset) % self.num_replicas != 0:
            # Split to the nearest length that is evenly divisible, so each rank gets the same data.
            self.num_samples = math.ceil((len(self.dataset) - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(len(self.dataset) / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        if self.shuffle:
            indices = _random.randperm(len(self.dataset), _SeededOnce(self.seed + self.epoch))
        else:
            indices = list(range(len(self.dataset)))
        if not self.drop_last:
            padding_size = self.total_size - len(indices)
            if padding_size <= len(indices):
                indices += indices[:padding_size]
            else:
                indices += (indices * math.ceil(padding_size / len(indices)))[:padding_size]
        else:
            indices = indices[: self.total_size]
        assert len(indices) == self.total_size
        indices = indices[self.rank: self.total_size: self.num_replicas]
        assert len(indices) == self.num_samples
        return iter(indices)

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Shuffle differently (and identically on every rank) in the next epoch."""
        self.epoch = epoch
