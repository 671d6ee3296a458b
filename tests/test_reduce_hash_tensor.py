"""hash_tensor, the reduce family's xor: each element widened to its 64-bit kind (float64 for floats,
int64 for integers and bool), its bits read as uint64 and xor-ed over the reduced dims, as torch 2.13
defines it; checked bit for bit against NumPy's definition over dtypes, dims, odd and empty shapes and
strided layouts, with torch's errors (values and messages printed by torch 2.13)."""
import numpy as np
import pytest

import tritensor as tt
from layouts import LAYOUTS, check_layout, make
from tolerances import NP, assert_close

DTYPES = [tt.float32, tt.float64, tt.float16, tt.bfloat16, tt.int64, tt.int32, tt.int16, tt.int8, tt.uint8, tt.bool]
rng = np.random.default_rng(5)


def _values(dtype):
    if dtype is tt.bool:
        return lambda shape: (rng.random(shape) < 0.5).astype(np.float64)
    if dtype.is_floating_point:
        return lambda shape: rng.standard_normal(shape) * 100
    lo = 0 if dtype is tt.uint8 else -100
    return lambda shape: rng.integers(lo, 100, shape).astype(np.float64)


def reference(values: np.ndarray, dtype, dims=None, keepdim=False) -> np.ndarray:
    """torch's definition in NumPy: widen, take the bits as uint64, xor over ``dims``."""
    wide = values.astype(np.float64 if dtype.is_floating_point else np.int64).view(np.uint64)
    axes = tuple(range(wide.ndim)) if dims is None else dims
    return np.bitwise_xor.reduce(wide, axis=axes, keepdims=keepdim)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_hash_tensor_matches_numpy_over_dtypes_and_dims(dtype):
    t, ref = make((3, 5, 4), dtype, "contiguous", _values(dtype))
    for dim, keepdim in [(None, False), (1, False), (-1, True), ((0, 2), False), ([], False), ((2, 0, 1), True)]:
        dims = None if dim is None or dim == [] else ((dim,) if isinstance(dim, int) else tuple(dim))
        out = tt.hash_tensor(t, dim, keepdim=keepdim) if dim is not None else tt.hash_tensor(t)
        assert out.dtype is tt.uint64
        assert_close(out, reference(ref, dtype, dims, keepdim), tt.uint64, err_msg=f"{dtype} dim={dim}")
    assert_close(t.hash_tensor(1, True), reference(ref, dtype, (1,), True), tt.uint64)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [tt.float32, tt.int16], ids=str)
def test_hash_tensor_reads_strided_layouts(layout, dtype):
    t, ref = make((4, 3, 5), dtype, layout, _values(dtype))
    check_layout(t, layout)
    for dim in (None, 0, (1, 2)):
        dims = None if dim is None else ((dim,) if isinstance(dim, int) else dim)
        assert_close(tt.hash_tensor(t, dim), reference(ref, dtype, dims), tt.uint64, err_msg=f"{layout} {dim}")


def test_hash_tensor_known_bits_odd_and_empty_shapes():
    # torch 2.13: hash_tensor(tensor([[1., 2., 3.], [4., 5., 6.]])) and its rows
    x = tt.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert tt.hash_tensor(x).item() == 9215490737506877440
    assert tt.hash_tensor(x, 1).tolist() == [4609434218613702656, 4619567317775286272]
    # sign extension to int64 before the bits are taken, -0.0's sign bit and NaN's bits kept
    assert tt.hash_tensor(tt.tensor([-1], dtype=tt.int8)).item() == 2**64 - 1
    assert tt.hash_tensor(tt.tensor([-1.0, -0.0, 0.0, float("nan")])).item() == 4613937818241073152
    assert tt.hash_tensor(tt.tensor(3.0)).item() == 4613937818241073152  # 0-d, as torch
    assert tt.hash_tensor(tt.tensor(3.0), 0).item() == 4613937818241073152
    empty_rows = tt.hash_tensor(tt.empty(0, 3), 1)
    assert empty_rows.shape == (0,) and empty_rows.dtype is tt.uint64
    for shape in [(1,), (7, 1, 3), (1, 1000)]:  # odd shapes, a long row
        t, ref = make(shape, tt.float32, "contiguous", _values(tt.float32))
        assert_close(tt.hash_tensor(t, -1), reference(ref, tt.float32, (len(shape) - 1,)), tt.uint64)
        assert_close(tt.hash_tensor(t), reference(ref, tt.float32), tt.uint64)


def test_hash_tensor_splits_a_long_reduction():
    # few rows and a long extent take the split kernel and its combine pass
    t, ref = make((2, 5000), tt.int32, "contiguous", _values(tt.int32))
    assert_close(tt.hash_tensor(t, 1), reference(ref, tt.int32, (1,)), tt.uint64)
    assert_close(tt.hash_tensor(t), reference(ref, tt.int32), tt.uint64)


def test_hash_tensor_errors_as_torch():
    x = tt.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    for mode in (1, -1, 2):
        with pytest.raises(RuntimeError, match=f"^Unknown hash_tensor mode: {mode}$"):
            tt.hash_tensor(x, mode=mode)
    with pytest.raises(TypeError, match="argument 'mode' must be int, not float"):
        tt.hash_tensor(x, mode=1.0)
    with pytest.raises(TypeError, match=r"argument 'input' \(position 1\) must be Tensor, not list"):
        tt.hash_tensor([1, 2])
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"):
        tt.hash_tensor(x, 2)
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times in the list of dims"):
        tt.hash_tensor(x, (0, 0))
    with pytest.raises(RuntimeError, match="Expected reduction dim to be specified for input.numel\\(\\) == 0"):
        tt.hash_tensor(tt.empty(0, 3))
    with pytest.raises(IndexError, match="^hash_tensor: Expected reduction dim 0 to have non-zero size.$"):
        tt.hash_tensor(tt.empty(0, 3), (0, 1))
    for u in (tt.uint16, tt.uint32, tt.uint64):  # torch's xor_sum kernel takes none of them
        t = tt.zeros(2, dtype=u)
        with pytest.raises(NotImplementedError, match=f"\"xor_sum_{t.device.type}\" not implemented for '{u.type_name}'"):
            tt.hash_tensor(t)


def test_hash_tensor_has_no_gradient():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    out = tt.hash_tensor(x)
    assert out.dtype is tt.uint64 and not out.requires_grad
    assert NP[tt.uint64] is np.uint64
