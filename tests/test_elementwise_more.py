"""torch's further elementwise math (kernels: triton_kernels/elementwise.py and _math.py; entries:
core/ops/elementwise.py; derivatives: autograd/functions/elementwise.py) against float64 NumPy
references written here (no SciPy): erfc, deg2rad, rad2deg, frac, sinc, i0, logit, copysign, fmax,
fmin, logaddexp(2), xlogy, nextafter, the regularized incomplete gamma functions, heaviside, gcd, lcm,
signbit and the infinity predicates, frexp, and the composites (float_power, ldexp, mvlgamma, rsub,
fill); torch's in-place forms as functions (torch.exp_), the aliases (negative, fix, greater ...), and
the questions about a tensor (is_signed, numel ...). Each op over fp32/fp64/fp16/bf16, the layouts of
tests/layouts.py, odd, empty and 0-d shapes, broadcasting and integer inputs where torch takes them, its
errors before any kernel runs, and gradcheck where torch has a derivative."""
import math
from decimal import Decimal, localcontext

import numpy as np
import pytest

import tritensor as tt
from grad_inputs import F64, leaf, noncontig
from layouts import LAYOUTS, check_layout, make
from tolerances import FLOAT_DTYPES, NP, assert_close
from tritensor.autograd import gradcheck, gradgradcheck

rng = np.random.default_rng(33)
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _values(domain):
    def values(shape):
        x = rng.standard_normal(shape) * 3
        if domain == "unit":  # (0, 1): logit
            return 1 / (1 + np.exp(-x))
        if domain == "with_integers":  # frac and sinc at whole numbers too
            return np.where(rng.random(shape) < 0.3, np.round(x), x)
        if domain == "wide":  # i0 on both of its formulas (power series to 20, asymptotic beyond)
            return x * 9
        return x
    return values


def _logit(x):
    with np.errstate(divide="ignore"):  # 1 rounded from below in bf16: +inf, as the kernel's
        return np.log(x / (1 - x))


# op -> (float64 reference, domain, an integer input gives a float (True) or is refused (False))
UNARY_MORE = {
    "erfc": (_erfc, "any", True),
    "deg2rad": (np.deg2rad, "any", True),
    "rad2deg": (np.rad2deg, "any", True),
    "frac": (lambda x: x - np.trunc(x), "with_integers", False),
    "sinc": (np.sinc, "with_integers", True),
    "i0": (np.i0, "wide", True),
    "logit": (lambda x: _logit(x), "unit", True),
}
SHAPES = [(5, 7), (0, 3), ()]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("op", sorted(UNARY_MORE))
def test_new_unary_against_float64(op, dtype):
    ref, domain, _ = UNARY_MORE[op]
    for shape in SHAPES:
        for layout in LAYOUTS if shape == (5, 7) else ("contiguous",):
            t, x = make(shape, dtype, layout, _values(domain))
            check_layout(t, layout)
            out = getattr(tt, op)(t)
            assert out.dtype is dtype and out.shape == shape
            want = ref(x)
            with np.errstate(over="ignore"):  # i0 past the dtype's range is its inf (e^x outgrows fp16 at 11.8)
                want = np.where(np.isinf(want.astype(NP[dtype])), np.inf, want)
            # sinc's pi x, logit's x / (1 - x) and i0's e^x round in the compute dtype first: a few ulps
            assert_close(out, want, dtype, "range_reduction" if op in ("sinc", "logit", "i0") else "default",
                         err_msg=f"{op} {layout} {shape}")


@pytest.mark.parametrize("op", sorted(UNARY_MORE))
def test_new_unary_integer_inputs(op):
    ref, _, takes_ints = UNARY_MORE[op]
    x = np.array([[-3, 0, 2], [5, 1, -1]], dtype=np.int64)
    for d in (tt.int32, tt.int64, tt.bool):
        t = tt.tensor(x.astype(NP[d]))
        if not takes_ints:
            with pytest.raises(NotImplementedError, match=rf'"{op}_\w+" not implemented for \'{d.type_name}\''):
                getattr(tt, op)(t)
            continue
        out = getattr(t, op)()
        assert out.dtype is tt.float32
        with np.errstate(divide="ignore", invalid="ignore"):
            assert_close(out, ref(x.astype(NP[d]).astype(np.float64)), tt.float32, "range_reduction")


def test_new_unary_special_values():
    inf, nan = float("inf"), float("nan")
    x = tt.tensor([0.0, -0.0, inf, -inf, nan, 30.0, -30.0], dtype=tt.float64)
    assert_close(tt.erfc(x), [1, 1, 0, 2, nan, math.erfc(30.0), 2], F64)
    assert_close(tt.sinc(x), [1, 1, nan, nan, nan, 0, 0], F64)  # sin(inf) is NaN (torch's too)
    assert_close(tt.i0(x), [1, 1, inf, inf, nan, np.i0(30.0), np.i0(30.0)], F64)
    assert_close(tt.frac(x), [0, -0.0, nan, nan, nan, 0, 0], F64)
    p = tt.tensor([0.0, 1.0, 0.5, -0.5], dtype=tt.float64)
    assert_close(tt.logit(p), [-inf, inf, 0, nan], F64)
    assert_close(tt.logit(p, eps=0.25), [math.log(1 / 3), math.log(3), 0, math.log(1 / 3)], F64)
    assert_close(tt.logit(tt.tensor([0, 1]), 0.25), [math.log(1 / 3), math.log(3)], tt.float32)
    big = [700.0, 710.0]  # I_0(710) is finite, e^710 is not
    assert_close(tt.i0(tt.tensor(big, dtype=tt.float64)), [_i0_decimal(v) for v in big], F64)


