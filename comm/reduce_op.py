"""``ReduceOp``: the reduction operations, as ``torch.distributed.ReduceOp``.

Why a module of its own: the public collectives (which check a caller's op) and every backend
(which carries it out, and the TCP backend also names it on the wire) need the one definition,
and neither may import the other; so it sits beneath both, beside :mod:`.errors` and
:mod:`.work`.
"""

from __future__ import annotations

import enum

__all__ = ["ReduceOp"]


class ReduceOp(enum.IntEnum):
    """Reduction operations, as ``torch.distributed.ReduceOp``; the values are the codes the TCP
    backend's data headers carry, so a rank can name the op a peer used."""

    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
