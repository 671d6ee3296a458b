"""BatchNorm1d/2d and F.batch_norm: the fused forward (Welford statistics, running-statistics
update) and backward kernels against float64 NumPy over fp32/fp16/bf16, strided layouts, odd and
empty shapes; eval mode; momentum=None; gradchecks; torch's errors and state_dict keys."""
import numpy as np
import pytest

import tritensor as tt
from tritensor import nn
from tritensor.nn import functional as F

from layouts import LAYOUTS, check_layout, make
from tolerances import NP, assert_close


def _ref(x, w, b, eps=1e-5, mean=None, var=None):
    axes = (0,) + tuple(range(2, x.ndim))
    shp = (1, -1) + (1,) * (x.ndim - 2)
    if mean is None:
        mean, var = x.mean(axes), x.var(axes)
    xhat = (x - mean.reshape(shp)) / np.sqrt(var.reshape(shp) + eps)
    return xhat * w.reshape(shp) + b.reshape(shp), xhat


def _ref_backward(x, w, dy, eps=1e-5):
    axes = (0,) + tuple(range(2, x.ndim))
    shp = (1, -1) + (1,) * (x.ndim - 2)
    rstd = 1 / np.sqrt(x.var(axes) + eps)
    _, xhat = _ref(x, np.ones_like(w), np.zeros_like(w), eps)
    dx = (w * rstd).reshape(shp) * (dy - dy.mean(axes).reshape(shp) - xhat * (dy * xhat).mean(axes).reshape(shp))
    return dx, (dy * xhat).sum(axes), dy.sum(axes)


@pytest.mark.parametrize("dtype", [tt.float32, tt.float16, tt.bfloat16])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [(4, 3, 5, 7), (3, 5), (2, 3, 9)])
def test_training_forward_backward_and_running_stats_vs_numpy(dtype, layout, shape):
    rng = np.random.default_rng(0)
    x, xr = make(shape, dtype, layout, lambda s: rng.standard_normal(s) * 2 + 3)
    check_layout(x, layout)
    C = shape[1]
    w = rng.standard_normal(C).astype(NP[dtype])
    b = rng.standard_normal(C).astype(NP[dtype])
    rm, rv = tt.zeros(C, dtype=dtype), tt.ones(C, dtype=dtype)
    x = x.detach().requires_grad_()
    W, B = tt.tensor(w).requires_grad_(), tt.tensor(b).requires_grad_()
    y = F.batch_norm(x, rm, rv, W, B, training=True, momentum=0.3)
    wr, br = w.astype(np.float64), b.astype(np.float64)
    expected, _ = _ref(xr, wr, br)
    assert y.dtype is dtype
    m = xr.size // C
    # fp32: sums of m terms accumulated in fp32 (for fp16/bf16, k = m leaves their default numbers).
    assert_close(y.detach(), expected, dtype, "accumulate", k=m)
    axes = (0,) + tuple(range(2, len(shape)))
    assert_close(rm, 0.3 * xr.mean(axes), dtype)
    assert_close(rv, 0.7 + 0.3 * xr.var(axes, ddof=1), dtype)
    dy = rng.standard_normal(shape).astype(NP[dtype])
    y.backward(tt.tensor(dy))
    dx, dw, db = _ref_backward(xr, wr, dy.astype(np.float64))
    assert_close(x.grad, dx, dtype, "accumulate", k=m)
    # dweight and dbias: m-term sums accumulated in fp32, rounded once to the dtype. fp16/bf16 have
    # been held to TOL × 4 since this test was written (the errors measured are within 0.42 of
    # the default): the same numbers, as the profile "rounded_terms" with k=4.
    profile, k = ("accumulate", m) if dtype is tt.float32 else ("rounded_terms", 4)
    assert_close(W.grad, dw, dtype, profile, k=k)
    assert_close(B.grad, db, dtype, profile, k=k)


def test_large_mean_keeps_variance_precision_and_many_chunks():
    # 1e4 offset: a naive E[x^2] - E[x]^2 in fp32 loses the unit variance entirely.
    rng = np.random.default_rng(1)
    v = (rng.standard_normal((9, 2, 41, 53)) + 1e4).astype(np.float32)  # 19557 values per channel: several chunks
    y = F.batch_norm(tt.tensor(v), None, None, training=True)
    expected, _ = _ref(v.astype(np.float64), np.ones(2), np.zeros(2))
    # The fp32 mean itself is rounded to half an ulp of 1e4 (4.9e-4, in units of the std of 1), so
    # y carries that much; the naive formula's variance would be off by ~6 (not usable at all).
    assert_close(y, expected, tt.float32, "large_mean_normalized")