def _i0_decimal(x):
    """I_0(x) by its power series in 60-digit decimal arithmetic (past float64's e^x)."""
    with localcontext() as ctx:
        ctx.prec = 60
        q, term, acc, k = Decimal(x) ** 2 / 4, Decimal(1), Decimal(1), 0
        while term > acc * Decimal(10) ** -40:
            k += 1
            term = term * q / (k * k)
            acc += term
        return float(acc)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [tt.int32, tt.int64, tt.bool], ids=str)
def test_bool_predicates_match_numpy(dtype):
    inf, nan = float("inf"), float("nan")
    if dtype.is_floating_point:
        x = np.array([[0.0, -0.0, inf], [-inf, nan, -2.5], [3.0, -1e-30, 7.0]])
    else:
        x = np.array([[0, -3, 5], [1, -1, 2], [0, 7, -8]]) if dtype is not tt.bool else np.array([[0, 1, 1]] * 3)
    xd = x.astype(NP[dtype])
    t = tt.tensor(xd)
    for layout_t, layout_x in ((t, xd), (t.T, xd.T), (t[::2, 1:], xd[::2, 1:]), (t[:0], xd[:0]), (t[1, 2], xd[1, 2])):
        for name, ref in (("signbit", np.signbit), ("isposinf", np.isposinf), ("isneginf", np.isneginf),
                          ("isreal", np.isreal)):
            want = ref(layout_x.astype(np.float64))  # exact: -0.0, infinities and NaN survive the cast
            for out in (getattr(tt, name)(layout_t), getattr(layout_t, name)()):
                assert out.dtype is tt.bool and out.shape == np.shape(want)
                np.testing.assert_array_equal(out.cpu().numpy(), want, err_msg=name)
    assert not hasattr(t, "signbit_") and not hasattr(tt, "isposinf_")  # torch has no in-place forms of these


# ----- binary -------------------------------------------------------------------------------------
def _xlogy(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.isnan(y), np.nan, np.where(x == 0, 0.0, x * np.log(y)))


def _gamma_q(a, x):
    """Q(a, x) for half-integer a >= 1/2, closed: Q(1/2, x) = erfc(sqrt x), Q(1, x) = e^-x and
    Q(a + 1, x) = Q(a, x) + x^a e^-x / Gamma(a + 1): positive terms only (written apart from the
    kernel's series and continued fraction)."""
    out = np.empty(np.broadcast(a, x).shape)
    for i, (av, xv) in enumerate(zip(*(np.broadcast_to(v, out.shape).ravel() for v in (a, x)))):
        q, k = (math.erfc(math.sqrt(xv)), 0.5) if av % 1 else (math.exp(-xv), 1.0)
        while k < av:
            q += math.exp(k * math.log(xv) - xv - math.lgamma(k + 1)) if xv > 0 else 0.0
            k += 1
        out.flat[i] = q
    return out


def _gamma_p(a, x):
    """P(a, x) = 1 - Q where Q < 1/2; else the series x^a e^-x / Gamma(a + 1) sum x^n / ((a+1)...(a+n)),
    whose terms only shrink there (no cancellation in either)."""
    q = _gamma_q(a, x)
    out = np.empty(q.shape)
    for i, (av, xv, qv) in enumerate(zip(*(np.broadcast_to(v, q.shape).ravel() for v in (a, x, q)))):
        if qv < 0.5 or xv == 0:
            out.flat[i] = 1.0 - qv
            continue
        term, acc, n = 1.0, 1.0, 1
        while term > 1e-18 * acc:
            term *= xv / (av + n)
            acc += term
            n += 1
        out.flat[i] = acc * math.exp(av * math.log(xv) - xv - math.lgamma(av + 1))
    return out


def _half_integers(shape):
    return rng.integers(1, 25, size=shape) / 2.0


def _nonneg(shape):
    return np.abs(rng.standard_normal(shape)) * 6


# op -> (float64 reference, input's values, other's values)
BINARY_MORE = {
    "copysign": (np.copysign, None, None),
    "fmax": (np.fmax, None, None),
    "fmin": (np.fmin, None, None),
    "logaddexp": (np.logaddexp, None, None),
    "logaddexp2": (np.logaddexp2, None, None),
    "xlogy": (_xlogy, None, _nonneg),
    "nextafter": (None, None, None),  # in the dtype itself: np.nextafter of the very values
    "igamma": (_gamma_p, _half_integers, _nonneg),
    "igammac": (_gamma_q, _half_integers, _nonneg),
}


def _default_values(shape):
    x = rng.standard_normal(shape) * 3
    x.flat[::5] = 0.0  # xlogy's and copysign's zeros, fmax's ties (with the other's zeros)
    return x


