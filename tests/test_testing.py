"""tt.testing.assert_close and make_tensor: torch.testing's tolerances, rules and messages.

The expected messages are torch 2.13's own, as ``torch.testing.assert_close`` printed them for the
same inputs (with ``torch.`` read as ``tritensor.``).
"""
import math

import numpy as np
import pytest

import tritensor as tt
from tritensor.testing import assert_close, make_tensor
from tolerances import FLOAT_DTYPES, NP
from tolerances import assert_close as check


def _fails(exc, text, *args, **kwargs):
    with pytest.raises(exc) as info:
        assert_close(*args, **kwargs)
    assert str(info.value) == text


def test_tensor_mismatch_message():
    _fails(AssertionError, "Tensor-likes are not close!\n\nMismatched elements: 1 / 3 (33.3%)\n"
                           "Greatest absolute difference: 0.5 at index (1,) (up to 1e-05 allowed)\n"
                           "Greatest relative difference: 0.20000000298023224 at index (1,) (up to 1.3e-06 allowed)",
           tt.tensor([1.0, 2.0, 3.0]), tt.tensor([1.0, 2.5, 3.0]))
    _fails(AssertionError, "Tensor-likes are not close!\n\nMismatched elements: 1 / 4 (25.0%)\n"
                           "Greatest absolute difference: 1.0 at index (1, 1) (up to 1e-05 allowed)\n"
                           "Greatest relative difference: 0.20000000298023224 at index (1, 1) (up to 1.3e-06 allowed)",
           tt.tensor([[1.0, 2.0], [3.0, 4.0]]), tt.tensor([[1.0, 2.0], [3.0, 5.0]]))
    # integers compare exactly: "not equal", no tolerances shown, the relative difference in float32
    _fails(AssertionError, "Tensor-likes are not equal!\n\nMismatched elements: 1 / 2 (50.0%)\n"
                           "Greatest absolute difference: 2 at index (1,)\n"
                           "Greatest relative difference: 0.3333333432674408 at index (1,)",
           tt.tensor([1, 4], dtype=tt.int32), tt.tensor([1, 6], dtype=tt.int32))
    _fails(AssertionError, "Tensor-likes are not equal!\n\nMismatched elements: 1 / 2 (50.0%)\n"
                           "Greatest absolute difference: 1 at index (1,)\nGreatest relative difference: 1.0 at index (1,)",
           tt.tensor([True, False]), tt.tensor([True, True]))
    # many mismatches: the first greatest, and the count over all
    a = tt.tensor([[1.0, 2.0, 3.0]] * 100)
    b = tt.tensor([[1.0, 2.0, 3.5]] * 100)
    _fails(AssertionError, "Tensor-likes are not close!\n\nMismatched elements: 100 / 300 (33.3%)\n"
                           "Greatest absolute difference: 0.5 at index (0, 2) (up to 1e-05 allowed)\n"
                           "Greatest relative difference: 0.1428571492433548 at index (0, 2) (up to 1.3e-06 allowed)",
           a, b)


def test_nan_inf_and_zero():
    nan, inf = float("nan"), float("inf")
    _fails(AssertionError, "Tensor-likes are not close!\n\nMismatched elements: 1 / 1 (100.0%)\n"
                           "Greatest absolute difference: nan at index (0,) (up to 1e-05 allowed)\n"
                           "Greatest relative difference: nan at index (0,) (up to 1.3e-06 allowed)",
           tt.tensor([nan]), tt.tensor([nan]))
    assert_close(tt.tensor([1.0, nan]), tt.tensor([1.0, nan]), equal_nan=True)
    assert_close(tt.tensor([1.0, inf]), tt.tensor([1.0, inf]))
    _fails(AssertionError, "Tensor-likes are not close!\n\nMismatched elements: 1 / 2 (50.0%)\n"
                           "Greatest absolute difference: inf at index (1,) (up to 1e-05 allowed)\n"
                           "Greatest relative difference: nan at index (1,) (up to 1.3e-06 allowed)",
           tt.tensor([1.0, inf]), tt.tensor([1.0, -inf]))
    _fails(AssertionError, "Tensor-likes are not close!\n\nMismatched elements: 1 / 2 (50.0%)\n"
                           "Greatest absolute difference: 2.0 at index (0,) (up to 1e-05 allowed)\n"
                           "Greatest relative difference: 1.0 at index (0,) (up to 1.3e-06 allowed)",
           tt.tensor([0.0, 1.0]), tt.tensor([2.0, 1.0]))
    assert_close(tt.tensor([]), tt.tensor([]))


