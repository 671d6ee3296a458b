"""tritensor.ao.ns: the numeric suite's dicts against an independent NumPy model of a small convnet
(Conv2d, ReLU, MaxPool2d, Flatten, Linear) and its fp16/bf16 copies, and BatchNorm2d's logged
output; compute_sqnr against NumPy float64; the report's table (in-process and through
``python -m``); clear errors."""
from __future__ import annotations

import math
import os
import pathlib
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import tritensor
from tritensor import nn
from tritensor.ao.ns import _numeric_suite as ns
from tritensor.ao.ns import report

LOWP = {"fp16": (tritensor.float16, np.float16, 1e-3), "bf16": (tritensor.bfloat16, ml_dtypes.bfloat16, 8e-3)}


def convnet():
    return nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8, 3))


# The float side is checked at fp32 precision: on a GPU, conv2d would default to TF32.
pytestmark = pytest.mark.usefixtures("ieee_fp32_conv")


@pytest.fixture
def setup():
    tritensor.manual_seed(1234)
    model = convnet()
    x = tritensor.randn(2, 1, 4, 4)
    return model, x


def _np(t):
    t = t.detach()
    return (t.float() if t.dtype != tritensor.float32 else t).numpy().astype(np.float64)


# ----- the NumPy model ---------------------------------------------------------------------
def np_conv(x, w, b, pad):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))  # N C H W kh kw
    return np.einsum("nchwij,ocij->nohw", win, w) + b[None, :, None, None]


def np_forward(params, x, rnd):
    """Per-layer outputs; ``rnd`` rounds a value to the format a layer stores (identity for fp32):
    low-precision kernels compute in fp32 from rounded inputs and round on store."""
    w0, b0, w4, b4 = (rnd(p) for p in params)
    x = rnd(x)
    outs = [rnd(np_conv(x, w0, b0, 1))]
    outs.append(np.maximum(outs[-1], 0))
    n, c, h, w = outs[-1].shape
    outs.append(outs[-1].reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5)))
    outs.append(outs[-1].reshape(n, -1))
    outs.append(rnd(outs[-1] @ w4.T + b4))
    return outs


def params_of(model):
    return [_np(model[0].weight), _np(model[0].bias), _np(model[4].weight), _np(model[4].bias)]


def rounder(np_lowp):
    return lambda a: np.asarray(a, dtype=np.float32).astype(np_lowp).astype(np.float64)


def assert_close_lowp(got, want, rtol):
    # One rounding step of the low format apart at most (the accumulation order differs).
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())


# ----- reduced_precision_copy / compare_weights ----------------------------------------------
@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
def test_reduced_precision_copy(setup, fmt):
    model, _ = setup
    dt, np_dt, _ = LOWP[fmt]
    before = params_of(model)
    q = ns.reduced_precision_copy(model, dt)
    assert q is not model and type(q) is type(model)
    assert all(p.dtype == dt for p in q.parameters())
    assert all(p.dtype == tritensor.float32 for p in model.parameters())
    for a, b in zip(before, params_of(model)):
        np.testing.assert_array_equal(a, b)  # the original is untouched
    for a, b in zip(params_of(q), before):
        np.testing.assert_array_equal(a, rounder(np_dt)(b))
    # the copy is independent: an in-place write to it leaves the original alone
    with tritensor.no_grad():
        q[0].weight.mul_(0)
    np.testing.assert_array_equal(params_of(model)[0], before[0])


@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
def test_compare_weights(setup, fmt):
    model, _ = setup
    dt, np_dt, _ = LOWP[fmt]
    q = ns.reduced_precision_copy(model, dt)
    wd = ns.compare_weights(model.state_dict(), q.state_dict())
    assert sorted(wd) == ["0.weight", "4.weight"]  # PyTorch's: the weights, not the biases
    ref = {"0.weight": params_of(model)[0], "4.weight": params_of(model)[2]}
    for k, v in wd.items():
        assert set(v) == {"float", "quantized"}
        assert v["float"].dtype == tritensor.float32 and v["quantized"].dtype == dt
        np.testing.assert_array_equal(_np(v["float"]), ref[k])
        np.testing.assert_array_equal(_np(v["quantized"]), rounder(np_dt)(ref[k]))


