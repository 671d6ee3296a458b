"""``nn.functional.multi_head_attention_forward``: torch's functional form of multi-head attention,
which ``nn.MultiheadAttention``'s forward runs.

Inputs are sequence-first, (L, N, E) (or unbatched (L, E)); the in-projection is one packed weight
or three separate ones; ``bias_k``/``bias_v`` append a learned key/value row and ``add_zero_attn`` a
zero row (the masks widened by one column each time); ``static_k``/``static_v`` replace the
projected keys/values (already split into heads). Boolean masks mean True = *not* allowed and
become 0 / -inf; float masks are added. ``need_weights=True`` runs the unfused path that returns
the weights (averaged over heads unless ``average_attn_weights=False``); ``need_weights=False`` the
fused ``scaled_dot_product_attention`` kernel, which masks causally by itself when ``is_causal`` is
given with no key padding mask. Every step is a dispatched op, so autograd records it.
"""
from __future__ import annotations

import math

from ..core.factories import zeros
from ..core.functional import function as _function
from ..core.functional import where
from ..core.ops import table as _table
from ..core.tensor import Tensor
from ..runtime import dtype as dt
from .functional_activations import softmax
from .functional_dropout import dropout
from .functional_vision import pad

__all__ = ["multi_head_attention_forward"]
_linear = _function(_table.OPS["linear"], "linear", numpy_names=False)
_sdpa = _function(_table.OPS["scaled_dot_product_attention"], "scaled_dot_product_attention", numpy_names=False)
_cat = _function(_table.OPS["cat"], "cat", numpy_names=False)


def _canonical_mask(mask, name: str, target_dtype):
    """torch's ``_canonical_mask``: a bool mask becomes 0 / -inf (True = masked) in ``target_dtype``."""
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        raise TypeError(f"MultiheadAttention: {name} must be a Tensor or None, not {type(mask).__name__}")
    if mask.dtype is dt.bool_:
        return where(mask, float("-inf"), 0.0).to(target_dtype)
    if not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return mask


def _shape_check(query, key, value, key_padding_mask, attn_mask, num_heads) -> bool:
    """torch's ``_mha_shape_check``: whether the inputs are batched, with its messages."""
    if query.ndim == 3:
        if key.ndim != 3 or value.ndim != 3:
            raise AssertionError(f"For batched (3-D) `query`, expected `key` and `value` to be 3-D but found "
                                 f"{key.ndim}-D and {value.ndim}-D tensors respectively")
        if key_padding_mask is not None and key_padding_mask.ndim != 2:
            raise AssertionError(f"For batched (3-D) `query`, expected `key_padding_mask` to be `None` or 2-D but "
                                 f"found {key_padding_mask.ndim}-D tensor instead")
        if attn_mask is not None and attn_mask.ndim not in (2, 3):
            raise AssertionError(f"For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but "
                                 f"found {attn_mask.ndim}-D tensor instead")
        return True
    if query.ndim == 2:
        if key.ndim != 2 or value.ndim != 2:
            raise AssertionError(f"For unbatched (2-D) `query`, expected `key` and `value` to be 2-D but found "
                                 f"{key.ndim}-D and {value.ndim}-D tensors respectively")
        if key_padding_mask is not None and key_padding_mask.ndim != 1:
            raise AssertionError(f"For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or 1-D but "
                                 f"found {key_padding_mask.ndim}-D tensor instead")
        if attn_mask is not None:
            if attn_mask.ndim not in (2, 3):
                raise AssertionError(f"For unbatched (2-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but "
                                     f"found {attn_mask.ndim}-D tensor instead")
            if attn_mask.ndim == 3 and tuple(attn_mask.shape) != (num_heads, query.shape[0], key.shape[0]):
                raise AssertionError(f"Expected `attn_mask` shape to be {(num_heads, query.shape[0], key.shape[0])} "
                                     f"but got {tuple(attn_mask.shape)}")
        return False
    raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received {query.ndim}-D query tensor")


