"""``nn.functional``: the stateless forms of the layers.

The entries the op table marks ``functional`` (linear, conv2d, pooling, softmax, layer_norm, the
losses) are generated from it (``core/ops/table.py``), so they take the one dispatch path like
every op. The rest are compositions of ops with the extra arguments torch gives them here
(``inplace=``, ``approximate=``, ``training=``).
"""
from __future__ import annotations

import math as _math
import numbers as _numbers
import warnings as _warnings

import numpy as _np

from ..core.factories import arange as _arange
from ..core.factories import from_numpy as _from_numpy
from ..core.factories import full as _full
from ..core.factories import rand as _rand
from ..runtime import dtype as _dt
from ..core.functional import function as _function
from ..core.ops import table as _table
from ..core.tensor import Tensor

from .functional_composites import (avg_pool1d, bilinear, conv1d, conv_transpose1d, cosine_similarity,  # noqa: F401
                                    max_pool1d, pairwise_distance, pixel_shuffle, pixel_unshuffle, unfold)
from . import functional_activations as _activations
from . import functional_losses as _losses
from . import functional_layers as _layers
from .functional_layers import (adaptive_avg_pool1d, adaptive_max_pool1d, adaptive_max_pool2d,  # noqa: F401
                                affine_grid, alpha_dropout, avg_pool3d, conv3d, dropout1d, dropout2d, embedding_bag,
                                fold, grid_sample, gumbel_softmax, instance_norm, max_pool3d)
from .functional_activations import (celu, glu, hardshrink, hardsigmoid, hardtanh, hardtanh_,  # noqa: F401
                                     logsigmoid, prelu, relu6, selu, softshrink, softsign, tanhshrink, threshold,
                                     threshold_)
from .functional_losses import (cosine_embedding_loss, gaussian_nll_loss, huber_loss,  # noqa: F401
                                margin_ranking_loss, multilabel_soft_margin_loss, poisson_nll_loss, soft_margin_loss,
                                triplet_margin_loss)

_sm = _function(_table.OPS["softmax"], "softmax", numpy_names=False)  # the op itself: it names a bad input
_lsm = _function(_table.OPS["log_softmax"], "log_softmax", numpy_names=False)

__all__ = ["softmax", "log_softmax", "softmin", "relu", "gelu", "silu", "sigmoid", "tanh", "dropout", "flatten",
           "avg_pool1d", "bilinear", "conv1d", "conv_transpose1d",
           "cosine_similarity", "max_pool1d", "pairwise_distance", "pixel_shuffle", "pixel_unshuffle", "unfold"]
__all__ += _activations.__all__ + _losses.__all__ + _layers.__all__
for _op in _table.OPS.values():
    if _op.functional:
        globals()[_op.name] = _function(_op, _op.name, numpy_names=False)
        __all__.append(_op.name)


def _softmax_dim(fn: str, ndim: int, stacklevel: int) -> int:
    """torch's implicit dim for a softmax called without one (deprecated there, so it warns)."""
    dim = 0 if ndim in (0, 1, 3) else 1
    _warnings.warn(f"Implicit dimension choice for {fn} has been deprecated. Change the call to include dim=X as "
                   "an argument.", UserWarning, stacklevel=stacklevel)
    return dim


def softmax(input, dim=None, _stacklevel: int = 3, dtype=None):
    """``torch.nn.functional.softmax``: ``input.softmax(dim, dtype)``; without ``dim``, torch's
    implicit choice (0 for 0-, 1- and 3-D input, else 1) and its deprecation warning."""
    if dim is None:
        _check_input(input, "softmax")
        dim = _softmax_dim("softmax", input.ndim, _stacklevel)
    return input.softmax(dim, dtype=dtype) if isinstance(input, Tensor) else _sm(input, dim, dtype)


def log_softmax(input, dim=None, _stacklevel: int = 3, dtype=None):
    """``torch.nn.functional.log_softmax``, with softmax's implicit ``dim`` rule."""
    if dim is None:
        _check_input(input, "log_softmax")
        dim = _softmax_dim("log_softmax", input.ndim, _stacklevel)
    return input.log_softmax(dim, dtype=dtype) if isinstance(input, Tensor) else _lsm(input, dim, dtype)


