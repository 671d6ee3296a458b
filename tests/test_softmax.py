"""softmax / log_softmax (triton_kernels/softmax.py, core/ops/softmax.py) against float64 NumPy,
and their derivatives (autograd/functions/softmax.py) by gradcheck.

Any dim of strided inputs (four layouts, tests/layouts.py), 0-d/one-element/prime/empty shapes,
rows longer than one tile (the online two-pass schedule), -inf/NaN/huge values, dtype=, errors.
"""
import zlib

import numpy as np
import pytest

import tritensor as tt
from layouts import LAYOUTS, check_layout, make
from tolerances import FLOAT_DTYPES, NP, assert_close
from grad_inputs import F64, leaf, noncontig
from tritensor.autograd import gradcheck, gradgradcheck
from tritensor.triton_kernels import softmax as _k

RNG = np.random.default_rng(99)


@pytest.fixture(autouse=True)
def _reseed(request):
    """Each test draws the same data whichever xdist worker runs it, in whatever order."""
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def ref_softmax(a, axis):
    m = np.max(a, axis=axis, keepdims=True)
    e = np.exp(a - m)
    return e / e.sum(axis=axis, keepdims=True)


def ref_log_softmax(a, axis):
    m = np.max(a, axis=axis, keepdims=True)
    return a - m - np.log(np.exp(a - m).sum(axis=axis, keepdims=True))


REF = {"softmax": ref_softmax, "log_softmax": ref_log_softmax}

CASES = [((), 0), ((1,), 0), ((7,), -1), ((5, 13), 1), ((5, 13), 0), ((4, 3, 5), 0), ((4, 3, 5), 1),
         ((4, 3, 5), -1), ((2, 3, 4, 5), 2)]


def normal3(shape):
    return 3.0 * RNG.standard_normal(shape)


@pytest.mark.parametrize("shape,dim", CASES, ids=[f"{list(s)}-dim{d}".replace(" ", "") for s, d in CASES])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("op", list(REF))
def test_against_float64(op, dtype, layout, shape, dim):
    x, ref = make(shape, dtype, layout, normal3)
    check_layout(x, layout)
    got = getattr(x, op)(dim)
    assert got.shape == x.shape and got.dtype is dtype
    expected = REF[op](ref, dim if ref.ndim else None)
    assert_close(got, expected, dtype)
    assert_close(getattr(tt, op)(x, dim=dim), expected, dtype)


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64, tt.bfloat16], ids=str)
@pytest.mark.parametrize("op", list(REF))
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_rows_longer_than_one_tile(op, layout, dtype):
    """Rows over MAX_SINGLE_N take the online (running max, rescaled sum) two-pass schedule."""
    n = _k.MAX_SINGLE_N + 17
    x, ref = make((2, n), dtype, layout, normal3)
    ref[1, : _k.CHUNK_N + 5] = -np.inf  # a first chunk of only -inf, then finite values
    x[1, : _k.CHUNK_N + 5] = float("-inf")
    got = getattr(x, op)(1)
    # log_softmax subtracts log(sum of n terms) ~ 12: its fp32 error is relative to that
    assert_close(got, REF[op](ref, 1), dtype, "log_sum" if op == "log_softmax" else "default")
    if op == "softmax":
        assert_close(got.sum(1), np.ones(2), dtype, "row_sum")  # n-term sum of rounded outputs


