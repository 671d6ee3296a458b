"""conv2d's plans (core/ops/conv.py: _Conv2dPlan): a repeated call skips the checks and the
configuration work, and must change nothing else.

A call whose signature (dtypes, shapes, strides, devices of the tensors; stride, padding,
dilation, groups; cudnn.allow_tf32) was seen runs the plan made at its first call. Here: the
planned path gives bit for bit what a fresh plan gives, on other tensors of the same signature
(other values, another weight), over every route conv2d takes (NHWC inside, the pointwise GEMMs,
the in-place kernels for few channels, unbatched and empty inputs), layouts and dtypes, and the
float64 NumPy reference agrees; bad input after a planned call still gets its error, before any
plan is found for it; a weight written in place between calls is used with its new values (the
packed weight's version check runs at every call). The two backward entries
(conv2d_backward_input, conv2d_backward_weight) are planned the same way and checked the same
way. How many Python calls and launches a planned call costs is pinned in test_host_cost.py and
below.
"""
import numpy as np
import pytest

import tritensor as tt
from layouts import make
from test_conv import ref_conv2d, ref_conv2d_backward
from tolerances import FLOAT_DTYPES, NP, assert_close
from tritensor.core.ops import conv as _ops_conv
from tritensor.runtime import mode

rng = np.random.default_rng(11)


pytestmark = pytest.mark.usefixtures("ieee_fp32_conv")


# planner -> (its function, its plans) in core/ops/conv.py
PLANNERS = {"conv2d": ("_plan_conv2d", "_conv2d_plans"), "input_grad": ("_plan_input_grad", "_input_grad_plans"),
            "weight_grad": ("_plan_weight_grad", "_weight_grad_plans")}


@pytest.fixture
def planned(monkeypatch):
    """Counts the plans made (each a full check of a call) per entry, from empty caches."""
    made = dict.fromkeys(PLANNERS, 0)
    for name, (planner, plans) in PLANNERS.items():
        monkeypatch.setattr(_ops_conv, plans, {})

        def counting(*args, _real=getattr(_ops_conv, planner), _name=name):
            made[_name] += 1
            return _real(*args)

        monkeypatch.setattr(_ops_conv, planner, counting)
    return made


# route -> (x shape, (OC, KH, KW), stride, padding, dilation, groups, bias)
ROUTES = {
    "nhwc-3x3": ((2, 16, 4, 5), (16, 3, 3), 1, 1, 1, 1, False),
    "nhwc-geometry": ((1, 32, 5, 6), (32, 3, 3), (2, 1), (1, 1), (1, 2), 2, True),
    "gemm-nchw-1x1": ((2, 16, 2, 4), (24, 1, 1), 1, 0, 1, 1, False),
    "gemm-nhwc-1x1-bias": ((2, 16, 3, 3), (24, 1, 1), (1, 1), 0, 1, 1, True),
    "direct-depthwise": ((2, 4, 5, 5), (4, 3, 3), 1, "same", 1, 4, True),
    "flat-stem": ((1, 3, 6, 6), (16, 3, 3), 2, 1, 1, 1, True),
    "unbatched": ((16, 4, 4), (16, 3, 3), 1, "valid", 1, 1, True),
    "empty-batch": ((0, 16, 4, 4), (16, 3, 3), 1, 1, 1, 1, False),
}


def _operands(route, dtype, layout):
    xs, (OC, KH, KW), stride, padding, dilation, groups, bias = ROUTES[route]
    values = lambda shape: rng.standard_normal(shape)  # noqa: E731
    if layout == "channels_last":
        x, x64 = make(xs, dtype, "contiguous", values)
        x = x.contiguous(memory_format=tt.channels_last)
    else:
        x, x64 = make(xs, dtype, layout, values)
    w, w64 = make((OC, xs[-3] // groups, KH, KW), dtype, "contiguous", values)
    b, b64 = make((OC,), dtype, "contiguous", values) if bias else (None, None)
    return (x, w, b), (x64, w64, b64)


def _check(route, dtype, layout, planned):
    *_, stride, padding, dilation, groups, _ = ROUTES[route]
    first, _ = _operands(route, dtype, layout)
    (x, w, b), (x64, w64, b64) = _operands(route, dtype, layout)  # other values, same signature
    tt.conv2d(*first, stride, padding, dilation, groups)
    assert planned["conv2d"] == 1
    cached = tt.conv2d(x, w, b, stride, padding, dilation, groups)
    assert planned["conv2d"] == 1, "a repeated signature was planned again"
    _ops_conv._conv2d_plans.clear()
    fresh = tt.conv2d(x, w, b, stride, padding, dilation, groups)
    assert planned["conv2d"] == 2
    assert cached.shape == fresh.shape and cached.stride() == fresh.stride()
    assert_close(cached, fresh.cpu().numpy().astype(np.float64), dtype, "exact")
    unbatched = x64.ndim == 3
    ref = ref_conv2d(x64[None] if unbatched else x64, w64, b64, *(
        v if isinstance(v, (tuple, str)) else (v, v) for v in (stride, padding, dilation)), groups)
    assert_close(fresh, ref[0] if unbatched else ref, dtype, "accumulate", k=w64[0].size)


@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "transposed", "sliced"])
@pytest.mark.parametrize("route", [r for r in ROUTES if r != "unbatched"])
def test_planned_call_matches_a_fresh_plan_bit_for_bit(route, layout, planned):
    _check(route, tt.float32, layout, planned)


