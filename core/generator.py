"""The Philox generator's state: one (seed, offset) pair shared by every device.

Why a module of its own: the factories (``rand``, ``randn``) and the ops that draw random
numbers inside their kernels (dropout in ``scaled_dot_product_attention``) must consume the same
counter stream, and ``core/ops`` sits beneath ``core/factories.py`` in the import order. A kernel
given ``(seed, offset)`` uses counters ``offset .. offset + n - 1``, so a result is reproducible
after ``manual_seed`` and independent of block sizes or execution mode.
"""
from __future__ import annotations

import threading

_seed_lock = threading.Lock()
_generator = {"seed": 67280421310721, "offset": 0}


def take_counters(n: int) -> tuple[int, int]:
    """Reserve ``n`` Philox counters: returns ``(seed, first counter)`` and advances the offset."""
    with _seed_lock:
        seed, off = _generator["seed"], _generator["offset"]
        # tl.rand draws 32-bit counters; 4 values per counter block, keep streams apart.
        _generator["offset"] = (off + ((n + 3) // 4) * 4) % (2**32)
    return seed, off
