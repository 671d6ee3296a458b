"""Process-group hardening: a listener flooded during setup, a hung store host, outputs left
untouched by a failed collective, and error texts that name what went wrong (the rank, the
operation), each once a reported failure."""

import socket
import struct
import threading
import time

import numpy as np
import pytest
from comm_helpers import (assert_all_ok, free_port, mismatch_leaves_outputs, rank_never_joins, rank_never_starts,
                          run_world, store_host_hangs)

import tritensor.comm as dist
from tritensor.comm import DistNetworkError, DistTimeoutError, TCPStore
from tritensor.comm.backend import auth, mesh
from tritensor.comm.backend.framing import ALL_REDUCE, pack_data_header
from tritensor.comm.backend.peer import Peer
from tritensor.comm.backend.transport import Engine


def _flood(addr_value: str, idle: int, garbage: int) -> list:
    """Open ``idle`` silent connections and ``garbage`` ones that send junk to one rank's listeners."""
    tcp_addr, _host, unix_path = addr_value.split("\n")
    host, port = tcp_addr.rsplit(":", 1)
    socks = []
    for i in range(idle + garbage):
        try:  # a listener with a tiny backlog (the old one) leaves some of these hanging
            s = socket.create_connection((host, int(port)), timeout=2)
            if i >= idle:
                s.sendall(b"GET / HTTP/1.0\r\n\r\n" + b"\xff" * 100)
        except OSError:
            continue
        socks.append(s)
    if unix_path:
        u = socket.socket(socket.AF_UNIX)
        u.connect(unix_path)
        socks.append(u)
    return socks


@pytest.mark.timeout(60)
def test_setup_completes_with_idle_and_garbage_connections_on_every_listener():
    """Each listener used to authenticate one connection at a time (10 s each):
    three idle connections delayed setup by 20 s, four made it fail on every rank."""
    secret, world, timeout = b"pg-secret", 4, 20.0
    store = TCPStore("127.0.0.1", 0, is_master=True, timeout=10, secret=secret)
    out, errors, threads, held = {}, {}, [], []

    def run(r):
        client = TCPStore("127.0.0.1", store.port, timeout=10, secret=secret)
        try:
            out[r] = mesh.connect_mesh(client, "f/", r, world, list(range(world)), "127.0.0.1", secret, timeout)
        except Exception as e:  # asserted below
            errors[r] = e
        finally:
            client.close()

    start = time.monotonic()
    try:
        for r in range(world):
            threads.append(threading.Thread(target=run, args=(r,), daemon=True))
            threads[-1].start()
            if r < world - 1:  # every listener gets its flood before the next rank starts
                held += _flood(store.get(f"f/addr/{r}").decode(), idle=4, garbage=2)
        for t in threads:
            t.join(timeout + 10)
        elapsed = time.monotonic() - start
        assert not errors, errors
        assert {r: sorted(p) for r, p in out.items()} == {r: [q for q in range(world) if q != r] for r in range(world)}
        assert elapsed < 8.0, elapsed  # on time: one idle connection used to cost 10 s
        for peers in out.values():
            for p in peers.values():
                p.sock.close()
    finally:
        for s in held:
            s.close()
        store.close()


@pytest.mark.timeout(60)
def test_crowded_out_peer_gets_a_clear_message(monkeypatch):
    """A legitimate peer whose connection is dropped because the listener is full of
    unauthenticated connections is told so, not handed a misleading AuthenticationError."""
    monkeypatch.setattr(mesh, "MAX_PENDING", 1, raising=False)  # + the one rank expected: 2 slots
    monkeypatch.setenv("TRITENSOR_COMM_UNIX", "0")
    secret = b"pg-secret"
    store = TCPStore("127.0.0.1", 0, is_master=True, timeout=10, secret=secret)
    r0 = TCPStore("127.0.0.1", store.port, timeout=10, secret=secret)
    errors = {}
    t = threading.Thread(target=lambda: errors.update(
        r0=_catch(mesh.connect_mesh, r0, "c/", 0, 2, [0, 1], "127.0.0.1", secret, 4.0)), daemon=True)
    t.start()
    held = []
    try:
        held = _flood(store.get("c/addr/0").decode(), idle=2, garbage=0)
        for s in held:  # both are being authenticated: the listener is full
            assert s.recv(len(auth.MAGIC)) == auth.MAGIC
        err = _catch(mesh.connect_mesh, store, "c/", 1, 2, [0, 1], "127.0.0.1", secret, 2.0)
        assert isinstance(err, dist.DistNetworkError), repr(err)
        assert "rank 0" in str(err) and "crowded out" in str(err), str(err)
        t.join(10)
        assert isinstance(errors["r0"], dist.DistTimeoutError) and "[1]" in str(errors["r0"]), errors
    finally:
        for s in held:
            s.close()
        t.join(1)
        r0.close()
        store.close()


def _catch(fn, *args):
    try:
        return fn(*args)
    except Exception as e:
        return e


