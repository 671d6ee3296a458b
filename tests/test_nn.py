"""nn: Module bookkeeping, layers against NumPy, PyTorch's default initialisations, the fused
cross-entropy kernels against float64 NumPy over dtypes/odd/empty/non-contiguous inputs,
loss errors, safetensors save/load, and the digits example."""
import importlib.util
import io
import math
import os

import numpy as np
import pytest

import tritensor as tt
from tritensor import nn
from tritensor.nn import functional as F

from tolerances import FLOAT_DTYPES, NP, TOL, assert_close


def arr(t):
    return np.asarray(t.detach().float().numpy() if t.dtype is tt.bfloat16 else t.detach().numpy(), dtype=np.float64)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, padding=1)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(2 * 4 * 4, 3))
        self.register_buffer("steps", tt.zeros(1))
        self.scale = 2.0  # a plain attribute

    def forward(self, x):
        return self.head(F.relu(self.conv(x))) * self.scale


# ----- Module bookkeeping ------------------------------------------------------------------
def test_module_registration_and_walks():
    m = Net()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["conv.weight", "conv.bias", "head.1.weight", "head.1.bias"]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad and p.is_leaf for p in m.parameters())
    assert [n for n, _ in m.named_children()] == ["conv", "head"]
    assert len(list(m.modules())) == 5
    assert [n for n, _ in m.named_buffers()] == ["steps"]
    assert list(m.state_dict()) == ["steps"] + names  # a module's own tensors before its children's (PyTorch)
    assert m.scale == 2.0 and "scale" not in m._parameters
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        m.nope
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'bias'"):
        m.conv.bias = tt.zeros(2)
    m.conv.bias = None
    assert [n for n, _ in m.named_parameters()] == ["conv.weight", "head.1.weight", "head.1.bias"]


def test_train_eval_and_dropout():
    m = nn.Sequential(nn.Dropout(0.5), nn.ReLU())
    assert m.training and m[0].training
    m.eval()
    assert not m[0].training
    x = tt.ones(64)
    assert_close(m(x), np.ones(64), tt.float32)  # identity in eval
    m.train()
    y = arr(m(x))
    assert set(np.unique(y)) <= {0.0, 2.0} and 0 < (y == 0).sum() < 64


def test_state_dict_round_trip_and_strict_errors():
    tt.manual_seed(0)
    a, b = Net(), Net()
    b.load_state_dict(a.state_dict())
    for (na, pa), (nb, pb) in zip(a.named_parameters(), b.named_parameters()):
        assert na == nb
        np.testing.assert_array_equal(arr(pa), arr(pb))
    sd = a.state_dict()
    assert not sd["conv.weight"].requires_grad  # detached copies of the data
    bad = dict(sd)
    del bad["conv.bias"]
    bad["extra"] = tt.zeros(1)
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "conv.bias"'):
        b.load_state_dict(bad)
    with pytest.raises(RuntimeError, match=r'Unexpected key\(s\) in state_dict: "extra"'):
        b.load_state_dict(bad)
    result = b.load_state_dict(bad, strict=False)
    assert result.missing_keys == ["conv.bias"] and result.unexpected_keys == ["extra"]
    wrong = dict(sd)
    wrong["head.1.bias"] = tt.zeros(4)
    with pytest.raises(RuntimeError, match="size mismatch for head.1.bias"):
        b.load_state_dict(wrong)


def test_to_dtype_zero_grad_and_hooks():
    m = Net()
    m.to(tt.float64)
    assert all(p.dtype is tt.float64 for p in m.parameters())
    x = tt.randn(2, 1, 4, 4, dtype=tt.float64)
    out = m(x)
    out.sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    seen = []
    h = m.conv.register_forward_hook(lambda mod, args, o: seen.append(o.shape))
    pre = m.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    replace = m.head.register_forward_hook(lambda mod, args, o: o * 0 + 7)
    y = m(x)
    assert seen == [(2, 2, 4, 4)]
    assert_close(y.detach(), np.full((2, 3), 14.0), tt.float64)
    for handle in (h, pre, replace):
        handle.remove()
    m(x)
    assert len(seen) == 1
    with pytest.raises(TypeError, match="floating point dtypes"):
        m.to(tt.int64)


def test_frozen_parameters_record_no_graph():
    m = nn.Linear(3, 2)
    m.requires_grad_(False)
    y = m(tt.randn(4, 3))
    assert not y.requires_grad and y.grad_fn is None