def test_compare_weights_errors(setup):
    model, _ = setup
    q = ns.reduced_precision_copy(model, tritensor.float16)
    qd = q.state_dict()
    del qd["4.weight"]
    with pytest.raises(KeyError, match=r"only in float_dict \['4.weight'\]"):
        ns.compare_weights(model.state_dict(), qd)
    other = nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8, 3))
    with pytest.raises(ValueError, match="'0.weight' has shape"):
        ns.compare_weights(model.state_dict(), other.half().state_dict())


# ----- compare_model_outputs -----------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
def test_compare_model_outputs(setup, fmt):
    model, x = setup
    dt, np_dt, rtol = LOWP[fmt]
    q = ns.reduced_precision_copy(model, dt)
    params, xn = params_of(model), _np(x)
    act = ns.compare_model_outputs(model, q, x)
    assert sorted(act) == [f"{i}.stats" for i in range(5)]
    want_f = np_forward(params, xn, lambda a: a)
    want_q = np_forward(params, xn, rounder(np_dt))
    for i in range(5):
        entry = act[f"{i}.stats"]
        assert len(entry["float"]) == len(entry["quantized"]) == 1
        f, qv = entry["float"][0], entry["quantized"][0]
        assert f.dtype == tritensor.float32 and qv.dtype == dt
        np.testing.assert_allclose(_np(f), want_f[i], rtol=1e-5, atol=1e-6)
        assert_close_lowp(_np(qv), want_q[i], rtol)
    # get_matching_activations pairs the same lists; a second run replaces the loggers
    again = ns.get_matching_activations(model, q)
    assert again.keys() == act.keys()
    act2 = ns.compare_model_outputs(model, q, x)
    assert all(len(v["float"]) == 1 for v in act2.values())


def test_compare_model_outputs_allow_list_and_logger(setup):
    model, x = setup
    q = ns.reduced_precision_copy(model, tritensor.bfloat16)
    act = ns.compare_model_outputs(model, q, x, allow_list=[nn.Linear])
    assert list(act) == ["4.stats"]
    d = ns.get_logger_dict(q)
    assert list(d) == ["4.stats"] and len(d["4.stats"]["tensor_val"]) == 1
    # the logged output is what the model returned
    out = q(x.bfloat16())
    np.testing.assert_array_equal(_np(out), _np(d["4.stats"]["tensor_val"][-1]))


def test_compare_model_outputs_logs_batchnorm():
    """BatchNorm layers are in the default allow list (the digits example's convnet has one): their
    float output is the NumPy normalisation of the conv output with the running statistics."""
    tritensor.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.BatchNorm2d(2)).eval()
    mean, var = np.array([0.5, -0.25], np.float32), np.array([2.0, 0.5], np.float32)
    model[1].running_mean.copy_(tritensor.tensor(mean))
    model[1].running_var.copy_(tritensor.tensor(var))
    x = tritensor.randn(2, 1, 4, 4)
    q = ns.reduced_precision_copy(model, tritensor.bfloat16)
    act = ns.compare_model_outputs(model, q, x)
    assert sorted(act) == ["0.stats", "1.stats"]
    conv, bn = _np(act["0.stats"]["float"][0]), _np(act["1.stats"]["float"][0])
    want = (conv - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None].astype(np.float64) + 1e-5)
    np.testing.assert_allclose(bn, want, rtol=1e-5, atol=1e-6)
    assert act["1.stats"]["quantized"][0].dtype == tritensor.bfloat16


