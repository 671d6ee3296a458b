"""The batch-norm statistics ops (core/ops/batch_norm_stats.py): ``batch_norm_stats batch_norm_elemt
batch_norm_gather_stats batch_norm_gather_stats_with_counts batch_norm_backward_reduce
batch_norm_backward_elemt batch_norm_update_stats``, against float64 NumPy formulas of torch's CUDA
kernels over the four float dtypes and non-contiguous layouts; together they must give what
batch norm over the whole batch gives (statistics split over "ranks" and gathered, the gradient
from the reduced sums); the gradients of the composites by gradcheck, and torch's error at backward
through the three that run the batch-norm kernels; argument errors first.
"""
import zlib

import numpy as np
import pytest

import tritensor as tt
from tritensor.autograd import gradcheck
from layouts import LAYOUTS, check_layout, make
from tolerances import FLOAT_DTYPES, assert_close

F32, F64 = tt.float32, tt.float64
EPS = 1e-5


@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def dims(x):
    return (0,) + tuple(range(2, x.ndim))


def cvec(v, ndim):
    return np.asarray(v).reshape((1, -1) + (1,) * (ndim - 2))


def acc(dtype):
    return F64 if dtype == F64 else F32


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_stats_elemt_update_match_numpy(dtype, layout, rng):
    x, rx = make((4, 3, 5), dtype, layout, lambda s: rng.standard_normal(s) + 2.0)
    check_layout(x, layout)
    mean, invstd = tt.batch_norm_stats(x, EPS)
    assert mean.dtype == invstd.dtype == acc(dtype)
    r_mean, r_var = rx.mean(dims(rx)), rx.var(dims(rx))
    assert_close(mean, r_mean, acc(dtype), "large_mean")
    assert_close(invstd, 1 / np.sqrt(r_var + EPS), acc(dtype), "large_mean")
    w, b = rng.standard_normal(3), rng.standard_normal(3)
    y = tt.batch_norm_elemt(x, tt.tensor(w, dtype=dtype), tt.tensor(b, dtype=dtype), mean, invstd, EPS)
    assert y.dtype == dtype
    rw, rb = (tt.tensor(v, dtype=dtype).double().numpy() for v in (w, b))
    ref = (rx - cvec(r_mean, 3)) / np.sqrt(cvec(r_var, 3) + EPS) * cvec(rw, 3) + cvec(rb, 3)
    assert_close(y, ref, dtype, "large_mean_normalized")
    rm, rv = tt.zeros(3, dtype=dtype), tt.ones(3, dtype=dtype)
    m2, v2 = tt.batch_norm_update_stats(x, rm, rv, 0.1)
    assert_close(m2, r_mean, acc(dtype), "large_mean")
    assert_close(v2, r_var, acc(dtype), "large_mean")  # the biased variance is returned
    assert_close(rm, 0.1 * r_mean, dtype, "large_mean")
    assert_close(rv, 0.9 + 0.1 * rx.var(dims(rx), ddof=1), dtype, "large_mean")  # the unbiased one is kept


