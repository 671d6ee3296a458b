"""The bitwise family (core/ops/bitwise.py, the elementwise kernel): ``bitwise_not/and/or/xor``,
``bitwise_left_shift/right_shift``, ``logical_xor``, their in-place forms and Python's
``~ & | ^ << >>`` (reflected and in place), against NumPy on every integer dtype and bool, every
layout, broadcasting and empty shapes; PyTorch's out-of-range shift counts and its errors."""
import numpy as np
import pytest

import tritensor as tt
from layouts import LAYOUTS, check_layout, make
from tolerances import NP, assert_close

INTS = [tt.uint8, tt.int8, tt.int16, tt.int32, tt.int64]
rng = np.random.default_rng(7)

LOGICAL = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}
OPERATORS = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^", "bitwise_left_shift": "<<",
             "bitwise_right_shift": ">>"}
INPLACE = {"bitwise_and": "__iand__", "bitwise_or": "__ior__", "bitwise_xor": "__ixor__",
           "bitwise_left_shift": "__ilshift__", "bitwise_right_shift": "__irshift__"}


def _values(dtype):
    info = np.iinfo(NP[dtype])
    lo, hi = max(info.min, -(2**40)), min(info.max, 2**40)
    return lambda shape: rng.integers(lo, hi, size=shape, endpoint=True).astype(np.float64)


def _shift_ref(x, s, left, bits):
    """PyTorch's shifts in exact integers: 0 (left) or the sign (right) past the width or below 0."""
    x, s = np.asarray(x, dtype=object), np.asarray(s, dtype=object)
    out = np.empty(np.broadcast(x, s).shape, dtype=object)
    for idx in np.ndindex(out.shape):
        xv, sv = int(np.broadcast_to(x, out.shape)[idx]), int(np.broadcast_to(s, out.shape)[idx])
        if sv < 0 or sv >= bits:
            out[idx] = 0 if left else (-1 if xv < 0 else 0)
        else:
            out[idx] = (xv << sv) if left else (xv >> sv)
    return out


def _wrap(values, dtype):
    """Exact integers as ``dtype`` holds them (two's complement)."""
    bits = 8 * np.dtype(NP[dtype]).itemsize
    signed = np.issubdtype(NP[dtype], np.signedinteger)

    def one(v):
        v = int(v) & ((1 << bits) - 1)
        return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v
    return np.array([one(v) for v in np.ravel(values)], dtype=NP[dtype]).reshape(np.shape(values))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_bitwise_ops_match_numpy_on_every_layout(dtype, layout):
    a, a_np = make((3, 5), dtype, layout, _values(dtype))
    check_layout(a, layout)
    b, b_np = make((3, 5), dtype, "contiguous", _values(dtype))
    a_np, b_np = a_np.astype(NP[dtype]), b_np.astype(NP[dtype])
    for op, ref in LOGICAL.items():
        assert_close(getattr(tt, op)(a, b).cpu().numpy(), ref(a_np, b_np), dtype)
        assert_close(getattr(a, op)(b).cpu().numpy(), ref(a_np, b_np), dtype)
    assert_close((a & b).cpu().numpy(), a_np & b_np, dtype)
    assert_close((a | b).cpu().numpy(), a_np | b_np, dtype)
    assert_close((a ^ b).cpu().numpy(), a_np ^ b_np, dtype)
    assert_close(tt.bitwise_not(a).cpu().numpy(), ~a_np, dtype)
    assert_close((~a).cpu().numpy(), ~a_np, dtype)
    assert_close(a.bitwise_not().cpu().numpy(), ~a_np, dtype)
    assert tt.bitwise_and(a, b).dtype is dtype and (~a).dtype is dtype


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_shifts_match_torch_for_every_count(dtype):
    """Counts from -2 to the width + 2, on values of both signs: undefined in C and NumPy past the
    width, PyTorch's 0 (left) or sign (right) there; a left shift wraps in the dtype."""
    bits = 8 * np.dtype(NP[dtype]).itemsize
    info = np.iinfo(NP[dtype])
    x_np = np.array([1, 3, info.max, info.min, 0, 5 if info.min == 0 else -5], dtype=NP[dtype])
    s_np = np.arange(-2, bits + 3).astype(NP[tt.int64])
    x, s = tt.tensor(x_np).reshape(6, 1), tt.tensor(s_np.astype(NP[dtype]) if dtype is not tt.uint8
                                                   else np.clip(s_np, 0, None).astype(np.uint8))
    counts = s.cpu().numpy().astype(np.int64)
    for left, op in ((True, "bitwise_left_shift"), (False, "bitwise_right_shift")):
        ref = _wrap(_shift_ref(x_np.reshape(6, 1).astype(np.int64), counts, left, 32 if bits < 32 else bits), dtype)
        assert_close(getattr(tt, op)(x, s).cpu().numpy(), ref, dtype)
        assert_close(eval(f"x {OPERATORS[op]} s").cpu().numpy(), ref, dtype)
    # a Python int count, and a Python int shifted by a tensor (the reflected operators)
    assert_close((x << 2).cpu().numpy(), _wrap(_shift_ref(x_np.reshape(6, 1).astype(np.int64), 2, True, 64), dtype),
                 dtype)
    assert_close((1 << tt.tensor([0, 3, 62], dtype=tt.int64)).cpu().numpy(), np.array([1, 8, 2**62]), tt.int64)
    assert_close((-64 >> tt.tensor([1, 3, 70])).cpu().numpy(), np.array([-32, -8, -1]), tt.int64)


