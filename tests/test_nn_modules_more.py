"""The nn layers over the functions of test_nn_more/test_nn_functional_layers: torch 2.13's reprs
(strings recorded from torch), each module's forward against its float64 NumPy definition,
padding layers against np.pad, BatchNorm's bias=False and BatchNorm3d, InstanceNorm's running
statistics, nn.Buffer, ParameterDict, Unflatten, EmbeddingBag, the legacy loss flags."""
import warnings

import numpy as np
import pytest

import tritensor as tt
from tritensor import nn
from tritensor.autograd import gradcheck
from tolerances import FLOAT_DTYPES, NP, assert_close

RNG = np.random.default_rng(11)

REPRS = [  # (module, torch 2.13's repr)
    (lambda: nn.ReLU6(), "ReLU6()"), (lambda: nn.ReLU6(True), "ReLU6(inplace=True)"),
    (lambda: nn.PReLU(), "PReLU(num_parameters=1)"), (lambda: nn.PReLU(3, 0.1), "PReLU(num_parameters=3)"),
    (lambda: nn.Hardtanh(), "Hardtanh(min_val=-1.0, max_val=1.0)"),
    (lambda: nn.Hardtanh(-2, 3, True), "Hardtanh(min_val=-2, max_val=3, inplace=True)"),
    (lambda: nn.SELU(True), "SELU(inplace=True)"), (lambda: nn.CELU(), "CELU(alpha=1.0)"),
    (lambda: nn.Hardsigmoid(), "Hardsigmoid()"), (lambda: nn.Hardshrink(), "Hardshrink(0.5)"),
    (lambda: nn.Softshrink(), "Softshrink(0.5)"), (lambda: nn.Tanhshrink(), "Tanhshrink()"),
    (lambda: nn.Softsign(), "Softsign()"), (lambda: nn.LogSigmoid(), "LogSigmoid()"),
    (lambda: nn.Threshold(0.1, 20), "Threshold(threshold=0.1, value=20)"), (lambda: nn.GLU(), "GLU(dim=-1)"),
    (lambda: nn.AlphaDropout(), "AlphaDropout(p=0.5, inplace=False)"),
    (lambda: nn.Dropout1d(), "Dropout1d(p=0.5, inplace=False)"),
    (lambda: nn.Dropout2d(0.2), "Dropout2d(p=0.2, inplace=False)"),
    (lambda: nn.HuberLoss(), "HuberLoss()"), (lambda: nn.TripletMarginLoss(), "TripletMarginLoss()"),
    (lambda: nn.GaussianNLLLoss(), "GaussianNLLLoss()"),
    (lambda: nn.InstanceNorm1d(3), "InstanceNorm1d(3, eps=1e-05, momentum=0.1, affine=False, bias=False, "
                                   "track_running_stats=False)"),
    (lambda: nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
     "InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)"),
    (lambda: nn.AdaptiveMaxPool1d(3), "AdaptiveMaxPool1d(output_size=3)"),
    (lambda: nn.AdaptiveMaxPool2d((2, None), True), "AdaptiveMaxPool2d(output_size=(2, None))"),
    (lambda: nn.AdaptiveAvgPool1d(4), "AdaptiveAvgPool1d(output_size=4)"),
    (lambda: nn.ZeroPad1d(2), "ZeroPad1d((2, 2))"), (lambda: nn.ZeroPad2d((1, 2, 3, 4)), "ZeroPad2d((1, 2, 3, 4))"),
    (lambda: nn.ConstantPad1d(2, 3.5), "ConstantPad1d(padding=(2, 2), value=3.5)"),
    (lambda: nn.ConstantPad2d(1, 0.), "ConstantPad2d(padding=(1, 1, 1, 1), value=0.0)"),
    (lambda: nn.ReflectionPad1d(2), "ReflectionPad1d((2, 2))"),
    (lambda: nn.ReflectionPad2d(1), "ReflectionPad2d((1, 1, 1, 1))"),
    (lambda: nn.ReplicationPad1d((1, 2)), "ReplicationPad1d((1, 2))"),
    (lambda: nn.ReplicationPad2d(2), "ReplicationPad2d((2, 2, 2, 2))"),
    (lambda: nn.Fold((4, 5), (2, 2)), "Fold(output_size=(4, 5), kernel_size=(2, 2), dilation=1, padding=0, stride=1)"),
    (lambda: nn.Unflatten(1, (2, 3)), "Unflatten(dim=1, unflattened_size=(2, 3))"),
    (lambda: nn.Unflatten(1, [2, 3]), "Unflatten(dim=1, unflattened_size=[2, 3])"),
    (lambda: nn.EmbeddingBag(10, 3), "EmbeddingBag(10, 3, mode='mean')"),
    (lambda: nn.EmbeddingBag(10, 3, mode="max", padding_idx=0), "EmbeddingBag(10, 3, mode='max', padding_idx=0)"),
    (lambda: nn.UpsamplingNearest2d(scale_factor=2), "UpsamplingNearest2d(scale_factor=2.0, mode='nearest')"),
    (lambda: nn.UpsamplingBilinear2d(size=(3, 4)), "UpsamplingBilinear2d(size=(3, 4), mode='bilinear')"),
    (lambda: nn.BatchNorm1d(3, bias=False),
     "BatchNorm1d(3, eps=1e-05, momentum=0.1, affine=True, bias=False, track_running_stats=True)"),
    (lambda: nn.BatchNorm2d(3, affine=False),
     "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=False, bias=False, track_running_stats=True)"),
    (lambda: nn.BatchNorm3d(4), "BatchNorm3d(4, eps=1e-05, momentum=0.1, affine=True, bias=True, "
                                "track_running_stats=True)"),
    (lambda: nn.Conv3d(2, 3, 2), "Conv3d(2, 3, kernel_size=(2, 2, 2), stride=(1, 1, 1))"),
    (lambda: nn.Conv3d(4, 6, (3, 1, 2), padding=1, groups=2, bias=False),
     "Conv3d(4, 6, kernel_size=(3, 1, 2), stride=(1, 1, 1), padding=(1, 1, 1), groups=2, bias=False)"),
    (lambda: nn.MaxPool3d(2), "MaxPool3d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"),
    (lambda: nn.AvgPool3d(2), "AvgPool3d(kernel_size=2, stride=2, padding=0)"),
]


