"""The random draws the data utilities make, bit-exact with PyTorch's CPU generator.

PyTorch's samplers shuffle with ``torch.randperm(n, generator=g)`` on a CPU ``torch.Generator``,
an MT19937 engine. ``randperm`` draws ``n - 1`` 32-bit numbers and swaps ``r[i]`` with
``r[i + u % (n - i)]``; ``randint`` below ``2**32`` values is ``u % range``. NumPy's ``MT19937`` is
the same engine and ``RandomState(seed)`` seeds it as torch's ``manual_seed`` does (the low 32
bits), so with the same seed these functions give torch's permutations exactly: a script moved
from PyTorch sees the same data order (``DistributedSampler(seed=s)``, a loader with a generator
seeded ``s``).

The shim for generator objects (kept tiny on purpose): any object with ``initial_seed()`` (a
``tritensor.Generator`` once it exists, or a ``torch.Generator``) gets its own MT19937 stream,
seeded from ``initial_seed()`` on first use and advancing over later uses, as the generator's
state would. Re-seeding it with a *different* seed restarts the stream; re-seeding it with the
same seed is not noticed (a real generator would restart). ``generator=None`` draws a fresh seed
from tritensor's global RNG (so ``tritensor.manual_seed`` makes the order reproducible), as torch
draws one from its default generator.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from ...core.factories import rand
from ...runtime import dtype as dt

_lock = threading.Lock()
_streams: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def mt19937(seed: int) -> np.random.MT19937:
    """An MT19937 engine in the state torch's ``Generator().manual_seed(seed)`` leaves it."""
    key = np.random.RandomState(int(seed) & 0xFFFFFFFF).get_state()[1]
    bg = np.random.MT19937()
    bg.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": 624}}
    return bg


def global_seed() -> int:
    """A 32-bit seed drawn from tritensor's global generator (advancing it)."""
    return int(rand((), dtype=dt.float64).item() * 2**32) & 0xFFFFFFFF


def stream(generator) -> np.random.MT19937:
    """The engine a draw with ``generator`` uses (see the module docstring)."""
    if generator is None:
        return mt19937(global_seed())
    seed_fn = getattr(generator, "initial_seed", None)
    if not callable(seed_fn):
        raise TypeError(f"generator: expected a Generator (an object with initial_seed()), "
                        f"got {type(generator).__name__}")
    seed = int(seed_fn())
    with _lock:
        try:
            entry = _streams.get(generator)
        except TypeError:  # not weak-referenceable: a fresh stream each time
            return mt19937(seed)
        if entry is None or entry[0] != seed:
            entry = (seed, mt19937(seed))
            _streams[generator] = entry
        return entry[1]


def randperm(n: int, generator=None) -> list[int]:
    """``torch.randperm(n, generator=generator).tolist()``."""
    r = list(range(n))
    if n > 1:
        bg = stream(generator)
        with _lock:
            draws = bg.random_raw(n - 1).tolist()
        for i, u in enumerate(draws):
            z = i + u % (n - i)
            r[i], r[z] = r[z], r[i]
    return r


def uniform53(size: int, generator=None) -> np.ndarray:
    """``size`` doubles in [0, 1) as torch's CPU ``uniform_real_distribution<double>`` draws them:
    a 64-bit number from two 32-bit draws (the first is the high half), its low 53 bits scaled."""
    bg = stream(generator)
    with _lock:
        raw = bg.random_raw(2 * size).astype(np.uint64)
    bits = ((raw[0::2] << np.uint64(32)) | raw[1::2]) & np.uint64((1 << 53) - 1)
    return bits.astype(np.float64) * 2.0**-53


def multinomial(weights: np.ndarray, num_samples: int, replacement: bool, generator=None) -> list[int]:
    """``torch.multinomial(weights, num_samples, replacement, generator=generator).tolist()`` for a
    1-d float64 ``weights``, bit-exact with torch's CPU kernel: with replacement, a binary search of
    each uniform draw in the normalised cumulative sum; without, the ``num_samples`` largest of
    ``weights / Exponential(1)`` (torch's exponential draw is ``-log1p(-u)``)."""
    n = weights.shape[0]
    if not replacement and num_samples > n:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    if not (weights >= 0).all():  # NaN fails this too, as in torch
        raise RuntimeError("invalid multinomial distribution (encountering probability entry < 0)")
    if not np.isfinite(weights).all():
        raise RuntimeError("invalid multinomial distribution (encountering probability entry = infinity or NaN)")
    total = weights.sum()
    if not total > 0:
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    if replacement:
        cum = np.cumsum(weights) / total
        cum[-1] = 1.0
        return np.searchsorted(cum, uniform53(num_samples, generator), side="left").tolist()
    q = weights / -np.log1p(-uniform53(n, generator))
    return np.argsort(-q, kind="stable")[:num_samples].tolist()


def randint(high: int, size: int, generator=None) -> list[int]:
    """``torch.randint(high, (size,), dtype=torch.int64, generator=generator).tolist()``."""
    if high >= 2**32:
        raise ValueError(f"randint: high must be below 2**32 here, got {high}")
    bg = stream(generator)
    with _lock:
        draws = bg.random_raw(size).tolist()
    return [u % high for u in draws]
