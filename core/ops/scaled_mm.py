"""``scaled_mm`` (``F.scaled_mm``, torch's ``_scaled_mm_v2``): the float8 GEMM with decoding scales, and the
enums naming its scaling recipes and scale layouts (``F.ScalingType``, ``F.SwizzleType``).

Checks with torch's messages, the output's allocation and the one launch of ``triton_kernels/scaled_mm.py``.
The recipes built are TensorWise (one float32 scale per operand) and RowWise (float32 scale_a (M, 1) and
scale_b (1, N)); the block-scaled recipes (BlockWise1x16 NVFP4, BlockWise1x32 MX, and the 1x128/128x128
DeepSeek tiles) and the swizzled scale layouts raise NotImplementedError naming what is missing.
"""
from __future__ import annotations

import enum

from ...runtime import dtype as dt
from ...triton_kernels import float8 as _f8
from ...triton_kernels import scaled_mm as _k
from ..tensor_base import TensorBase
from . import float8_bytes


class ScalingType(enum.Enum):
    """How a scaled_mm operand was scaled (torch.nn.functional.ScalingType, values as torch's)."""
    TensorWise = 0
    RowWise = 1
    BlockWise1x16 = 2
    BlockWise1x32 = 3
    BlockWise1x128 = 4
    BlockWise128x128 = 5


class SwizzleType(enum.Enum):
    """The layout of a scaled_mm scale tensor (torch.nn.functional.SwizzleType, values as torch's)."""
    NO_SWIZZLE = 0
    SWIZZLE_32_4_4 = 1


_BIAS_DTYPES = (dt.float32, dt.bfloat16, dt.float16)


def _single(x, what: str):
    """torch's _expand_single_value: a list of one element stands for the element."""
    if isinstance(x, (list, tuple)):
        if len(x) != 1:
            raise NotImplementedError(f"scaled_mm(): {what} as a list of {len(x)} entries (the multi-level scales "
                                      "of the NVFP4 recipe) is not supported; TensorWise and RowWise take one")
        return x[0]
    return x


def _scaling_error(mat_a, scale_a, mat_b, scale_b, M, N) -> ValueError:
    def shape(t):
        return list(t.shape) if isinstance(t, TensorBase) else "?"

    def stride(t):
        return list(t.stride()) if isinstance(t, TensorBase) else "?"

    def name(t):
        return t.dtype.type_name if isinstance(t, TensorBase) else type(t).__name__
    return ValueError(
        "Invalid scaling configuration.\n"
        "- For TensorWise scaling, a and b should be float8, scales should be float and singletons.\n"
        f"- For RowWise scaling, a and b should be float8, scales should be float, scale_a should be ({M}, 1) and "
        f"scale_b should be (1, {N}), and both should be contiguous.\n"
        f"Got mat_a.dtype()={name(mat_a)}, scale_a.dtype()={name(scale_a)}, scale_a.size()={shape(scale_a)}, "
        f"scale_a.stride()={stride(scale_a)}, mat_b.dtype()={name(mat_b)}, scale_b.dtype()={name(scale_b)}, "
        f"scale_b.size()={shape(scale_b)} and scale_b.stride()={stride(scale_b)}")


