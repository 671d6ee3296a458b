"""An asynchronous collective keeps its inputs alive until its sends complete.

``all_gather(outs, t, async_op=True)`` then ``del t`` before ``wait()`` sent freed memory: the
peer got garbage (or the process crashed). The work handle holds the operation's inputs while
it is pending and lets go of them once it completes. Workers live in tests/comm_helpers.py.
"""
import pytest
from comm_helpers import assert_all_ok, async_input_lifetime, run_world


@pytest.mark.timeout(120)
def test_async_collectives_keep_inputs_alive(tmp_path):
    # 400 KB per message: more than a socket buffer takes, and under the direct-exchange limit.
    # Two rounds: each rank is once the one whose inputs are dropped while its sends wait.
    results = run_world(2, async_input_lifetime, 100_000, 2, str(tmp_path), timeout=110, pg_timeout=60)
    problems = assert_all_ok(results)
    assert problems == {0: [], 1: []}, "\n".join(f"rank {r}: {p}" for r, ps in problems.items() for p in ps)

