"""Worker functions for the RPC/RRef tests (spawned children import them by name).

``run_rpc(n, "fn_name", *args)`` starts ``n`` workers (``worker0`` ...), each running
``init_rpc``, then ``fn(rank, world, *args)``, then ``shutdown()``; returns per rank
``("ok", (value, leak report))`` or ``("err", msg, tb)``.
"""

from __future__ import annotations

import gc
import operator
import os
import time
import weakref

import comm_helpers

_tracked_deleted: list = []
_held: list = []


def _world(rank, world, fn_name, opts_kw, *args):
    import tritensor.comm.rpc as rpc
    from tritensor.comm.rpc import api

    pre_init = opts_kw.pop("pre_init", None)
    if pre_init is not None:
        globals()[pre_init](rank)
    chaos = opts_kw.pop("chaos", None)
    if chaos is not None:
        opts_kw["fault_injector"] = rpc.FaultInjector.chaos(chaos + rank, p=0.3, max_delay=0.01)
        opts_kw.setdefault("control_retry_delay", 0.02)
    opts = rpc.TensorPipeRpcBackendOptions(**opts_kw)
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world, rpc_backend_options=opts)
    try:
        value = globals()[fn_name](rank, world, *args)
    finally:
        from tritensor.comm.rpc import current

        if current.agent() is not None:  # unless the scenario shut down itself (a peer died)
            rpc.shutdown()
    return value, api._last_shutdown_leaks()


def run_rpc(world, fn_name, *args, opts=None, timeout=120.0, env=None):
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(comm_helpers.free_port()), **(env or {})}
    return comm_helpers.run_world(world, _world, fn_name, dict(opts or {}), *args, init=False, env=env,
                                  timeout=timeout)


# ----------------------------------------------------------------- helpers run remotely

def echo(x):
    return x


def boom(msg):
    raise ValueError(msg)


def sleep_then(s, v):
    time.sleep(s)
    return v


class Tracked:
    """A value whose deletion the owner records (weakref finaliser)."""

    def __init__(self, tag):
        self.tag = tag
        weakref.finalize(self, _tracked_deleted.append, tag)

    def get(self, k=0):
        return f"{self.tag}+{k}"


def make_tracked(tag):
    return Tracked(tag)


def deleted_tags():
    gc.collect()
    return list(_tracked_deleted)


def hold(rref):
    _held.append(rref)
    return rref.to_here().tag


def drop_held():
    _held.clear()
    gc.collect()
    return True


def takes_rref(rref):
    return (rref.is_owner(), rref.confirmed_by_owner(), rref.to_here().tag if not rref.is_owner()
            else rref.local_value().tag)


def slow_agent_install(rank):
    """On worker1, leave a second between the agent's rendezvous (peers can call it) and its
    installation as the current agent: the window a loaded CI machine opened by chance."""
    from tritensor.comm.rpc import current

    real = current.set_agent

    def slow(agent):
        if agent is not None and rank == 1:
            time.sleep(1.0)
        real(agent)

    current.set_agent = slow


def barrier_without_the_last(rank, world):
    """Every worker but the last reaches a barrier; the ones waiting must name the one missing."""
    from tritensor.comm.rpc import api

    if rank == world - 1:
        return None
    try:
        api._barrier("probe", 1.5)
    except TimeoutError as e:
        return str(e)
    return "no timeout"


def first_call_right_after_init(rank, world):
    import tritensor.comm.rpc as rpc

    return rpc.rpc_sync("worker1", context_info)["num_owner_rrefs"] if rank == 0 else None


def control_log():
    from tritensor.comm.rpc import api

    return api._control_log()


def context_info():
    from tritensor.comm.rpc import api

    gc.collect()
    return api._rref_context_info()


def owner_shares_with(dst, tag):
    import tritensor.comm.rpc as rpc

    rref = rpc.RRef(Tracked(tag))
    out = rpc.rpc_sync(dst, hold, args=(rref,))
    return out, rref.is_owner(), rref.local_value().tag