def softmin(input, dim=None, _stacklevel: int = 3, dtype=None):
    """``torch.nn.functional.softmin``: ``softmax(-input)``."""
    if dim is None:
        _check_input(input, "softmin")
        dim = _softmax_dim("softmin", input.ndim, _stacklevel)
    return softmax(-input, dim, dtype=dtype)


def relu(input, inplace: bool = False):
    return input.relu_() if inplace else input.relu()


def gelu(input, approximate: str = "none"):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu(): approximate must be 'none' or 'tanh', got {approximate!r}")
    return input.gelu() if approximate == "none" else input.gelu_tanh()


def silu(input, inplace: bool = False):
    return input.silu_() if inplace else input.silu()


def sigmoid(input):
    return input.sigmoid()


def tanh(input):
    return input.tanh()


def flatten(input, start_dim: int = 0, end_dim: int = -1):
    return input.flatten(start_dim, end_dim)


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero each element with probability p and scale the rest by 1/(1-p) (training only)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"dropout(): argument 'input' must be Tensor, not {type(input).__name__}")
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input.mul_(0) if inplace else input * 0
    keep = _rand(input.shape, device=input.device) >= p  # a bool mask: not differentiated
    scale = 1.0 / (1.0 - p)
    if inplace:
        return input.mul_(keep).mul_(scale)
    return input * keep * scale


# ----- activations written with recorded ops ---------------------------------------------------------
# Each is a composition of ops autograd records, so each is differentiable to any order; the
# ``inplace=True`` forms compute out of place and copy the result back (``copy_`` is recorded).
__all__ += ["leaky_relu", "elu", "softplus", "mish", "hardswish"]
_where = _function(_table.OPS["where"], "where")


def _check_input(input, fn: str):
    if not isinstance(input, Tensor):
        raise TypeError(f"{fn}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{fn}(): expected a floating point input, got {input.dtype.name}")


def _check_number(v, fn: str, name: str):
    if isinstance(v, bool) or not isinstance(v, _numbers.Real):
        raise TypeError(f"{fn}(): argument '{name}' must be a number, not {type(v).__name__}")
    return float(v)


def _maybe_inplace(input, out, inplace: bool):
    return input.copy_(out) if inplace else out


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):
    """x if x > 0 else negative_slope * x."""
    _check_input(input, "leaky_relu")
    slope = _check_number(negative_slope, "leaky_relu", "negative_slope")
    return _maybe_inplace(input, _where(input > 0, input, input * slope), inplace)


def elu(input, alpha: float = 1.0, inplace: bool = False):
    """x if x > 0 else alpha * (exp(x) - 1) (expm1: accurate near 0)."""
    _check_input(input, "elu")
    a = _check_number(alpha, "elu", "alpha")
    neg = input.clamp_max(0.0).expm1() * a  # clamped: exp of a large x never overflows into where's gradient
    return _maybe_inplace(input, _where(input > 0, input, neg), inplace)