@pytest.mark.parametrize("dtype", [d for d in FLOAT_DTYPES if d is not tt.float32], ids=str)
@pytest.mark.parametrize("route", ["nhwc-geometry", "gemm-nchw-1x1", "gemm-nhwc-1x1-bias", "direct-depthwise"])
def test_planned_call_matches_a_fresh_plan_every_dtype(route, dtype, planned):
    _check(route, dtype, "contiguous", planned)


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_planned_unbatched_call(layout, planned):
    _check("unbatched", tt.float32, layout, planned)


def test_errors_still_fire_after_a_planned_call(planned):
    x, w, b = tt.randn(1, 16, 4, 4), tt.randn(16, 16, 3, 3), tt.randn(16)
    tt.conv2d(x, w, b, 1, 1, 1, 1)
    tt.conv2d(x, w, b, (1, 1), [1, 1], (1, 1), 1)  # lists are planned too (by their marshal bytes)
    made = planned["conv2d"]
    bad = [  # (call, error, torch's words): each differs from a planned signature in one thing
        (lambda: tt.conv2d(x, w.double(), b, 1, 1, 1, 1), RuntimeError, "should be the same"),
        (lambda: tt.conv2d(x.double(), w, b, 1, 1, 1, 1), RuntimeError, "should be the same"),
        (lambda: tt.conv2d(x[:, :8], w, b, 1, 1, 1, 1), RuntimeError, "to have 16 channels, but got 8"),
        (lambda: tt.conv2d(x, w, b[:8], 1, 1, 1, 1), RuntimeError, "bias must have shape"),
        (lambda: tt.conv2d(x, w, b, 1.0, 1, 1, 1), TypeError, "stride must be an int"),
        (lambda: tt.conv2d(x, w, b, (1, True), 1, 1, 1), TypeError, "stride must be an int"),
        (lambda: tt.conv2d(x, w, b, 1, (1.0, 1), 1, 1), TypeError, "padding must be an int"),
        (lambda: tt.conv2d(x, w, b, 1, 1, 1, True), RuntimeError, "non-positive groups"),
        (lambda: tt.conv2d(x, w, b, 1, 1, 1, 1.0), RuntimeError, "non-positive groups"),
        (lambda: tt.conv2d(x.numpy(), w, b, 1, 1, 1, 1), TypeError, "argument 'input' must be a Tensor"),
        (lambda: tt.conv2d(x, w[..., :0], b, 1, 1, 1, 1), RuntimeError, "kernel size should be greater than zero"),
    ]
    if tt.cuda.is_available():
        other = "cpu" if x.device.type == "cuda" else "cuda"
        bad.append((lambda: tt.conv2d(x, w.to(other), b, 1, 1, 1, 1), RuntimeError, "same device"))
    for call, err, words in bad:
        with pytest.raises(err, match=words):
            call()
    assert planned["conv2d"] == made + len(bad)  # each was checked, none found a plan
    assert len(_ops_conv._conv2d_plans) == 2
    tt.conv2d(x, w, b, 1, 1, 1, 1)
    assert planned["conv2d"] == made + len(bad)


@pytest.mark.parametrize("route", ["nhwc-3x3", "gemm-nhwc-1x1-bias", "direct-depthwise"])
def test_weight_written_between_planned_calls_is_read_anew(route, planned):
    *_, stride, padding, dilation, groups, _ = ROUTES[route]
    (x, w, b), (x64, w64, b64) = _operands(route, tt.float32, "contiguous")
    y1 = tt.conv2d(x, w, b, stride, padding, dilation, groups).numpy()
    with tt.no_grad():
        w.mul_(2.0)  # in place: the version moves, the packed weight is stale
    y2 = tt.conv2d(x, w, b, stride, padding, dilation, groups)
    bias = 0 if b64 is None else b64[None, :, None, None]
    assert_close(y2, 2 * (y1.astype(np.float64) - bias) + bias, tt.float32, "accumulate", k=w64[0].size)
    w3 = rng.standard_normal(w64.shape)
    w.data = tt.tensor(w3.astype(np.float32))  # a new storage under the same tensor
    y3 = tt.conv2d(x, w, b, stride, padding, dilation, groups)
    assert planned["conv2d"] == 1
    ref = ref_conv2d(x64, w3.astype(np.float32).astype(np.float64), b64, *(
        v if isinstance(v, (tuple, str)) else (v, v) for v in (stride, padding, dilation)), groups)
    assert_close(y3, ref, tt.float32, "accumulate", k=w64[0].size)


