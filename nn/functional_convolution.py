"""``nn.functional``'s convolutions beyond the op table's 2-D ones: ``conv1d`` and
``conv_transpose1d`` (the 2-D kernels over a height of one), ``conv3d`` (the depth taps gathered
into channels, then one 2-D convolution), and the sliding-block pair ``unfold`` (im2col, a depthwise
convolution with one-hot kernels) / ``fold`` (col2im, an index-add of the blocks).

Each is a composition of dispatched ops, so autograd records the ops it is made of and none needs a
derivative of its own. The depth helpers here (``_triple``, ``_depth_table``, ``_pad_depth``,
``_as_5d``) are shared with 3-D pooling, built the same way over the 2-D pools.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..core.factories import zeros
from ..core.functional import function as _function
from ..core.ops import table as _table
from .functional_checks import _index, _single, _tensor, _tensor_arg

__all__ = ["conv1d", "conv_transpose1d", "conv3d", "conv_transpose3d", "unfold", "fold"]
_conv2d = _function(_table.OPS["conv2d"], "conv2d", numpy_names=False)
_conv_transpose2d = _function(_table.OPS["conv_transpose2d"], "conv_transpose2d", numpy_names=False)
_cat = _function(_table.OPS["cat"], "cat")


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """``torch.nn.functional.conv1d``: (N, C, L) or (C, L) input, (OC, C/groups, K) weight; conv2d
    over a height of one."""
    _tensor_arg(input, "input", "conv1d")
    _tensor_arg(weight, "weight", "conv1d")
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
    _tensor_arg(input, "input", fn)
    _tensor_arg(weight, "weight", fn)
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


def _triple(v, name: str, fn: str):
    v = (v, v, v) if isinstance(v, numbers.Integral) else tuple(v)
    if len(v) != 3 or any(isinstance(e, bool) or not isinstance(e, numbers.Integral) for e in v):
        raise TypeError(f"{fn}(): {name} must be an int or a 3-tuple of ints, got {v!r}")
    return tuple(int(e) for e in v)


def _depth_table(D: int, k: int, s: int, p: int, d: int, fn: str):
    """(k, OD) rows of the padded depth each output depth reads (the padding adds p in front)."""
    OD = (D + 2 * p - d * (k - 1) - 1) // s + 1
    if OD <= 0:
        raise RuntimeError(f"{fn}(): output depth is {OD} (input depth {D}, kernel {k}, padding {p}, stride {s}, "
                           f"dilation {d}): too small an input")
    return np.arange(k)[:, None] * d + np.arange(OD)[None, :] * s, OD


def _pad_depth(x, p: int, value: float):
    if p == 0:
        return x
    shape = list(x.shape)
    shape[2] = p
    edge = zeros(tuple(shape), dtype=x.dtype, device=x.device) if value == 0 else \
        zeros(tuple(shape), dtype=x.dtype, device=x.device) + value
    return _cat([edge, x, edge], 2)


def _as_5d(input, fn: str):
    _tensor(input, fn)
    if input.ndim not in (4, 5):
        raise RuntimeError(f"{fn}(): Expected 4D (unbatched) or 5D (batched) input, but got input of size: "
                           f"{list(input.shape)}")
    return (input, False) if input.ndim == 5 else (input.unsqueeze(0), True)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):
    """(N, C, D, H, W) * (O, C/groups, kd, kh, kw): the kd depth taps of every output depth gathered
    into channels ((N OD, C kd, H, W), one copy of the input per tap), then ONE conv2d with the
    weight seen as (O, C/groups kd, kh, kw). Costs kd times the input's memory over a 3-D kernel."""
    fn = "conv3d"
    x, unbatched = _as_5d(input, fn)
    _tensor(weight, fn, "weight", 2)
    if weight.ndim != 5:
        raise RuntimeError(f"{fn}(): weight must be 5-D (out_channels, in_channels / groups, kD, kH, kW), got shape "
                           f"{list(weight.shape)}")
    if isinstance(padding, str):
        raise NotImplementedError(f"{fn}(): string padding is not supported")
    (sd, sh, sw), (pd, ph, pw), (dd, dh, dw) = (_triple(stride, "stride", fn), _triple(padding, "padding", fn),
                                                _triple(dilation, "dilation", fn))
    N, C, D, H, W = x.shape
    O, Cg, kd, kh, kw = weight.shape
    if Cg * groups != C:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, expected input"
                           f"{list(x.shape)} to have {Cg * groups} channels, but got {C} channels instead")
    table, OD = _depth_table(D, kd, sd, pd, dd, fn)
    xp = _pad_depth(x, pd, 0.0)
    taps = xp.index_select(2, _index(table.reshape(-1), x.device)).reshape(N, C, kd, OD, H, W)
    planes = taps.permute(0, 3, 1, 2, 4, 5).reshape(N * OD, C * kd, H, W)
    w2 = weight.reshape(O, Cg * kd, kh, kw)
    y = _conv2d(planes, w2, bias, (sh, sw), (ph, pw), (dh, dw), groups)
    y = y.reshape(N, OD, O, y.shape[-2], y.shape[-1]).permute(0, 2, 1, 3, 4)
    return y.squeeze(0) if unbatched else y


