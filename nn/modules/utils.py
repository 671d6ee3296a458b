"""torch's ``nn.modules.utils``: the argument normalisers the layers share (``_single``, ``_pair``,
``_triple``, ``_quadruple``, made by ``_ntuple``, as torch's: an iterable becomes a tuple, anything
else is repeated n times), and the default weight/bias initialisation of Linear and the
convolutions, which both files need."""
from __future__ import annotations

import collections.abc
import math
from itertools import repeat

from .. import init


def _ntuple(n: int, name: str = "parse"):
    def parse(x):
        if isinstance(x, collections.abc.Iterable):
            return tuple(x)
        return tuple(repeat(x, n))

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reset_weight_and_bias(weight, bias) -> None:
    """PyTorch's Linear/Conv ``reset_parameters``: kaiming_uniform_(a=sqrt(5)) for the weight,
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias, fan_in as ``init`` computes it."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = init._fans(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        init.uniform_(bias, -bound, bound)
