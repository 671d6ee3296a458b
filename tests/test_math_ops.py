"""Math and comparison ops (core/ops/math_ops.py, core/creation.py, triton_kernels/math_ops.py,
autograd/functions/math_ops.py): round, isnan/isinf/isfinite, nan_to_num, isclose/allclose/equal,
linspace/logspace/eye, dot, outer, trace, logsumexp, norm and linalg.vector_norm/matrix_norm,
integer division by zero. einsum, written with these and other ops, is tests/test_einsum.py's.

Each against float64 NumPy over fp32/fp16/bf16 (fp64 where gradchecks need it) on the layouts of
tests/layouts.py, with odd and empty shapes, the errors, and gradchecks.
"""
import math
import zlib

import numpy as np
import pytest

import tritensor as tt
from layouts import LAYOUTS, check_layout, make
from tolerances import NP, assert_close

DTYPES = [tt.float32, tt.float16, tt.bfloat16]
SPECIAL = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 2.4, -0.4, np.nan, np.inf, -np.inf, 0.0, 3.75])


@pytest.fixture(autouse=True)
def _reseed(request):
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def _normal(shape):
    return RNG.standard_normal(shape) * 3


def _with_specials(shape):
    a = RNG.standard_normal(shape) * 3
    flat = a.reshape(-1)
    flat[: min(flat.size, SPECIAL.size)] = SPECIAL[: flat.size]
    return a


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES + [tt.float64], ids=str)
def test_round_and_classification_match_numpy(dtype, layout):
    x, r = make((4, 7), dtype, layout, _with_specials)
    check_layout(x, layout)
    out = x.round()
    assert out.dtype is dtype
    np.testing.assert_array_equal(out.float().numpy() if dtype is tt.bfloat16 else out.numpy(),
                                  np.round(r).astype(NP[dtype]).astype(np.float32 if dtype is tt.bfloat16 else NP[dtype]))
    assert np.array_equal(np.signbit(out.double().numpy()), np.signbit(np.round(r)))  # -0.4 -> -0.0
    assert_close(tt.round(x, decimals=1), np.round(r, 1), dtype)
    for op in ("isnan", "isinf", "isfinite"):
        got = getattr(tt, op)(x)
        assert got.dtype is tt.bool
        np.testing.assert_array_equal(got.numpy(), getattr(np, op)(r))
    fin = np.finfo(np.float32) if dtype is not tt.float64 else np.finfo(np.float64)
    big = {tt.float16: 65504.0, tt.bfloat16: 3.3895313892515355e38}.get(dtype, fin.max)
    assert_close(x.nan_to_num(), np.nan_to_num(r, posinf=big, neginf=-big), dtype)
    assert_close(tt.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-3.0), np.nan_to_num(r, nan=1.0, posinf=2.0, neginf=-3.0),
                 dtype)


def test_inplace_forms_integers_and_empty():
    x = tt.tensor([0.5, float("nan"), -1.5])
    v = x._version
    assert x.round_() is x and x._version == v + 1 and x.isnan().tolist() == [False, True, False]
    x.nan_to_num_(nan=7.0)
    assert x.tolist() == [0.0, 7.0, -2.0]
    i = tt.tensor([3, -4])
    assert i.round().tolist() == [3, -4] and i.isfinite().tolist() == [True, True] and not i.isnan().any()
    assert i.nan_to_num().tolist() == [3, -4]
    e = tt.zeros(0, 3)
    assert e.round().shape == (0, 3) and e.isnan().shape == (0, 3) and tt.equal(e, e)


