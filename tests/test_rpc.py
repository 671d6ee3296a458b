"""tritensor.comm.rpc: every API with 2 and with 3 workers in subprocesses, and argument checks.

With 2 workers the nested RPC of ``async_execution`` goes back to the caller (worker0) and
every pair of workers talks over one machine's Unix-domain sockets; with 3 it goes to worker2."""

import pytest

import rpc_helpers


@pytest.fixture(scope="module", params=[(2, True), (2, False), (3, True)], ids=["2workers", "2workers-tcp", "3workers"])
def tour(request):
    world, unix = request.param
    res = rpc_helpers.run_rpc(world, "api_tour", env=None if unix else {"TRITENSOR_COMM_UNIX": "0"})
    assert all(r[0] == "ok" for r in res.values()), res
    value, leaks = res[0][1]
    assert leaks == [] and all(r[1][1] == [] for r in res.values())
    # workers on one machine talk over Unix-domain sockets unless TRITENSOR_COMM_UNIX=0
    assert value["socket_families"] == (["AF_UNIX"] if unix else ["AF_INET"])
    return value


def test_calls_and_worker_info(tour):
    from tritensor.comm.rpc import WorkerInfo

    assert tour["add"] == 3 and tour["kwargs"] == [3, 2, 1]
    assert tour["me"] == WorkerInfo("worker0", 0) and tour["w1"] == WorkerInfo("worker1", 1)


def test_tensors_round_trip(tour):
    assert tour["tensors"] and tour["big"]


def test_remote_exception_keeps_type_message_and_traceback(tour):
    name, msg, notes = tour["exc"]
    assert (name, msg) == ("ValueError", "kaboom")
    assert "remote traceback from worker 'worker1'" in notes and "in boom" in notes and "raise ValueError" in notes


def test_timeout_names_worker_and_elapsed(tour):
    msg, elapsed = tour["timeout"]
    assert "worker1" in msg and "timed out after 0." in msg and "timeout 0.5 s" in msg
    assert elapsed < 2.5


def test_async_execution(tour):
    assert tour["async_exec"] == 50  # (2 + 3) * 10, completed by a nested RPC's Future


def test_rref_api(tour):
    from tritensor.comm.rpc import WorkerInfo

    assert tour["remote"] == ("a", False, WorkerInfo("worker1", 1), "worker1", "a+3", "a+4", "a+5")
    assert tour["confirmed"] is True
    assert "only be called on the owner" in tour["local_value_err"] and "to_here()" in tour["local_value_err"]
    assert tour["local"] == (True, [1, 2], [1, 2], "worker0", True)
    assert tour["self_remote"] == 42
    assert "only be sent inside an RPC" in tour["pickle_err"]


def test_rref_context_info_and_deletion(tour):
    assert tour["info_before"]["num_user_rrefs"] >= 1  # r (and maybe the proxy remote's, being deleted)
    assert tour["deleted"] is True
    after = tour["info_after"]
    assert after["num_user_rrefs"] == 0 and after["num_pending_forks"] == 0 and after["num_pending_users"] == 0


def test_no_worker_returns_from_init_before_every_agent_is_installed():
    """worker1 installs its agent a second after publishing its address; worker0's first call,
    made as soon as its own init_rpc returns, must still find worker1 ready."""
    res = rpc_helpers.run_rpc(2, "first_call_right_after_init", opts={"pre_init": "slow_agent_install"})
    assert res[0] == ("ok", (0, [])) and res[1] == ("ok", (None, [])), res


def test_barrier_timeout_names_the_workers_it_waits_for():
    res = rpc_helpers.run_rpc(3, "barrier_without_the_last")
    for r in (0, 1):
        status, (msg, _leaks) = res[r]
        assert status == "ok", res
        assert "'probe'" in msg and "2 of 3 arrived; waiting for 'worker2' (id 2)" in msg, msg
        assert "worker0" not in msg and "worker1" not in msg, msg
    assert res[2][0] == "ok", res


def test_api_checks_before_init():
    import tritensor.comm.rpc as rpc

    with pytest.raises(RuntimeError, match="init_rpc"):
        rpc.rpc_sync("w", print)
    with pytest.raises(RuntimeError, match="init_rpc"):
        rpc.RRef(1)
    with pytest.raises(ValueError, match="num_worker_threads"):
        rpc.TensorPipeRpcBackendOptions(num_worker_threads=0)
    with pytest.raises(ValueError, match="init_method"):
        rpc.TensorPipeRpcBackendOptions(init_method="file:///x")
    with pytest.raises(ValueError, match="world_size"):
        rpc.init_rpc("w", rank=0, world_size=0)
    with pytest.raises(ValueError, match="rank"):
        rpc.init_rpc("w", rank=3, world_size=2)
    with pytest.raises(ValueError, match="probability"):
        rpc.FaultRule(drop=2.0)
    with pytest.raises(ValueError, match="control message type"):
        rpc.FaultInjector(rules={"CALL": rpc.FaultRule()})


def test_fault_injector_is_seeded():
    import tritensor.comm.rpc as rpc

    a, b = rpc.FaultInjector.chaos(5), rpc.FaultInjector.chaos(5)
    plans = [(a.plan("RREF_USER_DELETE", i), b.plan("RREF_USER_DELETE", i)) for i in range(200)]
    assert all(x == y for x, y in plans)
    assert any(x == [] for x, _ in plans) and any(len(x) == 2 for x, _ in plans)
    assert a.plan("CALL", 1) == [0.0]  # user calls are never touched
