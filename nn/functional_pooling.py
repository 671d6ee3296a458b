"""``nn.functional``'s pooling beyond the op table's 2-D kernels: 1-D pooling (the 2-D kernels over a
height of one), 3-D pooling (the 2-D kernels over each depth window), and the adaptive pools
(``adaptive_avg_pool1d``/``2d``/``3d``, ``adaptive_max_pool1d``/``2d``/``3d``) with torch's windows
[floor(i * in / out), ceil((i + 1) * in / out)); the power-average pools (``lp_pool1d``/``2d``/``3d``,
torch's formula over the average pools), ``max_unpool1d``/``2d``/``3d`` (a scatter of the maxima
into a zero plane) and the fractional max pools (torch's pseudo-random window starts computed on
the device from the samples, one gather, one max).

Each is a composition of dispatched ops (the 2-D pools, gathers, ``maximum``), so autograd records
it and none needs a derivative of its own. Window index arrays depend on shapes only and are built
on the host; no device value is read back.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..core.factories import arange, from_numpy, full, rand, zeros
from ..core.functional import function as _function
from ..core.ops import table as _table
from ..runtime import dtype as dt
from .functional_checks import _check_input, _index, _single, _tensor, _tensor_arg
from .functional_convolution import _as_5d, _depth_table, _pad_depth, _triple

__all__ = ["max_pool1d", "avg_pool1d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
           "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool3d",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices", "adaptive_max_pool3d_with_indices",
           "max_pool1d_with_indices", "max_pool3d_with_indices", "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d",
           "max_unpool2d", "max_unpool3d", "fractional_max_pool2d", "fractional_max_pool2d_with_indices",
           "fractional_max_pool3d", "fractional_max_pool3d_with_indices"]
_max_pool2d = _function(_table.OPS["max_pool2d"], "max_pool2d", numpy_names=False)
_avg_pool2d = _function(_table.OPS["avg_pool2d"], "avg_pool2d", numpy_names=False)
_cat = _function(_table.OPS["cat"], "cat", numpy_names=False)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """``torch.nn.functional.max_pool1d`` over (N, C, L) or (C, L): max_pool2d over a height of one."""
    _tensor_arg(input, "input", "max_pool1d")
    k = _single(kernel_size, "kernel_size", "max_pool1d")
    s = k if stride is None or stride == [] else _single(stride, "stride", "max_pool1d")
    out = _max_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, _single(padding, "padding", "max_pool1d")),
                      (1, _single(dilation, "dilation", "max_pool1d")), ceil_mode, return_indices)
    if return_indices:
        return out[0].squeeze(-2), out[1].squeeze(-2)
    return out.squeeze(-2)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """``torch.nn.functional.avg_pool1d`` over (N, C, L) or (C, L): avg_pool2d over a height of one."""
    _tensor_arg(input, "input", "avg_pool1d")
    k = _single(kernel_size, "kernel_size", "avg_pool1d")
    s = k if stride is None or stride == [] else _single(stride, "stride", "avg_pool1d")
    return _avg_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, _single(padding, "padding", "avg_pool1d")),
                       ceil_mode, count_include_pad).squeeze(-2)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """max_pool2d over each depth plane, then the max over the depth window (a gather, one max)."""
    fn = "max_pool3d"
    x, unbatched = _as_5d(input, fn)
    if ceil_mode:
        raise NotImplementedError(f"{fn}(): ceil_mode=True is not supported")
    k = _triple(kernel_size, "kernel_size", fn)
    s = k if stride is None or stride == [] else _triple(stride, "stride", fn)
    p, d = _triple(padding, "padding", fn), _triple(dilation, "dilation", fn)
    if any(2 * pi > ki for pi, ki in zip(p, k)):
        raise RuntimeError(f"{fn}(): pad should be at most half of effective kernel size, but got pad={p} and "
                           f"kernel_size={k}")
    N, C, D, H, W = x.shape
    y = _max_pool2d(x.reshape(N, C * D, H, W), k[1:], s[1:], p[1:], d[1:], False, return_indices)
    y, plane_idx = y if return_indices else (y, None)
    OH, OW = y.shape[-2], y.shape[-1]
    y = y.reshape(N, C, D, OH, OW)
    table, OD = _depth_table(D, k[0], s[0], p[0], d[0], fn)
    rows = _index(table.T.reshape(-1), x.device)
    yp = _pad_depth(y, p[0], float("-inf"))
    win = yp.index_select(2, rows).reshape(N, C, OD, k[0], OH, OW)
    if not return_indices:
        out = win.amax(3)
        return out.squeeze(0) if unbatched else out
    # the first maximum over the depth window, then its flat position d * H * W + (h * W + w): the
    # first in (d, h, w) order, as torch's scan
    out, arg = win.max(3)
    ip = _pad_depth(plane_idx.reshape(N, C, D, OH, OW), p[0], 0)
    depth = _index((table.T - p[0]) * (H * W), x.device).reshape(1, 1, OD, k[0], 1, 1)
    flat = ip.index_select(2, rows).reshape(N, C, OD, k[0], OH, OW) + depth
    idx = flat.gather(3, arg.unsqueeze(3)).squeeze(3)
    return (out.squeeze(0), idx.squeeze(0)) if unbatched else (out, idx)


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


def adaptive_avg_pool2d(input, output_size):
    """Average over torch's adaptive windows [floor(i * in / out), ceil((i + 1) * in / out)) per
    spatial dim; one avg_pool2d kernel when the sizes divide, else a sum of gathers per dim."""
    _check_input(input, "adaptive_avg_pool2d")
    if input.ndim not in (3, 4):
        raise ValueError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got {list(input.shape)}")
    osz = (output_size, output_size) if isinstance(output_size, int) or output_size is None else tuple(output_size)
    H, W = input.shape[-2], input.shape[-1]
    oh, ow = (H if osz[0] is None else osz[0]), (W if osz[1] is None else osz[1])
    if oh < 0 or ow < 0:
        raise ValueError(f"adaptive_avg_pool2d(): output_size must be non-negative, got {output_size}")
    for d in (input.ndim - 2, input.ndim - 1):  # an empty window would average nothing: NaN, silently
        if input.shape[d] == 0:
            raise RuntimeError(f"adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {list(input.shape)} with dimension {d} being empty")
    if H and W and oh and ow and H % oh == 0 and W % ow == 0:
        k = (H // oh, W // ow)
        return _avg_pool2d(input, k, k)
    low = input.dtype in (dt.float16, dt.bfloat16)
    out = input.float() if low else input  # 1/count weights and sums in fp32, one rounding at the end
    for d, n_in, n_out in ((input.ndim - 2, H, oh), (input.ndim - 1, W, ow)):
        out = _adaptive_mean(out, d, n_in, n_out)
    return out.to(input.dtype) if low else out


def _adaptive_mean(x, d: int, n_in: int, n_out: int):
    i = np.arange(n_out)
    start = (i * n_in) // n_out
    end = -((-(i + 1) * n_in) // n_out)
    count = end - start
    shape = [1] * x.ndim
    shape[d] = n_out
    acc = None
    for k in range(int(count.max()) if n_out else 0):
        idx = np.minimum(start + k, max(n_in - 1, 0))
        w = np.where(k < count, 1.0 / np.maximum(count, 1), 0.0)
        term = x.index_select(d, _index(idx, x.device)) * from_numpy(w).to(device=x.device, dtype=x.dtype
                                                                               ).reshape(shape)
        acc = term if acc is None else acc + term
    if acc is None:
        out_shape = list(x.shape)
        out_shape[d] = n_out
        return full(out_shape, float("nan") if n_out else 0.0, dtype=x.dtype, device=x.device)
    return acc


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


def adaptive_max_pool1d_with_indices(input, output_size, return_indices: bool = False):
    """``adaptive_max_pool1d`` with the indices, always."""
    return _adaptive_max(input, output_size, 1, "adaptive_max_pool1d", True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices: bool = False):
    """``adaptive_max_pool2d`` with the indices, always."""
    return _adaptive_max(input, output_size, 2, "adaptive_max_pool2d", True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices: bool = False):
    """``adaptive_max_pool3d`` with the indices, always."""
    return adaptive_max_pool3d(input, output_size, True)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    """``max_pool1d`` with the indices, always."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    """``max_pool3d`` with the indices, always."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def _adaptive_sizes(input, output_size, nsp: int, fn: str):
    sizes = (output_size,) * nsp if isinstance(output_size, int) or output_size is None else tuple(output_size)
    if len(sizes) != nsp:
        raise ValueError(f"{fn}(): internal error: output_size.size() must be {nsp}")
    sizes = tuple(n if o is None else o for n, o in zip(input.shape[-nsp:], sizes))
    if any(isinstance(o, bool) or not isinstance(o, numbers.Integral) or o < 0 for o in sizes):
        raise RuntimeError(f"{fn}(): elements of output_size must be greater than or equal to 0 but received "
                           f"{list(sizes)}")
    for d in range(1, input.ndim):  # an empty window would pool nothing
        if input.shape[d] == 0:
            raise RuntimeError(f"{fn}(): Expected input to have non-zero size for non-batch dimensions, but input "
                               f"has sizes {list(input.shape)} with dimension {d} being empty")
    return sizes