@pytest.mark.parametrize("dtype", [F32, F64], ids=str)
def test_gathered_stats_equal_the_whole_batch(dtype, rng):
    """Three "ranks" of 2, 3 and 0 samples: gathered with their counts, the statistics of the union."""
    parts = [rng.standard_normal((n, 2, 3)) * 3 + 1 for n in (2, 3, 0)]
    whole = np.concatenate(parts)
    stats = [tt.batch_norm_stats(tt.tensor(p, dtype=dtype), EPS) for p in parts[:2]]
    means = tt.stack([s[0] for s in stats] + [tt.zeros(2, dtype=dtype)])
    invstds = tt.stack([s[1] for s in stats] + [tt.ones(2, dtype=dtype)])
    counts = tt.tensor([6.0, 9.0, 0.0], dtype=dtype)
    rm, rv = tt.zeros(2, dtype=dtype), tt.ones(2, dtype=dtype)
    x = tt.tensor(parts[0], dtype=dtype)
    mean, invstd = tt.batch_norm_gather_stats_with_counts(x, means, invstds, rm, rv, 0.5, EPS, counts)
    r_mean, r_var = whole.mean((0, 2)), whole.var((0, 2))
    assert_close(mean, r_mean, dtype, "large_mean")
    assert_close(invstd, 1 / np.sqrt(r_var + EPS), dtype, "large_mean")
    assert_close(rm, 0.5 * r_mean, dtype, "large_mean")
    assert_close(rv, 0.5 + 0.5 * whole.var((0, 2), ddof=1), dtype, "large_mean")
    # equal counts: batch_norm_gather_stats
    same = [rng.standard_normal((2, 2, 3)) for _ in range(2)]
    st = [tt.batch_norm_stats(tt.tensor(p, dtype=dtype), EPS) for p in same]
    mean, invstd = tt.batch_norm_gather_stats(x, tt.stack([s[0] for s in st]), tt.stack([s[1] for s in st]), None,
                                              None, 0.1, EPS, 6)
    both = np.concatenate(same)
    assert_close(mean, both.mean((0, 2)), dtype, "large_mean")
    assert_close(invstd, 1 / np.sqrt(both.var((0, 2)) + EPS), dtype, "large_mean")


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_backward_reduce_and_elemt_give_batch_norm_s_gradient(dtype, layout, rng):
    x, rx = make((4, 3, 2), dtype, layout, rng.standard_normal)
    g, rg = make((4, 3, 2), dtype, "contiguous", rng.standard_normal)
    w = rng.standard_normal(3)
    wt = tt.tensor(w, dtype=dtype)
    rw = wt.double().numpy()
    mean, invstd = tt.batch_norm_stats(x, EPS)
    sum_dy, sum_dy_xmu, gw, gb = tt.batch_norm_backward_reduce(g, x, mean, invstd, wt, True, True, True)
    r_mean, r_istd = rx.mean((0, 2)), 1 / np.sqrt(rx.var((0, 2)) + EPS)
    xmu = rx - cvec(r_mean, 3)
    r_sum_dy, r_sum_dy_xmu = rg.sum((0, 2)), (rg * xmu).sum((0, 2))
    assert_close(sum_dy, r_sum_dy, acc(dtype), "row_sum")
    assert_close(sum_dy_xmu, r_sum_dy_xmu, acc(dtype), "row_sum")
    assert gw.dtype == gb.dtype == dtype
    assert_close(gw, r_sum_dy_xmu * r_istd, dtype, "row_sum")
    assert_close(gb, r_sum_dy, dtype, "row_sum")
    dx = tt.batch_norm_backward_elemt(g, x, mean, invstd, wt, sum_dy, sum_dy_xmu, tt.tensor([8], dtype=tt.int32))
    n = 8
    xhat = xmu * cvec(r_istd, 3)
    ref = cvec(rw * r_istd, 3) * (rg - cvec(r_sum_dy, 3) / n - xhat * cvec(r_sum_dy_xmu * r_istd, 3) / n)
    assert_close(dx, ref, dtype, "large_mean_normalized")
    # what was not asked for is None
    assert tt.batch_norm_backward_reduce(g, x, mean, invstd, None, False, False, True)[:3] == (None, None, None)


def test_against_batch_norm_and_empty_batch(rng):
    x = tt.tensor(rng.standard_normal((5, 2, 3)), requires_grad=True)
    w, b = (tt.tensor(rng.standard_normal(2), requires_grad=True) for _ in range(2))
    mean, invstd = tt.batch_norm_stats(x.detach(), EPS)
    y = tt.batch_norm_elemt(x.detach(), w.detach(), b.detach(), mean, invstd, EPS)
    ref = tt.nn.functional.batch_norm(x, None, None, w, b, True, 0.1, EPS)
    assert_close(y, ref.detach().numpy(), F64)
    g = tt.tensor(rng.standard_normal((5, 2, 3)))
    ref.backward(g)
    sdy, sdyx, gw, gb = tt.batch_norm_backward_reduce(g, x.detach(), mean, invstd, w.detach(), True, True, True)
    dx = tt.batch_norm_backward_elemt(g, x.detach(), mean, invstd, w.detach(), sdy, sdyx, tt.tensor([15]))
    assert_close(dx, x.grad.numpy(), F64)
    assert_close(gw, w.grad.numpy(), F64)
    assert_close(gb, b.grad.numpy(), F64)
    m0, i0 = tt.batch_norm_stats(tt.zeros(0, 2, 3), EPS)  # no samples: NaN statistics, as 0 / 0
    assert tuple(m0.shape) == (2,) and np.isnan(m0.numpy()).all() and np.isnan(i0.numpy()).all()


