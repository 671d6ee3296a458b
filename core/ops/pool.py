"""max_pool2d / avg_pool2d and their backward ops: PyTorch's argument rules, then the pool kernels.

The geometry (kernel size, stride defaulting to the kernel size, padding at most half the
window, ``ceil_mode``'s output size) is checked and computed here with PyTorch's formulas and
messages, before anything launches. Backward ops take what autograd saved:

* ``max_pool2d_backward(grad_output, input_shape, indices, kernel_size, stride, padding, dilation, ceil_mode)``
* ``avg_pool2d_backward(grad_output, input_shape, kernel_size, stride, padding, ceil_mode,
  count_include_pad, divisor_override)``
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numbers

from ...triton_kernels import pool as _k
from ...runtime import dtype as dt
from ..tensor_base import TensorBase

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor


def _ints(v, name: str, op: str, default=None) -> tuple:
    if v is None or (isinstance(v, (tuple, list)) and len(v) == 0 and default is not None):
        return default
    vals = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if len(vals) == 1:
        vals = vals * 2
    if len(vals) != 2 or not all(isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in vals):
        extra = "omitted, " if default is not None else ""
        raise RuntimeError(f"{op}: {name} must either be {extra}a single int, or a tuple of two ints, got {v!r}")
    return tuple(int(x) for x in vals)


def _out_size(size, k, s, p, d, ceil_mode) -> int:
    """PyTorch's pooling_output_shape: floor (or ceil) division, last window must start in bounds."""
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def pool_geometry(op: str, shape, kernel_size, stride, padding, dilation, ceil_mode, *, dilated=True):
    """Check a 2-D pooling's arguments against a 4-D input shape; return (k, s, p, d, (OH, OW))."""
    k = _ints(kernel_size, "kernel_size", op)
    s = _ints(stride, "stride", op, default=k)
    p = _ints(padding, "padding", op)
    d = _ints(dilation, "dilation", op)
    if min(k) <= 0:
        raise RuntimeError(f"{op}: kernel size should be greater than zero, but got kH: {k[0]} kW: {k[1]}")
    if min(s) <= 0:
        raise RuntimeError(f"{op}: stride should be greater than zero, but got dH: {s[0]} dW: {s[1]}")
    if min(d) <= 0:
        raise RuntimeError(f"{op}: dilation should be greater than zero, but got dilationH: {d[0]} dilationW: {d[1]}")
    if min(p) < 0:
        raise RuntimeError(f"{op}: pad must be non-negative, but got pad: {min(p)}")
    for i in range(2):
        if p[i] * 2 > d[i] * (k[i] - 1) + 1:
            kernel = "effective kernel size" if dilated else "kernel size"
            extra = f" and dilation={d[i]}" if dilated else ""
            raise RuntimeError(f"{op}: pad should be at most half of {kernel}, but got pad={p[i]}, "
                               f"kernel_size={k[i]}{extra}")
    N, C, H, W = shape
    out = (_out_size(H, k[0], s[0], p[0], d[0], ceil_mode), _out_size(W, k[1], s[1], p[1], d[1], ceil_mode))
    if min(out) < 1:
        raise RuntimeError(f"{op}: Given input size: ({C}x{H}x{W}). Calculated output size: ({C}x{out[0]}x{out[1]}). "
                           f"Output size is too small")
    return k, s, p, d, out


def _as_4d(input, op: str):
    if not isinstance(input, TensorBase):
        raise TypeError(f"{op}(): argument 'input' must be a Tensor, not {type(input).__name__}")
    if input.dtype not in dt.FLOATING:
        raise RuntimeError(f"{op}(): expected a floating-point input (float16, bfloat16, float32, float64), "
                           f"got {input.dtype.name}")
    if input.ndim not in (3, 4) or any(s == 0 for s in input.shape[-3:]):
        raise RuntimeError(f"{op}: Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, "
                           f"but got: {list(input.shape)}")
    return (input.unsqueeze(0), True) if input.ndim == 3 else (input, False)


def _shape4(input_shape, op: str):
    shape = tuple(int(s) for s in input_shape)
    if len(shape) == 3:
        return (1,) + shape, True
    if len(shape) != 4:
        raise RuntimeError(f"{op}(): input_shape must be 3-D or 4-D, got {list(shape)}")
    return shape, False