# ----- default initialisations and layers --------------------------------------------------
def test_default_initialisation_bounds():
    tt.manual_seed(1)
    lin = nn.Linear(50, 40)
    bound = 1 / math.sqrt(50)  # kaiming_uniform(a=sqrt(5)) == U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    w = arr(lin.weight)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.1 * bound
    assert np.abs(arr(lin.bias)).max() <= bound
    conv = nn.Conv2d(4, 6, 3, groups=2)
    cb = 1 / math.sqrt(2 * 9)
    assert conv.weight.shape == (6, 2, 3, 3) and np.abs(arr(conv.weight)).max() <= cb
    ln = nn.LayerNorm(5)
    assert_close(ln.weight.detach(), np.ones(5), tt.float32)
    assert_close(ln.bias.detach(), np.zeros(5), tt.float32)


def test_layers_against_numpy():
    tt.manual_seed(2)
    x = tt.randn(2, 3, 4, 4)
    xn = arr(x)
    lin = nn.Linear(4, 5)
    assert_close(lin(x).detach(), xn @ arr(lin.weight).T + arr(lin.bias), tt.float32, rtol=1e-5, atol=1e-5)
    assert_close(nn.ReLU()(x).detach(), np.maximum(xn, 0), tt.float32)
    from math import erf
    gelu = np.vectorize(lambda v: 0.5 * v * (1 + erf(v / math.sqrt(2))))
    assert_close(nn.GELU()(x).detach(), gelu(xn), tt.float32)
    assert_close(nn.Flatten()(x).detach(), xn.reshape(2, -1), tt.float32)
    assert_close(nn.MaxPool2d(2)(x).detach(), xn.reshape(2, 3, 2, 2, 2, 2).max(axis=(3, 5)), tt.float32)
    assert_close(nn.AvgPool2d(2)(x).detach(), xn.reshape(2, 3, 2, 2, 2, 2).mean(axis=(3, 5)), tt.float32)
    ln = nn.LayerNorm(4)
    ref = (xn - xn.mean(-1, keepdims=True)) / np.sqrt(xn.var(-1, keepdims=True) + 1e-5)
    assert_close(ln(x).detach(), ref, tt.float32, atol=1e-5)
    conv = nn.Conv2d(3, 2, 3, padding=1)
    pad = np.pad(xn, ((0, 0), (0, 0), (1, 1), (1, 1)))
    w = arr(conv.weight)
    ref = np.zeros((2, 2, 4, 4))
    for i in range(4):
        for j in range(4):
            ref[:, :, i, j] = np.einsum("nchw,ochw->no", pad[:, :, i:i + 3, j:j + 3], w)
    assert_close(conv(x).detach(), ref + arr(conv.bias)[None, :, None, None], tt.float32, atol=1e-5)
    assert_close(nn.MSELoss()(x, tt.zeros_like(x)), (xn ** 2).mean(), tt.float32)
    assert_close(nn.MSELoss(reduction="sum")(x, tt.zeros_like(x)), (xn ** 2).sum(), tt.float32, rtol=1e-5)


# ----- fused cross-entropy kernels ---------------------------------------------------------
def ce_ref(x, t, ignore=-100):
    x = x - x.max(1, keepdims=True)
    lse = np.log(np.exp(x).sum(1))
    valid = t != ignore
    rows = np.where(valid, lse - x[np.arange(len(t)), np.where(valid, t, 0)], 0.0)
    p = np.exp(x - lse[:, None])
    onehot = np.zeros_like(p)
    onehot[np.arange(len(t))[valid], t[valid]] = 1
    grad_rows = (p - onehot) * valid[:, None]
    return rows, grad_rows, valid.sum()


