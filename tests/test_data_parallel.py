"""nn.DataParallel and nn.parallel's functional pieces (data_parallel, replicate, scatter, gather,
parallel_apply), as torch 2.13's.

In CPU mode (no GPU) DataParallel calls its module as it is and the functional pieces refuse with
torch's errors. On the simulated device (two devices: ``TRITENSOR_DEVICE=sim``) a two-device
forward and backward must equal the single-device module's: outputs and parameter gradients, to
the ``accumulate`` profile (the batch is split, so reductions over it sum in another order).
"""
from __future__ import annotations

import collections
import importlib
import warnings

import numpy as np
import pytest

import tritensor as tt
import tritensor.nn as nn
from tritensor.nn.parallel import data_parallel, gather, parallel_apply, replicate, scatter
from tritensor.runtime import mode
from tolerances import assert_close

two_devices = pytest.mark.skipif(not mode.GPU or tt.cuda.device_count() < 2,
                                 reason="needs two CUDA devices (TRITENSOR_DEVICE=sim has two)")
cpu_only = pytest.mark.skipif(mode.GPU, reason="CPU mode's answer")
F32 = tt.float32


def _net(seed=0):
    tt.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Linear(5, 2))


def _np(t):
    return t.detach().cpu().numpy()


# ----- names, in torch's places ---------------------------------------------------------------
def test_names_in_torchs_places():
    # the package's functions shadow their modules' names on it, as in torch: take the modules by path
    dp_mod, pa_mod, rep_mod, sg_mod = (importlib.import_module(f"tritensor.nn.parallel.{m}") for m in
                                       ("data_parallel", "parallel_apply", "replicate", "scatter_gather"))

    assert nn.DataParallel is nn.parallel.DataParallel is dp_mod.DataParallel
    assert nn.DataParallel.__module__ == "tritensor.nn.parallel.data_parallel"
    assert data_parallel is dp_mod.data_parallel and replicate is rep_mod.replicate
    assert scatter is sg_mod.scatter and gather is sg_mod.gather and parallel_apply is pa_mod.parallel_apply
    assert set(nn.parallel.__all__) == {"DataParallel", "DistributedDataParallel", "data_parallel", "gather",
                                        "parallel_apply", "replicate", "scatter"}


def test_state_dict_keys_are_prefixed_with_module():
    net = _net()
    dp = nn.DataParallel(net.to(tt.get_default_device()))
    assert list(dp.state_dict()) == ["module." + k for k in net.state_dict()]
    assert dp.module is net
    fresh = nn.DataParallel(_net(1).to(tt.get_default_device()))
    fresh.load_state_dict(dp.state_dict())
    assert_close(_np(fresh.module[0].weight), _np(net[0].weight), F32, profile="exact")


# ----- CPU mode -----------------------------------------------------------------------------------
@cpu_only
def test_cpu_mode_calls_the_module_directly():
    net = _net()
    dp = nn.DataParallel(net, device_ids=[0, 1], output_device=1)
    assert dp.device_ids == []
    x = tt.randn(4, 3)
    y = dp(x)
    assert_close(_np(y), _np(net(x)), F32, profile="exact")
    y.sum().backward()
    assert net[0].weight.grad is not None and net[0].weight.grad.shape == (5, 3)


@cpu_only
def test_cpu_mode_functional_pieces_refuse():
    net, x = _net(), tt.randn(4, 3)
    with pytest.raises(RuntimeError, match="device type could not be determined"):
        data_parallel(net, x)
    with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is available"):
        parallel_apply([net], [x])
    with pytest.raises(AssertionError, match="Gather function not implemented for CPU tensors"):
        gather([x, x], 0)
    with pytest.raises(AssertionError, match="Broadcast function not implemented for CPU tensors"):
        replicate(net, [0, 1])
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        scatter(x, [0, 1])


# ----- two devices (the simulated device) -------------------------------------------------------
def _compare(dp_out, ref_out, k):
    assert dp_out.device == ref_out.device
    assert_close(_np(dp_out), _np(ref_out), F32, profile="accumulate", k=k)


@two_devices
@pytest.mark.parametrize("batch", [5, 1])
def test_two_devices_equal_one(batch):
    """Forward and backward over two devices (batch 5: 3 + 2 rows; batch 1: one replica only) against
    the module on one device; BatchNorm's running statistics update from replica 0 only, as torch's."""
    ref, net = _net().cuda(), _net().cuda()
    x = tt.randn(batch, 3, device="cuda:0")
    dp = nn.DataParallel(net)
    assert dp.device_ids == [0, 1] and dp.output_device == 0
    if batch == 1:
        ref.eval(), net.eval()  # BatchNorm needs more than one value per channel to train
        expected = ref(x)
    else:  # each replica's BatchNorm normalizes its own rows, as torch's: the reference runs both pieces
        expected = tt.cat([ref(x[:3]), ref(x[3:])])
    out = dp(x)
    _compare(out, expected, batch)
    (out * out).sum().backward()
    (expected * expected).sum().backward()
    for (name, p), q in zip(net.named_parameters(), ref.parameters()):
        assert p.grad.device == tt.device("cuda:0"), name
        assert_close(_np(p.grad), _np(q.grad), F32, profile="accumulate", k=batch, err_msg=name)
    if batch == 5:  # replica 0 saw rows 0..2 and updated the module's own buffers
        bn = nn.BatchNorm1d(5).cuda()
        with tt.no_grad():
            bn(ref[0](x[:3]))
        assert_close(_np(net[1].running_mean), _np(bn.running_mean), F32, profile="accumulate", k=3)
        assert_close(_np(net[1].running_var), _np(bn.running_var), F32, profile="accumulate", k=3)
        assert int(net[1].num_batches_tracked.item()) == 1