MANTISSA_BITS = {tt.float16: 10, tt.bfloat16: 7, tt.float32: 23, tt.float64: 52}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_default_tolerances_per_dtype(dtype):
    """Values a whole number of ulps from exactly representable ones (so nothing rounds): the last
    ulp step inside ``atol + rtol * |expected|`` passes, the next one fails."""
    rtol, atol = {tt.float16: (1e-3, 1e-5), tt.bfloat16: (1.6e-2, 1e-5), tt.float32: (1.3e-6, 1e-5),
                  tt.float64: (1e-7, 1e-7)}[dtype]
    for base in (1.0, -4.0, 3.0):
        ulp = 2.0 ** (math.floor(math.log2(abs(base))) - MANTISSA_BITS[dtype])
        tol = atol + rtol * abs(base)
        k = math.floor(tol / ulp)
        expected = tt.tensor([base], dtype=dtype)
        assert_close(tt.tensor([base + k * ulp], dtype=dtype), expected)
        with pytest.raises(AssertionError, match=rf"\(up to {atol} allowed\)\n.*\(up to {rtol} allowed\)"):
            assert_close(tt.tensor([base + (k + 1) * ulp], dtype=dtype), expected)


def test_non_contiguous_and_broadcast_views():
    base = tt.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert_close(base.t(), tt.tensor([[1.0, 3.0], [2.0, 4.0]]))
    assert_close(tt.tensor([[1.0], [2.0]]).expand(2, 3), tt.tensor([[1.0] * 3, [2.0] * 3]))
    _fails(AssertionError, "The values for attribute 'stride()' do not match: (1, 0) != (2, 1).",
           tt.tensor([1.0, 2.0]).reshape(2, 1).expand(2, 2), tt.tensor([[1.0, 1.0], [2.0, 2.0]]), check_stride=True)


def test_attributes():
    _fails(AssertionError, "The values for attribute 'dtype' do not match: tritensor.float32 != tritensor.float64.",
           tt.tensor([1.0]), tt.tensor([1.0], dtype=tt.float64))
    _fails(AssertionError, "The values for attribute 'shape' do not match: tritensor.Size([2]) != tritensor.Size([1]).",
           tt.tensor([1.0, 2.0]), tt.tensor([1.0]))
    assert_close(tt.tensor([1.0]), tt.tensor([1], dtype=tt.int64), check_dtype=False)
    _fails(AssertionError, "Tensor-likes are not close!\n\nMismatched elements: 1 / 2 (50.0%)\n"
                           "Greatest absolute difference: 0.5 at index (1,) (up to 1e-05 allowed)\n"
                           "Greatest relative difference: 0.20000000298023224 at index (1,) (up to 1.3e-06 allowed)",
           tt.tensor([1, 2]), tt.tensor([1.0, 2.5]), check_dtype=False)
    if tt.cuda.is_available():
        _fails(AssertionError, "The values for attribute 'device' do not match: cpu != cuda:0.",
               tt.tensor([1.0], device="cpu"), tt.tensor([1.0], device="cuda"))
        assert_close(tt.tensor([1.0], device="cpu"), tt.tensor([1.0], device="cuda"), check_device=False)


def test_tolerances_given():
    assert_close(tt.tensor([1.0]), tt.tensor([1.05]), rtol=0.1, atol=0.0)
    _fails(ValueError, "Both 'rtol' and 'atol' must be either specified or omitted, but got no atol.",
           tt.tensor([1.0]), tt.tensor([1.0]), rtol=1e-3)
    _fails(ValueError, "Both 'rtol' and 'atol' must be either specified or omitted, but got no rtol.",
           tt.tensor([1.0]), tt.tensor([1.0]), atol=1e-3)


def test_scalars_and_zero_dim():
    _fails(AssertionError, "Scalars are not close!\n\nExpected 2.0 but got 1.0.\nAbsolute difference: 1.0 "
                           "(up to 1e-05 allowed)\nRelative difference: 0.5 (up to 1.3e-06 allowed)",
           tt.tensor(1.0), tt.tensor(2.0))
    _fails(AssertionError, "Scalars are not close!\n\nExpected 1.5 but got 1.0.\nAbsolute difference: 0.5 "
                           "(up to 1e-07 allowed)\nRelative difference: 0.3333333333333333 (up to 1e-07 allowed)",
           1.0, 1.5)
    _fails(AssertionError, "Scalars are not equal!\n\nExpected 2 but got 1.\nAbsolute difference: 1\n"
                           "Relative difference: 0.5", 1, 2)
    _fails(AssertionError, "Scalars are not close!\n\nExpected 0.0 but got 2.0.\nAbsolute difference: 2.0 "
                           "(up to 1e-07 allowed)\nRelative difference: inf (up to 1e-07 allowed)", 2.0, 0.0)
    _fails(AssertionError, "Booleans mismatch: True is not False", True, False)
    _fails(AssertionError, "The (d)types do not match: <class 'float'> != <class 'int'>.", 1.0, 1)
    assert_close(1, 1.0, check_dtype=False)
    assert_close(None, None)
    _fails(AssertionError, "None mismatch: None is not 1", None, 1)
    assert_close(math.pi, math.pi + 1e-9)


