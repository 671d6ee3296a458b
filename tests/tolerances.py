"""Tolerances for comparing results with float64 NumPy references: per dtype, and named profiles.

Why the default numbers (:data:`TOL`): a kernel computes in fp32 (fp64 for fp64 inputs) and rounds
once on store. fp16 keeps 11 significant bits (unit roundoff 4.9e-4) and bf16 8 bits (3.9e-3), so
a correctly rounded result can be off by half an ulp of the output type; the rtol below is about
two ulps. fp32 allows for fp32 transcendental functions (a few ulps) and fp32 accumulation.

A check that needs other numbers names a *profile* (:data:`PROFILES`), never numbers of its own:
``assert_close(actual, expected, dtype, "accumulate", k=K)``. Each profile says why it differs
from the default; the dtypes it does not name keep :data:`TOL`. ``tests/test_tolerances.py``
checks that no kernel test passes ``rtol=``/``atol=`` itself.
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
EXACT = dict(rtol=0.0, atol=0.0)  # integers and bool: exact, whatever the profile

FLOAT_DTYPES = [tt.float32, tt.float64, tt.float16, tt.bfloat16]
NP = {tt.float32: np.float32, tt.float64: np.float64, tt.float16: np.float16, tt.bfloat16: ml_dtypes.bfloat16,
      tt.int32: np.int32, tt.int64: np.int64, tt.bool: np.bool_, tt.uint8: np.uint8, tt.int8: np.int8,
      tt.int16: np.int16, tt.uint16: np.uint16, tt.uint32: np.uint32, tt.uint64: np.uint64}

# Sums of k products (matmul, conv2d and its backward kernels) accumulate in fp32 (fp64 for
# fp64), so a result that cancels to near zero needs an absolute tolerance that grows with k.
# A blocked or pairwise sum (NumPy's, the interpreter's) errs like sqrt(k) * u * term size:
# 16 * sqrt(k) * u covers N(0, 1) inputs (terms up to ~16) with margin. A GPU's fp32 dot is a
# loop of FMAs over each program's K, so every rounding is relative to a partial sum that has
# grown like sqrt(j) after j terms: the error's standard deviation is about u * k / sqrt(6), and
# its largest over a few thousand outputs about 1.6 * u * k (the H200 measured 1.44e-4 at
# k = 6000, that is 1.0 * u * k). 2 * k * u covers that; it passes the sqrt term from k = 64 on.
# rtol is unchanged.
_ACC_UNIT_ROUNDOFF = {tt.float64: 2.0**-53, tt.float32: 2.0**-24, tt.float16: 2.0**-24, tt.bfloat16: 2.0**-24}


def _default(dtype, k):
    return dict(TOL[dtype])


def _accumulate(dtype, k):
    tol = dict(TOL[dtype])
    u = _ACC_UNIT_ROUNDOFF[dtype]
    tol["atol"] = max(tol["atol"], 16 * max(k, 1) ** 0.5 * u, 2 * k * u)
    return tol


def _rounded_terms(dtype, k):
    return {name: v * k for name, v in TOL[dtype].items()}


def _centered(dtype, k):
    tol = dict(TOL[dtype])
    tol["atol"] = max(tol["atol"], 4 * _ACC_UNIT_ROUNDOFF[dtype] * k)
    return tol


# Unit roundoff of the dtypes themselves (half an ulp at 1): for values rounded *to* fp16/bf16
# inside a kernel, not only on store (attention's probabilities and dS before the tensor-core dots).
UNIT_ROUNDOFF = {tt.float64: 2.0**-53, tt.float32: 2.0**-24, tt.float16: 2.0**-11, tt.bfloat16: 2.0**-8}


def _attention(dtype, k):
    """softmax(Q Kᵀ) V over k keys: a convex combination of V rows. fp32/fp64 accumulate the k
    terms (the "accumulate" profile); fp16/bf16 on a GPU round the probabilities to the input
    dtype before P·V (FlashAttention's design: the tensor cores need it), one more rounding of
    relative size u on each weight, so the weighted sum of O(1) values may move by 2u more."""
    if dtype in (tt.float16, tt.bfloat16):
        tol = dict(TOL[dtype])
        tol["atol"] = TOL[dtype]["atol"] + 2 * UNIT_ROUNDOFF[dtype]
        return tol
    return _accumulate(dtype, k)


def _attention_grad(dtype, k):
    """Attention's gradients, k = max|reference gradient|: sums of L or S products whose terms
    are rounded to the input dtype in fp16/bf16 (dS and P before the tensor-core dots), so the
    error is relative to the gradient's own scale, not to each (possibly cancelling) entry:
    |err| <= 64·u·k plus the dtype's atol in fp16/bf16, 1e3·u·k in fp32/fp64, no rtol."""
    scale = max(k, 1e-30)
    if dtype in (tt.float16, tt.bfloat16):
        return dict(rtol=0.0, atol=64 * UNIT_ROUNDOFF[dtype] * scale + TOL[dtype]["atol"])
    return dict(rtol=0.0, atol=1e3 * UNIT_ROUNDOFF[dtype] * scale)


def _rounded_sum(dtype, k):
    tol = dict(TOL[dtype])
    tol["atol"] = TOL[dtype]["atol"] * k
    return tol


def _rounded_rows(dtype, k):
    return dict(rtol=2 * TOL[dtype]["rtol"], atol=TOL[dtype]["atol"] * k)


def _orthonormal(dtype, k):
    """The Gram matrix of rows (or columns) orthonormalized in fp32 (fp64 for fp64), scaled by
    sqrt(k) and stored in the dtype, against k·I: absolute k·c (c: 1e-5 in fp32, a few hundred fp32
    ulps of Gram-Schmidt; 1e-12 in fp64; 2e-2 in fp16, whose entries are rounded to 4.9e-4 each;
    bf16 8 times fp16's, its unit roundoff being 8 times larger), and NumPy's default rtol 1e-7."""
    c = {tt.float64: 1e-12, tt.float32: 1e-5, tt.float16: 2e-2, tt.bfloat16: 16e-2}[dtype]
    return dict(rtol=1e-7, atol=c * k)


def _product(dtype, k):
    """A running product of k terms (cumprod): each of the k - 1 multiplications rounds in fp32
    (fp64 for fp64), so the relative error grows like k·u; 4·k·u relative, the default's rtol at
    least, atol unchanged."""
    tol = dict(TOL[dtype])
    tol["rtol"] = max(tol["rtol"], 4 * k * _ACC_UNIT_ROUNDOFF[dtype])
    return tol


def _over_default(changes):
    """A profile that is :data:`TOL` except for the dtypes in ``changes``."""
    def profile(dtype, k):
        return dict(changes[dtype]) if dtype in changes else dict(TOL[dtype])
    return profile


F32, F64, BF16 = tt.float32, tt.float64, tt.bfloat16

# name -> (dtype, k) -> dict(rtol=, atol=). ``k`` is the profile's one parameter, where it has one.
PROFILES = {
    # One rounding on store, fp32 compute: the numbers above.
    "default": _default,
    # A choice among the inputs (max, clamp, a copy): nothing is computed, nothing may differ.
    "exact": lambda dtype, k: dict(EXACT),
    # A k-term sum accumulated in fp32 (fp64 for fp64): atol grows like sqrt(k) (see above).
    "accumulate": _accumulate,
    # k separately rounded values combined (a sum of k rounded losses, a chain of k ops each
    # rounding in the dtype): each may carry a full default error, so TOL times k.
    "rounded_terms": _rounded_terms,
    # One correctly rounded (or few-ulp) function of exact inputs, values away from zero: a few
    # ulps relative (fp32 ulp 1.2e-7; fp64's 1e-12 allows for libm differences), no absolute slack.
    "ulps": _over_default({F32: dict(rtol=1e-6, atol=0.0), F64: dict(rtol=1e-12, atol=0.0)}),
    # fp32 transcendental functions on the GPU (libdevice, a few ulps) of values bounded away
    # from zero: the default relative tolerance, no absolute slack.
    "relative": _over_default({F32: dict(rtol=1e-5, atol=0.0)}),
    # sin/cos of |x| up to ~10 in fp32: argument reduction loses a few ulps of the input, which
    # show as an absolute error of the (bounded) output.
    "range_reduction": _over_default({F32: dict(rtol=1e-5, atol=1e-5)}),
    # exp-like functions in fp32: exp(x) amplifies the input's fp32 ulp by |x| (<~5 in the tests).
    "exp_amplified": _over_default({F32: dict(rtol=2e-5, atol=1e-6)}),
    # Statistics of data with a large mean (1e3-1e4 + N(0, 1)) in fp32: the chunk means carry the
    # rounding of large sums, a ~1e-5 relative shift of the deviations; 1e-4 bounds a stable method
    # (E[x^2] - E[x]^2 would miss by orders of magnitude).
    "large_mean": _over_default({F32: dict(rtol=1e-4, atol=1e-6)}),
    # x - mean with a mean of size k (times the scale applied after): centering is exact only to
    # about an ulp of the mean in the statistics dtype (fp32, fp64 for fp64); 4 such ulps on top
    # of the dtype's own atol.
    "centered": _centered,
    # log_softmax of long rows in fp32: it subtracts log(sum of n terms) ~ 12, so its error is
    # relative to that, not to small outputs.
    "log_sum": _over_default({F32: dict(rtol=1e-5, atol=2e-5)}),
    # The sum of a row of n rounded softmax outputs against 1 (n in the thousands).
    "row_sum": _over_default({F32: dict(rtol=1e-4, atol=1e-6), F64: dict(rtol=1e-4, atol=1e-12),
                              BF16: dict(rtol=2e-2, atol=8e-3)}),
    # Against a float64 central-difference reference, whose own error is ~1e-9: fp64 is held to
    # 1e-7 (the other dtypes' default is coarser than the reference's error already).
    "finite_difference": _over_default({F64: dict(rtol=1e-7, atol=1e-8)}),
    # nn layers (Linear, LayerNorm, Conv2d) on N(0, 1) inputs in fp32: sums of up to tens of
    # products and a normalization, compared near zero too: 1e-5 absolute.
    "layer": _over_default({F32: dict(rtol=1e-5, atol=1e-5)}),
    # A gradient that went through bf16 autocast (bf16 operands, bf16 matmul result, fp32 master
    # weights): a few bf16 roundings (8e-3 each) of O(1) values, then a short sum.
    "autocast_bf16": _over_default({BF16: dict(rtol=0.05, atol=0.05)}),
    # scaled_dot_product_attention's output over k keys: "accumulate" in fp32/fp64, and in
    # fp16/bf16 the default plus 2u absolute for the probabilities rounded before P·V (see above).
    "attention": _attention,
    # Attention's gradients against k = max|reference|: 64·u·k (+ the dtype's atol) in fp16/bf16,
    # 1e3·u·k in fp32/fp64, absolute only (see above).
    "attention_grad": _attention_grad,
    # A sum of k values each rounded to the dtype before they are summed (an elementwise loss, then
    # its "sum" reduction): in fp16/bf16 every term may be off by the dtype's atol and those errors
    # add up, k × atol; the relative error is the sum's own rounding, rtol unchanged.
    "rounded_sum": _rounded_sum,
    # k rows, each the result of a chain of ops that round in the dtype (cross_entropy with class
    # probabilities: log_softmax, the smoothed targets, the products, the row sum), then summed:
    # two roundings' worth relative, 2 × rtol, and each row's absolute error adding up, k × atol.
    "rounded_rows": _rounded_rows,
    # Normalized outputs ((x - mean) / std) of data with a mean near 1e4 and std 1 in fp32: the
    # fp32 mean is itself rounded to half an ulp of 1e4 (4.9e-4, in units of the std), which every
    # output carries: 1e-3 absolute, on top of "large_mean"'s 1e-4 relative for the statistics.
    "large_mean_normalized": _over_default({F32: dict(rtol=1e-4, atol=1e-3)}),
    # A norm over thousands of fp32 terms (powers, a long fp32 sum, a root: 2e-5 relative), and
    # gradients scaled by a coefficient computed from that fp32 norm: fp64 gradients too, since
    # the total norm of mixed dtypes is fp32 (as torch's clip_grad_norm_), so fp64 gets fp32's numbers.
    "fp32_norm": _over_default({F32: dict(rtol=2e-5, atol=1e-6), F64: dict(rtol=2e-5, atol=1e-6)}),
    # The total norm after clip_grad_norm_ scaled the gradients, against max_norm: the scaled fp16
    # and bf16 gradients are rounded again (4.9e-4 and 3.9e-3 relative each), and the norm is
    # recomputed in fp32 from them: 1e-3 relative.
    "clipped_norm": _over_default({F32: dict(rtol=1e-3, atol=1e-6)}),
    # Orthonormal rows/columns scaled by sqrt(k) (nn.init.orthogonal_ with gain² = k): their Gram
    # matrix against k·I (see _orthonormal).
    "orthonormal": _orthonormal,
    # A running product of k terms (cumprod) computed in fp32 (fp64 for fp64): 4·k·u relative
    # (see _product).
    "product": _product,
    # A chain of contractions whose intermediate is rounded to fp16/bf16 (einsum of three operands):
    # each rounding of an intermediate product errs by up to u·|term|, and the terms may cancel in
    # the result, so the bound is elementwise in k = the same contraction over |operands| (the sum
    # of |terms|): the dtype's default plus 4·u·k (two roundings, 2x margin). Relative to the
    # result alone (the "rounded_terms" 4x it replaces) was no bound: ~1 draw in 10 exceeded it.
    "product_chain": lambda dtype, k: dict(rtol=TOL[dtype]["rtol"],
                                           atol=TOL[dtype]["atol"] + 4 * UNIT_ROUNDOFF[dtype] * np.asarray(k)),
}
NEEDS_K = {"accumulate", "rounded_terms", "centered", "attention", "attention_grad", "rounded_sum", "rounded_rows",
           "orthonormal", "product", "product_chain"}


def tolerance(dtype, profile="default", k=None) -> dict:
    """``dict(rtol=, atol=)`` of ``profile`` for ``dtype`` (exact for integer and bool dtypes)."""
    if profile not in PROFILES:
        raise KeyError(f"unknown tolerance profile {profile!r}; known: {sorted(PROFILES)}")
    if (k is None) == (profile in NEEDS_K):
        raise TypeError(f"tolerance profile {profile!r} " + ("needs k=" if k is None else "takes no k"))
    if dtype not in TOL:
        return dict(EXACT)
    return PROFILES[profile](dtype, k)


def assert_close(actual, expected, dtype, profile="default", k=None, err_msg=""):
    """Compare a tritensor result (or array) with a NumPy reference computed in float64, to the
    tolerance of ``profile`` for ``dtype``; NaNs must match. ``err_msg`` labels a failure."""
    tol = tolerance(dtype, profile, k)
    a = actual.cpu().numpy() if isinstance(actual, tt.Tensor) else np.asarray(actual)
    a = a.astype(np.float64) if a.dtype == ml_dtypes.bfloat16 else a
    a = np.asarray(a, dtype=np.float64) if a.dtype.kind == "f" else a
    if np.ndim(tol["atol"]) > 0:  # an elementwise bound (a profile scaled by each element's terms)
        e = np.asarray(expected, dtype=np.float64)
        err, bound = np.abs(a - e), tol["atol"] + tol["rtol"] * np.abs(e)
        bad = ~((err <= bound) | (np.isnan(a) & np.isnan(e)))
        if bad.any():
            raise AssertionError(f"{err_msg} {int(bad.sum())} of {bad.size} elements outside the elementwise bound "
                                 f"of profile {profile!r}: worst error/bound {float(np.max(err[bad] / bound[bad])):.3g}")
        return
    if a.dtype.kind in "iub" and np.asarray(expected).dtype.kind in "iub":
        # integers compare exactly as integers: assert_allclose goes through float64, which cannot tell
        # 2**64 - 1 from 2**64 - 2 (uint64 results, hash_tensor's bits)
        np.testing.assert_array_equal(a, np.asarray(expected), err_msg=err_msg, strict=False)
        return
    np.testing.assert_allclose(a, np.asarray(expected), equal_nan=True, err_msg=err_msg, **tol)

