"""The backend interface: a backend registered by name runs the collectives' own test matrix.

A toy backend (ranks are threads of this process; each pair of ranks has a queue) is registered
with ``Backend.register_backend("toy", ...)`` as a third-party backend would be, and the same
battery that checks the tcp backend (``comm_helpers.collectives_battery``) runs over it on 1, 2
and 3 ranks. The ranks share this process, so the test gives each thread its own default group
(torch's multi-threaded process group does the same in its tests); every wait of the toy has a
timeout and names the rank it waited for. Also: the registry's names and errors, arguments
checked before the backend is called, and what an operation a backend lacks says.
"""

from __future__ import annotations

import queue
import threading
import time
import uuid

import numpy as np
import pytest
from comm_helpers import collectives_battery, free_port

import tritensor
import tritensor.comm as dist
from tritensor.comm import process_group as pg_mod
from tritensor.comm.backend_api import Backend, CommBackend
from tritensor.comm.work import WorkTracker

TOY_TIMEOUT = 20.0  # seconds a toy rank waits for a peer's message before naming it


# --------------------------------------------------------------------------- the toy backend


def _host(t):
    """A host array view of a tensor argument (NumPy arrays as they are)."""
    if isinstance(t, np.ndarray):
        return t
    return t.detach().numpy()


def _reduce(arrays, op, dtype):
    """Rank-order reduction, accumulated in fp32 for fp16/bf16 (as the tcp backend does)."""
    acc = np.float32 if dtype.name in ("float16", "bfloat16") else dtype
    fn = {dist.ReduceOp.SUM: np.add, dist.ReduceOp.AVG: np.add, dist.ReduceOp.PRODUCT: np.multiply,
          dist.ReduceOp.MIN: np.minimum, dist.ReduceOp.MAX: np.maximum, dist.ReduceOp.BAND: np.bitwise_and,
          dist.ReduceOp.BOR: np.bitwise_or, dist.ReduceOp.BXOR: np.bitwise_xor}[op]
    total = np.array(arrays[0], dtype=acc, copy=True)
    for a in arrays[1:]:
        fn(total, a.astype(acc, copy=False), out=total)
    if op == dist.ReduceOp.AVG:
        total /= len(arrays)
    return total.astype(dtype, copy=False)


class _ToyWorld:
    """The shared part of one toy group: a queue per (sender, receiver)."""

    def __init__(self, size):
        self.boxes = {(s, d): queue.Queue() for s in range(size) for d in range(size)}


_WORLDS: dict = {}
_WORLDS_LOCK = threading.Lock()


