"""Derivatives of the factorization family (core entries: ``core/ops/linalg_factor.py``; kernels:
``triton_kernels/linalg_factor.py``): LU, triangular solve, Cholesky, QR, det, slogdet, inverse, solve.

The formulas are torch's (``FunctionsManual.cpp``: ``linalg_lu_backward``, ``linalg_solve_triangular``'s
adjoint solves, ``cholesky_backward``, ``linalg_qr_backward``, ``matrix_exp_backward``,
``linalg_det_backward`` (by the SVD, singular A included), ``slogdet_backward``,
``linalg_solve_backward``), written with dispatched ops, so they are recorded in turn and double
backward works. The composites of the family (``solve``, ``inv``,
``lu_solve``, ``cholesky_solve``, ``lu``, ``lu_unpack`` ...) are recorded through these. ``lu_factor``'s
derivative is torch's for square matrices (a rectangular LU's is not implemented).
"""
from __future__ import annotations

from ...core import linalg as _la
from ...core.ops import linalg_factor as _lf
from ..function import BuiltinFunction


def reduce_to(g, shape):
    """``g`` summed over the dims a broadcast added or stretched, back to ``shape``."""
    shape = tuple(shape)
    if tuple(g.shape) == shape:
        return g
    lead = g.ndim - len(shape)
    if lead:
        g = g.sum(tuple(range(lead)))
    dims = tuple(i for i, s in enumerate(shape) if s == 1 and g.shape[i] != 1)
    return g.sum(dims, keepdim=True) if dims else g


def _triangle(g, upper: bool, unit: bool):
    if upper:
        return g.triu(1 if unit else 0)
    return g.tril(-1 if unit else 0)


class LuFactorEx(BuiltinFunction):
    """torch's linalg_lu_backward for a square A = P L U (the packed LU's gradient split into gL below
    the diagonal and gU on and above it): gA = P L^-T [tril(L^T gL, -1) + triu(gU U^T)] U^-T."""

    @staticmethod
    def forward(ctx, A, pivot, check_errors):
        LU, piv, info = _lf.linalg_lu_factor_ex(A, pivot=pivot, check_errors=check_errors)
        ctx.save_for_backward(LU, piv)
        ctx.mark_non_differentiable(piv, info)
        return LU, piv, info

    @staticmethod
    def backward(ctx, gLU, gpiv=None, ginfo=None):
        LU, piv = ctx.saved_tensors
        m, n = LU.shape[-2:]
        if m != n:
            raise NotImplementedError("linalg.lu_factor: the derivative of a rectangular LU is not implemented in "
                                      "tritensor (square matrices only)")
        eye = _lf.eye_like(LU, n)
        L, U = LU.tril(-1).add(eye), LU.triu()
        phi = L.mT.matmul(gLU.tril(-1)).tril(-1).add(gLU.triu().matmul(U.mT).triu())
        gR = _la.solve_triangular(L.mT, phi, upper=True, unitriangular=True)
        gA = _la.solve_triangular(U.mT, gR, upper=False, left=False)
        perm, _ = _lf.lu_permutation(piv, n)
        # P X: row perm[i] of the result is row i of X
        inv = perm.argsort(-1)
        return gA.gather(-2, inv.unsqueeze(-1).expand(*gA.shape)), None, None


class SolveTriangular(BuiltinFunction):
    """X = op(A)^-1 B: gB = A^-T G (a triangular solve with the other triangle), gA = -gB X^T
    (X^T gB for ``left=False``) on A's triangle (without the diagonal when unit)."""

    @staticmethod
    def forward(ctx, A, B, upper, left, unitriangular):
        X = _lf.linalg_solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular)
        ctx.save_for_backward(A, X)
        ctx.flags = (upper, left, unitriangular)
        ctx.shapes = (A.shape, B.shape)
        return X

    @staticmethod
    def backward(ctx, g):
        A, X = ctx.saved_tensors
        upper, left, unit = ctx.flags
        gB = _la.solve_triangular(A.mT, g, upper=not upper, left=left, unitriangular=unit)
        gA = gB.matmul(X.mT).neg() if left else X.mT.matmul(gB).neg()
        gA = _triangle(gA, upper, unit)
        needs = ctx.needs_input_grad
        return (reduce_to(gA, ctx.shapes[0]) if needs[0] else None,
                reduce_to(gB, ctx.shapes[1]) if needs[1] else None, None, None, None)