def scaled_mm(mat_a, mat_b, scale_a, scale_recipe_a, scale_b, scale_recipe_b, swizzle_a=None, swizzle_b=None,
              bias=None, output_dtype=dt.bfloat16, contraction_dim=(), use_fast_accum=False):
    """torch.nn.functional.scaled_mm: ``(mat_a @ mat_b) * scale_a * scale_b + bias`` in ``output_dtype``
    (None: mat_a's dtype), float8 operands upcast in the kernel and summed in float32."""
    scale_a, scale_b = _single(scale_a, "scale_a"), _single(scale_b, "scale_b")
    recipe_a, recipe_b = _single(scale_recipe_a, "scale_recipe_a"), _single(scale_recipe_b, "scale_recipe_b")
    for t, name in ((mat_a, "mat_a"), (mat_b, "mat_b")):
        if not isinstance(t, TensorBase):
            raise TypeError(f"scaled_mm(): argument '{name}' must be Tensor, not {type(t).__name__}")
        if t.ndim != 2:
            raise ValueError(f"{name} must be a matrix")
    for r, name in ((recipe_a, "scale_recipe_a"), (recipe_b, "scale_recipe_b")):
        if not isinstance(r, ScalingType):
            raise TypeError(f"scaled_mm(): {name} must be a ScalingType, not {type(r).__name__}")
    (M, K), (K2, N) = mat_a.shape, mat_b.shape
    if K != K2:
        raise ValueError(f"mat_a and mat_b shapes cannot be multiplied ({M}x{K} and {K2}x{N})")
    for s in (_single(swizzle_a, "swizzle_a"), _single(swizzle_b, "swizzle_b")):
        if s is not None and s is not SwizzleType.NO_SWIZZLE:
            raise NotImplementedError(f"scaled_mm(): {s} scale layouts belong to the block-scaled recipes, which "
                                      "tritensor does not build")
    if tuple(contraction_dim) not in ((), (1, 0)):
        raise NotImplementedError(f"scaled_mm(): contraction_dim={tuple(contraction_dim)} is not supported: mat_a's "
                                  "dim 1 contracts with mat_b's dim 0")
    blocked = [r for r in (recipe_a, recipe_b) if r not in (ScalingType.TensorWise, ScalingType.RowWise)]
    if blocked:
        raise NotImplementedError(f"scaled_mm(): the block-scaled recipe {blocked[0]} is not built (tritensor has "
                                  "the TensorWise and RowWise recipes)")
    ok = (mat_a.dtype in dt.FLOAT8 and mat_b.dtype in dt.FLOAT8 and recipe_a is recipe_b
          and all(isinstance(s, TensorBase) and s.dtype is dt.float32 for s in (scale_a, scale_b)))
    if ok and recipe_a is ScalingType.TensorWise:
        ok = scale_a.numel() == 1 and scale_b.numel() == 1
    elif ok:
        ok = (tuple(scale_a.shape) == (M, 1) and tuple(scale_b.shape) == (1, N) and scale_a.is_contiguous()
              and scale_b.is_contiguous())
    if not ok:
        raise _scaling_error(mat_a, scale_a, mat_b, scale_b, M, N)
    out_dtype = mat_a.dtype if output_dtype is None else dt.to_dtype(output_dtype, "output_dtype")
    if not out_dtype.is_floating_point and out_dtype is not dt.int32:
        raise ValueError(f"scaled_mm(): output_dtype must be a floating dtype, got {out_dtype}")
    if bias is not None:
        if not isinstance(bias, TensorBase):
            raise TypeError(f"scaled_mm(): argument 'bias' must be Tensor, not {type(bias).__name__}")
        if bias.numel() != N or bias.ndim != 1:
            raise ValueError(f"Bias must be size {N} but got {bias.numel()}")
        if bias.dtype not in _BIAS_DTYPES:
            raise ValueError(f"Bias must be Float32 or BFloat16 or Half, but got {bias.dtype.type_name}")
    devs = {t.device for t in (mat_a, mat_b, scale_a, scale_b) + ((bias,) if bias is not None else ())}
    if len(devs) > 1:
        raise RuntimeError(f"scaled_mm(): expected all tensors on one device, got {sorted(map(str, devs))}")
    out = TensorBase._empty((M, N), out_dtype, mat_a.device)  # (K = 0: the kernel's empty sum, scaled, plus bias)
    _k.scaled_mm(float8_bytes(out), float8_bytes(mat_a), float8_bytes(mat_b), scale_a.contiguous(),
                 scale_b.contiguous(), bias, _f8.FORMATS[mat_a.dtype.name], _f8.FORMATS[mat_b.dtype.name],
                 _f8.FORMATS.get(out_dtype.name, 0), recipe_a is ScalingType.RowWise)
    return out
