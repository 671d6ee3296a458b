"""tritensor.nn.attention.bias (PyTorch's torch.nn.attention.bias): causal biases for
``scaled_dot_product_attention``. ``causal_lower_right(L, S)`` passed as ``attn_mask`` aligns the
causal triangle to the lower-right corner (decoding with a key/value cache);
``causal_upper_left(L, S)`` is ``is_causal=True``. Neither builds an L×S mask: the attention
kernels mask by index. They are defined beside the op in ``core/ops/attention_bias.py``.
"""
from ...core.ops.attention_bias import CausalBias, CausalVariant, causal_lower_right, causal_upper_left

__all__ = ["causal_upper_left", "causal_lower_right", "CausalVariant", "CausalBias"]
