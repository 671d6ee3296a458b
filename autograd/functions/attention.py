"""Derivative of ``scaled_dot_product_attention`` (kernels: ``triton_kernels/attention.py`` and
``attention_bwd.py``; checks and broadcasting: ``core/ops/attention.py``).

The recorder first broadcasts the arguments with recorded views (``core.ops.attention.prepare``
uses ``reshape``/``expand``), so a key broadcast over the batch, or a mask broadcast over heads,
gets its gradient summed back by ``expand``'s own derivative. The Function then saves q, k, v,
the output and the per-row log-sum-exp (not the L×S probabilities) and its backward runs the
fused backward kernels, which regenerate the dropout mask from the same Philox counters.

The backward kernels are not themselves recorded, so the gradients they return are not
differentiable again (no double backward), as with PyTorch's fused flash / memory-efficient kernels.
"""
from __future__ import annotations

from ...core.ops import attention as _attn
from ..function import BuiltinFunction


class ScaledDotProductAttention(BuiltinFunction):
    """Fused attention's derivative: forward keeps q, k, v, the output and its log-sum-exp; backward runs the
    attention backward kernels for dq, dk, dv (and an additive mask's gradient)."""
    @staticmethod
    def forward(ctx, q, k, v, mask, plan):
        out, lse = _attn.forward(q, k, v, mask, plan)
        ctx.save_for_backward(q, k, v, out, lse, mask)
        ctx.plan = plan
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, out, lse, mask = ctx.saved_tensors
        needs = ctx.needs_input_grad
        mask_grad = mask is not None and ctx.plan.mask_kind == "additive" and needs[3]
        dq, dk, dv, dmask = _attn.backward(grad, q, k, v, out, lse, mask, ctx.plan, mask_grad)
        return (dq if needs[0] else None, dk if needs[1] else None, dv if needs[2] else None, dmask, None)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """The recorder of scaled_dot_product_attention: runs it as ScaledDotProductAttention, so autograd records
    it (torch's scaled_dot_product_attention, with GQA and the causal and boolean or additive masks)."""
    q, k, v, mask, plan = _attn.prepare(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    return ScaledDotProductAttention.apply(q, k, v, mask, plan).reshape(plan.out_shape)


RECORD = {"scaled_dot_product_attention": scaled_dot_product_attention}