class ToyBackend(CommBackend):
    """Each rank runs its operations in posting order on a worker thread of its own: an operation
    puts its messages into the receivers' queues, then takes the ones it expects, each within the
    operation's deadline. Every message carries what the sender is doing, so ranks that disagree
    get an error naming the sender."""

    def __init__(self, world, rank, size, timeout):
        self._world, self._rank, self._size, self._timeout = world, rank, size, timeout
        self._cond = threading.Condition()
        self._tracker = WorkTracker(self._cond)
        self._ops: queue.Queue = queue.Queue()
        self._seq = 0
        self._p2p: dict = {}
        self.calls: list = []  # operation names, in posting order (the tests look)
        self._worker = threading.Thread(target=self._run, name=f"toy-rank-{rank}", daemon=True)
        self._worker.start()

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def name(self):
        return "toy"

    # -- the engine Work.wait drives: the worker completes works, a waiter only waits
    def wait(self, work, deadline):
        with self._cond:
            if not self._cond.wait_for(lambda: work._done, max(0.0, deadline - time.monotonic()) + 5.0):
                raise dist.DistTimeoutError(f"{work.what}: timed out waiting for rank {self._rank}'s toy worker")
        WorkTracker.deliver(self._tracker.take_completed())

    def _run(self):
        while True:
            item = self._ops.get()
            if item is None:
                return
            work, fn = item
            try:
                fn(work)
                exc = None
            except Exception as e:  # the work raises it on wait()
                exc = e
            with self._cond:
                self._tracker.complete(work, exc)
            WorkTracker.deliver(self._tracker.take_completed())

    def _post(self, what, result, fn, seq=None):
        self.calls.append(what)
        if seq is None:
            self._seq += 1
            seq = self._seq
        with self._cond:
            work = self._tracker.new(self, f"{what} #{seq}", self._timeout, result)
        self._ops.put((work, lambda w: fn(w, (what, seq))))
        return work

    def _put(self, dst, key, arr):
        self._world.boxes[(self._rank, dst)].put((key, np.array(arr, copy=True)))

    def _take(self, src, key, work, like=None):
        try:
            got_key, arr = self._world.boxes[(src, self._rank)].get(timeout=max(0.0, work.deadline - time.monotonic()))
        except queue.Empty:
            raise dist.DistTimeoutError(f"{work.what}: timed out after {self._timeout:g}s waiting for rank {src}") \
                from None
        if got_key != key:
            raise dist.DistBackendError(f"{work.what}: rank {src} sent {got_key}, this rank expected {key}")
        if like is not None and (arr.size != like.size or arr.dtype != like.dtype):
            raise dist.DistBackendError(f"{work.what}: rank {src} sent {arr.size} x {arr.dtype}, this rank "
                                        f"expected {like.size} x {like.dtype}")
        return arr

    def _exchange(self, key, work, mine):
        """Send ``mine[q]`` to every other rank q; return what every rank sent this one (own slot: ``mine[r]``)."""
        r = self._rank
        for q in range(self._size):
            if q != r:
                self._put(q, key, mine[q])
        return [mine[r] if q == r else self._take(q, key, work, mine[r]) for q in range(self._size)]

    # -- collectives
    def allreduce(self, tensors, opts):
        t, op = tensors[0], opts.reduceOp

        def run(work, key):
            a = _host(t)
            np.copyto(a, _reduce(self._exchange(key, work, [a.ravel()] * self._size), op, a.dtype).reshape(a.shape))
        return self._post("all_reduce", [t], run)

    def broadcast(self, tensors, opts):
        t, root = tensors[0], opts.rootRank

        def run(work, key):
            a = _host(t)
            if self._rank == root:
                for q in range(self._size):
                    if q != root:
                        self._put(q, key, a.ravel())
            else:
                np.copyto(a, self._take(root, key, work, a.ravel()).reshape(a.shape))
        return self._post("broadcast", [t], run)

    def reduce(self, tensors, opts):
        t, root, op = tensors[0], opts.rootRank, opts.reduceOp

        def run(work, key):
            a = _host(t)
            if self._rank != root:
                self._put(root, key, a.ravel())
                return
            got = [a.ravel() if q == root else self._take(q, key, work, a.ravel()) for q in range(self._size)]
            np.copyto(a, _reduce(got, op, a.dtype).reshape(a.shape))
        return self._post("reduce", [t], run)

    def allgather(self, output_tensors, input_tensors, opts):
        outs, t = output_tensors[0], input_tensors[0]

        def run(work, key):
            for o, got in zip(outs, self._exchange(key, work, [_host(t).ravel()] * self._size)):
                np.copyto(_host(o), got.reshape(_host(o).shape))
        return self._post("all_gather", list(outs), run)

    def _allgather_base(self, output_tensor, input_tensor, opts):
        def run(work, key):
            got = self._exchange(key, work, [_host(input_tensor).ravel()] * self._size)
            np.copyto(_host(output_tensor), np.concatenate(got).reshape(_host(output_tensor).shape))
        return self._post("all_gather_into_tensor", [output_tensor], run)

    def _reduce_scatter(self, out, parts, op, what):
        def run(work, key):
            o = _host(out)
            np.copyto(o, _reduce(self._exchange(key, work, [p.ravel() for p in parts()]), op, o.dtype).reshape(o.shape))
        return self._post(what, [out], run)

    def reduce_scatter(self, output_tensors, input_tensors, opts):
        ins = input_tensors[0]
        return self._reduce_scatter(output_tensors[0], lambda: [_host(t) for t in ins], opts.reduceOp,
                                    "reduce_scatter")

    def _reduce_scatter_base(self, output_tensor, input_tensor, opts):
        return self._reduce_scatter(output_tensor, lambda: np.split(_host(input_tensor).ravel(), self._size),
                                    opts.reduceOp, "reduce_scatter_tensor")

    def alltoall(self, output_tensors, input_tensors, opts):
        def run(work, key):
            r = self._rank
            for q in range(self._size):
                if q != r:
                    self._put(q, key, _host(input_tensors[q]).ravel())
            for q, o in enumerate(output_tensors):
                got = _host(input_tensors[r]).ravel() if q == r else self._take(q, key, work, _host(o).ravel())
                np.copyto(_host(o), got.reshape(_host(o).shape))
        return self._post("all_to_all", list(output_tensors), run)

    def gather(self, output_tensors, input_tensors, opts):
        t, root = input_tensors[0], opts.rootRank
        outs = output_tensors[0] if output_tensors else None

        def run(work, key):
            a = _host(t).ravel()
            if self._rank != root:
                self._put(root, key, a)
                return
            for q, o in enumerate(outs):
                got = a if q == root else self._take(q, key, work, a)
                np.copyto(_host(o), got.reshape(_host(o).shape))
        return self._post("gather", outs, run)

    def scatter(self, output_tensors, input_tensors, opts):
        t, root = output_tensors[0], opts.rootRank
        ins = input_tensors[0] if input_tensors else None

        def run(work, key):
            a = _host(t)
            if self._rank == root:
                for q in range(self._size):
                    if q != root:
                        self._put(q, key, _host(ins[q]).ravel())
                got = _host(ins[root]).ravel()
            else:
                got = self._take(root, key, work, a.ravel())
            np.copyto(a, got.reshape(a.shape))
        return self._post("scatter", [t], run)

    def barrier(self, opts):
        return self._post("barrier", None, lambda work, key: self._exchange(key, work, [np.zeros(0)] * self._size))

    # -- point to point: a message per call, matched in posting order per pair of ranks
    def _next_p2p(self, direction, peer):
        self._p2p[(direction, peer)] = n = self._p2p.get((direction, peer), 0) + 1
        return n

    def send(self, tensors, dstRank, tag):
        t, n = tensors[0], self._next_p2p("to", dstRank)
        return self._post(f"send to rank {dstRank}", [t],
                          lambda work, key: self._put(dstRank, ("p2p", tag, n), _host(t).ravel()), seq=n)

    def recv(self, tensors, srcRank, tag):
        t, n = tensors[0], self._next_p2p("from", srcRank)

        def run(work, key):
            a = _host(t)
            np.copyto(a, self._take(srcRank, ("p2p", tag, n), work, a.ravel()).reshape(a.shape))
            work._source = srcRank
        return self._post(f"recv from rank {srcRank}", [t], run, seq=n)

    def shutdown(self):
        self._ops.put(None)
        self._worker.join(TOY_TIMEOUT)


