"""``nn.functional`` entries written entirely with other ops: 1-D convolution (plain and
transposed) and pooling over the 2-D ones, pixel (un)shuffle, sliding patches (``unfold``/``fold``), distances and ``bilinear``.

Each is a composition of dispatched ops, so autograd records the ops it is made of and none needs
a derivative of its own (CONTRIBUTING's composites). Kept beside ``functional.py`` (which
re-exports them) because that module is at its size limit. Arguments are checked here, with
torch's wording, before any op runs.
"""
from __future__ import annotations

import numbers

from ..core.functional import function as _function
from ..core.ops import table as _table
from ..core.tensor import Tensor

_conv2d = _function(_table.OPS["conv2d"], "conv2d", numpy_names=False)
_conv_transpose2d = _function(_table.OPS["conv_transpose2d"], "conv_transpose2d", numpy_names=False)
_max_pool2d = _function(_table.OPS["max_pool2d"], "max_pool2d", numpy_names=False)
_avg_pool2d = _function(_table.OPS["avg_pool2d"], "avg_pool2d", numpy_names=False)


def _single(v, name: str, fn: str) -> int:
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise ValueError(f"{fn}(): {name} must be an int or a 1-tuple, got {v!r}")
        v = v[0]
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{fn}(): {name} must be an int, got {v!r}")
    return int(v)


def _tensor(x, name: str, fn: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' must be Tensor, not {type(x).__name__}")


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """``torch.nn.functional.conv1d``: (N, C, L) or (C, L) input, (OC, C/groups, K) weight; conv2d
    over a height of one."""
    _tensor(input, "input", "conv1d")
    _tensor(weight, "weight", "conv1d")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"conv1d(): Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of "
                           f"size: {list(input.shape)}")
    if weight.ndim != 3:
        raise RuntimeError(f"conv1d(): weight must be 3-D (out_channels, in_channels / groups, kW), got shape "
                           f"{list(weight.shape)}")
    pad = padding if isinstance(padding, str) else (0, _single(padding, "padding", "conv1d"))
    y = _conv2d(input.unsqueeze(-2), weight.unsqueeze(-2), bias, (1, _single(stride, "stride", "conv1d")), pad,
                (1, _single(dilation, "dilation", "conv1d")), groups)
    return y.squeeze(-2)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """``torch.nn.functional.conv_transpose1d``: (N, C_in, L) or (C_in, L) input, (C_in, C_out/groups, K)
    weight; conv_transpose2d over a height of one."""
    fn = "conv_transpose1d"
    _tensor(input, "input", fn)
    _tensor(weight, "weight", fn)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"{fn}(): Expected 2D (unbatched) or 3D (batched) input to {fn}, but got input of "
                           f"size: {list(input.shape)}")
    if weight.ndim != 3:
        raise RuntimeError(f"{fn}(): weight must be 3-D (in_channels, out_channels / groups, kW), got shape "
                           f"{list(weight.shape)}")
    y = _conv_transpose2d(input.unsqueeze(-2), weight.unsqueeze(-2), bias, (1, _single(stride, "stride", fn)),
                          (0, _single(padding, "padding", fn)), (0, _single(output_padding, "output_padding", fn)),
                          groups, (1, _single(dilation, "dilation", fn)))
    return y.squeeze(-2)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """``torch.nn.functional.max_pool1d`` over (N, C, L) or (C, L): max_pool2d over a height of one."""
    _tensor(input, "input", "max_pool1d")
    k = _single(kernel_size, "kernel_size", "max_pool1d")
    s = k if stride is None or stride == [] else _single(stride, "stride", "max_pool1d")
    out = _max_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, _single(padding, "padding", "max_pool1d")),
                      (1, _single(dilation, "dilation", "max_pool1d")), ceil_mode, return_indices)
    if return_indices:
        return out[0].squeeze(-2), out[1].squeeze(-2)
    return out.squeeze(-2)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """``torch.nn.functional.avg_pool1d`` over (N, C, L) or (C, L): avg_pool2d over a height of one."""
    _tensor(input, "input", "avg_pool1d")
    k = _single(kernel_size, "kernel_size", "avg_pool1d")
    s = k if stride is None or stride == [] else _single(stride, "stride", "avg_pool1d")
    return _avg_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, _single(padding, "padding", "avg_pool1d")),
                       ceil_mode, count_include_pad).squeeze(-2)