class CholeskyEx(BuiltinFunction):
    """torch's cholesky_backward: phi = L^T gL with its lower triangle kept and diagonal halved,
    gA = L^-T phi L^-1, symmetrised."""

    @staticmethod
    def forward(ctx, A, upper, check_errors):
        L, info = _lf.linalg_cholesky_ex(A, upper=upper, check_errors=check_errors)
        ctx.upper = upper
        ctx.save_for_backward(L)
        ctx.mark_non_differentiable(info)
        return L, info

    @staticmethod
    def backward(ctx, gL, ginfo=None):
        (L,) = ctx.saved_tensors
        if ctx.upper:
            L, gL = L.mT, gL.mT
        phi = L.mT.matmul(gL).tril()
        phi = phi.sub(phi.diagonal(0, -2, -1).mul(0.5).diag_embed())
        eye = _lf.eye_like(L, L.shape[-1])
        L_inv = _la.solve_triangular(L, eye, upper=False)
        gA = L_inv.mT.matmul(phi).matmul(L_inv)
        return gA.add(gA.mT).mul(0.5), None, None


class Qr(BuiltinFunction):
    """torch's linalg_qr_backward. m >= n: gA = (gQ + Q copyltu(M)) R^-T, M = R gR^T - gQ^T Q;
    m < n: A = [X | Y], the square case for X with gQ + Y gV^T, and gY = Q gV (gV: R's last columns)."""

    @staticmethod
    def forward(ctx, A, mode):
        Q, R = _lf.linalg_qr(A, mode)
        ctx.mode = mode
        ctx.save_for_backward(Q, R)
        return Q, R

    @staticmethod
    def backward(ctx, gQ, gR):
        Q, R = ctx.saved_tensors
        if ctx.mode == "r":
            raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
                               "Please use linalg.qr(A, mode='reduced') if you are going to differentiate through "
                               "linalg.qr.")
        m, n = Q.shape[-2], R.shape[-1]
        if ctx.mode == "complete" and m > n:
            raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
        gQ = Q.mul(0.0) if gQ is None else gQ
        gR = R.mul(0.0) if gR is None else gR
        if m >= n:
            return _qr_square_or_tall(Q, R, gQ, gR), None
        X_R, V = R.narrow(-1, 0, m), R.narrow(-1, m, n - m)
        gX_R, gV = gR.narrow(-1, 0, m), gR.narrow(-1, m, n - m)
        # Y = Q V, so V = Q^T Y reaches Q too: Q's whole gradient is gQ + Y gV^T
        gQ_x = gQ.add(Q.matmul(V).matmul(gV.mT))
        gX = _qr_square_or_tall(Q, X_R, gQ_x, gX_R)
        return _la._cat([gX, Q.matmul(gV)], -1), None


def _qr_square_or_tall(Q, R, gQ, gR):
    M = R.matmul(gR.mT).sub(gQ.mT.matmul(Q))
    low = M.tril()
    copyltu = low.add(M.tril(-1).mT)
    b = gQ.add(Q.matmul(copyltu))
    return _la.solve_triangular(R.mT, b, upper=False, left=False)


class Det(BuiltinFunction):
    """torch's linalg_det_backward by the SVD, so a singular A gets its true gradient (the cofactor
    matrix) rather than inf/NaN: A = U S Vh, det = det(U) det(Vh) prod(S), and
    gA = g det(U) det(Vh) U diag(prod_{j != i} S_j) Vh (products over the others, without division)."""

    @staticmethod
    def forward(ctx, A):
        d = _lf.det(A)
        ctx.save_for_backward(A)
        return d

    @staticmethod
    def backward(ctx, g):
        (A,) = ctx.saved_tensors
        if A.shape[-1] == 0:
            return A.mul(0.0)
        U, S, Vh = _la.svd(A)
        one = S.narrow(-1, 0, 1).mul(0.0).add(1.0)
        before = _la._cat([one, S.narrow(-1, 0, S.shape[-1] - 1)], -1).cumprod(-1)
        after = _la._cat([S.narrow(-1, 1, S.shape[-1] - 1), one], -1).flip(-1).cumprod(-1).flip(-1)
        scale = g.mul(_la.det(U)).mul(_la.det(Vh)).unsqueeze(-1)
        return U.mul(before.mul(after).mul(scale).unsqueeze(-2)).matmul(Vh)


