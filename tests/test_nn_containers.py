"""nn containers (ModuleList, ModuleDict, ParameterList, Identity) and the activation modules
(Softmax LogSoftmax Tanh Sigmoid SiLU LeakyReLU ELU Softplus Mish Hardswish) against float64
NumPy over fp32/fp16/bf16, odd/empty/non-contiguous inputs, with gradchecks in float64."""
import math

import numpy as np
import pytest

import tritensor as tt
from tritensor import nn
from tritensor.nn import functional as F

from tolerances import NP, assert_close


# ----- containers ----------------------------------------------------------------------------
def test_module_list_registers_indexes_and_state_dict_keys():
    ml = nn.ModuleList([nn.Linear(2, 3), nn.Linear(3, 1)])
    ml.append(nn.Tanh())
    ml += [nn.Identity()]
    assert len(ml) == 4 and isinstance(ml[-1], nn.Identity) and isinstance(ml[2], nn.Tanh)
    assert list(ml.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert len(list(ml.parameters())) == 4
    assert isinstance(ml[1:3], nn.ModuleList) and len(ml[1:3]) == 2
    ml.insert(0, nn.Sigmoid())
    assert list(ml.state_dict())[:2] == ["1.weight", "1.bias"]
    del ml[0]
    assert list(ml.state_dict())[:2] == ["0.weight", "0.bias"]  # renumbered, as torch
    popped = ml.pop(-1)
    assert isinstance(popped, nn.Identity) and len(ml) == 3
    with pytest.raises(IndexError, match="index 7 is out of range"):
        ml[7]
    with pytest.raises(TypeError, match="should be called with an iterable"):
        ml.extend(nn.Linear(1, 1))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    net = Net()
    assert list(net.state_dict())[0] == "layers.0.weight"
    assert tuple(net(tt.ones(2, 4)).shape) == (2, 4)


def test_module_dict_and_parameter_list():
    md = nn.ModuleDict({"enc": nn.Linear(2, 2), "act": nn.ReLU()})
    md["dec"] = nn.Linear(2, 1)
    assert list(md.keys()) == ["enc", "act", "dec"] and "act" in md and len(md) == 3
    assert list(md.state_dict()) == ["enc.weight", "enc.bias", "dec.weight", "dec.bias"]
    md.update([("extra", nn.Identity())])
    assert list(md) == ["enc", "act", "dec", "extra"]
    assert isinstance(md.pop("extra"), nn.Identity)
    with pytest.raises(KeyError, match='contain "."'):
        md["a.b"] = nn.ReLU()
    with pytest.raises(TypeError, match="module name should be a string"):
        md[1] = nn.ReLU()
    with pytest.raises(ValueError, match="element #0 should be an iterable of length 2"):
        md.update([nn.ReLU()])

    pl = nn.ParameterList([tt.zeros(2), nn.Parameter(tt.ones(3))])
    pl.append(tt.ones(1, 2))
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in pl)
    assert [tuple(p.shape) for p in pl] == [(2,), (3,), (1, 2)]

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.ps = pl

    assert list(Holder().state_dict()) == ["ps.0", "ps.1", "ps.2"]
    assert len(list(Holder().parameters())) == 3


def test_identity_passes_input_and_ignores_arguments():
    x = tt.randn(3, 2)
    assert nn.Identity(54, unused="x")(x) is x


# ----- activations ---------------------------------------------------------------------------
def _softplus(x, beta=1.0, threshold=20.0):
    return np.where(x * beta > threshold, x, np.log1p(np.exp(np.minimum(x * beta, threshold))) / beta)


def _softmax(x, d):
    e = np.exp(x - x.max(axis=d, keepdims=True))
    return e / e.sum(axis=d, keepdims=True)


REFS = {
    "Tanh": (nn.Tanh(), np.tanh),
    "Sigmoid": (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    "SiLU": (nn.SiLU(), lambda x: x / (1 + np.exp(-x))),
    "LeakyReLU": (nn.LeakyReLU(0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    "ELU": (nn.ELU(alpha=1.5), lambda x: np.where(x > 0, x, 1.5 * np.expm1(np.minimum(x, 0)))),
    "Softplus": (nn.Softplus(beta=2.0, threshold=3.0), lambda x: _softplus(x, 2.0, 3.0)),
    "Mish": (nn.Mish(), lambda x: x * np.tanh(_softplus(x))),
    "Hardswish": (nn.Hardswish(), lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "Softmax": (nn.Softmax(dim=1), lambda x: _softmax(x, 1)),
    "LogSoftmax": (nn.LogSoftmax(dim=-1), lambda x: np.log(_softmax(x, -1))),
}


@pytest.mark.parametrize("name", sorted(REFS))
@pytest.mark.parametrize("dtype", [tt.float32, tt.float16, tt.bfloat16])
def test_activation_modules_against_float64(name, dtype):
    mod, ref = REFS[name]
    rng = np.random.default_rng(0)
    base = (rng.standard_normal((5, 7)) * 4).astype(NP[dtype])
    base[0, :3] = [25.0, -25.0, 0.0]
    x = tt.tensor(base)
    expected = ref(base.astype(np.float64))
    assert_close(mod(x), expected, dtype)
    # non-contiguous input (a transposed view): same values
    xt = tt.tensor(np.ascontiguousarray(base.T)).T
    assert not xt.is_contiguous()
    assert_close(mod(xt), expected, dtype)
    # empty and odd shapes
    assert tuple(mod(tt.zeros(0, 3, dtype=dtype)).shape) == (0, 3)


@pytest.mark.parametrize("name", ["LeakyReLU", "ELU", "Softplus", "Mish", "Hardswish", "SiLU"])
def test_activation_gradcheck(name):
    mod, _ = REFS[name]
    rng = np.random.default_rng(1)
    v = rng.standard_normal((3, 4)) * 3
    v[np.abs(v + 3) < 0.05] += 0.2  # away from hardswish's kinks, where the derivative jumps
    v[np.abs(v - 3) < 0.05] += 0.2
    v[np.abs(v) < 0.05] += 0.2
    x = tt.tensor(v).requires_grad_()
    assert tt.autograd.gradcheck(mod, (x,))
    assert tt.autograd.gradgradcheck(mod, (x,))


def test_inplace_activations_write_the_input():
    x = tt.tensor([-2.0, 1.0])
    y = F.leaky_relu(x, 0.5, inplace=True)
    assert y is x and x.tolist() == [-1.0, 1.0]
    x = tt.tensor([-1.0, 2.0])
    nn.ELU(inplace=True)(x)
    assert_close(x, [math.expm1(-1.0), 2.0], tt.float32)


def test_softmax_implicit_dim_warns_like_torch():
    x = tt.randn(2, 3)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        y = nn.Softmax()(x)
    assert_close(y, _softmax(x.numpy().astype(np.float64), 1), tt.float32)
    assert repr(nn.Softmax(dim=1)) == "Softmax(dim=1)"
    assert repr(nn.LeakyReLU(0.1)) == "LeakyReLU(negative_slope=0.1)"


def test_activation_errors_name_the_argument():
    with pytest.raises(TypeError, match="argument 'input'"):
        F.elu([1.0])
    with pytest.raises(TypeError, match="argument 'negative_slope'"):
        F.leaky_relu(tt.ones(2), "0.1")
    with pytest.raises(RuntimeError, match="floating point"):
        F.softplus(tt.ones(2, dtype=tt.int64))
