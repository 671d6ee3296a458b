"""Dense factorizations of small batched matrices: LU with partial pivoting, triangular solve,
Cholesky, Householder QR and the product of Householder reflectors.

Why it exists: ``tritensor.linalg`` (torch.linalg) runs on the GPU path without NumPy or a vendor
library (no cuSOLVER/MAGMA here), so its factorizations are Triton kernels of their own.

Each kernel runs **one program per matrix** of a batch and holds the whole matrix in one register
block (``next_pow2`` of its sides), updating it with masked whole-block operations: a step that
would index a row or column extracts it with a masked sum. That is O(n^3) per matrix like the
unblocked LAPACK routines (getf2, potf2, geqr2, org2r), and it bounds the size: both sides at most
:data:`MAX_SIDE` (128). Larger matrices are refused by the core entries with a
``NotImplementedError`` naming the limit (a blocked algorithm is future work). The triangular
solve reads its triangular matrix row by row from memory, so only its order is bounded; its
right-hand sides are split over a second grid axis.

Only float32 and float64 (torch's CUDA linalg refuses Half/BFloat16); arithmetic is in the
input's dtype, and the buffers are contiguous ``(batch, rows, cols)`` unless strides are passed.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import launch
from ._common import next_pow2

__all__ = ["MAX_SIDE", "lu_factor", "permutation", "lu_solve", "triangular_solve", "cholesky", "geqrf",
           "householder_product", "ldl_factor", "ldl_solve"]

MAX_SIDE = 128


def _warps(*sides) -> int:
    """More warps for bigger register blocks, so a 128 x 128 fp64 block is not spilled per thread."""
    b = max(sides)
    return 4 if b <= 32 else 8 if b <= 64 else 16
_RHS_BLOCK = 64


@triton.jit
def _lu_kernel(a, piv, info, M, N, K, BM: tl.constexpr, BN: tl.constexpr):
    """getf2: row-pivoted LU of one M x N matrix in place; pivots 1-based (LAPACK's), info the
    first zero pivot (1-based) or 0."""
    b = tl.program_id(0).to(tl.int64)
    a += b * M * N
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    ptrs = a + rows[:, None] * N + cols[None, :]
    A = tl.load(ptrs, mask=inside, other=0)
    pivots = tl.zeros([BM], tl.int32)
    bad = tl.program_id(0) * 0
    for k in range(0, K):
        col = tl.sum(tl.where(cols[None, :] == k, A, 0), axis=1)
        cand = tl.where((rows >= k) & (rows < M), tl.abs(col), -1.0)
        best = tl.max(cand, 0)
        p = tl.min(tl.where(cand == best, rows, BM), 0)
        row_k = tl.sum(tl.where(rows[:, None] == k, A, 0), axis=0)
        row_p = tl.sum(tl.where(rows[:, None] == p, A, 0), axis=0)
        A = tl.where(rows[:, None] == k, row_p[None, :], tl.where(rows[:, None] == p, row_k[None, :], A))
        pivots = tl.where(rows == k, p + 1, pivots)
        pivot = tl.sum(tl.where(cols == k, row_p, 0), 0)
        nonzero = pivot != 0
        bad = tl.where(bad == 0, tl.where(nonzero, 0, k + 1), bad)
        col = tl.sum(tl.where(cols[None, :] == k, A, 0), axis=1)
        mult = tl.where(rows > k, col / tl.where(nonzero, pivot, 1), 0)
        mult = tl.where(nonzero, mult, 0)
        A = tl.where(cols[None, :] > k, A - mult[:, None] * row_p[None, :], A)
        A = tl.where((cols[None, :] == k) & (rows[:, None] > k), tl.where(nonzero, mult[:, None], A), A)
    tl.store(ptrs, A, mask=inside)
    tl.store(piv + b * K + rows, pivots, mask=rows < K)
    tl.store(info + b, bad)


@triton.jit
def _trsm_kernel(a, x, N, R, sab, sar, sac, sxb, sxr, sxc, UPPER: tl.constexpr, UNIT: tl.constexpr,
                 BN: tl.constexpr, BR: tl.constexpr):
    """Solve T X = B in place of B for a triangular T (N x N, any strides), B N x R; a block of
    BR right-hand sides per program."""
    b = tl.program_id(0).to(tl.int64)
    a += b * sab
    x += b * sxb
    rows = tl.arange(0, BN)
    rhs = tl.program_id(1) * BR + tl.arange(0, BR)
    inside = (rows[:, None] < N) & (rhs[None, :] < R)
    ptrs = x + rows[:, None] * sxr + rhs[None, :] * sxc
    X = tl.load(ptrs, mask=inside, other=0)
    for step in range(0, N):
        if UPPER:
            i = N - 1 - step
        else:
            i = step
        t_row = tl.load(a + i * sar + rows * sac, mask=rows < N, other=0).to(X.dtype)
        if UPPER:
            t_row = tl.where(rows > i, t_row, 0)
        else:
            t_row = tl.where(rows < i, t_row, 0)
        known = tl.sum(t_row[:, None] * X, axis=0)
        b_i = tl.sum(tl.where(rows[:, None] == i, X, 0), axis=0)
        x_i = b_i - known
        if not UNIT:
            x_i = x_i / tl.load(a + i * sar + i * sac).to(X.dtype)
        X = tl.where(rows[:, None] == i, x_i[None, :], X)
    tl.store(ptrs, X, mask=inside)


@triton.jit
def _cholesky_kernel(a, out, info, N, BN: tl.constexpr):
    """potf2 on the lower triangle of one N x N matrix: L (upper part zero) and info, the order of
    the first leading minor that is not positive definite (1-based) or 0."""
    b = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, BN)
    cols = tl.arange(0, BN)
    inside = (rows[:, None] < N) & (cols[None, :] < N)
    A = tl.load(a + b * N * N + rows[:, None] * N + cols[None, :], mask=inside, other=0)
    bad = tl.program_id(0) * 0
    for k in range(0, N):
        col = tl.sum(tl.where(cols[None, :] == k, A, 0), axis=1)
        d = tl.sum(tl.where(rows == k, col, 0), 0)
        not_positive = (d <= 0) | (d != d)
        bad = tl.where(bad == 0, tl.where(not_positive, k + 1, 0), bad)
        r = tl.sqrt(tl.where(not_positive, 1, d))
        l_col = tl.where(rows >= k, col / r, 0)
        A = tl.where(cols[None, :] == k, l_col[:, None], A)
        trail = tl.where(rows > k, l_col, 0)
        A = A - trail[:, None] * trail[None, :]
    L = tl.where(rows[:, None] >= cols[None, :], A, 0)
    tl.store(out + b * N * N + rows[:, None] * N + cols[None, :], L, mask=inside)
    tl.store(info + b, bad)


@triton.jit
def _geqrf_kernel(a, tau, M, N, K, BM: tl.constexpr, BN: tl.constexpr):
    """geqr2: Householder QR of one M x N matrix in place (R on and above the diagonal, the
    reflectors' vectors below it with an implicit unit head) and the K = min(M, N) scalars tau,
    each reflector chosen as LAPACK's dlarfg (beta = -sign(alpha) * norm; tau = 0 when the column
    below the diagonal is already zero)."""
    b = tl.program_id(0).to(tl.int64)
    a += b * M * N
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    ptrs = a + rows[:, None] * N + cols[None, :]
    A = tl.load(ptrs, mask=inside, other=0)
    taus = tl.zeros([BN], A.dtype)
    for k in range(0, K):
        col = tl.sum(tl.where(cols[None, :] == k, A, 0), axis=1)
        alpha = tl.sum(tl.where(rows == k, col, 0), 0)
        below = tl.where(rows > k, col, 0)
        sigma = tl.sum(below * below, 0)
        norm = tl.sqrt(alpha * alpha + sigma)
        beta = tl.where(alpha >= 0, -norm, norm)
        plain = sigma == 0
        t = tl.where(plain, 0, (beta - alpha) / tl.where(plain, 1, beta))
        scale = tl.where(plain, 0, 1 / tl.where(plain, 1, alpha - beta))
        v = tl.where(rows == k, 1, below * scale)
        w = tl.sum(v[:, None] * A, axis=0)
        A = tl.where(cols[None, :] > k, A - t * v[:, None] * w[None, :], A)
        r_kk = tl.where(plain, alpha, beta)
        new_col = tl.where(rows == k, r_kk, tl.where(rows > k, v, col))
        A = tl.where(cols[None, :] == k, new_col[:, None], A)
        taus = tl.where(cols == k, t, taus)
    tl.store(ptrs, A, mask=inside)
    tl.store(tau + b * K + cols, taus, mask=cols < K)


@triton.jit
def _orgqr_kernel(v, tau, q, M, NV, NQ, K, BM: tl.constexpr, BN: tl.constexpr):
    """org2r: Q = H_1 ... H_K applied to the first NQ columns of the identity (M x NQ), H_i =
    I - tau_i v_i v_i^T with v_i column i of the M x NV matrix below its diagonal (unit head)."""
    b = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    V = tl.load(v + b * M * NV + rows[:, None] * NV + cols[None, :],
                mask=(rows[:, None] < M) & (cols[None, :] < NV), other=0)
    inside = (rows[:, None] < M) & (cols[None, :] < NQ)
    Q = tl.where((rows[:, None] == cols[None, :]) & inside, 1, 0).to(V.dtype)
    for step in range(0, K):
        i = K - 1 - step
        col = tl.sum(tl.where(cols[None, :] == i, V, 0), axis=1)
        vec = tl.where(rows == i, 1, tl.where(rows > i, col, 0))
        t = tl.load(tau + b * K + i).to(V.dtype)
        w = tl.sum(vec[:, None] * Q, axis=0)
        Q = Q - t * vec[:, None] * w[None, :]
    tl.store(q + b * M * NQ + rows[:, None] * NQ + cols[None, :], Q, mask=inside)


def lu_factor(a, piv, info, batch: int, m: int, n: int) -> None:
    """``a`` (batch, m, n) contiguous, overwritten by its LU; ``piv`` (batch, min(m, n)) int32,
    ``info`` (batch,) int32."""
    if batch == 0:
        return
    launch(_lu_kernel, (batch,), a, piv, info, m, n, min(m, n), BM=next_pow2(m), BN=next_pow2(n),
           num_warps=_warps(next_pow2(m), next_pow2(n)))


def triangular_solve(t, x, batch: int, n: int, r: int, t_strides: tuple, x_strides: tuple, upper: bool,
                     unit: bool) -> None:
    """Overwrite ``x`` (batch of n x r, any strides) with the solution of ``t @ X = x``; ``t`` is a
    batch of n x n triangular matrices (strides given; batch stride 0 broadcasts one)."""
    if batch == 0 or n == 0 or r == 0:
        return
    br = min(_RHS_BLOCK, next_pow2(r))
    launch(_trsm_kernel, (batch, -(-r // br)), t, x, n, r, *t_strides, *x_strides, UPPER=upper, UNIT=unit,
           BN=next_pow2(n), BR=br, num_warps=_warps(next_pow2(n)))


def cholesky(a, out, info, batch: int, n: int) -> None:
    """``out`` = the lower Cholesky factor of each (batch, n, n) contiguous ``a``; ``info`` (batch,)."""
    if batch == 0:
        return
    launch(_cholesky_kernel, (batch,), a, out, info, n, BN=next_pow2(n), num_warps=_warps(next_pow2(n)))


def geqrf(a, tau, batch: int, m: int, n: int) -> None:
    """``a`` (batch, m, n) contiguous overwritten by geqrf's compact QR; ``tau`` (batch, min(m, n))."""
    if batch == 0:
        return
    launch(_geqrf_kernel, (batch,), a, tau, m, n, min(m, n), BM=next_pow2(m), BN=next_pow2(n),
           num_warps=_warps(next_pow2(m), next_pow2(n)))


def householder_product(v, tau, q, batch: int, m: int, nv: int, nq: int, k: int) -> None:
    """``q`` (batch, m, nq) = the first nq columns of H_1 ... H_k from ``v`` (batch, m, nv) and
    ``tau`` (batch, k), all contiguous."""
    if batch == 0 or m == 0 or nq == 0:
        return
    launch(_orgqr_kernel, (batch,), v, tau, q, m, nv, nq, k, BM=next_pow2(m), BN=next_pow2(max(nv, nq)),
           num_warps=_warps(next_pow2(m), next_pow2(max(nv, nq))))


@triton.jit
def _pivots_kernel(piv, perm, sign, N, K, BN: tl.constexpr):
    """LAPACK's sequential row swaps (1-based ``piv``, K of them) as the permutation they make:
    ``perm[i]`` = the row of the input that lands at row i, and the permutation's sign."""
    b = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, BN)
    order = rows
    odd = tl.program_id(0) * 0
    for k in range(0, K):
        p = tl.load(piv + b * K + k).to(tl.int32) - 1
        at_k = tl.sum(tl.where(rows == k, order, 0), 0)
        at_p = tl.sum(tl.where(rows == p, order, 0), 0)
        order = tl.where(rows == k, at_p, tl.where(rows == p, at_k, order))
        odd = tl.where(p != k, 1 - odd, odd)
    tl.store(perm + b * N + rows, order.to(tl.int64), mask=rows < N)
    tl.store(sign + b, 1 - 2 * odd)