def pixel_shuffle(input, upscale_factor: int):
    """(*, C r², H, W) -> (*, C, H r, W r): ``torch.nn.functional.pixel_shuffle``."""
    _tensor(input, "input", "pixel_shuffle")
    r = _single(upscale_factor, "upscale_factor", "pixel_shuffle")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    *batch, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    nb = len(batch)
    x = input.reshape(*batch, c // (r * r), r, r, h, w)
    x = x.permute(*range(nb), nb, nb + 3, nb + 1, nb + 4, nb + 2)
    return x.reshape(*batch, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor: int):
    """(*, C, H r, W r) -> (*, C r², H, W): ``torch.nn.functional.pixel_unshuffle``."""
    _tensor(input, "input", "pixel_unshuffle")
    r = _single(downscale_factor, "downscale_factor", "pixel_unshuffle")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    if input.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    *batch, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by downscale_factor, but "
                           f"got {h} and {w} for factor {r}")
    nb = len(batch)
    x = input.reshape(*batch, c, h // r, r, w // r, r)
    x = x.permute(*range(nb), nb, nb + 2, nb + 4, nb + 1, nb + 3)
    return x.reshape(*batch, c * r * r, h // r, w // r)


def cosine_similarity(x1, x2, dim: int = 1, eps: float = 1e-8):
    """``torch.nn.functional.cosine_similarity``: x1·x2 / (max(|x1|, eps) max(|x2|, eps)) along
    ``dim``, broadcasting (each norm clamped on its own, as torch)."""
    _tensor(x1, "x1", "cosine_similarity")
    _tensor(x2, "x2", "cosine_similarity")
    dot = (x1 * x2).sum(dim)
    n1 = (x1 * x1).sum(dim).sqrt().clamp_min(eps)
    n2 = (x2 * x2).sum(dim).sqrt().clamp_min(eps)
    return dot / (n1 * n2)


def pairwise_distance(x1, x2, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
    """``torch.nn.functional.pairwise_distance``: the p-norm of x1 - x2 + eps along the last dim."""
    _tensor(x1, "x1", "pairwise_distance")
    _tensor(x2, "x2", "pairwise_distance")
    d = x1 - x2 + eps
    return d.norm(p, dim=-1, keepdim=keepdim)


def bilinear(input1, input2, weight, bias=None):
    """``torch.nn.functional.bilinear``: y_k = x1ᵀ W_k x2 + b_k, (*, in1) x (*, in2) -> (*, out)."""
    _tensor(input1, "input1", "bilinear")
    _tensor(input2, "input2", "bilinear")
    _tensor(weight, "weight", "bilinear")
    if weight.ndim != 3 or weight.shape[1] != input1.shape[-1] or weight.shape[2] != input2.shape[-1]:
        raise RuntimeError(f"bilinear(): weight must be (out_features, in1_features, in2_features) = "
                           f"(*, {input1.shape[-1]}, {input2.shape[-1]}), got {list(weight.shape)}")
    # (*, in1) @ (out, in1, in2) -> (*, out, in2), then the dot with x2 over in2
    t = (input1.unsqueeze(-2).unsqueeze(-2) @ weight).squeeze(-2)
    y = (t * input2.unsqueeze(-2)).sum(-1)
    return y + bias if bias is not None else y


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """``torch.nn.functional.unfold`` (im2col): (N, C, H, W) -> (N, C·kh·kw, L) sliding blocks,
    as a depthwise convolution with one-hot kernels (exact: every output is one input value)."""
    _tensor(input, "input", "unfold")
    if input.ndim not in (3, 4):
        raise RuntimeError(f"unfold(): Input Error: Only 3D or 4D input Tensors are supported (got {input.ndim}D)")
    x = input if input.ndim == 4 else input.unsqueeze(0)
    kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
    c = x.shape[1]
    eye = input.new_ones(kh * kw, kh * kw).tril().triu()  # the identity, in input's dtype and device
    w = eye.reshape(kh * kw, 1, kh, kw).repeat(c, 1, 1, 1)
    y = _conv2d(x, w, None, stride, padding, dilation, c)  # (N, C·kh·kw, OH, OW), channel-major like torch
    y = y.reshape(y.shape[0], y.shape[1], -1)
    return y if input.ndim == 4 else y.squeeze(0)
