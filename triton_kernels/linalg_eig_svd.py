"""Symmetric eigendecomposition and singular value decomposition of small batched matrices by
cyclic Jacobi sweeps.

Why it exists: the spectral half of ``tritensor.linalg`` (``eigh``/``svd`` and what is built on them:
``pinv``, ``matrix_rank``, ``cond``, the spectral norms) runs on the GPU path without NumPy or a
vendor library, and Jacobi's method fits a single program per matrix: it needs no shifts or
deflation logic and is accurate to the last bits (it converges quadratically once the off-diagonal
is small).

* ``eigh``: two-sided Jacobi (Golub and Van Loan, 8.5) on the symmetric matrix built from the
  triangle ``UPLO`` names: A = J^T A J, V = V J.
* ``svd``: one-sided Jacobi (Hestenes) on the columns of an M x N matrix with M >= N (the core
  entry transposes a wide one): columns are rotated pairwise until orthogonal; the singular values
  are then the column norms, U the normalised columns, V the accumulated rotations.

Both use the parallel (round-robin, "circle method") ordering: a sweep is N' - 1 rounds (N' = N
rounded up to even, a zero column standing in for the last when N is odd), each rotating N' / 2
disjoint pairs at once, the partners' columns gathered with a one-hot matrix product (``tl.dot``,
IEEE precision: no TF32), so a sweep is O(N) block steps rather than O(N^2) single rotations.
Blocks are at least 16 wide (``tl.dot``'s smallest tile).

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
    # round-robin ordering as the SVD's (below): N' / 2 disjoint rotations a round, A = J^T A J
    last = N + (N % 2) - 1
    sweep = 0
    rotated = 1
    while (sweep < SWEEPS) & (rotated > 0):
        rotated = 0
        for r in range(0, last):
            y = (2 * r - cols + last) % last
            partner = tl.where(cols < last, tl.where(y == cols, last, y), tl.where(cols == last, r, cols))
            P = (rows[:, None] == partner[None, :]).to(A.dtype)
            diag = tl.sum(tl.where(rows[:, None] == cols[None, :], A, 0), axis=0)
            d_partner = tl.sum(P * diag[:, None], axis=0)
            a_pq = tl.sum(P * A, axis=0)  # A[partner[j], j]
            first = cols < partner
            a_pp = tl.where(first, diag, d_partner)
            a_qq = tl.where(first, d_partner, diag)
            small = (tl.abs(a_pq) <= EPS * tl.sqrt(tl.abs(a_pp * a_qq))) | (a_pq == 0) | (partner == cols)
            tau = (a_qq - a_pp) / (2 * tl.where(small, 1, a_pq))
            t = tl.where(tau >= 0, 1.0, -1.0) / (tl.abs(tau) + tl.sqrt(1 + tau * tau))
            c = 1 / tl.sqrt(1 + t * t)
            sn = t * c
            c = tl.where(small, 1, c)
            sn = tl.where(small, 0, sn)
            # both columns of a pair use the first one's rotation (bit for bit: J stays orthogonal)
            c = tl.where(first, c, tl.sum(P * c[:, None], axis=0))
            sn = tl.where(first, sn, tl.sum(P * sn[:, None], axis=0))
            rotated += tl.sum(tl.where(small | (~first), 0, 1), 0)
            J = tl.where(rows[:, None] == cols[None, :], c[None, :],
                         tl.where(rows[:, None] == partner[None, :], tl.where(first, -sn, sn)[None, :], 0))
            A = tl.dot(tl.trans(J), tl.dot(A, J, input_precision="ieee"), input_precision="ieee")
            if VECTORS:
                V = tl.dot(V, J, input_precision="ieee")
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
    # round-robin ordering (the circle method): N' = N rounded up to even players (a zero column
    # stands in for the last when N is odd), N' - 1 rounds a sweep, N' / 2 disjoint pairs a round,
    # all rotated at once; a pair's columns are gathered with a one-hot product
    last = N + (N % 2) - 1
    sweep = 0
    rotated = 1
    while (sweep < SWEEPS) & (rotated > 0):
        rotated = 0
        for r in range(0, last):
            y = (2 * r - cols + last) % last
            partner = tl.where(cols < last, tl.where(y == cols, last, y), tl.where(cols == last, r, cols))
            P = (vrows[:, None] == partner[None, :]).to(U.dtype)
            Up = tl.dot(U, P, input_precision="ieee")
            Vp = tl.dot(V, P, input_precision="ieee")
            own = tl.sum(U * U, axis=0)
            other = tl.sum(Up * Up, axis=0)
            gamma = tl.sum(U * Up, axis=0)
            first = cols < partner
            alpha = tl.where(first, own, other)
            beta = tl.where(first, other, own)
            small = (tl.abs(gamma) <= EPS * tl.sqrt(alpha * beta)) | (gamma == 0) | (partner == cols)
            zeta = (beta - alpha) / (2 * tl.where(small, 1, gamma))
            t = tl.where(zeta >= 0, 1.0, -1.0) / (tl.abs(zeta) + tl.sqrt(1 + zeta * zeta))
            c = 1 / tl.sqrt(1 + t * t)
            sn = c * t
            c = tl.where(small, 1, c)
            sn = tl.where(small, 0, sn)
            rotated += tl.sum(tl.where(small, 0, 1), 0)
            U = tl.where(first[None, :], c[None, :] * U - sn[None, :] * Up, sn[None, :] * Up + c[None, :] * U)
            V = tl.where(first[None, :], c[None, :] * V - sn[None, :] * Vp, sn[None, :] * Vp + c[None, :] * V)
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
    bn = max(16, next_pow2(n + n % 2))  # tl.dot's smallest tile is 16; an odd n gets a zero player
    launch(_eigh_kernel, (batch,), a, w, v, n, LOWER=lower, VECTORS=vectors, EPS=_EPS[a.dtype.name],
           SWEEPS=MAX_SWEEPS, BN=bn, num_warps=_warps(bn))


def svd(a, u, s, v, batch: int, m: int, n: int, vectors: bool) -> None:
    """For ``a`` (batch, m, n) contiguous with m >= n: ``s`` (batch, n) descending and, if
    ``vectors``, ``u`` (batch, m, n) and ``v`` (batch, n, n) (V, not V^T) with a = u diag(s) v^T."""
    if batch == 0 or n == 0:
        return
    bm, bn = max(16, next_pow2(m)), max(16, next_pow2(n + n % 2))  # tl.dot's smallest tile is 16
    launch(_svd_kernel, (batch,), a, u, s, v, m, n, VECTORS=vectors, EPS=_EPS[a.dtype.name], SWEEPS=MAX_SWEEPS,
           BM=bm, BN=bn, num_warps=_warps(bm, bn))
