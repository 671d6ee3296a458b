"""Gram-Schmidt orthogonalisation of the columns of small matrices, in place.

Why it exists: PowerSGD (``comm/algorithms/ddp_comm_hooks/powerSGD_hook.py``) orthogonalises
its low-rank factor ``P`` (``n x r``, ``r`` small: 1 to a few dozen) once per compressed
matrix per step. It is PyTorch's ``_orthogonalize_gram_schmidt``, column by column::

    for i in range(r):
        col_i /= norm(col_i) + eps            # eps == 0: plain normalisation
        for j in range(i + 1, r):
            col_j -= dot(col_i, col_j) * col_i

(modified Gram-Schmidt: each later column is updated with the already-normalised column).
One program per matrix (a batch of same-shaped matrices is one launch); each program walks its
rows in blocks, so ``n`` is unbounded. Arithmetic is fp32 for fp32/fp16/bf16 inputs and fp64
for fp64 inputs; results are cast on store.

A column whose norm is exactly 0 with ``eps == 0`` would divide by zero: it is set to zeros
instead, the recovery PyTorch's hook intends (its ``except ZeroDivisionError`` branch), so no
NaN reaches the gradients; pass a small ``eps`` (1e-8) to keep near-dependent columns finite.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.dtype_policy import FLOAT_COMPUTE_NAME
from ..runtime.launch import launch
from ._common import f64_bits, load_f64_scalar, next_pow2, per_mode

__all__ = ["gram_schmidt_", "DTYPES"]

ROW_BLOCK = per_mode(4096, 1024)
DTYPES = ("float32", "float64", "float16", "bfloat16")


@triton.jit
def _dot_cols(a, ci, cj, n_rows, stride_r, stride_c, COMPUTE: tl.constexpr, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], COMPUTE)
    for start in range(0, n_rows, BLOCK):
        rows = start + tl.arange(0, BLOCK)
        m = rows < n_rows
        x = tl.load(a + rows * stride_r + ci * stride_c, mask=m, other=0).to(COMPUTE)
        y = tl.load(a + rows * stride_r + cj * stride_c, mask=m, other=0).to(COMPUTE)
        acc += x * y
    return tl.sum(acc, 0)


@triton.jit(do_not_specialize=["eps_bits"])
def _gram_schmidt_kernel(a, n_rows, n_cols, stride_b, stride_r, stride_c, eps_bits,
                         COMPUTE: tl.constexpr, BLOCK: tl.constexpr):
    a = a + tl.program_id(0).to(tl.int64) * stride_b
    eps = load_f64_scalar(eps_bits).to(COMPUTE)
    for i in range(0, n_cols):
        norm = tl.sqrt(_dot_cols(a, i, i, n_rows, stride_r, stride_c, COMPUTE, BLOCK))
        denom = norm + eps
        scale = tl.where(denom == 0, 0.0, 1.0 / tl.where(denom == 0, 1.0, denom)).to(COMPUTE)
        for start in range(0, n_rows, BLOCK):
            rows = start + tl.arange(0, BLOCK)
            m = rows < n_rows
            p = a + rows * stride_r + i * stride_c
            tl.store(p, (tl.load(p, mask=m, other=0).to(COMPUTE) * scale).to(a.dtype.element_ty), mask=m)
        for j in range(i + 1, n_cols):
            d = _dot_cols(a, i, j, n_rows, stride_r, stride_c, COMPUTE, BLOCK)
            for start in range(0, n_rows, BLOCK):
                rows = start + tl.arange(0, BLOCK)
                m = rows < n_rows
                pi = a + rows * stride_r + i * stride_c
                pj = a + rows * stride_r + j * stride_c
                ci = tl.load(pi, mask=m, other=0).to(COMPUTE)
                cj = tl.load(pj, mask=m, other=0).to(COMPUTE)
                tl.store(pj, (cj - d * ci).to(a.dtype.element_ty), mask=m)


def gram_schmidt_(a, batch: int, n_rows: int, n_cols: int, strides: tuple, eps: float) -> None:
    """The launcher: ``a`` (a kernel buffer) holds ``batch`` matrices ``n_rows x n_cols`` laid
    out by ``strides`` = (batch, row, column) strides in elements."""
    if batch == 0 or n_rows == 0 or n_cols == 0:
        return
    compute = getattr(tl, FLOAT_COMPUTE_NAME[a.dtype.name])
    block = min(ROW_BLOCK, next_pow2(n_rows))
    launch(_gram_schmidt_kernel, (batch,), a, n_rows, n_cols, strides[0], strides[1], strides[2], f64_bits(eps),
           COMPUTE=compute, BLOCK=block, num_warps=4)
