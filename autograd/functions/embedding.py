"""Derivative of ``embedding`` (core entry: ``core/ops/embedding.py``): the gradient rows are
scatter-added into a zero table (``IndexAddIntoZeros``: one atomic-add kernel, duplicates
accumulate), with the rows of ``padding_idx`` masked out and, for ``scale_grad_by_freq``, each
row divided by how often its index occurs in the batch. Written with recorded ops, so double
backward works."""
from __future__ import annotations

from ...core.ops import embedding as _emb
from ...core.tensor import Tensor
from ..function import BuiltinFunction
from .index import IndexAddIntoZeros, _zeros


class Embedding(BuiltinFunction):
    """embedding's derivative: the gradient rows are added into the looked-up weight rows (index_add), none
    for padding_idx, divided by each row's count with scale_grad_by_freq."""
    @staticmethod
    def forward(ctx, input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq):
        out, flat = _emb.embedding_rows(input, weight, max_norm, norm_type)
        ctx.flat, ctx.shape, ctx.padding_idx, ctx.scale = flat, weight.shape, padding_idx, scale_grad_by_freq
        return out

    @staticmethod
    def backward(ctx, g):
        idx = ctx.flat
        g2 = g.reshape(-1, ctx.shape[1])
        if ctx.padding_idx is not None:
            g2 = g2 * (idx != ctx.padding_idx).unsqueeze(1).to(g2.dtype)
        if ctx.scale:
            zeros = _zeros((ctx.shape[0],), g2.dtype, g2.device)
            counts = zeros.index_add(0, idx, Tensor._empty(idx.shape, zeros.dtype, g2.device).fill_(1))
            g2 = g2 / counts.index_select(0, idx).unsqueeze(1).to(g2.dtype)
        return None, IndexAddIntoZeros.apply(g2, ctx.shape, 0, idx), None, None, None, None


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """The recorder of ``embedding``: checks first (nothing recorded on bad input), then the Function."""
    padding_idx = _emb.check_embedding(input, weight, padding_idx, max_norm, norm_type, sparse)
    return Embedding.apply(input, weight, padding_idx, max_norm, norm_type, bool(scale_grad_by_freq))


RECORD = {"embedding": embedding}
