"""Collectives on loopback with 1, 2, 3 and 4 processes, CPU tensors (CUDA tensors where a GPU is lent).

One process group per world size runs the whole battery (tests/comm_helpers.py), so the suite
spawns 10 processes in all instead of one world per case."""

import pytest
from comm_helpers import assert_all_ok, collectives_battery, env_init, free_port, run_world

import tritensor
import tritensor.comm as dist

LARGE = 1_000_003  # ~4 MB of fp32, not a multiple of any world size: the chunked ring path


@pytest.mark.timeout(240)
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_battery(world):
    checks = assert_all_ok(run_world(world, collectives_battery, LARGE, timeout=220))
    # every rank ran many exact comparisons (the root of gather runs a few more)
    assert all(c > 200 for c in checks.values()), checks


@pytest.mark.timeout(60)
def test_env_init_method():
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2"}
    results = assert_all_ok(run_world(2, env_init, init=False, timeout=50, env=env,
                                      rank_env=lambda r: {"RANK": str(r)}))
    assert results == {0: ([1.0] * 4, 0, 2), 1: ([1.0] * 4, 1, 2)}


def test_bad_arguments_raise_before_sending(monkeypatch):
    monkeypatch.setenv("TRITENSOR_COMM_SECRET", "x")
    dist.init_process_group("tcp", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1, timeout=10)
    try:
        with pytest.raises(TypeError, match="tensor"):
            dist.all_reduce([1, 2, 3])
        with pytest.raises(ValueError, match="op"):
            dist.all_reduce(tritensor.ones(3), op="sum")
        with pytest.raises(TypeError, match="AVG"):
            dist.all_reduce(tritensor.ones(3, dtype=tritensor.int32), op=dist.ReduceOp.AVG)
        with pytest.raises(ValueError, match="src=3"):
            dist.broadcast(tritensor.ones(3), src=3)
        with pytest.raises(ValueError, match="tensor_list"):
            dist.all_gather([tritensor.ones(3)] * 2, tritensor.ones(3))
        with pytest.raises(ValueError, match="tensor_list"):
            dist.all_gather([tritensor.ones(4)], tritensor.ones(3))
        with pytest.raises(dist.DistError, match="already initialized"):
            dist.init_process_group("tcp", init_method="tcp://127.0.0.1:1", rank=0, world_size=1)
        # nothing was sent, so the group still works; world size 1 is a no-op that completes
        t = tritensor.full((3,), 2.0)
        w = dist.all_reduce(t, async_op=True)
        assert w.is_completed() and w.get_future().value()[0] is t
        assert t.tolist() == [2.0, 2.0, 2.0]
    finally:
        dist.destroy_process_group()
    assert not dist.is_initialized()
    with pytest.raises(dist.DistError, match="not initialized"):
        dist.all_reduce(tritensor.ones(3))
    with pytest.raises(ValueError, match="init_method"):
        dist.init_process_group("tcp", init_method="udp://x:1", rank=0, world_size=1)
    with pytest.raises(ValueError, match="backend"):
        dist.init_process_group("nccl", init_method="tcp://127.0.0.1:1", rank=0, world_size=1)


@pytest.mark.timeout(120)
def test_collectives_accept_tensors_that_require_grad():
    """broadcast/all_reduce of a parameter used to raise "Can't call numpy() on Tensor that
    requires grad", with or without no_grad; torch (gloo) acts on the data."""
    from comm_helpers import tensors_requiring_grad

    out = assert_all_ok(run_world(3, tensors_requiring_grad, timeout=100))
    assert out[0] == out[1] == out[2]  # every rank holds rank 0's parameters


@pytest.mark.timeout(200)
def test_device_tensors_are_staged_and_written_back():
    from comm_helpers import fake_cuda

    # The stand-in device copies run interpreter kernels: on a loaded 2-core machine one staging
    # step took longer than the default 30 s group timeout, so this test gives the group 120 s.
    assert_all_ok(run_world(3, fake_cuda, timeout=180, pg_timeout=120))


@pytest.mark.skipif(not tritensor.cuda.is_available(), reason="needs a GPU")
def test_cuda_tensors():
    from comm_helpers import cuda_battery

    assert_all_ok(run_world(2, cuda_battery, timeout=200))