def _spread(x, d: int, s: int):
    """s - 1 zeros between neighbours along dim d (the stride of a transposed convolution)."""
    if s == 1 or x.shape[d] == 0:
        return x
    n = x.shape[d]
    gap = list(x.shape)
    gap.insert(d + 1, s - 1)
    z = zeros(tuple(gap), dtype=x.dtype, device=x.device)
    shape = list(x.shape)
    shape[d] = n * s
    return _cat([x.unsqueeze(d + 1), z], d + 1).reshape(shape).narrow(d, 0, (n - 1) * s + 1)


def _pad_dim(x, d: int, lo: int, hi: int):
    """Zeros before (lo) and after (hi) along dim d; a negative side crops."""
    if lo < 0:
        x = x.narrow(d, -lo, x.shape[d] + lo)
        lo = 0
    if hi < 0:
        x = x.narrow(d, 0, x.shape[d] + hi)
        hi = 0
    parts = []
    for n in (lo, None, hi):
        if n is None:
            parts.append(x)
        elif n:
            shape = list(x.shape)
            shape[d] = n
            parts.append(zeros(tuple(shape), dtype=x.dtype, device=x.device))
    return _cat(parts, d) if len(parts) > 1 else x


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups: int = 1, dilation=1):
    """``torch.nn.functional.conv_transpose3d``: (N, C_in, D, H, W) or unbatched input, (C_in,
    C_out/groups, kD, kH, kW) weight. The gradient of a convolution written as one: the input spread
    by the stride, padded by dilation (k - 1) - padding (plus output_padding after), then conv3d
    with the weight's in/out channels swapped per group and its taps flipped."""
    fn = "conv_transpose3d"
    x, unbatched = _as_5d(input, fn)
    _tensor(weight, fn, "weight", 2)
    if weight.ndim != 5:
        raise RuntimeError(f"{fn}(): weight must be 5-D (in_channels, out_channels / groups, kD, kH, kW), got shape "
                           f"{list(weight.shape)}")
    s, p = _triple(stride, "stride", fn), _triple(padding, "padding", fn)
    op, dil = _triple(output_padding, "output_padding", fn), _triple(dilation, "dilation", fn)
    if any(o >= st and o >= dl for o, st, dl in zip(op, s, dil)):
        raise RuntimeError("output padding must be smaller than either stride or dilation, but got "
                           f"output_padding: {list(op)}, stride: {list(s)}, dilation: {list(dil)}")
    Cin, Cg, kd, kh, kw = weight.shape
    if isinstance(groups, bool) or not isinstance(groups, numbers.Integral) or groups < 1:
        raise RuntimeError("non-positive groups is not supported")
    if x.shape[1] != Cin or Cin % groups:
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected input{list(x.shape)} "
                           f"to have {Cin} channels, but got {x.shape[1]} channels instead")
    for j, k in enumerate((kd, kh, kw)):
        x = _spread(x, 2 + j, s[j])
        edge = dil[j] * (k - 1) - p[j]
        x = _pad_dim(x, 2 + j, edge, edge + op[j])
        if x.shape[2 + j] < dil[j] * (k - 1) + 1:
            raise RuntimeError(f"{fn}(): the output would be empty along spatial dim {j} (input "
                               f"{list(input.shape)}, kernel {(kd, kh, kw)}, padding {p}, stride {s})")
    w = weight.reshape(groups, Cin // groups, Cg, kd, kh, kw).transpose(1, 2).reshape(groups * Cg, Cin // groups,
                                                                                       kd, kh, kw)
    y = conv3d(x, w.flip([2, 3, 4]), bias, 1, 0, dil, groups)
    return y.squeeze(0) if unbatched else y


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """``torch.nn.functional.unfold`` (im2col): (N, C, H, W) -> (N, C·kh·kw, L) sliding blocks,
    as a depthwise convolution with one-hot kernels (exact: every output is one input value)."""
    _tensor_arg(input, "input", "unfold")
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


