"""Elementwise kernels (triton_kernels/elementwise.py) against float64 NumPy references, and their
derivatives (autograd/functions/elementwise.py), in-place forms included, by gradcheck in float64."""
import math

import numpy as np
import pytest

import tritensor as tt
from tolerances import FLOAT_DTYPES, NP, assert_close
from grad_inputs import F64, leaf, noncontig
from tritensor.autograd import gradcheck

rng = np.random.default_rng(0)
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _gelu(x):
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


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
}


def _sample(domain, shape):
    x = rng.standard_normal(shape) * 3
    if domain == "pos":
        return np.abs(x) + 0.05
    if domain == "gt-1":
        return np.abs(x) - 0.9
    if domain == "small":
        return x / 2
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
        if op in ("exp", "exp2", "expm1", "sinh"):
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
    if op in ("div", "floor_divide", "remainder"):
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
    """Issue 24: tensor([2]) ** -1 gave 1 and 0 ** -1 INT64_MIN. A negative Python integer exponent
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
    """torch.where(condition): the coordinates of its nonzero elements, one tensor per dim (issue 24)."""
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
    with pytest.raises(TypeError, match="bool tensors"):
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
    "remainder": lambda a, b: a % b,
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
