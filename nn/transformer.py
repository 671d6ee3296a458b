"""``nn.TransformerEncoderLayer`` and ``nn.TransformerEncoder``, as PyTorch defines them.

Why: the standard building block of sequence models, with PyTorch's submodule names
(``self_attn``, ``linear1``, ``linear2``, ``norm1``, ``norm2``, ``dropout``, ``dropout1``,
``dropout2``; the encoder's ``layers.<i>`` and ``norm``) so state_dicts map one to one. The
self-attention runs with ``need_weights=False``, i.e. on the fused attention kernel; with
``is_causal=True`` (and no padding mask) the kernel masks causally without reading a mask.

``TransformerEncoder.layers`` is a :class:`~tritensor.nn.Sequential` of deep copies of the given
layer (PyTorch uses a ModuleList: the state_dict keys, ``layers.0.…``, are the same).
"""
from __future__ import annotations

import copy

from ..core.factories import arange
from ..core.functional import where
from . import functional as F
from .multihead_attention import MultiheadAttention
from .layers import Dropout, LayerNorm, Linear, Sequential
from .module import Module

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def generate_square_subsequent_mask(sz: int, device=None, dtype=None):
    """The causal float mask: 0 on and below the diagonal, -inf above (``nn.Transformer``'s)."""
    i = arange(sz, device=device)
    mask = where(i.unsqueeze(0) > i.unsqueeze(1), float("-inf"), 0.0)
    return mask if dtype is None else mask.to(dtype)


class TransformerEncoderLayer(Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            if activation not in _ACTIVATIONS:
                raise RuntimeError(f"activation should be relu/gelu, not {activation}")
            activation = _ACTIVATIONS[activation]
        self.activation = activation

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        if not isinstance(encoder_layer, Module):
            raise TypeError(f"TransformerEncoder: encoder_layer must be a Module, not {type(encoder_layer).__name__}")
        self.layers = Sequential(*[copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        out = src
        for mod in self.layers:
            out = mod(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        if self.norm is not None:
            out = self.norm(out)
        return out
