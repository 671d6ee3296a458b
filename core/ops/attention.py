"""``scaled_dot_product_attention``: argument checks, broadcasting, and the fused kernels' calls.

Why the work is split this way: the kernels (``triton_kernels/attention.py`` forward,
``attention_bwd.py`` backward) see every operand as (outer batch dims..., head, row, col) through
strides, so everything PyTorch lets a caller vary is resolved here without copying data:

* inputs of 2 or more dims, ``(*batch, heads, L, E)``, missing leading dims counted as 1;
* key/value batch dims that broadcast against the query's (``expand``: stride 0);
* grouped-query attention (``enable_gqa``, Hq a multiple of Hk) and a single key/value head
  broadcast over the query heads: both become the kernel's ``GROUP`` (query head h reads key head
  h // GROUP), never a repeat_interleave;
* ``attn_mask``, boolean (True = take part) or additive (float32 or the query's dtype), of any
  shape that broadcasts to (*batch, Hq, L, S): an ``expand``ed view, read in place;
* ``is_causal``: PyTorch's upper-left aligned causal mask (key j <= query i); the kernels take a
  diagonal offset, so the lower-right alignment (offset S - L) is the same code: an ``attn_mask``
  of :func:`~.attention_bias.causal_lower_right` (``tritensor.nn.attention.bias``) picks it.

:func:`prepare` does all of it and returns the broadcast views and a :class:`Plan`; the autograd
recorder calls it too, so the views are recorded and gradients of broadcast operands are summed
back by their ``expand``'s derivative. :func:`forward` / :func:`backward` run the kernels.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...backends import cuda as _backends
from ...triton_kernels import attention as _fwd
from ...triton_kernels import attention_bwd as _bwd
from ...triton_kernels._common import collapse, f64_bits, input_precision
from ...runtime import dtype as dt
from ...runtime.dtype_policy import FLOAT_COMPUTE
from ..generator import take_counters
from ..shape import broadcast_shapes
from ..tensor_base import TensorBase
from .attention_bias import CausalBias

_OP = "scaled_dot_product_attention"


@dataclass(frozen=True)
class Plan:
    """Everything the kernels need besides the tensors, fixed once per call."""

    out_shape: tuple  # the result's shape as the caller sees it
    heads: int  # Hq
    group: int  # query heads per key/value head
    scale: float
    causal_offset: int  # key j is visible from query i when j <= i + causal_offset
    is_causal: bool
    mask_kind: object  # None, "bool" or "additive"
    dropout_p: float
    seed: int
    rng_offset: int


def _check(t, name):
    if not isinstance(t, TensorBase):
        raise TypeError(f"{_OP}(): argument '{name}' must be Tensor, not {type(t).__name__}")
    if t.ndim < 2:
        raise RuntimeError(f"{_OP}(): expected {name} to have at least 2 dimensions (..., seq_len, embed_dim), "
                           f"but got a {t.ndim}-D tensor of shape {list(t.shape)}")


def _number(x, name, kinds=(int, float, np.integer, np.floating)):
    if isinstance(x, bool) or not isinstance(x, kinds):
        raise TypeError(f"{_OP}(): argument '{name}' must be a number, not {type(x).__name__}")
    return float(x)


def prepare(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False,
            causal_offset=None):
    """Check the arguments and broadcast them: ``(q, k, v, mask, plan)``.

    q is (*B, Hq, L, E), k (*B, Hk, S, E), v (*B, Hk, S, Ev), mask (*B, Hq, L, S) or None, all
    views of the arguments (``unsqueeze``/``expand``). Raises before anything runs.
    ``causal_offset`` overrides the diagonal of ``is_causal`` (default 0, PyTorch's upper-left alignment).
    """
    for t, name in ((query, "query"), (key, "key"), (value, "value")):
        _check(t, name)
    if not (query.dtype is key.dtype is value.dtype):
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got query.dtype: "
                           f"{query.dtype.name} key.dtype: {key.dtype.name} and value.dtype: {value.dtype.name} instead.")
    if query.dtype not in dt.FLOATING:
        raise RuntimeError(f"{_OP}(): expected query, key and value of a floating point dtype (float16, bfloat16, "
                           f"float32, float64), but got {query.dtype.name}")
    if not (query.device == key.device == value.device):
        raise RuntimeError(f"Expected query, key, and value to have the same device type, but got query.device: "
                           f"{query.device} key.device: {key.device} and value.device: {value.device} instead.")
    dropout_p = _number(dropout_p, "dropout_p")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    if not isinstance(is_causal, (bool, np.bool_)):
        raise TypeError(f"{_OP}(): argument 'is_causal' must be bool, not {type(is_causal).__name__}")
    if not isinstance(enable_gqa, (bool, np.bool_)):
        raise TypeError(f"{_OP}(): argument 'enable_gqa' must be bool, not {type(enable_gqa).__name__}")
    E, L = query.shape[-1], query.shape[-2]
    S, Ev = key.shape[-2], value.shape[-1]
    if key.shape[-1] != E:
        raise RuntimeError(f"{_OP}(): expected key's last dimension to equal query's ({E}), but got key of shape "
                           f"{list(key.shape)} and query of shape {list(query.shape)}")
    if value.shape[-2] != S:
        raise RuntimeError(f"{_OP}(): expected key and value to have the same sequence length, but got key of shape "
                           f"{list(key.shape)} and value of shape {list(value.shape)}")
    scale = 1.0 / math.sqrt(E) if scale is None and E > 0 else (math.inf if scale is None else _number(scale, "scale"))

    nd = max(query.ndim, key.ndim, value.ndim, 3)
    q, k, v = (t.reshape((1,) * (nd - t.ndim) + tuple(t.shape)) for t in (query, key, value))
    Hq, Hk, Hv = q.shape[-3], k.shape[-3], v.shape[-3]
    if Hk != Hv:
        raise RuntimeError(f"{_OP}(): expected key and value to have the same number of heads, but got {Hk} and {Hv}")
    if enable_gqa and Hk and Hq % Hk:
        raise RuntimeError(f"{_OP}(): number of heads in key and value ({Hk}) must divide the number of heads in "
                           f"query ({Hq}) when enable_gqa=True")
    if not enable_gqa and Hk != Hq and Hk != 1:
        raise RuntimeError(f"{_OP}(): query has {Hq} heads but key and value have {Hk}; pass enable_gqa=True for "
                           "grouped-query attention (query heads a multiple of key/value heads)")
    group = Hq // Hk if Hk else 1
    try:
        batch = broadcast_shapes(q.shape[:-3], k.shape[:-3], v.shape[:-3])
    except RuntimeError:
        raise RuntimeError(f"{_OP}(): the batch dimensions of query {list(query.shape)}, key {list(key.shape)} and "
                           f"value {list(value.shape)} are not broadcastable") from None
    q = q.expand(batch + (Hq, L, E))
    k = k.expand(batch + (Hk, S, E))
    v = v.expand(batch + (Hk, S, Ev))

    mask, kind = None, None
    if isinstance(attn_mask, CausalBias):  # a causal triangle, not data: the kernels mask by index
        if is_causal:
            raise ValueError("CausalBias should not be used with causal=True")
        if (attn_mask.seq_len_q, attn_mask.seq_len_kv) != (L, S):
            raise RuntimeError(f"{_OP}(): attn_mask is a causal bias of {attn_mask.seq_len_q} x {attn_mask.seq_len_kv}"
                               f" but query has {L} rows and key {S}")
        if causal_offset is None:
            causal_offset = attn_mask.diagonal()
        attn_mask = None
    if attn_mask is not None:
        if not isinstance(attn_mask, TensorBase):
            raise TypeError(f"{_OP}(): argument 'attn_mask' must be Tensor or None, not {type(attn_mask).__name__}")
        if is_causal:
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
        if attn_mask.device != query.device:
            raise RuntimeError(f"{_OP}(): expected attn_mask on {query.device}, but got it on {attn_mask.device}")
        if attn_mask.dtype is dt.bool_:
            kind = "bool"
        elif attn_mask.dtype is dt.float32 or attn_mask.dtype is query.dtype:
            kind = "additive"
        else:
            raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                               f"attn_mask.dtype: {attn_mask.dtype.name} and query.dtype: {query.dtype.name} instead.")
        full = batch + (Hq, L, S)
        try:
            if broadcast_shapes(tuple(attn_mask.shape), full) != full:
                raise RuntimeError
        except RuntimeError:
            raise RuntimeError(f"{_OP}(): attn_mask of shape {list(attn_mask.shape)} cannot be broadcast to the "
                               f"attention weights' shape {list(full)}") from None
        mask = attn_mask.expand(full)
    offset = 0 if causal_offset is None else int(causal_offset)
    out_shape = (broadcast_shapes(query.shape[:-3], key.shape[:-3], value.shape[:-3]) + (Hq,) if max(
        query.ndim, key.ndim, value.ndim) >= 3 else ()) + (L, Ev)
    seed, rng_offset = take_counters(math.prod(batch) * Hq * L * S) if dropout_p > 0 else (0, 0)
    plan = Plan(out_shape, Hq, group, scale, offset, bool(is_causal) or causal_offset is not None, kind, dropout_p,
                seed, rng_offset)
    return q, k, v, mask, plan


def _strides(t, nb):
    st = t.stride()
    return st[:nb], st[nb:]


def _layout(q, k, v, o, mask, nb):
    """Outer batch dims collapsed where every operand allows; per operand (batch strides, (h, row, col) strides)."""
    ops = [q, k, v, o] + ([mask] if mask is not None else [])
    shape, bstrides, _ = collapse(tuple(q.shape[:nb]), *[t.stride()[:nb] for t in ops])
    if mask is None:
        bstrides.append((0,) * len(shape))
    inner = [t.stride()[nb:] for t in ops] + ([] if mask is not None else [(0, 0, 0)])
    return shape, list(zip(bstrides, inner))


def _scale_bits(plan):
    return f64_bits(plan.scale), f64_bits(0.0 if plan.dropout_p >= 1.0 else 1.0 / (1.0 - plan.dropout_p))


def forward(q, k, v, mask, plan):
    """Run the forward kernel on :func:`prepare`'s views: ``(out, lse)``; out is (*B, Hq, L, Ev)."""
    nb = q.ndim - 3
    L, Ev = q.shape[-2], v.shape[-1]
    out = TensorBase._empty(q.shape[:-1] + (Ev,), q.dtype, q.device)
    acc = FLOAT_COMPUTE[q.dtype]
    lse = TensorBase._empty((math.prod(q.shape[:-2]), L), acc, q.device)
    if out.numel() == 0:
        return out, lse
    shape, strides = _layout(q, k, v, out, mask, nb)
    _fwd.forward(out, lse, q, k, v, mask, plan.mask_kind, shape, strides, plan.heads, plan.group, plan.scale,
                 plan.causal_offset, plan.is_causal, plan.seed, plan.rng_offset, plan.dropout_p,
                 input_precision(q.dtype.name, _backends.matmul.allow_tf32))
    return out, lse


def backward(grad_out, q, k, v, out, lse, mask, plan, mask_grad: bool):
    """Gradients ``(dq, dk, dv, dmask)`` of :func:`forward` (dmask only when ``mask_grad``, else None).

    dq/dk/dv are contiguous with q's/k's/v's shapes (k's Hk heads: the kernel sums each group of
    query heads itself); dmask is the full (*B, Hq, L, S) gradient of an additive mask.
    """
    nb = q.ndim - 3
    if grad_out.stride() != out.stride():  # the kernels read dO with O's (contiguous) layout
        grad_out = grad_out.contiguous()
    dq = TensorBase._empty(q.shape, q.dtype, q.device)
    dk = TensorBase._empty(k.shape, k.dtype, k.device)
    dv = TensorBase._empty(v.shape, v.dtype, v.device)
    dmask = TensorBase._empty(mask.shape, mask.dtype, mask.device) if mask_grad else None
    delta = TensorBase._empty(lse.shape, lse.dtype, lse.device)
    shape, strides = _layout(q, k, v, out, mask, nb)
    scale_bits, drop_bits = _scale_bits(plan)
    _bwd.backward(dq, dk, dv, dmask, delta, grad_out, q, k, v, out, lse, mask, plan.mask_kind, shape, strides, plan.heads,
                  plan.group, scale_bits, plan.causal_offset, plan.is_causal, plan.seed, plan.rng_offset,
                  plan.dropout_p, drop_bits, input_precision(q.dtype.name, _backends.matmul.allow_tf32))
    return dq, dk, dv, dmask


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """``torch.nn.functional.scaled_dot_product_attention``, fused: softmax(q kᵀ·scale + mask) v.

    The L×S attention matrix is never materialised (FlashAttention-2's tiling; see
    ``triton_kernels/attention.py``). With ``dropout_p > 0`` the probabilities are dropped with
    the Philox generator (``tritensor.manual_seed`` makes it reproducible).
    """
    q, k, v, mask, plan = prepare(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    out, _ = forward(q, k, v, mask, plan)
    return out.reshape(plan.out_shape)
