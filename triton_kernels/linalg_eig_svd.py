"""Symmetric eigendecomposition and singular value decomposition of small batched matrices by
cyclic Jacobi sweeps.

Why it exists: ``tritensor.linalg.eigh``/``svd`` (and what is built on them: ``pinv``,
``matrix_rank``, ``cond``, the spectral norms) run on the GPU path without NumPy or a vendor
library, and Jacobi's method is the one that fits a single program per matrix: every rotation is a
few masked whole-block operations on the matrix held in registers, needs no shifts or deflation
logic, and is accurate to the last bits (it converges quadratically once the off-diagonal is small).

* ``eigh``: two-sided cyclic Jacobi (Golub and Van Loan, Algorithm 8.5.2) on the symmetric matrix
  built from the triangle ``UPLO`` names, accumulating the rotations into V.
* ``svd``: one-sided Jacobi (Hestenes) on the columns of an M x N matrix with M >= N (the core
  entry transposes a wide one): columns p, q are rotated until orthogonal; then the singular
  values are the column norms, U the normalised columns, V the accumulated rotations.

Sweeps stop when a sweep rotates nothing (|a_pq| or the columns' cosine below the dtype's
epsilon), or after :data:`MAX_SWEEPS`. Results are sorted in the kernel (eigenvalues ascending,
singular values descending, as torch) by ranking the values and storing each vector at its rank.
Both sides are bounded by :data:`MAX_SIDE` (128), as the factorizations in ``linalg_factor.py``.
A column of U whose singular value is negligible (at most the largest times N epsilon) is stored
as zeros; the core entry completes those columns (the last ones: they are sorted) to an
orthonormal basis with a Householder QR, as torch's U is orthonormal for every input.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import launch
from ._common import next_pow2

__all__ = ["MAX_SIDE", "MAX_SWEEPS", "eigh", "svd"]

MAX_SIDE = 128


def _warps(*sides) -> int:
    """More warps for bigger register blocks, so a 128 x 128 fp64 block is not spilled per thread."""
    b = max(sides)
    return 4 if b <= 32 else 8 if b <= 64 else 16
MAX_SWEEPS = 30
_EPS = {"float32": 1.1920928955078125e-07, "float64": 2.220446049250313e-16}


@triton.jit
def _eigh_kernel(a, w, v, N, LOWER: tl.constexpr, VECTORS: tl.constexpr, EPS: tl.constexpr, SWEEPS: tl.constexpr,
                 BN: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    a += b * N * N
    rows = tl.arange(0, BN)
    cols = tl.arange(0, BN)
    inside = (rows[:, None] < N) & (cols[None, :] < N)
    direct = tl.load(a + rows[:, None] * N + cols[None, :], mask=inside, other=0)
    mirrored = tl.load(a + cols[None, :] * N + rows[:, None], mask=inside, other=0)
    if LOWER:
        A = tl.where(rows[:, None] >= cols[None, :], direct, mirrored)
    else:
        A = tl.where(rows[:, None] <= cols[None, :], direct, mirrored)
    V = tl.where((rows[:, None] == cols[None, :]) & inside, 1, 0).to(A.dtype)
    sweep = 0
    rotated = 1
    while (sweep < SWEEPS) & (rotated > 0):
        rotated = 0
        for p in range(0, N - 1):
            for q in range(p + 1, N):
                row_p = tl.sum(tl.where(rows[:, None] == p, A, 0), axis=0)
                row_q = tl.sum(tl.where(rows[:, None] == q, A, 0), axis=0)
                a_pp = tl.sum(tl.where(cols == p, row_p, 0), 0)
                a_pq = tl.sum(tl.where(cols == q, row_p, 0), 0)
                a_qq = tl.sum(tl.where(cols == q, row_q, 0), 0)
                small = tl.abs(a_pq) <= EPS * tl.sqrt(tl.abs(a_pp * a_qq))
                small = small | (a_pq == 0)
                tau = (a_qq - a_pp) / (2 * tl.where(small, 1, a_pq))
                t = tl.where(tau >= 0, 1.0, -1.0) / (tl.abs(tau) + tl.sqrt(1 + tau * tau))
                c = 1 / tl.sqrt(1 + t * t)
                s = t * c
                c = tl.where(small, 1, c)
                s = tl.where(small, 0, s)
                rotated += tl.where(small, 0, 1)
                A = tl.where(rows[:, None] == p, (c * row_p - s * row_q)[None, :],
                             tl.where(rows[:, None] == q, (s * row_p + c * row_q)[None, :], A))
                col_p = tl.sum(tl.where(cols[None, :] == p, A, 0), axis=1)
                col_q = tl.sum(tl.where(cols[None, :] == q, A, 0), axis=1)
                A = tl.where(cols[None, :] == p, (c * col_p - s * col_q)[:, None],
                             tl.where(cols[None, :] == q, (s * col_p + c * col_q)[:, None], A))
                if VECTORS:
                    v_p = tl.sum(tl.where(cols[None, :] == p, V, 0), axis=1)
                    v_q = tl.sum(tl.where(cols[None, :] == q, V, 0), axis=1)
                    V = tl.where(cols[None, :] == p, (c * v_p - s * v_q)[:, None],
                                 tl.where(cols[None, :] == q, (s * v_p + c * v_q)[:, None], V))
        sweep += 1
    vals = tl.sum(tl.where(rows[:, None] == cols[None, :], A, 0), axis=1)
    # rank of value j: how many valid values come before it (ascending, ties by index)
    before = ((vals[:, None] < vals[None, :]) | ((vals[:, None] == vals[None, :]) & (rows[:, None] < cols[None, :])))
    rank = tl.sum(tl.where(before & (rows[:, None] < N), 1, 0), axis=0)
    tl.store(w + b * N + rank, vals, mask=cols < N)
    if VECTORS:
        tl.store(v + b * N * N + rows[:, None] * N + rank[None, :], V, mask=inside)


@triton.jit
def _svd_kernel(a, u, s, v, M, N, VECTORS: tl.constexpr, EPS: tl.constexpr, SWEEPS: tl.constexpr,
                BM: tl.constexpr, BN: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    vrows = tl.arange(0, BN)
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    U = tl.load(a + b * M * N + rows[:, None] * N + cols[None, :], mask=inside, other=0)
    v_inside = (vrows[:, None] < N) & (cols[None, :] < N)
    V = tl.where((vrows[:, None] == cols[None, :]) & v_inside, 1, 0).to(U.dtype)
    sweep = 0
    rotated = 1
    while (sweep < SWEEPS) & (rotated > 0):
        rotated = 0
        for p in range(0, N - 1):
            for q in range(p + 1, N):
                u_p = tl.sum(tl.where(cols[None, :] == p, U, 0), axis=1)
                u_q = tl.sum(tl.where(cols[None, :] == q, U, 0), axis=1)
                alpha = tl.sum(u_p * u_p, 0)
                beta = tl.sum(u_q * u_q, 0)
                gamma = tl.sum(u_p * u_q, 0)
                small = (tl.abs(gamma) <= EPS * tl.sqrt(alpha * beta)) | (gamma == 0)
                zeta = (beta - alpha) / (2 * tl.where(small, 1, gamma))
                t = tl.where(zeta >= 0, 1.0, -1.0) / (tl.abs(zeta) + tl.sqrt(1 + zeta * zeta))
                c = 1 / tl.sqrt(1 + t * t)
                sn = c * t
                c = tl.where(small, 1, c)
                sn = tl.where(small, 0, sn)
                rotated += tl.where(small, 0, 1)
                U = tl.where(cols[None, :] == p, (c * u_p - sn * u_q)[:, None],
                             tl.where(cols[None, :] == q, (sn * u_p + c * u_q)[:, None], U))
                v_p = tl.sum(tl.where(cols[None, :] == p, V, 0), axis=1)
                v_q = tl.sum(tl.where(cols[None, :] == q, V, 0), axis=1)
                V = tl.where(cols[None, :] == p, (c * v_p - sn * v_q)[:, None],
                             tl.where(cols[None, :] == q, (sn * v_p + c * v_q)[:, None], V))
        sweep += 1
    sig = tl.sqrt(tl.sum(U * U, axis=0))
    after = ((sig[:, None] > sig[None, :]) | ((sig[:, None] == sig[None, :]) & (vrows[:, None] < cols[None, :])))
    rank = tl.sum(tl.where(after & (vrows[:, None] < N), 1, 0), axis=0)
    tl.store(s + b * N + rank, sig, mask=cols < N)
    if VECTORS:
        # a column whose singular value is (relative to the largest) at rounding level holds no
        # direction: it is left zero for the core entry to complete to an orthonormal basis
        dead = sig <= tl.max(sig, 0) * EPS * N
        U = tl.where(dead[None, :], 0, U / tl.where(dead, 1, sig)[None, :])
        tl.store(u + b * M * N + rows[:, None] * N + rank[None, :], U, mask=inside)
        tl.store(v + b * N * N + vrows[:, None] * N + rank[None, :], V, mask=v_inside)


def eigh(a, w, v, batch: int, n: int, lower: bool, vectors: bool) -> None:
    """Eigenvalues ``w`` (batch, n) ascending and, if ``vectors``, eigenvectors ``v`` (batch, n, n)
    as columns, of the symmetric matrices whose ``lower`` (else upper) triangle ``a`` holds."""
    if batch == 0 or n == 0:
        return
    launch(_eigh_kernel, (batch,), a, w, v, n, LOWER=lower, VECTORS=vectors, EPS=_EPS[a.dtype.name],
           SWEEPS=MAX_SWEEPS, BN=next_pow2(n), num_warps=_warps(next_pow2(n)))


def svd(a, u, s, v, batch: int, m: int, n: int, vectors: bool) -> None:
    """For ``a`` (batch, m, n) contiguous with m >= n: ``s`` (batch, n) descending and, if
    ``vectors``, ``u`` (batch, m, n) and ``v`` (batch, n, n) (V, not V^T) with a = u diag(s) v^T."""
    if batch == 0 or n == 0:
        return
    launch(_svd_kernel, (batch,), a, u, s, v, m, n, VECTORS=vectors, EPS=_EPS[a.dtype.name], SWEEPS=MAX_SWEEPS,
           BM=next_pow2(m), BN=next_pow2(n), num_warps=_warps(next_pow2(m), next_pow2(n)))