def softplus(input, beta: float = 1.0, threshold: float = 20.0):
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (torch's rule)."""
    _check_input(input, "softplus")
    b = _check_number(beta, "softplus", "beta")
    th = _check_number(threshold, "softplus", "threshold")
    bx = input * b
    soft = bx.clamp_max(th).exp().log1p() / b  # clamped: no inf whose gradient would be 0 * inf
    return _where(bx > th, input, soft)


def mish(input, inplace: bool = False):
    """x * tanh(softplus(x))."""
    _check_input(input, "mish")
    return _maybe_inplace(input, input * softplus(input).tanh(), inplace)


def hardswish(input, inplace: bool = False):
    """x * relu6(x + 3) / 6."""
    _check_input(input, "hardswish")
    return _maybe_inplace(input, input * (input + 3.0).clamp(0.0, 6.0) / 6.0, inplace)


# ----- normalizations, padding, resizing, one_hot ----------------------------------------------------
# Compositions of recorded ops (layer_norm's fused kernel, index_select's gather/scatter-add kernels,
# avg_pool2d, elementwise ops), so all are differentiable with no derivative of their own. Index
# arrays for padding/resizing are computed on the host from shapes only (no data read back).
__all__ += ["group_norm", "rms_norm", "normalize", "one_hot", "pad", "interpolate", "adaptive_avg_pool2d"]

_EPS = {_dt.float32: 1.1920928955078125e-07, _dt.float16: 0.0009765625, _dt.bfloat16: 0.0078125,
        _dt.float64: 2.220446049250313e-16}


def _affine_shape(x, C):
    return (1, C) + (1,) * (x.ndim - 2)


def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5):
    """Normalize each of ``num_groups`` channel groups per sample (layer_norm's kernel over the
    group's values), then the per-channel affine."""
    _check_input(input, "group_norm")
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    N, C = input.shape[0], input.shape[1]
    if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups <= 0:
        raise ValueError(f"group_norm(): num_groups must be a positive int, got {num_groups!r}")
    if C % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {list(input.shape)} and num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (not isinstance(t, Tensor) or t.numel() != C):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of channels in input, "
                               f"but got {name} of shape {list(t.shape) if isinstance(t, Tensor) else t!r} and "
                               f"input of shape {list(input.shape)}")
    per = (input.numel() // (N * num_groups)) if N * num_groups else 0
    y = layer_norm(input.reshape(N, num_groups, per), (per,), None, None, eps).reshape(input.shape)
    if weight is not None:
        y = y * weight.reshape(_affine_shape(input, C))
    if bias is not None:
        y = y + bias.reshape(_affine_shape(input, C))
    return y


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2 over the trailing normalized_shape dims) + eps) * weight; fp16/bf16 are
    computed in fp32 and cast back before the weight, as torch; eps=None means the dtype's eps."""
    _check_input(input, "rms_norm")
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape [*, "
                           f"{', '.join(map(str, shape))}], but got input of size{list(input.shape)}")
    if weight is not None and tuple(weight.shape) != shape:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got weight of shape "
                           f"{list(weight.shape)} and normalized_shape = {list(shape)}")
    e = _EPS[input.dtype] if eps is None else float(eps)
    x = input if input.dtype in (_dt.float32, _dt.float64) else input.float()
    dims = tuple(range(input.ndim - k, input.ndim))
    y = (x * (x * x).mean(dims, keepdim=True).add(e).rsqrt()).to(input.dtype)
    return y * weight if weight is not None else y


def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None):
    """input / max(||input||_p along dim, eps). The norm is taken as (sum |x|^p clamped at eps^p)^(1/p),
    equal to max(norm, eps) and with a finite gradient at a zero vector."""
    _check_input(input, "normalize")
    if out is not None:
        raise NotImplementedError("normalize(): out= is not supported")
    pf = _check_number(p, "normalize", "p")
    if not pf > 0:
        raise ValueError(f"normalize(): p must be positive, got {p}")
    low = input.dtype in (_dt.float16, _dt.bfloat16)
    x = input.float() if low else input  # eps**2 = 1e-24 is 0 in fp16: the norm is taken in fp32
    if _math.isinf(pf):
        n = x.abs().amax(dim, keepdim=True).clamp_min(eps)
    elif pf == 2.0:
        n = (x * x).sum(dim, keepdim=True).clamp_min(eps * eps).sqrt()
    else:
        n = (x.abs() ** pf).sum(dim, keepdim=True).clamp_min(eps ** pf) ** (1.0 / pf)
    return (x / n).to(input.dtype) if low else x / n