@pytest.mark.parametrize("dtype", [tt.float32, tt.float16], ids=str)
@pytest.mark.parametrize("op", list(REF))
def test_strided_dim_with_contiguous_rows(op, dtype):
    """softmax over dim 0 of a row-major matrix: tiles wide in rows; more rows than one tile
    (KEPT_CONTIG_BLOCK_M) and a dim longer than the tile's depth (the chunked schedule)."""
    rows = _k.KEPT_CONTIG_BLOCK_M + 6
    depth = _k.TILE // _k.KEPT_CONTIG_BLOCK_M
    x, ref = make((depth + 9, rows), dtype, "contiguous", normal3)
    ref[: depth + 1, 3] = -np.inf  # this row's first chunk is all -inf
    x[: depth + 1, 3] = float("-inf")
    assert_close(getattr(x, op)(0), REF[op](ref, 0), dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_special_values(dtype):
    inf, nan = np.inf, np.nan
    a = np.array([[-inf, -inf, -inf, -inf],   # fully -inf: NaN, like PyTorch
                  [0.0, -inf, 1.0, -inf],     # masked positions: exactly 0 / -inf
                  [1.0, nan, 2.0, 3.0],       # NaN poisons its row
                  [1000.0, 1000.0, -1000.0, 999.0]])  # no overflow thanks to the max subtraction
    x = tt.tensor(a.astype(NP[dtype]))
    ref = a.astype(NP[dtype]).astype(np.float64)
    s = x.softmax(1).numpy().astype(np.float64)
    ls = x.log_softmax(1).numpy().astype(np.float64)
    assert np.isnan(s[0]).all() and np.isnan(ls[0]).all()
    assert np.isnan(s[2]).all() and np.isnan(ls[2]).all()
    assert s[1, 1] == 0.0 and s[1, 3] == 0.0 and ls[1, 1] == -inf
    assert_close(s[[1, 3]], ref_softmax(ref[[1, 3]], 1), dtype)
    assert_close(ls[3], ref_log_softmax(ref[3], 0), dtype)


def test_dtype_argument_casts_input_first():
    a = RNG.standard_normal((3, 6)).astype(np.float32)
    x = tt.tensor(a)
    h = x.half()
    r = h.softmax(1, dtype=tt.float32)
    assert r.dtype is tt.float32
    assert_close(r, ref_softmax(a.astype(np.float16).astype(np.float64), 1), tt.float32)
    r16 = tt.log_softmax(x, 0, dtype=tt.float16)
    assert r16.dtype is tt.float16
    assert_close(r16, ref_log_softmax(a.astype(np.float16).astype(np.float64), 0), tt.float16)
    i = tt.arange(5)
    assert_close(tt.softmax(i, 0, dtype=tt.float64), ref_softmax(np.arange(5.0), 0), tt.float64)


def test_empty_inputs():
    for shape, dim in (((0, 5), 1), ((3, 0), 1), ((3, 0), 0), ((0,), 0)):
        x = tt.empty(*shape)
        assert x.softmax(dim).shape == shape and x.log_softmax(dim).shape == shape


def test_errors_before_any_kernel():
    x = tt.zeros(2, 3)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"):
        x.softmax(2)
    with pytest.raises(IndexError, match="but got -3"):
        tt.log_softmax(x, -3)
    with pytest.raises(TypeError, match=r"softmax\(\): argument 'dim' must be int, not NoneType"):
        tt.softmax(x, None)
    with pytest.raises(RuntimeError, match=r"softmax\(\): expected a floating point input, but got int64"):
        tt.softmax(tt.arange(3), 0)
    with pytest.raises(RuntimeError, match=r"log_softmax\(\): expected a floating point input, but got int32"):
        tt.log_softmax(x, 0, dtype=tt.int32)
    with pytest.raises(TypeError, match="dtype"):
        tt.softmax(x, 0, dtype="complex64")
    with pytest.raises(TypeError, match=r"softmax\(\): argument 'input' must be Tensor, not list"):
        tt.softmax([1.0, 2.0], 0)


# ----- derivatives: gradcheck in float64 ---------------------------------------------------------
SOFTMAXES = {"softmax": lambda t: t.softmax(1), "log_softmax": lambda t: t.log_softmax(-1),
             "softmax_dtype": lambda t: tt.softmax(t, 0, dtype=F64)}


@pytest.mark.parametrize("name", sorted(SOFTMAXES))
def test_softmax_gradcheck(name):
    x = leaf(2, 3, 2)
    assert gradcheck(SOFTMAXES[name], (x,))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_gradcheck_noncontiguous(name):
    x = noncontig(2, 3, 2)
    assert gradcheck(SOFTMAXES[name], (x,))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_second_derivative(name):
    x = leaf(2, 3, 2)
    assert gradgradcheck(SOFTMAXES[name], (x,), fast_mode=True)


def test_functional_softmax_without_dim_chooses_as_torch_and_warns():
    import warnings

    import tritensor.nn.functional as F

    for shape, dim in (((5,), 0), ((2, 3, 4), 0), ((2, 3), 1), ((2, 3, 4, 5), 1)):
        x = tt.tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32))
        with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
            implicit = F.softmax(x)
        assert implicit.numpy().tobytes() == x.softmax(dim).numpy().tobytes()
        with pytest.warns(UserWarning, match="Implicit dimension choice for log_softmax"):
            assert F.log_softmax(x).numpy().tobytes() == x.log_softmax(dim).numpy().tobytes()
        with pytest.warns(UserWarning, match="softmin"):
            assert F.softmin(x).numpy().tobytes() == (-x).softmax(dim).numpy().tobytes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.softmax(x, dim=-1)  # a dim given: no warning
    with pytest.raises(TypeError, match="argument 'dim' must be int"):
        tt.softmax(x, None)  # torch.softmax itself has no implicit dim