@pytest.mark.parametrize("make,want", REPRS, ids=[r[1].split("(")[0] + str(i) for i, r in enumerate(REPRS)])
def test_reprs_as_torch(make, want):
    assert repr(make()) == want


def _x(shape, dtype=tt.float64):
    a = RNG.uniform(-3, 3, size=shape)
    return tt.tensor(a.astype(NP[dtype])), a.astype(NP[dtype]).astype(np.float64)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_activation_modules(dtype):
    x, a = _x((2, 3, 4), dtype)
    cases = [(nn.ReLU6(), np.clip(a, 0, 6)), (nn.Hardtanh(-2.0, 2.5), np.clip(a, -2, 2.5)),
             (nn.Hardshrink(1.0), np.where(np.abs(a) > 1, a, 0)), (nn.Softsign(), a / (1 + np.abs(a))),
             (nn.Threshold(0.5, -1.0), np.where(a > 0.5, a, -1.0)),
             (nn.GLU(-1), a[..., :2] / (1 + np.exp(-a[..., 2:])))]
    for m, want in cases:
        assert_close(m(x), want, dtype, "rounded_terms", k=2)


def test_prelu_module_learns_per_channel():
    m = nn.PReLU(3, 0.25).double()  # 0.25: exact in the fp32 the weight is made in
    x, a = _x((2, 3, 4))
    assert_close(m(x).detach(), np.where(a > 0, a, 0.25 * a), tt.float64)
    assert gradcheck(lambda w, t: tt.nn.functional.prelu(t, w), (m.weight, tt.tensor(a, requires_grad=True)),
                     fast_mode=True)
    assert list(m.state_dict()) == ["weight"]