CE_SHAPES = [(1, 1), (3, 37), (5, 10), (2, 5000)]  # 5000 classes: more than one class tile


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("shape", CE_SHAPES, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_cross_entropy_kernel_vs_numpy(dtype, shape, layout):
    n, c = shape
    rng = np.random.default_rng(n * 100 + c)
    xn = (rng.standard_normal((n, c)) * 3).astype(NP[dtype])
    t = rng.integers(0, c, size=n)
    if n > 2:
        t[1] = -100
    if layout == "transposed":
        x = tt.from_numpy(np.ascontiguousarray(xn.T)).t()
        assert not x.is_contiguous() or n == 1 or c == 1
    else:
        x = tt.from_numpy(xn.copy())
    x.requires_grad_()
    rows, grad_rows, count = ce_ref(xn.astype(np.float64), t)
    for reduction, ref, gscale in (("none", rows, 1.0), ("sum", rows.sum(), 1.0), ("mean", rows.sum() / count,
                                                                                       1.0 / count)):
        x.grad = None
        loss = F.cross_entropy(x, tt.tensor(t), reduction=reduction)
        assert loss.dtype is dtype
        tol = dict(TOL[dtype])
        if reduction == "sum":  # a sum of n rounded terms
            tol = {k: v * max(n, 1) for k, v in tol.items()}
        assert_close(loss.detach(), ref, dtype, **tol)
        loss.backward(tt.ones_like(loss) if reduction == "none" else None)
        assert x.grad.dtype is dtype and x.grad.shape == (n, c)
        assert_close(x.grad, grad_rows * gscale, dtype)


def ce_torch_ref(x, t, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """torch's cross_entropy (class indices) in float64, from its definition: nll_loss of
    log_softmax with weights; label smoothing mixes in -sum_c w[c] log p[c] / C; the weighted
    mean divides both parts by the summed weights of the non-ignored targets."""
    n, c = x.shape
    w = np.ones(c) if weight is None else weight
    lp = x - x.max(1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(1, keepdims=True))
    valid = t != ignore_index
    ts = np.where(valid, t, 0)
    nll = np.where(valid, -w[ts] * lp[np.arange(n), ts], 0.0)
    smooth = np.where(valid, -(lp * w).sum(1), 0.0)
    if reduction == "none":
        nll_r, smooth_r = nll, smooth
    elif reduction == "sum":
        nll_r, smooth_r = nll.sum(), smooth.sum()
    else:
        denom = np.where(valid, w[ts], 0.0).sum()
        nll_r, smooth_r = nll.sum() / denom, smooth.sum() / denom
    return (1 - label_smoothing) * nll_r + label_smoothing / c * smooth_r


def ce_torch_grad_ref(x, t, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0, h=1e-6):
    """d sum(loss) / dx of ce_torch_ref by central differences (float64; loss is smooth in x)."""
    g = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        e = np.zeros_like(x)
        e[idx] = h
        f = lambda a: np.sum(ce_torch_ref(a, t, weight, ignore_index, reduction, label_smoothing))  # noqa: E731
        g[idx] = (f(x + e) - f(x - e)) / (2 * h)
    return g


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.3])
def test_cross_entropy_weight_ignore_index_label_smoothing_vs_numpy(dtype, weighted, label_smoothing):
    n, c = 5, 37
    rng = np.random.default_rng(11)
    xn = (rng.standard_normal((n, c)) * 3).astype(NP[dtype])
    t = rng.integers(0, c, size=n)
    t[1] = 7  # ignore_index=7 is a real class: rows targeting it are skipped
    w = rng.uniform(0.1, 2.0, size=c).astype(NP[dtype]) if weighted else None
    x64 = xn.astype(np.float64)
    w64 = None if w is None else w.astype(np.float64)
    x = tt.from_numpy(xn.copy()).requires_grad_()
    kw = dict(ignore_index=7, label_smoothing=label_smoothing)
    for reduction in ("none", "sum", "mean"):
        x.grad = None
        loss = F.cross_entropy(x, tt.tensor(t), weight=None if w is None else tt.tensor(w, dtype=dtype),
                               reduction=reduction, **kw)
        assert loss.dtype is dtype
        tol = dict(TOL[dtype])
        if reduction == "sum":  # a sum of n rounded terms
            tol = {k: v * n for k, v in tol.items()}
        assert_close(loss.detach(), ce_torch_ref(x64, t, w64, reduction=reduction, **kw), dtype, **tol)
        loss.backward(tt.ones_like(loss) if reduction == "none" else None)
        # central differences of the float64 reference: its own error is ~1e-9, so fp64 is held to 1e-7
        ref = ce_torch_grad_ref(x64, t, w64, reduction=reduction, **kw)
        assert_close(x.grad, ref, dtype, **(dict(rtol=1e-7, atol=1e-8) if dtype is tt.float64 else {}))


