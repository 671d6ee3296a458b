"""Multi-tensor ("foreach") kernels: one launch over many tensors of one dtype and device.

As amp's unscale kernel (``amp.py``), a launch gets a *block table* (``AddressTable``): an int64 array of three
columns per program, (address of the tensor's first element, the program's block start, the
tensor's element count). ``norm_partials`` stores one partial per program (sum of squares, sum of
|x|^p, count of non-zeros or max |x|, in fp32; fp64 for fp64 tensors), which the caller reduces
on the device: ``clip_grad_norm_`` gets the total norm of all its gradients with one launch per
dtype and no host synchronisation. ``scale_`` multiplies every block in place by a one-element
device tensor (the clip coefficient), again one launch.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.dtype_policy import FLOAT_COMPUTE_NAME
from ..runtime.launch import AddressTable, launch
from ._common import per_mode

BLOCK = per_mode(8192, 2048)


@triton.jit
def _row(table, DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    addr = tl.load(table + pid * 3)
    start = tl.load(table + pid * 3 + 1)
    n = tl.load(table + pid * 3 + 2)
    offs = start + tl.arange(0, BLOCK).to(tl.int64)
    return pid, addr.to(tl.pointer_type(DTYPE)), offs, offs < n


@triton.jit
def _norm_partials_kernel(table, partials, p: tl.float64, KIND: tl.constexpr, DTYPE: tl.constexpr, COMPUTE: tl.constexpr,
                          BLOCK: tl.constexpr):
    pid, ptr, offs, mask = _row(table, DTYPE, BLOCK)
    a = tl.abs(tl.load(ptr + offs, mask=mask, other=0).to(COMPUTE))
    if KIND == "inf":
        r = tl.max(a, axis=0)  # masked lanes are 0, below any |x|
    elif KIND == "zero":
        r = tl.sum(tl.where(a != 0, 1.0, 0.0).to(COMPUTE), axis=0)
    elif KIND == "one":
        r = tl.sum(a, axis=0)
    elif KIND == "two":
        r = tl.sum(a * a, axis=0)
    else:
        tl.static_assert(KIND == "p")
        r = tl.sum(tl.where(a > 0, tl.exp2(p.to(COMPUTE) * tl.log2(a)), 0.0), axis=0)  # p in fp64 for fp64
    # NaN is kept (max drops it, sums keep it): a non-finite gradient must show in the norm.
    bad = tl.sum(tl.where(a != a, 1, 0), axis=0)
    r = tl.where(bad > 0, float("nan"), r)
    tl.store(partials + pid, r)


@triton.jit
def _scale_kernel(table, coef, DTYPE: tl.constexpr, COMPUTE: tl.constexpr, BLOCK: tl.constexpr):
    pid, ptr, offs, mask = _row(table, DTYPE, BLOCK)
    k = tl.load(coef).to(COMPUTE)
    v = tl.load(ptr + offs, mask=mask, other=0).to(COMPUTE)
    tl.store(ptr + offs, (v * k).to(DTYPE), mask=mask)


def blocks(tensors) -> int:
    """How many programs (and partials) a launch over ``tensors`` has."""
    return len(AddressTable(tensors, BLOCK))


def norm_partials(tensors, partials, kind: str, p: float, dtype_name: str) -> None:
    """partials[i] = the block-i partial of ``kind`` ("two", "one", "inf", "zero", "p" with ``p``)
    over the contiguous ``tensors`` (one dtype and device); ``partials`` holds :func:`blocks` values."""
    table = AddressTable(tensors, BLOCK)
    n_blocks = len(table)
    if n_blocks == 0:
        return
    compute = getattr(tl, FLOAT_COMPUTE_NAME[dtype_name])
    launch(_norm_partials_kernel, (n_blocks,), table, partials, float(p), KIND=kind, DTYPE=getattr(tl, dtype_name),
           COMPUTE=compute, BLOCK=BLOCK)


def scale_(tensors, coef, dtype_name: str) -> None:
    """Every contiguous tensor of ``tensors`` (one dtype and device), in place: x *= coef[0]."""
    table = AddressTable(tensors, BLOCK)
    n_blocks = len(table)
    if n_blocks == 0:
        return
    compute = getattr(tl, FLOAT_COMPUTE_NAME[dtype_name])
    launch(_scale_kernel, (n_blocks,), table, coef, DTYPE=getattr(tl, dtype_name), COMPUTE=compute, BLOCK=BLOCK)
