"""``nn.Dropout`` over ``F.dropout``, as torch keeps it: ``_DropoutNd`` holds what every dropout
module shares (``p`` checked to lie in [0, 1], ``inplace``, the repr).
"""
from __future__ import annotations

from .. import functional as F
from .module import Module


class _DropoutNd(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    def forward(self, x):
        return F.dropout(x, self.p, self.training, self.inplace)