def _async_add(to, a, b):
    import tritensor.comm.rpc as rpc

    return rpc.rpc_async(to, operator.add, args=(a, b)).then(lambda f: f.value() * 10)


def _mark_async():
    return async_add


try:
    from tritensor.comm.rpc.functions import async_execution as _async_execution

    @_async_execution
    def async_add(to, a, b):
        return _async_add(to, a, b)
except ImportError:  # pragma: no cover
    pass


def wait_until(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        gc.collect()
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def pid():
    return os.getpid()


# ------------------------------------------------------------------ test scenarios

def api_tour(rank, world):
    """Rank 0 exercises every API against worker1; returns a dict of observations."""
    import numpy as np

    import tritensor as tt
    import tritensor.comm.rpc as rpc
    from tritensor.comm.rpc import api

    if rank != 0:
        return None
    out = {}
    out["add"] = rpc.rpc_sync("worker1", operator.add, args=(1, 2))
    out["kwargs"] = rpc.rpc_async(1, sorted, args=([3, 1, 2],), kwargs={"reverse": True}).wait()
    out["me"] = rpc.get_worker_info()
    out["w1"] = rpc.get_worker_info("worker1")
    arrays = [np.arange(12, dtype=np.float32).reshape(3, 4), np.arange(5, dtype=np.int64),
              np.zeros((0, 3), np.float32), np.float16([1.5, -2.0])]
    tensors = [tt.from_numpy(a) for a in arrays] + [tt.from_numpy(arrays[0]).t()]
    back = rpc.rpc_sync("worker1", echo, args=(tensors,))
    out["tensors"] = all(np.array_equal(b.numpy(), t.numpy()) and b.dtype == t.dtype and b.shape == t.shape
                         for b, t in zip(back, tensors))
    big = tt.from_numpy(np.random.default_rng(0).standard_normal(1 << 18).astype(np.float32))
    out["big"] = np.array_equal(rpc.rpc_sync("worker1", echo, args=({"x": big},))["x"].numpy(), big.numpy())
    try:
        rpc.rpc_sync("worker1", boom, args=("kaboom",))
    except ValueError as e:
        out["exc"] = (type(e).__name__, str(e), "\n".join(getattr(e, "__notes__", [])))
    start = time.monotonic()
    try:
        rpc.rpc_sync("worker1", sleep_then, args=(1.5, 1), timeout=0.5)  # the callee still runs at 0.5 s
    except TimeoutError as e:
        out["timeout"] = (str(e), time.monotonic() - start)
    out["async_exec"] = rpc.rpc_sync("worker1", _mark_async(), args=("worker2" if world > 2 else "worker0", 2, 3))
    r = rpc.remote("worker1", make_tracked, args=("a",))
    out["remote"] = (r.to_here().tag, r.is_owner(), r.owner(), r.owner_name(), r.rpc_sync().get(3),
                     r.rpc_async().get(4).wait(), r.remote().get(5).to_here())
    wait_until(r.confirmed_by_owner)
    out["confirmed"] = r.confirmed_by_owner()
    try:
        r.local_value()
    except RuntimeError as e:
        out["local_value_err"] = str(e)
    mine = rpc.RRef([1, 2])
    out["local"] = (mine.is_owner(), mine.local_value(), mine.to_here(), mine.owner_name(), mine.confirmed_by_owner())
    out["self_remote"] = rpc.remote("worker0", operator.mul, args=(6, 7)).to_here()
    from tritensor.comm.rpc import current

    out["socket_families"] = sorted({c[0].family.name for c in current.agent().links.out.values()})
    out["info_before"] = api._rref_context_info()
    del r, mine
    out["deleted"] = wait_until(lambda: "a" in rpc.rpc_sync("worker1", deleted_tags))
    wait_until(lambda: api._rref_context_info()["num_user_rrefs"] == 0)
    out["info_after"] = api._rref_context_info()
    try:
        pickle_err = None
        import pickle

        pickle.dumps(rpc.RRef(1))
    except TypeError as e:
        pickle_err = str(e)
    out["pickle_err"] = pickle_err
    return out


def sharing_flows(rank, world):
    """Rank 0 (A) runs the seed's flows against B = worker1 (owner) and C = worker2."""
    import tritensor.comm.rpc as rpc
    from tritensor.comm.rpc import api

    if rank != 0:
        return None
    out = {}

    def settle():
        wait_until(lambda: api._rref_context_info()["num_user_rrefs"] == 0
                   and rpc.rpc_sync("worker2", context_info)["num_user_rrefs"] == 0)

    def logs(since):
        return (api._control_log()[since[0]:], rpc.rpc_sync("worker1", control_log)[since[1]:],
                rpc.rpc_sync("worker2", control_log)[since[2]:])

    def mark():
        # Quiesce first: every control message acknowledged on every worker, and a moment for a
        # retransmitted copy already on the wire (a retry sent just before its ack arrived) to
        # land. Otherwise, on a loaded machine, a duplicate REMOTE_RET of the previous step is
        # received inside the next flow's window and the recorded sequence gains a stray entry
        # (seen in CI: flow 4 began with ('recv', 1, 0, 'REMOTE_RET')).
        wait_until(lambda: all(info["num_pending_control"] == 0 for info in (
            api._rref_context_info(), rpc.rpc_sync("worker1", context_info), rpc.rpc_sync("worker2", context_info))))
        time.sleep(0.2)
        return (len(api._control_log()), len(rpc.rpc_sync("worker1", control_log)),
                len(rpc.rpc_sync("worker2", control_log)))

    # 1. user shares with the owner as return value: remote + to_here, then delete
    m = mark()
    r = rpc.remote("worker1", make_tracked, args=("f1",))
    r.to_here()
    del r
    wait_until(lambda: "f1" in rpc.rpc_sync("worker1", deleted_tags))
    out["flow1"] = logs(m)
    # 2. user shares with the owner as argument
    settle()
    r = rpc.remote("worker1", make_tracked, args=("f2",))
    wait_until(r.confirmed_by_owner)
    m = mark()
    out["flow2_result"] = rpc.rpc_sync("worker1", takes_rref, args=(r,))
    del r
    wait_until(lambda: "f2" in rpc.rpc_sync("worker1", deleted_tags))
    out["flow2"] = logs(m)
    # 3. owner shares with a user (B creates RRef(value) and passes it to C)
    settle()
    m = mark()
    out["flow3_result"] = rpc.rpc_sync("worker1", owner_shares_with, args=("worker2", "f3"))
    out["flow3_held"] = "f3" not in rpc.rpc_sync("worker1", deleted_tags)
    rpc.rpc_sync("worker2", drop_held)
    out["flow3_deleted"] = wait_until(lambda: "f3" in rpc.rpc_sync("worker1", deleted_tags))
    out["flow3"] = logs(m)
    # 4. user shares with a user: A -> C, B owns; A drops its reference while C holds one
    settle()
    r = rpc.remote("worker1", make_tracked, args=("f4",))
    wait_until(r.confirmed_by_owner)
    m = mark()
    out["flow4_result"] = rpc.rpc_sync("worker2", hold, args=(r,))
    del r
    wait_until(lambda: api._rref_context_info()["num_user_rrefs"] == 0)
    time.sleep(0.3)
    out["flow4_alive_while_held"] = "f4" not in rpc.rpc_sync("worker1", deleted_tags)
    rpc.rpc_sync("worker2", drop_held)
    out["flow4_deleted"] = wait_until(lambda: "f4" in rpc.rpc_sync("worker1", deleted_tags))
    out["flow4"] = logs(m)
    return out


_gate = __import__("threading").Event()


def wait_for_gate():
    """A remote() function that runs until ``open_gate`` is called (at most 30 s)."""
    _gate.wait(30)
    return "through"


def open_gate():
    _gate.set()


def is_same(a, b):
    return a is b


def fetch_path(rank, world, ops):
    """Rank 0 against worker1: when a remote()'s user is confirmed, whether a tensor
    sent twice arrives as one, and how many RREF_USER_DELETE batches ``ops`` remote() +
    to_here() calls in a loop send."""
    import numpy as np

    import tritensor as tt
    import tritensor.comm.rpc as rpc
    from tritensor.comm.rpc import api

    if rank != 0:
        return None
    out = {}
    r = rpc.remote("worker1", wait_for_gate)
    time.sleep(0.3)  # the REMOTE call has long arrived; its function is still running
    out["confirmed_while_running"] = r.confirmed_by_owner()
    rpc.rpc_sync("worker1", open_gate)
    out["value"] = r.to_here()
    out["confirmed_after_to_here"] = r.confirmed_by_owner()
    del r
    t = tt.from_numpy(np.arange(4, dtype=np.float32))
    out["aliasing_kept"] = rpc.rpc_sync("worker1", is_same, args=(t, t))
    big = tt.from_numpy(np.ones(1 << 18, np.float32))
    wait_until(lambda: api._rref_context_info()["num_user_rrefs"] == 0)
    before = len(api._control_log())
    start = time.monotonic()
    for _ in range(ops):
        rpc.remote("worker1", echo, args=(big,)).to_here()
    wait_until(lambda: api._rref_context_info()["num_user_rrefs"] == 0)
    out["elapsed"] = time.monotonic() - start
    out["deletes"] = sum(1 for e in api._control_log()[before:] if e[:4] == ("send", 0, 1, "RREF_USER_DELETE"))
    return out


_unpickled = [0]


def count_unpickles(rank, world):
    """Patch the agent's unpickler to count calls (called on the agent under fuzz)."""
    from tritensor.comm.rpc import wire

    real = wire.unpickle

    def counting(*a, **k):
        _unpickled[0] += 1
        return real(*a, **k)

    wire.unpickle = counting


def unpickle_count():
    return _unpickled[0]


def agent_stats():
    from tritensor.comm.rpc import current

    return dict(current.agent().stats)


def fuzz_agent(rank, world, n, seed):
    """Rank 1's agent counts unpickles; rank 0 throws n bad connections at its port."""
    import random
    import socket

    import tritensor.comm.rpc as rpc
    from tritensor.comm.backend import auth
    from tritensor.comm.rpc import api, current, wire

    if rank == 1:
        count_unpickles(rank, world)
    api._store.add("fuzz/ready", 1)
    while int(api._store.add("fuzz/ready", 0)) < world:
        time.sleep(0.01)
    if rank != 0:
        return None
    host, port = current.agent().addrs[1]
    rng = random.Random(seed)
    secret = auth.get_secret()
    before = rpc.rpc_sync("worker1", unpickle_count)
    kinds = {}
    for i in range(n):
        kind = rng.choice(["garbage", "truncated_hello", "bad_mac", "frame_no_auth", "authed_garbage", "close"])
        if kind == "authed_garbage" and rng.random() > 0.05:
            kind = "garbage"  # a few: authenticated peers are trusted, but bad frames still just close
        kinds[kind] = kinds.get(kind, 0) + 1
        s = socket.create_connection((host, port), timeout=5)
        try:
            if kind == "garbage":
                s.sendall(rng.randbytes(rng.randrange(1, 200)))
            elif kind == "truncated_hello":
                s.recv(40)
                s.sendall(auth.MAGIC + rng.randbytes(rng.randrange(0, 40)))
            elif kind == "bad_mac":
                s.recv(40)
                s.sendall(auth.MAGIC + rng.randbytes(64))
                s.recv(32)
            elif kind == "frame_no_auth":
                s.sendall(wire.HEADER.pack(wire.MAGIC, wire.VERSION, wire.REQUEST, 1, 10, 0) + b"\x80\x04junk!!")
            elif kind == "authed_garbage":
                auth.client_handshake(s, secret, b"rpc", 5)
                s.sendall(wire.HEADER.pack(wire.MAGIC, wire.VERSION, wire.HELLO, 0, 0, 0))
                s.sendall(rng.randbytes(rng.randrange(1, 64)))
        except OSError:
            pass
        finally:
            s.close()
    after = rpc.rpc_sync("worker1", unpickle_count)
    ok = rpc.rpc_sync("worker1", operator.add, args=(20, 22))
    return {"before": before, "after": after, "ok": ok, "kinds": kinds, "stats": rpc.rpc_sync("worker1", agent_stats)}


# ------------------------------------------------- hostile and failing peers: strangers, dead peers

def _all_reach(key, n):
    from tritensor.comm.rpc import api

    api._store.add(key, 1)
    deadline = time.monotonic() + 60
    while int(api._store.add(key, 0)) < n:
        assert time.monotonic() < deadline, f"timed out waiting for {n} workers at {key}"
        time.sleep(0.01)


def _strangers(agent, dst, n):
    """``n`` idle, unauthenticated TCP connections to worker ``dst``'s RPC listener (and one on
    its Unix socket, which shares the budget)."""
    import socket

    host, port = agent.addrs[dst]
    socks = [socket.create_connection((host, port), timeout=10) for _ in range(n)]
    if agent.unix_paths[dst]:
        u = socket.socket(socket.AF_UNIX)
        u.connect(agent.unix_paths[dst])
        socks.append(u)
    return socks


def idle_strangers(rank, world, n):
    """Rank 0 holds ``n`` idle strangers on worker1's listener while every worker but worker1
    makes its first calls to it: each must succeed (the strangers are dropped at their
    handshake deadline; a crowded-out caller retries until then)."""
    import tritensor.comm.rpc as rpc
    from tritensor.comm.rpc import current

    _all_reach("flood/ready", world)
    held = _strangers(current.agent(), 1, n) if rank == 0 else []
    _all_reach("flood/on", world)
    results = []
    if rank != 1:
        start = time.monotonic()
        results = [rpc.rpc_sync("worker1", operator.add, args=(i, 1)) for i in range(5)]
        results.append(time.monotonic() - start)
    _all_reach("flood/calls_done", world)
    stats = rpc.rpc_sync("worker1", agent_stats) if rank == 0 else None
    for s in held:
        s.close()
    return results, stats


def hold_strangers_long(rank):
    """pre_init: worker1 gives connections 30 s to authenticate, so strangers outlast a call's timeout."""
    from tritensor.comm.rpc import agent

    if rank == 1:
        agent.AUTH_TIMEOUT = 30.0


def crowded_out(rank, world, n):
    """Worker1's listener is full of strangers for longer than worker0's call may wait: the call
    fails within its timeout saying it was crowded out; once they leave, calls succeed."""
    import tritensor.comm.rpc as rpc
    from tritensor.comm.rpc import current

    _all_reach("crowd/ready", world)
    out = None
    if rank == 0:
        held = _strangers(current.agent(), 1, n)
        start = time.monotonic()
        try:
            rpc.rpc_sync("worker1", operator.add, args=(1, 1), timeout=2.0)
            out = ("no error", None, time.monotonic() - start)
        except Exception as e:  # asserted by the test
            out = (type(e).__name__, str(e), time.monotonic() - start)
        for s in held:
            s.close()
        out += (rpc.rpc_sync("worker1", operator.add, args=(2, 2)),)
    _all_reach("crowd/done", world)
    return out


def _dead(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def call_killed_worker(rank, world):
    """worker1 is SIGKILLed after serving a call; worker0's next calls to it fail at once, each
    with one error naming the worker and what happened."""
    import signal

    import tritensor.comm.rpc as rpc

    if rank == 1:
        _all_reach("kill/armed", world)
        while True:
            time.sleep(1)
    victim = rpc.rpc_sync("worker1", pid)  # the connection to worker1 exists now
    _all_reach("kill/armed", world)
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not _dead(victim) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # the kernel closes its sockets
    out = []
    for _ in range(2):
        start = time.monotonic()
        try:
            rpc.rpc_sync("worker1", operator.add, args=(1, 2), timeout=10)
            out.append(("no error", "", time.monotonic() - start))
        except Exception as e:  # asserted by the test
            out.append((type(e).__name__, str(e), time.monotonic() - start))
    rpc.shutdown(graceful=False)
    return out
