"""send/recv from any rank (``src=None``): matching, returned ranks, and the failure modes.

One process group per test function; the workers live in tests/comm_helpers.py."""

import pytest
from comm_helpers import (any_source, any_source_mismatch, any_source_sender_dies, any_source_timeout,
                          assert_all_ok, free_port, run_world)

import tritensor
import tritensor.comm as dist

PG_TIMEOUT = 20.0


@pytest.mark.timeout(90)
@pytest.mark.parametrize("world", [2, 3])
def test_any_source_receives(world):
    assert assert_all_ok(run_world(world, any_source, timeout=80, pg_timeout=PG_TIMEOUT)) == {r: True for r in range(world)}


@pytest.mark.timeout(60)
def test_any_source_timeout_names_any_rank():
    results = run_world(2, any_source_timeout, timeout=50, pg_timeout=PG_TIMEOUT)
    msg, elapsed = results[0][1]
    assert "DistTimeoutError" in msg and "timed out" in msg and "from any rank" in msg, msg
    assert 0.9 < elapsed < 5.0, elapsed
    msg1, elapsed1 = results[1][1]  # rank 0 told rank 1 why, in band: no second timeout
    assert "rank 0" in msg1 and "from any rank" in msg1 and elapsed1 < PG_TIMEOUT / 2, msg1


@pytest.mark.timeout(60)
def test_any_source_size_mismatch_raises_on_both_sides():
    results = run_world(3, any_source_mismatch, timeout=50, pg_timeout=PG_TIMEOUT)
    msgs = {r: v[1] for r, v in results.items()}
    assert all(v[0] == "ok" for v in results.values()), results
    assert "DistBackendError" in msgs[0] and "sizes or dtypes disagree" in msgs[0], msgs[0]
    assert "rank 1" in msgs[0] and "5 elements" in msgs[0], msgs[0]  # names the sender and its size
    assert "rank 0" in msgs[1] and "sizes or dtypes disagree" in msgs[1], msgs[1]  # the sender learns why
    assert "DistBackendError" in msgs[2], msgs[2]


@pytest.mark.timeout(60)
def test_any_source_sender_dies():
    results = run_world(3, any_source_sender_dies, timeout=50, pg_timeout=PG_TIMEOUT)
    assert results[2][0] == "died" and results[1] == ("ok", "sent"), results
    msg, elapsed = results[0][1]
    assert "DistBackendError" in msg and "rank 2" in msg and "from any rank" in msg, msg
    assert elapsed < PG_TIMEOUT / 2, (elapsed, msg)  # failed fast, not by timing out


def test_any_source_needs_another_rank(monkeypatch):
    monkeypatch.setenv("TRITENSOR_COMM_SECRET", "x")
    dist.init_process_group("tcp", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1, timeout=10)
    try:
        with pytest.raises(ValueError, match="src=None"):
            dist.recv(tritensor.zeros(3))
        with pytest.raises(RuntimeError, match="only defined for receives"):
            dist.all_reduce(tritensor.ones(2), async_op=True)._source_rank()
    finally:
        dist.destroy_process_group()
