"""Copies and casts (``clone``, ``to``, ``copy_``, ``fill_``; kernels ``triton_kernels/copies.py``) are bit-exact
against NumPy / ml_dtypes, specials included; their derivatives (autograd/functions/copies.py) by
gradcheck in float64."""
import ml_dtypes
import numpy as np
import pytest

import tritensor as tt
from tolerances import NP, assert_close
from grad_inputs import F64, leaf
from tritensor.autograd import gradcheck

FLOATS = [tt.float64, tt.float32, tt.float16, tt.bfloat16]


def _specials():
    f32 = np.finfo(np.float32)
    f16 = np.finfo(np.float16)
    vals = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0, 65519.99, 1e6, -1e6, 3.4e38,
            float(f32.tiny), float(f32.tiny) / 3, float(f16.tiny), float(f16.tiny) / 7, 5.96e-8, 2.98e-8, 1e-40,
            1e-300, 1e300, 1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-8, 1 + 3 * 2**-8, 256 + 1, 2**24 + 1, 0.1, 1 / 3]
    rng = np.random.default_rng(0)
    rand = rng.standard_normal(200) * np.exp(rng.uniform(-30, 30, 200))
    return np.concatenate([vals, [-v for v in vals], rand])


def _bits_equal(a: np.ndarray, b: np.ndarray):
    assert a.dtype == b.dtype and a.shape == b.shape
    nan_a, nan_b = np.isnan(a.astype(np.float64)), np.isnan(b.astype(np.float64))
    np.testing.assert_array_equal(nan_a, nan_b)
    ua = a.view(np.dtype(f"u{a.itemsize}"))[~nan_a]
    ub = b.view(np.dtype(f"u{b.itemsize}"))[~nan_b]
    bad = np.nonzero(ua != ub)[0]
    assert bad.size == 0, f"{bad.size} mismatches, first: got {a[~nan_a][bad[:5]]} expected {b[~nan_b][bad[:5]]}"


@pytest.mark.parametrize("src", FLOATS, ids=str)
@pytest.mark.parametrize("dst", FLOATS, ids=str)
def test_float_to_float_bit_exact(src, dst):
    x = _specials().astype(NP[src])
    y = tt.tensor(x).to(dst).numpy()
    _bits_equal(y, x.astype(NP[dst]))


def _saturated(x: np.ndarray, dst) -> np.ndarray:
    """The defined float -> int conversion: truncate, saturate at the limits, NaN -> 0."""
    info = np.iinfo(NP[dst])
    x = x.astype(np.float64)
    out = np.zeros(x.shape, NP[dst])
    ok = np.isfinite(x) & (x < 2.0 ** (info.bits - 1)) & (x >= -(2.0 ** (info.bits - 1)))
    out[ok] = np.trunc(x[ok]).astype(NP[dst])
    out[~np.isnan(x) & ~ok & (x > 0)] = info.max
    out[~np.isnan(x) & ~ok & (x < 0)] = info.min
    return out


@pytest.mark.parametrize("src", FLOATS, ids=str)
@pytest.mark.parametrize("dst", [tt.int32, tt.int64], ids=str)
def test_float_to_int_truncates(src, dst):
    x = np.array([0.0, 0.4, -0.4, 0.5, 1.5, -1.5, 2.7, -2.7, 100.9, -100.9, 2**20 + 0.5, 12345.6], dtype=np.float64)
    x = x.astype(NP[src])
    y = tt.tensor(x).to(dst).numpy()
    np.testing.assert_array_equal(y, _saturated(x, dst))  # fp16 holds 2**20 + 0.5 as inf: saturates


@pytest.mark.parametrize("src", FLOATS, ids=str)
@pytest.mark.parametrize("dst", [tt.int32, tt.int64], ids=str)
def test_float_to_int_saturates_as_the_gpu_does(src, dst):
    # inf -> max, -inf -> min, NaN -> 0, past the range -> max/min, in both modes (NumPy gives
    # INT_MIN for all of these; the H100 saturated, so CPU mode disagreed with it before).
    vals = [np.inf, -np.inf, np.nan, -np.nan, 65504.0, -65504.0, 3e9, -3e9, 2.0**31, -(2.0**31), 2.0**31 - 128,
            -(2.0**31) - 256, 2.0**63, -(2.0**63), 1e19, -1e19, 1e300, -1e300, 0.5, -0.5, 7.9, -7.9]
    x = np.array(vals, dtype=np.float64).astype(NP[src])
    y = tt.tensor(x).to(dst).numpy()
    np.testing.assert_array_equal(y, _saturated(x, dst))
    # fill_ with a value past the range raises before writing, as torch's (its overflow check)
    c_name = {tt.int32: "int", tt.int64: "int64_t"}[dst]
    with pytest.raises(RuntimeError, match=f"value cannot be converted to type {c_name} without overflow"):
        tt.empty(3, dtype=dst).fill_(float("-inf"))


@pytest.mark.parametrize("src", [tt.int32, tt.int64, tt.bool], ids=str)
@pytest.mark.parametrize("dst", FLOATS + [tt.int32, tt.int64, tt.bool], ids=str)
def test_int_and_bool_casts(src, dst):
    if src is tt.bool:
        x = np.array([True, False, True, True])
    else:
        info = np.iinfo(NP[src])
        x = np.array([0, 1, -1, 7, 2**11 + 1, 2**24 + 1, info.max, info.min, 65519, 65520, 123456789], dtype=np.int64)
        x = x.astype(NP[src])  # wraps like C for the out-of-range int32 literals
    y = tt.tensor(x).to(dst).numpy()
    expected = (x != 0) if dst is tt.bool else x.astype(NP[dst])
    if dst.is_floating_point:
        _bits_equal(y, expected)
    else:
        np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("src", FLOATS, ids=str)
