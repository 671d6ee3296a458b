"""Samplers (PyTorch's ``torch.utils.data.sampler``): which indices a DataLoader fetches, in what
order, and how they are grouped into batches. Shuffles are torch's (see ``_random.py``)."""
from __future__ import annotations

import numpy as np

from ...core.factories import from_numpy
from ...core.tensor import Tensor
from . import _random


class Sampler:
    """Base class: ``__iter__`` yields indices (or lists of indices, for a batch sampler)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation (or ``num_samples`` draws with ``replacement=True``)."""

    def __init__(self, data_source, replacement: bool = False, num_samples: int | None = None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={self.replacement}")
        if not isinstance(self.num_samples, int) or isinstance(self.num_samples, bool) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        """How many indices an epoch yields: ``num_samples`` if given, else the dataset's length."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        # torch seeds a fresh generator from its default one when none is given; so do we.
        generator = self.generator if self.generator is not None else _SeededOnce(_random.global_seed())
        if self.replacement:
            for _ in range(self.num_samples // 32):
                yield from _random.randint(n, 32, generator)
            yield from _random.randint(n, self.num_samples % 32, generator)
        else:
            for _ in range(self.num_samples // n):
                yield from _random.randperm(n, generator)
            yield from _random.randperm(n, generator)[: self.num_samples % n]

    def __len__(self):
        return self.num_samples


class _SeededOnce:
    """A stand-in generator for one ``__iter__`` (what ``torch.Generator().manual_seed(s)`` is there)."""

    __slots__ = ("seed", "__weakref__")

    def __init__(self, seed: int):
        self.seed = seed

    def initial_seed(self) -> int:
        return self.seed


class SubsetRandomSampler(Sampler):
    """The given indices, in random order."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in _random.randperm(len(self.indices), self.generator):
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights`` (with
    ``replacement``, each draw independent; without, no index twice): torch's draws exactly
    (``_random.multinomial``), so a seeded generator gives the indices torch gives."""

    def __init__(self, weights, num_samples: int, replacement: bool = True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        if isinstance(weights, Tensor):
            weights = weights.detach().cpu().numpy()
        weights_array = np.asarray(weights, dtype=np.float64)
        if weights_array.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{tuple(weights_array.shape)}")
        self.weights = from_numpy(weights_array)  # float64 on the cpu, as torch keeps them
        self._weights = weights_array
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        generator = self.generator if self.generator is not None else _SeededOnce(_random.global_seed())
        yield from _random.multinomial(self._weights, self.num_samples, self.replacement, generator)

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Group another sampler's indices into lists of ``batch_size`` (the last one shorter unless
    ``drop_last``)."""

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
