"""nn: Module bookkeeping, layers against NumPy, PyTorch's default initialisations, safetensors
save/load, and the digits example. The loss ops themselves are checked in tests/test_loss.py."""
import importlib.util
import io
import math
import os

import numpy as np
import pytest

import tritensor as tt
from tritensor import nn
from tritensor.nn import functional as F

from tolerances import FLOAT_DTYPES, NP, assert_close


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
    assert_close(lin(x).detach(), xn @ arr(lin.weight).T + arr(lin.bias), tt.float32, "layer")
    assert_close(nn.ReLU()(x).detach(), np.maximum(xn, 0), tt.float32)
    from math import erf
    gelu = np.vectorize(lambda v: 0.5 * v * (1 + erf(v / math.sqrt(2))))
    assert_close(nn.GELU()(x).detach(), gelu(xn), tt.float32)
    assert_close(nn.Flatten()(x).detach(), xn.reshape(2, -1), tt.float32)
    assert_close(nn.MaxPool2d(2)(x).detach(), xn.reshape(2, 3, 2, 2, 2, 2).max(axis=(3, 5)), tt.float32)
    assert_close(nn.AvgPool2d(2)(x).detach(), xn.reshape(2, 3, 2, 2, 2, 2).mean(axis=(3, 5)), tt.float32)
    ln = nn.LayerNorm(4)
    ref = (xn - xn.mean(-1, keepdims=True)) / np.sqrt(xn.var(-1, keepdims=True) + 1e-5)
    assert_close(ln(x).detach(), ref, tt.float32, "layer")
    conv = nn.Conv2d(3, 2, 3, padding=1)
    pad = np.pad(xn, ((0, 0), (0, 0), (1, 1), (1, 1)))
    w = arr(conv.weight)
    ref = np.zeros((2, 2, 4, 4))
    for i in range(4):
        for j in range(4):
            ref[:, :, i, j] = np.einsum("nchw,ochw->no", pad[:, :, i:i + 3, j:j + 3], w)
    assert_close(conv(x).detach(), ref + arr(conv.bias)[None, :, None, None], tt.float32, "layer")
    assert_close(nn.MSELoss()(x, tt.zeros_like(x)), (xn ** 2).mean(), tt.float32)
    assert_close(nn.MSELoss(reduction="sum")(x, tt.zeros_like(x)), (xn ** 2).sum(), tt.float32)  # rtol 1e-5 is the default


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
    # (save takes any picklable object, as torch.save; what cannot be pickled fails as in torch)
    with pytest.raises(TypeError, match="cannot pickle 'generator' object"):
        tt.save({"a": (i for i in range(2))}, io.BytesIO())
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
    """The example's pieces as its loop uses them: a DataLoader over a TensorDataset, the model with
    BatchNorm2d, clip_grad_norm_ and Adam; a few batches lower the loss and raise the accuracy."""
    pytest.importorskip("sklearn")
    from tritensor.utils.data import DataLoader, TensorDataset
    ex = _example()
    tt.manual_seed(0)
    x_train, x_test, y_train, y_test = ex.load_digits()
    train = DataLoader(TensorDataset(tt.from_numpy(x_train[:256]), tt.from_numpy(y_train[:256])), batch_size=32)
    test = DataLoader(TensorDataset(tt.from_numpy(x_test[:120]), tt.from_numpy(y_test[:120])), batch_size=64)
    model = ex.make_model()
    device = str(next(model.parameters()).device.type)  # the default device; batches move there, as in the example
    opt = tt.optim.Adam(model.parameters(), lr=3e-3)
    before = ex.evaluate(model, test, device)
    losses = []
    for xb, yb in train:
        xb, yb = xb.to(device), yb.to(device)
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss))
    assert len(losses) == 8 and losses[-1] < losses[0]
    assert ex.evaluate(model, test, device) > before
    assert model.training  # evaluate() puts the model back in training mode


def test_digits_progress_line_and_comm_hooks(capsys):
    """Without tqdm the example draws its own progress line (the loss through Tensor.__format__);
    --hook names map to the ddp_comm_hooks functions."""
    from tritensor.comm.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
    ex = _example()
    bar = ex.PlainProgress([1, 2, 3], desc="epoch 1")
    seen = []
    for i in bar:
        seen.append(i)
        bar.set_postfix_str(f"loss {tt.tensor(0.5 / i):.4f}")
    err = capsys.readouterr().err
    assert seen == [1, 2, 3] and "\repoch 1 [" in err and "3/3 loss 0.1667" in err and err.endswith("\n")
    assert list(ex.PlainProgress([1], desc="epoch 1", disable=True)) == [1] and capsys.readouterr().err == ""
    assert ex.comm_hook("allreduce") == (None, default_hooks.allreduce_hook)
    assert ex.comm_hook("fp16") == (None, default_hooks.fp16_compress_hook)
    assert ex.comm_hook("bf16") == (None, default_hooks.bf16_compress_hook)
    state, hook = ex.comm_hook("powersgd")
    assert hook is powerSGD_hook.powerSGD_hook and isinstance(state, powerSGD_hook.PowerSGDState)
    with pytest.raises(SystemExit):
        ex.parse_args(["--hook", "int8"])


@pytest.mark.slow
@pytest.mark.timeout(1800)  # 4 epochs in the interpreter: ~300 s on a quiet 2-core machine, 2-3x that loaded
def test_digits_example_reaches_95_percent(tmp_path, capsys):
    """The default flags reach 95%; --resume from the last epoch's checkpoint trains no further and
    evaluates the same model (weights and BatchNorm statistics restored)."""
    pytest.importorskip("sklearn")
    ex = _example()
    ck = str(tmp_path / "ck.safetensors")
    _, acc, seconds = ex.train(ex.parse_args(["--quiet", "--checkpoint", ck]))
    assert acc >= 0.95, f"test accuracy {acc:.3f} after {seconds:.0f}s"
    saved = tt.load(ck)
    assert saved["epoch"] == 4 and saved["scheduler"]["last_epoch"] == 4
    _, acc2, _ = ex.train(ex.parse_args(["--quiet", "--checkpoint", ck, "--resume"]))
    assert "resumed from" in capsys.readouterr().out and acc2 == acc
