"""tritensor.elastic.agent.server: the spec, rank assignment, restarts, giving up, telemetry."""

import os
import threading
from datetime import timedelta

import pytest
from elastic_helpers import always_fail_fn, env_fn, flaky_fn

from tritensor.comm import TCPStore
from tritensor.elastic import events, metrics
from tritensor.elastic.agent.server import (LocalElasticAgent, RunResult, Worker, WorkerGroup, WorkerSpec,
                                            WorkerState)
from tritensor.elastic.rendezvous import RendezvousParameters
from tritensor.elastic.rendezvous.registry import get_rendezvous_handler

FAST = dict(join_timeout=30, last_call_timeout=0.3, keep_alive_interval=0.5)


@pytest.fixture
def store():
    s = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=30))
    yield s
    s.close()


def _spec(store, run_id, entrypoint, nodes=1, **kw):
    h = get_rendezvous_handler(RendezvousParameters("c10d", f"127.0.0.1:{store.port}", run_id, nodes, nodes,
                                                    store=store, **FAST))
    kw.setdefault("max_restarts", 2)
    return WorkerSpec(role=kw.pop("role", "trainer"), local_world_size=kw.pop("nproc", 2), rdzv_handler=h,
                      entrypoint=entrypoint, monitor_interval=0.1, **kw)


class _Metrics(metrics.MetricHandler):
    def __init__(self):
        self.data = []

    def emit(self, metric_data):
        self.data.append(metric_data)


class _Events(events.EventHandler):
    def __init__(self):
        self.events = []

    def record(self, event):
        self.events.append(event)


@pytest.fixture
def telemetry():
    m, e = _Metrics(), _Events()
    metrics.configure(m, "torchelastic")
    events.configure(e)
    yield m, e
    metrics.configure(metrics.NullMetricHandler(), "torchelastic")
    events.configure(events.NullEventHandler())


def test_spec_and_model():
    with pytest.raises(ValueError, match="local_world_size"):
        WorkerSpec(role="r", local_world_size=0, rdzv_handler=None, entrypoint="x")
    with pytest.raises(ValueError, match="entrypoint"):
        WorkerSpec(role="r", local_world_size=1, rdzv_handler=None)
    with pytest.warns(DeprecationWarning):
        s = WorkerSpec(role="r", local_world_size=2, rdzv_handler=None, fn=env_fn)
    assert s.entrypoint is env_fn and s.get_entrypoint_name() == "env_fn"
    assert WorkerSpec(role="r", local_world_size=1, rdzv_handler=None, entrypoint="/usr/bin/python3") \
        .get_entrypoint_name() == "python3"
    g = WorkerGroup(s)
    assert g.state == WorkerState.INIT and [w.local_rank for w in g.workers] == [0, 1]
    assert Worker(3).global_rank == -1
    assert WorkerState.is_running(WorkerState.HEALTHY) and not WorkerState.is_running(WorkerState.STOPPED)
    assert {x.name for x in WorkerState} == {"UNKNOWN", "INIT", "HEALTHY", "UNHEALTHY", "STOPPED", "SUCCEEDED",
                                             "FAILED"}
    assert RunResult(WorkerState.FAILED).is_failed() and not RunResult(WorkerState.SUCCEEDED).is_failed()


def test_restart_once_then_succeed(store, tmp_path, telemetry):
    spec = _spec(store, "flaky", flaky_fn)
    agent = LocalElasticAgent(spec, start_method="spawn", log_dir=str(tmp_path / "logs"))
    result = agent.run()
    spec.rdzv_handler.shutdown()
    assert result.state == WorkerState.SUCCEEDED and not result.is_failed()
    assert agent.restart_count == 1 and agent.get_worker_group().state == WorkerState.SUCCEEDED
    assert set(result.return_values) == {0, 1}
    for rank, env in result.return_values.items():
        assert env["RANK"] == env["LOCAL_RANK"] == env["ROLE_RANK"] == str(rank)
        assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == env["ROLE_WORLD_SIZE"] == "2"
        assert (env["GROUP_RANK"], env["GROUP_WORLD_SIZE"], env["ROLE_NAME"]) == ("0", "1", "trainer")
        assert env["TORCHELASTIC_RESTART_COUNT"] == "1" and env["TORCHELASTIC_MAX_RESTARTS"] == "2"
        assert env["TORCHELASTIC_RUN_ID"] == "flaky" and env["MASTER_ADDR"] == "127.0.0.1"
        assert int(env["MASTER_PORT"]) > 0 and env["TRITENSOR_COMM_SECRET"] == os.environ["TRITENSOR_COMM_SECRET"]
        assert env["TORCHELASTIC_ERROR_FILE"].endswith(f"attempt_1/{rank}/error.json")
    assert sorted(os.listdir(tmp_path / "logs")) == ["attempt_0", "attempt_1"]
    assert os.path.exists(tmp_path / "logs" / "attempt_0" / "0" / "error.json")  # the first attempt's failure
    m, e = telemetry
    by_name = {}
    for d in m.data:
        by_name.setdefault(d.name, []).append(d.value)
    assert by_name["workers.trainer.run_success_with_retries"] == [1]
    assert by_name["workers.trainer.run_failed_no_retries"] == [0]
    assert by_name["workers.trainer.run_total"] == [1]
    assert 1 in by_name["workers.trainer.failed"] and 1 in by_name["workers.trainer.succeeded"]
    assert len(by_name["agent.rendezvous.duration.ms"]) == 2
    assert by_name["SimpleElasticAgent._restart_workers.success"] == [1]
    states = [ev.name for ev in e.events if ev.name.startswith("torchelastic.agent.state.")]
    assert states == ["torchelastic.agent.state.HEALTHY", "torchelastic.agent.state.FAILED",
                      "torchelastic.agent.state.STOPPED", "torchelastic.agent.state.HEALTHY",
                      "torchelastic.agent.state.SUCCEEDED"]
    workers = [ev for ev in e.events if ev.name.startswith("torchelastic.worker.status.")]
    assert sorted(ev.metadata["global_rank"] for ev in workers) == [0, 1]
    assert all(ev.name.endswith("SUCCEEDED") and ev.metadata["agent_restarts"] == 1 for ev in workers)