PADS = [(nn.ZeroPad1d((1, 2)), 3, ((0, 0), (0, 0), (1, 2)), "constant"),
        (nn.ConstantPad2d((1, 0, 2, 1), 2.5), 4, ((0, 0), (0, 0), (2, 1), (1, 0)), "constant"),
        (nn.ZeroPad2d(1), 4, ((0, 0), (0, 0), (1, 1), (1, 1)), "constant"),
        (nn.ConstantPad1d(2, -1.0), 3, ((0, 0), (0, 0), (2, 2)), "constant"),
        (nn.ReflectionPad1d((2, 1)), 3, ((0, 0), (0, 0), (2, 1)), "reflect"),
        (nn.ReflectionPad2d((1, 2, 2, 1)), 4, ((0, 0), (0, 0), (2, 1), (1, 2)), "reflect"),
        (nn.ReplicationPad1d(3), 3, ((0, 0), (0, 0), (3, 3)), "edge"),
        (nn.ReplicationPad2d((0, 2, 1, 3)), 4, ((0, 0), (0, 0), (1, 3), (0, 2)), "edge")]


@pytest.mark.parametrize("m,nd,widths,mode", PADS, ids=[repr(p[0]) for p in PADS])
def test_padding_layers_against_np_pad(m, nd, widths, mode):
    x, a = _x((2, 3, 4, 5)[:nd])
    kw = {"constant_values": m.value} if mode == "constant" else {}
    assert_close(m(x), np.pad(a, widths, mode, **kw), tt.float64, "exact")
    assert_close(m(x.transpose(-1, -2).contiguous().transpose(-1, -2)), np.pad(a, widths, mode, **kw), tt.float64,
                 "exact")


def test_circular_pad_is_wrap():
    x, a = _x((1, 2, 5))
    assert_close(tt.nn.functional.pad(x, (2, 3), mode="circular"), np.pad(a, ((0, 0), (0, 0), (2, 3)), "wrap"),
                 tt.float64, "exact")


def _bn_ref(a, w, b, axes, eps=1e-5):
    mean, var = a.mean(axes, keepdims=True), a.var(axes, keepdims=True)
    shape = [1] * a.ndim
    shape[1] = -1
    out = (a - mean) / np.sqrt(var + eps) * w.reshape(shape)
    return out + b.reshape(shape) if b is not None else out


def test_batchnorm_bias_false_and_batchnorm3d():
    m = nn.BatchNorm1d(3, bias=False).double()
    assert m.bias is None and list(m.state_dict()) == ["weight", "running_mean", "running_var",
                                                       "num_batches_tracked"]
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    with tt.no_grad():
        m.weight.copy_(tt.tensor([0.5, 2.0, -1.0], dtype=tt.float64))
    x, a = _x((4, 3, 5))
    assert_close(m(x).detach(), _bn_ref(a, np.array([0.5, 2.0, -1.0]), None, (0, 2)), tt.float64)
    m3 = nn.BatchNorm3d(2).double()
    x, a = _x((2, 2, 3, 2, 2))
    assert_close(m3(x).detach(), _bn_ref(a, np.ones(2), np.zeros(2), (0, 2, 3, 4)), tt.float64)
    assert_close(m3.running_mean, 0.1 * a.mean((0, 2, 3, 4)), tt.float64)
    with pytest.raises(ValueError, match="expected 5D input \\(got 4D input\\)"):
        m3(tt.zeros(2, 2, 3, 3))