def _with_nans(values, op):
    if op not in ("fmax", "fmin"):
        return values

    def f(shape):
        x = values(shape)
        x.flat[::3] = np.nan  # fmax/fmin take the other where one is NaN
        return x
    return f


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("op", sorted(BINARY_MORE))
def test_new_binary_against_float64(op, dtype):
    ref, xv, yv = BINARY_MORE[op]
    xv, yv = xv or _default_values, yv or _default_values
    # every layout of the input against a broadcast row, then a column against a row; empty and 0-d
    cases = [(make((5, 7), dtype, layout, _with_nans(xv, op)), make((7,), dtype, "contiguous", yv), layout)
             for layout in (LAYOUTS if op not in ("igamma", "igammac") else ("contiguous", "transposed"))]
    cases += [(make((5, 1), dtype, "contiguous", xv), make((1, 7), dtype, "sliced", yv), "broadcast"),
              (make((0, 3), dtype, "contiguous", xv), make((3,), dtype, "contiguous", yv), "empty"),
              (make((), dtype, "contiguous", xv), make((), dtype, "contiguous", yv), "0-d")]
    for (a, x), (b, y), layout in cases:
        out = getattr(tt, op)(a, b)
        shape = np.broadcast_shapes(x.shape, y.shape)
        assert out.dtype is dtype and out.shape == shape
        if op == "nextafter":
            want = np.nextafter(x.astype(NP[dtype]), y.astype(NP[dtype])).astype(np.float64)
            assert_close(out, want, dtype, "exact", err_msg=layout)
            continue
        # igamma: P(a, x) = 1 - Q rounds to 1 in fp32 where the fp64 reference does not, an ulp
        assert_close(out, ref(x, y), dtype, "range_reduction", err_msg=f"{op} {layout}")


@pytest.mark.parametrize("op", sorted(BINARY_MORE))
def test_new_binary_integer_inputs_as_torch(op):
    a, b = tt.tensor([[1, 0, -2]]), tt.tensor([[3], [2]], dtype=tt.int32)
    if op in ("logaddexp", "logaddexp2", "nextafter", "igamma", "igammac"):
        with pytest.raises(NotImplementedError, match=rf'"{op}_\w+" not implemented for \'Long\''):
            getattr(tt, op)(a, b)
        return
    out = getattr(tt, op)(a, b)
    want = BINARY_MORE[op][0](np.array([[1, 0, -2]]).astype(np.float64), np.array([[3], [2]]).astype(np.float64))
    # copysign and xlogy give the default float for integers, fmax/fmin keep the promoted integer (torch's)
    assert out.dtype is (tt.int64 if op in ("fmax", "fmin") else tt.float32)
    assert_close(out, want, out.dtype)


def test_new_binary_scalars_and_mixed_dtypes():
    x = tt.tensor([-1.5, 0.0, 2.0], dtype=tt.float16)
    assert_close(tt.copysign(x, -1.0), [-1.5, -0.0, -2.0], tt.float16)
    assert tt.copysign(x, -1.0).dtype is tt.float16
    assert_close(tt.xlogy(2, tt.tensor([1.0, math.e])), [0.0, 2.0], tt.float32)
    assert_close(tt.xlogy(x, 3), _xlogy(np.array([-1.5, 0.0, 2.0]), 3.0), tt.float16)
    out = tt.fmax(x, tt.tensor([0.0, 1.0, float("nan")], dtype=tt.float64))
    assert out.dtype is tt.float64
    assert_close(out, [0.0, 1.0, 2.0], F64)
    nan, inf = float("nan"), float("inf")
    la = tt.logaddexp(tt.tensor([inf, -inf, nan, -inf]), tt.tensor([inf, -inf, 1.0, 3.0]))
    assert_close(la, [inf, -inf, nan, 3.0], tt.float32)
    # nextafter steps fp16 and bf16 by their own ulp, from 0 to the least subnormal with other's sign
    for d in (tt.float16, tt.bfloat16, tt.float32, tt.float64):
        a = np.array([0.0, 0.0, 1.0, -1.0, 2.0, inf, nan], dtype=NP[d])
        b = np.array([1.0, -1.0, 2.0, 0.0, 2.0, 0.0, 0.0], dtype=NP[d])
        assert_close(tt.nextafter(tt.tensor(a), tt.tensor(b)), np.nextafter(a, b).astype(np.float64), d, "exact")


def test_igamma_special_values_and_large_a():
    inf, nan = float("inf"), float("nan")
    a = tt.tensor([0.0, 0.0, 1.0, inf, 1.0, -1.0, 2.0, inf], dtype=F64)
    x = tt.tensor([0.0, 1.0, 0.0, 1.0, inf, 1.0, -1.0, inf], dtype=F64)
    assert_close(tt.igamma(a, x), [nan, 1, 0, 0, 1, nan, nan, nan], F64)
    assert_close(tt.igammac(a, x), [nan, 0, 1, 1, 0, nan, nan, nan], F64)
    big_a = np.array([150.5, 150.5, 400.0, 400.0])
    big_x = np.array([120.0, 170.0, 380.0, 430.0])
    ta, tx = tt.tensor(big_a, dtype=F64), tt.tensor(big_x, dtype=F64)
    assert_close(tt.igamma(ta, tx), _gamma_p(big_a, big_x), F64)
    assert_close(tt.igammac(ta, tx), _gamma_q(big_a, big_x), F64)