class _DictNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, inputs, pair, *, scale, flag):
        assert flag == "keep"  # non-tensor arguments reach every replica as they are
        out = self.lin(inputs["a"]) * scale + pair[0] - pair[1]
        return {"out": out, "pair": (out.sum(1), None)}


def _dict_net_run():
    """_DictNet on a batch of 4, through DataParallel and alone: (net, the input a, got, want)."""
    tt.manual_seed(3)
    net = _DictNet().cuda()
    a, p0, p1, scale = (tt.randn(4, s, device="cuda:0") for s in (3, 2, 2, 1))
    a.requires_grad_()
    args = ({"a": a}, (p0, p1))
    got = nn.DataParallel(net)(*args, scale=scale, flag="keep")
    return net, a, got, net(*args, scale=scale, flag="keep")


@two_devices
def test_dict_tuple_and_keyword_inputs():
    _, _, got, want = _dict_net_run()
    assert set(got) == {"out", "pair"} and got["pair"][1] is None
    _compare(got["out"], want["out"], 3)
    _compare(got["pair"][0], want["pair"][0], 3)


@two_devices
def test_dict_tuple_and_keyword_inputs_backward():
    """Run first in a process this caught an ordering fault of cross-device copies (a strided source
    made dense after the destination's context was made current, so on the wrong device's stream):
    NaN gradients from replica 1."""
    net, a, got, want = _dict_net_run()
    got["out"].sum().backward()  # through gather and scatter back to the input on device 0
    g_w, g_a = _np(net.lin.weight.grad), _np(a.grad)
    net.lin.weight.grad = a.grad = None
    want["out"].sum().backward()
    assert_close(g_w, _np(net.lin.weight.grad), F32, profile="accumulate", k=4)
    assert_close(g_a, _np(a.grad), F32, profile="accumulate", k=2)


@two_devices
def test_scatter_and_gather():
    x = tt.arange(10, dtype=F32, device="cuda:0").view(5, 2)
    a, b = scatter(x, [0, 1])
    assert a.device == tt.device("cuda:0") and b.device == tt.device("cuda:1")
    assert_close(_np(a), _np(x)[:3], F32, profile="exact")
    assert_close(_np(b), _np(x)[3:], F32, profile="exact")
    cols = scatter(x, [0, 1], dim=1)
    assert [c.shape for c in cols] == [(5, 1), (5, 1)]
    assert len(scatter(x[:1], [0, 1])) == 1  # fewer rows than devices: fewer pieces, as torch.chunk
    Pair = collections.namedtuple("Pair", "x n")
    parts = scatter(Pair(x, 7), [0, 1])
    assert [type(p) for p in parts] == [Pair, Pair] and [p.n for p in parts] == [7, 7]
    assert scatter("same", [0, 1]) == ["same", "same"]
    back = gather([a, b], 0)
    assert back.device == tt.device("cuda:0")
    assert_close(_np(back), _np(x), F32, profile="exact")
    on_host = gather([a, b], -1)
    assert on_host.device == tt.device("cpu")
    assert_close(_np(gather([a, b], "cpu")), _np(x), F32, profile="exact")
    assert gather(cols, 1, dim=1).device == tt.device("cuda:1")
    with pytest.warns(UserWarning, match="all input tensors were scalars; will instead unsqueeze"):
        v = gather([a.sum(), b.sum()], 0)
    assert v.shape == (2,)
    assert_close(_np(v), [_np(a).sum(), _np(b).sum()], F32, profile="exact")
    with pytest.raises(ValueError, match="All dicts must have the same number of keys"):
        gather([{"a": a}, {"a": b, "b": b}], 0)
    with pytest.raises(AssertionError, match="Gather function not implemented for CPU tensors"):
        gather([a, b.cpu()], 0)