def test_instance_norm_modules():
    m = nn.InstanceNorm2d(3, affine=True, track_running_stats=True).double()
    x, a = _x((2, 3, 4, 5))
    assert_close(m(x).detach(), _bn_ref(a, np.ones(3), np.zeros(3), (2, 3)), tt.float64)
    assert_close(m.running_mean, 0.1 * a.mean((2, 3)).mean(0), tt.float64)
    assert int(m.num_batches_tracked.item()) == 0  # torch's instance norm never counts
    m.eval()
    rm, rv = m.running_mean.cpu().numpy(), m.running_var.cpu().numpy()
    assert_close(m(x).detach(), (a - rm.reshape(1, 3, 1, 1)) / np.sqrt(rv.reshape(1, 3, 1, 1) + 1e-5), tt.float64)
    one = nn.InstanceNorm1d(3).double()
    x1, a1 = _x((3, 6))
    assert_close(one(x1), _bn_ref(a1[None], np.ones(3), np.zeros(3), (2,))[0], tt.float64)  # unbatched
    assert one.running_mean is None and list(one.state_dict()) == []
    with pytest.raises(ValueError, match="expected 2D or 3D input \\(got 4D input\\)"):
        one(tt.zeros(1, 3, 2, 2))
    with pytest.raises(ValueError, match="expected input's size at dim=1 to match num_features \\(3\\)"):
        nn.InstanceNorm1d(3, affine=True)(tt.zeros(2, 4, 5))
    with pytest.warns(UserWarning, match="does not match num_features"):
        nn.InstanceNorm1d(3)(tt.zeros(2, 4, 5))


def test_dropout_modules_train_and_eval():
    x = tt.ones(4, 6, 5)
    for m in (nn.Dropout1d(0.5), nn.Dropout2d(0.5), nn.AlphaDropout(0.5)):
        m.eval()
        assert m(x) is x
        m.train()
        assert not np.array_equal(m(x).cpu().numpy(), x.cpu().numpy())
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 2"):
        nn.Dropout2d(2)


def test_buffer_registers_as_a_buffer():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Buffer(tt.zeros(2))
            self.b = nn.Buffer(tt.ones(3), persistent=False)
            self.w = nn.Parameter(tt.zeros(1))

    m = M()
    assert list(m.state_dict()) == ["w", "a"] or list(m.state_dict()) == ["a", "w"]
    assert set(m.state_dict()) == {"a", "w"} and {n for n, _ in m.named_buffers()} == {"a", "b"}
    assert [n for n, _ in m.named_parameters()] == ["w"]
    assert m.b.tolist() == [1.0, 1.0, 1.0] and isinstance(m.a, nn.Buffer) and m.a.persistent
    m.b = nn.Buffer(tt.zeros(3))  # re-registered persistent
    assert set(m.state_dict()) == {"a", "b", "w"}
    base = tt.zeros(2)
    buf = nn.Buffer(base)
    buf.add_(1)
    assert base.tolist() == [1.0, 1.0]  # shares the data's memory, as torch's detach
    with pytest.raises(TypeError, match="Buffer: data must be a Tensor, got list"):
        nn.Buffer([1.0])


def test_parameter_dict():
    d = nn.ParameterDict({"a": nn.Parameter(tt.zeros(2)), "b": tt.ones(3)})
    assert isinstance(d["b"], nn.Parameter) and d["b"].requires_grad
    assert list(d) == ["a", "b"] and len(d) == 2 and "a" in d and list(d.keys()) == ["a", "b"]
    d["c"] = tt.zeros(1)
    d.update([("d", tt.zeros(4))])
    assert [n for n, _ in d.named_parameters()] == ["a", "b", "c", "d"]
    assert d.pop("c").shape == (1,) and "c" not in d
    assert d.get("zz") is None and d.setdefault("e", tt.zeros(2)).shape == (2,)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.ParameterDict({"x": tt.zeros(2)})
    assert list(M().state_dict()) == ["p.x"]
    assert repr(nn.ParameterDict({"a": tt.zeros(2)})).startswith("ParameterDict(")
    with pytest.raises(TypeError, match="ParametersDict.update should be called with an iterable"):
        d.update(3)