def _create_toy(store, rank, world_size, timeout):
    """The registered factory (torch's plain API: a store whose keys carry the group's prefix).
    Rank 0 makes the group's queues; the others find them through the store."""
    if rank == 0:
        key = uuid.uuid4().hex
        with _WORLDS_LOCK:
            _WORLDS[key] = _ToyWorld(world_size)
        store.set("toy_world", key)
    else:
        key = store.get("toy_world").decode()
    with _WORLDS_LOCK:
        world = _WORLDS[key]
    return ToyBackend(world, rank, world_size, timeout.total_seconds())


# ------------------------------------------------------------------------------ harness


class _ThreadWorld(threading.local):
    """process_group's global state, one per thread: each thread is a rank with its own default group."""

    def __init__(self):
        pg_mod._State.__init__(self)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setenv("TRITENSOR_COMM_SECRET", "toy-secret")
    monkeypatch.setattr(Backend, "_plugins", dict(Backend._plugins))
    monkeypatch.setattr(Backend, "backend_list", list(Backend.backend_list))
    monkeypatch.setattr(Backend, "backend_capability", dict(Backend.backend_capability))
    monkeypatch.setattr(Backend, "default_device_backend_map", dict(Backend.default_device_backend_map))
    Backend.register_backend("toy", _create_toy, devices=["cpu"])
    monkeypatch.setattr(pg_mod, "_state", _ThreadWorld())
    master = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=TOY_TIMEOUT)
    yield master
    master.close()