def adaptive_avg_pool3d(input, output_size):
    """Average over torch's adaptive windows of (N, C, D, H, W) or (C, D, H, W): avg_pool3d when the
    sizes divide, else a weighted sum of gathers per dim, in fp32 for fp16/bf16."""
    fn = "adaptive_avg_pool3d"
    _tensor(input, fn)
    if input.ndim not in (4, 5):
        raise RuntimeError(f"{fn}(): Expected 4D or 5D tensor, but got {list(input.shape)}")
    sizes = _adaptive_sizes(input, output_size, 3, fn)
    spatial = tuple(input.shape[-3:])
    if all(o and n % o == 0 for n, o in zip(spatial, sizes)):
        k = tuple(n // o for n, o in zip(spatial, sizes))
        return avg_pool3d(input, k, k)
    low = input.dtype in (dt.float16, dt.bfloat16)
    out = input.float() if low else input
    for j, (n_in, n_out) in enumerate(zip(spatial, sizes)):
        out = _adaptive_mean(out, input.ndim - 3 + j, n_in, n_out)
    return out.to(input.dtype) if low else out


def adaptive_max_pool3d(input, output_size, return_indices: bool = False):
    """Max over torch's adaptive windows of (N, C, D, H, W) or (C, D, H, W): every window of the
    volume gathered at once, one max over each (the first maximum wins, a NaN propagates); with
    ``return_indices`` also the flat position (d H + h) W + w of each maximum."""
    fn = "adaptive_max_pool3d"
    _tensor(input, fn)
    if input.ndim not in (4, 5):
        raise RuntimeError(f"{fn}(): Expected 4D or 5D tensor, but got {list(input.shape)}")
    od, oh, ow = _adaptive_sizes(input, output_size, 3, fn)
    D, H, W = input.shape[-3:]
    lead = tuple(input.shape[:-3])
    if od == 0 or oh == 0 or ow == 0:
        v = zeros(lead + (od, oh, ow), dtype=input.dtype, device=input.device)
        i = zeros(lead + (od, oh, ow), dtype=dt.int64, device=input.device)
        return (v, i) if return_indices else v
    deps, _ = _window_table(D, od)
    rows, _ = _window_table(H, oh)
    cols, _ = _window_table(W, ow)
    table = ((deps[:, None, None, :, None, None] * H + rows[None, :, None, None, :, None]) * W
             + cols[None, None, :, None, None, :]).reshape(od, oh, ow, -1)
    kk = table.shape[-1]
    v, arg = input.reshape(lead + (D * H * W,)).index_select(-1, _index(table.reshape(-1), input.device)).reshape(
        lead + (od, oh, ow, kk)).max(-1)
    if not return_indices:
        return v
    i = _index(table, input.device).expand(lead + (od, oh, ow, kk)).gather(-1, arg.unsqueeze(-1)).squeeze(-1)
    return v, i


def _ntuple_arg(v, n: int, name: str, fn: str):
    v = (v,) * n if isinstance(v, numbers.Integral) else tuple(v)
    if len(v) != n or any(isinstance(e, bool) or not isinstance(e, numbers.Integral) for e in v):
        raise TypeError(f"{fn}(): {name} must be an int or a {n}-tuple of ints, got {v!r}")
    return tuple(int(e) for e in v)


def _lp(out, norm_type, kernel_volume: int):
    # torch's form: sign(out) * relu(|out|) keeps a negative average (odd p) from a NaN root
    return (out.sign() * out.abs().relu()).mul(kernel_volume).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode: bool = False):
    """The power average (sum over the window of x^p)^(1/p), torch's ``lp_pool1d``."""
    _tensor(input, "lp_pool1d")
    k = _single(kernel_size, "kernel_size", "lp_pool1d")
    return _lp(avg_pool1d(input.pow(norm_type), k, stride, 0, ceil_mode), norm_type, k)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode: bool = False):
    """The power average (sum over the window of x^p)^(1/p), torch's ``lp_pool2d``."""
    _tensor(input, "lp_pool2d")
    kh, kw = _ntuple_arg(kernel_size, 2, "kernel_size", "lp_pool2d")
    s = (kh, kw) if stride is None else stride
    return _lp(_avg_pool2d(input.pow(norm_type), (kh, kw), s, 0, ceil_mode), norm_type, kh * kw)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode: bool = False):
    """The power average (sum over the window of x^p)^(1/p), torch's ``lp_pool3d``."""
    _tensor(input, "lp_pool3d")
    kd, kh, kw = _ntuple_arg(kernel_size, 3, "kernel_size", "lp_pool3d")
    return _lp(avg_pool3d(input.pow(norm_type), (kd, kh, kw), stride, 0, ceil_mode), norm_type, kd * kh * kw)


