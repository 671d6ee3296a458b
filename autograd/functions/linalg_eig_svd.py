"""Derivatives of ``linalg_eigh`` and ``linalg_svd`` (core entries: ``core/ops/linalg_eig_svd.py``;
kernels: ``triton_kernels/linalg_eig_svd.py``), torch's formulas (``FunctionsManual.cpp``:
``linalg_eig_backward`` for a Hermitian input, ``svd_backward``) written with dispatched ops, so
they are recorded in turn. Both are defined only where the eigenvalues (singular values) are
distinct (and, for the SVD's U/V, nonzero), as torch's; the losses they serve should not depend on
the vectors' signs. The composites (``eigvalsh``, ``svdvals``, ``pinv``, ``matrix_rank``, ``cond``,
``torch.svd``) are recorded through these.
"""
from __future__ import annotations

from ...core.ops import linalg_eig_svd as _les
from ...core.ops import linalg_factor as _lf
from ..function import BuiltinFunction


def _off_diagonal_quotient(X, E):
    """X / E off the diagonal, 0 on it (E is 0 there)."""
    eye = _lf.eye_like(X, X.shape[-1])
    return X.div(E.add(eye)).mul(eye.neg().add(1.0))


class Eigh(BuiltinFunction):
    """gA = V (diag(gL) + (V^T gV) / E) V^T with E_ij = L_j - L_i off the diagonal."""

    @staticmethod
    def forward(ctx, A, UPLO):
        L, V = _les.linalg_eigh(A, UPLO)
        ctx.save_for_backward(L, V)
        return L, V

    @staticmethod
    def backward(ctx, gL, gV):
        L, V = ctx.saved_tensors
        inner = None
        if gV is not None:
            E = L.unsqueeze(-2).sub(L.unsqueeze(-1))
            inner = _off_diagonal_quotient(V.mT.matmul(gV), E)
        if gL is not None:
            d = gL.diag_embed()
            inner = d if inner is None else inner.add(d)
        if inner is None:
            return None, None
        return V.matmul(inner).matmul(V.mT), None


class Svd(BuiltinFunction):
    """gA = U [(skew(U^T gU) / E) S + S (skew(V^T gV) / E) + diag(gS)] V^T
    + (I - U U^T) gU S^-1 V^T + U S^-1 gV^T (I - V V^T), E_jk = S_k^2 - S_j^2, skew(X) = X - X^T;
    with ``full_matrices`` only U's and Vh's first min(m, n) vectors carry a gradient, as torch's."""

    @staticmethod
    def forward(ctx, A, full_matrices, driver):
        U, S, Vh = _les.linalg_svd(A, full_matrices, driver=driver)
        ctx.save_for_backward(U, S, Vh)
        ctx.shape = A.shape
        return U, S, Vh

    @staticmethod
    def backward(ctx, gU, gS, gVh):
        U, S, Vh = ctx.saved_tensors
        m, n = ctx.shape[-2:]
        k = S.shape[-1]
        U, Vh = U.narrow(-1, 0, k), Vh.narrow(-2, 0, k)
        if gU is not None:
            gU = gU.narrow(-1, 0, k)
        if gVh is not None:
            gVh = gVh.narrow(-2, 0, k)
        V = Vh.mT
        if gU is None and gVh is None:
            if gS is None:
                return None, None, None
            return U.mul(gS.unsqueeze(-2)).matmul(Vh), None, None
        S_row, S_col = S.unsqueeze(-2), S.unsqueeze(-1)
        S2 = S.mul(S)
        E = S2.unsqueeze(-2).sub(S2.unsqueeze(-1))
        inner = None
        if gU is not None:
            UhgU = U.mT.matmul(gU)
            inner = _off_diagonal_quotient(UhgU.sub(UhgU.mT), E).mul(S_row)
        if gVh is not None:
            gV = gVh.mT
            VhgV = V.mT.matmul(gV)
            t = _off_diagonal_quotient(VhgV.sub(VhgV.mT), E).mul(S_col)
            inner = t if inner is None else inner.add(t)
        if gS is not None:
            inner = inner.add(gS.diag_embed())
        gA = U.matmul(inner).matmul(Vh)
        if gU is not None and m > k:
            gA = gA.add(gU.sub(U.matmul(UhgU)).div(S_row).matmul(Vh))
        if gVh is not None and n > k:
            gA = gA.add(U.matmul(gV.sub(V.matmul(VhgV)).div(S_row).mT))
        return gA, None, None


RECORD = {
    "linalg_eigh": lambda A, UPLO="L": _les.eigh_result(*Eigh.apply(A, UPLO)),
    "linalg_svd": lambda A, full_matrices=True, *, driver=None: _les.svd_result(*Svd.apply(A, full_matrices, driver)),
}