def one_hot(tensor, num_classes: int = -1):
    """(*, num_classes) int64 tensor with a 1 at each index (num_classes=-1: max + 1, one host read)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"one_hot(): argument 'input' (position 1) must be Tensor, not {type(tensor).__name__}")
    if tensor.dtype is not _dt.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if tensor.numel():
        lo, hi = int(tensor.amin().item()), int(tensor.amax().item())
        if lo < 0:
            raise RuntimeError("Class values must be non-negative.")
        if num_classes == -1:
            num_classes = hi + 1
        elif hi >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    elif num_classes == -1:
        raise RuntimeError("Can not infer total number of classes from empty tensor.")
    classes = _arange(num_classes, dtype=_dt.int64, device=tensor.device)
    return (tensor.unsqueeze(-1) == classes).to(_dt.int64)


def _index(idx, dev):
    return _from_numpy(_np.ascontiguousarray(idx, dtype=_np.int64)).to(dev)


def _pad_index(n: int, lo: int, hi: int, mode: str):
    i = _np.arange(-lo, n + hi)
    if mode == "reflect":
        i = _np.abs(i)
        return _np.where(i > n - 1, 2 * (n - 1) - i, i)
    if mode == "replicate":
        return _np.clip(i, 0, n - 1)
    return i % n  # circular


def pad(input, pad, mode: str = "constant", value=None):
    """torch.nn.functional.pad: ``pad`` = (left, right) for the last dim, then the one before ...
    constant (negative pads crop), reflect, replicate, circular."""
    if not isinstance(input, Tensor):
        raise TypeError(f"pad(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    pad = tuple(pad)
    if len(pad) % 2 or any(isinstance(v, bool) or not isinstance(v, int) for v in pad):
        raise ValueError("Padding length must be divisible by 2" if len(pad) % 2 else
                         f"pad(): pad must be a sequence of ints, got {pad}")
    k = len(pad) // 2
    if k > input.ndim:
        raise ValueError("Padding length should be less than or equal to two times the input dimension but got "
                         f"padding length {len(pad)} and input of dimension {input.ndim}")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    pairs = [(input.ndim - 1 - j, pad[2 * j], pad[2 * j + 1]) for j in range(k)]
    if mode == "constant":
        shape = list(input.shape)
        for d, lo, hi in pairs:
            shape[d] += lo + hi
            if shape[d] < 0:
                raise RuntimeError(f"The input size {input.shape[d]}, plus negative padding {lo} and {hi} resulted "
                                   f"in a negative output size, which is invalid. Check dimension {d} of your input.")
        out = _full(shape, 0.0 if value is None else value, dtype=input.dtype, device=input.device)
        src = [slice(None)] * input.ndim
        dst = [slice(None)] * input.ndim
        for d, lo, hi in pairs:
            n = input.shape[d]
            src[d] = slice(max(-lo, 0), n - max(-hi, 0))
            dst[d] = slice(max(lo, 0), max(lo, 0) + max(0, n - max(-lo, 0) - max(-hi, 0)))
        if all(s.stop is None or s.stop > (s.start or 0) for s in src) and out.numel():
            out[tuple(dst)] = input[tuple(src)]
        return out
    if value not in (None, 0, 0.0):
        raise ValueError(f"Padding mode \"{mode}\" doesn't take in value argument.")
    if input.ndim not in (k + 1, k + 2) or k > 3:
        raise NotImplementedError("Only 2D, 3D, 4D, 5D padding with non-constant padding are supported for now")
    out = input
    for d, lo, hi in pairs:
        n = input.shape[d]
        if mode == "reflect" and (lo >= n or hi >= n):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, "
                               f"but got: padding ({lo}, {hi}) at dimension {d} of input {list(input.shape)}")
        if mode == "circular" and (lo > n or hi > n):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if n == 0 and lo + hi > 0:
            raise RuntimeError(f"pad(): {mode} padding of an empty dimension {d}")
        out = out.index_select(d, _index(_pad_index(n, lo, hi, mode), input.device))
    return out


def _out_sizes(input, size, scale_factor, nsp: int, fn: str):
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined" if size is not None else
                         "either size or scale_factor should be defined")
    spatial = tuple(input.shape[2:])
    if size is not None:
        sizes = (size,) * nsp if isinstance(size, int) else tuple(size)
        if len(sizes) != nsp:
            raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input with "
                             f"spatial dimensions of {list(spatial)} and output size of {list(sizes)}. Please provide "
                             "input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) "
                             "format.")
        return sizes, [None] * nsp
    scales = (float(scale_factor),) * nsp if isinstance(scale_factor, (int, float)) else tuple(map(float, scale_factor))
    if len(scales) != nsp:
        raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got input "
                         f"with spatial dimensions of {list(spatial)} and scale_factor of shape {list(scales)}.")
    return tuple(int(_math.floor(n * s)) for n, s in zip(spatial, scales)), list(scales)


def _src_scale(n_in: int, n_out: int, scale, align_corners: bool) -> float:
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else n_in / n_out


def interpolate(input, size=None, scale_factor=None, mode: str = "nearest", align_corners=None,
                recompute_scale_factor=None, antialias: bool = False):
    """Resize the spatial dims: 'nearest' (torch's legacy floor rule), 'linear' (3-D input),
    'bilinear' (4-D), each separable: one gather per dim (nearest) or two weighted gathers (linear)."""
    _check_input(input, "interpolate")
    if antialias:
        raise NotImplementedError("interpolate(): antialias=True is not supported")
    nsp = input.ndim - 2
    allowed = {"nearest": (1, 2, 3), "linear": (1,), "bilinear": (2,)}
    if mode not in allowed:
        raise NotImplementedError(f"interpolate(): mode {mode!r} is not supported (nearest, linear, bilinear)")
    if nsp not in allowed[mode]:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs "
                                  f"{' or '.join(str(a + 2) + 'D' for a in allowed[mode])} input")
    if mode == "nearest" and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: linear | bilinear | "
                         "bicubic | trilinear")
    align = bool(align_corners)
    sizes, scales = _out_sizes(input, size, scale_factor, nsp, "interpolate")
    if recompute_scale_factor:
        scales = [None] * nsp
    low = mode != "nearest" and input.dtype in (_dt.float16, _dt.bfloat16)
    out = input.float() if low else input  # weights and blends in fp32, one rounding at the end
    for j, (n_out, sc) in enumerate(zip(sizes, scales)):
        d = 2 + j
        n_in = input.shape[d]
        if n_out <= 0:
            raise ValueError(f"interpolate(): output size must be positive, got {sizes}")
        r = _src_scale(n_in, n_out, sc, align if mode != "nearest" else False)
        dst = _np.arange(n_out, dtype=_np.float64)
        if mode == "nearest":
            idx = _np.minimum(_np.floor(dst * r).astype(_np.int64), n_in - 1)
            out = out.index_select(d, _index(idx, input.device))
            continue
        src = dst * r if align else _np.maximum((dst + 0.5) * r - 0.5, 0.0)
        i0 = _np.minimum(_np.floor(src).astype(_np.int64), n_in - 1)
        i1 = _np.minimum(i0 + 1, n_in - 1)
        l1 = src - i0
        wshape = [1] * input.ndim
        wshape[d] = n_out
        w1 = _from_numpy(l1.astype(_np.float64)).to(device=input.device, dtype=out.dtype).reshape(wshape)
        a = out.index_select(d, _index(i0, input.device))
        b = out.index_select(d, _index(i1, input.device))
        out = a + (b - a) * w1
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
        return avg_pool2d(input, k, k)
    low = input.dtype in (_dt.float16, _dt.bfloat16)
    out = input.float() if low else input  # 1/count weights and sums in fp32, one rounding at the end
    for d, n_in, n_out in ((input.ndim - 2, H, oh), (input.ndim - 1, W, ow)):
        out = _adaptive_mean(out, d, n_in, n_out)
    return out.to(input.dtype) if low else out


def _adaptive_mean(x, d: int, n_in: int, n_out: int):
    i = _np.arange(n_out)
    start = (i * n_in) // n_out
    end = -((-(i + 1) * n_in) // n_out)
    count = end - start
    shape = [1] * x.ndim
    shape[d] = n_out
    acc = None
    for k in range(int(count.max()) if n_out else 0):
        idx = _np.minimum(start + k, max(n_in - 1, 0))
        w = _np.where(k < count, 1.0 / _np.maximum(count, 1), 0.0)
        term = x.index_select(d, _index(idx, x.device)) * _from_numpy(w).to(device=x.device, dtype=x.dtype
                                                                               ).reshape(shape)
        acc = term if acc is None else acc + term
    if acc is None:
        out_shape = list(x.shape)
        out_shape[d] = n_out
        return _full(out_shape, float("nan") if n_out else 0.0, dtype=x.dtype, device=x.device)
    return acc