def test_heaviside_matches_numpy():
    for d in FLOAT_DTYPES + [tt.int64]:
        x = np.array([[-2.0, 0.0, 3.5], [0.0, 1e-3, -0.0]]).astype(NP[d])
        v = np.array([0.25, 7.0, -1.0]).astype(NP[d])
        for a, xa in ((tt.tensor(x), x), (tt.tensor(x).T, x.T)):
            vv = v if xa.shape[-1] == 3 else v[:2]
            for out in (tt.heaviside(a, tt.tensor(vv)), a.heaviside(tt.tensor(vv))):
                assert out.dtype is d
                assert_close(out, np.heaviside(xa.astype(np.float64), vv.astype(np.float64)), d, "exact")
        z = tt.tensor(x)
        assert z.heaviside_(tt.tensor(v)) is z and z._version == 1
        assert_close(z, np.heaviside(x.astype(np.float64), v.astype(np.float64)), d, "exact")
    with pytest.raises(RuntimeError, match="heaviside is not yet implemented for tensors with different dtypes"):
        tt.heaviside(tt.zeros(2), tt.zeros(2, dtype=tt.float64))
    with pytest.raises(TypeError, match="argument 'values'"):
        tt.heaviside(tt.zeros(2), 0.5)


@pytest.mark.parametrize("dtype", [tt.int32, tt.int64, tt.uint8, tt.int16], ids=str)
def test_gcd_lcm_match_numpy(dtype):
    hi = 200 if dtype is tt.uint8 else 10_000
    lo = 0 if dtype is tt.uint8 else -hi
    x = rng.integers(lo, hi, size=(6, 5)).astype(NP[dtype])
    y = rng.integers(lo, hi, size=(5,)).astype(NP[dtype])
    x[0, :2] = 0
    y[0] = 0
    for op, ref in (("gcd", np.gcd), ("lcm", np.lcm)):
        want = ref(x.astype(np.int64), y.astype(np.int64)).astype(NP[dtype])  # lcm wraps as torch's
        for a, xa in ((tt.tensor(x), x), (tt.tensor(x)[::2], x[::2]), (tt.tensor(x)[:0], x[:0])):
            out = getattr(tt, op)(a, tt.tensor(y))
            assert out.dtype is dtype
            np.testing.assert_array_equal(out.cpu().numpy(), ref(xa.astype(np.int64), y.astype(np.int64))
                                          .astype(NP[dtype]))
        z = tt.tensor(x)
        assert getattr(tt, op + "_")(z, tt.tensor(y)) is z and z._version == 1
        np.testing.assert_array_equal(z.cpu().numpy(), want)
    # the worst case of Euclid's steps: consecutive Fibonacci numbers near the top of int64
    f = [1, 1]
    while f[-1] < 2**62:
        f.append(f[-1] + f[-2])
    assert tt.gcd(tt.tensor([f[-1]]), tt.tensor([f[-2]])).tolist() == [1]


def test_new_binary_errors(no_launch):
    for op in ("gcd", "lcm"):
        with pytest.raises(NotImplementedError, match=rf'"{op}_\w+" not implemented for \'Float\''):
            getattr(tt, op)(tt.zeros(2), tt.zeros(2))
        with pytest.raises(NotImplementedError, match=rf'"{op}_\w+" not implemented for \'Bool\''):
            getattr(tt, op)(tt.ones(2, dtype=tt.bool), tt.ones(2, dtype=tt.bool))
    for op in ("fmax", "fmin", "logaddexp", "nextafter", "igamma", "gcd"):
        with pytest.raises(TypeError, match=rf"{op}\(\): argument 'other' \(position 2\) must be Tensor, not int"):
            getattr(tt, op)(tt.zeros(2), 1)
    with pytest.raises(NotImplementedError, match="\"frac_\\w+\" not implemented for 'Long'"):
        tt.frac(tt.tensor([1, 2]))
    with pytest.raises(RuntimeError, match=r"shape"):
        tt.copysign(tt.zeros(2, 3), tt.zeros(4))
    with pytest.raises(TypeError, match="argument 'eps'"):
        tt.logit(tt.zeros(2), "x")
    with pytest.raises(RuntimeError, match="can't be cast"):
        tt.zeros(2, dtype=tt.int64).xlogy_(tt.ones(2))


# ----- in-place forms: methods, and torch's functions (torch.exp_) ---------------------------------
INPLACE_MORE = {**{op: () for op in UNARY_MORE},
                **{op: (_nonneg,) for op in ("copysign", "xlogy", "nextafter")},
                "igamma": (_nonneg,), "igammac": (_nonneg,)}
INPLACE_FUNCTIONS_MORE = ("erfc", "deg2rad", "rad2deg", "frac", "sinc", "i0", "logit", "xlogy")


