"""optim.LBFGS against torch.optim.LBFGS: trajectories, closure counts, state and errors.

The reference numbers are torch 2.13's (CPU, float64), printed by running the same problems
with ``torch.optim.LBFGS`` in the benchmark environment (the scripts are the ``_rosenbrock`` and
``_least_quartic`` bodies below with ``torch`` for ``tt``). Float64 problems are compared to
1e-9 relative: the only difference is the order of the dot products' sums. A float32 run lands
within 2e-3 of torch's float64 answer (an optimum found with ~1e-7 relative steps, amplified by
the problem's conditioning), and the two-loop recursion and a resumed run match a float64 NumPy
reference and the uninterrupted run to 1e-12. These bound whole trajectories, not one kernel, so
this file keeps its own numbers (tests/test_tolerances.py lists it).
"""
from __future__ import annotations

import io

import numpy as np
import pytest
import tritensor as tt
from tritensor.optim.lbfgs import _History

TORCH_ROSENBROCK = {  # [loss returned, x, func_evals, n_iter] after each of 4 steps
    "strong_wolfe": [
        [12.5, [-0.08511855589860293, -0.028757058413769698], 25, 19],
        [1.3070983150500495, [0.9995835472529905, 0.9991550319577943], 50, 38],
        [1.884048137837783e-07, [0.9999979943196398, 0.9999973438921637], 53, 41],
        [1.8769270132829514e-10, [0.9999979943196398, 0.9999973438921637], 54, 42]],
    None: [  # lr=0.5, history_size=3, max_iter=7: the history is cut, no line search
        [12.5, [-1.4206165498638803, 2.0325928176157646], 7, 7],
        [5.880239988469634, [-1.4044115150168057, 1.96007330267403], 14, 14],
        [5.796319799862056, [-0.8311483092348031, 0.6655092601339825], 21, 21],
        [3.4171042848771354, [-0.07977580778660065, -0.04049423393954732], 28, 28]],
}
TORCH_QUARTIC = {  # two parameters, history_size=2, max_iter=5: [loss, func_evals, n_iter] per step, then W, b
    "strong_wolfe": ([[0.37316972262704073, 6, 4], [0.3289161882219064, 12, 8], [0.32669938047572217, 18, 12]],
                     [[-0.1335318275450069, -0.11784951918319791, 0.09812263245111195],
                      [-0.045860856915925334, -0.04488824276995046, 0.08929395359235115]],
                     [0.15400390318046717, -0.0730608992581104]),
    None: ([[0.37316972262704073, 5, 5], [0.33112255862040907, 10, 10], [0.3266927154825068, 15, 15]],
           [[-0.13378590390692466, -0.11801319833224008, 0.09819983636972972],
            [-0.046525208103227224, -0.045621297565847346, 0.08916616238655105]],
           [0.1540974767987232, -0.07323094494012147]),
}


def _rosenbrock(line_search_fn):
    x = tt.tensor([-1.5, 2.0], dtype=tt.float64, requires_grad=True)
    kw = {"lr": 0.5, "history_size": 3, "max_iter": 7} if line_search_fn is None else {}
    opt = tt.optim.LBFGS([x], line_search_fn=line_search_fn, **kw)
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2
        loss.backward()
        return loss
    return x, opt, closure, calls


@pytest.mark.parametrize("line_search_fn", ["strong_wolfe", None])
def test_rosenbrock_follows_torch(line_search_fn):
    x, opt, closure, calls = _rosenbrock(line_search_fn)
    for loss_ref, x_ref, evals_ref, iters_ref in TORCH_ROSENBROCK[line_search_fn]:
        loss = opt.step(closure)
        assert isinstance(loss, tt.Tensor)  # the closure's first loss, as returned
        np.testing.assert_allclose(loss.item(), loss_ref, rtol=1e-9, atol=1e-15)
        np.testing.assert_allclose(x.tolist(), x_ref, rtol=1e-9)
        assert opt.state[x]["func_evals"] == evals_ref == len(calls)
        assert opt.state[x]["n_iter"] == iters_ref
    if line_search_fn is None:
        assert len(opt.state[x]["old_dirs"]) == 3  # history_size bounds the memory


def _least_quartic(line_search_fn, dtype=tt.float64):
    X = np.sin(np.arange(24.0)).reshape(8, 3)
    Y = np.cos(np.arange(16.0)).reshape(8, 2)
    W = tt.tensor(np.full((2, 3), 0.1), dtype=dtype, requires_grad=True)
    b = tt.zeros(2, dtype=dtype, requires_grad=True)
    opt = tt.optim.LBFGS([W, b], line_search_fn=line_search_fn, history_size=2, max_iter=5)
    x, y = tt.tensor(X, dtype=dtype), tt.tensor(Y, dtype=dtype)

    def closure():
        opt.zero_grad()
        loss = (((x @ W.T + b) - y) ** 4).mean()
        loss.backward()
        return loss
    return W, b, opt, closure


