"""``matmul``/``@``, ``mm``, ``bmm`` and ``linear``: PyTorch's shape rules, then one kernel.

Everything a user can get wrong is checked here, before a launch: operand types, devices,
dtypes (matmul operands are not promoted, as in PyTorch), ranks and the inner dimension. The
kernel (``triton_kernels/matmul.py``) then sees operands that share one batch shape: broadcast
batch dims are stride-0 views, transposes are swapped strides; nothing is copied.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import math
import numbers

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


# ----- products with an added term: composites of the ops above (each dispatched, so recorded) ------
_SCALAR_NAME = {dt.float32: "Float", dt.float64: "Double", dt.float16: "Half", dt.bfloat16: "BFloat16",
                dt.int64: "Long", dt.int32: "Int", dt.bool_: "Bool"}


def _check_number(op: str, value, name: str) -> None:
    if not isinstance(value, numbers.Number) or isinstance(value, (bool, complex)):
        raise TypeError(f"{op}(): argument '{name}' must be Number, not {type(value).__name__}")


def _check_added(op: str, input, like, shape) -> None:
    """``input`` (the added term) is a tensor of the product's dtype and device that expands to its shape."""
    if not isinstance(input, TensorBase):
        raise TypeError(f"{op}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if input.dtype is not like.dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got {_SCALAR_NAME.get(input.dtype)} and "
                           f"{_SCALAR_NAME.get(like.dtype)}")
    if input.device != like.device:
        raise RuntimeError(f"{op}(): Expected all tensors to be on the same device, but found at least two devices, "
                           f"{input.device} and {like.device}!")
    if input.ndim > len(shape) or any(s != 1 and s != t for s, t in zip(input.shape[::-1], shape[::-1])):
        bad = next((i for i, (s, t) in enumerate(zip(input.shape[::-1], shape[::-1])) if s != 1 and s != t), 0)
        raise RuntimeError(f"The expanded size of the tensor ({shape[::-1][bad] if bad < len(shape) else -1}) must "
                           f"match the existing size ({input.shape[::-1][bad]}) at non-singleton dimension "
                           f"{input.ndim - 1 - bad}.  Target sizes: {list(shape)}.  Tensor sizes: {list(input.shape)}")


def _beta_input_plus(input, product, beta, alpha) -> Tensor:
    """beta * input + alpha * product in one add (alpha is add's): beta == 0 ignores input, NaN included."""
    if beta == 0:
        return product if alpha == 1 else product.mul(alpha)
    base = input if beta == 1 else input.mul(beta)
    return base.expand(*product.shape).add(product, alpha=alpha)


def mv(input, vec) -> Tensor:
    """torch.mv: matrix (n, m) times vector (m,)."""
    _check_pair("mv", input, vec, ("input", "vec"))
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {input.ndim}, {vec.ndim}")
    if input.shape[1] != vec.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({input.shape[0]}), mat ({_shape_str(input)}), "
                           f"vec ({vec.shape[0]})")
    return input.matmul(vec)


