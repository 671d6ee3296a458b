"""Elementwise kernels (triton_kernels/elementwise.py) against float64 NumPy references, and their
derivatives (autograd/functions/elementwise.py), in-place forms included, by gradcheck in float64."""
import math

import numpy as np
import pytest

import tritensor as tt
from tolerances import FLOAT_DTYPES, NP, assert_close
from grad_inputs import F64, leaf, noncontig
from tritensor.autograd import gradcheck, gradgradcheck

rng = np.random.default_rng(0)
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _gelu(x):
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


_lgamma = np.vectorize(math.lgamma, otypes=[np.float64])


def _digamma(x):
    """psi in float64, written apart from the kernel's: reflection below 1/2, the recurrence up to 40,
    four asymptotic terms (each below 1e-17 there)."""
    out = np.empty(np.shape(x))
    for i, v in np.ndenumerate(np.asarray(x, dtype=np.float64)):
        refl = 0.0
        if v < 0.5:
            refl, v = -math.pi / math.tan(math.pi * v), 1.0 - v  # psi(x) = psi(1 - x) - pi cot(pi x)
        acc = 0.0
        while v < 40.0:
            acc, v = acc - 1.0 / v, v + 1.0
        z2 = 1.0 / (v * v)
        out[i] = math.log(v) - 0.5 / v - z2 * (1 / 12 - z2 * (1 / 120 - z2 * (1 / 252 - z2 / 240))) + acc + refl
    return out


def _polygamma(n, x):
    """(-1)^(n+1) n! zeta(n+1, x): 400 terms, then the Euler-Maclaurin tail to B4 (x > 0)."""
    x = np.asarray(x, dtype=np.float64)
    k = np.arange(400.0).reshape((-1,) + (1,) * x.ndim)
    z = x + 400.0
    tail = z ** -n / n + z ** -(n + 1) / 2 + (n + 1) * z ** -(n + 2) / 12 - (n + 1) * (n + 2) * (n + 3) * z ** -(n + 4) / 720
    return (-1) ** (n + 1) * math.factorial(n) * (((x + k) ** -(n + 1.0)).sum(0) + tail)


def _erfinv(y):
    """Bisection to the last bit: erf(r) < |y| below 1/2, erfc(r) > 1 - |y| (exact there) above."""
    y = np.asarray(y, dtype=np.float64)
    a = np.abs(y)
    lo, hi = np.zeros_like(a), np.full_like(a, 6.0)
    erf, erfc = np.vectorize(math.erf, otypes=[np.float64]), np.vectorize(math.erfc, otypes=[np.float64])
    for _ in range(64):
        mid = (lo + hi) / 2
        below = np.where(a < 0.5, erf(mid) < a, erfc(mid) > 1 - a)
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return np.sign(y) * (lo + hi) / 2


# op -> (float64 reference, domain sampler)
UNARY = {
    "neg": (np.negative, "any"), "abs": (np.abs, "any"), "exp": (np.exp, "small"), "exp2": (np.exp2, "small"),
    "log": (np.log, "pos"), "log2": (np.log2, "pos"), "log1p": (np.log1p, "gt-1"), "expm1": (np.expm1, "small"),
    "sqrt": (np.sqrt, "pos"), "rsqrt": (lambda x: 1 / np.sqrt(x), "pos"), "sin": (np.sin, "any"),
    "cos": (np.cos, "any"), "tanh": (np.tanh, "any"), "sigmoid": (_sigmoid, "any"),
    "relu": (lambda x: np.maximum(x, 0), "any"), "gelu": (_gelu, "any"),
    "gelu_tanh": (lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))), "any"),
    "silu": (lambda x: x * _sigmoid(x), "any"), "erf": (_erf, "any"), "reciprocal": (lambda x: 1 / x, "pos"),
    "square": (np.square, "any"), "floor": (np.floor, "any"), "ceil": (np.ceil, "any"), "trunc": (np.trunc, "any"),
    "sign": (np.sign, "any"),
    "tan": (np.tan, "tan"), "atan": (np.arctan, "any"), "asin": (np.arcsin, "unit"), "acos": (np.arccos, "unit"),
    "sinh": (np.sinh, "any"), "cosh": (np.cosh, "any"), "asinh": (np.arcsinh, "any"), "acosh": (np.arccosh, "ge1"),
    "atanh": (np.arctanh, "unit"), "log10": (np.log10, "pos"), "erfinv": (_erfinv, "unit"),
    "lgamma": (_lgamma, "any"), "digamma": (_digamma, "any"),
}


def _sample(domain, shape):
    x = rng.standard_normal(shape) * 3
    if domain == "pos":
        return np.abs(x) + 0.05
    if domain == "gt-1":
        return np.abs(x) - 0.9
    if domain == "small":
        return x / 2
    if domain == "unit":  # inside (-1, 1): asin, acos, atanh, erfinv
        return np.tanh(x) * 0.95
    if domain == "tan":  # away from tan's poles, where a rounded input decides the result
        return np.tanh(x) * 1.4
    if domain == "ge1":
        return np.abs(x) + 1.05
    return x


def _layouts(x_np, dtype):
    """(tensor, matching numpy array) pairs: contiguous, transposed, step-sliced, expanded, empty, big."""
    base = tt.tensor(x_np.astype(NP[dtype]))
    xq = x_np.astype(NP[dtype]).astype(np.float64)  # the values the kernel actually sees
    yield base, xq
    yield base.T, xq.T
    yield base[1::2, ::3], xq[1::2, ::3]
    yield base[:1].expand(4, -1), np.broadcast_to(xq[:1], (4, xq.shape[1]))
    yield base[:, :0], xq[:, :0]
    yield base[2, 3], xq[2, 3]  # 0-d


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_against_float64(op, dtype):
    ref, domain = UNARY[op]
    x_np = _sample(domain, (11, 13))
    for t, xq in _layouts(x_np, dtype):
        out = getattr(t, op)()
        assert out.dtype is dtype and out.shape == tuple(np.shape(xq))
        profile = "default"
        if op in ("sin", "cos"):
            profile = "range_reduction"  # |x| up to ~10: fp32 argument reduction loses a few ulps
        if op in ("exp", "exp2", "expm1", "sinh", "cosh"):
            profile = "exp_amplified"  # exp(x) amplifies the input's fp32 ulp by |x| (<~5 here)
        assert_close(out, ref(xq), dtype, profile)


