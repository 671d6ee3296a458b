"""Fix-ups that make Triton's interpreter compute what the GPU computes (CPU mode).

CPU mode promises the same kernels with the same bytes as a GPU. Where Triton 3.9's interpreter
and the compiled kernel disagree, a test can pass on CPU and fail on a GPU; each fix-up here
makes the interpreter do what the hardware does. Registered in ``runtime/interpreter.py``;
checked in ``tests/test_interpreter.py``.

* **bf16 casts**: the interpreter converts fp32 -> bf16 by truncation, mishandles subnormals and
  routes other bf16 casts through NumPy on the raw uint16 bits. :func:`fix_bf16_casts` routes
  every conversion touching bf16 through ml_dtypes, which rounds to nearest even like the GPU's
  ``cvt.rn.bf16.f32``.
* **typed scalars**: a compiled kernel receives a Python float as an fp32 value (an int as i32,
  or i64 when it does not fit), and a parameter annotated with a type (``lr: tl.float64``) as that
  type. The interpreter passed Python floats through untyped, so they combined with an fp64
  tensor at full double precision, and with an fp16 tensor in fp16, where the GPU computes with
  an fp32 value. fp64 optimizer steps passed at rtol 1e-10 on CPU and missed it by 2e-8 on the
  H100. :func:`typed_scalars` types a float argument fp32; :func:`scalar_arg` (which the
  interpreter's binder calls, ``interpreter_speed.bind_once``) honours annotations. A kernel that
  needs an fp64 scalar annotates the parameter ``tl.float64``.
* **TMA store granularity**: a TMA descriptor store writes the innermost dimension in whole
  16-byte chunks: when that dimension's extent is not a multiple of 16 bytes, the hardware
  overwrites the elements after it up to the next 16-byte boundary (triton-lang/triton#11583;
  the H100 wrote past a matmul's ragged N into the padding of the output's rows). The interpreter
  clipped exactly; :func:`tma_store_granularity` writes what the hardware writes, so a kernel
  that stores a ragged edge through a descriptor corrupts the neighbouring bytes in CPU mode too.

One switch models what no fix-up can: the GPU runs a grid's programs in no fixed order, the
interpreter in order. :data:`REVERSE_GRID` (tests set it) runs them last first, so a kernel whose
result depends on program order gives a different answer.
"""
from __future__ import annotations

import numpy as np

from .interpreter import fixup, replace

REVERSE_GRID = False  # run a launch's programs last first (a probe for order-dependent kernels)

_SCALAR_NP = {"fp16": np.float16, "fp32": np.float32, "fp64": np.float64, "u1": np.bool_,
              "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
              "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64}
SCALAR_TYPES = frozenset(_SCALAR_NP)  # the annotations a scalar parameter may carry


def scalar_arg(value, annotation: str):
    """A Python number as the compiled kernel receives it in a parameter annotated ``annotation``
    (a canonical type name: "fp64", "i64" ...): a one-element interpreter tensor of that type."""
    import triton.language as tl
    from triton.runtime import interpreter as interp

    ty = tl.str_to_ty(annotation, None)
    return tl.tensor(interp.TensorHandle(np.array([value], dtype=_SCALAR_NP[annotation]), ty), ty)


@fixup("bf16_casts")
def fix_bf16_casts():
    """Make the interpreter's bf16 conversions round like the GPU (and ml_dtypes) do."""
    import ml_dtypes
    import triton.language as tl
    from triton.runtime import interpreter as interp

    builder = interp.InterpreterBuilder
    orig_cast, orig_fp_to_fp = builder.cast_impl, builder.create_fp_to_fp

    def _bf16_cast(src, dst_type):
        s, d = src.dtype.scalar, dst_type.scalar
        data = src.data.view(ml_dtypes.bfloat16) if s == tl.bfloat16 else src.data
        if d == tl.bfloat16:
            return interp.TensorHandle(data.astype(ml_dtypes.bfloat16).view(np.uint16), d)
        return interp.TensorHandle(data.astype(interp._get_np_dtype(dst_type)), d)

    def cast_impl(self, src, dst_type):
        if tl.bfloat16 in (src.dtype.scalar, dst_type.scalar):
            return _bf16_cast(src, dst_type)
        return orig_cast(self, src, dst_type)

    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        if tl.bfloat16 in (src.dtype.scalar, dst_type.scalar):
            return _bf16_cast(src, dst_type)
        return orig_fp_to_fp(self, src, dst_type, rounding_mode)

    return replace(builder, cast_impl=cast_impl, create_fp_to_fp=create_fp_to_fp)


@fixup("typed_scalars")
def typed_scalars():
    """A float argument reaches the kernel as an fp32 value, as the compiled kernel gets it."""
    from triton.runtime import interpreter as interp

    stock = interp._implicit_cvt

    def _implicit_cvt(arg):
        if type(arg) is float:
            return scalar_arg(arg, "fp32")
        return stock(arg)  # stock converts tuples item by item through the module's name: this one

    return replace(interp, _implicit_cvt=_implicit_cvt)


@fixup("tma_store_granularity")
def tma_store_granularity():
    """A descriptor store writes the innermost dimension in whole 16-byte chunks, as TMA does."""
    from triton.runtime import interpreter as interp

    builder = interp.InterpreterBuilder
    stock = builder.create_descriptor_store

    def create_descriptor_store(self, desc, value, indices):
        itemsize = desc.base.dtype.element_ty.primitive_bitwidth // 8
        inner = int(desc.shape[-1].data.item())
        written = -(-inner * itemsize // 16) * 16 // itemsize  # up to the next 16-byte boundary
        if written != inner:
            last = desc.shape[-1]
            shape = list(desc.shape[:-1]) + [interp.TensorHandle(np.array([written], last.data.dtype), last.dtype)]
            desc = interp.TensorDescHandle(desc.base, shape, desc.strides, desc.block_shape, desc.padding,
                                           desc.round_f32_to_tf32)
        return stock(self, desc, value, indices)

    return replace(builder, create_descriptor_store=create_descriptor_store)
