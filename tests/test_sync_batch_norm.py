"""``nn.SyncBatchNorm`` (nn/modules/batchnorm.py; its Function, nn/modules/_functions.py): over 2 and 3
ranks on loopback (workers in sync_batch_norm_helpers.py, ranks holding 3, 2 and 0 samples) its
output, input gradient and running statistics are batch norm's over the concatenated batch, against
float64 NumPy, and the ranks' weight/bias gradients sum to the whole batch's; outside a process
group it is BatchNorm (train and eval, momentum None); ``convert_sync_batchnorm``; torch's checks
and messages.

The ranks run on the simulated device when there is no GPU: torch's SyncBatchNorm refuses host
tensors inside a process group, and so does this one (each rank checks it).
"""
import zlib

import numpy as np
import pytest

import tritensor as tt
import sync_batch_norm_helpers as H
from comm_helpers import assert_all_ok, run_world
from tolerances import assert_close

F64 = tt.float64
EPS = 1e-5


@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def reference(x, g, w, b, momentum):
    """Training batch norm over x (N, C, S), float64: output, input/weight/bias gradients, running stats."""
    mean, var = x.mean((0, 2), keepdims=True), x.var((0, 2), keepdims=True)
    istd = 1 / np.sqrt(var + EPS)
    xhat = (x - mean) * istd
    out = xhat * w[None, :, None] + b[None, :, None]
    n = x.shape[0] * x.shape[2]
    gw, gb = (g * xhat).sum((0, 2)), g.sum((0, 2))
    dx = w[None, :, None] * istd * (g - gb[None, :, None] / n - xhat * gw[None, :, None] / n)
    rm = momentum * mean.reshape(-1)
    rv = (1 - momentum) + momentum * x.var((0, 2), ddof=1)
    return out, dx, gw, gb, rm, rv


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_together_equal_batch_norm_over_the_whole_batch(world, monkeypatch):
    if not tt.cuda.is_available():  # the ranks import tritensor on the simulated device
        monkeypatch.setenv("TRITENSOR_DEVICE", "sim")
    res = assert_all_ok(run_world(world, H.sync_step, 0.1))
    x, g, w, b = H.batch(world)
    out, dx, gw, gb, rm, rv = reference(x, g, w, b, 0.1)
    lo = 0
    for r in range(world):
        hi = lo + H.SIZES[r]
        r_out, r_dx, _, _, r_rm, r_rv, refused, local = res[r]
        assert_close(r_out, out[lo:hi], F64, err_msg=f"rank {r} output")
        if hi > lo:
            assert_close(r_dx, dx[lo:hi], F64, err_msg=f"rank {r} input gradient")
        else:  # no samples: no gradients, as torch's
            assert r_dx is None and res[r][2] is None and res[r][3] is None and r_out.shape == (0, H.C, 2)
        assert_close(r_rm, rm, F64, err_msg=f"rank {r} running_mean")
        assert_close(r_rv, rv, F64, err_msg=f"rank {r} running_var")
        assert refused == "SyncBatchNorm expected input tensor to be on GPU or XPU or privateuseone"
        if hi - lo > 1:  # in a group of its own, the rank's batch alone
            part = x[lo:hi]
            want = (part - part.mean((0, 2), keepdims=True)) / np.sqrt(part.var((0, 2), keepdims=True) + EPS)
            assert_close(local, want, F64, err_msg=f"rank {r} alone")
        lo = hi
    assert_close(sum(res[r][2] for r in range(2)), gw, F64, err_msg="weight gradient")  # ranks 0 and 1 hold the samples
    assert_close(sum(res[r][3] for r in range(2)), gb, F64, err_msg="bias gradient")


@pytest.mark.parametrize("momentum", [0.1, None])
def test_without_a_process_group_it_is_batch_norm(momentum, rng):
    x, g, w, b = rng.standard_normal((4, 3, 5)), rng.standard_normal((4, 3, 5)), rng.standard_normal(3), \
        rng.standard_normal(3)
    sync = tt.nn.SyncBatchNorm(3, momentum=momentum).double()
    with tt.no_grad():
        sync.weight.copy_(tt.tensor(w))
        sync.bias.copy_(tt.tensor(b))
    xt = tt.tensor(x, requires_grad=True)
    out = sync(xt)
    out.backward(tt.tensor(g))
    # momentum None: the cumulative average, whose first step takes the batch's statistics whole
    r_out, r_dx, r_gw, r_gb, r_rm, r_rv = reference(x, g, w, b, 0.1 if momentum else 1.0)
    assert_close(out.detach(), r_out, F64)
    assert_close(xt.grad, r_dx, F64)
    assert_close(sync.weight.grad, r_gw, F64)
    assert_close(sync.bias.grad, r_gb, F64)
    assert_close(sync.running_mean, r_rm, F64)
    assert_close(sync.running_var, r_rv, F64)
    sync.eval()  # the running statistics normalize
    assert_close(sync(tt.tensor(x)).detach(), (x - r_rm[None, :, None]) / np.sqrt(r_rv[None, :, None] + EPS)
                 * w[None, :, None] + b[None, :, None], F64)


def test_convert_sync_batchnorm_shares_parameters_and_buffers():
    net = tt.nn.Sequential(tt.nn.Conv2d(2, 3, 1), tt.nn.BatchNorm2d(3),
                           tt.nn.Sequential(tt.nn.BatchNorm1d(4, affine=False, momentum=None)))
    bn, inner = net[1], net[2][0]
    bn.eval()
    out = tt.nn.SyncBatchNorm.convert_sync_batchnorm(net, process_group="pg")
    assert out is net and type(net[1]) is tt.nn.SyncBatchNorm and type(net[2][0]) is tt.nn.SyncBatchNorm
    s = net[1]
    assert s.weight is bn.weight and s.bias is bn.bias and s.running_mean is bn.running_mean
    assert s.num_batches_tracked is bn.num_batches_tracked and s.training is False and s.process_group == "pg"
    t = net[2][0]
    assert t.weight is None and t.momentum is None and t.running_var is inner.running_var and t.training
    single = tt.nn.SyncBatchNorm.convert_sync_batchnorm(tt.nn.BatchNorm3d(2, bias=False))
    assert type(single) is tt.nn.SyncBatchNorm and single.bias is None
    assert repr(single) == ("SyncBatchNorm(2, eps=1e-05, momentum=0.1, affine=True, bias=False, "
                            "track_running_stats=True)")


def test_errors_are_torch_s(no_launch):
    m = tt.nn.SyncBatchNorm(3)
    with pytest.raises(ValueError, match=r"expected at least 2D input \(got 1D input\)"):
        m(tt.zeros(3))
    with pytest.raises(ValueError, match="SyncBatchNorm number of input channels should be non-zero"):
        tt.nn.SyncBatchNorm(0)(tt.zeros(2, 0))