def _pair(v, name: str, fn: str):
    v = (v, v) if isinstance(v, numbers.Integral) else tuple(v)
    if len(v) != 2 or any(isinstance(e, bool) or not isinstance(e, numbers.Integral) for e in v):
        raise TypeError(f"{fn}(): {name} must be an int or a pair of ints, got {v!r}")
    return tuple(int(e) for e in v)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """``unfold``'s adjoint (col2im): (N, C kh kw, L) -> (N, C, H, W), overlapping blocks summed.
    One index_add of all blocks into the padded planes, then the padding cut off."""
    fn = "fold"
    _tensor(input, fn)
    (H, W), (kh, kw) = _pair(output_size, "output_size", fn), _pair(kernel_size, "kernel_size", fn)
    (dh, dw), (ph, pw), (sh, sw) = (_pair(dilation, "dilation", fn), _pair(padding, "padding", fn),
                                    _pair(stride, "stride", fn))
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero "
                           f"dimensions for input, but got: {list(input.shape)}")
    batched = input.ndim == 3
    x = input if batched else input.unsqueeze(0)
    N, CK, L = x.shape
    if CK % (kh * kw):
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
                           f"got input.size(1)={CK} and kernel_size=({kh}, {kw}).")
    bh = (H + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    bw = (W + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if bh * bw != L:
        raise RuntimeError(f"Given output_size=({H}, {W}), kernel_size=({kh}, {kw}), dilation=({dh}, {dw}), "
                           f"padding=({ph}, {pw}), stride=({sh}, {sw}), expected size of input's dimension 2 to match "
                           f"the calculated number of sliding blocks {bh} * {bw} = {bh * bw}, but got "
                           f"input.size(2)={L}.")
    C = CK // (kh * kw)
    Hp, Wp = H + 2 * ph, W + 2 * pw
    ki, kj, oi, oj = np.meshgrid(np.arange(kh), np.arange(kw), np.arange(bh), np.arange(bw), indexing="ij")
    pos = ((oi * sh + ki * dh) * Wp + (oj * sw + kj * dw)).reshape(-1)  # (kernel offset, block) -> padded pixel
    planes = zeros((N, C, Hp * Wp), dtype=x.dtype, device=x.device)
    out = planes.index_add(2, _index(pos, x.device), x.reshape(N, C, kh * kw * L))
    out = out.reshape(N, C, Hp, Wp)[:, :, ph:ph + H, pw:pw + W]
    return out if batched else out.squeeze(0)