@pytest.mark.parametrize("fmt", ["bf16", "fp16"])
def test_compare_model_outputs_autocast(setup, fmt):
    """The model against itself under autocast("cpu"): conv2d and linear run in the low dtype (their
    inputs, weights and bias rounded to it, computed in fp32, rounded on store), the other layers
    in their input's dtype: the NumPy model with every value rounded to the format, and exactly
    what the reduced-precision copy computes for this model."""
    model, x = setup
    dt, np_dt, rtol = LOWP[fmt]
    params, xn = params_of(model), _np(x)
    act = ns.compare_model_outputs_autocast(model, x, dtype=dt)
    assert sorted(act) == [f"{i}.stats" for i in range(5)]
    want_f = np_forward(params, xn, lambda a: a)
    want_q = np_forward(params, xn, rounder(np_dt))
    copy_act = ns.compare_model_outputs(ns._copy_model(model), ns.reduced_precision_copy(model, dt), x)
    for i in range(5):
        entry = act[f"{i}.stats"]
        assert len(entry["float"]) == len(entry["quantized"]) == 1
        f, qv = entry["float"][0], entry["quantized"][0]
        assert f.dtype == tritensor.float32 and qv.dtype == dt
        np.testing.assert_allclose(_np(f), want_f[i], rtol=1e-5, atol=1e-6)
        assert_close_lowp(_np(qv), want_q[i], rtol)
        np.testing.assert_array_equal(_np(qv), _np(copy_act[f"{i}.stats"]["quantized"][0]))
    assert all(p.dtype == tritensor.float32 for p in model.parameters())  # weights untouched
    np.testing.assert_array_equal(params_of(model)[0], params[0])
    assert not tritensor.is_autocast_enabled("cpu")


def test_compare_model_outputs_autocast_errors(setup):
    model, x = setup
    with pytest.raises(TypeError, match="float_model must be an nn.Module"):
        ns.compare_model_outputs_autocast(lambda v: v, x)
    with pytest.raises(ValueError, match="float_model must be float32"):
        ns.compare_model_outputs_autocast(ns.reduced_precision_copy(model, tritensor.float16), x)
    with pytest.raises(RuntimeError, match="unsupported device_type 'xpu'"):
        ns.compare_model_outputs_autocast(model, x, device_type="xpu")
    if not tritensor.cuda.is_available():
        with pytest.warns(UserWarning, match="CUDA is not available"), \
                pytest.raises(RuntimeError, match="disabled here"):
            ns.compare_model_outputs_autocast(model, x, device_type="cuda")
    assert "activation_post_process" not in model[0]._modules  # nothing attached before the errors


def test_mismatched_models_raise(setup):
    model, x = setup
    other = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(32, 3)).half()
    with pytest.raises(ValueError, match="different module trees"):
        ns.compare_model_outputs(model, other, x)
    with pytest.raises(ValueError, match="same object"):
        ns.compare_model_outputs(model, model, x)
    with pytest.raises(ValueError, match="differ at '<root>'"):
        ns.compare_model_stub(model, other, [nn.Linear], x)
    with pytest.raises(TypeError, match="must be an nn.Module"):
        ns.compare_model_outputs(model, {"0.weight": 1}, x)
    with pytest.raises(TypeError, match="float16 or tritensor.bfloat16"):
        ns.reduced_precision_copy(model, tritensor.float32)


# ----- compare_model_stub / Shadow -----------------------------------------------------------
@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
def test_compare_model_stub(setup, fmt):
    model, x = setup
    dt, np_dt, rtol = LOWP[fmt]
    q = ns.reduced_precision_copy(model, dt)
    params, xn = params_of(model), _np(x)
    ob = ns.compare_model_stub(model, q, [nn.Conv2d, nn.Linear], x)
    assert sorted(ob) == ["0.stats", "4.stats"]
    assert isinstance(q[0], ns.Shadow) and isinstance(q[4], ns.Shadow) and isinstance(q[1], nn.ReLU)
    r = rounder(np_dt)
    want_q = np_forward(params, xn, r)
    # the quantized side: the low-precision model's own layer outputs
    for i in (0, 4):
        qv = ob[f"{i}.stats"]["quantized"]
        assert len(qv) == 1 and qv[0].dtype == dt
        assert_close_lowp(_np(qv[0]), want_q[i], rtol)
    # the float shadow: the float32 layer on the same input as the low-precision one, cast to fp32
    f0, f4 = ob["0.stats"]["float"][0], ob["4.stats"]["float"][0]
    assert f0.dtype == f4.dtype == tritensor.float32
    # (the q model's input is the data cast to its dtype at entry, so the first shadow sees that too)
    np.testing.assert_allclose(_np(f0), np_conv(r(xn), params[0], params[1], 1), rtol=1e-5, atol=1e-6)
    lin_in = want_q[3]  # the q path's Flatten output, as fed to the shadow Linear
    assert_close_lowp(_np(f4), lin_in @ params[2].T + params[3], rtol)


