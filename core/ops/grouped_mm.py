"""``grouped_mm`` (``F.grouped_mm``, torch's ``_grouped_mm``): the argument checks with torch's
messages, the result's allocation and the one launch of ``triton_kernels/grouped_mm.py``.

The operands' ranks choose the grouping: 2-D x 3-D cuts A's rows by ``offs``; 3-D x 3-D is a
batch; 2-D x 2-D cuts the shared K by ``offs`` (a (G, M, N) result, one product per group);
3-D x 2-D cuts B's columns. ``offs`` holds each group's end (int32, cumulative), as torch's.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...backends import cuda as _backends
from ...runtime import dtype as dt
from ...triton_kernels import grouped_mm as _k
from ..tensor_base import TensorBase

if TYPE_CHECKING:
    from ..tensor import Tensor

_FLOATS = (dt.float32, dt.float64, dt.float16, dt.bfloat16)


def _check(mat_a, mat_b, offs, bias, out_dtype) -> None:
    for t, name in ((mat_a, "mat_a"), (mat_b, "mat_b")):
        if not isinstance(t, TensorBase):
            raise TypeError(f"grouped_mm(): argument '{name}' must be Tensor, not {type(t).__name__}")
        if t.ndim not in (2, 3):
            raise RuntimeError(f"{name} must be 2d or 3d, got {t.ndim}d")
        if t.dtype not in _FLOATS:
            raise RuntimeError(f"grouped_mm(): expected a floating point {name}, got {t.dtype.name}")
    if mat_a.dtype is not mat_b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {mat_a.dtype.name} != "
                           f"{mat_b.dtype.name}")
    if mat_a.device != mat_b.device:
        raise RuntimeError(f"grouped_mm(): mat_a is on {mat_a.device} but mat_b is on {mat_b.device}")
    if bias is not None:
        raise RuntimeError("Bias not supported yet")
    if out_dtype is not None and out_dtype is not mat_a.dtype:
        raise RuntimeError("Grouped gemm output dtype must match `mat_a` dtype")
    both_3d = mat_a.ndim == 3 and mat_b.ndim == 3
    if (offs is None) != both_3d:
        raise RuntimeError("Have to provide offsets if there is a 2d matrix, or no offset if both matrices are 3d")
    if offs is not None:
        if not isinstance(offs, TensorBase):
            raise TypeError(f"grouped_mm(): argument 'offs' must be Tensor, not {type(offs).__name__}")
        if offs.dtype is not dt.int32:
            raise RuntimeError("Offsets have to be int32")
        if offs.ndim != 1:
            raise RuntimeError(f"offs has to be 1D, got {offs.ndim}d")
        if offs.device != mat_a.device:
            raise RuntimeError(f"grouped_mm(): offs is on {offs.device} but mat_a is on {mat_a.device}")
    if mat_a.shape[-1] != mat_b.shape[-2] and not (mat_a.ndim == 2 and mat_b.ndim == 2):
        raise RuntimeError(f"contraction dimension of mat_a and mat_b must match, got {mat_a.shape[-1]} and "
                           f"{mat_b.shape[-2]}")
    if mat_a.ndim == 2 and mat_b.ndim == 2 and mat_a.shape[1] != mat_b.shape[0]:
        raise RuntimeError(f"contraction dimension of mat_a and mat_b must match, got {mat_a.shape[1]} and "
                           f"{mat_b.shape[0]}")
    if both_3d and mat_a.shape[0] != mat_b.shape[0]:
        raise RuntimeError(f"batch size of mat_a and mat_b must match, got {mat_a.shape[0]} and {mat_b.shape[0]}")


def _check_host_offs(offs, extent: int, groups: int, what: str) -> None:
    """One offset per group; offsets on the host are checked here (non-decreasing, within the cut
    extent); on a device they are read by the kernel, which clamps them to the extent, as torch
    reads them unchecked."""
    if offs.shape[0] != groups:
        raise RuntimeError(f"offs must have one entry per group ({groups}), got {offs.shape[0]}")
    if offs.device.type != "cpu":
        return
    o = offs._to_host_array().astype("int64")
    if groups and ((o[0] < 0) or (o[1:] < o[:-1]).any() or o[-1] > extent):
        raise RuntimeError(f"grouped_mm(): offs must be non-decreasing group ends within the {extent} {what}, "
                           f"got {o.tolist()}")


def grouped_mm(mat_a, mat_b, *, offs=None, bias=None, out_dtype=None) -> Tensor:
    """The grouped product of ``mat_a`` and ``mat_b`` (module docstring), in their dtype."""
    _check(mat_a, mat_b, offs, bias, out_dtype)
    A, B = mat_a, mat_b
    if A.ndim == 3 and B.ndim == 3:
        G, M, K = A.shape
        N = B.shape[2]
        out = TensorBase._empty((G, M, N), A.dtype, A.device)
        mode, ga, gb, gc = 0, A.stride(0), B.stride(0), out.stride(0)
    elif A.ndim == 2 and B.ndim == 3:
        (M, K), (G, N) = A.shape, (B.shape[0], B.shape[2])
        _check_host_offs(offs, M, G, "rows of mat_a")
        out = TensorBase._empty((M, N), A.dtype, A.device)
        out.zero_()  # rows past the last group's end belong to none
        mode, ga, gb, gc = 1, 0, B.stride(0), 0
    elif A.ndim == 2 and B.ndim == 2:
        (M, K), N, G = A.shape, B.shape[1], offs.shape[0]
        _check_host_offs(offs, K, G, "columns of mat_a")
        out = TensorBase._empty((G, M, N), A.dtype, A.device)
        mode, ga, gb, gc = 2, 0, 0, out.stride(0)
    else:
        (G, M, K), N = A.shape, B.shape[1]
        _check_host_offs(offs, N, G, "columns of mat_b")
        out = TensorBase._empty((M, N), A.dtype, A.device)
        out.zero_()  # columns past the last group's end belong to none
        mode, ga, gb, gc = 3, A.stride(0), 0, 0
    _k.grouped_mm(out, A, B, offs.contiguous() if offs is not None else None, mode, M, N, K, G, ga, gb, gc,
                  allow_tf32=_backends.matmul.allow_tf32)
    return out