@pytest.mark.parametrize("op", sorted(INPLACE_MORE))
def test_new_inplace_forms_match_out_of_place(op):
    domain = UNARY_MORE[op][1] if op in UNARY_MORE else ("half" if op.startswith("igamma") else "any")
    base = _half_integers((3, 4)) if domain == "half" else _values(domain)((3, 4))
    args = tuple(tt.tensor(f((4,))) for f in INPLACE_MORE[op])
    expected = getattr(tt.tensor(base), op)(*args)
    for via_function in (False, True) if op in INPLACE_FUNCTIONS_MORE else (False,):
        z = tt.tensor(base)
        zt = z.T  # written through a non-contiguous view
        out = getattr(tt, op + "_")(zt.T, *args) if via_function else getattr(zt.T, op + "_")(*args)
        assert out.data_ptr() == z.data_ptr() and z._version == 1
        assert_close(z, expected.cpu().numpy(), tt.float32, "exact")
    assert hasattr(tt, op + "_") == (op in INPLACE_FUNCTIONS_MORE)  # torch.xlogy_ is a function, copysign_ not


# torch's in-place forms that are functions too (torch.abs_(x)), with the aliases among them, on a
# value every one of them takes (in (0, 1))
INPLACE_FUNCTIONS = ("abs_", "acos_", "acosh_", "asin_", "asinh_", "atan_", "atanh_", "arccos_", "arccosh_",
                     "arcsin_", "arcsinh_", "arctan_", "arctanh_", "ceil_", "cos_", "cosh_", "erf_", "exp_", "exp2_",
                     "expm1_", "floor_", "log_", "log10_", "log1p_", "log2_", "neg_", "negative_", "reciprocal_",
                     "relu_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinh_", "sqrt_", "square_", "tan_", "tanh_",
                     "trunc_", "fix_", "nan_to_num_")