@pytest.mark.timeout(90)
def test_surviving_ranks_raise_within_timeout_when_store_host_hangs():
    """The failure used to be reported to the (hung) store under the engine lock with
    2 s + 5 s of slack: a 10 s group timeout raised at 17 s.

    The bound allows 3 s past the timeout (a loaded 2-core machine runs three ranks and other
    tests), still 4 s short of the old 7 s. The survivor that woke rank 0 second once
    found it already exited (ProcessLookupError, an "err" result); the helper now allows that."""
    group_timeout = 3.0
    results = run_world(3, store_host_hangs, group_timeout, timeout=80, pg_timeout=30)
    assert_all_ok(results)
    assert results[0] == ("ok", "resumed"), results[0]
    for r in (1, 2):
        status, (msg, elapsed) = results[r]
        assert status == "ok" and msg.startswith("Dist"), (r, msg)
        assert elapsed < group_timeout + 3.0, (r, elapsed, msg)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["broadcast", "scatter", "gather", "all_gather", "all_to_all", "all_reduce",
                                  "recv"])
def test_failed_collective_leaves_outputs_untouched(kind):
    """Header and payload used to land in one read straight into the tensor, and the header
    was checked after; other ranks' slots were written before every rank had agreed."""
    results = run_world(3, mismatch_leaves_outputs, kind, timeout=100, pg_timeout=20)
    for r, (status, (msg, untouched)) in results.items():
        assert status == "ok" and "DistBackendError" in msg, (r, msg)
        assert untouched, (r, kind, msg)


@pytest.mark.parametrize("query,name,bad", [("rank=abc&world_size=2", "rank", "abc"),
                                            ("rank=0&world_size=two", "world_size", "two")])
def test_init_method_bad_query_values_are_named(query, name, bad):
    """These used to raise a raw "invalid literal for int()"."""
    with pytest.raises(ValueError, match=rf"{name}.*init_method.*{bad!r}|init_method.*{name}.*{bad!r}"):
        dist.init_process_group("tcp", init_method=f"tcp://127.0.0.1:{free_port()}?{query}")


@pytest.mark.parametrize("port", ["abc", "99999"])
def test_init_method_bad_port_is_named(port):
    with pytest.raises(ValueError, match=rf"port.*{port!r}"):
        dist.init_process_group("tcp", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)


@pytest.mark.timeout(90)
def test_rank_that_never_joins_is_named():
    """The others used to name an internal store key ('tt_pg/default_pg/1/addr/1'), not the rank."""
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "3"}
    results = run_world(3, rank_never_joins, 3.0, init=False, timeout=80, env=env,
                        rank_env=lambda r: {"RANK": str(r)})
    for r in (0, 2):
        status, (msg, elapsed) = results[r]
        # Rank 0 hosts the store and gives up at its own deadline; rank 2, started a moment later,
        # may see the store vanish just before its deadline: still a timeout naming rank 1 (see
        # test_store_lost_while_waiting_for_a_rank for the rule).
        assert "DistTimeoutError" in msg and "rank(s) [1]" in msg and "tt_pg" not in msg, (r, msg)
        assert elapsed < 3.0 + 2.0, (r, elapsed)


@pytest.mark.timeout(60)
def test_store_host_names_the_rank_that_never_reached_it():
    """Rank 0's TCPStore used to time out with '2 connected' and no rank named."""
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "3"}
    results = run_world(3, rank_never_starts, 2.0, init=False, timeout=50, env=env,
                        rank_env=lambda r: {"RANK": str(r)})
    msg = assert_all_ok(results)[0]
    assert msg.startswith("DistStoreTimeoutError") and "missing rank(s) [2]" in msg, msg


@pytest.mark.timeout(30)
@pytest.mark.parametrize("lost_after,wait_for,want", [(0.3, 0.8, DistTimeoutError), (0.3, 5.0, DistNetworkError)])
def test_store_lost_while_waiting_for_a_rank(lost_after, wait_for, want):
    """The store's host leaving during the wait names the awaited rank, never a store key: a
    timeout when it happens within STORE_LOSS_SLACK of the deadline (the host gave up on the
    same rank), a lost store otherwise. CI saw a bare 'connection lost' here."""
    master = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=10)
    store = TCPStore("127.0.0.1", master.port, timeout=10)
    threading.Timer(lost_after, master.close).start()
    with pytest.raises(want) as info:
        mesh._wait_for_rank(store, "tt_pg/g/", 1, 2, [0, 5, 9], time.monotonic() + wait_for, wait_for)
    msg = str(info.value)
    assert "rank(s) [5]" in msg and "below 9" in msg and "tt_pg" not in msg, msg
    assert ("timed out" in msg) == (want is DistTimeoutError), msg
    store.close()