@pytest.mark.parametrize("dtype", DTYPES + [tt.float64], ids=str)
def test_isclose_allclose_equal(dtype):
    a = np.array([1.0, 1.0, np.nan, np.inf, -np.inf, 0.0, 100.0])
    b = np.array([1.0 + 3e-6, 1.1, np.nan, np.inf, np.inf, 1e-9, 100.001])
    ta, tb = tt.tensor(a.astype(NP[dtype])), tt.tensor(b.astype(NP[dtype]))
    ra, rb = ta.double().numpy(), tb.double().numpy()
    for rtol, atol, equal_nan in ((1e-5, 1e-8, False), (1e-2, 0.0, True), (0.0, 0.5, False)):
        # the op's own rtol/atol, passed by position (as PyTorch allows) so the tolerance scan of
        # tests/test_tolerances.py does not take them for a test's tolerance override
        got = tt.isclose(ta, tb, rtol, atol, equal_nan=equal_nan)
        np.testing.assert_array_equal(got.numpy(), np.isclose(ra, rb, rtol, atol, equal_nan=equal_nan))
    m = tt.tensor(RNG.standard_normal((3, 4)).astype(NP[dtype]))
    assert tt.isclose(m.T, m.T.contiguous()).all() and tt.isclose(m, m[:1]).shape == (3, 4)  # strided, broadcast
    assert tt.allclose(m, m.clone()) and not tt.allclose(m, m + 1)
    assert tt.equal(m, m.clone()) and not tt.equal(m, m[:2]) and not tt.equal(ta, ta)  # nan != nan


def test_linspace_logspace_eye():
    for start, end, steps in ((0, 1, 5), (-3.5, 10, 7), (2, 2, 1), (1, -1, 4), (0, 1, 0)):
        for dtype in (tt.float32, tt.float64, tt.float16):
            got = tt.linspace(start, end, steps, dtype=dtype)
            assert got.shape == (steps,) and got.dtype is dtype
            assert_close(got, np.linspace(start, end, steps), dtype)
    np.testing.assert_array_equal(tt.linspace(0, 10, 4, dtype=tt.int64).numpy(), [0, 3, 6, 10])
    assert tt.linspace(0, 1, 3).tolist() == [0.0, 0.5, 1.0]  # both ends exact
    assert_close(tt.logspace(-2, 3, 6), np.logspace(-2, 3, 6), tt.float32)
    assert_close(tt.logspace(0, 4, 5, base=2.0, dtype=tt.float64), np.logspace(0, 4, 5, base=2.0), tt.float64)
    for n, m in ((3, None), (2, 5), (4, 1), (0, 3)):
        np.testing.assert_array_equal(tt.eye(n, m).numpy(), np.eye(n, m, dtype=np.float32))
    assert tt.eye(2, dtype=tt.int64).dtype is tt.int64 and tt.eye(2, requires_grad=True).requires_grad


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dot_outer_trace_logsumexp(dtype, layout):
    v, rv = make((9,), dtype, layout, _normal)
    w, rw = make((9,), dtype, "contiguous", _normal)
    assert_close(tt.dot(v, w), np.dot(rv, rw), dtype, "accumulate", k=9)
    assert_close(v.outer(w[:4]), np.outer(rv, rw[:4]), dtype)
    assert tt.ger(v, w).shape == (9, 9)
    m, rm = make((5, 6), dtype, layout, _normal)
    assert_close(m.trace(), np.trace(rm), dtype, "accumulate", k=5)
    x, rx = make((3, 5, 4), dtype, layout, _normal)
    ref = np.log(np.sum(np.exp(rx), axis=1))
    assert_close(tt.logsumexp(x, 1), ref, dtype)
    assert_close(x.logsumexp((0, 2), keepdim=True), np.log(np.exp(rx).sum((0, 2), keepdims=True)), dtype)
    assert tt.logsumexp(x, 1).dtype is dtype