def _check_grad(op, grad_output, expected, unbatched):
    if not isinstance(grad_output, TensorBase):
        raise TypeError(f"{op}(): argument 'grad_output' must be a Tensor, not {type(grad_output).__name__}")
    if grad_output.dtype not in dt.FLOATING:
        raise RuntimeError(f"{op}(): expected a floating-point grad_output, got {grad_output.dtype.name}")
    want = expected[1:] if unbatched else expected
    if tuple(grad_output.shape) != tuple(want):
        raise RuntimeError(f"{op}(): grad_output has shape {list(grad_output.shape)} but the pooling's output has "
                           f"shape {list(want)}")
    return grad_output.unsqueeze(0) if unbatched else grad_output


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """torch.nn.functional.max_pool2d; with ``return_indices`` also the flat argmax within each H*W plane."""
    op = "max_pool2d"
    x, unbatched = _as_4d(input, op)
    k, s, p, d, (OH, OW) = pool_geometry(op, x.shape, kernel_size, stride, padding, dilation, ceil_mode)
    y = TensorBase._empty((x.shape[0], x.shape[1], OH, OW), x.dtype, x.device)
    idx = TensorBase._empty(y.shape, dt.int64, x.device)
    _k.max_pool2d_forward(y, idx, x, k, s, p, d)
    if unbatched:
        y, idx = y.squeeze(0), idx.squeeze(0)
    return (y, idx) if return_indices else y


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """F.max_pool2d_with_indices: max_pool2d's maxima and the flat (h * W + w) position of each in its input
    plane."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def max_pool2d_backward(grad_output, input_shape, indices, kernel_size, stride=None, padding=0, dilation=1,
                        ceil_mode=False) -> Tensor:
    """d(loss)/d(input) of max_pool2d: each output's gradient goes to the input element it picked."""
    op = "max_pool2d_backward"
    shape, unbatched = _shape4(input_shape, op)
    k, s, p, d, (OH, OW) = pool_geometry(op, shape, kernel_size, stride, padding, dilation, ceil_mode)
    expected = (shape[0], shape[1], OH, OW)
    dy = _check_grad(op, grad_output, expected, unbatched)
    if not isinstance(indices, TensorBase) or indices.dtype is not dt.int64:
        raise TypeError(f"{op}(): indices must be the int64 Tensor returned by max_pool2d(return_indices=True)")
    if tuple(indices.shape) != tuple(grad_output.shape):
        raise RuntimeError(f"{op}(): indices has shape {list(indices.shape)} but grad_output has shape "
                           f"{list(grad_output.shape)}")
    idx = indices.unsqueeze(0) if unbatched else indices
    if idx.device != dy.device:
        raise RuntimeError(f"{op}(): grad_output is on {dy.device} but indices are on {idx.device}")
    dx = TensorBase._empty(shape, dy.dtype, dy.device)
    _k.max_pool2d_backward(dx, dy, idx, k, s, p, d)
    return dx.squeeze(0) if unbatched else dx


def _divisor(op, divisor_override):
    if divisor_override is None:
        return None
    if isinstance(divisor_override, bool) or not isinstance(divisor_override, numbers.Integral):
        raise TypeError(f"{op}(): divisor_override must be an int or None, got {divisor_override!r}")
    if divisor_override == 0:
        raise RuntimeError(f"{op}: divisor must be not zero")
    return int(divisor_override)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None) -> Tensor:
    """torch.nn.functional.avg_pool2d."""
    op = "avg_pool2d"
    x, unbatched = _as_4d(input, op)
    div = _divisor(op, divisor_override)
    k, s, p, _, (OH, OW) = pool_geometry(op, x.shape, kernel_size, stride, padding, 1, ceil_mode, dilated=False)
    y = TensorBase._empty((x.shape[0], x.shape[1], OH, OW), x.dtype, x.device)
    _k.avg_pool2d_forward(y, x, k, s, p, count_include_pad, div)
    return y.squeeze(0) if unbatched else y


def avg_pool2d_backward(grad_output, input_shape, kernel_size, stride=None, padding=0, ceil_mode=False,
                        count_include_pad=True, divisor_override=None) -> Tensor:
    """d(loss)/d(input) of avg_pool2d: each output's gradient spread over its window / divisor."""
    op = "avg_pool2d_backward"
    shape, unbatched = _shape4(input_shape, op)
    div = _divisor(op, divisor_override)
    k, s, p, _, (OH, OW) = pool_geometry(op, shape, kernel_size, stride, padding, 1, ceil_mode, dilated=False)
    dy = _check_grad(op, grad_output, (shape[0], shape[1], OH, OW), unbatched)
    dx = TensorBase._empty(shape, dy.dtype, dy.device)
    _k.avg_pool2d_backward(dx, dy, k, s, p, count_include_pad, div)
    return dx.squeeze(0) if unbatched else dx