def test_shadow_functional_ops():
    sh = ns.Shadow(nn.ReLU(), nn.ReLU(), ns.ShadowLogger)
    a = tritensor.tensor([[1.5, -2.25, 3.0]]).bfloat16()
    b = tritensor.tensor([[0.5, 1.0, -4.0]]).bfloat16()
    an, bn = _np(a), _np(b)
    cases = [(sh.add, (a, b), an + bn), (sh.mul, (a, b), an * bn), (sh.add_scalar, (a, 2.0), an + 2.0),
             (sh.mul_scalar, (a, 3.0), an * 3.0), (sh.add_relu, (a, b), np.maximum(an + bn, 0))]
    for fn, args, want in cases:
        out = fn(*args)
        assert out.dtype == tritensor.bfloat16
        np.testing.assert_allclose(_np(out), want)
        assert sh.logger.stats["float"][-1].dtype == tritensor.float32
        np.testing.assert_allclose(_np(sh.logger.stats["float"][-1]), want)
        assert sh.logger.stats["quantized"][-1] is not None
    assert len(sh.logger.stats["float"]) == len(cases)
    # cat (it once raised NotImplementedError, "tritensor has no cat op", though tt.cat exists)
    out = sh.cat([a, b], dim=1)
    assert out.dtype == tritensor.bfloat16 and out.shape == (1, 6)
    np.testing.assert_array_equal(_np(out), np.concatenate([an, bn], axis=1))
    assert sh.logger.stats["float"][-1].dtype == tritensor.float32
    np.testing.assert_array_equal(_np(sh.logger.stats["float"][-1]), np.concatenate([an, bn], axis=1))
    assert len(sh.logger.stats["float"]) == len(cases) + 1
    assert ns.get_logger_dict(nn.Sequential(sh)).keys() == {"0.stats"}


def test_logger_base_and_prepare_with_stubs_custom_logger(setup):
    model, x = setup
    q = ns.reduced_precision_copy(model, tritensor.float16)

    class Counting(ns.Logger):
        def __init__(self):
            super().__init__()
            self.stats["calls"] = 0

        def forward(self, x, y):
            self.stats["calls"] += 1

    ns.prepare_model_with_stubs(model, q, {nn.Linear}, Counting)
    q(x.half())
    q(x.half())
    assert ns.get_logger_dict(q) == {"4.stats": {"calls": 2}}
    assert ns.Logger()(x) is None


# ----- compute_sqnr --------------------------------------------------------------------------
def test_compute_sqnr():
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((5, 7)).astype(np.float32)
    x = tritensor.tensor(xa)
    for dt in (tritensor.float16, tritensor.bfloat16):
        y = x.to(dt)
        xd, yd = xa.astype(np.float64), _np(y)
        want = 20 * np.log10(np.linalg.norm(xd) / np.linalg.norm(xd - yd))
        assert ns.compute_sqnr(x, y) == pytest.approx(want, rel=1e-12)
    assert ns.compute_sqnr(x, x) == math.inf
    assert ns.compute_sqnr(xa, xa + 1) == pytest.approx(20 * np.log10(np.linalg.norm(xa.astype(np.float64)) / math.sqrt(35)))
    # lists (the suite's per-call lists) are concatenated
    y = x.half()
    both = ns.compute_sqnr([x, x], [y, y])
    assert both == pytest.approx(ns.compute_sqnr(x, y), rel=1e-12)
    with pytest.raises(ValueError, match="same shape"):
        ns.compute_sqnr(x, tritensor.zeros(3))


