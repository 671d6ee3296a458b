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
                                  "all_gather_size", "op_order", "reduce_op", "broadcast_src"])
def test_mismatch_raises_on_every_rank(kind):
    results = run_world(3, mismatched, kind, timeout=100, pg_timeout=PG_TIMEOUT)
    want = {"op_order": "order of operations", "dtype": "dtypes disagree",
            # the ops by name, not bare codes ("rank 1: 4, this rank (0): 0", as it once read)
            "reduce_op": "ranks use different reduce ops",
            # which ranks named which source, not a byte count ("expected ... message 1048576, 0 bytes")
            "broadcast_src": "ranks disagree on the src of broadcast"}.get(kind, "sizes or dtypes disagree")
    for r, res in results.items():
        assert res[0] == "err", (r, res)
        assert "DistBackendError" in res[1] and want in res[1], (r, res[1])  # the root cause, on every rank
    if kind == "reduce_op":
        msgs = [res[1] for res in results.values()]
        assert any("ReduceOp.MAX" in m and "ReduceOp.SUM" in m for m in msgs), msgs
        assert not any("rank 1: 4" in m for m in msgs), msgs
    if kind == "broadcast_src":
        msgs = [res[1] for res in results.values()]
        assert any("src=1" in m and "src=0" in m for m in msgs), msgs


@pytest.mark.timeout(60)
def test_timeout_names_the_rank_waited_for():
    results = run_world(2, late_rank, 3.0, timeout=50, pg_timeout=1.5)  # rank 1 idles past rank 0's 1.5 s
    msg, elapsed = results[0][1]
    assert "DistTimeoutError" in msg and "timed out" in msg and "rank 1" in msg, msg
    assert 1.4 < elapsed < 4.0, elapsed


@pytest.mark.timeout(60)
def test_process_group_listener_refuses_unauthenticated_peers():
    """A peer without the secret is refused by a rank's listener, which keeps serving the real peer."""
    import socket
    import threading

    from tritensor.comm import TCPStore
    from tritensor.comm.backend import auth
    from tritensor.comm.backend.mesh import connect_mesh

    secret = b"pg-secret"
    store = TCPStore("127.0.0.1", 0, is_master=True, timeout=10, secret=secret)
    rank0_store = TCPStore("127.0.0.1", store.port, timeout=10, secret=secret)  # one client per rank
    out = {}
    t = threading.Thread(target=lambda: out.update(r0=connect_mesh(rank0_store, "t/", 0, 2, [0, 1], "127.0.0.1",
                                                                   secret, 20)))
    t.start()
    try:
        tcp_addr, _host, unix_path = store.get("t/addr/0").decode().split("\n")
        host, port = tcp_addr.rsplit(":", 1)
        intruders = [socket.create_connection((host, int(port)), timeout=5)]
        if unix_path:
            u = socket.socket(socket.AF_UNIX)
            u.settimeout(5)
            u.connect(unix_path)
            intruders.append(u)
        for s in intruders:
            assert s.recv(auth.SERVER_HELLO_LEN).startswith(auth.MAGIC)
            s.sendall(b"\x00" * auth.CLIENT_REPLY_LEN)  # a wrong MAC
            assert s.recv(64) == b""  # refused: closed without a byte
            s.close()
        # a peer with the wrong secret fails authentication and learns nothing
        s = socket.create_connection((host, int(port)), timeout=5)
        with pytest.raises(auth.AuthenticationError):
            auth.client_handshake(s, b"wrong", b"pg", 5)
        s.close()
        peers1 = connect_mesh(store, "t/", 1, 2, [0, 1], "127.0.0.1", secret, 20)
        t.join(20)
        assert set(out["r0"]) == {1} and set(peers1) == {0}
        for p in list(out["r0"].values()) + list(peers1.values()):
            p.sock.close()
    finally:
        t.join(1)
        store.close()


@pytest.mark.timeout(60)
def test_device_copy_failure_fails_every_rank():
    from comm_helpers import device_copy_fails

    results = run_world(3, device_copy_fails, timeout=50, pg_timeout=PG_TIMEOUT)
    for r, (status, msg) in results.items():
        assert status == "ok" and "DistBackendError" in msg and "illegal memory access" in msg, (r, msg)
