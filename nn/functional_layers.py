"""``nn.functional`` layers written with recorded ops: ``instance_norm``, ``dropout1d``/``2d``,
``alpha_dropout``, ``adaptive_max_pool1d``/``2d``, ``adaptive_avg_pool1d``, ``fold``,
``embedding_bag``, ``gumbel_softmax``, ``affine_grid``, ``grid_sample``, and ``conv3d``,
``max_pool3d``, ``avg_pool3d`` over the 2-D kernels.

Each is built from ops autograd records (the batch-norm kernel, gathers and index-adds, ``where``,
``maximum``, matmul, conv2d and the 2-D pools), so each is differentiable with no derivative of its own; gradients of
``grid_sample`` reach the input through the gathers and the grid through the interpolation
weights. Index arrays that depend on shapes only are built on the host; those that depend on data
(``grid_sample``'s corners, ``embedding_bag``'s bag of each index) are computed on the device, so
no device value is read back (``embedding_bag`` checks its offsets only when they are in host memory,
as torch's CPU path). Kept beside ``functional.py``, which re-exports them.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ..core.factories import arange, from_numpy, rand, zeros
from ..core.functional import function as _function
from ..core.ops import table as _table
from ..core.tensor import Tensor
from ..runtime import dtype as dt

__all__ = ["instance_norm", "dropout1d", "dropout2d", "alpha_dropout", "adaptive_max_pool1d", "adaptive_max_pool2d",
           "adaptive_avg_pool1d", "fold", "embedding_bag", "gumbel_softmax", "affine_grid", "grid_sample", "conv3d",
           "max_pool3d", "avg_pool3d"]

_where = _function(_table.OPS["where"], "where")
_batch_norm = _function(_table.OPS["batch_norm"], "batch_norm", numpy_names=False)
_max_pool2d = _function(_table.OPS["max_pool2d"], "max_pool2d", numpy_names=False)
_avg_pool2d = _function(_table.OPS["avg_pool2d"], "avg_pool2d", numpy_names=False)
_conv2d = _function(_table.OPS["conv2d"], "conv2d", numpy_names=False)
_cat = _function(_table.OPS["cat"], "cat")
_softmax = _function(_table.OPS["softmax"], "softmax", numpy_names=False)
_searchsorted = _function(_table.OPS["searchsorted"], "searchsorted")


def _tensor(x, fn: str, name: str = "input", position: int = 1) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' (position {position}) must be Tensor, not {type(x).__name__}")


def _index(idx, device):
    return from_numpy(np.ascontiguousarray(idx, dtype=np.int64)).to(device)


# ----- normalization and dropout -----------------------------------------------------------------------

def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5):
    """Normalize each (sample, channel) plane over its spatial dims: batch_norm over a batch of one
    with N*C channels, as torch does; running statistics are averaged over the samples."""
    _tensor(input, "instance_norm")
    if input.ndim < 3:
        raise ValueError(f"Expected input with at least 3 dims (N, C, ...), got input of size {list(input.shape)}")
    spatial = math.prod(input.shape[2:])
    if use_input_stats and spatial <= 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {list(input.shape)}")
    N, C = input.shape[0], input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        if t is not None and tuple(t.shape) != (C,):
            raise RuntimeError(f"instance_norm(): expected {name} of shape [{C}], got {list(t.shape)}")
    rm = running_mean.repeat(N) if running_mean is not None else None
    rv = running_var.repeat(N) if running_var is not None else None
    w = weight.repeat(N) if weight is not None else None
    b = bias.repeat(N) if bias is not None else None
    x = input.reshape((1, N * C) + tuple(input.shape[2:]))
    out = _batch_norm(x, rm, rv, w, b, use_input_stats, momentum, eps)
    if use_input_stats:  # the updated per-sample statistics, averaged back into the module's
        if running_mean is not None:
            running_mean.copy_(rm.detach().reshape(N, C).mean(0))
        if running_var is not None:
            running_var.copy_(rv.detach().reshape(N, C).mean(0))
    return out.reshape(input.shape)


def _check_p(p) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _channel_dropout(input, p, training, inplace, fn: str, batched_ndim: int):
    _tensor(input, fn)
    _check_p(p)
    if input.ndim not in (batched_ndim - 1, batched_ndim):
        names = {3: "(N, C, L) or (C, L)", 4: "(N, C, H, W) or (C, H, W)"}[batched_ndim]
        raise RuntimeError(f"{fn}: Expected {batched_ndim - 1}D or {batched_ndim}D input, but received a "
                           f"{input.ndim}D input. {fn} expects input of shape {names}.")
    if not training or p == 0.0:
        return input
    lead = 2 if input.ndim == batched_ndim else 1
    mask_shape = tuple(input.shape[:lead]) + (1,) * (input.ndim - lead)
    keep = rand(mask_shape, device=input.device) >= p  # one draw per channel: whole channels are zeroed
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    out = input * keep * scale
    return input.copy_(out) if inplace else out


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels of (N, C, L) or (C, L) with probability p, scale the rest by 1/(1-p)."""
    return _channel_dropout(input, p, training, inplace, "dropout1d", 3)


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels of (N, C, H, W) or (C, H, W) with probability p, scale the rest by 1/(1-p)."""
    return _channel_dropout(input, p, training, inplace, "dropout2d", 4)


def alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False):
    """SELU's dropout: dropped elements take SELU's negative saturation, then an affine map keeps
    mean 0 and variance 1 (torch's a, b)."""
    _tensor(input, "alpha_dropout")
    _check_p(p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        out = input * 0.0
        return input.copy_(out) if inplace else out
    alpha = 1.7580993408473766  # SELU's scale * alpha: -alpha is the negative saturation value
    a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    keep = (rand(input.shape, device=input.device) >= p).to(input.dtype)
    b = (keep - 1.0) * (alpha * a) + alpha * a * p
    out = input * (keep * a) + b
    return input.copy_(out) if inplace else out


# ----- pooling -----------------------------------------------------------------------------------------

def _windows(n_in: int, n_out: int):
    i = np.arange(n_out)
    start = (i * n_in) // n_out
    end = -((-(i + 1) * n_in) // n_out)
    return start, end


def _window_table(n_in: int, n_out: int):
    """(n_out, kmax) positions of each adaptive window, a short window padded with its last
    position (harmless to a max, which keeps the first maximum; weighted 0 in a mean)."""
    start, end = _windows(n_in, n_out)
    kmax = int((end - start).max()) if n_out else 0
    k = np.arange(kmax)
    return np.minimum(start[:, None] + k, end[:, None] - 1), k < (end - start)[:, None]


def _adaptive_max(input, output_size, nsp: int, fn: str, return_indices: bool):
    _tensor(input, fn)
    if input.ndim not in (nsp + 1, nsp + 2):
        raise ValueError(f"{fn}(): Expected {nsp + 1}D or {nsp + 2}D tensor, but got {list(input.shape)}")
    sizes = (output_size,) * nsp if isinstance(output_size, int) or output_size is None else tuple(output_size)
    if len(sizes) != nsp:
        raise ValueError(f"{fn}(): internal error: output_size.size() must be {nsp}")
    spatial = tuple(input.shape[-nsp:])
    sizes = tuple(n if s is None else s for n, s in zip(spatial, sizes))
    for d in range(1, input.ndim):
        if input.shape[d] == 0:
            raise RuntimeError(f"{fn}(): Expected input to have non-zero size for non-batch dimensions, but input "
                               f"has sizes {list(input.shape)} with dimension {d} being empty")
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"{fn}(): elements of output_size must be greater than or equal to 0 but received "
                           f"{list(sizes)}")
    x = input if nsp == 2 else input.unsqueeze(-2)
    H, W = x.shape[-2], x.shape[-1]
    oh, ow = (sizes if nsp == 2 else (1,) + sizes)
    if not return_indices and oh and ow and H % oh == 0 and W % ow == 0:  # even windows: the pooling kernel
        y = _max_pool2d(x, (H // oh, W // ow), (H // oh, W // ow))
        return y if nsp == 2 else y.squeeze(-2)
    # every window of the plane gathered at once (H*W -> oh*ow*kh*kw), then one max over the window:
    # a NaN propagates and the first maximum wins, as torch's
    rows, _ = _window_table(H, oh)
    cols, _ = _window_table(W, ow)
    table = (rows[:, None, :, None] * W + cols[None, :, None, :]).reshape(oh, ow, -1)
    lead = tuple(x.shape[:-2])
    kk = table.shape[-1]
    if oh == 0 or ow == 0:
        v = zeros(lead + (oh, ow), dtype=x.dtype, device=x.device)
        i = zeros(lead + (oh, ow), dtype=dt.int64, device=x.device)
    else:
        v, arg = x.reshape(lead + (H * W,)).index_select(-1, _index(table.reshape(-1), x.device)).reshape(
            lead + (oh, ow, kk)).max(-1)
        i = _index(table, x.device).expand(lead + (oh, ow, kk)).gather(-1, arg.unsqueeze(-1)).squeeze(-1) \
            if return_indices else None
    if nsp == 1:
        v, i = v.squeeze(-2), (i.squeeze(-2) if i is not None else None)
    return (v, i) if return_indices else v


def adaptive_max_pool1d(input, output_size, return_indices: bool = False):
    """Max over torch's adaptive windows [floor(i L / out), ceil((i + 1) L / out)); with
    ``return_indices`` also the position of each maximum along L."""
    return _adaptive_max(input, output_size, 1, "adaptive_max_pool1d", return_indices)


def adaptive_max_pool2d(input, output_size, return_indices: bool = False):
    """Max over torch's adaptive windows per spatial dim; with ``return_indices`` also the flat
    position h * W + w of each maximum in its plane."""
    return _adaptive_max(input, output_size, 2, "adaptive_max_pool2d", return_indices)


def adaptive_avg_pool1d(input, output_size):
    """Average over torch's adaptive windows of (N, C, L) or (C, L): a weighted sum of gathers (one
    per window position), in fp32 for fp16/bf16 with one rounding at the end."""
    _tensor(input, "adaptive_avg_pool1d")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"adaptive_avg_pool1d(): Expected 2D or 3D tensor, but got {list(input.shape)}")
    n_out = output_size[0] if isinstance(output_size, (tuple, list)) else output_size
    if isinstance(n_out, bool) or not isinstance(n_out, numbers.Integral) or n_out < 0:
        raise RuntimeError(f"adaptive_avg_pool1d(): output_size must be a non-negative int, got {output_size}")
    for d in range(1, input.ndim):
        if input.shape[d] == 0:
            raise RuntimeError(f"adaptive_avg_pool1d(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {list(input.shape)} with dimension {d} being empty")
    low = input.dtype in (dt.float16, dt.bfloat16)
    x = input.float() if low else input
    n_in = x.shape[-1]
    if n_out == 0:
        return zeros(tuple(x.shape[:-1]) + (0,), dtype=input.dtype, device=input.device)
    table, valid = _window_table(n_in, n_out)
    weights = valid / valid.sum(1, keepdims=True)  # 1/count on a window's own positions, 0 on the padding
    w = from_numpy(weights).to(device=x.device, dtype=x.dtype)
    gathered = x.index_select(-1, _index(table.reshape(-1), x.device)).reshape(tuple(x.shape[:-1]) + table.shape)
    out = (gathered * w).sum(-1)
    return out.to(input.dtype) if low else out


# ----- fold (col2im) -----------------------------------------------------------------------------------

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


# ----- embedding_bag -----------------------------------------------------------------------------------

def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type: float = 2, scale_grad_by_freq: bool = False,
                  mode: str = "mean", sparse: bool = False, per_sample_weights=None, include_last_offset: bool = False,
                  padding_idx=None):
    """Sum, mean or max of the embeddings of each bag: rows of a 2-D ``input``, or the runs of a 1-D
    ``input`` that ``offsets`` start. The bag of each index is found on the device
    (``searchsorted`` of the offsets), the rows gathered, then index_add (sum, mean) or
    scatter_reduce amax (max) per bag; an empty bag gives zeros, as torch."""
    fn = "embedding_bag"
    _tensor(input, fn)
    _tensor(weight, fn, "weight", 2)
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding_bag(): max_norm, scale_grad_by_freq and sparse are not supported")
    if weight.ndim != 2:
        raise RuntimeError(f"embedding_bag(): weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    if input.dtype not in (dt.int32, dt.int64):
        raise RuntimeError(f"embedding_bag(): expected input of dtype int32 or int64, got {input.dtype.name}")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             "fixed length sequences. However, found offsets of type "
                             f"{type(offsets).__name__}")
        B, n = input.shape
        bag = arange(B, dtype=dt.int64, device=input.device).unsqueeze(1).expand(B, n).reshape(-1)
        flat = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.ndim == 1:
        if offsets is None or offsets.ndim != 1:
            raise ValueError(f"offsets has to be a 1D Tensor but got {None if offsets is None else offsets.ndim}")
        B = offsets.shape[0] - (1 if include_last_offset else 0)
        flat = input
        if offsets.device.type == "cpu" and offsets.numel():  # host memory: torch's checks cost no sync
            o = offsets.tolist()
            if o[0] != 0:
                raise RuntimeError("offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
                                   f"from position 0. However, got {o[0]}")
            if o[-1] > input.shape[0]:
                raise RuntimeError(f"offsets[-1] can not be greater than input's length {input.shape[0]} but got "
                                   f"offsets[-1] of {o[-1]}")
            if any(b < a for a, b in zip(o, o[1:])):
                raise RuntimeError("embedding_bag(): offsets must be non-decreasing")
        n_idx = input.shape[0]
        if offsets.shape[0] == 0:
            B = 0
        bag = (_searchsorted(offsets.to(dt.int64), arange(n_idx, dtype=dt.int64, device=input.device), right=True)
               - 1) if n_idx else zeros((0,), dtype=dt.int64, device=input.device)
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                      f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
                                      "on GitHub.")
        if tuple(per_sample_weights.shape) != tuple(flat.shape):
            raise ValueError(f"embedding_bag: If per_sample_weights ({list(per_sample_weights.shape)}) is not None, "
                             f"then it must have the same shape as the input ({list(input.shape)})")
    D = weight.shape[1]
    flat = flat.to(dt.int64)
    keep = None
    if padding_idx is not None:
        pad = padding_idx % weight.shape[0] if padding_idx < 0 else padding_idx
        keep = flat != pad
    # indices before the first offset, or past the last bag (include_last_offset): dropped, as torch
    # drops the latter (the former are an error there, which would need the offsets on the host)
    valid = (bag >= 0) & (bag < B)
    keep = valid if keep is None else keep & valid
    bag = _where(keep, bag, 0)
    rows = weight.index_select(0, flat) if flat.numel() else zeros((0, D), dtype=weight.dtype, device=weight.device)
    mask = keep.to(weight.dtype).unsqueeze(1)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.to(weight.dtype).unsqueeze(1)
    out = zeros((B, D), dtype=weight.dtype, device=weight.device)
    if mode == "max":
        rows = _where(keep.unsqueeze(1), rows, float("-inf"))
        out = out.scatter_reduce(0, bag.unsqueeze(1).expand(bag.shape[0], D), rows, reduce="amax",
                                 include_self=False)
        counts = zeros((B,), dtype=weight.dtype, device=weight.device).index_add(0, bag, mask.squeeze(1))
        return _where(counts.unsqueeze(1) > 0, out, 0.0)
    out = out.index_add(0, bag, rows * mask)
    if mode == "mean":
        counts = zeros((B,), dtype=weight.dtype, device=weight.device).index_add(0, bag, mask.squeeze(1))
        out = out / counts.clamp_min(1.0).unsqueeze(1)
    return out


# ----- gumbel_softmax ----------------------------------------------------------------------------------

def gumbel_softmax(logits, tau: float = 1, hard: bool = False, eps: float = 1e-10, dim: int = -1):
    """softmax((logits + g) / tau), g Gumbel(0, 1) noise (-log of an Exp(1) draw, itself -log U);
    ``hard``: the one-hot of the argmax in the forward pass, the soft sample's gradient
    (straight-through), as torch."""
    _tensor(logits, "gumbel_softmax", "logits")
    u = rand(logits.shape, dtype=logits.dtype, device=logits.device)
    gumbels = -(-(u.clamp_min(1e-20).log())).log()  # -log(Exp(1)), Exp(1) = -log U
    y = _softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y
    index = y.argmax(dim, keepdim=True)
    y_hard = zeros(logits.shape, dtype=logits.dtype, device=logits.device).scatter(dim, index, 1.0)
    return y_hard - y.detach() + y


# ----- affine_grid and grid_sample ---------------------------------------------------------------------

def _base_coords(n: int, align_corners: bool):
    if n <= 1:
        return np.zeros(max(n, 0))
    c = np.linspace(-1.0, 1.0, n)
    return c if align_corners else c * (n - 1) / n


def affine_grid(theta, size, align_corners=None):
    """The sampling grid of a batch of 2-D (theta (N, 2, 3), size (N, C, H, W)) or 3-D (theta
    (N, 3, 4), size (N, C, D, H, W)) affine maps: the normalized base coordinates times thetaᵀ (a
    batched matmul, so theta gets its gradient)."""
    _tensor(theta, "affine_grid", "theta")
    if not theta.dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = list(size)
    align = bool(align_corners)
    if len(size) == 4:
        if theta.ndim != 3 or tuple(theta.shape[-2:]) != (2, 3):
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. Got "
                             f"{list(theta.shape)}.")
        N, _, H, W = size
        xs, ys = _base_coords(W, align), _base_coords(H, align)
        gy, gx = np.meshgrid(ys, xs, indexing="ij")
        base = np.stack([gx, gy, np.ones_like(gx)], -1).reshape(1, H * W, 3)
        out_shape = (N, H, W, 2)
    elif len(size) == 5:
        if theta.ndim != 3 or tuple(theta.shape[-2:]) != (3, 4):
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {size}. Got "
                             f"{list(theta.shape)}.")
        N, _, D, H, W = size
        gz, gy, gx = np.meshgrid(_base_coords(D, align), _base_coords(H, align), _base_coords(W, align),
                                 indexing="ij")
        base = np.stack([gx, gy, gz, np.ones_like(gx)], -1).reshape(1, D * H * W, 4)
        out_shape = (N, D, H, W, 3)
    else:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    if theta.shape[0] != N:
        raise ValueError(f"Expected theta batch size {theta.shape[0]} to match size[0] {N}")
    b = from_numpy(base).to(device=theta.device, dtype=theta.dtype).expand(N, base.shape[1], base.shape[2])
    return b.matmul(theta.transpose(1, 2)).reshape(out_shape)


