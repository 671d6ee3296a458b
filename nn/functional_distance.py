"""``nn.functional``'s distance functions: ``cosine_similarity`` and ``pairwise_distance``.

Each is a few elementwise ops and a reduction (or ``norm``) that autograd records, broadcasting
its two inputs as torch does; ``triplet_margin_loss`` is written with ``pairwise_distance``.
"""
from __future__ import annotations

from .functional_checks import _tensor_arg

__all__ = ["cosine_similarity", "pairwise_distance"]


def cosine_similarity(x1, x2, dim: int = 1, eps: float = 1e-8):
    """``torch.nn.functional.cosine_similarity``: x1·x2 / (max(|x1|, eps) max(|x2|, eps)) along
    ``dim``, broadcasting (each norm clamped on its own, as torch)."""
    _tensor_arg(x1, "x1", "cosine_similarity")
    _tensor_arg(x2, "x2", "cosine_similarity")
    dot = (x1 * x2).sum(dim)
    n1 = (x1 * x1).sum(dim).sqrt().clamp_min(eps)
    n2 = (x2 * x2).sum(dim).sqrt().clamp_min(eps)
    return dot / (n1 * n2)


def pairwise_distance(x1, x2, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
    """``torch.nn.functional.pairwise_distance``: the p-norm of x1 - x2 + eps along the last dim."""
    _tensor_arg(x1, "x1", "pairwise_distance")
    _tensor_arg(x2, "x2", "pairwise_distance")
    d = x1 - x2 + eps
    return d.norm(p, dim=-1, keepdim=keepdim)
