"""``nn.functional``'s linear functions beyond the op table's ``linear``: ``bilinear``.

``bilinear`` is a batched matmul with the weight and a dot with the second input, recorded op by
op, so it needs no derivative of its own.
"""
from __future__ import annotations

from .functional_checks import _tensor_arg

__all__ = ["bilinear"]


def bilinear(input1, input2, weight, bias=None):
    """``torch.nn.functional.bilinear``: y_k = x1ᵀ W_k x2 + b_k, (*, in1) x (*, in2) -> (*, out)."""
    _tensor_arg(input1, "input1", "bilinear")
    _tensor_arg(input2, "input2", "bilinear")
    _tensor_arg(weight, "weight", "bilinear")
    if weight.ndim != 3 or weight.shape[1] != input1.shape[-1] or weight.shape[2] != input2.shape[-1]:
        raise RuntimeError(f"bilinear(): weight must be (out_features, in1_features, in2_features) = "
                           f"(*, {input1.shape[-1]}, {input2.shape[-1]}), got {list(weight.shape)}")
    # (*, in1) @ (out, in1, in2) -> (*, out, in2), then the dot with x2 over in2
    t = (input1.unsqueeze(-2).unsqueeze(-2) @ weight).squeeze(-2)
    y = (t * input2.unsqueeze(-2)).sum(-1)
    return y + bias if bias is not None else y