def _unnormalize(coord, n: int, align: bool):
    return (coord + 1) * ((n - 1) / 2) if align else ((coord + 1) * n - 1) / 2


def _reflect(x, lo2: float, hi2: float):
    """torch's reflect_coordinates over [lo2 / 2, hi2 / 2], written with ops (differentiable: the
    gradient's sign flips on reflected stretches, as torch's)."""
    if lo2 == hi2:
        return x * 0.0
    lo, span = lo2 / 2, (hi2 - lo2) / 2
    x = (x - lo).abs()
    flips = (x / span).floor()
    extra = x - flips * span
    even = (flips - (flips / 2).floor() * 2) == 0
    return _where(even, extra + lo, span - extra + lo)


def _source_index(coord, n: int, padding_mode: str, align: bool):
    x = _unnormalize(coord, n, align)
    if padding_mode == "border":
        x = x.clamp(0, n - 1)
    elif padding_mode == "reflection":
        x = _reflect(x, 0, 2 * (n - 1)) if align else _reflect(x, -1, 2 * n - 1)
        x = x.clamp(0, n - 1)
    return x


def grid_sample(input, grid, mode: str = "bilinear", padding_mode: str = "zeros", align_corners=None):
    """Sample (N, C, H, W) ``input`` at the normalized (x, y) of (N, Ho, Wo, 2) ``grid``: bilinear
    (four gathered corners, weighted) or nearest (round half to even), out-of-range corners zero,
    clamped to the border, or reflected. Gradients reach ``input`` through the gathers and ``grid``
    through the weights (not through nearest's rounding, as torch)."""
    fn = "grid_sample"
    _tensor(input, fn)
    _tensor(grid, fn, "grid", 2)
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but "
                         f"got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError("nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if mode == "bicubic":
        raise NotImplementedError("grid_sample(): mode='bicubic' is not supported")
    if input.ndim != 4:
        raise NotImplementedError(f"grid_sample(): only 4-D input (N, C, H, W) is supported, got {input.ndim}-D")
    if grid.ndim != 4 or grid.shape[-1] != 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size 2 in last dimension, but got grid with sizes "
                           f"{list(grid.shape)}")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                           f"sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if input.dtype != grid.dtype:
        raise RuntimeError(f"grid_sampler(): expected input and grid to have same dtype, but input has "
                           f"{input.dtype} and grid has {grid.dtype}")
    align = bool(align_corners)
    N, C, H, W = input.shape
    Ho, Wo = grid.shape[1], grid.shape[2]
    low = input.dtype in (dt.float16, dt.bfloat16)
    x_in, g = (input.float(), grid.float()) if low else (input, grid)
    ix = _source_index(g[..., 0], W, padding_mode, align)  # (N, Ho, Wo)
    iy = _source_index(g[..., 1], H, padding_mode, align)
    planes = x_in.reshape(N, C, H * W)

    def corner(cx, cy):
        """The input at integer corner (cx, cy) (float tensors), zero where it is outside."""
        inside = (cx >= 0) & (cx <= W - 1) & (cy >= 0) & (cy <= H - 1)
        flat = (cy.clamp(0, max(H - 1, 0)) * W + cx.clamp(0, max(W - 1, 0))).to(dt.int64)
        vals = planes.gather(2, flat.reshape(N, 1, Ho * Wo).expand(N, C, Ho * Wo)).reshape(N, C, Ho, Wo)
        return vals, inside.unsqueeze(1)

    if mode == "nearest":
        vals, inside = corner(ix.round().detach(), iy.round().detach())
        out = _where(inside, vals, 0.0)
    else:
        x0, y0 = ix.floor().detach(), iy.floor().detach()
        wx1, wy1 = (ix - x0).unsqueeze(1), (iy - y0).unsqueeze(1)
        wx0, wy0 = 1 - wx1, 1 - wy1
        out = None
        for cx, cy, w in ((x0, y0, wx0 * wy0), (x0 + 1, y0, wx1 * wy0), (x0, y0 + 1, wx0 * wy1),
                          (x0 + 1, y0 + 1, wx1 * wy1)):
            vals, inside = corner(cx, cy)
            term = _where(inside, vals * w, 0.0)
            out = term if out is None else out + term
    return out.to(input.dtype) if low else out


