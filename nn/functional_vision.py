"""``nn.functional``'s vision functions (torch's documentation groups them so): ``pad``,
``interpolate``, ``pixel_shuffle``/``pixel_unshuffle``, ``affine_grid`` and ``grid_sample``.

Each rearranges or resamples pixels with recorded ops: gathers (``index_select``) by index arrays
built on the host from shapes alone, reshapes and permutes, and for the interpolating modes weighted
sums of gathers, so gradients reach the input through the gathers (and ``grid_sample``'s grid
through the interpolation weights) with no derivative of their own. ``grid_sample``'s corners depend
on the grid's values, so they are computed on the device and never read back.
"""
from __future__ import annotations

import itertools
import math
import warnings

import numpy as np

from ..core.factories import from_numpy, full
from ..core.functional import function as _function
from ..core.ops import table as _table
from ..core.tensor import Tensor
from ..runtime import dtype as dt
from .functional_checks import _check_input, _index, _single, _tensor, _tensor_arg

__all__ = ["pad", "interpolate", "pixel_shuffle", "pixel_unshuffle", "affine_grid", "grid_sample", "upsample",
           "upsample_nearest", "upsample_bilinear", "GRID_SAMPLE_INTERPOLATION_MODES", "GRID_SAMPLE_PADDING_MODES"]

# grid_sample's mode names and the enum values torch's kernels take for them
GRID_SAMPLE_INTERPOLATION_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
GRID_SAMPLE_PADDING_MODES = {"zeros": 0, "border": 1, "reflection": 2}
_where = _function(_table.OPS["where"], "where")


def _pad_index(n: int, lo: int, hi: int, mode: str):
    i = np.arange(-lo, n + hi)
    if mode == "reflect":
        i = np.abs(i)
        return np.where(i > n - 1, 2 * (n - 1) - i, i)
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
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
        out = full(shape, 0.0 if value is None else value, dtype=input.dtype, device=input.device)
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
    return tuple(int(math.floor(n * s)) for n, s in zip(spatial, scales)), list(scales)


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
    low = mode != "nearest" and input.dtype in (dt.float16, dt.bfloat16)
    out = input.float() if low else input  # weights and blends in fp32, one rounding at the end
    for j, (n_out, sc) in enumerate(zip(sizes, scales)):
        d = 2 + j
        n_in = input.shape[d]
        if n_out <= 0:
            raise ValueError(f"interpolate(): output size must be positive, got {sizes}")
        r = _src_scale(n_in, n_out, sc, align if mode != "nearest" else False)
        dst = np.arange(n_out, dtype=np.float64)
        if mode == "nearest":
            idx = np.minimum(np.floor(dst * r).astype(np.int64), n_in - 1)
            out = out.index_select(d, _index(idx, input.device))
            continue
        src = dst * r if align else np.maximum((dst + 0.5) * r - 0.5, 0.0)
        i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
        i1 = np.minimum(i0 + 1, n_in - 1)
        l1 = src - i0
        wshape = [1] * input.ndim
        wshape[d] = n_out
        w1 = from_numpy(l1.astype(np.float64)).to(device=input.device, dtype=out.dtype).reshape(wshape)
        a = out.index_select(d, _index(i0, input.device))
        b = out.index_select(d, _index(i1, input.device))
        out = a + (b - a) * w1
    return out.to(input.dtype) if low else out


def upsample(input, size=None, scale_factor=None, mode: str = "nearest", align_corners=None):
    """The deprecated name of ``interpolate``, with torch's warning."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """The deprecated ``interpolate(..., mode='nearest')``, with torch's warning."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """The deprecated ``interpolate(..., mode='bilinear', align_corners=True)``, with torch's warning."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def pixel_shuffle(input, upscale_factor: int):
    """(*, C r², H, W) -> (*, C, H r, W r): ``torch.nn.functional.pixel_shuffle``."""
    _tensor_arg(input, "input", "pixel_shuffle")
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
    _tensor_arg(input, "input", "pixel_unshuffle")
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
    """Sample (N, C, H, W) ``input`` at the normalized (x, y) of (N, Ho, Wo, 2) ``grid``, or (N, C, D,
    H, W) ``input`` at the (x, y, z) of (N, Do, Ho, Wo, 3) ``grid``: bilinear (trilinear in 3-D: the
    2^k gathered corners, weighted) or nearest (round half to even), out-of-range corners zero,
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
    if input.ndim not in (4, 5):
        raise NotImplementedError(f"grid_sample(): only 4-D (N, C, H, W) and 5-D (N, C, D, H, W) input is supported, "
                                  f"got {input.ndim}-D")
    k = input.ndim - 2  # spatial dims
    if grid.ndim != input.ndim:
        raise RuntimeError(f"grid_sampler(): expected {input.ndim}D input and grid with same number of dimensions, "
                           f"but got input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if grid.shape[-1] != k:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {k} in last dimension, but got grid with sizes "
                           f"{list(grid.shape)}")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                           f"sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if input.dtype != grid.dtype:
        raise RuntimeError(f"grid_sampler(): expected input and grid to have same dtype, but input has "
                           f"{input.dtype} and grid has {grid.dtype}")
    align = bool(align_corners)
    N, C = input.shape[0], input.shape[1]
    sizes = tuple(input.shape[2:])  # (H, W) or (D, H, W)
    out_sp = tuple(grid.shape[1:-1])
    M = math.prod(out_sp)
    low = input.dtype in (dt.float16, dt.bfloat16)
    x_in, g = (input.float(), grid.float()) if low else (input, grid)
    # the grid's last axis is (x, y[, z]): x indexes the last spatial dim (W), y the one before ...
    idx = [_source_index(g[..., k - 1 - j], n, padding_mode, align) for j, n in enumerate(sizes)]  # (N, *out_sp)
    planes = x_in.reshape(N, C, math.prod(sizes))
    strides = [math.prod(sizes[j + 1:]) for j in range(k)]

    def corner(cs):
        """The input at integer corner ``cs`` (float tensors, one a spatial dim), zero where it is outside."""
        inside, flat = None, None
        for c, n, st in zip(cs, sizes, strides):
            ok = (c >= 0) & (c <= n - 1)
            inside = ok if inside is None else inside & ok
            term = c.clamp(0, max(n - 1, 0)) * st
            flat = term if flat is None else flat + term
        flat = flat.to(dt.int64)
        vals = planes.gather(2, flat.reshape(N, 1, M).expand(N, C, M)).reshape((N, C) + out_sp)
        return vals, inside.unsqueeze(1)

    if mode == "nearest":
        vals, inside = corner([i.round().detach() for i in idx])
        out = _where(inside, vals, 0.0)
    else:
        lo = [i.floor().detach() for i in idx]
        w1 = [(i - c).unsqueeze(1) for i, c in zip(idx, lo)]
        out = None
        for bits in itertools.product((0, 1), repeat=k):  # the last dim (x) varies fastest
            w = None
            for b, wj in zip(reversed(bits), reversed(w1)):  # x's weight first, then y's (then z's)
                f = wj if b else 1 - wj
                w = f if w is None else w * f
            vals, inside = corner([c + b if b else c for c, b in zip(lo, bits)])
            term = _where(inside, vals * w, 0.0)
            out = term if out is None else out + term
    return out.to(input.dtype) if low else out
