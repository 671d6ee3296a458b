"""tritensor.nn.attention (PyTorch's torch.nn.attention): helpers for ``scaled_dot_product_attention``.

``bias`` holds the causal biases, masks that are passed as ``attn_mask`` but never materialised.
(``nn.MultiheadAttention`` is a module: ``tritensor.nn.MultiheadAttention``.)
"""
from . import bias

__all__ = ["bias"]
