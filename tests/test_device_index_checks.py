"""Bounds of index tensors in device memory are checked by the kernels that read them
(``runtime/device_asserts.py``, ``core/ops/index.py: device_check``), as torch's device-side assert
does: no indexing op waits for the device, a bad index touches no memory (the simulator faults on
any access out of bounds, so a missing mask would end a test with IllegalAddress, not IndexError),
and the IndexError, in torch's words, is raised at the next synchronisation. Host index tensors
keep the host check before any kernel: tests/test_index.py, test_embedding.py, test_scatter.py.
"""
from __future__ import annotations

import numpy as np
import pytest

import tritensor as tt
import tritensor.nn.functional as F
from tritensor import nn
from tritensor.runtime import mode

pytestmark = pytest.mark.skipif(not mode.GPU, reason="index tensors in device memory need a (simulated) GPU")
sim_only = pytest.mark.skipif(not mode.SIM, reason="counts driver calls: the simulated device's counters")


def D(v, **kw):
    return tt.tensor(v, device="cuda", **kw)


def _x():
    return tt.zeros(3, 4, device="cuda")


# (op with a bad device index, torch's message). Every index named is out of range, so nothing is
# written: the target stays zeros.
CASES = {
    "getitem": (lambda x: x[D([0, 5])], "index 5 is out of bounds for dimension 0 with size 3"),
    "getitem_negative": (lambda x: x[:, D([0, -5])], "index -5 is out of bounds for dimension 1 with size 4"),
    "setitem": (lambda x: x.__setitem__((D([2, 1]), D([4, 4])), 1.0),
                "index 4 is out of bounds for dimension 1 with size 4"),
    "index_select": (lambda x: tt.index_select(x, 0, D([-1])),
                     r"index_select\(\): index -1 is out of bounds for dimension 0 with size 3"),
    "gather": (lambda x: x.gather(1, D([[4]])), "index 4 is out of bounds for dimension 1 with size 4"),
    "scatter_add_": (lambda x: x.scatter_add_(0, D([[3]]), tt.ones(1, 1, device="cuda")),
                     "index 3 is out of bounds for dimension 0 with size 3"),
    "index_add_": (lambda x: x.index_add_(0, D([3]), tt.ones(1, 4, device="cuda")),
                   r"index_add_\(\): index 3 is out of bounds for dimension 0 with size 3"),
    "index_put_": (lambda x: x.index_put_((D([7]),), tt.ones(4, device="cuda"), accumulate=True),
                   "index 7 is out of bounds for dimension 0 with size 3"),
    "scatter_": (lambda x: x.scatter_(1, D([[4]]), 1.0), r"scatter_\(\): index 4 is out of bounds for dimension 1"),
    "scatter_reduce_": (lambda x: x.scatter_reduce_(0, D([[3]]), tt.ones(1, 1, device="cuda"), "amax"),
                        r"scatter_reduce_\(\): index 3 is out of bounds for dimension 0 with size 3"),
    "index_fill_": (lambda x: x.index_fill_(1, D([-5]), 1.0), "index -5 is out of bounds for dimension 1 with size 4"),
    "index_copy_": (lambda x: x.index_copy_(0, D([3]), tt.ones(1, 4, device="cuda")),
                    r"index_copy_\(\): index 3 is out of bounds for dimension 0 with size 3"),
    "embedding": (lambda x: F.embedding(D([1, 3]), x), "index out of range in self"),
    "embedding_negative": (lambda x: F.embedding(D([[-1]]), x), "index out of range in self"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_bad_device_index_is_raised_at_the_next_sync_and_touches_nothing(name):
    op, message = CASES[name]
    x = _x()
    op(x)  # queued: no host sync, so nothing raised here
    with pytest.raises(IndexError, match=message):
        x.sum().item()  # the next sync reports it (whatever op it is)
    assert x.sum().item() == 0  # nothing was written, and the flag was cleared by the report
    tt.cuda.synchronize()


@pytest.mark.parametrize("sync", ["item", "cpu", "cuda.synchronize", "stream.synchronize"])
def test_every_sync_point_reports_it_once(sync):
    w = tt.ones(5, 2, device="cuda")
    out = F.embedding(D([0, 5]), w)
    do = {"item": lambda: out.sum().item(), "cpu": lambda: out.cpu(),
          "cuda.synchronize": tt.cuda.synchronize,
          "stream.synchronize": lambda: tt.cuda.current_stream().synchronize()}[sync]
    with pytest.raises(IndexError, match="index out of range in self"):
        do()
    do()  # reported once: the flag is clear again
    # The good lane was looked up; the bad one read nothing and came out as zeros.
    np.testing.assert_array_equal(out.detach().cpu().numpy(), [[1, 1], [0, 0]])


def test_the_index_reported_is_the_host_checks_and_the_first_failing_op_wins():
    x = _x()
    x[D([7, -9, 5])]  # the largest too-large index, as the host check reports it
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 0 with size 3"):
        tt.cuda.synchronize()
    x[D([-9, 1, -4])]  # none too large: the smallest negative one
    with pytest.raises(IndexError, match="index -9 is out of bounds for dimension 0 with size 3"):
        tt.cuda.synchronize()
    i6, i4 = D([[6]]), D([4])  # (made first: a copy to the device waits for it, and would report)
    x.gather(1, i6)  # two failures before a sync: the first one queued is reported
    tt.index_select(x, 0, i4)
    with pytest.raises(IndexError, match="index 6 is out of bounds for dimension 1 with size 4"):
        tt.cuda.synchronize()
    tt.cuda.synchronize()


def test_in_range_device_indices_match_the_host_path():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    x, i = tt.tensor(a, device="cuda"), np.array([3, 0, -1, 3])
    np.testing.assert_array_equal(x[D(i)].cpu().numpy(), a[i])
    np.testing.assert_array_equal(tt.index_select(x, 1, D([5, 0])).cpu().numpy(), a[:, [5, 0]])
    np.testing.assert_array_equal(x.gather(1, D([[5], [0], [1], [2]])).cpu().numpy(), a[[0, 1, 2, 3], [5, 0, 1, 2]][:, None])
    np.testing.assert_array_equal(F.embedding(D([[3, 1]], dtype=tt.int32), x).cpu().numpy(), a[[[3, 1]]])
    tt.cuda.synchronize()


def test_host_index_tensors_still_raise_in_the_op():
    x = _x()
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 3"):
        x[tt.tensor([0, 5], device="cpu")]
    with pytest.raises(IndexError, match="index 9 is out of bounds for dimension 1 with size 4"):
        x[:, [1, 9]]  # a list: its values are on the host already
    tt.cuda.synchronize()


@sim_only
def test_in_range_device_indexing_makes_no_host_copy_and_no_sync():
    from tritensor.runtime import sim

    w = tt.randn(100, 16, device="cuda")
    emb = nn.Embedding(100, 16).cuda()
    idx = D([[1, 2, 3], [4, 5, 99]])
    i1 = D([0, 3, 9])
    for _ in range(2):  # the second time: every kernel loaded, the flag made
        with sim.counting() as c_emb:
            emb(idx)
        with sim.counting() as c_sel:
            w.index_select(0, i1)
        with sim.counting() as c_get:
            w[i1]
        with sim.counting() as c_gather:
            w.gather(1, i1.reshape(3, 1))
    assert dict(c_emb) == {"launch": 1}  # one gather kernel, no host copy of the indices
    assert dict(c_sel) == {"launch": 1}
    for c in (c_get, c_gather):
        assert "dtoh" not in c and "sync" not in c, dict(c)
    # The flag is read in the wait the host makes anyway: one more small copy, no more waits.
    with sim.counting() as c:
        w.sum().item()
    assert c["dtoh"] == 2 and c["sync"] == 1, dict(c)
    with sim.counting() as c:  # nothing checked since the last read: nothing to read
        w.sum().item()
    assert c["dtoh"] == 1 and c["sync"] == 1, dict(c)


def test_a_captured_embedding_replays_and_reports_a_bad_index_after_replay():
    tt.manual_seed(0)
    emb = nn.Embedding(16, 8).cuda()
    idx = D([[1, 2], [3, 15]])
    s = tt.cuda.Stream()
    with tt.cuda.stream(s):
        for _ in range(3):  # warm up: kernels loaded, the device's error flag made
            emb(idx)
    tt.cuda.synchronize()
    g = tt.cuda.CUDAGraph()
    with tt.no_grad():
        with tt.cuda.graph(g):
            out = emb(idx)
    w = emb.weight.detach().cpu().numpy()
    for rows in ([[0, 5], [7, 15]], [[4, 4], [1, 0]]):
        idx.copy_(D(rows))
        g.replay()
        np.testing.assert_array_equal(out.cpu().numpy(), w[np.array(rows)])
    idx.copy_(D([[0, 16], [2, 3]]))
    g.replay()  # the replayed kernel sets the flag; the next sync reports it
    with pytest.raises(IndexError, match="index out of range in self"):
        tt.cuda.synchronize()
    idx.copy_(D([[3, 2], [1, 0]]))
    g.replay()
    np.testing.assert_array_equal(out.cpu().numpy(), w[[[3, 2], [1, 0]]])
