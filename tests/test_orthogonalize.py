"""PowerSGD's Gram-Schmidt kernel (triton_kernels/orthogonalize.py) against NumPy.

Tolerances: Gram-Schmidt of a well-conditioned matrix loses a few ulps per column, so fp32 is
checked to 1e-5 and fp64 to 1e-12 (relative to entries of size <= 1); QR's Q equals ours up to
each column's sign."""
import numpy as np
import pytest

import tritensor as tt
from tritensor import orthogonalize_

TOL = {"float32": 1e-5, "float64": 1e-12}


def _ref_gram_schmidt(a, eps):
    a = a.astype(np.float64).copy()
    for i in range(a.shape[1]):
        nrm = np.linalg.norm(a[:, i]) + eps
        a[:, i] = 0.0 if nrm == 0 else a[:, i] / nrm
        for j in range(i + 1, a.shape[1]):
            a[:, j] -= (a[:, i] @ a[:, j]) * a[:, i]
    return a


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(1, 1), (7, 1), (33, 3), (5000, 4), (13, 13)])
def test_matches_qr_up_to_signs(dtype, shape):
    rng = np.random.default_rng(sum(shape))
    a = rng.standard_normal(shape).astype(dtype)
    t = tt.tensor(a.copy())
    assert orthogonalize_(t) is t
    got = t.numpy().astype(np.float64)
    q, _ = np.linalg.qr(a.astype(np.float64))
    signs = np.sign(np.sum(got * q, axis=0))
    assert np.all(np.abs(signs) == 1)
    np.testing.assert_allclose(got, q * signs, atol=TOL[dtype] * 10, rtol=0)
    np.testing.assert_allclose(got.T @ got, np.eye(shape[1]), atol=TOL[dtype] * 10, rtol=0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batched_and_strided(dtype):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 4, 9)).astype(dtype)  # viewed transposed: 3 matrices 9 x 4, strided
    t = tt.tensor(a.copy())
    orthogonalize_(t.transpose(1, 2))
    got = t.numpy().transpose(0, 2, 1)
    for k in range(3):
        np.testing.assert_allclose(got[k], _ref_gram_schmidt(a[k].T, 0.0), atol=TOL[dtype] * 10, rtol=0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rank_deficient_column_with_epsilon(dtype):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((20, 3))
    a[:, 2] = 2 * a[:, 0] - a[:, 1]  # dependent: after projection the column is rounding noise
    a = a.astype(dtype)
    t = tt.tensor(a.copy())
    orthogonalize_(t, epsilon=1e-8)
    got = t.numpy()
    assert np.isfinite(got).all()
    ref = _ref_gram_schmidt(a, 1e-8)
    np.testing.assert_allclose(got[:, :2], ref[:, :2], atol=TOL[dtype] * 10, rtol=0)
    # the third column is noise / (noise + eps): bounded by one in norm, whatever the rounding
    assert np.linalg.norm(got[:, 2]) <= 1.0 + 1e-6


def test_zero_column_without_epsilon_becomes_zero():
    a = np.zeros((6, 2), np.float32)
    a[:, 1] = np.arange(6)
    t = tt.tensor(a.copy())
    orthogonalize_(t)
    got = t.numpy()
    assert (got[:, 0] == 0).all()
    np.testing.assert_allclose(got[:, 1], np.arange(6) / np.linalg.norm(np.arange(6)), atol=1e-6)


def test_bad_input_named():
    with pytest.raises(TypeError, match="matrices"):
        orthogonalize_(np.zeros((2, 2)))
    with pytest.raises(TypeError, match="matrices"):
        orthogonalize_(tt.zeros(2, 2, dtype=tt.int32))
    with pytest.raises(ValueError, match="matrices"):
        orthogonalize_(tt.zeros(4))
    with pytest.raises(ValueError, match="epsilon"):
        orthogonalize_(tt.zeros(2, 2), epsilon=-1)
    empty = tt.zeros(0, 3)
    assert orthogonalize_(empty) is empty