def test_unflatten_fold_upsampling_embeddingbag_modules():
    x = tt.arange(24.0).reshape(2, 12)
    assert tuple(nn.Unflatten(1, (3, 4))(x).shape) == (2, 3, 4)
    assert tuple(nn.Unflatten(-1, (2, -1))(x).shape) == (2, 2, 6)
    with pytest.raises(TypeError, match="unflattened_size must be a tuple of ints, but found type int"):
        nn.Unflatten(1, 5)
    c, cols = _x((1, 4, 9))
    f = nn.Fold((4, 4), 2, padding=1, stride=2)
    assert_close(f(c), tt.nn.functional.fold(c, (4, 4), 2, padding=1, stride=2).cpu().numpy(), tt.float64, "exact")
    img, a = _x((1, 1, 2, 3))
    assert_close(nn.UpsamplingNearest2d(scale_factor=2)(img), a.repeat(2, 2).repeat(2, 3), tt.float64, "exact")
    bil = nn.UpsamplingBilinear2d(size=(3, 5))(img).cpu().numpy()
    assert_close(tt.tensor(bil[..., ::2, ::2]), a, tt.float64)  # align_corners=True: the corners stay
    bag = nn.EmbeddingBag(5, 2, mode="sum", padding_idx=1).double()
    assert bag.weight[1].tolist() == [0.0, 0.0]
    w = bag.weight.detach().cpu().numpy()
    out = bag(tt.tensor([0, 1, 4, 2]), tt.tensor([0, 2])).detach()
    assert_close(out, np.stack([w[0] + w[1], w[4] + w[2]]), tt.float64)
    pre = nn.EmbeddingBag.from_pretrained(tt.tensor(w), mode="max")
    assert not pre.weight.requires_grad
    assert_close(pre(tt.tensor([[0, 4]])), np.maximum(w[0], w[4])[None], tt.float64, "exact")


def test_loss_modules_and_legacy_flags():
    x, a = _x((3, 4))
    t, b = _x((3, 4))
    assert_close(nn.HuberLoss(reduction="sum", delta=0.5)(x, t),
                 np.where(np.abs(a - b) < 0.5, 0.5 * (a - b) ** 2, 0.5 * (np.abs(a - b) - 0.25)).sum(), tt.float64)
    with pytest.warns(UserWarning, match="reduction='none'"):
        m = nn.SoftMarginLoss(reduce=False)
    assert m.reduction == "none" and tuple(m(x, t).shape) == (3, 4)
    with pytest.warns(UserWarning, match="reduction='sum'"):
        assert nn.L1Loss(size_average=False).reduction == "sum"
    with pytest.raises(ValueError, match="TripletMarginLoss: expected margin to be greater than 0, got 0 instead"):
        nn.TripletMarginLoss(margin=0)
    v = tt.ones(3, 4, dtype=tt.float64)
    assert_close(nn.GaussianNLLLoss(reduction="none")(x, t, v), 0.5 * (a - b) ** 2, tt.float64)
    y = tt.tensor([1.0, -1.0, 1.0], dtype=tt.float64)
    got = nn.CosineEmbeddingLoss(margin=0.1)(x, t, y)
    cos = (a * b).sum(1) / np.sqrt(((a * a).sum(1) + 1e-12) * ((b * b).sum(1) + 1e-12))
    assert_close(got, np.where([True, False, True], 1 - cos, np.maximum(cos - 0.1, 0)).mean(), tt.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.MarginRankingLoss(0.2)(x[:, 0], t[:, 0], y)
    lab = tt.tensor((RNG.uniform(size=(3, 4)) > 0.5).astype(np.float64))
    wts = tt.tensor([1.0, 2.0, 0.5, 1.0], dtype=tt.float64)
    ml = nn.MultiLabelSoftMarginLoss(weight=wts)
    assert list(ml.state_dict()) == ["weight"]
    assert tuple(ml(x, lab).shape) == ()
    assert tuple(nn.PoissonNLLLoss(reduction="none")(x, t.abs()).shape) == (3, 4)
    assert tuple(nn.TripletMarginLoss(reduction="none")(x, t, x * 2).shape) == (3,)