@pytest.mark.timeout(30)
def test_reset_from_a_peer_during_an_operation_names_the_operation():
    """A peer's connection reset while this rank was inside an all_reduce (waiting on
    another peer) used to read "failed while idle"."""
    lst = socket.create_server(("127.0.0.1", 0))
    pairs = []
    for _ in range(2):
        c = socket.create_connection(lst.getsockname())
        s, _ = lst.accept()
        pairs.append((c, s))
    lst.close()
    (a_local, a_remote), (b_local, b_remote) = pairs
    eng = Engine(0, 0, {1: Peer(1, 1, a_local, "a"), 2: Peer(2, 2, b_local, "b")})
    target = np.zeros(4, np.float32)
    with eng.posting():
        w = eng.new_work("all_reduce #7", 10.0)
        eng.recv(w, 1, pack_data_header(ALL_REDUCE, 9, 0, 0, 7, 4, 16), memoryview(target.view(np.uint8)))
        eng.finish_posting(w, False)
    b_remote.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    b_remote.close()  # linger 0: a reset
    with pytest.raises(dist.DistBackendError) as info:
        w.wait()
    msg = str(info.value)
    assert "all_reduce #7" in msg and "rank 2" in msg and "idle" not in msg, msg
    eng.shutdown()
    a_remote.close()


@pytest.mark.parametrize("gone", ["connection lost", "cannot reconnect"])
def test_store_lost_right_after_the_wait_times_out(gone):
    """The wait's own timeout arrives, then the store's host (which gave up at the same moment)
    is gone before this rank can ask which ranks are missing (CI: a bare DistStoreError; under
    load, the DistNetworkError of a reconnect that found nobody listening)."""
    from tritensor.comm import DistStoreError, DistStoreTimeoutError

    class GoneAfterTimeout:
        def wait(self, keys, timeout):
            raise DistStoreTimeoutError("TCPStore: timed out")

        def check(self, keys):
            if gone == "connection lost":
                raise DistStoreError("TCPStore 127.0.0.1:1: connection lost")
            raise DistNetworkError("TCPStore: could not connect to 127.0.0.1:1 within 0.5s: Connection refused")

    with pytest.raises(DistTimeoutError, match=r"rank\(s\) \[5\]") as info:
        mesh._wait_for_rank(GoneAfterTimeout(), "tt_pg/g/", 1, 2, [0, 5, 9], time.monotonic() + 1, 1.0)
    assert "tt_pg" not in str(info.value)


def _parked(master, suffix: bytes, timeout: float = 10.0):
    """Wait until some client's request for a key ending in ``suffix`` is parked in ``master``'s server."""
    deadline = time.monotonic() + timeout
    while not any(k.endswith(suffix) for k in list(master._server.waiters)):
        assert time.monotonic() < deadline, f"no wait for a key ending in {suffix!r} within {timeout}s"
        time.sleep(0.01)


@pytest.mark.timeout(30)
def test_store_host_giving_up_first_names_the_rank_that_never_started(monkeypatch):
    """Rank 1 of 3 never starts. Rank 0, the store's host, joined and waits in its store for rank 1;
    rank 2 joined too and waits for rank 0's address. When rank 0 gives up first, rank 2's error
    named rank 0 ("waiting for rank(s) [0] ... the store was lost meanwhile"): it must name rank 1.
    Deterministic: rank 0 gives up only once rank 2's wait is parked in the store."""
    monkeypatch.setenv("TRITENSOR_COMM_SECRET", "never-started")
    master = TCPStore("127.0.0.1", 0, world_size=3, is_master=True, wait_for_workers=False, timeout=10, rank=0)
    client = TCPStore("127.0.0.1", master.port, world_size=3, timeout=10, rank=2)
    out = {}

    def rank2():
        out["err"] = _catch(lambda: dist.init_process_group("tcp", store=client, rank=2, world_size=3, timeout=20))

    t = threading.Thread(target=rank2, daemon=True)
    t.start()
    try:
        _parked(master, b"addr/0")
        with pytest.raises(dist.DistStoreTimeoutError, match=r"missing rank\(s\) \[1\]"):
            master._wait_for_workers(3, 0.05)  # what rank 0's init_process_group does, with its timeout
        t.join(10)
        assert not t.is_alive(), "rank 2 did not raise after the store's host gave up"
        msg = str(out["err"])
        assert isinstance(out["err"], DistTimeoutError), repr(out["err"])
        assert "rank(s) [1]" in msg and "[0]" not in msg and "tt_pg" not in msg, msg
        assert not dist.is_initialized()
    finally:
        t.join(1)
        client.close()
        master.close()


@pytest.mark.timeout(30)
def test_rank_giving_up_first_names_the_rank_that_never_started(monkeypatch):
    """The same world, but rank 2's own wait ends first while the store's host still waits: rank 0
    has not published its address (it waits for rank 1), and the store says rank 1 never came."""
    monkeypatch.setenv("TRITENSOR_COMM_SECRET", "never-started")
    master = TCPStore("127.0.0.1", 0, world_size=3, is_master=True, wait_for_workers=False, timeout=10, rank=0)
    client = TCPStore("127.0.0.1", master.port, world_size=3, timeout=10, rank=2)
    try:
        with pytest.raises(DistTimeoutError) as info:
            dist.init_process_group("tcp", store=client, rank=2, world_size=3, timeout=0.5)
        msg = str(info.value)
        assert "rank(s) [1]" in msg and "[0" not in msg and "tt_pg" not in msg, msg
    finally:
        client.close()
        master.close()
