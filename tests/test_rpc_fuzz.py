"""Garbage, truncated frames and bad handshakes against a worker's RPC port: it stays up, serves
the legitimate workers and unpickles nothing (its unpickler is patched to count calls)."""

import pytest

import rpc_helpers


def _fuzz(n, seed):
    res = rpc_helpers.run_rpc(2, "fuzz_agent", n, seed, timeout=600)
    assert all(r[0] == "ok" for r in res.values()), res
    out = res[0][1][0]
    assert out["after"] - out["before"] == 1, out  # only the legitimate unpickle_count request
    assert out["ok"] == 42
    assert sum(out["kinds"].values()) == n
    assert out["stats"].get("refused_unauthenticated", 0) >= n - out["kinds"].get("authed_garbage", 0) - 5


def test_fuzz_rpc_port():
    _fuzz(400, 1)


@pytest.mark.slow
def test_fuzz_rpc_port_10000():
    _fuzz(10000, 2)