def addmv(input, mat, vec, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * (mat @ vec)."""
    _check_number("addmv", beta, "beta")
    _check_number("addmv", alpha, "alpha")
    _check_pair("addmv", mat, vec, ("mat", "vec"))
    if mat.ndim != 2 or vec.ndim != 1 or (isinstance(input, TensorBase) and input.ndim > 1):
        raise RuntimeError(f"vector + matrix @ vector expected, got {getattr(input, 'ndim', 0)}, {mat.ndim}, {vec.ndim}")
    if mat.shape[1] != vec.shape[0] or (isinstance(input, TensorBase) and input.numel() != 1
                                         and input.shape[0] != mat.shape[0]):
        raise RuntimeError(f"size mismatch, got input ({input.shape[0] if getattr(input, 'ndim', 0) else 1}), "
                           f"mat ({_shape_str(mat)}), vec ({vec.shape[0]})")
    _check_added("addmv", input, mat, (mat.shape[0],))
    return _beta_input_plus(input, mv(mat, vec), beta, alpha)


def addmm(input, mat1, mat2, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * (mat1 @ mat2), ``input`` broadcast to the product's shape."""
    shape = _addmm_checks("addmm", mat1, mat2, beta, alpha)
    _check_added("addmm", input, mat1, shape)
    return _beta_input_plus(input, mat1.mm(mat2), beta, alpha)


def _addmm_checks(op, mat1, mat2, beta, alpha) -> tuple:
    """addmm's and addmm_'s checks of their operands (``op`` names the caller in the number checks); the
    product's shape."""
    _check_number(op, beta, "beta")
    _check_number(op, alpha, "alpha")
    _check_pair("addmm", mat1, mat2, ("mat1", "mat2"))
    for m, name in ((mat1, "mat1"), (mat2, "mat2")):
        if m.ndim != 2:
            raise RuntimeError(f"{name} must be a matrix, got {m.ndim}-D tensor")
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({_shape_str(mat1)} and {_shape_str(mat2)})")
    return (mat1.shape[0], mat2.shape[1])


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * (batch1 @ batch2), batched (b, n, m) @ (b, m, p)."""
    shape = _baddbmm_checks("baddbmm", batch1, batch2, beta, alpha)
    _check_added("baddbmm", input, batch1, shape)
    return _beta_input_plus(input, batch1.bmm(batch2), beta, alpha)


def _baddbmm_checks(op, batch1, batch2, beta, alpha) -> tuple:
    """baddbmm's and baddbmm_'s checks of their operands; the product's shape."""
    _check_number(op, beta, "beta")
    _check_number(op, alpha, "alpha")
    _check_pair("baddbmm", batch1, batch2, ("batch1", "batch2"))
    for m, name in ((batch1, "batch1"), (batch2, "batch2")):
        if m.ndim != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")
    if batch2.shape[:2] != (batch1.shape[0], batch1.shape[2]):
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{batch1.shape[0]}, {batch1.shape[2]}] but got: [{batch2.shape[0]}, {batch2.shape[1]}].")
    return (batch1.shape[0], batch1.shape[1], batch2.shape[2])


def _in_place(input, product, beta, alpha) -> Tensor:
    """input = beta * input + alpha * product, in place (input already has the product's shape); each step a
    dispatched in-place op, so recorded."""
    if beta == 0:
        input.fill_(0)  # input is not read: a NaN in it does not survive, as torch
    elif beta != 1:
        input.mul_(beta)
    return input.add_(product, alpha=alpha)


def _check_in_place(input, shape) -> None:
    if not isinstance(input, TensorBase):
        raise TypeError(f"self must be a Tensor, not {type(input).__name__}")
    if tuple(input.shape) != tuple(shape):
        raise RuntimeError(f"Bad in-place call: input tensor size {list(input.shape)} and output tensor size "
                           f"{list(shape)} should match")


def addmv_(input, mat, vec, *, beta=1, alpha=1) -> Tensor:
    """In place: input = beta * input + alpha * (mat @ vec)."""
    _check_number("addmv_", beta, "beta")
    _check_number("addmv_", alpha, "alpha")
    _check_pair("addmv", mat, vec, ("mat", "vec"))
    if mat.ndim == 2:
        _check_in_place(input, (mat.shape[0],))
    _check_added("addmv", input, mat, (mat.shape[0],) if mat.ndim == 2 else tuple(input.shape))
    return _in_place(input, mv(mat, vec), beta, alpha)


def addmm_(input, mat1, mat2, *, beta=1, alpha=1) -> Tensor:
    """In place: input = beta * input + alpha * (mat1 @ mat2)."""
    shape = _addmm_checks("addmm_", mat1, mat2, beta, alpha)
    _check_in_place(input, shape)
    _check_added("addmm", input, mat1, shape)
    return _in_place(input, mat1.mm(mat2), beta, alpha)


def baddbmm_(input, batch1, batch2, *, beta=1, alpha=1) -> Tensor:
    """In place: input = beta * input + alpha * (batch1 @ batch2)."""
    shape = _baddbmm_checks("baddbmm_", batch1, batch2, beta, alpha)
    _check_in_place(input, shape)
    _check_added("baddbmm", input, batch1, shape)
    return _in_place(input, batch1.bmm(batch2), beta, alpha)