def run_threads(master, world, worker, *args, timeout=TOY_TIMEOUT, pg_timeout=TOY_TIMEOUT):
    """``worker(rank, world, *args)`` on ``world`` threads, each in its own toy default group;
    returns {rank: value}; raises the first rank's error. A rank still running after ``timeout`` fails
    the test naming it."""
    results, errors = {}, {}

    def run(r):
        store = dist.TCPStore("127.0.0.1", master.port, timeout=TOY_TIMEOUT)
        try:
            dist.init_process_group("toy", store=store, rank=r, world_size=world, timeout=pg_timeout)
            try:
                results[r] = worker(r, world, *args)
            finally:
                dist.destroy_process_group()
        except BaseException as e:  # raised below, in the test's thread
            errors[r] = e
        finally:
            store.close()

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(world)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = [r for r, t in enumerate(threads) if t.is_alive()]
    assert not stuck, f"toy ranks {stuck} did not finish within {timeout}s"
    if errors:
        raise errors[min(errors)]
    return results


# -------------------------------------------------------------------------------- tests


@pytest.mark.timeout(120)
@pytest.mark.parametrize("world", [1, 2, 3])
def test_battery_over_a_registered_backend(toy, world):
    """The collectives' own test matrix (every collective, dtype, op, size, p2p, a subgroup)."""
    checks = run_threads(toy, world, collectives_battery, 1003, timeout=100)
    assert all(c > 200 for c in checks.values()), checks


def _names(rank, world):
    return (dist.get_backend(), dist.Backend(dist.get_backend()), dist.group.WORLD.name(),
            type(dist.group.WORLD._get_backend()).__name__)


def test_init_process_group_uses_the_registered_backend(toy):
    assert Backend("TOY") == "toy" and "toy" in Backend.backend_list and Backend.TCP in Backend.backend_list
    assert Backend.backend_capability["toy"] == ["cpu"]
    assert run_threads(toy, 2, _names) == {r: ("toy", "toy", "toy", "ToyBackend") for r in range(2)}


def test_backend_names():
    assert Backend("GLOO") == "tcp" and Backend("Tcp") == "tcp" and isinstance(Backend("tcp"), str)
    assert Backend("Custom") == "custom"  # as torch: any name parses; creating a group checks it
    with pytest.raises(ValueError, match="string-ish"):
        Backend(3)
    with pytest.raises(ValueError, match=r"unknown backend 'nccl'; registered backends: \['tcp'"):
        dist.init_process_group("nccl", init_method="tcp://127.0.0.1:1", rank=0, world_size=1)
    with pytest.raises(ValueError, match="alias"):
        Backend.register_backend("gloo", lambda *a: None, devices=["cpu"])
    with pytest.raises(TypeError, match="func"):
        Backend.register_backend("x", None, devices=["cpu"])


def test_register_backend_without_devices_warns_as_torch(toy):
    with pytest.warns(UserWarning, match="Device capability of toy2 unspecified"):
        Backend.register_backend("toy2", _create_toy)
    assert Backend.backend_capability["toy2"] == ["cpu", "cuda"]