def test_shift_edges_match_torch_values():
    """Values PyTorch 2.13 prints for the shifts past the width (checked with torch itself)."""
    i8 = tt.tensor([1, 2, -8], dtype=tt.int8)
    assert (i8 >> 1).tolist() == [0, 1, -4]
    assert (i8 << 7).tolist() == [-128, 0, 0]
    assert (tt.tensor([1], dtype=tt.int8) << 8).tolist() == [0]
    assert (tt.tensor([1]) << 64).tolist() == [0]
    assert (tt.tensor([-8]) >> 100).tolist() == [-1]
    assert (tt.tensor([8]) >> -1).tolist() == [0] and (tt.tensor([8]) << -1).tolist() == [0]
    assert (tt.tensor([200], dtype=tt.uint8) >> 9).tolist() == [0]
    assert (tt.tensor([True]) << 1).tolist() == [2] and (tt.tensor([True]) << 1).dtype is tt.int64


@pytest.mark.parametrize("shape_a, shape_b", [((4, 1, 3), (2, 1)), ((0, 3), (3,)), ((), (5,)), ((1,), ())])
def test_broadcasting_empty_and_zero_dim(shape_a, shape_b):
    a_np = rng.integers(-100, 100, size=shape_a).astype(np.int32)
    b_np = rng.integers(0, 6, size=shape_b).astype(np.int16)
    a, b = tt.tensor(a_np), tt.tensor(b_np)
    # torch's promotion: a 0-d int32 tensor beside an int16 tensor with dims gives int16
    result = tt.int16 if shape_a == () else tt.int32
    out = tt.bitwise_xor(a, b)
    assert out.dtype is result and tuple(out.shape) == np.broadcast_shapes(shape_a, shape_b)
    assert_close(out.cpu().numpy(), (a_np ^ b_np).astype(NP[result]), result)
    assert_close((a << b).cpu().numpy(), np.left_shift(a_np, b_np).astype(NP[result]), result)
    assert_close((a >> b).cpu().numpy(), np.right_shift(a_np, b_np).astype(NP[result]), result)


def test_type_promotion_and_python_scalars():
    u8 = tt.tensor([5, 250], dtype=tt.uint8)
    i8 = tt.tensor([-1, 3], dtype=tt.int8)
    r = u8 & i8  # uint8 with int8 -> int16, as torch
    assert r.dtype is tt.int16 and r.tolist() == [5, 250 & 3]
    assert (u8 & 3).dtype is tt.uint8 and (u8 & 3).tolist() == [1, 2]
    assert (3 & u8).tolist() == [1, 2] and (3 | u8).tolist() == [7, 251] and (3 ^ u8).tolist() == [6, 249]
    assert (u8 | -1).tolist() == [255, 255]  # -1 becomes 255 in uint8 first
    assert (tt.tensor([True]) & 3).dtype is tt.int64
    assert (tt.tensor([True, False]) & True).dtype is tt.bool