def _max_unpool(input, indices, kernel_size, stride, padding, output_size, nsp: int, fn: str):
    _tensor(input, fn)
    _tensor(indices, fn, "indices", 2)
    if indices.dtype != dt.int64:
        raise RuntimeError(f"{fn}(): elements in indices should be type int64 but got: {indices.dtype.name}")
    if input.ndim not in (nsp + 1, nsp + 2):
        raise RuntimeError(f"{fn}(): Expected {nsp + 1}D or {nsp + 2}D input, but got input of size: "
                           f"{list(input.shape)}")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({list(input.shape)}) "
                           f"but got indices tensor with shape: {list(indices.shape)}")
    k = _ntuple_arg(kernel_size, nsp, "kernel_size", fn)
    s = k if stride is None else _ntuple_arg(stride, nsp, "stride", fn)
    p = _ntuple_arg(padding, nsp, "padding", fn)
    spatial = tuple(input.shape[-nsp:])
    default = [(n - 1) * st - 2 * pd + kd for n, st, pd, kd in zip(spatial, s, p, k)]
    if output_size is None:
        size = default
    else:
        size = list(output_size)
        if len(size) == nsp + 2:
            size = size[2:]
        if len(size) != nsp:
            raise ValueError(f"output_size should be a sequence containing {nsp} or {nsp + 2} elements, but it has a "
                             f"length of '{len(size)}'")
        for d in range(nsp):
            lo, hi = default[d] - s[d], default[d] + s[d]
            if not lo <= size[d] <= hi:
                raise ValueError(f'invalid output_size "{tuple(size)}" (dim {d} must be between {lo} and {hi})')
    lead = tuple(input.shape[:-nsp])
    volume = int(np.prod(size))
    out = zeros(lead + (volume,), dtype=input.dtype, device=input.device)
    if input.numel():  # an index past the output volume is the scatter's IndexError, before any write
        out = out.scatter(-1, indices.reshape(lead + (-1,)), input.reshape(lead + (-1,)))
    return out.reshape(lead + tuple(size))


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool1d``: each maximum put back at its index, zeros elsewhere."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1, "max_unpool1d")


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool2d``: each maximum put back at its index, zeros elsewhere."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2, "max_unpool2d")


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool3d``: each maximum put back at its index, zeros elsewhere."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3, "max_unpool3d")


