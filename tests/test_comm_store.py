"""TCPStore: operations, timeouts, authentication and hostile input."""

import socket
import struct
import threading
import time

import pytest

from tritensor.comm import DistStoreError, DistStoreTimeoutError, TCPStore
from tritensor.comm.backend import auth
from tritensor.comm.backend.framing import FRAME, encode_frame
from tritensor.comm.store import SET

SECRET = "store-test-secret"


@pytest.fixture
def store():
    master = TCPStore("127.0.0.1", 0, is_master=True, timeout=5, secret=SECRET)
    yield master
    master.close()


def client(master, **kw):
    return TCPStore("127.0.0.1", master.port, timeout=kw.pop("timeout", 5), secret=kw.pop("secret", SECRET), **kw)


def authed_socket(master):
    s = socket.create_connection(("127.0.0.1", master.port), timeout=5)
    auth.client_handshake(s, SECRET.encode(), b"store", 5)
    return s


def closed_by_server(s, timeout=5.0):
    """True when the server closes ``s`` (EOF or reset) within ``timeout``."""
    s.settimeout(timeout)
    try:
        while True:
            if not s.recv(4096):
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def test_operations(store):
    c = client(store)
    store.set("a", "1")
    c.set("b", b"\x00\xffbytes")
    assert c.get("a") == b"1" and store.get("b") == b"\x00\xffbytes"
    assert c.add("n", 5) == 5 and store.add("n", -2) == 3 and c.get("n") == b"3"
    # compare_set: torch's semantics for a missing key, a match and a mismatch
    assert c.compare_set("k", "", "v1") == b"v1"
    assert c.compare_set("k", "nope", "v2") == b"v1"
    assert c.compare_set("k", "v1", "v2") == b"v2" and c.get("k") == b"v2"
    assert c.compare_set("missing", "x", "y") == b"x" and not c.check(["missing"])
    assert c.check(["a", "b"]) and not c.check(["a", "zzz"])
    assert c.num_keys() == 4  # a, b, n, k (the store's own bookkeeping keys are not counted)
    assert c.delete_key("a") is True and c.delete_key("a") is False and not c.check(["a"])
    c.multi_set(["x", "y"], ["1", b"2"])
    assert c.multi_get(["x", "y"]) == [b"1", b"2"]
    c.wait(["x", "y"])
    assert store.host == "127.0.0.1" and c.port == store.port
    # binds to loopback when given a loopback address
    assert store._server.listener.getsockname()[0] == "127.0.0.1"
    with pytest.raises(TypeError, match="amount"):
        c.add("n", 1.5)
    with pytest.raises(TypeError, match="value"):
        c.set("a", 3)
    with pytest.raises(ValueError, match="port"):
        TCPStore("127.0.0.1", 70000, secret=SECRET)
    with pytest.raises(DistStoreError, match="not an integer"):
        c.add("k", 1)
    c.close()


def test_waits_and_timeouts(store):
    c = client(store, timeout=0.5)
    t0 = time.monotonic()
    with pytest.raises(DistStoreTimeoutError, match="'never'"):
        c.get("never")
    assert 0.4 < time.monotonic() - t0 < 3
    store.set("here", "1")
    with pytest.raises(DistStoreTimeoutError, match="'late'"):  # names the missing key only
        c.wait(["here", "late"], timeout=0.3)
    # the connection is still usable after a timeout
    assert c.get("here") == b"1"
    # a waiting get returns as soon as another client sets the key
    threading.Timer(0.2, lambda: store.set("late", "now")).start()
    c.set_timeout(5)
    t0 = time.monotonic()
    assert c.get("late") == b"now" and time.monotonic() - t0 < 3
    # a parked get does not block other clients
    c2 = client(store)
    done = []
    th = threading.Thread(target=lambda: done.append(c2.get("later")))
    th.start()
    time.sleep(0.1)
    assert c.add("counter", 1) == 1 and c.num_keys() >= 1
    store.set("later", "x")
    th.join(5)
    assert done == [b"x"]


def test_wrong_secret_is_refused_and_nothing_runs(store):
    with pytest.raises(DistStoreError, match="refused|secret|closed"):
        client(store, secret="wrong-secret")
    # A raw peer that skips authentication and sends a valid SET frame: the server reads
    # only the fixed-size auth reply (here: the frame's bytes), fails it and closes.
    raw = socket.create_connection(("127.0.0.1", store.port), timeout=5)
    hello = raw.recv(auth.SERVER_HELLO_LEN)
    assert hello.startswith(auth.MAGIC)
    raw.sendall(encode_frame(SET, [b"pwned", b"1"]) + b"\x00" * auth.CLIENT_REPLY_LEN)
    assert closed_by_server(raw)
    raw.close()
    assert not store.check(["pwned"])
    assert store.num_keys() == 0