@two_devices
def test_replicate_shares_on_the_source_device_and_copies_elsewhere():
    net = _net().cuda()
    r0, r1 = replicate(net, [0, 1])
    assert r0 is not net and type(r0) is type(net)
    assert r0[0].weight.data_ptr() == net[0].weight.data_ptr()  # an alias on device 0
    assert r0[1].running_mean.data_ptr() == net[1].running_mean.data_ptr()
    assert r1[0].weight.device == tt.device("cuda:1") and r1[1].running_var.device == tt.device("cuda:1")
    assert_close(_np(r1[0].weight), _np(net[0].weight), F32, profile="exact")
    assert r1[0].weight.grad_fn is not None and not r1[0].weight.is_leaf
    assert list(r1.parameters()) == [] and len(list(r1.buffers())) == 3
    d0, d1 = replicate(net, [0, 1], detach=True)
    assert d1[0].weight.grad_fn is None and not d1[0].weight.requires_grad
    assert replicate(net, []) == []
    # the gradients of both replicas reach the original
    (r0[0].weight.sum() + (2 * r1[0].weight.sum()).to("cuda:0")).backward()
    assert_close(_np(net[0].weight.grad), np.full((5, 3), 3.0), F32, profile="exact")


@two_devices
def test_parallel_apply_runs_each_replica_on_its_device():
    seen = {}

    class Probe(nn.Module):
        def forward(self, x, *, add=0):
            seen[x.get_device()] = (tt.cuda.current_device(), tt.cuda.current_stream().device.index,
                                    tt.is_grad_enabled())
            return x + add

    x0, x1 = tt.ones(2, device="cuda:0"), tt.ones(2, device="cuda:1")
    with tt.no_grad():
        out = parallel_apply([Probe(), Probe()], [x0, (x1,)], [{"add": 1}, {}], [0, 1])
    assert seen == {0: (0, 0, False), 1: (1, 1, False)}
    assert_close(_np(out[0]), [2.0, 2.0], F32, profile="exact")
    out = parallel_apply([Probe(), Probe()], [x0, x1])  # devices from the inputs
    assert [o.device.index for o in out] == [0, 1] and seen[1] == (1, 1, True)
    with pytest.raises(AssertionError, match="The number of modules 2 is not equal to the number of inputs 1"):
        parallel_apply([Probe(), Probe()], [x0])
    with pytest.raises(AssertionError, match="number of kwargs_tup 1"):
        parallel_apply([Probe(), Probe()], [x0, x1], [{}])
    with pytest.raises(AssertionError, match="number of devices 1"):
        parallel_apply([Probe(), Probe()], [x0, x1], None, [0])


@two_devices
def test_exceptions_in_a_replica_name_it_and_its_device():
    class Fails(nn.Module):
        def forward(self, x):
            if x.get_device() == 1:
                raise KeyError("bad key")
            return x

    x = tt.ones(4, 1, device="cuda:0")
    with pytest.raises(KeyError, match="Caught KeyError in replica 1 on device 1"):
        nn.DataParallel(Fails())(x)


@two_devices
def test_errors_and_warnings():
    net = _net().cuda()
    net[3].to("cuda:1")
    with pytest.raises(RuntimeError, match=r"module must have its parameters and buffers on device cuda:0 "
                                           r"\(device_ids\[0\]\) but found one of them on device: cuda:1"):
        nn.DataParallel(net)(tt.randn(4, 3, device="cuda:0"))
    with pytest.raises(RuntimeError, match="on device cuda:0 .device_ids.0.. but found"):
        data_parallel(net, tt.randn(4, 3, device="cuda:0"))
    with pytest.raises(ValueError, match="out of range"):
        nn.DataParallel(_net().cuda(), device_ids=[0, 5])
    with pytest.raises(ValueError, match="expected a cuda device"):
        nn.DataParallel(_net().cuda(), device_ids=["cpu"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the two simulated devices are alike: no imbalance warning
        nn.DataParallel(_net().cuda())


@two_devices
def test_imbalance_warning(monkeypatch):
    from tritensor.runtime import cuda as rcuda

    real = rcuda.get_device_properties

    def smaller(dev=None):
        p = real(dev)
        return p._replace(total_memory=p.total_memory // 2) if rcuda._index(dev) == 1 else p

    monkeypatch.setattr(rcuda, "get_device_properties", smaller)
    with pytest.warns(UserWarning, match="There is an imbalance between your GPUs. You may want to exclude GPU 1 "
                                         "which\n    has less than 75% of the memory or cores of GPU 0"):
        nn.DataParallel(_net().cuda())


@two_devices
def test_single_device_and_functional_form():
    net, ref = _net().cuda(), _net().cuda()
    x = tt.randn(4, 3, device="cuda:0")
    one = nn.DataParallel(net, device_ids=[1])
    assert net[0].weight.device == tt.device("cuda:1")  # moved to its one device, as torch
    _compare(one(x.to("cuda:1")).to("cuda:0"), ref(x), 1)
    net.to("cuda:0")
    y = data_parallel(net, x, device_ids=[0, 1], output_device=1)
    assert y.device == tt.device("cuda:1")
    _compare(y.to("cuda:0"), tt.cat([ref(x[:2]), ref(x[2:])]), 2)  # BatchNorm per replica
    z = data_parallel(net, (x,), output_device=-1)
    assert z.device == tt.device("cpu")
    with tt.no_grad():  # replicas are detached copies then
        w = nn.DataParallel(net)(x)
    assert w.grad_fn is None