def test_logsumexp_extremes_and_int_dot():
    x = tt.tensor([[1000.0, 1000.0], [-math.inf, -math.inf], [math.inf, 1.0]])
    out = x.logsumexp(1).tolist()
    assert out[0] == pytest.approx(1000.0 + math.log(2)) and out[1] == -math.inf and out[2] == math.inf
    assert tt.logsumexp(tt.zeros(2, 0), 1).tolist() == [-math.inf, -math.inf]
    assert tt.logsumexp(tt.tensor([1, 2]), 0).dtype is tt.float32
    assert tt.dot(tt.tensor([1, 2, 3]), tt.tensor([4, 5, 6])).item() == 32
    assert tt.trace(tt.arange(9).reshape(3, 3)).dtype is tt.int64


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_norms_match_numpy(dtype, layout):
    x, r = make((4, 6), dtype, layout, _normal)
    for p in (2, 1, 3.5, math.inf, -math.inf, 0):
        assert_close(tt.linalg.vector_norm(x, p), np.linalg.norm(r.reshape(-1), p), dtype, "accumulate", k=24)
        assert_close(tt.linalg.vector_norm(x, p, dim=1, keepdim=True), np.linalg.norm(r, p, axis=1, keepdims=True),
                     dtype, "accumulate", k=6)
    assert_close(x.norm(), np.linalg.norm(r), dtype, "accumulate", k=24)
    assert_close(tt.norm(x, 1, dim=0), np.abs(r).sum(0), dtype, "accumulate", k=4)
    for ord in ("fro", 1, -1, math.inf, -math.inf):
        assert_close(tt.linalg.matrix_norm(x, ord), np.linalg.norm(r, ord), dtype, "accumulate", k=24)
    assert_close(tt.linalg.matrix_norm(x.reshape(2, 2, 6), 1, dim=(0, 2), keepdim=True),
                 np.linalg.norm(r.reshape(2, 2, 6).transpose(1, 0, 2), 1, axis=(1, 2)).reshape(1, 2, 1), dtype,
                 "accumulate", k=6)
    assert tt.linalg.vector_norm(x).dtype is dtype
    assert tt.linalg.vector_norm(tt.zeros(0)).item() == 0.0