@pytest.mark.parametrize("name", INPLACE_FUNCTIONS)
def test_torch_inplace_functions(name):
    x = np.array([0.25, 0.75, 0.5])
    if name in ("acosh_", "arccosh_"):
        x = x + 1.0
    expected = getattr(tt.tensor(x), name[:-1])()
    z = tt.tensor(x)
    assert getattr(tt, name)(z) is z and z._version == 1
    assert_close(z, expected.cpu().numpy(), tt.float32, "exact")
    leaf_ = tt.tensor(x, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        getattr(tt, name)(leaf_)


def test_clamp_min_max_in_place_and_as_functions():
    x = np.array([[-2.0, 0.5, 3.0], [1.0, -0.5, 0.0]])
    for d in FLOAT_DTYPES + [tt.int64]:
        xd = x.astype(NP[d])
        for fn, kw, ref in ((tt.clamp_min, dict(min=0.25), lambda v: np.maximum(v, 0.25)),
                            (tt.clamp_max, dict(max=0.25), lambda v: np.minimum(v, 0.25))):
            if d is tt.int64:
                kw = {k: 1 for k in kw}
                ref = (lambda v: np.maximum(v, 1)) if fn is tt.clamp_min else (lambda v: np.minimum(v, 1))
            want = ref(xd.astype(np.float64))
            assert_close(fn(tt.tensor(xd), *kw.values()), want, d)
            for inplace in (getattr(tt, fn.__name__ + "_"), getattr(tt.Tensor, fn.__name__ + "_")):
                z = tt.tensor(xd)
                assert inplace(z.T, *kw.values()).shape == (3, 2) and z._version == 1
                assert_close(z, want, d)
    bound = tt.tensor([0.0, 1.0, 2.0])
    z = tt.tensor(x)
    z.clamp_min_(bound)
    assert_close(z, np.maximum(x, [0.0, 1.0, 2.0]), tt.float32)
    assert_close(tt.clip_(tt.tensor(x), -1, 1), np.clip(x, -1, 1), tt.float32)
    for fn, leaf_ in ((tt.clamp_min, False), (tt.clamp_max_, False), (tt.clamp_min, True)):
        with pytest.raises(TypeError, match="argument '(min|max)' \\(position 2\\) must be Number or Tensor, not NoneType"):
            fn(tt.tensor(x, requires_grad=leaf_), None)


def test_comparison_aliases():
    a = tt.tensor([[1.0, 2.0, 3.0]])
    b = tt.tensor([[2.0], [3.0]])
    for alias, ref in (("greater", np.greater), ("greater_equal", np.greater_equal), ("less", np.less),
                       ("less_equal", np.less_equal), ("not_equal", np.not_equal)):
        want = ref(a.numpy(), b.numpy())
        for out in (getattr(tt, alias)(a, b), getattr(a, alias)(b), getattr(a, alias)(2.0)):
            assert out.dtype is tt.bool
        np.testing.assert_array_equal(getattr(tt, alias)(a, b).cpu().numpy(), want)
        z = tt.tensor([[1.0, 2.0, 3.0]])
        assert getattr(z, alias + "_")(2.0) is z and z.dtype is tt.float32 and z._version == 1
        np.testing.assert_array_equal(z.cpu().numpy(), ref(np.array([[1.0, 2.0, 3.0]]), 2.0).astype(np.float32))


def test_unary_aliases():
    x = np.array([-2.5, -0.5, 0.0, 1.5])
    t = tt.tensor(x)
    for alias, ref in (("negative", np.negative), ("fix", np.trunc), ("absolute", np.abs), ("sgn", np.sign)):
        assert_close(getattr(tt, alias)(t), ref(x), tt.float32, "exact")
        z = tt.tensor(x)
        assert getattr(z, alias + "_")() is z and z._version == 1
        assert_close(z, ref(x), tt.float32, "exact")
    assert tt.negative_(tt.tensor(x)).tolist() == [2.5, 0.5, -0.0, -1.5]
    signs = tt.sgn(tt.tensor([float("nan"), -0.0, float("-inf")], dtype=F64))  # torch's (0 < x) - (x < 0)
    assert np.array_equal(np.signbit(signs.cpu().numpy()), [False, False, True]) and signs.tolist() == [0, 0, -1]
    for name in ("fix", "trunc", "floor", "ceil"):  # integers are whole already
        assert getattr(tt, name)(tt.tensor([-7, 3])).tolist() == [-7, 3]
        z = tt.tensor([-7, 3], dtype=tt.int32)
        assert getattr(tt, name + "_")(z) is z and z.dtype is tt.int32 and z.tolist() == [-7, 3]


def test_positive_fill_zero_rsub():
    x = tt.tensor([[1.0, -2.0], [3.0, 4.0]])
    assert tt.positive(x) is x and x.positive() is x
    assert tt.positive(tt.tensor([1, 2])).dtype is tt.int64
    with pytest.raises(RuntimeError, match="The `\\+` operator, on a bool tensor is not supported."):
        tt.positive(tt.ones(2, dtype=tt.bool))
    for value, d in ((2.5, tt.float32), (tt.tensor(7.0), tt.float32)):
        out = tt.fill(x.T, value)
        assert out.shape == (2, 2) and out.dtype is d and x.tolist() == [[1.0, -2.0], [3.0, 4.0]]
        assert_close(out, np.full((2, 2), float(value)), d, "exact")
    assert tt.fill(tt.zeros(3, dtype=tt.int64), 4).tolist() == [4, 4, 4]
    z = tt.tensor([1.0, 2.0])
    assert tt.fill_(z, 5.0) is z and z.tolist() == [5.0, 5.0]
    assert tt.zero_(z) is z and z.tolist() == [0.0, 0.0]
    assert_close(tt.rsub(x, 1), 1 - x.numpy(), tt.float32, "exact")
    assert_close(tt.rsub(x, 1, alpha=2), 1 - 2 * x.numpy(), tt.float32, "exact")
    assert_close(tt.rsub(x, tt.tensor([10.0, 20.0]), alpha=3), np.array([10.0, 20.0]) - 3 * x.numpy(), tt.float32)
    assert tt.rsub(tt.tensor([1, 2]), 5).tolist() == [4, 3]
    with pytest.raises(TypeError, match="argument 'input'"):
        tt.rsub(3, x)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_frexp_matches_numpy(dtype):
    def values(shape):
        x = rng.standard_normal(shape) * 10.0 ** rng.integers(-4, 4, size=shape)
        x.flat[:3] = [0.0, 2.0, -0.5]
        return x

    for layout in LAYOUTS:
        t, x = make((4, 5), dtype, layout, values)
        m, e = tt.frexp(t)
        mantissa, exponent = t.frexp()
        want_m, want_e = np.frexp(x)
        assert m.dtype is dtype and e.dtype is tt.int32
        assert_close(m, want_m, dtype, "exact")
        np.testing.assert_array_equal(e.cpu().numpy(), want_e)
        np.testing.assert_array_equal(exponent.cpu().numpy(), want_e)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40 if dtype is not tt.float16 else 1e-6])
    m, e = tt.frexp(tt.tensor(special.astype(NP[dtype])))
    want_m, want_e = np.frexp(special.astype(NP[dtype]).astype(np.float64))
    assert_close(m, want_m, dtype, "exact")  # a subnormal's exponent is below the normal range's
    np.testing.assert_array_equal(e.cpu().numpy(), np.where(np.isfinite(special), want_e, 0))
    assert tt.frexp(tt.zeros(0, 3, dtype=dtype)).mantissa.shape == (0, 3)
    with pytest.raises(RuntimeError, match=r"torch.frexp\(\) only supports floating-point dtypes"):
        tt.frexp(tt.tensor([1, 2]))


def _mvlgamma(x, p):
    return p * (p - 1) / 4 * math.log(math.pi) + sum(np.vectorize(math.lgamma)(x - j / 2) for j in range(p))