def test_bool_tensors_are_logical():
    a_np, b_np = np.array([True, True, False, False]), np.array([True, False, True, False])
    a, b = tt.tensor(a_np), tt.tensor(b_np)
    for op, ref in LOGICAL.items():
        out = getattr(tt, op)(a, b)
        assert out.dtype is tt.bool
        np.testing.assert_array_equal(out.cpu().numpy(), ref(a_np, b_np))
    np.testing.assert_array_equal((~a).cpu().numpy(), ~a_np)  # ~True is False (not the integer ~1)
    np.testing.assert_array_equal(tt.bitwise_not(a).cpu().numpy(), ~a_np)


@pytest.mark.parametrize("dtype", [tt.float32, tt.int64, tt.bool, tt.uint8], ids=str)
def test_logical_xor(dtype):
    a_np = np.array([0, 1, 2, 0]).astype(NP[dtype])
    b_np = np.array([0, 0, 3, 5]).astype(NP[dtype])
    a, b = tt.tensor(a_np), tt.tensor(b_np)
    expected = np.logical_xor(a_np, b_np)
    for out in (tt.logical_xor(a, b), a.logical_xor(b)):
        assert out.dtype is tt.bool
        np.testing.assert_array_equal(out.cpu().numpy(), expected)
    z = tt.tensor(a_np != 0)
    assert z.logical_xor_(tt.tensor(b_np != 0)) is z and z._version == 1
    np.testing.assert_array_equal(z.cpu().numpy(), expected)
    assert tt.logical_xor(tt.tensor([0.5, float("nan")]), 0).tolist() == [True, True]


@pytest.mark.parametrize("op", list(INPLACE))
def test_inplace_forms_and_operators(op):
    a_np = rng.integers(-50, 50, size=(3, 4)).astype(np.int16)
    b_np = rng.integers(0, 5, size=(4,)).astype(np.int16)
    expected = getattr(tt, op)(tt.tensor(a_np), tt.tensor(b_np)).cpu().numpy()
    a = tt.tensor(a_np)
    assert getattr(a, op + "_")(tt.tensor(b_np)) is a and a._version == 1
    assert_close(a.cpu().numpy(), expected, tt.int16)
    a = tt.tensor(a_np)
    same = a
    a = getattr(a, INPLACE[op])(tt.tensor(b_np))  # a &= b
    assert a is same and a._version == 1
    assert_close(a.cpu().numpy(), expected, tt.int16)
    n = tt.tensor(a_np)
    assert n.bitwise_not_() is n
    assert_close(n.cpu().numpy(), ~a_np, tt.int16)


def test_out_argument_and_transposed_output():
    a = tt.tensor(np.arange(6, dtype=np.int32).reshape(2, 3))
    out = tt.empty((3, 2), dtype=tt.int32).t()
    assert tt.bitwise_or(a, 8, out=out) is out
    assert_close(out.cpu().numpy(), np.arange(6).reshape(2, 3) | 8, tt.int32)


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64, tt.float16, tt.bfloat16], ids=str)
def test_floats_raise_torchs_errors(dtype, no_launch):
    x = tt.ones(3, dtype=dtype)
    name = {tt.float32: "Float", tt.float64: "Double", tt.float16: "Half", tt.bfloat16: "BFloat16"}[dtype]
    dev = x.device.type
    cases = {"bitwise_and": lambda: x & 1, "bitwise_or": lambda: tt.bitwise_or(x, x), "bitwise_xor": lambda: 1 ^ x,
             "bitwise_not": lambda: tt.bitwise_not(x), "lshift": lambda: x << 1, "rshift": lambda: x.__irshift__(1)}
    for kernel, call in cases.items():
        with pytest.raises(NotImplementedError, match=f'"{kernel}_{dev}" not implemented for \'{name}\''):
            call()
    with pytest.raises(TypeError, match=r"~ \(operator.invert\) is only implemented on integer and Boolean"):
        ~x
    with pytest.raises(NotImplementedError, match="not implemented for 'Float'"):
        tt.tensor([1]) & 1.5  # an int tensor with a float scalar promotes to float


def test_bool_shifts_raise(no_launch):
    b = tt.tensor([True, False])
    with pytest.raises(NotImplementedError, match=r"\"lshift_\w+\" not implemented for 'Bool'"):
        b << b
    with pytest.raises(NotImplementedError, match=r"\"rshift_\w+\" not implemented for 'Bool'"):
        tt.bitwise_right_shift(b, True)
