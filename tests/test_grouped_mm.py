"""``F.grouped_mm`` (triton_kernels/grouped_mm.py: every group in one launch) against float64 NumPy
products group by group, in its four groupings (2-D x 3-D by rows, 3-D x 3-D batched, 2-D x 2-D by
K, 3-D x 2-D by columns), over dtypes, odd and empty groups and strided operands; torch's checks.
No gradient: torch's _grouped_mm derivative is CUDA-only (and not built here)."""
import numpy as np
import pytest

import tritensor as tt
import tritensor.nn.functional as F
from layouts import make
from tolerances import FLOAT_DTYPES, assert_close

rng = np.random.default_rng(9)


pytestmark = pytest.mark.usefixtures("ieee_fp32_matmul")


def _offs(ends):
    return tt.tensor(np.array(ends, dtype=np.int32))


def _ref(a, b, ends):
    bounds = list(zip([0] + list(ends[:-1]), ends)) if ends is not None else None
    if a.ndim == 3 and b.ndim == 3:
        return a @ b
    if a.ndim == 2 and b.ndim == 3:
        out = np.zeros((a.shape[0], b.shape[2]))
        for g, (lo, hi) in enumerate(bounds):
            out[lo:hi] = a[lo:hi] @ b[g]
        return out
    if a.ndim == 2 and b.ndim == 2:
        return np.stack([a[:, lo:hi] @ b[lo:hi] for lo, hi in bounds])
    out = np.zeros((a.shape[1], b.shape[1]))
    for g, (lo, hi) in enumerate(bounds):
        out[:, lo:hi] = a[g] @ b[:, lo:hi]
    return out


# (a shape, b shape, group ends): an empty group, a last group short of the extent, tiles that
# straddle group bounds, and several K steps of the kernel (K = 40 > 32)
CASES = [((37, 40), (4, 40, 19), [5, 5, 23, 30]),
         ((3, 17, 9), (3, 9, 21), None),
         ((18, 45), (45, 7), [0, 20, 45]),
         ((3, 11, 13), (13, 40), [17, 17, 38])]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{len(c[0])}dx{len(c[1])}d")
def test_grouped_mm_matches_numpy(case, dtype):
    ashape, bshape, ends = case
    # fp32 reads a transposed (column-major) A and a sliced B: the kernel walks strides
    a, ar = make(ashape, dtype, "transposed" if dtype == tt.float32 else "contiguous",
                 lambda s: rng.standard_normal(s))
    b, br = make(bshape, dtype, "sliced" if dtype == tt.float32 else "contiguous", lambda s: rng.standard_normal(s))
    out = F.grouped_mm(a, b, offs=None if ends is None else _offs(ends))
    expected = _ref(ar, br, ends)
    assert out.dtype == dtype and out.shape == expected.shape
    assert_close(out, expected, dtype, "accumulate", k=ashape[-1])


def test_empty_operands_and_out_dtype():
    out = F.grouped_mm(tt.zeros(0, 8), tt.zeros(2, 8, 3), offs=_offs([0, 0]))
    assert out.shape == (0, 3)
    out = F.grouped_mm(tt.ones(2, 0), tt.ones(0, 3), offs=_offs([0, 0]))
    assert_close(out, np.zeros((2, 2, 3)), tt.float32)
    a, b = tt.ones(2, 4, 4, dtype=tt.bfloat16), tt.ones(2, 4, 4, dtype=tt.bfloat16)
    assert_close(F.grouped_mm(a, b, out_dtype=tt.bfloat16), np.full((2, 4, 4), 4.0), tt.bfloat16)


def test_errors_as_torch(no_launch):
    a, b = tt.zeros(16, 8), tt.zeros(3, 8, 8)
    offs = _offs([3, 8, 16])
    with pytest.raises(RuntimeError, match="Have to provide offsets if there is a 2d matrix"):
        F.grouped_mm(a, b)
    with pytest.raises(RuntimeError, match="Have to provide offsets if there is a 2d matrix"):
        F.grouped_mm(tt.zeros(3, 16, 8), b, offs=offs)
    with pytest.raises(RuntimeError, match="Offsets have to be int32"):
        F.grouped_mm(a, b, offs=tt.tensor(np.array([3, 8, 16])))
    with pytest.raises(RuntimeError, match="Bias not supported yet"):
        F.grouped_mm(a, b, offs=offs, bias=tt.zeros(3, 8))
    with pytest.raises(RuntimeError, match="Grouped gemm output dtype must match `mat_a` dtype"):
        F.grouped_mm(a, b, offs=offs, out_dtype=tt.float64)
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype"):
        F.grouped_mm(a, b.double(), offs=offs)
    with pytest.raises(RuntimeError, match="mat_a must be 2d or 3d, got 1d"):
        F.grouped_mm(tt.zeros(8), b, offs=offs)
    with pytest.raises(RuntimeError, match="contraction dimension"):
        F.grouped_mm(tt.zeros(16, 5), b, offs=offs)
    with pytest.raises(RuntimeError, match=r"one entry per group \(3\), got 2"):
        F.grouped_mm(a, b, offs=_offs([3, 8]))
    with pytest.raises(TypeError, match="'mat_b'"):
        F.grouped_mm(a, np.zeros((3, 8, 8)), offs=offs)


def test_host_offsets_out_of_order_or_past_the_extent_are_refused():
    a, b = tt.zeros(16, 8), tt.zeros(3, 8, 8)
    if a.device.type != "cpu":
        pytest.skip("device offsets are read by the kernel, unchecked, as torch's")
    with pytest.raises(RuntimeError, match="non-decreasing group ends within the 16 rows of mat_a"):
        F.grouped_mm(a, b, offs=_offs([3, 2, 16]))
    with pytest.raises(RuntimeError, match="non-decreasing group ends within the 16 rows of mat_a"):
        F.grouped_mm(a, b, offs=_offs([3, 8, 17]))