def test_cross_entropy_weighted_smoothed_gradcheck_and_module():
    x, w = tt.tensor(RNG_CE.standard_normal((4, 5)), requires_grad=True), tt.tensor([0.5, 2.0, 1.0, 0.1, 3.0])
    t = tt.tensor([0, 4, -100, 2])
    for red in ("mean", "none"):  # ("sum" is "none" summed; the NumPy test covers all three)
        assert tt.autograd.gradcheck(lambda a: F.cross_entropy(a, t, weight=w, reduction=red, label_smoothing=0.2),
                                     (x,))
    assert tt.autograd.gradcheck(lambda a: F.nll_loss(a, t, weight=w), (x,))
    x4 = tt.tensor(RNG_CE.standard_normal((2, 3, 2)), requires_grad=True)  # (N, C, d1): classes on dim 1
    t4 = tt.tensor([[0, 2], [1, -100]])
    w3 = tt.tensor([1.0, 0.25, 4.0], dtype=tt.float64)
    assert tt.autograd.gradcheck(lambda a: F.cross_entropy(a, t4, weight=w3, label_smoothing=0.1), (x4,))
    flat = x4.detach().numpy().transpose(0, 2, 1).reshape(-1, 3)
    crit = nn.CrossEntropyLoss(weight=w3, label_smoothing=0.1, reduction="none")
    assert_close(crit(x4, t4).detach(), ce_torch_ref(flat, t4.numpy().reshape(-1), w3.numpy(), reduction="none",
                                            label_smoothing=0.1).reshape(2, 2), tt.float64)


def test_nll_loss_weight_vs_numpy():
    rng = np.random.default_rng(12)
    lp = rng.standard_normal((6, 4))
    t = np.array([0, 3, 1, -100, 3, 2])
    w = np.array([0.5, 2.0, 1.5, 0.25])
    rows = np.where(t != -100, -w[np.where(t != -100, t, 0)] * lp[np.arange(6), np.where(t != -100, t, 0)], 0.0)
    den = w[t[t != -100]].sum()
    for reduction, ref in (("none", rows), ("sum", rows.sum()), ("mean", rows.sum() / den)):
        got = F.nll_loss(tt.tensor(lp), tt.tensor(t), weight=tt.tensor(w), reduction=reduction)
        assert_close(got, ref, tt.float64)
    # cross_entropy's fused weighted path agrees with nll_loss(log_softmax) (torch's identity)
    x = tt.tensor(lp)
    assert_close(F.cross_entropy(x, tt.tensor(t), weight=tt.tensor(w)),
                 F.nll_loss(x.log_softmax(1), tt.tensor(t), weight=tt.tensor(w)).numpy(), tt.float64)
    # every target ignored: the weighted mean is 0 / 0, as torch
    assert math.isnan(float(F.cross_entropy(x, tt.full((6,), -100, dtype=tt.int64), weight=tt.tensor(w))))


RNG_CE = np.random.default_rng(13)


def test_cross_entropy_empty_batch_and_spatial():
    x = tt.zeros(0, 4, requires_grad=True)
    loss = F.cross_entropy(x, tt.zeros(0, dtype=tt.int64), reduction="sum")
    assert float(loss) == 0.0
    loss.backward()
    assert x.grad.shape == (0, 4)
    assert math.isnan(float(F.cross_entropy(tt.zeros(0, 4), tt.zeros(0, dtype=tt.int64))))  # mean of nothing
    rng = np.random.default_rng(5)
    xn = rng.standard_normal((2, 3, 2, 2))
    tn = rng.integers(0, 3, size=(2, 2, 2))
    got = F.cross_entropy(tt.tensor(xn), tt.tensor(tn), reduction="none")
    flat = xn.transpose(0, 2, 3, 1).reshape(-1, 3)
    assert_close(got, ce_ref(flat, tn.reshape(-1))[0].reshape(2, 2, 2), tt.float32)


def test_cross_entropy_errors_before_any_kernel():
    x = tt.randn(3, 4)
    with pytest.raises(IndexError, match="Target 4 is out of bounds"):
        F.cross_entropy(x, tt.tensor([0, 4, 1]))
    with pytest.raises(IndexError, match="Target -2 is out of bounds"):
        F.cross_entropy(x, tt.tensor([0, -2, 1]))
    with pytest.raises(ValueError, match=r"Expected input batch_size \(3\) to match target batch_size \(2\)"):
        F.cross_entropy(x, tt.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="expected scalar type Long but found bool"):
        F.cross_entropy(x, tt.tensor([True, False, True]))
    with pytest.raises(ValueError, match="bogus is not a valid value for reduction"):
        F.cross_entropy(x, tt.tensor([0, 1, 2]), reduction="bogus")
    with pytest.raises(TypeError, match="argument 'target' must be Tensor"):
        F.cross_entropy(x, [0, 1, 2])
    with pytest.raises(RuntimeError, match="expected a floating point input"):
        F.cross_entropy(tt.tensor([[1, 2]]), tt.tensor([0]))
    t = tt.tensor([0, 1, 2])
    for ls in (1.5, -0.1):
        with pytest.raises(RuntimeError, match=f"label_smoothing must be between 0.0 and 1.0. Got: {ls}"):
            F.cross_entropy(x, t, label_smoothing=ls)
    with pytest.raises(RuntimeError, match=r"defined either for all 4 classes or no classes but got weight tensor "
                                           r"of shape: \[3\]"):
        F.cross_entropy(x, t, weight=tt.ones(3))
    with pytest.raises(RuntimeError, match=r"for all 4 classes .* shape: \[1, 4\]"):
        nn.CrossEntropyLoss(weight=tt.ones(1, 4))(x, t)
    with pytest.raises(RuntimeError, match=r"for all 4 classes .* shape: \[5\]"):
        F.nll_loss(x, t, weight=tt.ones(5))
    with pytest.raises(TypeError, match="argument 'weight' must be Tensor"):
        F.cross_entropy(x, t, weight=[1.0, 1.0, 1.0, 1.0])
    with pytest.raises(RuntimeError, match="floating point 'weight'"):
        F.cross_entropy(x, t, weight=tt.ones(4, dtype=tt.int64))
    with pytest.raises(ValueError, match="dropout probability"):
        nn.Dropout(1.5)