def _bad_arguments(rank, world):
    """Each bad call raises naming the argument before the backend sees it."""
    backend = dist.group.WORLD._get_backend()
    before = list(backend.calls)
    t = tritensor.ones(3)
    read_only = np.ones(3, np.float32)
    read_only.flags.writeable = False
    cases = [
        (TypeError, "tensor", lambda: dist.all_reduce([1, 2, 3])),
        (ValueError, "op", lambda: dist.all_reduce(t, op="sum")),
        (TypeError, "AVG", lambda: dist.all_reduce(tritensor.ones(3, dtype=tritensor.int32), op=dist.ReduceOp.AVG)),
        (ValueError, "src=5", lambda: dist.broadcast(t, src=5)),
        (ValueError, "tensor_list", lambda: dist.all_gather([t], t)),
        (ValueError, r"tensor_list\[1\]", lambda: dist.all_gather([t, tritensor.ones(4)], t)),
        (ValueError, "read-only", lambda: dist.all_reduce(read_only)),
        (ValueError, "output_tensor", lambda: dist.all_gather_into_tensor(tritensor.ones(5), t)),
        (ValueError, "input", lambda: dist.reduce_scatter_tensor(t, tritensor.ones(5))),
        (ValueError, "gather_list", lambda: dist.gather(t, [t], dst=0)),
        (ValueError, "tag", lambda: dist.isend(t, dst=1 - rank, tag=1 << 40)),
        (ValueError, "itself", lambda: dist.isend(t, dst=rank)),
    ]
    seen = []
    for exc, match, call in cases:
        with pytest.raises(exc, match=match):
            call()
        seen.append(match)
    assert backend.calls == before, backend.calls  # nothing reached the backend
    dist.barrier()
    return seen


def test_arguments_are_checked_before_the_backend_is_called(toy):
    out = run_threads(toy, 2, _bad_arguments)
    assert len(out[0]) == len(out[1]) == 12


def _any_source(rank, world):
    try:
        dist.recv(tritensor.zeros(2))
    except RuntimeError as e:
        return str(e)
    return "no error"


def test_an_operation_the_backend_lacks_says_so_as_torch(toy):
    assert run_threads(toy, 2, _any_source) == {r: "Backend toy does not support recv_anysource" for r in range(2)}


def _late(rank, world, go):
    if rank == 1:
        go.wait(TOY_TIMEOUT)  # joins only after rank 0 gave up
        return "late"
    try:
        dist.all_reduce(tritensor.ones(2))
    except dist.DistTimeoutError as e:
        return str(e)
    finally:
        go.set()
    return "no error"


def test_a_toy_wait_names_the_rank_it_waited_for(toy):
    out = run_threads(toy, 2, _late, threading.Event(), pg_timeout=0.5)
    assert "timed out" in out[0] and "waiting for rank 1" in out[0] and "all_reduce #1" in out[0], out[0]


def test_the_tcp_backend_is_the_default(monkeypatch):
    monkeypatch.setenv("TRITENSOR_COMM_SECRET", "x")
    dist.init_process_group(init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1, timeout=10)
    try:
        assert dist.get_backend() == "tcp" and dist.group.WORLD.name() == "tcp"
        assert type(dist.group.WORLD._get_backend()).__name__ == "TCPBackend"
        g = dist.new_group([0])
        assert dist.get_backend(g) == "tcp"
    finally:
        dist.destroy_process_group()


def test_the_tcp_wire_codes_cover_the_checked_dtypes():
    """check_tensor lets through exactly the dtypes the tcp backend's headers can name."""
    from tritensor.comm.backend.framing import DTYPE_CODES
    from tritensor.comm.backend_api import SUPPORTED_DTYPES

    assert sorted(DTYPE_CODES) == sorted(SUPPORTED_DTYPES)