def test_float_to_bool_is_nonzero(src):
    x = np.array([0.0, -0.0, 1e-30, np.nan, np.inf, -2.0], dtype=np.float64).astype(NP[src])
    y = tt.tensor(x).to(tt.bool).numpy()
    np.testing.assert_array_equal(y, x.astype(np.float64) != 0)


@pytest.mark.parametrize("layout", ["transposed", "sliced", "expanded", "empty", "large"])
def test_strided_copy_layouts(layout):
    rng = np.random.default_rng(1)
    base = rng.standard_normal((37, 41)).astype(np.float32)
    t = tt.tensor(base)
    if layout == "transposed":
        v, ref = t.T, base.T
    elif layout == "sliced":
        v, ref = t[3:30:4, ::-1 if False else 3], base[3:30:4, ::3]
    elif layout == "expanded":
        v, ref = t[:, :1].expand(37, 5), np.broadcast_to(base[:, :1], (37, 5))
    elif layout == "empty":
        v, ref = t[:, 5:5], base[:, 5:5]
    else:  # more than one interpreter block, int32 index math, 3-d permute
        big = rng.standard_normal((33, 47, 29)).astype(np.float32)
        v, ref = tt.tensor(big).permute(2, 0, 1), big.transpose(2, 0, 1)
    for dst in FLOATS:
        out = v.to(dst).float().numpy()
        np.testing.assert_array_equal(out, ref.astype(NP[dst]).astype(np.float32))
    c = v.contiguous()
    assert c.is_contiguous()
    np.testing.assert_array_equal(c.numpy(), ref)


def test_copy_into_strided_destination_and_broadcast():
    dst = tt.zeros(4, 6)
    dst[:, ::2] = tt.tensor([1.0, 2.0, 3.0])  # broadcast a row into a strided view
    expected = np.zeros((4, 6), np.float32)
    expected[:, ::2] = [1, 2, 3]
    np.testing.assert_array_equal(dst.numpy(), expected)
    assert dst._version == 1
    out = tt.zeros(6, 4).t()  # copy_ into a transposed destination, broadcasting a column, casting fp64
    assert out.copy_(tt.tensor([[1.0], [2.0], [3.0], [4.0]], dtype=tt.float64)) is out
    assert out.dtype is tt.float32 and out._version == 1
    np.testing.assert_array_equal(out.numpy(), np.broadcast_to(np.arange(1, 5, dtype=np.float32)[:, None], (4, 6)))


def test_copy_overlapping_views_reads_source_first():
    x = tt.arange(10, dtype=tt.float32)
    x[1:].copy_(x[:-1])  # overlapping shift: must behave as if the source were read first
    np.testing.assert_array_equal(x.numpy(), [0, 0, 1, 2, 3, 4, 5, 6, 7, 8])


def test_copy_into_expanded_destination_raises():
    x = tt.zeros(1, 3).expand(4, 3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        x.copy_(tt.ones(4, 3))


def test_copy_shape_mismatch_names_both_shapes():
    with pytest.raises(RuntimeError, match=r"\[3\].*\[4\]"):
        tt.zeros(4).copy_(tt.ones(3))


def test_fill_float64_keeps_double_precision():
    # Triton passes Python floats as fp32; fill must not round 0.1 to float32.
    x = tt.empty(5, dtype=tt.float64).fill_(0.1)
    np.testing.assert_array_equal(x.numpy(), np.full(5, 0.1))
    y = tt.full((3,), 2**40 + 3, dtype=tt.int64)
    np.testing.assert_array_equal(y.numpy(), np.full(3, 2**40 + 3))


def test_bfloat16_host_roundtrip_uses_ml_dtypes():
    x = tt.tensor([1.0, 1.00390625, 3.14159], dtype=tt.bfloat16)
    a = x.numpy()
    assert a.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(a, np.array([1.0, 1.00390625, 3.14159]).astype(ml_dtypes.bfloat16))


# ----- derivatives ---------------------------------------------------------------------------
def test_casts_and_copies():
    x = leaf(2, 3)
    # a float32 round trip quantises f to ~6e-8: eps=1e-3 keeps the difference quotient's error ~1e-4
    assert gradcheck(lambda t: t.to(tt.float32).to(F64) * 1, (x,), eps=1e-3, atol=1e-3)
    assert gradcheck(lambda t: t.clone() * t, (x,))

    def copy_into(t):
        z = tt.zeros(2, 3, dtype=F64)
        z.copy_(t[:, :1])  # broadcast
        return z

    assert gradcheck(copy_into, (x,))


def test_cast_gradient_dtype():
    x = tt.ones(3, requires_grad=True)
    x.half().float().sum().backward()
    assert x.grad.dtype is tt.float32
    assert_close(x.grad, np.ones(3), tt.float32)


def test_fill_gradcheck():
    x = leaf(2, 3)
    assert gradcheck(lambda a: (a * 1)[0].fill_(0.5) + a[1], (x,))  # the filled part gets no gradient
    assert gradcheck(lambda a: (a * 2).zero_() + a, (x,))
