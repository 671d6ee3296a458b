"""The tolerance profiles of tests/tolerances.py, and the rule that kernel tests use them.

A comparison that needs other numbers than the per-dtype defaults names a profile (which says
why) instead of passing ``rtol=``/``atol=`` itself; this file fails when a test does the latter.
"""
import ast
import pathlib

import numpy as np
import pytest

import tritensor as tt
from tolerances import FLOAT_DTYPES, NEEDS_K, PROFILES, TOL, assert_close, tolerance

TESTS_DIR = pathlib.Path(__file__).resolve().parent
# Comparisons that are not one kernel against a per-dtype NumPy reference keep their own numbers:
# whole training steps and collectives across processes (their tolerance is the summation order
# of a reduction over ranks), whole optimizer trajectories against torch's (LBFGS: many steps, each
# a line search, so the bound is on the run, not on one kernel), the numeric suite's SQNR-scaled
# checks, and the Gram-Schmidt kernel's entry-size-relative bounds, each stated at the top of its file.
# test_testing.py passes rtol=/atol= to the function it tests: tt.testing.assert_close's own keywords.
OWN_TOLERANCES = {"comm_helpers.py", "test_ddp.py", "test_ddp_hooks.py", "test_powersgd.py",
                  "test_numeric_suite.py", "test_grad_scaler.py", "test_orthogonalize.py", "test_lbfgs.py",
                  "tolerances.py", "test_testing.py"}
COMPARISONS = {"assert_close", "assert_allclose", "allclose", "isclose"}


def _overrides(path: pathlib.Path) -> list:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in COMPARISONS:
                kws = [k.arg for k in node.keywords]
                if "rtol" in kws or "atol" in kws or None in kws:  # None: a **dict of tolerances
                    found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_test_passes_its_own_tolerance():
    found = [hit for path in sorted(TESTS_DIR.glob("*.py")) if path.name not in OWN_TOLERANCES
             for hit in _overrides(path)]
    assert found == [], "name a profile of tests/tolerances.py instead: " + ", ".join(found)


def test_the_scan_finds_an_override(tmp_path):
    bad = tmp_path / "test_bad.py"
    bad.write_text("assert_close(x, y, dtype, atol=1e-3)\nnp.testing.assert_allclose(a, b, **tol)\n"
                   "assert_close(x, y, dtype, 'accumulate', k=3)\n")
    assert _overrides(bad) == ["test_bad.py:1", "test_bad.py:2"]


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profile_gives_numbers_for_every_float_dtype(name):
    k = 7 if name in NEEDS_K else None
    for dtype in FLOAT_DTYPES:
        tol = tolerance(dtype, name, k)
        assert set(tol) == {"rtol", "atol"} and all(v >= 0 for v in tol.values()), (name, dtype)


def test_profile_numbers():
    assert tolerance(tt.float32) == TOL[tt.float32]
    assert tolerance(tt.int64, "ulps") == dict(rtol=0.0, atol=0.0)  # integers are exact in every profile
    assert tolerance(tt.float16, "accumulate", 1) == TOL[tt.float16]  # 16 * u is below fp16's atol
    assert tolerance(tt.float32, "accumulate", 16)["atol"] == pytest.approx(16 * 4 * 2.0**-24)  # pairwise term
    assert tolerance(tt.float32, "accumulate", 10_000)["atol"] == pytest.approx(2 * 10_000 * 2.0**-24)  # FMA loop
    assert tolerance(tt.bfloat16, "rounded_terms", 4) == dict(rtol=4 * 8e-3, atol=4 * 8e-3)
    assert tolerance(tt.float32, "large_mean") == dict(rtol=1e-4, atol=1e-6)
    assert tolerance(tt.float64, "large_mean") == TOL[tt.float64]  # only fp32 changes
    # attention: "accumulate" over S keys in fp32/fp64; fp16/bf16 add 2u for P rounded before P·V
    assert tolerance(tt.float32, "attention", 127) == tolerance(tt.float32, "accumulate", 127)
    assert tolerance(tt.float16, "attention", 19) == dict(rtol=1e-3, atol=1e-3 + 2 * 2.0**-11)
    assert tolerance(tt.bfloat16, "attention", 19) == dict(rtol=8e-3, atol=8e-3 + 2 * 2.0**-8)
    # attention gradients: absolute, c·u·max|ref| (c = 64 in fp16/bf16, plus their atol; 1e3 in fp32/fp64)
    assert tolerance(tt.float16, "attention_grad", 2.0) == dict(rtol=0.0, atol=64 * 2.0**-11 * 2.0 + 1e-3)
    assert tolerance(tt.float32, "attention_grad", 2.0) == dict(rtol=0.0, atol=1e3 * 2.0**-24 * 2.0)
    # the nn layers' and losses' profiles: the numbers those tests passed themselves before they had names
    assert tolerance(tt.float16, "rounded_sum", 35) == dict(rtol=1e-3, atol=35 * 1e-3)
    assert tolerance(tt.bfloat16, "rounded_rows", 15) == dict(rtol=2 * 8e-3, atol=15 * 8e-3)
    assert tolerance(tt.float32, "large_mean_normalized") == dict(rtol=1e-4, atol=1e-3)
    assert tolerance(tt.float64, "fp32_norm") == tolerance(tt.float32, "fp32_norm") == dict(rtol=2e-5, atol=1e-6)
    assert tolerance(tt.float16, "fp32_norm") == TOL[tt.float16]
    assert tolerance(tt.float32, "clipped_norm") == dict(rtol=1e-3, atol=1e-6)
    assert tolerance(tt.float16, "orthonormal", 9.0) == dict(rtol=1e-7, atol=2e-2 * 9.0)  # rtol: NumPy's default
    assert tolerance(tt.float64, "orthonormal", 9.0) == dict(rtol=1e-7, atol=1e-12 * 9.0)
    # the math and scan ops' profiles: cumprod's 4·k·u relative (fp32 accumulation for fp16/bf16 too)
    assert tolerance(tt.float32, "product", 500) == dict(rtol=4 * 500 * 2.0**-24, atol=1e-6)
    assert tolerance(tt.float16, "product", 500) == TOL[tt.float16]  # 4·500·2^-24 is below fp16's rtol
    assert tolerance(tt.float64, "product", 13) == dict(rtol=1e-10, atol=1e-12)


def test_profile_errors():
    with pytest.raises(KeyError, match="unknown tolerance profile 'loose'"):
        tolerance(tt.float32, "loose")
    with pytest.raises(TypeError, match="'accumulate' needs k="):
        tolerance(tt.float32, "accumulate")
    with pytest.raises(TypeError, match="'ulps' takes no k"):
        tolerance(tt.float32, "ulps", 3)


def test_assert_close_applies_the_profile():
    x = tt.tensor([1.0, 2.0])
    assert_close(x, np.array([1.0, 2.0 + 3e-5]), tt.float32, "exp_amplified")  # within 1e-6 + 2e-5 * 2
    with pytest.raises(AssertionError):
        assert_close(x, np.array([1.0, 2.0 + 3e-5]), tt.float32)  # not within the default 1e-6 + 1e-5 * 2
    assert_close(x, np.array([1.0, 2.0 + 1e-3]), tt.float32, "accumulate", k=1e10)  # atol 16 * 1e5 * 2^-24