def test_unary_more_than_one_block_and_3d_permute():
    x_np = rng.standard_normal((29, 37, 41))  # 43,993 elements > one interpreter block (32,768)
    t = tt.tensor(x_np)
    assert_close(t.exp(), np.exp(x_np), tt.float64, "ulps")
    assert_close(t.permute(2, 0, 1).tanh(), np.tanh(x_np.transpose(2, 0, 1)), tt.float64, "ulps")


def test_unary_special_values():
    x = tt.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), -1.0, 1e-30, 100.0], dtype=tt.float32)
    xn = x.numpy().astype(np.float64)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(x.relu().numpy(), np.maximum(xn, 0).astype(np.float32))  # relu(nan) = nan
        assert_close(x.tanh(), np.tanh(xn), tt.float32, "ulps")
        assert_close(x.sigmoid(), _sigmoid(xn), tt.float32, "ulps")
        assert_close(x.expm1(), np.expm1(xn).astype(np.float32), tt.float32, "ulps")  # e^100 overflows fp32
        assert_close(x.log(), np.log(xn), tt.float32, "ulps")
        assert_close(x.sqrt(), np.sqrt(xn), tt.float32, "ulps")
    assert tt.tensor([1e-30]).tanh().item() == pytest.approx(1e-30, rel=1e-6)  # no cancellation near 0


@pytest.mark.parametrize("dtype", [tt.int32, tt.int64], ids=str)
def test_unary_integer_inputs(dtype):
    x_np = np.array([-7, -1, 0, 3, 12], dtype=NP[dtype])
    x = tt.tensor(x_np)
    for op, ref in (("neg", np.negative), ("abs", np.abs), ("relu", lambda v: np.maximum(v, 0)),
                    ("square", np.square), ("sign", np.sign)):
        out = getattr(x, op)()
        assert out.dtype is dtype
        np.testing.assert_array_equal(out.numpy(), ref(x_np))
    e = x.exp()  # integer -> default float, as in torch
    assert e.dtype is tt.float32
    assert_close(e, np.exp(x_np.astype(np.float64)), tt.float32, "ulps")


BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
    "maximum": np.maximum, "minimum": np.minimum, "floor_divide": np.floor_divide, "remainder": np.mod,
    "atan2": np.arctan2, "hypot": np.hypot, "fmod": np.fmod,
}
COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
           "ge": np.greater_equal}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_broadcast_and_strides(op, dtype):
    a_np = rng.standard_normal((7, 1, 5)) * 2
    b_np = rng.standard_normal((3, 5)) * 2
    if op == "pow":
        a_np = np.abs(a_np) + 0.1
    if op in ("div", "floor_divide", "remainder", "fmod"):
        b_np = np.sign(b_np) * (np.abs(b_np) + 0.5)
    aq, bq = a_np.astype(NP[dtype]), b_np.astype(NP[dtype])
    a, b = tt.tensor(aq), tt.tensor(bq)
    ref = BINARY[op](aq.astype(np.float64), bq.astype(np.float64))
    out = getattr(tt, op)(a, b)
    assert out.shape == (7, 3, 5) and out.dtype is dtype
    # floor_divide/remainder in fp16/bf16 are computed in fp32 from rounded inputs: floor(x / y) can
    # land on the other side of an integer when x / y is within one fp32 ulp of it; these random
    # inputs are not that close, so the default holds.
    assert_close(out, ref, dtype)
    # non-contiguous operands: transposed and step-sliced views read in place
    at, bt = tt.tensor(np.ascontiguousarray(aq.transpose(2, 1, 0))).permute(2, 1, 0), b.T.contiguous().T
    assert not at.is_contiguous() and not bt.is_contiguous()
    assert_close(getattr(tt, op)(at, bt), ref, dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_binary_with_python_scalars(dtype):
    x_np = (rng.standard_normal((6, 7)) + 3).astype(NP[dtype])
    x, xq = tt.tensor(x_np), x_np.astype(np.float64)
    cases = [(x + 2.5, xq + 2.5), (2.5 + x, 2.5 + xq), (x - 1, xq - 1), (1 - x, 1 - xq), (x * -3, xq * -3),
             (x / 4, xq / 4), (4 / x, 4 / xq), (x ** 2, xq ** 2), (2 ** x, 2 ** xq), (x // 2, xq // 2),
             (x % 1.5, np.mod(xq, 1.5)), (-x, -xq)]
    for out, ref in cases:
        assert out.dtype is dtype  # a Python scalar never widens a tensor
        assert_close(out, ref, dtype)


def test_float64_scalar_keeps_double_precision():
    x = tt.zeros(3, dtype=tt.float64)
    np.testing.assert_array_equal((x + 0.1).numpy(), np.full(3, 0.1))
    np.testing.assert_array_equal((0.1 - x).numpy(), np.full(3, 0.1))


@pytest.mark.parametrize("op", sorted(COMPARE))
def test_comparisons_return_bool(op):
    a_np = np.array([1.0, 2.0, np.nan, -np.inf, 3.0, 0.0])
    b_np = np.array([1.0, 3.0, np.nan, -np.inf, 2.0, -0.0])
    for dtype in FLOAT_DTYPES:
        a, b = tt.tensor(a_np.astype(NP[dtype])), tt.tensor(b_np.astype(NP[dtype]))
        out = getattr(tt, op)(a, b)
        assert out.dtype is tt.bool
        np.testing.assert_array_equal(out.numpy(), COMPARE[op](a_np, b_np))
    ints = tt.tensor([[1, 5], [3, 3]])
    np.testing.assert_array_equal(getattr(ints, op)(3).numpy(), COMPARE[op](np.array([[1, 5], [3, 3]]), 3))


@pytest.mark.parametrize("dtype", [tt.int32, tt.int64], ids=str)
def test_integer_arithmetic(dtype):
    a_np = np.array([7, -7, 7, -7, 0, 13, 2**20], dtype=NP[dtype])
    b_np = np.array([2, 2, -2, -2, 5, 4, 3], dtype=NP[dtype])
    a, b = tt.tensor(a_np), tt.tensor(b_np)
    for op in ("add", "sub", "mul", "floor_divide", "remainder", "maximum", "minimum"):
        out = getattr(tt, op)(a, b)
        assert out.dtype is dtype
        np.testing.assert_array_equal(out.numpy(), BINARY[op](a_np, b_np), err_msg=op)
    d = a / b  # true division of integers gives the default float
    assert d.dtype is tt.float32
    assert_close(d, a_np / b_np, tt.float32, "ulps")
    p = tt.tensor(np.array([3, -2, 5, 0], dtype=NP[dtype])) ** 3
    assert p.dtype is dtype
    np.testing.assert_array_equal(p.numpy(), [27, -8, 125, 0])


@pytest.mark.parametrize("dtype", [tt.int32, tt.int64, tt.bool], ids=str)
def test_integer_pow_negative_exponents(dtype, no_launch):
    """tensor([2]) ** -1 once gave 1 and 0 ** -1 INT64_MIN. A negative Python integer exponent
    raises at every call (the plan cache keys on types, not values), before any launch."""
    base = tt.tensor(np.array([2, 0, 1], dtype=NP[dtype]))
    for f in (lambda: base ** -1, lambda: tt.pow(base, -2), lambda: base.pow_(-1), lambda: base.pow(np.int64(-3))):
        for _ in range(2):  # the second call finds the cached plan
            with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed."):
                f()


@pytest.mark.parametrize("dtype", [tt.int32, tt.int64], ids=str)
def test_integer_pow_tensor_exponents_match_torch(dtype):
    """Negative tensor exponents compute, as torch's integer pow: 0 unless the base is 1 or -1."""
    x = np.array([[0, 1, -1, 2, -2, 3, -1, 5]], dtype=NP[dtype])
    y = np.array([[-1, -1, -1, -1, -3, 4, -2, 0]], dtype=NP[dtype])
    p = tt.tensor(x) ** tt.tensor(y)
    assert p.dtype is dtype
    np.testing.assert_array_equal(p.numpy(), [[0, 1, -1, 0, 0, 81, 1, 1]])
    np.testing.assert_array_equal((2 ** tt.tensor(y[0, :3])).numpy(), [0, 0, 0])  # scalar base
    np.testing.assert_array_equal((tt.tensor(x[:, :4]).T ** tt.tensor(y[0, :2])).numpy(),  # strided, broadcast
                                  [[0, 0], [1, 1], [-1, -1], [0, 0]])
    assert (tt.tensor([2]) ** -1.0).dtype is tt.float32  # a float exponent promotes: no error


def test_nan_propagation_in_maximum_minimum():
    a = tt.tensor([1.0, float("nan"), 3.0])
    b = tt.tensor([float("nan"), 2.0, 1.0])
    assert np.isnan(tt.maximum(a, b).numpy()[:2]).all() and tt.maximum(a, b).numpy()[2] == 3.0
    assert np.isnan(tt.minimum(a, b).numpy()[:2]).all() and tt.minimum(a, b).numpy()[2] == 1.0


def test_pow_special_cases_match_numpy():
    x = np.array([-2.0, -2.0, 0.0, 0.0, 0.0, 1.0, -8.0, 2.0, np.nan, 1.0])
    y = np.array([3.0, 0.5, 0.0, 2.0, -1.0, np.nan, 1 / 3, -2.0, 0.0, np.inf])
    with np.errstate(all="ignore"):
        ref = np.power(x, y)
    assert_close(tt.pow(tt.tensor(x), tt.tensor(y)), ref, tt.float64, "ulps")


def test_type_promotion_rules():
    f16, bf16 = tt.ones(2, dtype=tt.float16), tt.ones(2, dtype=tt.bfloat16)
    f32, i32, i64 = tt.ones(2), tt.ones(2, dtype=tt.int32), tt.ones(2, dtype=tt.int64)
    b = tt.ones(2, dtype=tt.bool)
    assert (f16 + f32).dtype is tt.float32
    assert (f16 + bf16).dtype is tt.float32
    assert (i32 + f16).dtype is tt.float16
    assert (i32 + i64).dtype is tt.int64
    assert (i32 + 5).dtype is tt.int32
    assert (i32 + 2.5).dtype is tt.float32
    assert (f16 + 2.5).dtype is tt.float16
    assert (b + b).dtype is tt.bool
    assert (b + 1).dtype is tt.int64
    assert (f16 + tt.tensor(1.0, dtype=tt.float64)).dtype is tt.float16  # 0-d tensors don't widen either
    assert (i32 + tt.tensor(1.5, dtype=tt.float64)).dtype is tt.float64
    assert tt.promote_types(tt.float16, tt.bfloat16) is tt.float32


def test_where_with_only_a_condition_is_nonzero_as_tuple():
    """torch.where(condition): the coordinates of its nonzero elements, one tensor per dim."""
    c = np.array([[0, 2, 0], [1, 0, -3]])
    for cond in (tt.tensor(c), tt.tensor(c != 0), tt.tensor(c.T.copy()).t(), tt.tensor(c.astype(np.float32))):
        got = tt.where(cond)
        assert isinstance(got, tuple) and len(got) == 2
        for g, e in zip(got, np.nonzero(c)):
            assert g.dtype is tt.int64
            np.testing.assert_array_equal(g.numpy(), e)
    assert [g.tolist() for g in tt.where(tt.zeros(0, 2))] == [[], []]
    assert tt.where(tt.tensor([1.0, 0.0], requires_grad=True))[0].tolist() == [0]  # no gradient to record
    with pytest.raises(TypeError, match="missing other"):
        tt.where(tt.tensor([True]), 1.0)


def test_where_broadcasts_and_promotes():
    c_np = np.array([[True], [False], [True]])
    x_np = np.arange(4, dtype=np.float32)
    out = tt.where(tt.tensor(c_np), tt.tensor(x_np), 0.5)
    assert out.dtype is tt.float32 and out.shape == (3, 4)
    np.testing.assert_array_equal(out.numpy(), np.where(c_np, x_np, 0.5))
    out = tt.where(tt.tensor([True, False]), tt.tensor([1, 2]), tt.tensor([0.5, 0.25], dtype=tt.float16))
    assert out.dtype is tt.float16
    np.testing.assert_array_equal(out.numpy(), np.array([1, 0.25], np.float16))


def test_inplace_ops_bump_version_and_write_through_views():
    x = tt.zeros(3, 4)
    v = x[:, 1]
    v.add_(2.0)
    assert x._version == v._version == 1
    x.mul_(tt.tensor([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_array_equal(x.numpy()[:, 1], [4.0, 4.0, 4.0])
    y = tt.arange(6, dtype=tt.float32).view(2, 3)
    y.add_(y.flip_view() if hasattr(y, "flip_view") else y.T.contiguous().T)
    np.testing.assert_array_equal(y.numpy(), np.arange(6, dtype=np.float32).reshape(2, 3) * 2)


def test_inplace_overlapping_operand_is_read_before_written():
    x = tt.arange(9, dtype=tt.float32).view(3, 3)
    expected = x.numpy() + x.numpy().T
    x.add_(x.T)
    np.testing.assert_array_equal(x.numpy(), expected)


def test_elementwise_errors(no_launch):
    with pytest.raises(RuntimeError, match=r"\[2, 3\].*\[4\]"):
        tt.zeros(2, 3) + tt.zeros(4)
    with pytest.raises(TypeError, match="argument 'other'"):
        tt.add(tt.zeros(2), "x")
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        tt.zeros(2, dtype=tt.int64).add_(1.5)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        tt.zeros(1, 3).expand(2, 3).add_(1)
    with pytest.raises(RuntimeError, match="bool tensor is not supported"):
        -tt.ones(2, dtype=tt.bool)
    with pytest.raises(RuntimeError, match="boolean tensor"):
        tt.where(tt.ones(2), tt.ones(2), tt.ones(2))


# ----- every form the op table declares (tests/test_op_table.py checks each op has a test) ------
LOGICAL = {"logical_and": np.logical_and, "logical_or": np.logical_or}


def test_logical_ops_and_their_operators():
    a_np, b_np = np.array([True, True, False, False]), np.array([True, False, True, False])
    a, b = tt.tensor(a_np), tt.tensor(b_np)
    for op, ref in LOGICAL.items():
        np.testing.assert_array_equal(getattr(tt, op)(a, b).numpy(), ref(a_np, b_np))
        np.testing.assert_array_equal(getattr(a, op)(b).numpy(), ref(a_np, b_np))
        z = a.clone()
        assert getattr(z, op + "_")(b) is z and z._version == 1
        np.testing.assert_array_equal(z.numpy(), ref(a_np, b_np))
    np.testing.assert_array_equal((a & b).numpy(), a_np & b_np)
    np.testing.assert_array_equal((a | b).numpy(), a_np | b_np)
    np.testing.assert_array_equal(tt.logical_not(a).numpy(), ~a_np)
    np.testing.assert_array_equal((~a).numpy(), ~a_np)
    x = tt.tensor([0.0, -2.5, float("nan")])
    assert tt.logical_not(x).tolist() == [True, False, False]
    z = x > 0
    assert z.logical_not_() is z and z.tolist() == [True, True, True]
    with pytest.raises(TypeError, match="only implemented on integer and Boolean-type tensors"):  # torch's
        ~x


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_clamp_forms_match_numpy(dtype):
    x_np = rng.standard_normal((4, 5)).astype(NP[dtype])
    xq = x_np.astype(np.float64)
    x = tt.tensor(x_np)
    lo_np = (rng.standard_normal(5) * 0.3).astype(NP[dtype])
    lo = tt.tensor(lo_np)
    cases = {
        "clamp": (lambda t: t.clamp(-0.5, 0.25), np.clip(xq, -0.5, 0.25)),
        "clip": (lambda t: tt.clip(t, max=0.25), np.minimum(xq, 0.25)),
        "clamp_tensor": (lambda t: tt.clamp(t, min=lo), np.maximum(xq, lo_np.astype(np.float64))),
        "clamp_min": (lambda t: t.clamp_min(-0.5), np.maximum(xq, -0.5)),
        "clamp_max": (lambda t: t.clamp_max(0.25), np.minimum(xq, 0.25)),
        "clamp_": (lambda t: t.clone().clamp_(-0.5, 0.25), np.clip(xq, -0.5, 0.25)),
        "clip_": (lambda t: t.T.clone().T.clip_(min=-0.5), np.maximum(xq, -0.5)),
    }
    for name, (f, ref) in cases.items():
        out = f(x)
        assert out.dtype is dtype, name
        assert_close(out, ref, dtype, "exact")  # a choice between inputs
    z = x.clone()
    assert z.clamp_(max=0.0) is z and z._version == 1
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max'"):
        x.clamp()


INPLACE_UNARY = sorted(UNARY)
INPLACE_BINARY = sorted(BINARY) + sorted(COMPARE)


@pytest.mark.parametrize("op", INPLACE_UNARY + INPLACE_BINARY)
def test_inplace_forms_match_out_of_place(op):
    domain = UNARY[op][1] if op in UNARY else "any"
    x_np = _sample(domain, (3, 4)).astype(np.float32)
    x = tt.tensor(x_np)
    args = () if op in UNARY else (tt.tensor(np.abs(_sample("any", (4,))).astype(np.float32) + 0.5),)
    expected = getattr(x, op)(*args)
    z = x.clone()
    out = getattr(z, op + "_")(*args)
    assert out is z and z._version == 1
    np.testing.assert_array_equal(z.numpy(), expected.to(z.dtype).numpy())


# ----- derivatives: gradcheck in float64 (every in-place form the op table declares too) -----
GRAD_UNARY = {
    "neg": {}, "abs": {}, "exp": {}, "exp2": {}, "expm1": {}, "log": dict(positive=True),
    "log2": dict(positive=True), "log1p": dict(positive=True), "sqrt": dict(positive=True),
    "rsqrt": dict(positive=True), "sin": {}, "cos": {}, "tanh": {}, "sigmoid": {}, "relu": {}, "gelu": {},
    "gelu_tanh": {}, "silu": {}, "erf": {}, "reciprocal": dict(positive=True), "square": {},
    "tan": {}, "atan": {}, "asin": dict(lo=-0.8, hi=0.8), "acos": dict(lo=-0.8, hi=0.8), "sinh": {}, "cosh": {},
    "asinh": {}, "acosh": dict(lo=1.2, hi=3.0), "atanh": dict(lo=-0.8, hi=0.8), "log10": dict(positive=True),
    "erfinv": dict(lo=-0.8, hi=0.8), "lgamma": dict(lo=-2.7, hi=-2.2), "digamma": dict(positive=True),
}


@pytest.mark.parametrize("op", sorted(GRAD_UNARY))
def test_unary_gradcheck(op):
    x = leaf(2, 3, **GRAD_UNARY[op])
    assert gradcheck(lambda t: getattr(t, op)(), (x,))


@pytest.mark.parametrize("op", ["floor", "ceil", "trunc", "sign"])
def test_piecewise_constant_ops_have_zero_gradient(op):
    x = leaf(4)
    y = getattr(x, op)()
    assert y.requires_grad
    y.sum().backward()
    assert_close(x.grad, np.zeros(4), F64)


GRAD_BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
    "pow": lambda a, b: a ** b, "maximum": tt.maximum, "minimum": tt.minimum,
    "remainder": lambda a, b: a % b, "atan2": tt.atan2, "hypot": tt.hypot,
}


@pytest.mark.parametrize("op", sorted(GRAD_BINARY))
def test_binary_gradcheck_with_broadcasting(op):
    a = leaf(2, 3, positive=op in ("pow", "div", "remainder"))
    b = leaf(3, positive=op in ("pow", "div", "remainder")) if op != "remainder" else \
        tt.tensor([0.7, 1.3, 2.9], dtype=F64, requires_grad=True)  # away from the jumps of a % b
    assert gradcheck(GRAD_BINARY[op], (a, b))
    c = leaf(2, 1, positive=op in ("pow", "div", "remainder"))
    assert gradcheck(GRAD_BINARY[op], (a, c))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow"])
def test_binary_with_python_scalars_both_sides(op):
    x = leaf(3, positive=True)
    assert gradcheck(lambda t: GRAD_BINARY[op](t, 1.5), (x,))
    assert gradcheck(lambda t: GRAD_BINARY[op](1.5, t), (x,))


def test_binary_noncontiguous_inputs():
    a, b = noncontig(2, 3), noncontig(2, 3)
    assert gradcheck(lambda x, y: x * y + x / (y * y + 1), (a, b))


def test_maximum_splits_ties_evenly():
    a = tt.tensor([1.0, 2.0], requires_grad=True)
    b = tt.tensor([1.0, 0.0], requires_grad=True)
    tt.maximum(a, b).sum().backward()
    assert_close(a.grad, [0.5, 1.0], tt.float32)
    assert_close(b.grad, [0.5, 0.0], tt.float32)


def test_where_and_clamp():
    x, y = leaf(2, 3), leaf(2, 3)
    cond = tt.tensor([[True, False, True], [False, True, False]])
    assert gradcheck(lambda a, b: tt.where(cond, a, b), (x, y))
    assert gradcheck(lambda a: tt.where(cond, a, 0.5), (x,))
    assert gradcheck(lambda a: a.clamp(-0.3, 0.4), (x,))
    assert gradcheck(lambda a: a.clamp(min=-0.3), (x,))
    lo = tt.tensor([-0.5, 0.0, 0.25], dtype=F64, requires_grad=True)
    assert gradcheck(lambda a, m: a.clamp(min=m), (x, lo))


@pytest.mark.parametrize("op", ["add_", "sub_", "mul_", "div_"])
def test_inplace_binary_on_nonleaf(op):
    a, b = leaf(2, 3), leaf(3, positive=True)

    def f(x, y):
        z = x * 1
        getattr(z, op)(y)
        return z

    assert gradcheck(f, (a, b))


@pytest.mark.parametrize("op", ["exp_", "sigmoid_", "tanh_", "relu_", "sin_"])
def test_inplace_unary_on_nonleaf(op):
    x = leaf(5)

    def f(t):
        z = t * 2
        return getattr(z, op)()

    assert gradcheck(f, (x,))


@pytest.mark.parametrize("op", sorted(GRAD_UNARY))
def test_inplace_unary_gradcheck_every_op(op):
    x = leaf(2, 3, **GRAD_UNARY[op])

    def f(t):
        z = t * 1
        return getattr(z, op + "_")()

    assert gradcheck(f, (x,))


@pytest.mark.parametrize("op", sorted(GRAD_BINARY))
def test_inplace_binary_gradcheck_every_op(op):
    positive = op in ("pow", "div", "remainder")
    a = leaf(2, 3, positive=positive)
    b = leaf(3, positive=positive) if op != "remainder" else tt.tensor([0.7, 1.3, 2.9], dtype=F64, requires_grad=True)

    def f(x, y):
        z = x * 1
        return getattr(z, op + "_")(y)

    assert gradcheck(f, (a, b))


@pytest.mark.parametrize("op", ["floor_", "ceil_", "trunc_", "sign_", "floor_divide", "floor_divide_"])
def test_piecewise_constant_forms_have_zero_gradient(op):
    x, d = leaf(4), leaf(4, positive=True)
    z = x * 1
    y = getattr(z, op)(d) if op.startswith("floor_divide") else getattr(z, op)()
    assert y.requires_grad
    y.sum().backward()
    assert_close(x.grad, np.zeros(4), F64)
    if op.startswith("floor_divide"):
        assert_close(d.grad, np.zeros(4), F64)


def test_clamp_forms_gradcheck():
    x = leaf(2, 3)
    lo = tt.tensor([-0.5, 0.0, 0.25], dtype=F64, requires_grad=True)
    assert gradcheck(lambda a: tt.clip(a, -0.3, 0.4), (x,))
    assert gradcheck(lambda a: a.clamp_min(-0.3), (x,))
    assert gradcheck(lambda a: a.clamp_max(0.4), (x,))
    assert gradcheck(lambda a, m: (a * 1).clamp_(min=m, max=0.6), (x, lo))
    assert gradcheck(lambda a: (a * 1).clip_(-0.3, 0.4), (x,))


def test_interpreter_block_width_does_not_change_a_bit(monkeypatch):
    """CPU mode sizes lane-independent blocks to the tensor (up to INTERPRETER_WIDE_BLOCK);
    narrow blocks (many programs) and one wide program must give the same bytes."""
    from tritensor.triton_kernels import _common

    x = tt.tensor(rng.standard_normal(5003).astype(np.float32))
    y = tt.tensor(rng.standard_normal(5003).astype(np.float32)[::-1].copy())

    def run():
        g = tt.Generator().manual_seed(7)
        return [t.numpy().tobytes() for t in (x + y, x.to(tt.float16), tt.nn.functional.gelu(x), x[::2] * 3.0,
                                              tt.rand(5003, generator=g), x.clone().mul_(0.5))]

    wide = run()
    monkeypatch.setattr(_common, "INTERPRETER_WIDE_BLOCK", 512)  # ten programs instead of one
    assert run() == wide


# ----- trigonometric, hyperbolic and special functions; fmod, hypot, atan2; div's rounding modes -----
INF, NAN = float("inf"), float("nan")


def _same(out, expected):
    """Bit-level agreement on special values: NaN where NaN, the same infinities and signed zeros."""
    got = out.numpy().astype(np.float64)
    exp = np.asarray(expected, dtype=np.float64).astype(NP[out.dtype]).astype(np.float64)  # torch's, rounded
    assert np.array_equal(np.isnan(got), np.isnan(exp)), (got, exp)
    ok = ~np.isnan(exp)
    np.testing.assert_array_equal(got[ok], exp[ok])
    assert np.array_equal(np.signbit(got[ok]), np.signbit(exp[ok])), (got, exp)


def test_special_values_match_torch():
    """torch 2.13's values at the edges of each domain (poles, infinities, signed zeros)."""
    for dtype in (tt.float32, tt.float64):
        t = lambda v: tt.tensor(v, dtype=dtype)  # noqa: E731
        _same(tt.atan2(t([0.0, 0.0, -0.0, -0.0, INF, -INF, 1.0]), t([0.0, -0.0, 0.0, -0.0, INF, INF, NAN])),
              [0.0, math.pi, -0.0, -math.pi, math.pi / 4, -math.pi / 4, NAN])
        _same(t([0.0, -0.0, -1.0, -2.0, INF, -INF, 1.0, 2.0]).lgamma(), [INF, INF, INF, INF, INF, INF, 0.0, 0.0])
        _same(t([0.0, -0.0, -1.0, INF, -INF, NAN]).digamma(), [-INF, INF, NAN, INF, NAN, NAN])
        _same(tt.polygamma(1, t([0.0, INF])), [INF, 0.0])
        _same(tt.polygamma(2, t([0.0, -1.0])), [-INF, -INF])
        _same(t([1.0, -1.0, 1.5, -0.0]).erfinv(), [INF, -INF, NAN, -0.0])
        _same(t([1.0, -1.0, 1.5, -0.0]).atanh(), [INF, -INF, NAN, -0.0])
        _same(t([1.0, 0.5, INF]).acosh(), [0.0, NAN, INF])
        _same(t([-0.0, INF, -INF]).asinh(), [-0.0, INF, -INF])
        _same(t([-0.0, 1.5, INF]).asin(), [-0.0, NAN, NAN])
        _same(t([1.0, -1.0]).acos(), [0.0, math.pi])
        _same(t([-0.0, INF, -INF]).atan(), [-0.0, math.pi / 2, -math.pi / 2])
        _same(t([-0.0, INF, -INF]).sinh(), [-0.0, INF, -INF])
        if dtype is tt.float32:
            _same(t([100.0, -100.0]).sinh(), [INF, -INF])  # past fp32's range, as torch
        _same(t([INF, -INF, 0.0]).cosh(), [INF, INF, 1.0])
        _same(t([0.0, INF, 1.0]).log10(), [-INF, INF, 0.0])
        _same(tt.hypot(t([INF, 0.0, 3e30]), t([NAN, 0.0, 4e30])), [INF, 0.0, 5e30])  # no overflow on the way
        _same(tt.fmod(t([5.0, -5.0, 5.0, 1.0]), t([3.0, 3.0, -3.0, 0.0])), [2.0, -2.0, 2.0, NAN])


def test_new_ops_integer_inputs_and_aliases():
    """Integers give the default float (as torch), except fmod and div's rounding modes, which keep
    them; NumPy's arc* names are aliases."""
    i = tt.tensor([1, 2, -3])
    for op in ("tan", "atan", "sinh", "cosh", "asinh", "lgamma", "digamma", "erfinv", "log10"):
        out = getattr(i, op)()
        assert out.dtype is tt.float32, op
    assert_close(tt.tan(i), np.tan([1.0, 2.0, -3.0]), tt.float32)
    assert_close(tt.lgamma(tt.tensor([3, 4])), np.log([2.0, 6.0]), tt.float32)
    assert tt.atan2(i, tt.tensor([1, 1, 1])).dtype is tt.float32
    assert tt.polygamma(1, tt.tensor([1, 2])).dtype is tt.float32
    f = tt.fmod(tt.tensor([7, -7, 7, -7]), tt.tensor([2, 2, -2, -2]))
    assert f.dtype is tt.int64 and f.tolist() == [1, -1, 1, -1]  # C's sign (remainder: the divisor's)
    assert tt.remainder(tt.tensor([-7]), 2).tolist() == [1] and tt.fmod(tt.tensor([-7]), 2).tolist() == [-1]
    x = tt.tensor([0.5, -0.25])
    for alias, op in (("arcsin", "asin"), ("arccos", "acos"), ("arctan", "atan"), ("arcsinh", "asinh"),
                      ("arctanh", "atanh")):
        np.testing.assert_array_equal(getattr(tt, alias)(x).numpy(), getattr(x, op)().numpy())
        z = x.clone()
        getattr(z, alias + "_")()
        np.testing.assert_array_equal(z.numpy(), getattr(x, op)().numpy())
    np.testing.assert_array_equal(tt.arccosh(x + 2).numpy(), (x + 2).acosh().numpy())
    np.testing.assert_array_equal(tt.arctan2(x, x.flip(0)).numpy(), tt.atan2(x, x.flip(0)).numpy())
    y = tt.tensor([1.5, 2.5])
    assert y.polygamma(1).tolist() == tt.polygamma(1, y).tolist()
    assert tt.polygamma(0, y).tolist() == y.digamma().tolist()
    z = y.clone()
    assert z.polygamma_(2) is z and z._version == 1 and z.tolist() == tt.polygamma(2, y).tolist()


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_polygamma_against_float64(dtype):
    x_np = np.abs(_sample("any", (5, 7))) + 0.1
    for t, xq in _layouts(x_np, dtype):
        for n in (1, 2, 3):
            out = tt.polygamma(n, t)
            assert out.dtype is dtype and out.shape == xq.shape
            assert_close(out, _polygamma(n, xq), dtype)
    neg = tt.tensor([-0.5, -1.5, -2.25], dtype=tt.float64)  # negative arguments: the shifted series
    catalan = 0.915965594177219015
    exact = [math.pi ** 2 / 2 + 4, math.pi ** 2 / 2 + 4 + 1 / 1.5 ** 2,  # psi1(x) = psi1(x + 1) + 1 / x^2
             math.pi ** 2 - 8 * catalan + 1 / 2.25 ** 2 + 1 / 1.25 ** 2 + 1 / 0.25 ** 2]  # psi1(3/4) = pi^2 - 8G
    assert_close(tt.polygamma(1, neg), exact, tt.float64)


@pytest.mark.parametrize("dtype", [tt.int32, tt.int64], ids=str)
def test_div_rounding_modes(dtype):
    a_np = np.array([7, -7, 7, -7, 0, 13], dtype=NP[dtype])
    b_np = np.array([2, 2, -2, -2, 5, 4], dtype=NP[dtype])
    a, b = tt.tensor(a_np), tt.tensor(b_np)
    t = tt.div(a, b, rounding_mode="trunc")
    assert t.dtype is dtype and t.tolist() == np.trunc(a_np / b_np).astype(np.int64).tolist()
    f = a.div(b, rounding_mode="floor")
    assert f.dtype is dtype and f.tolist() == tt.floor_divide(a, b).tolist() == (a_np // b_np).tolist()
    assert tt.div(a, 2, rounding_mode=None).dtype is tt.float32
    z = a.clone()
    assert z.div_(b, rounding_mode="trunc") is z and z.tolist() == t.tolist()
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        tt.div(a, 0, rounding_mode="trunc")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        tt.fmod(a, tt.zeros_like(b))
    with pytest.raises(RuntimeError, match="rounding_mode to be one of None, 'trunc', or 'floor' but found 'round'"):
        tt.div(a, b, rounding_mode="round")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_div_rounding_modes_floats(dtype):
    a_np = (rng.standard_normal((4, 1, 5)) * 7).astype(NP[dtype])
    b_np = (np.sign(rng.standard_normal((3, 5))) * (np.abs(rng.standard_normal((3, 5))) + 0.5)).astype(NP[dtype])
    a, b = tt.tensor(a_np), tt.tensor(b_np)
    aq, bq = a_np.astype(np.float64), b_np.astype(np.float64)
    assert_close(tt.div(a, b.T.contiguous().T, rounding_mode="trunc"), np.trunc(aq / bq), dtype, "exact")
    assert_close(tt.div(a, b, rounding_mode="floor"), np.floor(aq / bq), dtype, "exact")
    assert_close(tt.div(a, 2.5, rounding_mode="trunc"), np.trunc(aq / 2.5), dtype, "exact")


def test_new_binary_errors(no_launch):
    x = tt.ones(3)
    with pytest.raises(TypeError, match=r"atan2\(\): argument 'other' \(position 2\) must be Tensor, not int"):
        tt.atan2(x, 2)
    with pytest.raises(TypeError, match=r"hypot\(\): argument 'input' \(position 1\) must be Tensor, not float"):
        tt.hypot(1.0, x)
    with pytest.raises(TypeError, match=r"fmod\(\): argument 'input'"):
        tt.fmod(2, x)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        tt.hypot(tt.tensor([3]), tt.tensor([4]))
    with pytest.raises(RuntimeError, match="does not support negative n"):
        tt.polygamma(-1, x)
    with pytest.raises(TypeError, match="argument 'n' .* must be int, not float"):
        tt.polygamma(1.5, x)
    with pytest.raises(RuntimeError, match=r"\[3\].*\[4\]"):
        tt.atan2(x, tt.ones(4))
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        tt.tensor([1, 2]).tan_()


TERNARY = {
    "lerp": lambda x, y, w: np.where(np.abs(w) < 0.5, x + w * (y - x), y - (y - x) * (1 - w)),
    "addcmul": lambda x, y, z, v=0.75: x + v * y * z,
    "addcdiv": lambda x, y, z, v=0.75: x + v * y / z,
}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("op", sorted(TERNARY))
def test_lerp_addcmul_addcdiv_broadcast_and_strides(op, dtype):
    x_np, y_np = rng.standard_normal((7, 1, 5)), rng.standard_normal((3, 5))
    z_np = rng.uniform(0.5, 1.5, (3, 1)) * (1 if op == "addcdiv" else rng.choice([-1, 1], (3, 1)))
    xq, yq, zq = (v.astype(NP[dtype]) for v in (x_np, y_np, z_np))
    x, y, z = tt.tensor(xq), tt.tensor(yq), tt.tensor(zq)
    ref = TERNARY[op](*(v.astype(np.float64) for v in (xq, yq, zq)))
    kw = {} if op == "lerp" else dict(value=0.75)
    fn = getattr(tt, op)
    out = fn(x, y, z, **kw)
    assert out.shape == (7, 3, 5) and out.dtype is dtype
    # the kernel rounds once; y * z (or y / z) and the sum may each round in fp32 first
    assert_close(out, ref, dtype, "rounded_terms", k=2)
    yt = tt.tensor(np.ascontiguousarray(yq.T)).T  # a transposed operand read in place
    assert not yt.is_contiguous()
    assert_close(fn(x, yt, z[:, :1], **kw), ref, dtype, "rounded_terms", k=2)
    assert_close(fn(x[:0], y, z, **kw), np.zeros((0, 3, 5)), dtype)  # empty
    w = x.expand(7, 3, 5).clone()
    assert getattr(w, op + "_")(y, z, **kw) is w and w._version == 1
    assert_close(w, ref, dtype, "rounded_terms", k=2)
    if op == "lerp":  # a Python weight, and the exact ends
        assert_close(tt.lerp(x, y, 0.3), TERNARY["lerp"](xq.astype(np.float64), yq.astype(np.float64), 0.3), dtype,
                     "rounded_terms", k=2)
        assert_close(tt.lerp(x, y, 1.0), np.broadcast_to(yq, (7, 3, 5)), dtype, "exact")
        assert_close(tt.lerp(x, y, 0.0), np.broadcast_to(xq, (7, 3, 5)), dtype, "exact")


def test_ternary_integers_and_errors(no_launch):
    i = tt.tensor([1, 2])
    f = tt.tensor([1.0, 2.0])
    with pytest.raises(NotImplementedError, match="\"lerp_kernel_scalar\" not implemented for 'Long'"):
        tt.lerp(i, i, 0.5)
    with pytest.raises(RuntimeError, match="expected dtype float for `end` but got dtype double"):
        tt.lerp(f, f.double(), 0.5)
    with pytest.raises(RuntimeError, match="expected dtype c10::Half for `weight` but got dtype float"):
        tt.lerp(f.half(), f.half(), f)
    with pytest.raises(TypeError, match="argument 'weight' must be Tensor, not str"):
        tt.lerp(f, f, "a")
    with pytest.raises(RuntimeError, match="Integer division with addcdiv is no longer supported"):
        tt.addcdiv(i, i, i)
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        tt.addcmul(f, f, tt.ones(3))


def test_ternary_integer_addcmul():
    i = tt.tensor([1, 2])
    out = tt.addcmul(i, i, tt.tensor([3, 4]), value=2)
    assert out.dtype is tt.int64 and out.tolist() == [7, 18]
    assert tt.addcmul(i, tt.tensor([1.0, 2.0]), i, value=2).tolist() == [3.0, 10.0]  # promoted, as torch


@pytest.mark.parametrize("op", ["lgamma", "digamma", "erfinv", "asin", "acosh"])  # (the rest: formulas of these ops)
def test_special_functions_gradgradcheck(op):
    x = leaf(3, **GRAD_UNARY[op])
    assert gradgradcheck(lambda t: getattr(t, op)(), (x,))
    if op in ("lgamma", "digamma"):
        assert gradcheck(lambda t: getattr(t, op)(), (noncontig(2, 2, positive=True),))


def test_polygamma_gradcheck():
    x = leaf(3, positive=True)
    assert gradcheck(lambda t: tt.polygamma(2, t), (x,))
    assert gradgradcheck(lambda t: t.polygamma(1), (x,))
    assert gradcheck(lambda t: (t * 1).polygamma_(1), (x,))


def test_atan2_hypot_fmod_gradcheck():
    a = leaf(2, 2, positive=True)
    b = tt.tensor([0.31, 0.43], dtype=F64, requires_grad=True)  # a / b away from fmod's jumps
    for fn in (tt.atan2, tt.hypot):
        assert gradcheck(fn, (a, b)) and gradgradcheck(fn, (a, b))
    assert gradcheck(tt.fmod, (a, b)) and gradcheck(lambda x: x.fmod(0.7), (a,))
    for op in ("atan2", "hypot", "fmod"):
        assert gradcheck(lambda x, y: getattr(x * 1, op + "_")(y), (a, b))


def test_div_rounding_modes_have_zero_gradient():
    a, b = leaf(4, positive=True), leaf(4, positive=True)
    for mode in ("trunc", "floor"):
        a.grad = b.grad = None
        y = tt.div(a, b, rounding_mode=mode)
        assert y.requires_grad
        y.sum().backward()
        assert_close(a.grad, np.zeros(4), F64, "exact")
        assert_close(b.grad, np.zeros(4), F64, "exact")
    a.grad = None
    z = a * 1
    z.div_(b, rounding_mode="trunc").sum().backward()
    assert_close(a.grad, np.zeros(4), F64, "exact")
    assert gradcheck(lambda x, y: tt.div(x, y, rounding_mode=None), (a, b))


def test_lerp_addcmul_addcdiv_gradcheck():
    x, y, w = leaf(2, 2), leaf(2), leaf(2, 1)
    d = leaf(2, 1, positive=True)
    assert gradcheck(tt.lerp, (x, y, w)) and gradgradcheck(tt.lerp, (x, y, w))
    assert gradcheck(lambda a, b: tt.lerp(a, b, 0.3), (x, y))
    assert gradcheck(lambda a, b, c: (a * 1).lerp_(b, c), (x, y, w))
    assert gradcheck(lambda a, b, c: tt.addcmul(a, b, c, value=0.7), (x, y, d))
    assert gradgradcheck(lambda a, b, c: tt.addcmul(a, b, c, value=0.7), (x, y, d))
    assert gradgradcheck(lambda a, b, c: tt.addcdiv(a, b, c, value=-1.5), (x, y, d))
    assert gradcheck(lambda a, b, c: (a * 1).addcmul_(b, c, value=2), (x, y, d))
    assert gradcheck(lambda a, b, c: (a * 1).addcdiv_(b, c), (x, y, d))
    xn = noncontig(2, 2)
    assert gradcheck(lambda a, b: tt.lerp(a, b, 0.6), (xn, noncontig(2, 2)))