def test_give_up_after_max_restarts(store, tmp_path, telemetry):
    spec = _spec(store, "doomed", always_fail_fn, max_restarts=1, nproc=1)
    agent = LocalElasticAgent(spec, log_dir=str(tmp_path))
    result = agent.run()
    spec.rdzv_handler.shutdown()
    assert result.state == WorkerState.FAILED and result.is_failed() and agent.restart_count == 1
    assert set(result.failures) == {0} and not result.return_values
    f = result.failures[0]
    assert f.exitcode == 1 and "boom on every attempt" in str(f.message)
    assert f.error_file.endswith("attempt_1/0/error.json") and os.path.exists(f.error_file)
    by_name = {d.name: d.value for d in telemetry[0].data}
    assert by_name["workers.trainer.run_failed_with_retries"] == 1 and by_name["workers.trainer.flakiness"] == 100


def test_two_agents_assign_global_and_role_ranks(store, tmp_path):
    """Two agents (one worker and two workers) form one rendezvous: ranks are offsets by group rank."""
    specs = [_spec(store, "pair", env_fn, nodes=2, nproc=n, max_restarts=0) for n in (1, 2)]
    results = {}

    def go(i):
        results[i] = LocalElasticAgent(specs[i], log_dir=str(tmp_path / str(i)), exit_barrier_timeout=30).run()

    ts = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    for s in specs:
        s.rdzv_handler.shutdown()
    envs = {r: env for res in results.values() for r, env in res.return_values.items()}
    assert sorted(envs) == [0, 1, 2]
    assert {env["WORLD_SIZE"] for env in envs.values()} == {"3"} == {env["ROLE_WORLD_SIZE"] for env in envs.values()}
    assert {env["GROUP_WORLD_SIZE"] for env in envs.values()} == {"2"}
    assert len({(env["MASTER_ADDR"], env["MASTER_PORT"]) for env in envs.values()}) == 1
    for r, env in envs.items():
        assert env["RANK"] == env["ROLE_RANK"] == str(r)
    n0 = sum(env["GROUP_RANK"] == "0" for env in envs.values())
    assert n0 in (1, 2)  # whichever agent became group rank 0, its workers come first
    for env in envs.values():
        offset = 0 if env["GROUP_RANK"] == "0" else n0
        assert int(env["RANK"]) == offset + int(env["LOCAL_RANK"])
        assert env["LOCAL_WORLD_SIZE"] == str(n0 if env["GROUP_RANK"] == "0" else 3 - n0)


def test_custom_handler_returning_the_old_tuple(store, tmp_path):
    """A user's RendezvousHandler may return (store, rank, world_size), as older PyTorch did."""
    from tritensor.elastic.rendezvous import RendezvousHandler

    class Mine(RendezvousHandler):
        def get_backend(self):
            return "mine"

        def next_rendezvous(self):
            return store, 0, 1

        def is_closed(self):
            return False

        def set_closed(self):
            pass

        def num_nodes_waiting(self):
            return 0

        def get_run_id(self):
            return "mine"

        def shutdown(self):
            return True

    spec = WorkerSpec(role="r", local_world_size=1, rdzv_handler=Mine(), entrypoint=env_fn, monitor_interval=0.1)
    result = LocalElasticAgent(spec, log_dir=str(tmp_path)).run()
    assert result.state == WorkerState.SUCCEEDED and result.return_values[0]["TORCHELASTIC_RUN_ID"] == "mine"
