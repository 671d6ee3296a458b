"""F.scaled_mm (torch 2.13's float8 GEMM with decoding scales), TensorWise and RowWise recipes, against float64
NumPy over ml_dtypes' decoded operands: odd shapes, strided and column-major operands, mixed e4m3fn/e5m2
operands, bias, float32/bfloat16/float16/float8 outputs, empty sizes, and torch's errors."""
import ml_dtypes
import numpy as np
import pytest

import tritensor as tt
import tritensor.nn.functional as F
from test_dtypes_float8 import expected_codes
from tolerances import assert_close

TW, RW = F.ScalingType.TensorWise, F.ScalingType.RowWise
rng = np.random.default_rng(5)


def _f8(shape, d, layout="contiguous"):
    """A float8 tensor of normal values in ``layout`` and its float64 values."""
    if layout == "column_major":  # what torch's CUDA path wants for mat_b
        base = rng.standard_normal(shape[::-1]).astype(np.float32).astype(d.np)
        return tt.tensor(base).t(), base.T.astype(np.float64)
    if layout == "sliced":
        base = rng.standard_normal((shape[0] * 2, shape[1] + 3)).astype(np.float32).astype(d.np)
        return tt.tensor(base)[::2, 1:shape[1] + 1], base[::2, 1:shape[1] + 1].astype(np.float64)
    base = rng.standard_normal(shape).astype(np.float32).astype(d.np)
    return tt.tensor(base), base.astype(np.float64)


def _host(t):
    return t.cpu().numpy()


@pytest.mark.parametrize("recipe", [TW, RW], ids=["tensorwise", "rowwise"])
@pytest.mark.parametrize("fmts,layouts", [((tt.float8_e4m3fn, tt.float8_e4m3fn), ("contiguous", "column_major")),
                                          ((tt.float8_e5m2, tt.float8_e4m3fn), ("sliced", "contiguous"))],
                         ids=["e4m3fn-colmajor", "e5m2-sliced"])
def test_scaled_mm_matches_numpy(recipe, fmts, layouts):
    M, K, N = 17, 40, 9
    a, ra = _f8((M, K), fmts[0], layouts[0])
    b, rb = _f8((K, N), fmts[1], layouts[1])
    if recipe is TW:
        sa, sb = tt.tensor(0.75), tt.tensor([2.5])
        ref_sa, ref_sb = 0.75, 2.5
    else:
        ref_sa = rng.uniform(0.5, 2, (M, 1)).astype(np.float32)
        ref_sb = rng.uniform(0.5, 2, (1, N)).astype(np.float32)
        sa, sb = tt.tensor(ref_sa), tt.tensor(ref_sb)
    bias32 = rng.standard_normal(N).astype(np.float32)
    ref = (ra @ rb) * np.float64(ref_sa) * np.float64(ref_sb)
    out32 = F.scaled_mm(a, b, sa, recipe, sb, recipe, output_dtype=tt.float32)
    assert out32.dtype is tt.float32 and out32.shape == (M, N)
    assert_close(out32, ref, tt.float32, profile="accumulate", k=K)
    for odt, bias in ((tt.bfloat16, tt.tensor(bias32).to(tt.bfloat16)), (tt.float16, tt.tensor(bias32))):
        out = F.scaled_mm(a, b, sa, recipe, sb, recipe, bias=bias, output_dtype=odt)
        assert out.dtype is odt
        assert_close(out, ref + _host(bias.double()), odt)
    # the default output is bfloat16; a float8 output is the float32 result rounded by the float8 encoder
    assert F.scaled_mm(a, b, sa, recipe, sb, recipe).dtype is tt.bfloat16
    out8 = F.scaled_mm(a, b, [sa], [recipe], sb, recipe, output_dtype=tt.float8_e4m3fn)
    assert out8.dtype is tt.float8_e4m3fn
    np.testing.assert_array_equal(_host(out8.view(tt.uint8)), expected_codes(_host(out32), tt.float8_e4m3fn))
    assert F.scaled_mm(a, b, sa, recipe, sb, recipe, output_dtype=None).dtype is fmts[0]


