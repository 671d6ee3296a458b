"""Faults: a rank killed mid-collective, disagreeing sizes and dtypes, a rank that never comes."""

import pytest
from comm_helpers import die_mid_collective, late_rank, mismatched, run_world

PG_TIMEOUT = 20.0


@pytest.mark.timeout(120)
def test_rank_killed_mid_collective():
    # ~64 MB on the ring: rank 2 dies while bytes are in flight
    results = run_world(3, die_mid_collective, 16 << 20, 2, timeout=100, pg_timeout=PG_TIMEOUT)
    assert results[2][0] == "died"
    for r in (0, 1):
        status, (first, elapsed, second, elapsed2) = results[r]
        assert status == "ok"
        assert first is not None and "DistBackendError" in first, first
        assert "rank 2" in first, first  # names the dead rank
        assert elapsed < PG_TIMEOUT, (elapsed, first)  # failed fast, not by timing out
        assert second is not None and "unusable" in second and elapsed2 < 1.0, second


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["all_reduce_size", "all_reduce_size_large", "dtype", "broadcast_size",
                                  "all_gather_size", "op_order"])
def test_mismatch_raises_on_every_rank(kind):
    results = run_world(3, mismatched, kind, timeout=100, pg_timeout=PG_TIMEOUT)
    want = {"op_order": "order of operations", "dtype": "dtypes disagree"}.get(kind, "sizes or dtypes disagree")
    for r, res in results.items():
        assert res[0] == "err", (r, res)
        assert "DistBackendError" in res[1] and want in res[1], (r, res[1])  # the root cause, on every rank


@pytest.mark.timeout(60)
def test_timeout_names_the_rank_waited_for():
    results = run_world(2, late_rank, 5.0, timeout=50, pg_timeout=1.5)
    msg, elapsed = results[0][1]
    assert "DistTimeoutError" in msg and "timed out" in msg and "rank 1" in msg, msg
    assert 1.4 < elapsed < 4.0, elapsed