@pytest.mark.skipif(not mode.SIM, reason="counts the GPU path's launches on the simulated device")
@pytest.mark.parametrize("route, launches", [("nhwc-3x3", 3), ("gemm-nchw-1x1", 1), ("flat-stem", 1)])
def test_launches_per_planned_call(route, launches, planned):
    from tritensor.runtime import sim

    *_, stride, padding, dilation, groups, _ = ROUTES[route]
    (x, w, b), _ = _operands(route, tt.float16, "contiguous")
    x, w, b = (t if t is None else t.cuda() for t in (x, w, b))
    tt.conv2d(x, w, b, stride, padding, dilation, groups)
    with sim.counting() as counts:
        tt.conv2d(x, w, b, stride, padding, dilation, groups)
    assert counts["launch"] == launches and planned["conv2d"] == 1


def _pairs(*values):
    return [v if isinstance(v, (tuple, str)) else (v, v) for v in values]


@pytest.mark.parametrize("route, layout", [  # the gradient and the input in the layout (the NHWC route in each)
    ("nhwc-3x3", "contiguous"), ("nhwc-3x3", "channels_last"), ("nhwc-3x3", "transposed"),
    ("nhwc-geometry", "contiguous"), ("direct-depthwise", "transposed"), ("flat-stem", "channels_last"),
    ("empty-batch", "contiguous")])
def test_planned_backward_matches_a_fresh_plan_bit_for_bit(route, layout, planned):
    xs, (OC, KH, KW), stride, padding, dilation, groups, _ = ROUTES[route]
    geometry = (stride, padding, dilation, groups)
    ys = tt.conv2d(tt.zeros(*xs), tt.zeros(OC, xs[1] // groups, KH, KW), None, *geometry).shape

    def operands():
        (x, w, _), (x64, w64, _) = _operands(route, tt.float32, layout)
        g, g64 = make(ys, tt.float32, "transposed" if layout == "transposed" else "contiguous",
                      lambda shape: rng.standard_normal(shape))
        if layout == "channels_last":
            g = g.contiguous(memory_format=tt.channels_last)
        return (g, x, w), (g64, x64, w64)

    def grads(g, x, w):
        return (_ops_conv.conv2d_backward_input(g, w, xs, *geometry),
                _ops_conv.conv2d_backward_weight(g, x, w.shape, *geometry))

    grads(*operands()[0])
    (g, x, w), (g64, x64, w64) = operands()  # other values, same signature
    cached = grads(g, x, w)
    assert planned["input_grad"] == planned["weight_grad"] == 1, "a repeated signature was planned again"
    for _, plans in PLANNERS.values():
        getattr(_ops_conv, plans).clear()
    fresh = grads(g, x, w)
    assert planned["input_grad"] == planned["weight_grad"] == 2
    refs = ref_conv2d_backward(xs, x64, w64, g64, *_pairs(stride, padding, dilation), groups)
    for c, f, ref, k in zip(cached, fresh, refs, (OC // groups * KH * KW, xs[0] * ys[2] * ys[3])):
        assert c.shape == f.shape and c.stride() == f.stride()
        assert_close(c, f.cpu().numpy().astype(np.float64), tt.float32, "exact")
        assert_close(f, ref, tt.float32, "accumulate", k=max(k, 1))


def test_backward_errors_still_fire_after_a_planned_call(planned):
    x, w, g = tt.randn(1, 16, 4, 4), tt.randn(16, 16, 3, 3), tt.randn(1, 16, 4, 4)
    _ops_conv.conv2d_backward_input(g, w, x.shape, 1, 1)
    _ops_conv.conv2d_backward_weight(g, x, w.shape, 1, 1)
    bad = [
        (lambda: _ops_conv.conv2d_backward_input(g.double(), w, x.shape, 1, 1), "should be the same"),
        (lambda: _ops_conv.conv2d_backward_input(g[:, :, :3], w, x.shape, 1, 1), "grad_output has shape"),
        (lambda: _ops_conv.conv2d_backward_input(g, w, (1, 16, 4), 1, 1), "input_shape must be 4"),
        (lambda: _ops_conv.conv2d_backward_input(g, w, x.shape, 1.0, 1), "stride must be an int"),
        (lambda: _ops_conv.conv2d_backward_weight(g, x.double(), w.shape, 1, 1), "should be the same"),
        (lambda: _ops_conv.conv2d_backward_weight(g, x[0], w.shape, 1, 1), "input must be 4-D"),
        (lambda: _ops_conv.conv2d_backward_weight(g, x, (16, 16, 3), 1, 1), "weight_shape must be 4"),
        (lambda: _ops_conv.conv2d_backward_weight(g, x, w.shape, 1, True), "padding must be an int"),
    ]
    for call, words in bad:
        with pytest.raises((RuntimeError, TypeError), match=words):
            call()
    assert planned["input_grad"] == 1 + 4 and planned["weight_grad"] == 1 + 4  # each checked, none found a plan