class Slogdet(BuiltinFunction):
    """d log|det| = tr(A^-1 dA): gA = g_logabsdet A^-T; the sign has no gradient (real)."""

    @staticmethod
    def forward(ctx, A):
        s, logabs = _lf.slogdet(A)
        ctx.save_for_backward(A)
        ctx.mark_non_differentiable(s)
        return s, logabs

    @staticmethod
    def backward(ctx, gs, glogabs):
        (A,) = ctx.saved_tensors
        if glogabs is None:
            return None
        return _la.inv_ex(A)[0].mT.mul(glogabs.unsqueeze(-1).unsqueeze(-1))


class MatrixExp(BuiltinFunction):
    """torch's matrix_exp backward: gA = the upper right block of exp([[A^T, G], [0, A^T]])."""

    @staticmethod
    def forward(ctx, A):
        ctx.save_for_backward(A)
        return _lf.matrix_exp(A)

    @staticmethod
    def backward(ctx, g):
        (A,) = ctx.saved_tensors
        n = A.shape[-1]
        At = A.mT.expand(*g.shape)
        M = _la._cat([_la._cat([At, g], -1), _la._cat([g.mul(0.0), At], -1)], -2)
        return _la.matrix_exp(M).narrow(-2, 0, n).narrow(-1, n, n)


class InvEx(BuiltinFunction):
    """X = A^-1: gA = -X^T G X^T."""

    @staticmethod
    def forward(ctx, A, check_errors):
        X, info = _lf.linalg_inv_ex(A, check_errors=check_errors)
        ctx.save_for_backward(X)
        ctx.mark_non_differentiable(info)
        return X, info

    @staticmethod
    def backward(ctx, g, ginfo=None):
        (X,) = ctx.saved_tensors
        return X.mT.matmul(g).matmul(X.mT).neg(), None


class SolveEx(BuiltinFunction):
    """X = A^-1 B (left) or B A^-1: gB = A^-T G (G A^-T), gA = -gB X^T (-X^T gB)."""

    @staticmethod
    def forward(ctx, A, B, left, check_errors):
        X, info = _lf.linalg_solve_ex(A, B, left=left, check_errors=check_errors)
        ctx.vector = _lf._vector_rhs(A, B)
        ctx.left = left
        ctx.shapes = (A.shape, B.shape)
        ctx.save_for_backward(A, X)
        ctx.mark_non_differentiable(info)
        return X, info

    @staticmethod
    def backward(ctx, g, ginfo=None):
        A, X = ctx.saved_tensors
        gB = _la.solve_ex(A.mT, g, left=ctx.left)[0]
        if ctx.vector:
            gB_m, X_m = gB.unsqueeze(-1), X.unsqueeze(-1)
        else:
            gB_m, X_m = gB, X
        gA = gB_m.matmul(X_m.mT).neg() if ctx.left else X_m.mT.matmul(gB_m).neg()
        needs = ctx.needs_input_grad
        return (reduce_to(gA, ctx.shapes[0]) if needs[0] else None,
                reduce_to(gB, ctx.shapes[1]) if needs[1] else None, None, None)


RECORD = {
    "linalg_lu_factor_ex": lambda A, *, pivot=True, check_errors=False: _lf.lu_factor_ex_result(*LuFactorEx.apply(
        A, pivot, check_errors)),
    "linalg_solve_triangular": lambda A, B, *, upper, left=True, unitriangular=False: SolveTriangular.apply(
        A, B, upper, left, unitriangular),
    "linalg_cholesky_ex": lambda A, *, upper=False, check_errors=False: _lf.cholesky_ex_result(*CholeskyEx.apply(
        A, upper, check_errors)),
    "linalg_qr": lambda A, mode="reduced": _lf.qr_result(*Qr.apply(A, mode)),
    "det": lambda A: Det.apply(A),
    "matrix_exp": lambda A: MatrixExp.apply(A),
    "slogdet": lambda A: _lf.slogdet_result(*Slogdet.apply(A)),
    "linalg_inv_ex": lambda A, *, check_errors=False: _lf.inv_ex_result(*InvEx.apply(A, check_errors)),
    "linalg_solve_ex": lambda A, B, *, left=True, check_errors=False: _lf.solve_ex_result(*SolveEx.apply(
        A, B, left, check_errors)),
}