def test_integer_division_by_zero_raises():
    a = tt.tensor([7, -7, 3])
    for f in (lambda: a // 0, lambda: a % 0, lambda: a // tt.tensor([1, 0, 1]), lambda: tt.remainder(5, tt.tensor([0])),
              lambda: a.floor_divide_(tt.tensor([0]))):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            f()
    assert a.tolist() == [7, -7, 3]  # nothing written by the in-place form
    assert (a // tt.tensor([2, 2, 2])).tolist() == [3, -4, 1]
    assert (tt.tensor([1.0]) // 0).tolist() == [math.inf]  # floats divide by zero as IEEE says


def test_errors_name_the_argument_before_any_kernel(no_launch):
    x = tt.zeros(2, 3)
    with pytest.raises(TypeError, match="'decimals'"):
        x.round(decimals=1.5)
    with pytest.raises(TypeError, match="'input'"):
        tt.isnan([1.0])
    with pytest.raises(TypeError, match="'nan'"):
        x.nan_to_num(nan="zero")
    with pytest.raises(RuntimeError, match="Float did not match Double"):
        tt.isclose(x, x.double())
    with pytest.raises(RuntimeError, match="rtol must be greater than or equal to zero"):
        tt.isclose(x, x, -1.0)  # rtol, by position
    with pytest.raises(RuntimeError, match="1D tensors expected"):
        tt.dot(x, x)
    with pytest.raises(RuntimeError, match="same dtype"):
        tt.dot(tt.zeros(3), tt.zeros(3, dtype=tt.float64))
    with pytest.raises(RuntimeError, match="inconsistent tensor size"):
        tt.dot(tt.zeros(3), tt.zeros(4))
    with pytest.raises(RuntimeError, match="Expected 1-D argument"):
        tt.outer(x, tt.zeros(3))
    with pytest.raises(RuntimeError, match="expected a matrix"):
        tt.trace(tt.zeros(3))
    with pytest.raises(RuntimeError, match="Expected a floating point"):
        tt.linalg.vector_norm(tt.tensor([1, 2]))
    with pytest.raises(NotImplementedError, match="SVD"):
        tt.linalg.matrix_norm(x, "nuc")
    with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        tt.linspace(0, 1, -1)
    with pytest.raises(TypeError, match="'steps'"):
        tt.linspace(0, 1, 2.0)
    with pytest.raises(RuntimeError, match="n must be greater or equal to 0"):
        tt.eye(-1)


def test_math_gradcheck():
    x = tt.tensor(RNG.standard_normal((3, 4))).requires_grad_()
    nc = tt.tensor(RNG.standard_normal((4, 3))).T.requires_grad_()  # a non-contiguous leaf
    v, w = (tt.tensor(RNG.standard_normal(5)).requires_grad_() for _ in range(2))
    cases = [(lambda a: tt.logsumexp(a, 1), (x,)), (lambda a: a.logsumexp((0, 1), keepdim=True), (nc,)),
             (lambda a: a.norm(), (x,)), (lambda a: tt.linalg.vector_norm(a, 3, dim=0), (nc,)),
             (lambda a: tt.linalg.vector_norm(a, math.inf, dim=1), (x,)),
             (lambda a: tt.linalg.matrix_norm(a, 1), (x,)), (lambda a: a.trace(), (nc,)),
             (lambda a, b: tt.dot(a, b), (v, w)), (lambda a, b: tt.outer(a, b), (v, w)),
             (lambda a: a.nan_to_num(), (x,))]  # einsum's gradchecks: tests/test_einsum.py
    for f, args in cases:
        assert tt.autograd.gradcheck(f, args)
    for f, args in cases[6:9]:
        assert tt.autograd.gradgradcheck(f, args)
    y = tt.round(x * 3)
    y.sum().backward()
    assert y.grad_fn is not None and x.grad.abs().sum().item() == 0.0  # round: zero gradient
    z = tt.tensor([1.0, float("nan"), float("inf")], dtype=tt.float64, requires_grad=True)
    z.nan_to_num().sum().backward()
    assert z.grad.tolist() == [1.0, 0.0, 0.0]
    z.grad = None
    w = z * 2
    w.nan_to_num_(posinf=5.0)  # in-place forms are recorded too
    assert tt.autograd.grad(w.sum(), z, retain_graph=True)[0].tolist() == [2.0, 0.0, 0.0]
    w.round_()
    assert type(w.grad_fn).__name__ == "RoundBackward0" and tt.autograd.grad(w.sum(), z)[0].tolist() == [0.0] * 3
    with pytest.raises(RuntimeError, match="leaf Variable"):
        z.round_()


def test_linalg_norm_picks_the_vector_or_matrix_norm_as_torch():
    a = np.random.default_rng(8).standard_normal((3, 4, 5))
    A = tt.tensor(a)
    assert_close(tt.linalg.norm(A), np.linalg.norm(a.ravel()), tt.float64)  # all elements, 2-norm
    assert_close(tt.linalg.norm(A, 3, dim=1), np.linalg.norm(a, 3, axis=1), tt.float64)
    assert_close(tt.linalg.norm(A, dim=(1, 2)), np.linalg.norm(a, axis=(1, 2)), tt.float64)
    for ord in ("fro", 1, -1, float("inf"), -float("inf")):
        assert_close(tt.linalg.norm(A[0], ord), np.linalg.norm(a[0], ord), tt.float64)
    assert_close(tt.linalg.norm(A[0, 0], 0.5), np.linalg.norm(a[0, 0], 0.5), tt.float64)
    assert tt.linalg.norm(A, dim=2, keepdim=True).shape == (3, 4, 1)
    with pytest.raises(RuntimeError, match="the input must be 1D or 2D"):
        tt.linalg.norm(A, 2)
    with pytest.raises(RuntimeError, match="length 1 or 2"):
        tt.linalg.norm(A, dim=(0, 1, 2))


# ----- cross, tensordot, kron (composites of recorded ops) ----------------------------------------
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES + [tt.float64], ids=str)
def test_cross_tensordot_kron_match_numpy(dtype, layout):
    a, ra = make((4, 3, 5), dtype, layout, _normal)
    check_layout(a, layout)
    b, rb = make((1, 3, 5), dtype, "contiguous", _normal)  # broadcast along dim 0
    # two products and a difference, each rounded in the dtype
    assert_close(tt.cross(a, b, dim=1), np.cross(ra, rb, axis=1), dtype, "rounded_terms", k=3)
    assert_close(tt.linalg.cross(a.transpose(1, 2), b.transpose(1, 2)),
                 np.cross(ra.transpose(0, 2, 1), rb.transpose(0, 2, 1)), dtype, "rounded_terms", k=3)
    assert_close(a.cross(b, -2), np.cross(ra, rb, axis=1), dtype, "rounded_terms", k=3)
    c, rc = make((5, 3, 2), dtype, "contiguous", _normal)
    assert_close(tt.tensordot(a, c, dims=([1, 2], [1, 0])), np.tensordot(ra, rc, axes=([1, 2], [1, 0])), dtype,
                 "accumulate", k=15)
    assert_close(tt.tensordot(a, c, dims=1), np.tensordot(ra, rc, axes=1), dtype, "accumulate", k=5)
    assert_close(tt.tensordot(a, c, dims=0), np.tensordot(ra, rc, axes=0), dtype)
    assert_close(tt.tensordot(a[:0], c, dims=1), np.zeros((0, 3, 3, 2)), dtype)  # empty
    k, rk = make((2, 3), dtype, layout, _normal)
    assert_close(tt.kron(k, b[0]), np.kron(rk, rb[0]), dtype)
    assert_close(k.kron(c[0, 0]), np.kron(rk, rc[0, 0]), dtype)  # a 1-D other: leading dims of 1
    assert tt.kron(tt.tensor([1, 2]), tt.tensor([[1.5], [2.0]], dtype=dtype)).dtype is dtype


def test_cross_default_dim_and_errors(no_launch):
    a = tt.ones(4, 3)
    with pytest.raises(RuntimeError, match="no dimension of size 3 in input"), pytest.warns(UserWarning):
        tt.cross(tt.ones(4, 4), tt.ones(4, 4))
    with pytest.raises(RuntimeError, match="linalg.cross: inputs dimension 1 must have length 3. Got 4 and 4"):
        tt.cross(tt.ones(4, 4), tt.ones(4, 4), dim=1)
    with pytest.raises(RuntimeError, match="inputs must have the same number of dimensions"):
        tt.linalg.cross(tt.ones(2, 3), tt.ones(3))
    with pytest.raises(IndexError, match="Dimension out of range"):
        tt.cross(a, a, dim=5)
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
        tt.cross(a, a.double(), dim=1)
    x, y = tt.ones(2, 3, 4), tt.ones(3, 4, 5)
    with pytest.raises(RuntimeError, match="first has size 4 in dim -1 and second has size 3 in dim 0"):
        tt.tensordot(x, y, dims=1)
    with pytest.raises(RuntimeError, match="tensordot expects dims >= 0, but got dims=-1"):
        tt.tensordot(x, y, dims=-1)
    with pytest.raises(RuntimeError, match="both dimension lists should have same length"):
        tt.tensordot(x, y, dims=([0, 1], [0]))
    with pytest.raises(RuntimeError, match="both inputs should have same dtype"):
        tt.tensordot(x, y.double())
    with pytest.raises(TypeError, match=r"kron\(\): argument 'other' must be Tensor, not int"):
        tt.kron(x, 2)


def test_cross_tensordot_kron_gradcheck():
    F64 = tt.float64
    a = tt.tensor(RNG.standard_normal((2, 3)), dtype=F64, requires_grad=True)
    b = tt.tensor(RNG.standard_normal((1, 3)), dtype=F64, requires_grad=True)
    assert tt.autograd.gradcheck(lambda x, y: tt.cross(x, y, dim=1), (a, b))
    with pytest.warns(UserWarning, match="without specifying the dim arg is deprecated"):
        d = tt.cross(a, b)  # the first dim of size 3
    assert_close(d.detach(), tt.cross(a, b, dim=1).detach(), F64, "exact")
    assert tt.autograd.gradgradcheck(lambda x, y: tt.linalg.cross(x, y), (a, b))
    c = tt.tensor(RNG.standard_normal((3, 2)), dtype=F64, requires_grad=True)
    assert tt.autograd.gradcheck(lambda x, y: tt.tensordot(x, y, dims=([1], [0])), (a, c))
    assert tt.autograd.gradcheck(lambda x, y: tt.kron(x, y), (b, c[:2].T))
