"""tritensor.elastic.timer: the request protocol, both server/client pairs, and the agent's watchdog."""

import multiprocessing as mp
import os
import signal
import time
from datetime import timedelta

import pytest
from elastic_helpers import local_timer_hang_fn, timer_hang_fn

from tritensor.comm import TCPStore
from tritensor.elastic import timer
from tritensor.elastic.agent.server import LocalElasticAgent, WorkerSpec, WorkerState
from tritensor.elastic.rendezvous import RendezvousParameters
from tritensor.elastic.rendezvous.registry import get_rendezvous_handler


def test_expires_needs_a_client_and_releases():
    timer.configure(None)
    with pytest.raises(RuntimeError, match="Configure timer client"):
        with timer.expires(after=1):
            pass

    class Rec(timer.TimerClient):
        def __init__(self):
            self.calls = []

        def acquire(self, scope_id, expiration_time):
            self.calls.append(("acquire", scope_id, expiration_time))

        def release(self, scope_id):
            self.calls.append(("release", scope_id))

    c = Rec()
    t0 = time.time()
    with timer.expires(after=5, scope="s", client=c):
        pass
    assert c.calls[0][:2] == ("acquire", "s") and t0 + 4 < c.calls[0][2] < t0 + 10
    assert c.calls[1] == ("release", "s")
    timer.configure(c)
    with timer.expires(after=1):  # a default scope names the caller's line
        pass
    assert c.calls[2][1].endswith(f"test_elastic_timer.py#{c.calls[2][1].rsplit('#', 1)[1]}")
    timer.configure(None)
    assert timer.TimerRequest(1, "a", 2.0) == timer.TimerRequest(1, "a", 2.0)


def test_local_timer_server_reaps_only_expired():
    q = mp.get_context("spawn").Queue()
    server = timer.LocalTimerServer(q, max_interval=0.05)
    server.register_timers([timer.TimerRequest(10, "a", 5.0), timer.TimerRequest(10, "b", 50.0),
                            timer.TimerRequest(11, "a", 1.0)])
    assert {k: [t.scope_id for t in v] for k, v in server.get_expired_timers(6.0).items()} == {10: ["a"], 11: ["a"]}
    server.register_timers([timer.TimerRequest(10, "a", -1)])  # release
    assert set(server.get_expired_timers(6.0)) == {11}
    server.clear_timers({11})
    assert server.get_expired_timers(100.0).keys() == {10}


def test_local_timer_kills_a_hung_worker():
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    server = timer.LocalTimerServer(q, max_interval=0.05)
    server.start()
    try:
        p = ctx.Process(target=local_timer_hang_fn, args=(q,))
        t0 = time.monotonic()
        p.start()
        p.join(30)
        assert p.exitcode == -signal.SIGKILL and time.monotonic() - t0 < 20
    finally:
        server.stop()


def test_file_timer_client_without_server(tmp_path):
    c = timer.FileTimerClient(str(tmp_path / "nope"))
    with pytest.raises(BrokenPipeError, match="not available"):
        c.acquire("x", time.time() + 1)


def test_file_timer_server_kills_and_ignores_released(tmp_path):
    path = str(tmp_path / "fifo")
    server = timer.FileTimerServer(path, max_interval=0.05)
    server.start()
    try:
        client = timer.FileTimerClient(path)
        with timer.expires(after=0.2, scope="done-in-time", client=client):
            pass  # released: nothing to reap
        p = mp.get_context("spawn").Process(target=time.sleep, args=(60,))
        p.start()
        req = timer.FileTimerRequest(p.pid, "hang", time.time() + 0.2, int(signal.SIGKILL))
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, (req.to_json() + "\n").encode())
        os.write(fd, b"not json\n")  # ignored with a warning
        os.close(fd)
        p.join(20)
        assert p.exitcode == -signal.SIGKILL
        assert os.getpid() not in server.get_expired_timers(time.time() + 100)
    finally:
        server.stop()
    assert not os.path.exists(path)


def test_agent_watchdog_kills_hung_worker_and_restarts(tmp_path, monkeypatch):
    """TORCHELASTIC_ENABLE_FILE_TIMER=1: the hung first attempt is killed by its timer, the second succeeds."""
    monkeypatch.setenv("TORCHELASTIC_ENABLE_FILE_TIMER", "1")
    monkeypatch.delenv("TORCHELASTIC_TIMER_FILE", raising=False)
    store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=30))
    try:
        h = get_rendezvous_handler(RendezvousParameters("c10d", "", "wd", 1, 1, store=store, last_call_timeout=0.1))
        spec = WorkerSpec(role="trainer", local_world_size=1, rdzv_handler=h, entrypoint=timer_hang_fn,
                          max_restarts=1, monitor_interval=0.1)
        agent = LocalElasticAgent(spec, log_dir=str(tmp_path))
        t0 = time.monotonic()
        result = agent.run()
        h.shutdown()
    finally:
        store.close()
    assert result.state == WorkerState.SUCCEEDED and agent.restart_count == 1
    assert time.monotonic() - t0 < 40
    assert not os.path.exists(tmp_path / "watchdog.fifo")  # the agent stopped its watchdog


def test_file_timer_clear_timers(tmp_path):
    server = timer.FileTimerServer(str(tmp_path / "f"), max_interval=0.05)
    server.register_timers([timer.FileTimerRequest(7, "a", 1.0, 9), timer.FileTimerRequest(8, "a", 1.0, 9),
                            timer.FileTimerRequest(9, "a", 1.0, 0)])  # signal 0: never reaped
    assert set(server.get_expired_timers(2.0)) == {7, 8}
    server.clear_timers({7})
    assert set(server.get_expired_timers(2.0)) == {8}
