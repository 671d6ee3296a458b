"""DistributedDataParallel with 2 and 3 ranks in subprocesses (workers in ddp_helpers.py).

Tolerance: DDP's gradient is the mean of per-shard mean-loss gradients, the reference the
full-batch gradient of one process; in fp32 the two differ only by summation order over at most
12 samples, so rtol=1e-5 and atol=1e-6 (gradients are of order 0.01-1)."""
import numpy as np
import pytest

import ddp_helpers as H
from comm_helpers import assert_all_ok, run_world

RTOL, ATOL = 1e-5, 1e-6


def _close(got: dict, want: dict, rtol=RTOL, atol=ATOL):
    assert got.keys() == want.keys()
    for n in want:
        np.testing.assert_allclose(got[n], want[n], rtol=rtol, atol=atol, err_msg=n)


@pytest.mark.parametrize("kind,world", [("mlp", 2), ("conv", 2), ("mlp", 3)])
def test_grads_equal_full_batch(kind, world):
    res = assert_all_ok(run_world(world, H.ddp_grads, kind))
    ref = H.reference_grads(kind)
    for r, (g, nbuckets, same_init, same_keys, _) in res.items():
        assert same_init, f"rank {r}: parameters were not broadcast from rank 0"
        assert same_keys and nbuckets == 1
        _close(g, ref)
    assert all(np.array_equal(res[0][0][n], res[r][0][n]) for r in res for n in ref)  # bitwise equal across ranks


@pytest.mark.parametrize("grad_view", [False, True])
def test_several_buckets_same_result(grad_view):
    res = assert_all_ok(run_world(2, H.ddp_grads, "mlp", 0.00001, None, grad_view))  # 10 B: one parameter per bucket
    ref = H.reference_grads("mlp")
    for g, nbuckets, *_ in res.values():
        assert nbuckets == 6
        _close(g, ref)


def test_no_sync_accumulates_then_syncs():
    res = assert_all_ok(run_world(2, H.ddp_no_sync))
    ref = H.reference_grads("mlp")
    # two micro-batches of 3 per rank: the synced sum of their mean-loss gradients is twice the
    # full-batch mean gradient; after the first (no_sync) backward the ranks differ.
    assert any(not np.allclose(res[0][0][n], res[1][0][n]) for n in ref)
    for first, final in res.values():
        _close(final, {n: 2 * g for n, g in ref.items()})


def test_find_unused_parameters():
    res = assert_all_ok(run_world(2, H.ddp_unused))
    g0, local0 = res[0]
    g1, local1 = res[1]
    for g in (g0, g1):
        assert g["lin_c.weight"] is None and g["lin_c.bias"] is None  # unused on every rank: untouched
        for n in ("lin_a.weight", "lin_a.bias"):
            np.testing.assert_allclose(g[n], (local0[n] + local1[n]) / 2, rtol=RTOL, atol=ATOL)
        for n in ("lin_b.weight", "lin_b.bias"):  # used by rank 1 only: its gradient over the world
            np.testing.assert_allclose(g[n], local1[n] / 2, rtol=RTOL, atol=ATOL)


def test_misuse_is_named():
    res = assert_all_ok(run_world(2, H.ddp_errors))
    for out in res.values():
        assert "finished reduction in the prior iteration" in out["unfinished"]
        assert "lin_b.weight" in out["unfinished"] and "find_unused_parameters" in out["unfinished"]
        assert "second backward" in out["twice"] and "lin_a." in out["twice"]


def test_shape_mismatch_names_parameter_and_ranks():
    res = assert_all_ok(run_world(2, H.ddp_mismatch))
    for msg in res.values():
        assert "'0.weight'" in msg and "ranks 0 and 1" in msg and "(4, 3)" in msg and "(5, 3)" in msg


def test_bucket_communication_overlaps_backward():
    """Bucket 0 (the last layer) starts communicating before backward has even computed the
    first layer's gradient, the last one of the pass; every bucket starts before backward returns."""
    res = assert_all_ok(run_world(2, H.ddp_overlap))
    for starts, t_last_grad, t_end, nbuckets in res.values():
        assert nbuckets == 4 and sorted(starts) == [0, 1, 2, 3]
        assert starts[0] < t_last_grad, (starts, t_last_grad)
        assert all(t < t_end for t in starts.values())
        assert starts[0] < starts[1] < starts[2] < starts[3]
