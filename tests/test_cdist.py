"""cdist (triton_kernels/cdist.py; core/ops/cdist.py; autograd/functions/cdist.py) against float64 NumPy:
every p the kernel has a branch for, strided and broadcast operands, empty inputs, torch's p = 2
matrix-product form, the errors; gradients by gradcheck in float64."""
import numpy as np
import pytest

import tritensor as tt
from grad_inputs import F64, leaf, noncontig
from layouts import LAYOUTS, check_layout, make
from tolerances import FLOAT_DTYPES, assert_close
from tritensor.autograd import gradcheck, gradgradcheck

rng = np.random.default_rng(7)
PS = [0.0, 1.0, 2.0, 3.5, 0.5, float("inf")]


def _normal(shape):
    return rng.standard_normal(shape)


def _ref(a, b, p):
    d = np.abs(a[..., :, None, :] - b[..., None, :, :])
    if p == 0:
        return (d != 0).sum(-1).astype(np.float64)
    if p == float("inf"):
        return d.max(-1, initial=0.0)
    return (d ** p).sum(-1) ** (1 / p)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_cdist_matches_numpy(dtype, layout):
    x1, r1 = make((3, 5, 4), dtype, layout, _normal)  # batched, in every layout
    check_layout(x1, layout)
    x2, r2 = make((7, 4), dtype, "contiguous", _normal)  # its batch broadcast
    for p in PS:
        out = tt.cdist(x1, x2, p=p)
        assert out.shape == (3, 5, 7) and out.dtype is dtype
        # a sum of 4 positive terms accumulated in fp32 (fp64), one root, one rounding on store
        assert_close(out, _ref(r1, r2, p), dtype)
    assert_close(tt.cdist(x1[:, :0], x2), np.zeros((3, 0, 7)), dtype)  # empty
    assert_close(tt.cdist(x1[:, :, :0], x2[:, :0]), np.zeros((3, 5, 7)), dtype)  # no features: distance 0


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_cdist_euclid_through_matmul(dtype):
    """More than 25 rows: torch's sqrt(|x|^2 + |y|^2 - 2 x.y) (a product, then two adds, each rounded
    in the dtype); donot_use_mm keeps the direct kernel; both agree with NumPy."""
    x1, r1 = make((27, 6), dtype, "transposed", _normal)
    x2, r2 = make((2, 4, 6), dtype, "contiguous", _normal)
    ref = _ref(r1, r2, 2.0)
    assert_close(tt.cdist(x1, x2), ref, dtype, "rounded_terms", k=3)
    assert_close(tt.cdist(x1, x2, compute_mode="donot_use_mm_for_euclid_dist"), ref, dtype)
    small, rs = make((3, 6), dtype, "contiguous", _normal)
    assert_close(tt.cdist(small, x2, compute_mode="use_mm_for_euclid_dist"), _ref(rs, r2, 2.0), dtype,
                 "rounded_terms", k=3)
    same = tt.cdist(small, small, compute_mode="use_mm_for_euclid_dist")
    diag = same.float().diagonal().numpy()
    assert np.isfinite(diag).all() and (diag >= 0).all()  # a cancelled zero is clamped: never NaN


def test_cdist_errors(no_launch):
    a = tt.ones(3, 4)
    with pytest.raises(RuntimeError, match="X1 and X2 must have the same number of columns. X1: 4 X2: 3"):
        tt.cdist(a, tt.ones(5, 3))
    with pytest.raises(RuntimeError, match="cdist only supports non-negative p values"):
        tt.cdist(a, a, p=-1)
    with pytest.raises(RuntimeError, match="cdist only supports at least 2D tensors, X1 got: 1D"):
        tt.cdist(tt.ones(4), a)
    with pytest.raises(RuntimeError, match="cdist only supports floating-point dtypes, X1 got: Long"):
        tt.cdist(tt.ones(3, 4, dtype=tt.int64), a)
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
        tt.cdist(a, a.double())
    with pytest.raises(ValueError, match="x is not a valid value for compute_mode"):
        tt.cdist(a, a, compute_mode="x")
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        tt.cdist(tt.ones(2, 3, 4), tt.ones(3, 5, 4))


@pytest.mark.parametrize("p", [1.0, 2.0, 3.5, float("inf")])  # each of the backward kernel's branches
def test_cdist_gradcheck(p):
    x1 = noncontig(2, 2)  # a transposed leaf, read in place
    x2 = leaf(3, 2)
    assert gradcheck(lambda a, b: tt.cdist(a, b, p=p), (x1, x2))


def test_cdist_gradient_edges_and_double_backward():
    x1, x2 = leaf(2, 2), leaf(2, 2)
    y = tt.cdist(x1, x2, p=0.0)  # a count: zero gradient, as torch
    y.sum().backward()
    assert_close(x1.grad, np.zeros((2, 2)), F64, "exact")
    assert gradgradcheck(lambda a, b: tt.cdist(a, b, compute_mode="use_mm_for_euclid_dist"), (x1, x2))
    (g,) = tt.autograd.grad(tt.cdist(x1, x2, p=3.0).sum(), x1, create_graph=True)
    with pytest.raises(RuntimeError, match="the derivative for '_cdist_backward' is not implemented"):
        g.sum().backward()
    same = tt.tensor([[1.0, 2.0]], dtype=F64, requires_grad=True)
    tt.cdist(same, same.detach(), compute_mode="donot_use_mm_for_euclid_dist").sum().backward()
    assert_close(same.grad, np.zeros((1, 2)), F64, "exact")  # zero distance: a zero gradient, not NaN