def test_float_power_ldexp_mvlgamma():
    x = np.array([[0.5, 2.0, 3.0], [1.5, 0.25, 4.0]])
    for d in FLOAT_DTYPES + [tt.int64]:
        xd = x.astype(NP[d]) if d.is_floating_point else np.round(x * 2).astype(np.int64)
        xr = xd.astype(np.float64)
        t = tt.tensor(xd)
        out = tt.float_power(t, 2.5)
        assert out.dtype is tt.float64
        assert_close(out, xr ** 2.5, F64)
        assert_close(tt.float_power(t.T, tt.tensor([1, 2])), xr.T ** np.array([1, 2]), F64)
        assert_close(tt.float_power(2, t), 2.0 ** xr, F64)
        e = np.array([1, -2, 3])
        out = tt.ldexp(t, tt.tensor(e))
        assert out.dtype is (d if d.is_floating_point else tt.float32)
        assert_close(out, xr * 2.0 ** e, out.dtype)
        out = tt.mvlgamma(t + 2, 3)
        assert out.dtype is (d if d.is_floating_point else tt.float32)
        assert_close(out, _mvlgamma(xr + 2, 3), out.dtype, "range_reduction")
    z = tt.tensor(x, dtype=F64)
    assert z.float_power_(2) is z and z._version == 1
    assert_close(z, x ** 2, F64)
    with pytest.raises(RuntimeError, match="the base given to float_power_ has dtype Float but the operation's "
                                           "result requires dtype Double"):
        tt.ones(2).float_power_(2)
    z = tt.tensor(x)
    assert tt.ldexp_(z, tt.tensor([1, 0, -1])) is z
    assert_close(z, x * [2.0, 1.0, 0.5], tt.float32)
    z = tt.tensor(x + 2)
    assert z.mvlgamma_(2) is z
    assert_close(z, _mvlgamma(x + 2, 2), tt.float32, "range_reduction")
    # below (p - 1) / 2 the lgamma terms as they are (torch 2.13 no longer refuses them): inf at a pole
    assert_close(tt.mvlgamma(tt.tensor([0.2, -1.3, 1.0], dtype=F64), 2), _mvlgamma(np.array([0.2, -1.3, 1.0]), 2),
                 F64)
    with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
        tt.mvlgamma(tt.tensor([2.0]), 0)
    assert tt.mvlgamma(tt.zeros(0), 2).shape == (0,)


def test_tensor_questions():
    f, i, u, b = tt.zeros(2, 3), tt.zeros(4, dtype=tt.int64), tt.zeros(1, dtype=tt.uint8), tt.ones(1, dtype=tt.bool)
    assert [tt.is_complex(t) for t in (f, i)] == [False, False] and not f.is_complex()
    assert [tt.is_floating_point(t) for t in (f, i, b)] == [True, False, False]
    assert [tt.is_signed(t) for t in (f, i, u, b)] == [True, True, False, False] and not u.is_signed()
    assert tt.is_nonzero(b) is True and tt.tensor([0.0]).is_nonzero() is False and tt.is_nonzero(tt.tensor(2))
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with no values is ambiguous"):
        tt.is_nonzero(tt.zeros(0))
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value is ambiguous"):
        tt.is_nonzero(f)
    assert tt.is_same_size(f, tt.ones(2, 3)) and not f.is_same_size(f.T)
    assert tt.numel(f) == 6 and tt.numel(tt.zeros(0, 5)) == 0 and tt.numel(tt.tensor(1.0)) == 1
    with pytest.raises(TypeError, match="argument 'input'"):
        tt.numel([1, 2])
    with pytest.raises(TypeError, match="argument 'other'"):
        f.is_same_size((2, 3))


# ----- derivatives: gradcheck in float64 -----------------------------------------------------------
GRAD_UNARY_MORE = {"erfc": {}, "deg2rad": {}, "rad2deg": {}, "frac": dict(lo=0.1, hi=0.9), "sinc": {},
                   "i0": {}, "logit": dict(lo=0.1, hi=0.9)}


@pytest.mark.parametrize("op", sorted(GRAD_UNARY_MORE))
def test_new_unary_gradcheck(op):
    x = leaf(3, **GRAD_UNARY_MORE[op])
    assert gradcheck(lambda t: getattr(tt, op)(t), (x,))
    assert gradgradcheck(lambda t: getattr(t, op)(), (x,), fast_mode=True)  # random projections (fast)
    lo, hi = GRAD_UNARY_MORE[op].get("lo", -1.0), GRAD_UNARY_MORE[op].get("hi", 1.0)
    # a transposed leaf (values in (-1, 1)), mapped into the op's domain
    assert gradcheck(lambda t: getattr(tt, op)((t * 0.5 + 0.5) * (hi - lo) + lo), (noncontig(2, 2),))
    if op == "logit":  # eps clamps: a zero gradient outside [eps, 1 - eps]
        p = tt.tensor([0.05, 0.5, 0.95], dtype=F64, requires_grad=True)
        assert gradcheck(lambda t: tt.logit(t, eps=0.1), (p,))
        tt.logit(p, 0.1).sum().backward()
        assert_close(p.grad, [0.0, 4.0, 0.0], F64)
    if op in ("sinc", "i0"):  # at 0 too (the removable singularity of their formulas); sinc's second
        # derivative there is torch's masked 0, not -pi^2 / 3, so only i0's is checked at 0
        z = tt.tensor([0.0, 0.3], dtype=F64, requires_grad=True)
        assert gradcheck(lambda t: getattr(t, op)(), (z,))
        assert op == "sinc" or gradgradcheck(lambda t: getattr(t, op)(), (z,), fast_mode=True)