# ----- 3-D convolution and pooling over the 2-D kernels --------------------------------------------------

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


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """max_pool2d over each depth plane, then the max over the depth window (a gather, one max)."""
    fn = "max_pool3d"
    x, unbatched = _as_5d(input, fn)
    if ceil_mode or return_indices:
        raise NotImplementedError(f"{fn}(): ceil_mode=True and return_indices=True are not supported")
    k = _triple(kernel_size, "kernel_size", fn)
    s = k if stride is None or stride == [] else _triple(stride, "stride", fn)
    p, d = _triple(padding, "padding", fn), _triple(dilation, "dilation", fn)
    if any(2 * pi > ki for pi, ki in zip(p, k)):
        raise RuntimeError(f"{fn}(): pad should be at most half of effective kernel size, but got pad={p} and "
                           f"kernel_size={k}")
    N, C, D, H, W = x.shape
    y = _max_pool2d(x.reshape(N, C * D, H, W), k[1:], s[1:], p[1:], d[1:])
    y = y.reshape(N, C, D, y.shape[-2], y.shape[-1])
    table, OD = _depth_table(D, k[0], s[0], p[0], d[0], fn)
    yp = _pad_depth(y, p[0], float("-inf"))
    win = yp.index_select(2, _index(table.T.reshape(-1), x.device)).reshape(N, C, OD, k[0], y.shape[-2],
                                                                             y.shape[-1])
    out = win.amax(3)
    return out.squeeze(0) if unbatched else out


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override=None):
    """avg_pool2d over each depth plane, then the mean over the depth window: separable, the divisor
    (kernel volume, or the count of non-padding elements) being a product over the dims."""
    fn = "avg_pool3d"
    x, unbatched = _as_5d(input, fn)
    if ceil_mode:
        raise NotImplementedError(f"{fn}(): ceil_mode=True is not supported")
    k = _triple(kernel_size, "kernel_size", fn)
    s = k if stride is None or stride == [] else _triple(stride, "stride", fn)
    p = _triple(padding, "padding", fn)
    if any(2 * pi > ki for pi, ki in zip(p, k)):
        raise RuntimeError(f"{fn}(): pad should be at most half of kernel size, but got pad={p} and kernel_size={k}")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    N, C, D, H, W = x.shape
    include = count_include_pad or divisor_override is not None
    y = _avg_pool2d(x.reshape(N, C * D, H, W), k[1:], s[1:], p[1:], False, include)
    y = y.reshape(N, C, D, y.shape[-2], y.shape[-1])
    table, OD = _depth_table(D, k[0], s[0], p[0], 1, fn)
    if include:
        counts = np.full(OD, k[0], dtype=np.float64)
    else:
        real = (table >= p[0]) & (table < D + p[0])
        counts = real.sum(0).astype(np.float64)
    yp = _pad_depth(y, p[0], 0.0)
    win = yp.index_select(2, _index(table.T.reshape(-1), x.device)).reshape(N, C, OD, k[0], y.shape[-2],
                                                                             y.shape[-1])
    scale = 1.0 / counts
    if divisor_override is not None:
        scale = scale * (k[0] * k[1] * k[2]) / divisor_override
    w = from_numpy(scale).to(device=x.device, dtype=y.dtype).reshape(1, 1, OD, 1, 1)
    out = win.sum(3) * w
    return out.squeeze(0) if unbatched else out
