"""Causal attention biases (PyTorch's ``torch.nn.attention.bias``): the mask is a shape, not data.

``is_causal=True`` aligns the causal triangle to the upper-left corner of the L×S score matrix
(key j visible from query i when j <= i). Decoding with a key/value cache wants the other
alignment, the lower-right one (j <= i + S - L: the last query sees every key). PyTorch offers
it as an ``attn_mask`` object, :func:`causal_lower_right`, that ``scaled_dot_product_attention``
recognises and runs without materialising a mask; :func:`causal_upper_left` is ``is_causal``
spelled the same way. Here the object carries the triangle's diagonal
(:meth:`CausalBias.diagonal`), which the attention kernels take as their causal offset, and
:meth:`CausalBias._materialize` builds the boolean mask for whoever wants the tensor.

With the lower-right variant and L > S, the first L - S queries see no key at all. PyTorch warns
that its kernels give NaN there; tritensor's attention kernels give 0 for a query that sees no
key (as for any fully masked row), and the warning says so.
"""
from __future__ import annotations

import warnings
from enum import IntEnum

from ...runtime import dtype as dt
from ...runtime.device import device_or_default
from ..tensor_base import TensorBase
from . import fill
from .join import tril


class CausalVariant(IntEnum):
    """Where the causal triangle is anchored: ``UPPER_LEFT`` (``is_causal``) or ``LOWER_RIGHT``."""

    UPPER_LEFT = 1
    LOWER_RIGHT = 2


def _length(v, name):
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise TypeError(f"CausalBias: {name} must be a non-negative int, but got {v!r}")
    return v


class CausalBias:
    """A causal mask of ``seq_len_q`` × ``seq_len_kv``, passed as ``attn_mask`` to
    ``scaled_dot_product_attention``; build it with :func:`causal_upper_left` or :func:`causal_lower_right`."""

    def __init__(self, variant: CausalVariant, seq_len_q: int, seq_len_kv: int):
        if not isinstance(variant, CausalVariant):
            raise TypeError(f"CausalBias: variant must be a CausalVariant, but got {variant!r}")
        self.variant = variant
        self.seq_len_q = _length(seq_len_q, "seq_len_q")
        self.seq_len_kv = _length(seq_len_kv, "seq_len_kv")
        if variant is CausalVariant.LOWER_RIGHT and seq_len_q > seq_len_kv:
            warnings.warn(f"Lower right causal bias with seq_len_q ({seq_len_q}) > seq_len_kv ({seq_len_kv}): the "
                          f"first {seq_len_q - seq_len_kv} queries attend to no key, and their outputs are 0 "
                          "(PyTorch's kernels give NaN there)")

    def diagonal(self) -> int:
        """The triangle's diagonal: key j is visible from query i when j <= i + diagonal()."""
        return self.seq_len_kv - self.seq_len_q if self.variant is CausalVariant.LOWER_RIGHT else 0

    def _materialize(self, device=None):
        """The mask as a (seq_len_q, seq_len_kv) bool tensor, True where a query may see a key."""
        ones = TensorBase._empty((self.seq_len_q, self.seq_len_kv), dt.bool_, device_or_default(device))
        fill(ones, True)
        return tril(ones, self.diagonal())

    def __repr__(self):
        return repr(self._materialize())


def _size(size, fn):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    if len(size) != 2:
        raise ValueError(f"{fn} only supports 2D tensors: expected (seq_len_q, seq_len_kv), but got {size!r}")
    return size


def causal_upper_left(*size) -> CausalBias:
    """The causal mask ``tril(ones(L, S))``: the same attention as ``is_causal=True``."""
    return CausalBias(CausalVariant.UPPER_LEFT, *_size(size, "causal_upper_left"))


def causal_lower_right(*size) -> CausalBias:
    """The causal mask ``tril(ones(L, S), diagonal=S - L)``: the last query sees every key."""
    return CausalBias(CausalVariant.LOWER_RIGHT, *_size(size, "causal_lower_right"))