def _binary_leaves(op):
    if op.startswith("igamma"):  # torch differentiates in x only
        return tt.tensor([0.5, 2.0, 3.5], dtype=F64), leaf(3, positive=True)
    if op == "xlogy":
        return leaf(2, 3), leaf(3, positive=True)
    return noncontig(2, 2), leaf(2)  # a transposed leaf and a broadcast row


@pytest.mark.parametrize("op", sorted(BINARY_MORE))
def test_new_binary_gradcheck(op):
    a, b = _binary_leaves(op)
    if op in ("fmax", "fmin"):
        with tt.no_grad():
            b = tt.tensor([0.3, float("nan")], dtype=F64)  # other's NaN: all to input
        b.requires_grad_()
    assert gradcheck(lambda x, y: getattr(tt, op)(x, y), tuple(t for t in (a, b)))
    if op not in ("nextafter", "igamma", "igammac"):  # (nextafter's is 0; igamma's derivative has no igamma)
        assert gradgradcheck(lambda x, y: getattr(x, op)(y), (a, b), fast_mode=True)


@pytest.mark.parametrize("op", sorted(INPLACE_MORE))
def test_new_inplace_gradcheck(op):
    if op in GRAD_UNARY_MORE:
        x = leaf(2, 3, **GRAD_UNARY_MORE[op])
        assert gradcheck(lambda t: getattr(t * 1, op + "_")(), (x,))
        return
    a, b = _binary_leaves(op)
    if a.requires_grad:
        assert gradcheck(lambda x, y: getattr(x * 1, op + "_")(y), (a, b))
    else:  # igamma_, igammac_: in x only
        assert gradcheck(lambda y: getattr(a * 1, op + "_")(y), (b,))


def test_xlogy_nextafter_gradients_at_their_edges_as_torch():
    a = tt.tensor([0.0, 0.0, 1.0, 2.0], dtype=F64, requires_grad=True)
    b = tt.tensor([0.0, 2.0, float("nan"), 2.0], dtype=F64, requires_grad=True)
    tt.xlogy(a, b).backward(tt.ones(4, dtype=F64))  # torch 2.13's values, recorded from it
    assert_close(a.grad, [0.0, math.log(2.0), float("nan"), math.log(2.0)], F64)
    assert_close(b.grad, [float("nan"), 0.0, float("nan"), 1.0], F64)
    a.grad = b.grad = None
    tt.nextafter(a, b).backward(tt.ones(4, dtype=F64))  # 1 where input moved, 0 where it was other already
    assert_close(a.grad, [0.0, 1.0, 1.0, 0.0], F64)
    assert_close(b.grad, [0.0, 0.0, 0.0, 0.0], F64)


def test_derivatives_torch_does_not_implement():
    a, b = leaf(3), leaf(3)
    for y in (tt.heaviside(a, b), (a * 1).heaviside_(b)):
        assert y.requires_grad
        with pytest.raises(RuntimeError, match="the derivative for 'heaviside' is not implemented"):
            y.sum().backward()
    x = leaf(3, positive=True)
    with pytest.raises(NotImplementedError, match="the derivative for 'igamma: input' is not implemented"):
        tt.igamma(x, x.detach()).sum().backward()
    with pytest.raises(NotImplementedError, match="the derivative for 'igammac: input' is not implemented"):
        tt.igammac(x, x.detach()).sum().backward()


def test_clamp_min_max_in_place_gradcheck():
    x = tt.tensor([-0.7, 0.2, 0.9], dtype=F64, requires_grad=True)
    lo = tt.tensor([0.0, 0.5, -1.0], dtype=F64, requires_grad=True)
    assert gradcheck(lambda t, m: (t * 1).clamp_min_(m), (x, lo))
    assert gradcheck(lambda t, m: tt.clamp_max_(t * 1, m), (x, lo))
    assert gradcheck(lambda t: tt.clamp_min_(t * 1, 0.1), (x,))


def test_composites_gradcheck():
    x = leaf(2, 2, positive=True)
    e = leaf(2)
    assert gradcheck(lambda v: tt.fill(x, v), (tt.tensor(0.5, dtype=F64, requires_grad=True),))
    y = tt.fill(x, 2.0)
    assert y.requires_grad
    y.sum().backward()  # a number: nothing of the gradient reaches input (torch's zero)
    assert x.grad is None or not x.grad.any().item()
    assert gradcheck(lambda t, o: tt.rsub(t, o, alpha=2), (x, e))
    assert gradcheck(lambda t: tt.frexp(t).mantissa, (noncontig(2, 2),))
    assert gradcheck(lambda t, v: tt.float_power(t, v), (x, e))
    assert gradcheck(lambda t, v: (t * 1).float_power_(v), (x, e))
    assert gradcheck(lambda t: tt.ldexp(t, tt.tensor([1, -1])), (x,))
    assert gradcheck(lambda t: tt.ldexp_(t * 1, tt.tensor([1, -1])), (x,))
    assert gradcheck(lambda t: tt.mvlgamma(t + 2, 3), (x,))
    assert gradcheck(lambda t: (t + 2).mvlgamma_(2), (x,))