@pytest.mark.parametrize("line_search_fn", ["strong_wolfe", None])
def test_several_parameters_follow_torch(line_search_fn):
    W, b, opt, closure = _least_quartic(line_search_fn)
    rows, W_ref, b_ref = TORCH_QUARTIC[line_search_fn]
    for loss_ref, evals_ref, iters_ref in rows:
        np.testing.assert_allclose(opt.step(closure).item(), loss_ref, rtol=1e-9)
        assert opt.state[W]["func_evals"] == evals_ref and opt.state[W]["n_iter"] == iters_ref
        assert b not in opt.state  # the state is global, kept under the first parameter only
    np.testing.assert_allclose(W.tolist(), W_ref, rtol=1e-9)
    np.testing.assert_allclose(b.tolist(), b_ref, rtol=1e-9)


@pytest.mark.parametrize("dtype", [tt.float32, tt.float16, tt.bfloat16])
def test_low_precision_parameters_descend(dtype):
    # The parameters' dtype sets the rounding of the flat vectors (the recursion's scalars are
    # float64): the loss must fall and stay finite, and float32 land near torch's float64 answer.
    W, b, opt, closure = _least_quartic("strong_wolfe", dtype)
    first = opt.step(closure).item()
    for _ in range(2):
        last = opt.step(closure).item()
    assert np.isfinite(last) and last < first
    assert W.dtype is dtype and b.dtype is dtype
    if dtype is tt.float32:
        _, W_ref, b_ref = TORCH_QUARTIC["strong_wolfe"]
        np.testing.assert_allclose(W.tolist(), W_ref, atol=2e-3)
        np.testing.assert_allclose(b.tolist(), b_ref, atol=2e-3)


def test_state_dict_resumes_the_same_run():
    W, b, opt, closure = _least_quartic("strong_wolfe")
    opt.step(closure)
    buf = io.BytesIO()  # a checkpoint: the state goes through tt.save / tt.load
    tt.save({"W": W, "b": b, "optim": opt.state_dict()}, buf)
    opt.step(closure)
    after = (W.tolist(), b.tolist())
    buf.seek(0)
    saved = tt.load(buf)
    assert len(saved["optim"]["state"][0]["old_dirs"]) == 2  # torch's names for the history
    W2, b2, opt2, closure2 = _least_quartic("strong_wolfe")
    with tt.no_grad():
        W2.copy_(saved["W"])
        b2.copy_(saved["b"])
    opt2.load_state_dict(saved["optim"])
    opt2.step(closure2)
    assert (W2.tolist(), b2.tolist()) == after  # the history came back with the state

    # A state holding only torch's keys (a history from elsewhere): the Gram numbers are
    # recomputed with one product and the pairs laid out afresh, so the direction's sums run in
    # another order: the same run to rounding, not to the bit.
    W3, b3, opt3, closure3 = _least_quartic("strong_wolfe")
    with tt.no_grad():
        W3.copy_(saved["W"])
        b3.copy_(saved["b"])
    for key in ("gram_sy", "gram_yy", "history_layout"):
        del saved["optim"]["state"][0][key]
    opt3.load_state_dict(saved["optim"])
    opt3.step(closure3)
    np.testing.assert_allclose(W3.tolist(), after[0], rtol=1e-12)
    np.testing.assert_allclose(b3.tolist(), after[1], rtol=1e-12)


def test_stops_at_once_when_the_gradient_is_small():
    x = tt.tensor([1.0, 1.0], dtype=tt.float64, requires_grad=True)
    opt = tt.optim.LBFGS([x])
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = ((x - 1) ** 2).sum()
        loss.backward()
        return loss
    assert opt.step(closure).item() == 0.0
    assert len(calls) == 1 and x.tolist() == [1.0, 1.0] and opt.state[x]["n_iter"] == 0


def test_a_parameter_without_gradient_counts_as_zero():
    used = tt.tensor([3.0], dtype=tt.float64, requires_grad=True)
    unused = tt.tensor([5.0, 6.0], dtype=tt.float64, requires_grad=True)
    opt = tt.optim.LBFGS([unused, used], line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = (used - 1) ** 2
        loss.sum().backward()
        return loss.sum()
    opt.step(closure)
    assert unused.tolist() == [5.0, 6.0]
    assert abs(used.item() - 1.0) < 1e-6


def test_errors_name_the_argument():
    x = tt.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="parameter groups"):
        tt.optim.LBFGS([{"params": [x]}, {"params": [tt.zeros(1, requires_grad=True)]}])
    with pytest.raises(RuntimeError, match="line_search_fn: only 'strong_wolfe'"):
        tt.optim.LBFGS([x], line_search_fn="armijo")
    with pytest.raises(ValueError, match="history_size"):
        tt.optim.LBFGS([x], history_size=0)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        tt.optim.LBFGS([x], lr=-1)
    opt = tt.optim.LBFGS([x])
    with pytest.raises(TypeError, match="needs a closure"):
        opt.step(None)
    with pytest.raises(ValueError, match="parameter groups"):
        opt.add_param_group({"params": [tt.zeros(1, requires_grad=True)]})