def test_scaled_mm_empty_sizes():
    s = tt.tensor(1.0)
    for M, K, N in ((0, 8, 5), (4, 8, 0), (3, 0, 5)):
        a = tt.zeros(M, K, dtype=tt.float8_e4m3fn)
        b = tt.zeros(K, N, dtype=tt.float8_e8m0fnu if K == 0 else tt.float8_e4m3fn)
        out = F.scaled_mm(a, b, s, TW, s, TW, output_dtype=tt.float32)
        assert out.shape == (M, N)
        np.testing.assert_array_equal(_host(out), np.zeros((M, N), np.float32))  # K = 0: the empty sum


def test_scaled_mm_errors():
    a = tt.zeros(16, 32, dtype=tt.float8_e4m3fn)
    b = tt.zeros(32, 8, dtype=tt.float8_e4m3fn)
    s = tt.tensor(0.5)
    with pytest.raises(ValueError, match="mat_a must be a matrix"):
        F.scaled_mm(a[0], b, s, TW, s, TW)
    with pytest.raises(ValueError, match=r"mat_a and mat_b shapes cannot be multiplied \(16x32 and 31x8\)"):
        F.scaled_mm(a, b[:31], s, TW, s, TW)
    msg = (r"Invalid scaling configuration.\n- For TensorWise scaling, a and b should be float8, scales should be "
           r"float and singletons.\n- For RowWise scaling, a and b should be float8, scales should be float, "
           r"scale_a should be \(16, 1\) and scale_b should be \(1, 8\), and both should be contiguous.\nGot "
           r"mat_a.dtype\(\)=Float8_e4m3fn, scale_a.dtype\(\)=Float, scale_a.size\(\)=\[\], scale_a.stride\(\)=\[\]")
    with pytest.raises(ValueError, match=msg):
        F.scaled_mm(a, b, s, TW, s, RW)  # recipes that differ
    for bad in (lambda: F.scaled_mm(a, b, s.double(), TW, s, TW), lambda: F.scaled_mm(a, b, tt.ones(2), TW, s, TW),
                lambda: F.scaled_mm(a.float(), b, s, TW, s, TW),
                lambda: F.scaled_mm(a, b, tt.ones(16), RW, tt.ones(1, 8), RW),
                lambda: F.scaled_mm(a, b, tt.ones(16, 1), RW, tt.ones(8, 1), RW)):
        with pytest.raises(ValueError, match="Invalid scaling configuration"):
            bad()
    with pytest.raises(ValueError, match="Bias must be size 8 but got 7"):
        F.scaled_mm(a, b, s, TW, s, TW, bias=tt.ones(7))
    with pytest.raises(ValueError, match="Bias must be Float32 or BFloat16 or Half, but got Double"):
        F.scaled_mm(a, b, s, TW, s, TW, bias=tt.ones(8, dtype=tt.float64))
    with pytest.raises(NotImplementedError, match="block-scaled recipe ScalingType.BlockWise1x32"):
        F.scaled_mm(a, b, s, F.ScalingType.BlockWise1x32, s, F.ScalingType.BlockWise1x32)
    with pytest.raises(NotImplementedError, match="SWIZZLE_32_4_4"):
        F.scaled_mm(a, b, s, TW, s, TW, swizzle_a=F.SwizzleType.SWIZZLE_32_4_4)
    with pytest.raises(TypeError, match="scale_recipe_a must be a ScalingType"):
        F.scaled_mm(a, b, s, 0, s, TW)


def test_scaling_enums_are_torchs():
    assert [(m.name, m.value) for m in F.ScalingType] == [
        ("TensorWise", 0), ("RowWise", 1), ("BlockWise1x16", 2), ("BlockWise1x32", 3), ("BlockWise1x128", 4),
        ("BlockWise128x128", 5)]
    assert [(m.name, m.value) for m in F.SwizzleType] == [("NO_SWIZZLE", 0), ("SWIZZLE_32_4_4", 1)]
    assert ml_dtypes.float8_e4m3fn is tt.float8_e4m3fn.np.type
