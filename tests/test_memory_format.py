"""Memory formats (torch.channels_last): the API, and channels-last flowing through a convnet.

A channels-last tensor keeps its NCHW shape and indexing; only its strides are NHWC. What must
hold: the same values as the contiguous computation, bit for bit (same kernels, same order of
accumulation per element), and the format kept where torch keeps it (conv, batch norm,
elementwise ops, clone/to with preserve_format), so a network converted once stays converted.
"""
import numpy as np
import pytest

import tritensor as tt
import tritensor.nn.functional as F
from tritensor import nn, optim
from tolerances import NP, assert_close
from tritensor.triton_kernels._common import INTERPRET

rng = np.random.default_rng(11)
CL = tt.channels_last


def _cl(t):
    return t.contiguous(memory_format=CL)


def test_the_api():
    x = tt.tensor(np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5))
    c = x.contiguous(memory_format=CL)
    assert c.shape == x.shape and c.stride() == (60, 1, 15, 3)
    assert c.is_contiguous(memory_format=CL) and not c.is_contiguous()
    assert x.is_contiguous() and not x.is_contiguous(memory_format=CL)
    np.testing.assert_array_equal(c.numpy(), x.numpy())
    assert c.contiguous(memory_format=CL) is c and x.contiguous() is x
    assert c.contiguous().stride() == (60, 20, 5, 1)
    assert c.clone().stride() == c.stride() and c.clone(memory_format=tt.contiguous_format).is_contiguous()
    assert x.to(memory_format=CL).stride() == c.stride() and c.to(tt.float16).stride() == c.stride()
    assert tt.ones(2, 1, 3, 3).is_contiguous(memory_format=CL)  # one channel: both layouts at once, as torch
    assert not tt.ones(2, 2, 3, 3).is_contiguous(memory_format=CL)
    assert repr(CL) == "tritensor.channels_last" and isinstance(CL, tt.memory_format)
    with pytest.raises(RuntimeError, match="required rank 4"):
        tt.ones(3, 4).contiguous(memory_format=CL)
    with pytest.raises(RuntimeError, match="memory_format must be"):
        x.is_contiguous(memory_format="nhwc")
    with pytest.raises(TypeError, match="memory_format must be"):
        x.clone(memory_format="nhwc")


@pytest.mark.parametrize("dtype", [tt.float32, tt.float16, tt.bfloat16])
def test_ops_keep_channels_last_and_give_the_same_values(dtype):
    x = tt.tensor(rng.standard_normal((2, 16, 5, 6)).astype(np.float32)).to(dtype)
    w = tt.tensor(rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.1).to(dtype)
    w1 = tt.tensor(rng.standard_normal((8, 16, 1, 1)).astype(np.float32) * 0.1).to(dtype)
    for xx, cl in ((x, False), (_cl(x), True)):
        outs = [xx.relu(), xx * 2 + 1, xx + xx, F.conv2d(xx, w, padding=1), F.conv2d(xx, w1),
                F.conv2d(xx, _cl(w), padding=1)]
        # a channels-last weight makes a conv's output channels-last too, as torch's does
        expected = [cl] * 5 + [True]
        assert [o.is_contiguous(memory_format=CL) and not o.is_contiguous() for o in outs] == expected
        if cl:
            for o, r in zip(outs, ref):
                assert o.numpy().tobytes() == r.numpy().tobytes()
        else:
            ref = outs


def test_batch_norm_keeps_channels_last_forward_and_backward():
    x = tt.tensor(rng.standard_normal((3, 4, 5, 2)).astype(np.float32))
    outs = []
    for xx in (x.clone().requires_grad_(True), _cl(x).requires_grad_(True)):
        bn = nn.BatchNorm2d(4)
        y = bn(xx)
        (y * tt.arange(120, dtype=tt.float32).reshape(3, 4, 5, 2)).sum().backward()
        outs.append((y, xx.grad, bn.running_mean))
    (y0, g0, r0), (y1, g1, r1) = outs
    assert y1.is_contiguous(memory_format=CL) and g1.is_contiguous(memory_format=CL)
    for a, b in ((y0, y1), (g0, g1), (r0, r1)):
        assert a.detach().numpy().tobytes() == b.detach().numpy().tobytes()


def test_a_channels_last_model_trains_as_the_contiguous_one(monkeypatch):
    """Module.to(memory_format=channels_last) lays out its 4-D weights NHWC; the optimizer's states
    follow each parameter's layout; every step equals the contiguous model's: bit for bit where the
    kernels' tile configurations are fixed (the interpreter), within fp32 accumulation error on a GPU,
    whose autotuner picks each layout's conv tiles on their own and so sums in another order (the H100
    run saw the last bits differ; cuDNN's algorithm choice per layout does the same to torch).
    TF32 is off: with cudnn.allow_tf32 (on by default, as torch's) each layout's convs round their
    operands to 10-bit mantissas in a different order, and two steps of training carry that 1e-3
    difference into every weight (the H200 run saw 3.5e-3); this test is about layouts, not TF32.
    The first conv has no bias, as a conv before BatchNorm has in real models: BatchNorm removes any
    per-channel shift, so that bias's true gradient is zero and its computed one is rounding noise,
    which Adam divides by its own size into steps of +-lr (the H100 run saw 5.6e-3 between layouts)."""
    monkeypatch.setattr(tt.backends.cudnn, "allow_tf32", False)
    img = tt.tensor(rng.standard_normal((4, 3, 8, 8)).astype(np.float32))
    target = tt.tensor(np.array([1, 0, 3, 2]))
    results = []
    for fmt in (tt.contiguous_format, CL):
        tt.manual_seed(3)
        model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                              nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 4, 1),
                              nn.AdaptiveAvgPool2d(1), nn.Flatten())
        model.to(memory_format=fmt)
        if fmt is CL:
            assert model[3].weight.is_contiguous(memory_format=CL) and model[1].weight.is_contiguous()
        opts = [optim.Adam(list(model.parameters())[:4], lr=0.01),  # conv, norm, second conv
                optim.SGD(list(model.parameters())[4:], lr=0.1, momentum=0.9)]
        x = img.contiguous(memory_format=fmt)
        for _ in range(2):
            for o in opts:
                o.zero_grad()
            loss = F.cross_entropy(model(x), target)
            loss.backward()
            for o in opts:
                o.step()
        if fmt is CL:
            assert opts[0].state[model[0].weight]["exp_avg"].is_contiguous(memory_format=CL)
        results.append([loss.detach()] + [p.detach().contiguous() for p in model.parameters()])
    for a, b in zip(*results):
        if INTERPRET:
            assert a.numpy().tobytes() == b.numpy().tobytes()
        else:  # the largest conv sums 16 * 3 * 3 products per output
            assert_close(a, b.numpy().astype(np.float64), tt.float32, "accumulate", k=144)


def test_optimizer_refuses_a_strided_parameter():
    p = nn.Parameter(tt.zeros(4, 6)[:, ::2])
    with pytest.raises(ValueError, match="dense"):
        optim.SGD([p], lr=0.1)