def test_fits_a_model_with_a_closure_over_batches():
    # The everyday use: full-batch fitting of a small nn model.
    tt.manual_seed(0)
    model = tt.nn.Sequential(tt.nn.Linear(3, 8), tt.nn.Tanh(), tt.nn.Linear(8, 1))
    X = tt.tensor(np.sin(np.arange(60.0)).reshape(20, 3), dtype=tt.float32)
    Y = (X[:, :1] * 0.5 - X[:, 1:2] * X[:, 2:3]).detach()
    opt = tt.optim.LBFGS(model.parameters(), history_size=4, max_iter=12, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = tt.nn.functional.mse_loss(model(X), Y)
        loss.backward()
        return loss
    first = opt.step(closure).item()
    assert closure().item() < 0.1 * first


def test_history_direction_is_the_two_loop_recursion():
    # _History's host-side recursion against the textbook two loops over the kept pairs, in
    # float64 NumPy: pairs of negative curvature are dropped (their rows zeroed, NaN included),
    # and the oldest is evicted once history_size are kept, across a growth of the buffer.
    rng = np.random.default_rng(0)
    n, size = 7, 9  # the buffer starts at 8 slots and grows to 10
    g = rng.standard_normal(n)
    hist = _History(size, tt.tensor(g))
    kept, H = [], 1.0
    for i in range(13):
        s = rng.standard_normal(n)
        y = s * rng.uniform(0.5, 2.0, n)  # positive curvature ...
        if i in (2, 5):
            y = -y  # ... except these
        if i == 5:
            y[0] = np.nan
        j = hist.free_slot()
        hist.buf[2 * j].copy_(tt.tensor(s))
        hist.buf[2 * j + 1].copy_(tt.tensor(y))
        new = (hist.buf @ hist.buf[2 * j:2 * j + 2].T).numpy()
        h = hist.push(j, new)
        if i in (2, 5):
            assert h is None and not np.isnan(hist.buf.numpy()).any()
            continue
        kept = (kept + [(s, y)])[-size:]
        H = h
        al = [None] * size
        d = hist.direction(tt.tensor(g), (hist.buf @ tt.tensor(g)).numpy(), H, al).numpy()
        q, a = -g.copy(), []
        for s_i, y_i in reversed(kept):
            a.insert(0, (s_i @ q) / (y_i @ s_i))
            q -= a[0] * y_i
        r = H * q
        for (s_i, y_i), a_i in zip(kept, a):
            r += (a_i - (y_i @ r) / (y_i @ s_i)) * s_i
        np.testing.assert_allclose(d, r, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(al[:len(a)], a, rtol=1e-12)
    assert len(hist.order) == size and hist.cap == size + 1


def test_launches_per_iteration_do_not_grow_with_the_history(monkeypatch):
    # The design's point (optim/lbfgs.py): the two loops run on the host from a few matrix
    # products, so an iteration launches as many kernels with 1 stored pair as with 6, where
    # torch's loops launch 4 more per pair. One iteration per step, fixed step length.
    from tritensor.runtime import launch as _launch
    diag = tt.tensor(np.linspace(1.0, 3.0, 12))
    x = tt.ones(12, dtype=tt.float64, requires_grad=True)
    opt = tt.optim.LBFGS([x], lr=0.5, max_iter=1, history_size=6, tolerance_grad=0.0, tolerance_change=0.0)

    def closure():
        opt.zero_grad()
        loss = 0.5 * (diag * x * x).sum()
        loss.backward()
        return loss
    count = [0]
    real = _launch._final  # every launch's last step, in both modes
    monkeypatch.setattr(_launch, "_final", lambda *a, **k: (count.__setitem__(0, count[0] + 1), real(*a, **k)))
    per_step = []
    for _ in range(12):
        count[0] = 0
        opt.step(closure)
        per_step.append(count[0])
    assert len(opt.state[x]["old_dirs"]) == 6  # the history filled, then the oldest pairs went
    assert per_step[2] > 0 and len(set(per_step[2:])) == 1, per_step  # from the second pair on, the same count