def multi_head_attention_forward(query, key, value, embed_dim_to_check: int, num_heads: int, in_proj_weight,
                                 in_proj_bias, bias_k, bias_v, add_zero_attn: bool, dropout_p: float, out_proj_weight,
                                 out_proj_bias, training: bool = True, key_padding_mask=None, need_weights: bool = True,
                                 attn_mask=None, use_separate_proj_weight: bool = False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None, static_v=None,
                                 average_attn_weights: bool = True, is_causal: bool = False):
    """Multi-head attention as torch's functional (see the module docstring): returns (output,
    weights or None), output (L, N, E) (or (L, E) unbatched)."""
    for t, name in ((query, "query"), (key, "key"), (value, "value")):
        if not isinstance(t, Tensor):
            raise TypeError(f"multi_head_attention_forward(): argument '{name}' must be Tensor, not "
                            f"{type(t).__name__}")
    batched = _shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    L, N, E = query.shape
    S = key.shape[0]
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # the kernel masks causally by itself
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", query.dtype)
        if key_padding_mask is not None:
            is_causal = False  # the merged mask says everything
    if E != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {E}")
    head_dim = E // num_heads
    if head_dim * num_heads != E:
        raise AssertionError(f"embed_dim {E} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {tuple(key.shape[:2])} do not match value's "
                                 f"{tuple(value.shape[:2])}")
        ws = (q_proj_weight, k_proj_weight, v_proj_weight)
        if any(w is None for w in ws):
            raise AssertionError("use_separate_proj_weight is True but q_proj_weight, k_proj_weight or "
                                 "v_proj_weight is None")
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError(f"key shape {tuple(key.shape)} does not match value shape {tuple(value.shape)}")
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
    if attn_mask is not None:
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (L, S):
                raise RuntimeError(f"The shape of the 2D attn_mask is {tuple(attn_mask.shape)}, but should be "
                                   f"{(L, S)}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.ndim == 3:
            if tuple(attn_mask.shape) != (N * num_heads, L, S):
                raise RuntimeError(f"The shape of the 3D attn_mask is {tuple(attn_mask.shape)}, but should be "
                                   f"{(N * num_heads, L, S)}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")
    # the padding mask covers the keys given (or static_k's); the rows bias_k and add_zero_attn append
    # widen it, and torch's message counts them on both sides
    extra = (bias_k is not None) + bool(add_zero_attn)
    keys = static_k.shape[1] if static_k is not None else S
    if key_padding_mask is not None and tuple(key_padding_mask.shape) != (N, keys):
        got = tuple(key_padding_mask.shape[:-1]) + (key_padding_mask.shape[-1] + extra,)
        raise AssertionError(f"expecting key_padding_mask shape of {(N, keys + extra)}, but got {got}")
    # The attention kernel's path with nothing that needs torch's (N * heads, S, head_dim) layout: the
    # heads stay views of the projections, with no copy.
    fast = not need_weights and static_k is None and static_v is None and not add_zero_attn and bias_k is None \
        and bias_v is None
    heads = (num_heads, head_dim) if fast else None
    if use_separate_proj_weight:  # the bias stays packed, (3E,), as torch's
        bs = (in_proj_bias[:E], in_proj_bias[E:2 * E], in_proj_bias[2 * E:]) if in_proj_bias is not None else \
            (None, None, None)
        q, k, v = _linear(query, ws[0], bs[0]), _linear(key, ws[1], bs[1]), _linear(value, ws[2], bs[2])
        if fast:
            q, k, v = (_split_heads(t, heads) for t in (q, k, v))
    else:
        q, k, v = _in_projection_packed(query, key, value, in_proj_weight, in_proj_bias, E, heads)
    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise AssertionError("bias cannot be added to static key." if static_k is not None else
                                 "bias cannot be added to static value.")
        k = _cat([k, bias_k.expand(1, N, E)], 0)
        v = _cat([v, bias_v.expand(1, N, E)], 0)
        attn_mask = pad(attn_mask, (0, 1)) if attn_mask is not None else None
        key_padding_mask = pad(key_padding_mask, (0, 1)) if key_padding_mask is not None else None
    elif bias_k is not None or bias_v is not None:
        raise AssertionError("bias_k and bias_v must both be given or both be None")
    if fast:  # q, k, v are (N, heads, S, head_dim) already
        S = k.shape[2]
    else:  # (L, N, E) -> (N * heads, L, head_dim), torch's head layout
        q = q.reshape(L, N * num_heads, head_dim).transpose(0, 1)
        k, v = (_heads(t, s, N, num_heads, head_dim, name) for t, s, name in ((k, static_k, "static_k"),
                                                                              (v, static_v, "static_v")))
        if add_zero_attn:
            k = _cat([k, zeros((N * num_heads, 1, head_dim), dtype=k.dtype, device=k.device)], 1)
            v = _cat([v, zeros((N * num_heads, 1, head_dim), dtype=v.dtype, device=v.device)], 1)
            attn_mask = pad(attn_mask, (0, 1)) if attn_mask is not None else None
            key_padding_mask = pad(key_padding_mask, (0, 1)) if key_padding_mask is not None else None
        S = k.shape[1]
    if key_padding_mask is not None:
        kpm = key_padding_mask.reshape(N, 1, 1, S).expand(N, num_heads, 1, S).reshape(N * num_heads, 1, S)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0
    if need_weights:
        scores = (q * math.sqrt(1.0 / head_dim)) @ k.transpose(-2, -1)
        if attn_mask is not None:
            scores = scores + attn_mask
        weights = softmax(scores, dim=-1)
        if dropout_p > 0.0:
            weights = dropout(weights, p=dropout_p)
        out = (weights @ v).transpose(0, 1).reshape(L * N, E)
        out = _linear(out, out_proj_weight, out_proj_bias).reshape(L, N, E)
        weights = weights.reshape(N, num_heads, L, S)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if not batched:
            out, weights = out.squeeze(1), weights.squeeze(0)
        return out, weights
    if attn_mask is not None:
        rows = attn_mask.shape[1]  # L, or 1 for a key padding mask alone
        attn_mask = attn_mask.reshape(N, num_heads, rows, S) if attn_mask.shape[0] == N * num_heads else \
            attn_mask.unsqueeze(0)
    if not fast:
        q, k, v = q.reshape(N, num_heads, L, head_dim), k.reshape(N, num_heads, S, head_dim), \
            v.reshape(N, num_heads, S, head_dim)
    out = _sdpa(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal)
    out = out.permute(2, 0, 1, 3).reshape(L * N, E)
    out = _linear(out, out_proj_weight, out_proj_bias).reshape(L, N, E)
    return (out.squeeze(1) if not batched else out), None


def _in_projection_packed(query, key, value, w, b, E: int, heads: tuple | None = None):
    """q, k, v by torch's ``_in_projection_packed``: self-attention (query is key is value) projects
    once with the whole (3E, E) weight and splits the result; key is value projects k and v together;
    otherwise one projection each. One product instead of three is fewer launches forward and
    backward, and under autocast one cast of the input and of the weight instead of three. ``heads``:
    (num_heads, head_dim) to have q, k, v as (N, heads, S, head_dim) views of the one product, which the
    attention kernel reads in place (and whose gradients unbind stacks in the product's layout); else
    (S, N, E) each, contiguous, as torch's head reshapes want."""
    # (L, N, 3E) -> (3, L, N, E), then one view per projection: torch's own chain of views and its three
    # selects give the same values, but each recorded op is host time, and one unbind node's backward
    # is a copy per slice where a select's is a zeros tensor, a copy and a sum.
    if key is value and query is key:
        proj = _linear(query, w, b)
        if heads:
            return _split_heads(proj, (3,) + heads).unbind(0)
        return proj.unflatten(-1, (3, E)).permute(2, 0, 1, 3).contiguous().unbind(0)
    if key is value:
        q = _linear(query, w[:E], b[:E] if b is not None else None)
        kv = _linear(key, w[E:], b[E:] if b is not None else None)
        if heads:
            return (_split_heads(q, heads),) + _split_heads(kv, (2,) + heads).unbind(0)
        return (q,) + kv.unflatten(-1, (2, E)).permute(2, 0, 1, 3).contiguous().unbind(0)
    bs = (b[:E], b[E:2 * E], b[2 * E:]) if b is not None else (None, None, None)
    qkv = (_linear(query, w[:E], bs[0]), _linear(key, w[E:2 * E], bs[1]), _linear(value, w[2 * E:], bs[2]))
    return tuple(_split_heads(t, heads) for t in qkv) if heads else qkv


def _split_heads(t, heads: tuple):
    """A projection (S, N, E) as the view (N, num_heads, S, head_dim) for ``heads`` = (num_heads,
    head_dim); packed ones, (S, N, P * E) for ``heads`` = (P, num_heads, head_dim), as the view
    (P, N, num_heads, S, head_dim)."""
    split = t.unflatten(-1, heads)
    return split.permute(2, 1, 3, 0, 4) if len(heads) == 3 else split.permute(1, 2, 0, 3)


def _heads(t, static, N: int, num_heads: int, head_dim: int, name: str):
    """Projected keys or values as (N * heads, S, head_dim), or the given ``static_k``/``static_v``."""
    if static is None:
        return t.reshape(t.shape[0], N * num_heads, head_dim).transpose(0, 1)
    if static.shape[0] != N * num_heads:
        raise AssertionError(f"expecting {name}.size(0) of {N * num_heads}, but got {static.shape[0]}")
    if static.shape[2] != head_dim:
        raise AssertionError(f"expecting {name}.size(2) of {head_dim}, but got {static.shape[2]}")
    return static
