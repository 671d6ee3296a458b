"""Rank workers of tests/test_sync_batch_norm.py (run by comm_helpers.run_world, which imports them
by name in each rank): one SyncBatchNorm training step on this rank's share of a fixed batch."""
import numpy as np

import tritensor as tt
import tritensor.comm as dist

SIZES = (3, 2, 0)  # samples per rank (rank 2, when there is one, has none)
C = 3


def batch(world: int):
    """The whole batch (N, C, 2), the upstream gradient, weight and bias, float64, as NumPy arrays."""
    rng = np.random.default_rng(7)
    n = sum(SIZES[:world])
    return (rng.standard_normal((n, C, 2)) * 2 + 1, rng.standard_normal((n, C, 2)), rng.standard_normal(C),
            rng.standard_normal(C))


def sync_step(rank, world, momentum):
    x, g, w, b = batch(world)
    lo = sum(SIZES[:rank])
    hi = lo + SIZES[rank]
    m = tt.nn.SyncBatchNorm(C, momentum=momentum, dtype=tt.float64, device="cuda")
    with tt.no_grad():
        m.weight.copy_(tt.tensor(w, dtype=tt.float64))
        m.bias.copy_(tt.tensor(b, dtype=tt.float64))
    xs = tt.tensor(x[lo:hi], dtype=tt.float64, device="cuda").requires_grad_(True)
    out = m(xs)
    out.backward(tt.tensor(g[lo:hi], dtype=tt.float64, device="cuda"))
    try:  # torch's device check: host tensors in a process group are refused
        m(tt.zeros(2, C, dtype=tt.float64, device="cpu"))
        refused = ""
    except ValueError as e:
        refused = str(e)
    # a process group of this rank alone: plain batch norm over its own samples
    own = [dist.new_group([r]) for r in range(world)][rank]
    alone = tt.nn.SyncBatchNorm(C, process_group=own, affine=False, dtype=tt.float64, device="cuda")
    local = alone(xs.detach()) if hi - lo > 1 else None
    # a rank with no samples gets no gradients (None), as torch's
    host = lambda t: None if t is None else t.detach().cpu().numpy()  # noqa: E731
    return (host(out), host(xs.grad), host(m.weight.grad), host(m.bias.grad), host(m.running_mean),
            host(m.running_var), refused, host(local))