# ----- the report ----------------------------------------------------------------------------
def test_report_function(setup, capsys):
    model, x = setup
    before = params_of(model)
    text = report.numeric_report(model, tritensor.bfloat16, x)
    assert capsys.readouterr().out.strip() == text.strip()
    lines = text.splitlines()
    assert lines[0].startswith("numeric suite: float32 model vs its bfloat16 copy")
    assert lines[1].split() == ["layer", "type", "weight", "SQNR", "(dB)", "activation", "SQNR", "(dB)"]
    rows = report.sqnr_table(model, ns.reduced_precision_copy(model, tritensor.bfloat16), x)
    assert [r[:2] for r in rows] == [("0", "Conv2d"), ("1", "ReLU"), ("2", "MaxPool2d"), ("3", "Flatten"),
                                     ("4", "Linear")]
    r = rounder(ml_dtypes.bfloat16)
    p = params_of(model)
    for (name, _, w, a), wref in zip(rows, [p[0], None, None, None, p[2]]):
        if wref is None:
            assert w is None
        else:
            assert w == pytest.approx(20 * np.log10(np.linalg.norm(wref) / np.linalg.norm(wref - r(wref))))
        assert 30 < a < 80  # bf16: ~8 bits of mantissa
    for a, b in zip(before, params_of(model)):
        np.testing.assert_array_equal(a, b)
    assert isinstance(model[0], nn.Conv2d) and "activation_post_process" not in model[0]._modules
    for name, _, w, a in rows:
        assert any(line.split()[:2] == [name, _] for line in lines)
    assert report.NO_MATPLOTLIB not in text and "chart" not in text  # no png asked for


def test_report_autocast_variant(setup, capsys):
    model, x = setup
    dev = x.device.type  # autocast of the device the model runs on (the default device); bf16 on both
    text = report.numeric_report(model, tritensor.autocast(dev, dtype=tritensor.bfloat16), x)
    assert text.splitlines()[0].startswith("numeric suite: float32 model vs the same model under "
                                           f"autocast('{dev}', bfloat16)")
    rows = report.sqnr_table(model, tritensor.autocast(dev, dtype=tritensor.bfloat16), x)
    copy_rows = report.sqnr_table(model, ns.reduced_precision_copy(model, tritensor.bfloat16), x)
    assert [r[:2] for r in rows] == [r[:2] for r in copy_rows]
    assert all(r[2] is None for r in rows)  # the weights stay float32 under autocast
    # every layer of this model computes what the bf16 copy computes (see the test above)
    assert [r[3] for r in rows] == [r[3] for r in copy_rows]
    assert "activation_post_process" not in model[0]._modules  # the report works on copies


def test_report_png_or_says_no_matplotlib(setup, tmp_path, capsys):
    model, x = setup
    png = tmp_path / "chart.png"
    text = report.numeric_report(model, tritensor.float16, x, png=str(png))
    if report._plt is None:
        assert text.splitlines()[-1] == report.NO_MATPLOTLIB and not png.exists()
    else:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_module_entry(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(pathlib.Path(tritensor.__file__).parent.parent)] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    out = subprocess.run([sys.executable, "-m", "tritensor.ao.ns.report", "--dtype", "fp16", "--no-png"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    # the same table, computed here with the same seed, model, input and (default) conv precision
    tritensor.backends.cudnn.allow_tf32 = True
    tritensor.manual_seed(0)
    model = report.tiny_convnet()
    x = tritensor.randn(2, 1, 8, 8)
    want = report.numeric_report(model, tritensor.float16, x)
    assert out.stdout.strip() == want.strip()
    assert "Conv2d" in out.stdout and "Linear" in out.stdout and not list(tmp_path.iterdir())
