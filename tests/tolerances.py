"""Per-dtype tolerances for comparing kernels against float64 NumPy references. One place.

Why these numbers: a kernel computes in fp32 (fp64 for fp64 inputs) and rounds once on store.
fp16 keeps 11 significant bits (unit roundoff 4.9e-4) and bf16 8 bits (3.9e-3), so a correctly
rounded result can be off by half an ulp of the output type; the rtol below is about two ulps.
fp32 allows for fp32 transcendental functions (a few ulps) and fp32 accumulation.
Tests that need something else say so next to the call, with the reason.
"""
import ml_dtypes
import numpy as np

import tritensor as tt

TOL = {
    tt.float64: dict(rtol=1e-10, atol=1e-12),
    tt.float32: dict(rtol=1e-5, atol=1e-6),
    tt.float16: dict(rtol=1e-3, atol=1e-3),
    tt.bfloat16: dict(rtol=8e-3, atol=8e-3),
}

FLOAT_DTYPES = [tt.float32, tt.float64, tt.float16, tt.bfloat16]
NP = {tt.float32: np.float32, tt.float64: np.float64, tt.float16: np.float16, tt.bfloat16: ml_dtypes.bfloat16,
      tt.int32: np.int32, tt.int64: np.int64, tt.bool: np.bool_}


def assert_close(actual, expected, dtype, **override):
    """Compare a tritensor result with a NumPy reference (computed in float64)."""
    tol = dict(TOL.get(dtype, dict(rtol=0, atol=0)))
    tol.update(override)
    a = actual.cpu().numpy() if isinstance(actual, tt.Tensor) else np.asarray(actual)
    a = a.astype(np.float64) if a.dtype == ml_dtypes.bfloat16 else a
    np.testing.assert_allclose(np.asarray(a, dtype=np.float64) if a.dtype.kind == "f" else a,
                               np.asarray(expected), equal_nan=True, **tol)


# Sums of k products (matmul, conv2d and its backward kernels) accumulate in fp32 (fp64 for
# fp64). Rounding error of such a sum grows like sqrt(k) * unit roundoff * term size for terms of
# random sign, so a result that cancels to near zero needs an absolute tolerance that grows with
# k. 16 * sqrt(k) * u covers N(0, 1) inputs (terms up to ~16) with margin; rtol is unchanged.
_ACC_UNIT_ROUNDOFF = {tt.float64: 2.0**-53, tt.float32: 2.0**-24, tt.float16: 2.0**-24, tt.bfloat16: 2.0**-24}


def sum_tol(dtype, k):
    """TOL[dtype] with atol widened for a k-term sum accumulated in fp32 (fp64 for fp64)."""
    tol = dict(TOL[dtype])
    tol["atol"] = max(tol["atol"], 16 * max(k, 1) ** 0.5 * _ACC_UNIT_ROUNDOFF[dtype])
    return tol
