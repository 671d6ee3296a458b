"""histc (triton_kernels/histc.py, core/ops/histc.py) against NumPy's histogram: every float dtype and
layout, the range taken from the data, values outside the range, the maximum in the last bin, errors."""
import zlib

import numpy as np
import pytest

import tritensor as tt
from layouts import LAYOUTS, check_layout, make
from tolerances import FLOAT_DTYPES, assert_close


@pytest.fixture(autouse=True)
def _reseed(request):
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def _normal(shape):
    return RNG.standard_normal(shape) * 2


def _np_histc(ref, bins, lo, hi):
    flat = ref.reshape(-1)
    return np.histogram(flat[(flat >= lo) & (flat <= hi)], bins=bins, range=(lo, hi))[0].astype(np.float64)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_histc_matches_numpy(dtype, layout):
    x, ref = make((7, 33), dtype, layout, _normal)
    check_layout(x, layout)
    out = tt.histc(x, bins=13, min=-2.5, max=3.0)  # some values fall outside: not counted
    assert out.dtype is dtype and out.shape == (13,)
    assert_close(out, _np_histc(ref, 13, -2.5, 3.0), dtype, "exact")  # counts below 256: exact in every dtype
    auto = x.histc(bins=7)  # min == max: the data's own range
    assert_close(auto, _np_histc(ref, 7, ref.min(), ref.max()), dtype, "exact")
    assert float(auto.sum()) == x.numel()  # the maximum lands in the last bin


def test_histc_edges_and_errors():
    assert tt.histc(tt.tensor([2.0, 2.0]), bins=4).tolist() == [0, 0, 2, 0]  # equal data: widened by 1
    assert tt.histc(tt.tensor([-1.0, 0.0, 1.0, 3.0, 4.0]), bins=3, min=0, max=3).tolist() == [1, 1, 1]
    assert tt.histc(tt.tensor([0.5, float("nan")]), bins=2, min=0, max=1).tolist() == [0, 1]  # NaN not counted
    assert tt.histc(tt.zeros(0), bins=4).tolist() == [0, 0, 0, 0]
    big = tt.tensor(np.linspace(0, 1, 5000))
    assert tt.histc(big, bins=10).tolist() == np.histogram(np.linspace(0, 1, 5000), bins=10)[0].tolist()
    with pytest.raises(RuntimeError, match="bins must be > 0, but got 0"):
        tt.histc(tt.ones(3), bins=0)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        tt.histc(tt.ones(3), bins=4, min=3, max=0)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        tt.histc(tt.tensor([1, 2]), bins=4)
    with pytest.raises(RuntimeError, match=r"range of \[1, inf\] is not finite"):
        tt.histc(tt.tensor([1.0, 2.0, float("inf")]), bins=4)