def permutation(piv, perm, sign, batch: int, n: int, k: int) -> None:
    """``perm`` (batch, n) int64 and ``sign`` (batch,) int32 (+1/-1) from ``piv`` (batch, k)."""
    if batch == 0:
        return
    launch(_pivots_kernel, (batch,), piv, perm, sign, n, k, BN=next_pow2(max(n, 1)), num_warps=1)


@triton.jit
def _lu_solve_kernel(lu, perm, b, x, N, R, slb, spb, sbb, sbr, sbc, BN: tl.constexpr, BR: tl.constexpr):
    """getrs in one program: X = U^-1 L^-1 (B's rows in ``perm`` order) for a contiguous N x N LU
    (unit lower L below the diagonal); B any strides, X contiguous N x R."""
    pid = tl.program_id(0).to(tl.int64)
    lu += pid * slb
    rows = tl.arange(0, BN)
    rhs = tl.program_id(1) * BR + tl.arange(0, BR)
    inside = (rows[:, None] < N) & (rhs[None, :] < R)
    src = tl.load(perm + pid * spb + rows, mask=rows < N, other=0)
    X = tl.load(b + pid * sbb + src[:, None] * sbr + rhs[None, :] * sbc, mask=inside, other=0)
    for i in range(0, N):
        l_row = tl.load(lu + i * N + rows, mask=rows < i, other=0).to(X.dtype)
        known = tl.sum(l_row[:, None] * X, axis=0)
        X = tl.where(rows[:, None] == i, X - known[None, :], X)
    for step in range(0, N):
        i = N - 1 - step
        u_row = tl.load(lu + i * N + rows, mask=(rows > i) & (rows < N), other=0).to(X.dtype)
        known = tl.sum(u_row[:, None] * X, axis=0)
        b_i = tl.sum(tl.where(rows[:, None] == i, X, 0), axis=0)
        x_i = (b_i - known) / tl.load(lu + i * N + i).to(X.dtype)
        X = tl.where(rows[:, None] == i, x_i[None, :], X)
    tl.store(x + pid * N * R + rows[:, None] * R + rhs[None, :], X, mask=inside)


