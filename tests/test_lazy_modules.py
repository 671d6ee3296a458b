"""The lazy modules (nn/modules/lazy.py and their classes in linear.py, conv.py, batchnorm.py,
instancenorm.py) with torch's LazyModuleMixin semantics: placeholders until the first forward,
which materializes them from the input, initialises them as the eager layer would and turns the
module into its eager class; state_dict before that holds the placeholders; load_state_dict
materializes them to the loaded shapes; an optimizer built after a dry run trains the module.
Reprs and state_dict keys as recorded from torch 2.13."""
import copy
import pickle

import numpy as np
import pytest

import tritensor as tt
import tritensor.nn as nn
import tritensor.nn.functional as F
from tolerances import assert_close

RNG = np.random.default_rng(5)


def test_lazy_linear_materializes_on_first_forward():
    m = nn.LazyLinear(3)
    assert repr(m) == "LazyLinear(in_features=0, out_features=3, bias=True)"
    assert m.has_uninitialized_params() and isinstance(m.weight, nn.UninitializedParameter)
    sd = m.state_dict()
    assert list(sd) == ["weight", "bias"] and all(isinstance(v, nn.UninitializedParameter) for v in sd.values())
    assert repr(sd["weight"]) == "<UninitializedParameter>"
    x = tt.tensor(RNG.standard_normal((2, 5)), dtype=tt.float32)
    w_before = m.weight
    y = m(x)
    assert type(m) is nn.Linear and repr(m) == "Linear(in_features=5, out_features=3, bias=True)"
    assert m.weight is w_before and type(m.weight) is nn.Parameter and m.weight.shape == (3, 5)
    assert not hasattr(m, "has_uninitialized_params") and m.weight.requires_grad
    bound = 1 / np.sqrt(5)  # Linear's initialisation: U(-1/sqrt(in), 1/sqrt(in)) for both
    assert np.abs(m.weight.detach().numpy()).max() <= bound and np.abs(m.bias.detach().numpy()).max() <= bound
    assert_close(y.detach(), x.numpy() @ m.weight.detach().numpy().T + m.bias.detach().numpy(), tt.float32)
    assert nn.LazyLinear(3, bias=False).state_dict().keys() == {"weight"}
    with pytest.raises(TypeError, match="initialize_parameters"):
        nn.LazyLinear(3)(x, x)


def test_optimizer_after_a_dry_run_trains_the_module():
    model = nn.Sequential(nn.LazyLinear(4), nn.ReLU(), nn.LazyLinear(1))
    x = tt.tensor(RNG.standard_normal((8, 3)), dtype=tt.float32)
    target = tt.tensor(RNG.standard_normal((8, 1)), dtype=tt.float32)
    model(x)  # the dry run
    assert [type(m).__name__ for m in model] == ["Linear", "ReLU", "Linear"]
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = F.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_state_dict_round_trips_and_loads_into_a_lazy_module():
    src = nn.Sequential(nn.Linear(4, 3))
    lazy = nn.Sequential(nn.LazyLinear(3))
    lazy.load_state_dict(src.state_dict())  # materialized to the loaded shapes, still lazy
    m = lazy[0]
    assert type(m) is nn.LazyLinear and not m.has_uninitialized_params() and m.weight.shape == (3, 4)
    assert_close(m.weight.detach(), src[0].weight.detach().numpy(), tt.float32, "exact")
    x = tt.ones(2, 4)
    assert_close(m(x).detach(), src(x).detach().numpy(), tt.float32, "exact")  # the forward keeps the loaded values
    assert type(m) is nn.Linear
    with pytest.raises(RuntimeError, match="size mismatch for 0.weight"):
        nn.Sequential(nn.Linear(2, 3)).load_state_dict(lazy.state_dict())
    # placeholders survive copies, pickles and dtype moves
    c = copy.deepcopy(nn.LazyLinear(2))
    assert isinstance(c.weight, nn.UninitializedParameter) and c.has_uninitialized_params()
    assert repr(pickle.loads(pickle.dumps(nn.UninitializedParameter()))) == "<UninitializedParameter>"
    d = nn.LazyLinear(3).double()
    assert isinstance(d.weight, nn.UninitializedParameter) and d.weight.dtype is tt.float64
    d(tt.ones(2, 4, dtype=tt.float64))
    assert d.weight.dtype is tt.float64 and d.weight.shape == (3, 4)


