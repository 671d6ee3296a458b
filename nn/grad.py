"""``torch.nn.grad``: the gradients of a convolution with respect to its input and its weight,
given the gradient of its output, without a forward pass to differentiate.

A user who writes a custom ``autograd.Function`` around a convolution needs these. The input
gradient is the transposed convolution of ``grad_output`` (the same backward-input kernels
conv2d's derivative runs), with the output padding that reaches ``input_size``; the weight
gradient of a 1-D or 2-D convolution is conv2d's backward-weight kernel itself, and that of a 3-D
convolution (written in ``nn.functional`` over the 2-D kernels) the derivative of that composite
with respect to its weight.
"""
from __future__ import annotations

from ..autograd import grad as _autograd_grad
from ..autograd.grad_mode import enable_grad
from ..core.factories import zeros
from ..core.ops import conv as _conv
from .functional import conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d
from .functional_checks import _tensor_arg

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight", "conv3d_input", "conv3d_weight"]


def _tuple(v, k: int, name: str, fn: str) -> tuple:
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,) * k
    if isinstance(v, (tuple, list)) and len(v) == k and all(isinstance(e, int) and not isinstance(e, bool) for e in v):
        return tuple(v)
    raise TypeError(f"{fn}(): argument '{name}' must be an int or a tuple of {k} ints, but got {v!r}")


def _check(fn: str, k: int, grad_output, other, other_name: str, stride, padding, dilation, groups):
    _tensor_arg(grad_output, "grad_output", fn)
    _tensor_arg(other, other_name, fn)
    if grad_output.ndim != k + 2:
        raise RuntimeError(f"{fn}(): expected grad_output of {k + 2} dimensions (N, C_out, ...), got shape "
                           f"{list(grad_output.shape)}")
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise RuntimeError(f"{fn}(): non-positive groups is not supported, got {groups!r}")
    return (_tuple(stride, k, "stride", fn), _tuple(padding, k, "padding", fn), _tuple(dilation, k, "dilation", fn))


def _input(fn: str, k: int, transpose, input_size, weight, grad_output, stride, padding, dilation, groups):
    stride, padding, dilation = _check(fn, k, grad_output, weight, "weight", stride, padding, dilation, groups)
    input_size = [int(s) for s in input_size]
    if len(input_size) != k + 2:
        raise ValueError(f"input_size must have {k + 2} elements (got {len(input_size)})")
    if weight.ndim != k + 2:
        raise RuntimeError(f"{fn}(): expected weight of {k + 2} dimensions, got shape {list(weight.shape)}")
    # the smallest input the convolution maps onto grad_output's extent; rows past it that the
    # stride skipped get no gradient but zeros, which the output padding of the transpose gives
    lo = [(grad_output.shape[d + 2] - 1) * stride[d] - 2 * padding[d] + dilation[d] * (weight.shape[d + 2] - 1) + 1
          for d in range(k)]
    hi = [lo[d] + stride[d] - 1 for d in range(k)]
    spatial = input_size[2:]
    if any(not lo[d] <= spatial[d] <= hi[d] for d in range(k)):
        raise ValueError(f"requested an input grad size of {spatial}, but valid sizes range from {lo} to {hi} "
                         f"(for a grad_output of {list(grad_output.shape[2:])})")
    if input_size[1] != weight.shape[1] * groups or input_size[0] != grad_output.shape[0]:
        raise RuntimeError(f"{fn}(): input_size {input_size} does not match weight of shape {list(weight.shape)} "
                           f"with groups={groups} and grad_output of shape {list(grad_output.shape)}")
    output_padding = tuple(spatial[d] - lo[d] for d in range(k))
    return transpose(grad_output, weight, None, stride, padding, output_padding, groups, dilation)


def _weight(fn: str, k: int, input, weight_size, grad_output, stride, padding, dilation, groups):
    stride, padding, dilation = _check(fn, k, grad_output, input, "input", stride, padding, dilation, groups)
    weight_size = tuple(int(s) for s in weight_size)
    if len(weight_size) != k + 2:
        raise RuntimeError(f"{fn}(): weight_size must have {k + 2} elements (got {len(weight_size)})")
    if input.ndim != k + 2:
        raise RuntimeError(f"{fn}(): expected input of {k + 2} dimensions (N, C_in, ...), got shape "
                           f"{list(input.shape)}")
    if k == 3:
        # the weight enters conv3d linearly: its gradient at zero is its gradient anywhere
        with enable_grad():
            w0 = zeros(weight_size, dtype=input.dtype, device=input.device, requires_grad=True)
            y = conv3d(input.detach(), w0, None, stride, padding, dilation, groups)
            return _autograd_grad(y, w0, grad_output)[0]
    if k == 1:
        dw = _conv.conv2d_backward_weight(grad_output.unsqueeze(2), input.unsqueeze(2),
                                          weight_size[:2] + (1,) + weight_size[2:], (1,) + stride, (0,) + padding,
                                          (1,) + dilation, groups)
        return dw.squeeze(2)
    return _conv.conv2d_backward_weight(grad_output, input, weight_size, stride, padding, dilation, groups)


def conv1d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """``torch.nn.grad.conv1d_input``: d(loss)/d(input) of conv1d, of shape ``input_size``."""
    return _input("conv1d_input", 1, conv_transpose1d, input_size, weight, grad_output, stride, padding, dilation,
                  groups)


def conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """``torch.nn.grad.conv2d_input``: d(loss)/d(input) of conv2d, of shape ``input_size``."""
    return _input("conv2d_input", 2, conv_transpose2d, input_size, weight, grad_output, stride, padding, dilation,
                  groups)


def conv3d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """``torch.nn.grad.conv3d_input``: d(loss)/d(input) of conv3d, of shape ``input_size``."""
    return _input("conv3d_input", 3, conv_transpose3d, input_size, weight, grad_output, stride, padding, dilation,
                  groups)


def conv1d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """``torch.nn.grad.conv1d_weight``: d(loss)/d(weight) of conv1d, of shape ``weight_size``."""
    return _weight("conv1d_weight", 1, input, weight_size, grad_output, stride, padding, dilation, groups)


def conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """``torch.nn.grad.conv2d_weight``: d(loss)/d(weight) of conv2d, of shape ``weight_size``."""
    return _weight("conv2d_weight", 2, input, weight_size, grad_output, stride, padding, dilation, groups)


def conv3d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """``torch.nn.grad.conv3d_weight``: d(loss)/d(weight) of conv3d, of shape ``weight_size``."""
    return _weight("conv3d_weight", 3, input, weight_size, grad_output, stride, padding, dilation, groups)
