"""``matmul``/``@``, ``mm``, ``bmm`` and ``linear``: PyTorch's shape rules, then one kernel.

Everything a user can get wrong is checked here, before a launch: operand types, devices,
dtypes (matmul operands are not promoted, as in PyTorch), ranks and the inner dimension. The
kernel (``triton_kernels/matmul.py``) then sees operands that share one batch shape: broadcast
batch dims are stride-0 views, transposes are swapped strides; nothing is copied.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import math

from ...backends import cuda as _backends
from ...triton_kernels import matmul as _k
from ...runtime import dtype as dt
from ..shape import broadcast_shapes, view_strides
from ..tensor_base import TensorBase
from .views import broadcast_view

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor


def _check_pair(op: str, a, b, names=("input", "other")) -> None:
    for x, name in zip((a, b), names):
        if not isinstance(x, TensorBase):
            raise TypeError(f"{op}(): argument '{name}' must be a Tensor, not {type(x).__name__}")
    if a.device != b.device:
        raise RuntimeError(f"{op}(): Expected all tensors to be on the same device, but found at least two devices, "
                           f"{a.device} and {b.device}!")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"{op}(): expected {names[0]} and {names[1]} to have the same dtype, but got: "
                           f"{a.dtype.name} != {b.dtype.name} (matmul does not promote; cast one with .to())")
    if a.dtype not in dt.FLOATING:
        raise RuntimeError(f"{op}(): expected a floating-point dtype (float16, bfloat16, float32, float64) for "
                           f"{names[0]} and {names[1]}, got {a.dtype.name}")


def _shape_str(t) -> str:
    return "x".join(str(s) for s in t.shape)


def _run(a: Tensor, b: Tensor, bias=None, activation=None) -> Tensor:
    """a[..., M, K] @ b[..., K, N] for checked operands; batch dims broadcast here."""
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if b.ndim == 2 and batch:
        # (..., M, K) @ (K, N): fold the batch into M when a's layout allows (one big GEMM).
        st = view_strides(a.shape, a.stride(), (math.prod(batch) * M, K))
        if st is not None:
            out2 = _run(a._view((math.prod(batch) * M, K), st), b, bias, activation)
            return out2.view(*batch, M, N)
    out = TensorBase._empty(batch + (M, N), a.dtype, a.device)
    _k.matmul(out, broadcast_view(a, batch + (M, K)), broadcast_view(b, batch + (K, N)), bias=bias,
              activation=activation, allow_tf32=_backends.matmul.allow_tf32)
    return out


def matmul(input, other) -> Tensor:
    """torch.matmul: dot, matrix-vector, matrix-matrix or broadcast batched product."""
    _check_pair("matmul", input, other)
    da, db = input.ndim, other.ndim
    if da == 0 or db == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {da}D and {db}D")
    a = input.unsqueeze(0) if da == 1 else input
    b = other.unsqueeze(-1) if db == 1 else other
    if a.shape[-1] != b.shape[-2]:
        if da == 1 and db == 1:
            raise RuntimeError(f"inconsistent tensor size, expected tensor [{input.shape[0]}] and src "
                               f"[{other.shape[0]}] to have the same number of elements, but got "
                               f"{input.shape[0]} and {other.shape[0]} elements respectively")
        if da == 2 and db == 2:
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({_shape_str(input)} and {_shape_str(other)})")
        raise RuntimeError(f"matmul: input and other shapes cannot be multiplied ({list(input.shape)} and "
                           f"{list(other.shape)}): input's last dimension ({a.shape[-1]}) must equal other's "
                           f"{'only' if db == 1 else 'second-to-last'} dimension ({b.shape[-2]})")
    try:
        broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except RuntimeError:
        raise RuntimeError(f"matmul: the batch dimensions of input {list(input.shape)} and other "
                           f"{list(other.shape)} cannot be broadcast together "
                           f"({list(a.shape[:-2])} vs {list(b.shape[:-2])})") from None
    out = _run(a, b)
    if da == 1:
        out = out.squeeze(-2)
    if db == 1:
        out = out.squeeze(-1)
    return out


def mm(input, mat2) -> Tensor:
    """torch.mm: 2-D by 2-D, no broadcasting."""
    _check_pair("mm", input, mat2, ("input", "mat2"))
    if input.ndim != 2:
        raise RuntimeError(f"mm(): input must be a matrix (2-D), got {input.ndim}-D shape {list(input.shape)}")
    if mat2.ndim != 2:
        raise RuntimeError(f"mm(): mat2 must be a matrix (2-D), got {mat2.ndim}-D shape {list(mat2.shape)}")
    if input.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({_shape_str(input)} and {_shape_str(mat2)})")
    return _run(input, mat2)


def bmm(input, mat2) -> Tensor:
    """torch.bmm: (b, n, m) @ (b, m, p) with equal batch sizes, no broadcasting."""
    _check_pair("bmm", input, mat2, ("input", "mat2"))
    if input.ndim != 3:
        raise RuntimeError(f"bmm(): batch1 (input) must be a 3D tensor, got shape {list(input.shape)}")
    if mat2.ndim != 3:
        raise RuntimeError(f"bmm(): batch2 (mat2) must be a 3D tensor, got shape {list(mat2.shape)}")
    if input.shape[0] != mat2.shape[0] or input.shape[2] != mat2.shape[1]:
        raise RuntimeError(f"bmm(): input and mat2 shapes cannot be multiplied ({list(input.shape)} and "
                           f"{list(mat2.shape)}): expected mat2 of shape [{input.shape[0]}, {input.shape[2]}, *]")
    return _run(input, mat2)


def fused_linear(input, weight, bias=None, activation=None) -> Tensor:
    """act(input @ weight.T + bias) in one kernel: the epilogue adds bias and applies relu/gelu.

    ``activation`` is None, ``"relu"`` or ``"gelu"`` (exact, erf-based, like torch's default).
    """
    _check_pair("linear", input, weight, ("input", "weight"))
    if activation not in _k.ACTIVATIONS:
        raise ValueError(f"linear(): activation must be one of {_k.ACTIVATIONS}, got {activation!r}")
    if weight.ndim != 2:
        raise RuntimeError(f"linear(): weight must be 2-D (out_features, in_features), got shape {list(weight.shape)}")
    if input.ndim == 0:
        raise RuntimeError("linear(): input must be at least 1-D, got a 0-D tensor")
    if input.shape[-1] != weight.shape[1]:
        rows = math.prod(input.shape[:-1])
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{input.shape[-1]} and "
                           f"{weight.shape[1]}x{weight.shape[0]}) (linear: input {list(input.shape)}, "
                           f"weight {list(weight.shape)})")
    if bias is not None:
        if not isinstance(bias, TensorBase):
            raise TypeError(f"linear(): argument 'bias' must be a Tensor or None, not {type(bias).__name__}")
        _check_pair("linear", input, bias, ("input", "bias"))
        if bias.ndim != 1 or bias.shape[0] != weight.shape[0]:
            raise RuntimeError(f"linear(): bias must have shape [{weight.shape[0]}] (out_features), "
                               f"got {list(bias.shape)}")
    a = input.unsqueeze(0) if input.ndim == 1 else input
    out = _run(a, weight.t(), bias=bias, activation=activation)
    return out.squeeze(0) if input.ndim == 1 else out


def linear(input, weight, bias=None) -> Tensor:
    """torch.nn.functional.linear: input @ weight.T + bias, bias fused into the matmul."""
    return fused_linear(input, weight, bias)
