"""The window functions (core/ops/windows.py, triton_kernels/windows.py) against NumPy/SciPy-style
float64 formulas, periodic and symmetric, over dtypes and odd lengths, with torch's errors."""
import numpy as np
import pytest

import tritensor as tt
from tolerances import FLOAT_DTYPES, assert_close


def _cosine(n, periodic, a):
    if n == 1:
        return np.ones(1)
    N = n if periodic else n - 1
    k = np.arange(n)
    return sum((-1) ** i * c * np.cos(2 * np.pi * i * k / N) for i, c in enumerate(a))


def _bartlett(n, periodic):
    if n == 1:
        return np.ones(1)
    N = n if periodic else n - 1
    return 1 - np.abs(2 * np.arange(n) / N - 1)


def _kaiser(n, periodic, beta):
    if n == 1:
        return np.ones(1)
    N = n if periodic else n - 1
    r = 2 * np.arange(n) / N - 1
    return np.i0(beta * np.sqrt(np.clip(1 - r * r, 0, None))) / np.i0(beta)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("n", [0, 1, 2, 7, 16])
def test_windows_match_float64_formulas(dtype, n):
    for periodic in (True, False):
        cases = [
            (tt.hann_window(n, periodic, dtype=dtype), _cosine(n, periodic, (0.5, 0.5))),
            (tt.hamming_window(n, periodic, dtype=dtype), _cosine(n, periodic, (0.54, 0.46))),
            (tt.hamming_window(n, periodic, 0.6, 0.3, dtype=dtype), _cosine(n, periodic, (0.6, 0.3))),
            (tt.blackman_window(n, periodic, dtype=dtype), _cosine(n, periodic, (0.42, 0.5, 0.08))),
            (tt.bartlett_window(n, periodic=periodic, dtype=dtype), _bartlett(n, periodic)),
            (tt.kaiser_window(n, periodic, dtype=dtype), _kaiser(n, periodic, 12.0)),
            (tt.kaiser_window(n, periodic, beta=3.5, dtype=dtype), _kaiser(n, periodic, 3.5)),
        ]
        for got, want in cases:
            assert got.dtype is dtype and tuple(got.shape) == (n,)
            assert got.device.type == tt.get_default_device().type
            assert_close(got, want, dtype, "ulps" if dtype in (tt.float32, tt.float64) else "default")


def test_windows_defaults_and_errors_follow_torch():
    assert tt.hann_window(4).dtype is tt.float32
    tt.set_default_dtype(tt.float64)
    try:
        assert tt.kaiser_window(4).dtype is tt.float64  # the default dtype, read at call time
    finally:
        tt.set_default_dtype(tt.float32)
    w = tt.hann_window(3, requires_grad=True)
    assert w.requires_grad and w.is_leaf
    assert tt.bartlett_window(5, device="cpu").device == tt.device("cpu")
    with pytest.raises(RuntimeError, match="hann_window requires non-negative window_length, got window_length=-1"):
        tt.hann_window(-1)
    with pytest.raises(RuntimeError, match="hamming_window expects floating point dtypes, got: "
                                           r"TensorOptions\(dtype=long int"):
        tt.hamming_window(5, dtype=tt.int64)
    with pytest.raises(TypeError, match=r"blackman_window\(\): argument 'window_length' must be int, not float"):
        tt.blackman_window(5.0)
    with pytest.raises(TypeError, match=r"kaiser_window\(\): argument 'periodic' must be bool, not int"):
        tt.kaiser_window(5, 1)
