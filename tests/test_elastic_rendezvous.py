"""tritensor.elastic.rendezvous: parameters, registry, static and c10d backends, their failures."""

import multiprocessing as mp
import os
import threading
import time
from datetime import timedelta

import pytest
from elastic_helpers import rdzv_node

from tritensor.comm import TCPStore
from tritensor.elastic.rendezvous import (RendezvousClosedError, RendezvousConnectionError, RendezvousHandler,
                                          RendezvousInfo, RendezvousParameters, RendezvousTimeoutError)
from tritensor.elastic.rendezvous.registry import get_rendezvous_handler
from tritensor.elastic.rendezvous.utils import parse_rendezvous_endpoint

FAST = dict(join_timeout=20, last_call_timeout=0.3, keep_alive_interval=0.2, read_timeout=10)


@pytest.fixture
def store():
    s = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=20))
    yield s
    s.close()


def _handler(store, run_id, min_nodes, max_nodes, **conf):
    c = dict(FAST, **conf)
    return get_rendezvous_handler(RendezvousParameters("c10d", f"127.0.0.1:{store.port}", run_id,
                                                       min_nodes, max_nodes, is_host=False, **c))


def _in_threads(handlers):
    out, errs = {}, []

    def go(i, h):
        try:
            out[i] = h.next_rendezvous()
        except Exception as e:  # pragma: no cover - reported below
            errs.append(e)

    ts = [threading.Thread(target=go, args=(i, h)) for i, h in enumerate(handlers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not errs, errs
    return out


def test_parameters_and_registry():
    p = RendezvousParameters("c10d", "h:1", "r", 1, 2, join_timeout="5", flag="yes")
    assert p.get_as_float("join_timeout") == 5.0 and p.get_as_bool("flag") is True and p.get("x", 3) == 3
    with pytest.raises(ValueError, match="max_nodes"):
        RendezvousParameters("c10d", "h:1", "r", 3, 2)
    with pytest.raises(ValueError, match="min_nodes"):
        RendezvousParameters("c10d", "h:1", "r", 0, 2)
    with pytest.raises(ValueError, match="'nope' is not registered.*c10d.*static"):
        get_rendezvous_handler(RendezvousParameters("nope", "h:1", "r", 1, 1))
    with pytest.raises(ValueError, match="rank is absent"):
        get_rendezvous_handler(RendezvousParameters("static", "127.0.0.1:1", "r", 1, 1))
    with pytest.raises(ValueError, match="fixed number"):
        get_rendezvous_handler(RendezvousParameters("static", "127.0.0.1:1", "r", 1, 2, rank=0))
    assert parse_rendezvous_endpoint("node1:29401", 29400) == ("node1", 29401)
    assert parse_rendezvous_endpoint("node1", 29400) == ("node1", 29400)
    assert parse_rendezvous_endpoint("[::1]:5", 1) == ("::1", 5)
    assert parse_rendezvous_endpoint("", 7) == ("localhost", 7)
    with pytest.raises(ValueError, match="port number"):
        parse_rendezvous_endpoint("h:99999", 1)


def test_static_two_nodes(monkeypatch):
    # A job's launcher hands every node the secret before any starts. Without it, the two threads
    # here race: node 1 may try to join before node 0's store has generated the secret into this
    # process's environment (the H200 run, 15 test files at once, saw node 1 win).
    monkeypatch.setenv("TRITENSOR_COMM_SECRET", "static-two-nodes")
    port = _free_port()
    hs = [get_rendezvous_handler(RendezvousParameters("static", f"127.0.0.1:{port}", "s", 2, 2, rank=r))
          for r in (0, 1)]
    out = _in_threads(hs)
    assert {out[i].rank for i in out} == {0, 1} and {out[i].world_size for i in out} == {2}
    out[0].store.set("k", "v")
    assert out[1].store.get("k") == b"v"
    assert hs[0].num_nodes_waiting() == 0 and hs[0].get_backend() == "static"
    for h in reversed(hs):
        h.shutdown()


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_c10d_two_nodes_one_round(store):
    hs = [_handler(store, "two", 2, 2) for _ in range(2)]
    assert isinstance(hs[0], RendezvousHandler) and hs[0].get_backend() == "c10d" and hs[0].get_run_id() == "two"
    out = _in_threads(hs)
    assert sorted(out[i].rank for i in out) == [0, 1] and all(out[i].world_size == 2 for i in out)
    assert isinstance(out[0], RendezvousInfo)
    s, rank, world = out[0]  # unpacks as the old tuple
    s.set("x", "1")
    assert out[1].store.get("x") == b"1"
    # the next round: both again, with the same ranks' count; its store keys are fresh
    out2 = _in_threads(hs)
    assert all(out2[i].world_size == 2 for i in out2) and not out2[0].store.check(["x"])
    hs[0].shutdown()
    assert hs[1].is_closed()
    with pytest.raises(RendezvousClosedError, match="closed"):
        hs[1].next_rendezvous()
    hs[1].shutdown()


def test_c10d_node_joins_between_rounds(store):
    """min 2 max 3: two form a round after the last call; a third waits and the next round has 3."""
    hs = [_handler(store, "grow", 2, 3) for _ in range(2)]
    t0 = time.monotonic()
    out = _in_threads(hs)
    assert all(out[i].world_size == 2 for i in out) and time.monotonic() - t0 < 15
    late = _handler(store, "grow", 2, 3)
    box = {}
    th = threading.Thread(target=lambda: box.setdefault("info", late.next_rendezvous()))
    th.start()
    deadline = time.monotonic() + 10
    while hs[0].num_nodes_waiting() == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert hs[0].num_nodes_waiting() == 1 and hs[1].num_nodes_waiting() == 1
    out2 = _in_threads(hs)  # the restart: the round now completes at max_nodes
    th.join(30)
    assert all(out2[i].world_size == 3 for i in out2) and box["info"].world_size == 3
    assert sorted([out2[0].rank, out2[1].rank, box["info"].rank]) == [0, 1, 2]
    assert hs[0].num_nodes_waiting() == 0  # full: nobody can join anyway
    for h in hs + [late]:
        h.shutdown()


def test_c10d_endpoint_not_answering(monkeypatch):
    monkeypatch.setenv("TRITENSOR_COMM_SECRET", "some-secret")  # not left to whichever test ran before
    port = _free_port()  # nothing listens there
    t0 = time.monotonic()
    with pytest.raises(RendezvousConnectionError, match=f"no store answered at 127.0.0.1:{port} within 1s"):
        get_rendezvous_handler(RendezvousParameters("c10d", f"127.0.0.1:{port}", "x", 1, 1,
                                                    is_host=False, read_timeout=1))
    assert time.monotonic() - t0 < 10


def test_c10d_wrong_secret(store, monkeypatch):
    monkeypatch.setenv("TRITENSOR_COMM_SECRET", "not-the-jobs-secret")
    t0 = time.monotonic()
    with pytest.raises(RendezvousConnectionError, match="refused this node's secret.*TRITENSOR_COMM_SECRET"):
        _handler(store, "sec", 1, 1)
    assert time.monotonic() - t0 < 10


def test_c10d_join_timeout_names_what_it_waited_for(store):
    h = _handler(store, "alone", 2, 2, join_timeout=1)
    t0 = time.monotonic()
    with pytest.raises(RendezvousTimeoutError, match=r"join_timeout=1s: waited for min_nodes=2 .*1 alive"):
        h.next_rendezvous()
    assert time.monotonic() - t0 < 8
    h.shutdown()


def test_c10d_node_dies_during_rendezvous(store, tmp_path):
    """A node that joined and was killed stops heartbeating: it is named dead, not waited for."""
    ready = str(tmp_path / "ready")
    conf = dict(FAST, is_host=False)
    p = mp.get_context("spawn").Process(target=rdzv_node, args=(
        f"127.0.0.1:{store.port}", "dies", 3, 3, ready, conf))
    p.start()
    deadline = time.monotonic() + 30
    while not os.path.exists(ready) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # it is in the round now
    dead_id = open(ready).read()
    p.kill()
    p.join(10)
    time.sleep(1.0)  # past keep_alive_interval * keep_alive_max_attempt (0.6 s): it counts as dead
    h = _handler(store, "dies", 2, 3, join_timeout=3)
    t0 = time.monotonic()
    with pytest.raises(RendezvousTimeoutError, match=f"stopped heartbeating.*{dead_id}"):
        h.next_rendezvous()
    assert time.monotonic() - t0 < 10
    h.shutdown()


def test_c10d_next_round_waits_for_restarting_members(store):
    """min 1 max 3: a member back first does not close the next round alone while its peer is alive."""
    hs = [_handler(store, "regroup", 1, 3, last_call_timeout=0.2) for _ in range(2)]
    hs[1].next_rendezvous()  # min_nodes=1: it forms a round alone after the last call
    out = _in_threads(hs)
    assert [out[i].world_size for i in out] == [2, 2]
    box = {}
    th = threading.Thread(target=lambda: box.setdefault("a", hs[0].next_rendezvous()))
    th.start()
    time.sleep(1.0)  # hs[0] alone in the next round, past its last call: it waits for hs[1]
    assert "a" not in box
    b = hs[1].next_rendezvous()
    th.join(30)
    assert b.world_size == 2 and box["a"].world_size == 2
    for h in hs:
        h.shutdown()


def test_c10d_a_node_leaving_while_another_reads_its_heartbeat(store):
    """Reading a heartbeat is check-then-get. A leaving node used to delete its key, so a reader
    between the two waited the store's whole timeout for it (CI: the host's shutdown hung 60 s on
    a node that had left). Here every check of the leaver's key lets the leaver shut down
    before the get runs."""
    hs = [_handler(store, "leave", 2, 2) for _ in range(2)]
    _in_threads(hs)
    reader, leaver = hs
    real_check = reader._store.check

    def check_then_leave(keys):
        found = real_check(keys)
        if any(k.endswith(f"/hb/{leaver.node_id}") for k in keys):
            leaver.shutdown()
        return found

    reader._store.check = check_then_leave
    t0 = time.monotonic()
    assert reader._alive(leaver.node_id) is False
    assert time.monotonic() - t0 < 5.0  # no wait for a missing key (that took read_timeout=10 s)
    reader._store.check = real_check
    reader.shutdown()