@pytest.mark.parametrize("cls, shape, eager, weight_shape", [
    (nn.LazyConv1d, (2, 4, 6), nn.Conv1d, (6, 2, 3)),
    (nn.LazyConv2d, (4, 5, 5), nn.Conv2d, (6, 2, 3, 3)),  # unbatched: channels from dim 0
    (nn.LazyConv3d, (1, 4, 3, 4, 4), nn.Conv3d, (6, 2, 3, 3, 3)),
    (nn.LazyConvTranspose1d, (2, 4, 6), nn.ConvTranspose1d, (4, 3, 3)),
    (nn.LazyConvTranspose2d, (1, 4, 3, 3), nn.ConvTranspose2d, (4, 3, 3, 3)),
    (nn.LazyConvTranspose3d, (1, 4, 2, 2, 2), nn.ConvTranspose3d, (4, 3, 3, 3, 3)),
])
def test_lazy_convolutions(cls, shape, eager, weight_shape):
    m = cls(6, 3, groups=2)
    assert repr(m).startswith(f"{cls.__name__}(0, 6, kernel_size=")
    x = tt.tensor(RNG.standard_normal(shape), dtype=tt.float32)
    y = m(x)
    assert type(m) is eager and m.in_channels == 4 and m.weight.shape == weight_shape and m.bias.shape == (6,)
    same = eager(4, 6, 3, groups=2)
    same.load_state_dict(m.state_dict())
    assert_close(same(x).detach(), y.detach().numpy(), tt.float32, "exact")
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        cls(6, 3, groups=3)(x)
    with pytest.raises(RuntimeError, match=f"to {cls.__name__}, but got input of size"):
        cls(6, 3)(tt.ones(4))


def test_lazy_norms():
    b = nn.LazyBatchNorm2d()
    assert repr(b) == "LazyBatchNorm2d(0, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)"
    sd = b.state_dict()
    assert list(sd) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    assert isinstance(sd["running_mean"], nn.UninitializedBuffer) and repr(sd["running_var"]) == "<UninitializedBuffer>"
    x = tt.tensor(RNG.standard_normal((4, 3, 2, 2)), dtype=tt.float32)
    y = b(x)
    assert type(b) is nn.BatchNorm2d and b.num_features == 3 and type(b.running_mean) is tt.Tensor
    r = x.numpy().astype(np.float64)
    mean, var = r.mean((0, 2, 3)), r.var((0, 2, 3))
    assert_close(y.detach(), (r - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5), tt.float32, "layer")
    assert_close(b.running_mean, 0.1 * mean, tt.float32)  # reset to zeros on materializing, then one update
    assert b.num_batches_tracked.item() == 1
    for cls, eager, shape in ((nn.LazyBatchNorm1d, nn.BatchNorm1d, (4, 3)), (nn.LazyBatchNorm3d, nn.BatchNorm3d,
                                                                              (2, 3, 2, 2, 2))):
        m = cls()
        m(tt.ones(*shape))
        assert type(m) is eager and m.weight.shape == (3,)
    i = nn.LazyInstanceNorm1d(affine=False, track_running_stats=False)
    assert not i.has_uninitialized_params()  # nothing to infer: no parameters, no statistics
    for cls, eager, shape in ((nn.LazyInstanceNorm1d, nn.InstanceNorm1d, (3, 5)),  # unbatched (C, L)
                              (nn.LazyInstanceNorm2d, nn.InstanceNorm2d, (2, 3, 2, 2)),
                              (nn.LazyInstanceNorm3d, nn.InstanceNorm3d, (3, 2, 2, 2))):
        m = cls()
        m(tt.tensor(RNG.standard_normal(shape), dtype=tt.float32))
        assert type(m) is eager and m.num_features == 3 and m.running_mean.shape == (3,)


def test_uninitialized_placeholders():
    p = nn.UninitializedParameter()
    assert p.requires_grad and isinstance(p, nn.Parameter)
    bf = nn.UninitializedBuffer()
    assert not bf.requires_grad and isinstance(bf, tt.Tensor) and not isinstance(bf, nn.Parameter)
    p.materialize((2, 3), dtype=tt.float64)
    assert type(p) is nn.Parameter and p.shape == (2, 3) and p.dtype is tt.float64 and p.requires_grad
    bf.materialize((4,))
    assert type(bf) is tt.Tensor and bf.shape == (4,)
    assert nn.parameter.is_lazy(nn.UninitializedBuffer()) and not nn.parameter.is_lazy(p)