def test_garbage_truncated_and_oversized_frames(store):
    good = client(store)
    good.set("alive", "yes")
    # garbage after authentication
    s1 = authed_socket(store)
    s1.sendall(b"GARBAGE!" * 8)
    assert closed_by_server(s1)
    # a valid header with a body that never comes, then the peer vanishes
    s2 = authed_socket(store)
    s2.sendall(FRAME.pack(b"TS", 1, SET, 0, 100) + b"short")
    s2.close()
    # an oversized frame is refused from its header alone
    s3 = authed_socket(store)
    s3.sendall(FRAME.pack(b"TS", 1, SET, 0, 1 << 40))
    assert closed_by_server(s3)
    # a wrong version, and a body whose field lengths run past its end
    s4 = authed_socket(store)
    s4.sendall(FRAME.pack(b"TS", 9, SET, 0, 0))
    assert closed_by_server(s4)
    s5 = authed_socket(store)
    body = struct.pack("!II", 2, 1000) + b"x"
    s5.sendall(FRAME.pack(b"TS", 1, SET, 0, len(body)) + body)
    assert closed_by_server(s5)
    # truncated authentication, then close
    s6 = socket.create_connection(("127.0.0.1", store.port), timeout=5)
    s6.recv(auth.SERVER_HELLO_LEN)
    s6.sendall(auth.MAGIC[:4])
    s6.close()
    # an idle unauthenticated connection stays open without blocking anyone
    idle = socket.create_connection(("127.0.0.1", store.port), timeout=5)
    # the server and the well-behaved client are unaffected
    assert good.get("alive") == b"yes"
    assert good.add("c", 1) == 1
    assert client(store).get("alive") == b"yes"
    for s in (s1, s3, s4, s5, idle):
        s.close()


def test_many_concurrent_clients(store):
    clients = [client(store) for _ in range(12)]
    errors = []

    def work(c, i):
        try:
            for _ in range(20):
                c.add("total", 1)
            c.set(f"k{i}", str(i))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(c, i)) for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not errors
    assert store.get("total") == b"240"
    assert store.multi_get([f"k{i}" for i in range(12)]) == [str(i).encode() for i in range(12)]


def test_wait_for_workers_times_out_with_counts():
    t0 = time.monotonic()
    with pytest.raises(DistStoreTimeoutError, match="3 workers.*1 connected"):
        TCPStore("127.0.0.1", 0, world_size=3, is_master=True, timeout=0.5, secret=SECRET)
    assert time.monotonic() - t0 < 5


def _master_waiting(world_size, timeout, **joiners):
    """A master (rank 0) waiting for ``world_size`` workers while the clients of ``joiners``
    (name -> TCPStore keywords) join; returns the master's error and the clients."""
    port, errors, clients = _free_port(), [], []
    t = threading.Thread(target=lambda: errors.append(_catch(
        TCPStore, "127.0.0.1", port, world_size=world_size, is_master=True, timeout=timeout, secret=SECRET,
        rank=0)), daemon=True)
    t.start()
    for kw in joiners.values():  # a client retries until the master listens
        clients.append(TCPStore("127.0.0.1", port, world_size=world_size, timeout=timeout, secret=SECRET, **kw))
    t.join(timeout + 10)
    for c in clients:
        c.close()
    return errors[0]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _catch(fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except Exception as e:
        return e


def test_wait_for_workers_timeout_names_the_missing_ranks():
    """The master used to say '2 connected' but not which ranks it was still waiting for."""
    err = _master_waiting(4, 1.0, a={"rank": 2})
    assert isinstance(err, DistStoreTimeoutError), err
    assert "4 workers" in str(err) and "2 connected; missing rank(s) [1, 3]" in str(err), str(err)


def test_wait_for_workers_timeout_with_a_client_that_gave_no_rank():
    err = _master_waiting(4, 1.0, a={"rank": 2}, b={})
    assert isinstance(err, DistStoreTimeoutError), err
    assert "3 connected, 1 of them without a rank" in str(err) and "rank(s) not seen: [1, 3]" in str(err), str(err)


@pytest.mark.parametrize("rank", [-1, 3, True, "1"])
def test_bad_rank_is_named(rank):
    with pytest.raises(ValueError, match="rank"):
        TCPStore("127.0.0.1", 1, world_size=3, rank=rank, secret=SECRET)


def test_workers_counted():
    master = TCPStore("127.0.0.1", 0, world_size=2, is_master=True, timeout=5, secret=SECRET,
                      wait_for_workers=False)
    try:
        c = TCPStore("127.0.0.1", master.port, world_size=2, timeout=5, secret=SECRET)
        assert c.num_keys() == 0
    finally:
        master.close()


def test_client_without_any_secret(monkeypatch):
    monkeypatch.delenv("TRITENSOR_COMM_SECRET", raising=False)
    with pytest.raises(auth.AuthenticationError, match="TRITENSOR_COMM_SECRET"):
        TCPStore("127.0.0.1", 1, timeout=1)


def test_master_generates_a_secret_for_its_children(monkeypatch):
    monkeypatch.delenv("TRITENSOR_COMM_SECRET", raising=False)
    import os

    master = TCPStore("127.0.0.1", 0, is_master=True, timeout=5)
    try:
        secret = os.environ["TRITENSOR_COMM_SECRET"]
        assert len(secret) >= 32
        assert TCPStore("127.0.0.1", master.port, timeout=5).check([]) is True
    finally:
        master.close()


def test_reconnect_to_another_store_on_the_same_port_is_refused():
    """A client whose master died must not carry on in whatever store takes the port next
    (seen in CI: a dying test's rank reconnected into the next test's store and its barrier
    count let two ranks through without the third)."""
    first = TCPStore("127.0.0.1", 0, is_master=True, timeout=5, secret=SECRET)
    port = first.port
    c = client(first)
    c.add("barrier", 1)
    first.close()
    second = TCPStore("127.0.0.1", port, is_master=True, timeout=5, secret=SECRET)
    try:
        errors = []
        for _ in range(3):  # the first call may only notice the dropped connection
            try:
                c.add("barrier", 1)
            except DistStoreError as e:
                errors.append(str(e))
        assert any("different store" in e for e in errors), errors
        assert second.add("barrier", 0) == 0  # nothing reached the new store's key space
        # a client that joins the new store directly works as usual
        assert client(second).add("barrier", 2) == 2
    finally:
        c.close()
        second.close()