_FRACTIONAL_DIMS = {2: ("height", "width"), 3: ("time", "height", "width")}


def _fractional_starts(u, n_in: int, n_out: int, k: int):
    """torch's ``generate_intervals`` on the device: start i = trunc((i + u) a) - trunc(u a), a =
    (in - k) / (out - 1), the last window flush with the end; u is (N, C, 1), one sample per plane."""
    last = full(tuple(u.shape[:-1]) + (1,), n_in - k, dtype=dt.int64, device=u.device)
    if n_out == 1:
        return last
    alpha = (n_in - k) / (n_out - 1)
    i = arange(n_out - 1, device=u.device, dtype=u.dtype).reshape(1, 1, -1)
    starts = ((i + u) * alpha).floor() - (u * alpha).floor()
    return _cat([starts.to(dt.int64), last], -1)


def _fractional(input, kernel_size, output_size, output_ratio, return_indices, _random_samples, nsp: int, fn: str):
    _tensor(input, fn)
    if output_size is None and output_ratio is None:
        raise ValueError(f"{fn} requires specifying either an output_size or an output_ratio")
    if input.ndim not in (nsp + 1, nsp + 2):
        raise RuntimeError(f"{fn}(): Expected {nsp + 1}D or {nsp + 2}D tensor, but got: {list(input.shape)}")
    batched = input.ndim == nsp + 2
    x = input if batched else input.unsqueeze(0)
    k = _ntuple_arg(kernel_size, nsp, "kernel_size", fn)
    spatial = tuple(x.shape[2:])
    if output_size is None:
        ratio = (output_ratio,) * nsp if isinstance(output_ratio, numbers.Real) else tuple(output_ratio)
        out_size = tuple(int(n * r) for n, r in zip(spatial, ratio))
    else:
        out_size = _ntuple_arg(output_size, nsp, "output_size", fn)
    for name, n, o, kd in zip(_FRACTIONAL_DIMS[nsp], spatial, out_size, k):
        if o + kd - 1 > n:
            raise RuntimeError(f"{fn}(): pool {name} {kd} too large relative to input {name} {n}")
    N, C = x.shape[0], x.shape[1]
    if _random_samples is None:
        samples = rand(N, C, nsp, dtype=x.dtype, device=x.device)
    else:
        _tensor(_random_samples, fn, "_random_samples", 6)
        samples = _random_samples
        if tuple(samples.shape) != (N, C, nsp):
            raise RuntimeError(f"{fn}(): expected _random_samples of shape {[N, C, nsp]}, got {list(samples.shape)}")
    # the samples' order: (w, h) for 2-D, (t, h, w) for 3-D, as torch's kernels read them
    order = (1, 0) if nsp == 2 else (0, 1, 2)
    flat = None
    stride = 1
    for j in reversed(range(nsp)):
        s = _fractional_starts(samples[:, :, order[j]:order[j] + 1], spatial[j], out_size[j], k[j])  # (N, C, o_j)
        pos = s.unsqueeze(-1) + arange(k[j], device=x.device).reshape(1, 1, 1, -1)  # (N, C, o_j, k_j)
        shape = [N, C] + [1] * (2 * nsp)
        shape[2 + j], shape[2 + nsp + j] = out_size[j], k[j]
        term = pos.reshape(shape) * stride
        flat = term if flat is None else flat + term
        stride *= spatial[j]
    vol = int(np.prod(out_size))
    kvol = int(np.prod(k))
    flat = flat.expand((N, C) + tuple(out_size) + tuple(k)).reshape(N, C, vol, kvol)
    if vol == 0 or N * C == 0:
        v = zeros((N, C) + tuple(out_size), dtype=x.dtype, device=x.device)
        i = zeros((N, C) + tuple(out_size), dtype=dt.int64, device=x.device)
    else:
        v, arg = x.reshape(N, C, -1).gather(2, flat.reshape(N, C, -1)).reshape(N, C, vol, kvol).max(-1)
        i = flat.gather(-1, arg.unsqueeze(-1)).reshape((N, C) + tuple(out_size))
        v = v.reshape((N, C) + tuple(out_size))
    if not batched:
        v, i = v.squeeze(0), i.squeeze(0)
    return (v, i) if return_indices else v


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
                          _random_samples=None):
    """Max over pseudo-random windows (Graham's fractional max pooling), torch's intervals."""
    return _fractional(input, kernel_size, output_size, output_ratio, return_indices, _random_samples, 2,
                       "fractional_max_pool2d")


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices: bool = False, _random_samples=None):
    """``fractional_max_pool2d`` with the indices, always."""
    return _fractional(input, kernel_size, output_size, output_ratio, True, _random_samples, 2,
                       "fractional_max_pool2d")


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
                          _random_samples=None):
    """Max over pseudo-random 3-D windows (Graham's fractional max pooling), torch's intervals."""
    return _fractional(input, kernel_size, output_size, output_ratio, return_indices, _random_samples, 3,
                       "fractional_max_pool3d")


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices: bool = False, _random_samples=None):
    """``fractional_max_pool3d`` with the indices, always."""
    return _fractional(input, kernel_size, output_size, output_ratio, True, _random_samples, 3,
                       "fractional_max_pool3d")