# ----- save / load -------------------------------------------------------------------------
def test_save_load_round_trip_every_dtype(tmp_path):
    sd = {f"t_{d.name}": tt.tensor(np.arange(6).reshape(2, 3).astype(NP[d]), dtype=d) for d in
          FLOAT_DTYPES + [tt.int32, tt.int64, tt.bool]}
    sd["noncontig"] = tt.arange(6.0).reshape(2, 3).t()
    path = os.path.join(tmp_path, "m.safetensors")
    tt.save(sd, path)
    back = tt.load(path)
    assert set(back) == set(sd)
    for k, v in sd.items():
        assert back[k].dtype is v.dtype and back[k].shape == v.shape
        np.testing.assert_array_equal(arr(back[k]) if v.dtype.is_floating_point else back[k].numpy(),
                                      arr(v) if v.dtype.is_floating_point else v.numpy())
    from safetensors.numpy import load_file  # a standard safetensors file
    assert load_file(path)["t_float32"].shape == (2, 3)


def test_save_load_model_state_dict():
    tt.manual_seed(4)
    a, b = Net(), Net()
    buf = io.BytesIO()
    tt.save(a.state_dict(), buf)
    buf.seek(0)
    b.load_state_dict(tt.load(buf))
    x = tt.randn(1, 1, 4, 4)
    np.testing.assert_array_equal(arr(a(x)), arr(b(x)))


def test_save_load_errors(tmp_path):
    # (save takes nested containers, numbers and strings since issue 15; tests/test_serialization.py)
    with pytest.raises(TypeError, match=r"cannot save a value of type object at obj\['a'\]"):
        tt.save({"a": object()}, io.BytesIO())
    with pytest.raises(RuntimeError, match="not a safetensors file"):
        tt.load(io.BytesIO(b"\x05"))


# ----- the digits example ------------------------------------------------------------------
def _example():
    path = os.path.join(os.path.dirname(__file__), "..", "examples", "train_digits.py")
    spec = importlib.util.spec_from_file_location("train_digits", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_digits_short_run_learns():
    pytest.importorskip("sklearn")
    ex = _example()
    tt.manual_seed(0)
    x_train, x_test, y_train, y_test = ex.load_digits()
    model = ex.make_model()
    opt = tt.optim.Adam(model.parameters(), lr=3e-3)
    before = ex.evaluate(model, x_test[:120], y_test[:120])
    losses = []
    for b in range(8):
        xb = tt.from_numpy(np.ascontiguousarray(x_train[b * 32:(b + 1) * 32]))
        loss = F.cross_entropy(model(xb), tt.from_numpy(y_train[b * 32:(b + 1) * 32]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < losses[0]
    assert ex.evaluate(model, x_test[:120], y_test[:120]) > before


@pytest.mark.slow
def test_digits_example_reaches_95_percent():
    pytest.importorskip("sklearn")
    acc, seconds = _example().train(quiet=True)
    assert acc >= 0.95, f"test accuracy {acc:.3f} after {seconds:.0f}s"


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_vs_numpy(reduction):
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal((3, 5)).astype(np.float32)
    d = (a.astype(np.float64) - b.astype(np.float64)) ** 2
    ref = {"mean": d.mean(), "sum": d.sum(), "none": d}[reduction]
    out = nn.functional.mse_loss(tt.from_numpy(a), tt.from_numpy(b).T.contiguous().T, reduction=reduction)
    assert_close(out, ref, tt.float32)
    with pytest.raises(ValueError, match="reduction"):
        nn.functional.mse_loss(tt.from_numpy(a), tt.from_numpy(b), reduction="avg")
