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
