"""The convolution layers, as torch keeps them: ``Conv1d`` (a composite of ``F.conv1d``), ``Conv2d``,
and torch's transposed-convolution layers ``ConvTranspose1d`` and ``ConvTranspose2d``.

The transposed layers are

The layer is ``F.conv_transpose2d`` (conv2d's grad-input kernel, ``core/ops/conv.py``) with
torch's parameters: weight ``(in_channels, out_channels / groups, *kernel_size)``, initialised as
torch does (kaiming_uniform_(a=sqrt(5)), whose fan-in for this layout is out_channels / groups
times the kernel's size), and ``forward(input, output_size=None)``, which turns a requested
output size into the ``output_padding`` that gives it, as torch's ``_output_padding`` does.
"""
from __future__ import annotations

from ...autograd.grad_mode import no_grad
from ...core.factories import empty
from .. import functional as F
from ..parameter import Parameter, UninitializedParameter
from .lazy import LazyModuleMixin
from .module import Module
from .utils import _ntuple, _pair, _reset_weight_and_bias, _single, _triple


def _check_conv_channels(in_channels, out_channels, groups) -> None:
    """torch's _ConvNd checks, for every convolution layer (plain and transposed, 1-D and 2-D)."""
    if isinstance(groups, bool) or not isinstance(groups, int) or groups <= 0:
        raise ValueError("groups must be a positive integer")
    if in_channels % groups:
        raise ValueError("in_channels must be divisible by groups")
    if out_channels % groups:
        raise ValueError("out_channels must be divisible by groups")


def _conv_parameters(module, weight_shape, out_channels, bias, device, dtype) -> None:
    """A convolution layer's ``weight`` of ``weight_shape`` and ``bias`` (or None), initialised
    as torch's ``reset_parameters`` does."""
    module.weight = Parameter(empty(*weight_shape, device=device, dtype=dtype))
    if bias:
        module.bias = Parameter(empty(out_channels, device=device, dtype=dtype))
    else:
        module.register_parameter("bias", None)
    module.reset_parameters()