def test_composites_gradcheck(rng):
    x = tt.tensor(rng.standard_normal((3, 2, 2)), requires_grad=True)
    w, b = (tt.tensor(rng.standard_normal(2), requires_grad=True) for _ in range(2))
    m, i = tt.batch_norm_stats(x.detach(), EPS)
    g = tt.tensor(rng.standard_normal((3, 2, 2)), requires_grad=True)
    sdy, sdyx = (tt.tensor(rng.standard_normal(2), requires_grad=True) for _ in range(2))
    assert gradcheck(lambda g, x, s1, s2: tt.batch_norm_backward_elemt(g, x, m, i, w.detach(), s1,
                                                                       s2, tt.tensor([6])), (g, x, sdy, sdyx),
                     fast_mode=True)
    means = tt.tensor(rng.standard_normal((2, 2)), requires_grad=True)
    invstds = tt.tensor(rng.uniform(0.5, 2, (2, 2)), requires_grad=True)
    assert gradcheck(lambda a, c: tt.batch_norm_gather_stats_with_counts(x.detach(), a, c, None, None, 0.1, EPS,
                                                                         tt.tensor([3.0, 4.0], dtype=F64)),
                     (means, invstds), fast_mode=True)
    assert gradcheck(lambda a, c: tt.batch_norm_gather_stats(x.detach(), a, c, None, None, 0.1, EPS, 3),
                     (means, invstds), fast_mode=True)
    assert gradcheck(lambda x: tt.batch_norm_update_stats(x, None, None, 0.1), (x,), fast_mode=True)


def test_kernel_ops_have_no_derivative_as_torch(rng):
    """batch_norm_stats, batch_norm_elemt and batch_norm_backward_reduce join the graph; backward through
    them raises torch's error instead of leaving a gradient short."""
    x = tt.tensor(rng.standard_normal((3, 2, 2)), requires_grad=True)
    v = tt.ones(2, dtype=F64, requires_grad=True)
    for out in (tt.batch_norm_stats(x, EPS)[1], tt.batch_norm_elemt(x, v, None, v, v, EPS),
                tt.batch_norm_backward_reduce(x, x, v, v, None, False, False, True)[3]):
        assert out.grad_fn is not None
        with pytest.raises(RuntimeError, match=r"derivative for aten::batch_norm_\w+ is not implemented"):
            (out.sum() + x.sum()).backward()
    # without grad the results are plain tensors, and backward_reduce leaves out what was not asked for
    got = tt.batch_norm_backward_reduce(x.detach(), x.detach(), v.detach(), v.detach(), None, False, True, False)
    assert [t is None for t in got] == [True, True, False, True] and got[2].grad_fn is None
    got = tt.batch_norm_backward_reduce(x, x, v, v, None, True, False, True)  # recorded: the same outputs
    assert [t is None for t in got] == [False, False, True, False]


def _err(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_errors_name_the_argument(no_launch):
    x, v = tt.zeros(4, 3, 2), tt.zeros(3)
    _err(lambda: tt.batch_norm_stats(x.numpy(), EPS), TypeError, "argument 'input' must be Tensor")
    _err(lambda: tt.batch_norm_stats(x, "1"), TypeError, "argument 'eps' must be float, not str")
    _err(lambda: tt.batch_norm_stats(tt.zeros(4, 3, dtype=tt.int64), EPS), RuntimeError, "floating point input")
    _err(lambda: tt.batch_norm_update_stats(tt.zeros(3), None, None, 0.1), IndexError, "Dimension out of range")
    _err(lambda: tt.batch_norm_elemt(x, tt.zeros(4), None, v, v, EPS), RuntimeError,
         "weight should contain 3 elements not 4")
    _err(lambda: tt.batch_norm_elemt(x, None, None, v, None, EPS), TypeError, "argument 'invstd' must be Tensor")
    _err(lambda: tt.batch_norm_update_stats(x, tt.zeros(2), None, 0.1), RuntimeError,
         "running_mean should contain 3 elements not 2")
    _err(lambda: tt.batch_norm_gather_stats_with_counts(x, tt.zeros(2, 3), tt.zeros(2, 3), None, None, 0.1, EPS,
                                                        tt.zeros(3)), RuntimeError, "counts should contain 2 elements")
    _err(lambda: tt.batch_norm_gather_stats(x, tt.zeros(3), tt.zeros(3), None, None, 0.1, EPS, 2), RuntimeError,
         "mean and invstd must be .world_size, C. alike")
    _err(lambda: tt.batch_norm_gather_stats(x, tt.zeros(2, 3), tt.zeros(2, 3), None, None, 0.1, EPS, 2.5),
         TypeError, "argument 'count' must be int, not float")
    _err(lambda: tt.batch_norm_backward_reduce(tt.zeros(4, 3), x, v, v, None, True, True, True), RuntimeError,
         "grad_out should have the input's shape")
    _err(lambda: tt.batch_norm_backward_elemt(x, x, v, v, None, v, v, tt.zeros(1)), RuntimeError,
         "expected count to be an integer tensor")