def test_eval_uses_running_stats_and_momentum_none_averages():
    bn = nn.BatchNorm2d(3, momentum=None)
    rng = np.random.default_rng(2)
    batches = [rng.standard_normal((2, 3, 4, 4)).astype(np.float32) * (i + 1) + i for i in range(3)]
    for xb in batches:
        bn(tt.tensor(xb))
    assert int(bn.num_batches_tracked.item()) == 3
    means = np.mean([xb.astype(np.float64).mean((0, 2, 3)) for xb in batches], 0)
    vars_ = np.mean([xb.astype(np.float64).var((0, 2, 3), ddof=1) for xb in batches], 0)
    assert_close(bn.running_mean, means, tt.float32)
    assert_close(bn.running_var, vars_, tt.float32)
    bn.eval()
    xe = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    before = bn.running_mean.numpy().copy()
    x = tt.tensor(xe).requires_grad_()
    y = bn(x)
    expected, _ = _ref(xe.astype(np.float64), np.ones(3), np.zeros(3), mean=means, var=vars_)
    assert_close(y.detach(), expected, tt.float32)
    assert np.array_equal(bn.running_mean.numpy(), before)
    y.sum().backward()  # eval: dx = w * rstd * dy
    assert_close(x.grad, np.broadcast_to((1 / np.sqrt(vars_ + 1e-5)).reshape(1, 3, 1, 1), xe.shape), tt.float32)


def test_module_state_dict_keys_and_no_tracking():
    bn = nn.BatchNorm1d(4)
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    assert bn.num_batches_tracked.dtype is tt.int64
    assert repr(bn) == "BatchNorm1d(4, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)"
    free = nn.BatchNorm1d(4, affine=False, track_running_stats=False)
    assert list(free.state_dict()) == []
    free.eval()  # still batch statistics: nothing to run on
    x = np.arange(12, dtype=np.float32).reshape(3, 4) ** 1.5
    assert_close(free(tt.tensor(x)), _ref(x.astype(np.float64), np.ones(4), np.zeros(4))[0], tt.float32)
    empty = nn.BatchNorm1d(4)(tt.zeros(0, 4))
    assert tuple(empty.shape) == (0, 4)


def test_batch_norm_gradcheck():
    rng = np.random.default_rng(3)
    x = tt.tensor(rng.standard_normal((3, 2, 4))).requires_grad_()
    w = tt.tensor(rng.standard_normal(2)).requires_grad_()
    b = tt.tensor(rng.standard_normal(2)).requires_grad_()
    assert tt.autograd.gradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), (x, w, b))
    rm, rv = tt.tensor(rng.standard_normal(2)), tt.tensor(rng.random(2) + 0.5)
    assert tt.autograd.gradcheck(lambda x, w, b: F.batch_norm(x, rm, rv, w, b, training=False), (x, w, b))
    xt = tt.tensor(rng.standard_normal((4, 2, 3))).permute(0, 2, 1).requires_grad_()  # C strided
    assert tt.autograd.gradcheck(lambda x: F.batch_norm(x, None, None, training=True) ** 2, (xt,))


def test_batch_norm_errors():
    with pytest.raises(ValueError, match=r"expected 4D input \(got 3D input\)"):
        nn.BatchNorm2d(3)(tt.zeros(2, 3, 4))
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
        nn.BatchNorm1d(3)(tt.zeros(2, 3, 4, 4))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        nn.BatchNorm1d(3)(tt.zeros(1, 3))
    with pytest.raises(RuntimeError, match="running_mean should contain 3 elements not 4"):
        F.batch_norm(tt.zeros(2, 3), tt.zeros(4), tt.ones(4))
    with pytest.raises(RuntimeError, match="must be defined in evaluation mode"):
        F.batch_norm(tt.zeros(2, 3), None, None, training=False)
    with pytest.raises(TypeError, match="argument 'input' must be Tensor"):
        F.batch_norm(np.zeros((2, 3)), None, None, training=True)