class Conv1d(Module):
    """y = conv1d(x, W) + b over (N, C, L); W ~ kaiming_uniform(a=sqrt(5)), b ~ U(-1/sqrt(fan_in), ...)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        _check_conv_channels(in_channels, out_channels, groups)
        if padding_mode != "zeros":
            raise NotImplementedError(f"Conv1d: padding_mode={padding_mode!r} is not implemented (only 'zeros')")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride, self.dilation = _single(kernel_size), _single(stride), _single(dilation)
        self.padding = padding if isinstance(padding, str) else _single(padding)
        _conv_parameters(self, (out_channels, in_channels // groups, *self.kernel_size), out_channels, bias, device,
                         dtype)

    def reset_parameters(self) -> None:
        _reset_weight_and_bias(self.weight, self.bias)

    def forward(self, x):
        return F.conv1d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding not in ((0,), "valid"):
            s += f", padding={self.padding if isinstance(self.padding, tuple) else repr(self.padding)}"
        if self.dilation != (1,):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + ("" if self.bias is not None else ", bias=False")


class Conv2d(Module):
    """y = conv2d(x, W) + b over (N, C, H, W) (or unbatched (C, H, W)), as torch.nn.Conv2d, with its initialisation
    (W ~ kaiming_uniform(a=sqrt(5)), b ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))) and string padding ('same' refused with
    a stride, as torch); only ``padding_mode='zeros'``: others are NotImplementedError."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        _check_conv_channels(in_channels, out_channels, groups)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'same', 'valid'}}")
            if padding == "same" and any(s != 1 for s in _pair(stride)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode != "zeros":
            raise NotImplementedError(f"Conv2d: padding_mode={padding_mode!r} is not implemented (only 'zeros')")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.dilation = _pair(kernel_size), _pair(stride), _pair(dilation)
        self.padding = padding if isinstance(padding, str) else _pair(padding)
        self.groups = groups
        _conv_parameters(self, (out_channels, in_channels // groups, *self.kernel_size), out_channels, bias, device,
                         dtype)

    def reset_parameters(self) -> None:
        _reset_weight_and_bias(self.weight, self.bias)

    def forward(self, x):
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + ("" if self.bias is not None else ", bias=False")


class Conv3d(Module):
    """Over (N, C, D, H, W) inputs (``F.conv3d``: one conv2d over the depth taps gathered into channels)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        _check_conv_channels(in_channels, out_channels, groups)
        if isinstance(padding, str):
            raise NotImplementedError("Conv3d: string padding is not implemented")
        if padding_mode != "zeros":
            raise NotImplementedError(f"Conv3d: padding_mode={padding_mode!r} is not implemented (only 'zeros')")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.dilation = _triple(kernel_size), _triple(stride), _triple(dilation)
        self.padding, self.groups = _triple(padding), groups
        _conv_parameters(self, (out_channels, in_channels // groups, *self.kernel_size), out_channels, bias, device,
                         dtype)

    def reset_parameters(self) -> None:
        _reset_weight_and_bias(self.weight, self.bias)

    def forward(self, x):
        return F.conv3d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0, 0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + ("" if self.bias is not None else ", bias=False")


class _ConvTransposeNd(Module):
    _dims = 0

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        _check_conv_channels(in_channels, out_channels, groups)
        if isinstance(padding, str):
            raise ValueError(f'padding must be an int or a tuple of ints for {name}, got "{padding}"')
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {name}')
        n = self._dims
        self.in_channels, self.out_channels, self.groups, self.padding_mode = in_channels, out_channels, groups, \
            padding_mode
        self.kernel_size, self.stride, self.padding = _ntuple(n)(kernel_size), _ntuple(n)(stride), _ntuple(n)(padding)
        self.output_padding, self.dilation, self.transposed = _ntuple(n)(output_padding), _ntuple(n)(dilation), True
        _conv_parameters(self, (in_channels, out_channels // groups, *self.kernel_size), out_channels, bias, device,
                         dtype)

    def reset_parameters(self) -> None:
        _reset_weight_and_bias(self.weight, self.bias)

    def _output_padding(self, input, output_size) -> tuple:
        """The output padding that makes the output ``output_size`` (torch's rule and message)."""
        if output_size is None:
            return self.output_padding
        n = self._dims
        output_size = list(output_size)
        if len(output_size) == input.ndim:
            output_size = output_size[-n:]
        if len(output_size) != n:
            raise ValueError(f"ConvTranspose{n}D: for {input.ndim}D input, output_size must have {n} or "
                             f"{input.ndim} elements (got {len(output_size) + 0})")
        spatial = type(input.shape)(input.shape[-n:])  # printed as torch prints it: (tritensor.Size([5, 5]))
        min_sizes = [(spatial[d] - 1) * self.stride[d] - 2 * self.padding[d]
                     + self.dilation[d] * (self.kernel_size[d] - 1) + 1 for d in range(n)]
        max_sizes = [m + self.stride[d] - 1 for d, m in enumerate(min_sizes)]
        for size, lo, hi in zip(output_size, min_sizes, max_sizes):
            if size < lo or size > hi:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes range from {min_sizes} "
                                 f"to {max_sizes} (for an input of {spatial})")
        return tuple(size - lo for size, lo in zip(output_size, min_sizes))

    def extra_repr(self) -> str:
        n = self._dims
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + ("" if self.bias is not None else ", bias=False")


class ConvTranspose1d(_ConvTransposeNd):
    """y = conv_transpose1d(x, W) + b over (N, C_in, L) or (C_in, L)."""

    _dims = 1

    def forward(self, input, output_size=None):
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose2d(_ConvTransposeNd):
    """y = conv_transpose2d(x, W) + b over (N, C_in, H, W) or (C_in, H, W)."""

    _dims = 2

    def forward(self, input, output_size=None):
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose3d(_ConvTransposeNd):
    """y = conv_transpose3d(x, W) + b over (N, C_in, D, H, W) or (C_in, D, H, W)."""

    _dims = 3

    def forward(self, input, output_size=None):
        return F.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)


class _LazyConvXdMixin(LazyModuleMixin):
    """The lazy convolutions' shared part: ``in_channels`` from the first input's channel dim (dim 1,
    or 0 unbatched), the weight and bias materialized and initialised as the eager layer's."""

    _spatial = 1

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _lazy_setup(self, out_channels: int, bias: bool, device, dtype) -> None:
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def initialize_parameters(self, input, *args, **kwargs) -> None:
        if not self.has_uninitialized_params():
            return
        n = self._spatial + 1
        if input.ndim not in (n, n + 1):
            raise RuntimeError(f"Expected {n}D (unbatched) or {n + 1}D (batched) input to {type(self).__name__}, but "
                               f"got input of size: {input.shape}")
        self.in_channels = input.shape[1] if input.ndim == n + 1 else input.shape[0]
        if self.in_channels % self.groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        with no_grad():
            if getattr(self, "transposed", False):
                self.weight.materialize((self.in_channels, self.out_channels // self.groups, *self.kernel_size))
            else:
                self.weight.materialize((self.out_channels, self.in_channels // self.groups, *self.kernel_size))
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()


class LazyConv1d(_LazyConvXdMixin, Conv1d):
    """A Conv1d whose ``in_channels`` comes from its first input, as torch.nn.LazyConv1d."""

    cls_to_become = Conv1d

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode)
        self._lazy_setup(out_channels, bias, device, dtype)


class LazyConv2d(_LazyConvXdMixin, Conv2d):
    """A Conv2d whose ``in_channels`` comes from its first input, as torch.nn.LazyConv2d."""

    cls_to_become = Conv2d
    _spatial = 2

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode)
        self._lazy_setup(out_channels, bias, device, dtype)


class LazyConv3d(_LazyConvXdMixin, Conv3d):
    """A Conv3d whose ``in_channels`` comes from its first input, as torch.nn.LazyConv3d."""

    cls_to_become = Conv3d
    _spatial = 3

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode)
        self._lazy_setup(out_channels, bias, device, dtype)


class LazyConvTranspose1d(_LazyConvXdMixin, ConvTranspose1d):
    """A ConvTranspose1d whose ``in_channels`` comes from its first input, as torch.nn.LazyConvTranspose1d."""

    cls_to_become = ConvTranspose1d

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                 dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation, padding_mode)
        self._lazy_setup(out_channels, bias, device, dtype)


class LazyConvTranspose2d(_LazyConvXdMixin, ConvTranspose2d):
    """A ConvTranspose2d whose ``in_channels`` comes from its first input, as torch.nn.LazyConvTranspose2d."""

    cls_to_become = ConvTranspose2d
    _spatial = 2

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                 dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation, padding_mode)
        self._lazy_setup(out_channels, bias, device, dtype)


class LazyConvTranspose3d(_LazyConvXdMixin, ConvTranspose3d):
    """A ConvTranspose3d whose ``in_channels`` comes from its first input, as torch.nn.LazyConvTranspose3d."""

    cls_to_become = ConvTranspose3d
    _spatial = 3

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                 dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation, padding_mode)
        self._lazy_setup(out_channels, bias, device, dtype)