def test_containers():
    _fails(AssertionError, "Scalars are not close!\n\nExpected 3.0 but got 2.0.\nAbsolute difference: 1.0 "
                           "(up to 1e-05 allowed)\nRelative difference: 0.3333333333333333 (up to 1.3e-06 allowed)"
                           "\n\nThe failure occurred for item [1]",
           [tt.tensor(1.0), tt.tensor(2.0)], [tt.tensor(1.0), tt.tensor(3.0)])
    _fails(AssertionError, "Scalars are not close!\n\nExpected 3.0 but got 1.0.\nAbsolute difference: 2.0 "
                           "(up to 1e-05 allowed)\nRelative difference: 0.6666666666666666 (up to 1.3e-06 allowed)"
                           "\n\nThe failure occurred for item ['a']",
           {"a": tt.tensor(1.0)}, {"a": tt.tensor(3.0)})
    _fails(AssertionError, "Scalars are not close!\n\nExpected 2.5 but got 2.0.\nAbsolute difference: 0.5 "
                           "(up to 1e-07 allowed)\nRelative difference: 0.2 (up to 1e-07 allowed)"
                           "\n\nThe failure occurred for item [0][1][0]", [[1.0, [2.0]]], [[1.0, [2.5]]])
    _fails(AssertionError, "The length of the sequences mismatch: 2 != 3", [1, 2], [1, 2, 3])
    _fails(AssertionError, "The keys of the mappings do not match:\nMissing keys in the actual mapping: ['b']\n"
                           "Additional keys in the actual mapping: ['a']", {"a": 1}, {"b": 1})
    assert_close((1.0, 2.0), [1.0, 2.0])
    _fails(TypeError, f"No comparison pair was able to handle inputs of type {tt.Tensor} and <class 'list'>.",
           tt.tensor([1.0]), [1.0])
    _fails(TypeError, "No comparison pair was able to handle inputs of type <class 'str'> and <class 'str'>.",
           "a", "a")


def test_msg_replaces_or_edits():
    _fails(AssertionError, "boom", [tt.tensor(1.0)], [tt.tensor(3.0)], msg="boom")
    with pytest.raises(AssertionError) as info:
        assert_close(tt.tensor([1.0]), tt.tensor([2.0]), msg=lambda m: m + "!!")
    assert str(info.value).startswith("Tensor-likes are not close!") and str(info.value).endswith("allowed)!!")


def test_numpy_arrays():
    _fails(AssertionError, "Tensor-likes are not close!\n\nMismatched elements: 1 / 2 (50.0%)\n"
                           "Greatest absolute difference: 0.5 at index (1,) (up to 1e-07 allowed)\n"
                           "Greatest relative difference: 0.2 at index (1,) (up to 1e-07 allowed)",
           np.array([1.0, 2.0]), np.array([1.0, 2.5]))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [tt.int32, tt.int64, tt.bool])
def test_make_tensor(dtype):
    tt.manual_seed(3)
    t = make_tensor(4, 5, dtype=dtype)
    tt.manual_seed(3)
    again = make_tensor((4, 5), dtype=dtype)
    assert t.shape == (4, 5) and t.dtype is dtype
    check(again.cpu().numpy().astype(np.float64), t.cpu().numpy().astype(np.float64), tt.float64, "exact")
    v = t.cpu().numpy().astype(np.float64)
    if dtype is tt.bool:
        assert set(np.unique(v)) <= {0.0, 1.0}
    elif dtype.is_floating_point:
        assert v.min() >= -9 and v.max() <= 9 and v.std() > 1  # spread over the range, not constant
    else:
        assert v.min() >= -9 and v.max() <= 9 and (v == np.round(v)).all()
    nc = make_tensor(3, 4, dtype=dtype, noncontiguous=True, low=1 if dtype is not tt.bool else None)
    assert nc.shape == (3, 4) and not nc.is_contiguous()
    if dtype is not tt.bool:
        nz = make_tensor(50, dtype=dtype, low=-1, high=1, exclude_zero=True)
        assert (nz.cpu().numpy() != 0).all()


def test_make_tensor_errors():
    with pytest.raises(ValueError, match="`requires_grad=True` is not supported for boolean and integral dtypes"):
        make_tensor(2, dtype=tt.int64, requires_grad=True)
    with pytest.raises(ValueError, match="`low` must be less than `high`"):
        make_tensor(2, dtype=tt.float32, low=3, high=1)
    g = make_tensor(2, dtype=tt.float32, requires_grad=True)
    assert g.requires_grad and g.is_leaf