def lu_solve(lu, perm, b, x, batch: int, n: int, r: int, lu_batch_stride: int, perm_batch_stride: int,
             b_strides: tuple) -> None:
    """``x`` (batch, n, r) contiguous = the solution of A X = B from A's contiguous LU (batch stride
    ``lu_batch_stride``: 0 broadcasts one), its row order ``perm`` (int64) and ``b`` (strides given)."""
    if batch == 0 or n == 0 or r == 0:
        return
    br = min(_RHS_BLOCK, next_pow2(r))
    launch(_lu_solve_kernel, (batch, -(-r // br)), lu, perm, b, x, n, r, lu_batch_stride, perm_batch_stride,
           *b_strides, BN=next_pow2(n), BR=br, num_warps=_warps(next_pow2(n)))


@triton.jit
def _swap_rows(X, rows, i, j):
    row_i = tl.sum(tl.where(rows[:, None] == i, X, 0), axis=0)
    row_j = tl.sum(tl.where(rows[:, None] == j, X, 0), axis=0)
    return tl.where(rows[:, None] == i, row_j[None, :], tl.where(rows[:, None] == j, row_i[None, :], X))


@triton.jit
def not_(x):
    """Logical not of a scalar condition (the interpreter's ``~`` on a bool is bitwise on ints)."""
    return x == 0


@triton.jit
def _ldl_kernel(a, ld, piv, info, N, BN: tl.constexpr):
    """sytf2 (lower): Bunch-Kaufman L D L^T of one symmetric N x N matrix read from its lower
    triangle; LD gets L below the diagonal and D (1x1 and 2x2 blocks) on and beside it, pivots are
    LAPACK's (k for a 1x1 block, -k twice for a 2x2 one, 1-based), info the first zero block."""
    b = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, BN)
    cols = tl.arange(0, BN)
    inside = (rows[:, None] < N) & (cols[None, :] < N)
    low = tl.load(a + b * N * N + rows[:, None] * N + cols[None, :], mask=inside, other=0)
    up = tl.load(a + b * N * N + cols[None, :] * N + rows[:, None], mask=inside, other=0)
    A = tl.where(rows[:, None] >= cols[None, :], low, up)
    pivots = tl.zeros([BN], tl.int32)
    bad = tl.program_id(0) * 0
    k = tl.program_id(0) * 0
    while k < N:
        col = tl.sum(tl.where(cols[None, :] == k, A, 0), axis=1)
        absakk = tl.abs(tl.sum(tl.where(rows == k, col, 0), 0))
        below = tl.where((rows > k) & (rows < N), tl.abs(col), -1.0)
        colmax = tl.maximum(tl.max(below, 0), 0.0)
        imax = tl.min(tl.where(below == tl.max(below, 0), rows, BN), 0)
        row_i = tl.sum(tl.where(rows[:, None] == imax, A, 0), axis=0)
        col_i = tl.sum(tl.where(cols[None, :] == imax, A, 0), axis=1)
        rowmax = tl.maximum(tl.max(tl.where((cols >= k) & (cols < imax), tl.abs(row_i), 0.0), 0),
                            tl.max(tl.where((rows > imax) & (rows < N), tl.abs(col_i), 0.0), 0))
        aii = tl.abs(tl.sum(tl.where(rows == imax, col_i, 0), 0))
        zero = (tl.maximum(absakk, colmax) == 0) | (absakk != absakk)
        keep = zero | (absakk >= 0.6403882032022076 * colmax)  # alpha = (1 + sqrt(17)) / 8
        keep = keep | (absakk >= 0.6403882032022076 * colmax * (colmax / tl.where(rowmax == 0, 1.0, rowmax)))
        two = (not_(keep)) & (aii < 0.6403882032022076 * rowmax)
        kp = tl.where(keep, k, imax)
        kk = tl.where(two, k + 1, k)
        bad = tl.where(bad == 0, tl.where(zero, k + 1, 0), bad)
        # interchange kk and kp within the trailing block (the columns of L before k stay)
        row_kk = tl.sum(tl.where(rows[:, None] == kk, A, 0), axis=0)
        row_kp = tl.sum(tl.where(rows[:, None] == kp, A, 0), axis=0)
        trail_c = (cols >= k)[None, :]
        A = tl.where((rows[:, None] == kk) & trail_c, row_kp[None, :],
                     tl.where((rows[:, None] == kp) & trail_c, row_kk[None, :], A))
        col_kk = tl.sum(tl.where(cols[None, :] == kk, A, 0), axis=1)
        col_kp = tl.sum(tl.where(cols[None, :] == kp, A, 0), axis=1)
        trail_r = (rows >= k)[:, None]
        A = tl.where((cols[None, :] == kk) & trail_r, col_kp[:, None],
                     tl.where((cols[None, :] == kp) & trail_r, col_kk[:, None], A))
        # a 1x1 block: A22 -= x x^T / d, L = x / d
        col = tl.sum(tl.where(cols[None, :] == k, A, 0), axis=1)
        d = tl.sum(tl.where(rows == k, col, 0), 0)
        x = tl.where((rows > k) & (rows < N), col, 0)
        d11 = 1 / tl.where(zero | two, 1.0, d)
        one_step = tl.where((rows[:, None] > k) & (cols[None, :] > k), A + x[:, None] * (-d11 * x)[None, :], A)
        one_step = tl.where((cols[None, :] == k) & (rows[:, None] > k), (x * d11)[:, None], one_step)
        # a 2x2 block (LAPACK's arithmetic)
        col1 = tl.sum(tl.where(cols[None, :] == k + 1, A, 0), axis=1)
        d21 = tl.sum(tl.where(rows == k + 1, col, 0), 0)
        d21 = tl.where(two, d21, 1.0)
        e11 = tl.sum(tl.where(rows == k + 1, col1, 0), 0) / d21
        e22 = d / d21
        t = 1 / tl.where(two, e11 * e22 - 1, 1.0)
        d21 = t / d21
        ak = tl.where((rows > k + 1) & (rows < N), col, 0)
        ak1 = tl.where((rows > k + 1) & (rows < N), col1, 0)
        wk = d21 * (e11 * ak - ak1)
        wkp1 = d21 * (e22 * ak1 - ak)
        two_step = tl.where((rows[:, None] > k + 1) & (cols[None, :] > k + 1),
                            A - ak[:, None] * wk[None, :] - ak1[:, None] * wkp1[None, :], A)
        two_step = tl.where((cols[None, :] == k) & (rows[:, None] > k + 1), wk[:, None], two_step)
        two_step = tl.where((cols[None, :] == k + 1) & (rows[:, None] > k + 1), wkp1[:, None], two_step)
        A = tl.where(zero, A, tl.where(two, two_step, one_step))
        A = tl.where(rows[:, None] >= cols[None, :], A, tl.trans(A))  # symmetric again, from the lower triangle
        pivots = tl.where(rows == k, tl.where(two, -(kp + 1), kp + 1), pivots)
        pivots = tl.where((rows == k + 1) & two, -(kp + 1), pivots)
        k = tl.where(two, k + 2, k + 1)
    tl.store(ld + b * N * N + rows[:, None] * N + cols[None, :], tl.where(rows[:, None] >= cols[None, :], A, 0),
             mask=inside)
    tl.store(piv + b * N + rows, pivots, mask=rows < N)
    tl.store(info + b, bad)


@triton.jit
def _ldl_solve_kernel(ld, piv, x, N, R, BN: tl.constexpr, BR: tl.constexpr):
    """sytrs (lower): X = (P L D L^T P^T)^-1 B in place of B (contiguous N x R) from sytf2's LD and pivots."""
    b = tl.program_id(0).to(tl.int64)
    ld += b * N * N
    piv += b * N
    rows = tl.arange(0, BN)
    rhs = tl.program_id(1) * BR + tl.arange(0, BR)
    inside = (rows[:, None] < N) & (rhs[None, :] < R)
    ptrs = x + b * N * R + rows[:, None] * R + rhs[None, :]
    X = tl.load(ptrs, mask=inside, other=0)
    k = tl.program_id(0) * 0
    while k < N:  # L D Y = P^T B
        p = tl.load(piv + k)
        two = p < 0
        kp = tl.where(two, -p - 1, p - 1)
        X = _swap_rows(X, rows, tl.where(two, k + 1, k), kp)
        lk = tl.load(ld + rows * N + k, mask=rows < N, other=0).to(X.dtype)
        lk1 = tl.load(ld + rows * N + tl.minimum(k + 1, N - 1), mask=rows < N, other=0).to(X.dtype)
        lk1 = tl.where(two, lk1, 0)
        xk = tl.sum(tl.where(rows[:, None] == k, X, 0), axis=0)
        xk1 = tl.sum(tl.where(rows[:, None] == k + 1, X, 0), axis=0)
        first = tl.where(two, k + 1, k)
        lk = tl.where(rows > first, lk, 0)
        lk1 = tl.where(rows > first, lk1, 0)
        X = X - lk[:, None] * xk[None, :] - lk1[:, None] * tl.where(two, xk1, 0)[None, :]
        dkk = tl.load(ld + k * N + k).to(X.dtype)
        k1 = tl.minimum(k + 1, N - 1)
        d21 = tl.where(two, tl.load(ld + k1 * N + k).to(X.dtype), 1)
        d22 = tl.where(two, tl.load(ld + k1 * N + k1).to(X.dtype), 1)
        akm1 = dkk / d21
        ak = d22 / d21
        denom = tl.where(two, akm1 * ak - 1, 1.0)
        bkm1 = xk / d21
        bk = xk1 / d21
        new_k = tl.where(two, (ak * bkm1 - bk) / denom, xk / dkk)
        new_k1 = (akm1 * bk - bkm1) / denom
        X = tl.where(rows[:, None] == k, new_k[None, :], X)
        X = tl.where((rows[:, None] == k + 1) & two, new_k1[None, :], X)
        k = tl.where(two, k + 2, k + 1)
    k = N - 1 + tl.program_id(0) * 0
    while k >= 0:  # L^T P^T X = Y
        p = tl.load(piv + k)
        two = p < 0
        tail = rows > k
        lk = tl.load(ld + rows * N + k, mask=tail & (rows < N), other=0).to(X.dtype)
        lkm1 = tl.load(ld + rows * N + tl.maximum(k - 1, 0), mask=tail & (rows < N), other=0).to(X.dtype)
        lkm1 = tl.where(two, lkm1, 0)
        xk = tl.sum(tl.where(rows[:, None] == k, X, 0), axis=0) - tl.sum(lk[:, None] * X, axis=0)
        xkm1 = tl.sum(tl.where(rows[:, None] == k - 1, X, 0), axis=0) - tl.sum(lkm1[:, None] * X, axis=0)
        X = tl.where(rows[:, None] == k, xk[None, :], X)
        X = tl.where((rows[:, None] == k - 1) & two, xkm1[None, :], X)
        kp = tl.where(two, -p - 1, p - 1)
        X = _swap_rows(X, rows, k, kp)
        k = tl.where(two, k - 2, k - 1)
    tl.store(ptrs, X, mask=inside)


def ldl_factor(a, ld, piv, info, batch: int, n: int) -> None:
    """``ld`` (batch, n, n), ``piv`` (batch, n) int32 and ``info`` (batch,) from the lower
    triangles of ``a`` (batch, n, n), all contiguous."""
    if batch == 0 or n == 0:
        return
    launch(_ldl_kernel, (batch,), a, ld, piv, info, n, BN=next_pow2(n), num_warps=_warps(next_pow2(n)))


def ldl_solve(ld, piv, x, batch: int, n: int, r: int) -> None:
    """Overwrite ``x`` (batch, n, r) contiguous with the solution from ``ldl_factor``'s output."""
    if batch == 0 or n == 0 or r == 0:
        return
    br = min(_RHS_BLOCK, next_pow2(r))
    launch(_ldl_solve_kernel, (batch, -(-r // br)), ld, piv, x, n, r, BN=next_pow2(n), BR=br,
           num_warps=_warps(next_pow2(n)))
