"""comm.Future: torch.futures semantics."""

import threading
import time

import pytest

from tritensor.comm import Future, collect_all, wait_all


def test_set_result_wait_value_done():
    f = Future()
    assert not f.done()
    with pytest.raises(RuntimeError, match="no value"):
        f.value()
    threading.Timer(0.05, lambda: f.set_result(42)).start()
    assert f.wait(timeout=5) == 42 and f.done() and f.value() == 42
    with pytest.raises(RuntimeError, match="once"):
        f.set_result(1)
    with pytest.raises(RuntimeError, match="once"):
        f.set_exception(ValueError())
    with pytest.raises(TimeoutError, match="Future"):
        Future().wait(timeout=0.05)


def test_then_chains_in_order():
    f = Future()
    g = f.then(lambda x: x.value() + 1)
    h = g.then(lambda x: x.wait() * 10)
    assert not h.done()
    f.set_result(1)
    assert g.value() == 2 and h.value() == 20
    # on an already completed future the callback runs inline
    assert f.then(lambda x: "inline").value() == "inline"


def test_exceptions_reach_every_dependant():
    f = Future()
    seen = []
    a = f.then(lambda x: x.value())           # re-raises the parent's error
    b = a.then(lambda x: x.value() + 1)       # and so does its child
    c = f.then(lambda x: seen.append("ran") or "handled")  # a callback that does not look still runs
    f.set_exception(KeyError("boom"))
    for dep in (a, b):
        with pytest.raises(KeyError, match="boom"):
            dep.wait()
    assert c.value() == "handled" and seen == ["ran"]
    with pytest.raises(KeyError):
        f.value()
    # an exception raised by a callback fails its future only
    d = Future()
    e = d.then(lambda x: 1 / 0)
    d.set_result(3)
    with pytest.raises(ZeroDivisionError):
        e.wait()
    assert d.value() == 3


def test_callbacks_run_exactly_once():
    f = Future()
    calls = []
    f.add_done_callback(lambda x: calls.append(("cb1", x.value())))
    f.add_done_callback(lambda x: 1 / 0)  # logged and ignored, does not stop the others
    f.add_done_callback(lambda x: calls.append(("cb2", x.value())))
    f.set_result(7)
    f.add_done_callback(lambda x: calls.append(("late", x.value())))
    with pytest.raises(RuntimeError):
        f.set_result(8)
    assert calls == [("cb1", 7), ("cb2", 7), ("late", 7)]


def test_callbacks_once_under_concurrency():
    for _ in range(20):
        f = Future()
        count = []
        adders = [threading.Thread(target=f.add_done_callback, args=(lambda x: count.append(1),)) for _ in range(8)]
        for t in adders[:4]:
            t.start()
        f.set_result(None)
        for t in adders[4:]:
            t.start()
        for t in adders:
            t.join()
        assert len(count) == 8


def test_collect_all_and_wait_all():
    futs = [Future() for _ in range(3)]
    all_ = collect_all(futs)
    futs[1].set_result("b")
    futs[0].set_result("a")
    assert not all_.done()
    futs[2].set_result("c")
    assert all_.wait(timeout=1) == futs
    assert wait_all(futs) == ["a", "b", "c"]
    assert collect_all([]).value() == []
    # the first error fails the collection and wait_all
    futs = [Future() for _ in range(2)]
    coll = collect_all(futs)
    futs[0].set_exception(ValueError("first"))
    with pytest.raises(ValueError, match="first"):
        coll.wait()
    futs[1].set_result(1)
    with pytest.raises(ValueError, match="first"):
        wait_all(futs)
    with pytest.raises(TypeError, match="futures"):
        collect_all([1])


def test_wait_from_another_thread():
    f = Future()
    out = []
    t = threading.Thread(target=lambda: out.append(f.wait(timeout=5)))
    t.start()
    time.sleep(0.05)
    f.set_result("x")
    t.join(5)
    assert out == ["x"]
