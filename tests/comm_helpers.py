"""Multi-process harness for the tritensor.comm tests.

``run_world(n, worker, *args)`` starts ``n`` processes, initializes a process group over
loopback on a free port in each, runs ``worker(rank, world_size, *args)`` and returns every
rank's outcome. It never hangs: past ``timeout`` every child is killed and the test fails.
Worker functions live in this module so that children can import them by name (conftest.py
puts tests/ on sys.path, and multiprocessing hands sys.path to the children).

How the ranks start: forked from multiprocessing's fork server, which imported tritensor and
these helpers once (``PRELOAD``), instead of each rank starting a fresh interpreter and
importing tritensor again (about 0.4 s of CPU per rank, half of the suite's CPU before). The
fork server is as clean as a spawned child: none of the parent's threads, sockets or test
state, and each rank takes the parent's environment as it is at ``run_world`` (what spawn gives
it). Only the variables tritensor reads at import (``IMPORT_TIME_ENV``) are the fork server's:
a run whose environment sets one of them otherwise starts its ranks with spawn. In GPU mode the
ranks are always spawned (a process forked after CUDA was initialised cannot use it).
"""

from __future__ import annotations

import multiprocessing as mp
from multiprocessing import forkserver
import os
import queue
import socket
import time
import traceback

from tritensor.runtime import mode

SECRET = "tritensor-comm-tests-secret"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PRELOAD = ["tritensor", "tritensor.comm", "tritensor.comm.rpc", "tritensor.nn.parallel",
           "comm_helpers", "rpc_helpers", "ddp_helpers"]
IMPORT_TIME_ENV = ("TRITENSOR_DEVICE", "TRITON_INTERPRET", "TRITENSOR_RECORD_LAUNCHES", "TRITENSOR_COMM_SOCKBUF",
                   "TRITENSOR_COMM_TCP_SOCKBUF", "TRITENSOR_RPC_SOCKBUF")
_server_env: dict | None = None  # IMPORT_TIME_ENV as the fork server imported tritensor with it


def _context(env: dict):
    """The fork server's context, or spawn's when ``env`` differs from it in an import-time variable,
    and always on a GPU: importing tritensor there initialises the CUDA driver (``runtime/mode.py``),
    and a process forked from one that has cannot use CUDA."""
    global _server_env
    if mode.GPU:
        return mp.get_context("spawn")
    if _server_env is None:  # start the server now, in this environment, with tritensor imported
        _server_env = {k: os.environ.get(k) for k in IMPORT_TIME_ENV}
        mp.get_context("forkserver").set_forkserver_preload(PRELOAD)
        forkserver.ensure_running()
    same = all(env.get(k) == _server_env[k] for k in IMPORT_TIME_ENV)
    return mp.get_context("forkserver" if same else "spawn")


def _use_test_device():
    """A rank makes its tensors where the test process does: conftest's TRITENSOR_TEST_DEVICE=cuda
    makes the default device cuda in the pytest process only, and a rank is a process of its own,
    so without this the workers' models and collectives ran on host tensors in the device variant.
    ``.numpy()`` of a device tensor copies it back, as conftest makes it do."""
    if os.environ.get("TRITENSOR_TEST_DEVICE", "cpu").strip().lower() != "cuda":
        return
    import tritensor

    tritensor.set_default_device("cuda")
    numpy = tritensor.Tensor.numpy
    tritensor.Tensor.numpy = lambda self, *, force=False: numpy(self, force=force or self.device.type == "cuda")


def _entry(worker, rank, world, port, q, args, pg_timeout, env, init):
    os.environ.clear()
    os.environ.update(env)
    try:
        _use_test_device()
        import tritensor.comm as dist

        if init:
            dist.init_process_group("tcp", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                    world_size=world, timeout=pg_timeout)
        value = worker(rank, world, *args)
        q.put((rank, "ok", value))
    except BaseException as e:  # reported to the parent, which asserts on it
        q.put((rank, "err", f"{type(e).__name__}: {e}", traceback.format_exc()))
    finally:
        try:
            import tritensor.comm as dist

            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:
            pass


def run_world(world: int, worker, *args, timeout: float = 120.0, pg_timeout: float = 30.0,
              env: dict | None = None, init: bool = True, rank_env=None) -> dict:
    """Run ``worker`` on ``world`` ranks; return {rank: ("ok", value) | ("err", msg, tb) | ("died", code)}.

    ``env`` is added to every child's environment, ``rank_env(rank)`` to one rank's."""
    port = free_port()
    full_env = {**os.environ, "TRITENSOR_COMM_SECRET": SECRET, **(env or {})}
    ctx = _context(full_env)
    q = ctx.Queue()
    procs = [ctx.Process(target=_entry, args=(worker, r, world, port, q, args, pg_timeout,
                                              {**full_env, **(rank_env(r) if rank_env else {})}, init),
                         daemon=True) for r in range(world)]
    for p in procs:
        p.start()
    results: dict = {}
    deadline = time.monotonic() + timeout
    try:
        while len(results) < world:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                item = q.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                # A rank that died without reporting counts once all survivors have reported.
                dead = [r for r, p in enumerate(procs) if not p.is_alive() and r not in results]
                if dead and all(not p.is_alive() or r in results for r, p in enumerate(procs)):
                    for r in dead:
                        results[r] = ("died", procs[r].exitcode)
                continue
            results[item[0]] = item[1:]
    finally:
        for p in procs:
            p.join(timeout=max(0.1, min(5.0, deadline - time.monotonic())))
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
    if len(results) < world:
        missing = [r for r in range(world) if r not in results]
        raise AssertionError(f"ranks {missing} did not finish within {timeout}s; got {results}")
    return results


def assert_all_ok(results: dict):
    bad = {r: v for r, v in results.items() if v[0] != "ok"}
    assert not bad, "\n".join(f"rank {r}: {v[1]}\n{v[2] if len(v) > 2 else ''}" for r, v in sorted(bad.items()))
    return {r: v[1] for r, v in results.items()}


# ------------------------------------------------------------------ collective battery
# Inputs are small integers, so every sum, product, min and max is exact in every dtype
# (fp16 and bf16 included) whatever order a ring adds in: results are compared exactly.

def rank_values(q: int, n: int, dtype_name: str, salt: int = 0):
    import numpy as np

    i = np.arange(n, dtype=np.int64)
    if dtype_name == "bool":
        return ((i + q + salt) % 3 == 0)
    v = (i * 7 + q * 3 + salt) % 5 - 2  # in [-2, 2]
    if dtype_name in ("uint8",):
        v = v + 2
    return v


def _np_dtype(dt):
    return dt.np if hasattr(dt, "np") else dt


def _reference(op_name, arrays, np_dtype, world):
    import numpy as np

    acc = [a.astype(np.float64) if a.dtype != np.bool_ else a for a in arrays]
    if np_dtype == np.bool_:
        fn = {"SUM": np.logical_or, "MAX": np.logical_or, "PRODUCT": np.logical_and, "MIN": np.logical_and}[op_name]
    else:
        fn = {"SUM": np.add, "AVG": np.add, "PRODUCT": np.multiply, "MIN": np.minimum, "MAX": np.maximum}[op_name]
    out = acc[0]
    for a in acc[1:]:
        out = fn(out, a)
    if op_name == "AVG":
        out = out / world
    return out.astype(np_dtype)


def collectives_battery(rank, world, large_elems):
    """Every collective over dtypes, ops and sizes; raises AssertionError on the first mismatch."""
    import numpy as np
    import tritensor as tt
    import tritensor.comm as dist

    checks = 0
    dtypes = [tt.float32, tt.float64, tt.float16, tt.bfloat16, tt.int32, tt.int64, tt.bool]
    small = [0, 1, world + 1, 257]  # world + 1 and 257 are not multiples of 2, 3 or 4

    def T(arr, dt):
        return tt.from_numpy(np.ascontiguousarray(arr).astype(_np_dtype(dt)))

    def eq(t, expected, what):
        nonlocal checks
        got = t.numpy() if hasattr(t, "numpy") else t
        if not np.array_equal(np.asarray(got, dtype=np.float64) if got.dtype != np.bool_ else got,
                              np.asarray(expected, dtype=np.float64) if expected.dtype != np.bool_ else expected):
            raise AssertionError(f"rank {rank}: {what}: got {got.ravel()[:8]} expected {expected.ravel()[:8]}")
        checks += 1

    # all_reduce: all dtypes x ops x small sizes
    for dt in dtypes:
        npd = np.dtype(_np_dtype(dt))
        ops = ["SUM", "PRODUCT", "MIN", "MAX"] + (["AVG"] if dt.is_floating_point else [])
        for n in small:
            for op in ops:
                inputs = [rank_values(q, n, npd.name).astype(npd) for q in range(world)]
                t = T(inputs[rank], dt)
                dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
                exp = _reference(op, inputs, npd, world)
                if op == "AVG" and world == 3:
                    # sum/3 is inexact: one rounding of the fp32 (fp64 for float64) quotient
                    tol = {"float16": 1e-3, "bfloat16": 8e-3}.get(npd.name, 1e-6)
                    assert np.allclose(t.numpy().astype(np.float64), exp.astype(np.float64), rtol=tol, atol=tol), dt
                else:
                    eq(t, exp, f"all_reduce {op} {npd.name} n={n}")
    # all_reduce: large sizes (ring path), a few dtype/op pairs
    for dt, op in [(tt.float32, "SUM"), (tt.float16, "SUM"), (tt.int64, "MAX"), (tt.bfloat16, "MIN"),
                   (tt.float64, "PRODUCT")]:
        npd = np.dtype(_np_dtype(dt))
        inputs = [rank_values(q, large_elems, npd.name).astype(npd) for q in range(world)]
        t = T(inputs[rank], dt)
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        eq(t, _reference(op, inputs, npd, world), f"all_reduce large {op} {npd.name}")
    # fp16 sums accumulate in fp32: 1024 + 0.5 + 0.5 + ... would stay 1024 in fp16 arithmetic
    if world >= 3:
        for n in (3, large_elems):
            v = np.full(n, 1024.0 if rank == 0 else 0.5, np.float16)
            t = T(v, tt.float16)
            dist.all_reduce(t)
            eq(t, np.full(n, np.float16(1024 + 0.5 * (world - 1))), f"fp16 accumulation n={n}")
    # non-contiguous tensor (a transposed view) is reduced in place
    base = tt.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4) + rank)
    view = base.t() if hasattr(base, "t") else base
    dist.all_reduce(view)
    eq(base, sum(np.arange(12, dtype=np.float32).reshape(3, 4) + q for q in range(world)), "non-contiguous")
    # async_op + get_future
    t = T(np.full(5, rank + 1.0), tt.float32)
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future().then(lambda f: f.value()[0].numpy().sum())
    assert work.wait() is True and work.is_completed()
    total = sum(range(1, world + 1))
    assert fut.wait() == 5.0 * total, fut.wait()
    eq(t, np.full(5, float(total), np.float32), "async all_reduce")

    for n in small + [large_elems]:
        for dt in ([tt.float32, tt.bfloat16, tt.int64, tt.bool] if n != large_elems else [tt.float32]):
            npd = np.dtype(_np_dtype(dt))
            vals = [rank_values(q, n, npd.name, salt=1).astype(npd) for q in range(world)]
            # broadcast from every source
            for src in range(world):
                t = T(vals[rank], dt)
                dist.broadcast(t, src=src)
                eq(t, vals[src], f"broadcast src={src} {npd.name} n={n}")
            # reduce to the last rank
            dst = world - 1
            t = T(vals[rank], dt)
            dist.reduce(t, dst=dst, op=dist.ReduceOp.MAX)
            eq(t, _reference("MAX", vals, npd, world) if rank == dst else vals[rank], f"reduce {npd.name} n={n}")
            # all_gather into a list and into one tensor
            outs = [T(np.zeros(n), dt) for _ in range(world)]
            dist.all_gather(outs, T(vals[rank], dt))
            for q in range(world):
                eq(outs[q], vals[q], f"all_gather[{q}] {npd.name} n={n}")
            out = T(np.zeros(n * world), dt)
            dist.all_gather_into_tensor(out, T(vals[rank], dt))
            eq(out, np.concatenate(vals), f"all_gather_into_tensor {npd.name} n={n}")
            # reduce_scatter: rank r gets the sum over q of q's input_list[r]
            if dt is not tt.bool:
                ins = [[rank_values(q, n, npd.name, salt=10 + j).astype(npd) for j in range(world)] for q in range(world)]
                out = T(np.zeros(n), dt)
                dist.reduce_scatter(out, [T(a, dt) for a in ins[rank]])
                eq(out, _reference("SUM", [ins[q][rank] for q in range(world)], npd, world), f"reduce_scatter n={n}")
                out = T(np.zeros(n), dt)
                dist.reduce_scatter_tensor(out, T(np.concatenate(ins[rank]), dt), op=dist.ReduceOp.MIN)
                eq(out, _reference("MIN", [ins[q][rank] for q in range(world)], npd, world), f"reduce_scatter_tensor n={n}")
            # gather / scatter with root 0
            gl = [T(np.zeros(n), dt) for _ in range(world)] if rank == 0 else None
            dist.gather(T(vals[rank], dt), gl, dst=0)
            if rank == 0:
                for q in range(world):
                    eq(gl[q], vals[q], f"gather[{q}] n={n}")
            t = T(np.zeros(n), dt)
            dist.scatter(t, [T(v, dt) for v in vals] if rank == 0 else None, src=0)
            eq(t, vals[rank], f"scatter n={n}")
            # all_to_all: rank r sends block (r, j) to rank j
            blocks = lambda r, j: rank_values(r * world + j, n, npd.name).astype(npd)  # noqa: E731
            outs = [T(np.zeros(n), dt) for _ in range(world)]
            dist.all_to_all(outs, [T(blocks(rank, j), dt) for j in range(world)])
            for q in range(world):
                eq(outs[q], blocks(q, rank), f"all_to_all[{q}] n={n}")
    dist.barrier()
    # point to point: a ring of isend/irecv (both directions progress together), then send/recv
    if world > 1:
        right, left = (rank + 1) % world, (rank - 1) % world
        for n in (0, 3, large_elems):
            send_t = T(rank_values(rank, n, "float32"), tt.float32)
            recv_t = T(np.zeros(n), tt.float32)
            w1 = dist.isend(send_t, dst=right, tag=7)
            w2 = dist.irecv(recv_t, src=left, tag=7)
            w1.wait()
            w2.wait()
            eq(recv_t, rank_values(left, n, "float32").astype(np.float32), f"isend/irecv n={n}")
        if rank == 0:
            dist.send(T(np.arange(4), tt.int32), dst=world - 1)
        elif rank == world - 1:
            t = T(np.zeros(4), tt.int32)
            assert dist.recv(t, src=0) == 0
            eq(t, np.arange(4, dtype=np.int32), "send/recv")
    # a subgroup: every rank calls new_group; members reduce among themselves
    if world >= 3:
        members = [0, world - 1]
        g = dist.new_group(members)
        if rank in members:
            assert dist.get_rank(g) == members.index(rank) and dist.get_world_size(g) == 2
            t = T(np.full(3, rank), tt.int64)
            dist.all_reduce(t, group=g)
            eq(t, np.full(3, sum(members), np.int64), "subgroup all_reduce")
        else:
            assert g is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(g) == -1
        dist.barrier()
    assert dist.get_rank() == rank and dist.get_world_size() == world and dist.is_initialized()
    return checks


# ------------------------------------------------------------------------- fault workers

def die_mid_collective(rank, world, elems, victim):
    """The victim starts a big all_reduce and kills itself; the others report what they saw."""
    import signal

    import numpy as np
    import tritensor as tt
    import tritensor.comm as dist

    t = tt.from_numpy(np.ones(elems, np.float32))
    dist.barrier()
    if rank == victim:
        dist.all_reduce(t, async_op=True)
        # Die 2 ms into it. 50 ms was too long: unloaded, the whole 64 MB ring finished first and
        # the others saw no fault. The ring's later steps need data from the other ranks, so
        # after 2 ms the victim is still mid-collective with bytes in flight.
        time.sleep(0.002)
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        dist.all_reduce(t)
        first = None
    except Exception as e:
        first = f"{type(e).__name__}: {e}"
    elapsed = time.monotonic() - start
    small = tt.ones(3)  # made before the clock starts: in GPU mode its fill is the process's first kernel
    try:  # the next collective must raise too, at once
        start2 = time.monotonic()
        dist.all_reduce(small)
        second = None
    except Exception as e:
        second = f"{type(e).__name__}: {e}"
    return first, elapsed, second, time.monotonic() - start2


def mismatched(rank, world, kind):
    import numpy as np
    import tritensor as tt
    import tritensor.comm as dist

    n = 1000 + (8 if rank == 1 else 0)
    if kind == "all_reduce_size":
        dist.all_reduce(tt.ones(n))
    elif kind == "all_reduce_size_large":
        dist.all_reduce(tt.ones(200_000 + (1 if rank == 1 else 0)))
    elif kind == "dtype":
        dist.all_reduce(tt.ones(100, dtype=tt.float64 if rank == 1 else tt.float32))
    elif kind == "broadcast_size":
        dist.broadcast(tt.ones(n), src=0)
    elif kind == "all_gather_size":
        dist.all_gather([tt.zeros(n) for _ in range(world)], tt.ones(n))
    elif kind == "reduce_op":
        dist.all_reduce(tt.ones(10), op=dist.ReduceOp.MAX if rank == 1 else dist.ReduceOp.SUM)
    elif kind == "broadcast_src":
        dist.broadcast(tt.ones(1 << 18), src=1 if rank == 1 else 0)
    elif kind == "op_order":
        if rank == 1:
            dist.broadcast(tt.ones(10), src=0)
        else:
            dist.all_reduce(tt.ones(10))
    return "no error"


def late_rank(rank, world, sleep_s):
    """Rank 1 never joins the collective: rank 0 must time out naming it."""
    import tritensor as tt
    import tritensor.comm as dist

    if rank == 1:
        time.sleep(sleep_s)
        return "slept"
    start = time.monotonic()
    try:
        dist.all_reduce(tt.ones(10))
    except Exception as e:
        return f"{type(e).__name__}: {e}", time.monotonic() - start
    return "no error", time.monotonic() - start


def env_init(rank, world):
    """init_process_group(init_method='env://') with MASTER_ADDR/PORT, RANK, WORLD_SIZE."""
    import tritensor as tt
    import tritensor.comm as dist

    dist.init_process_group("tcp", timeout=30)
    t = tt.full((4,), float(dist.get_rank()))
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.tolist(), dist.get_rank(), dist.get_world_size()


def tensors_requiring_grad(rank, world):
    """Collectives on parameters and other leaves that require grad act on their data
    (torch's gloo accepts them), with or without no_grad, and autograd records nothing."""
    import numpy as np
    import tritensor as tt
    import tritensor.comm as dist
    from tritensor import nn

    total = float(sum(range(world)))
    lin = nn.Linear(3, 2)
    for p in lin.parameters():
        dist.broadcast(p, 0)  # what user code does at start-up
    w0 = lin.weight.detach().numpy().copy()
    dist.broadcast(lin.weight.detach(), 0)
    assert np.array_equal(lin.weight.detach().numpy(), w0)
    leaf = tt.full((5,), float(rank), requires_grad=True)
    dist.all_reduce(leaf)
    big = nn.Parameter(tt.full((70_000,), float(rank)))  # the ring path
    dist.all_reduce(big, op=dist.ReduceOp.MAX)
    with tt.no_grad():
        under = tt.full((3,), float(rank), requires_grad=True)
        dist.all_reduce(under)
    strided = tt.full((4, 6), float(rank), requires_grad=True)
    dist.all_reduce(strided.detach().t())  # a non-contiguous view of a leaf's data
    outs = [tt.zeros(2, requires_grad=True) for _ in range(world)]
    dist.all_gather(outs, tt.full((2,), float(rank), requires_grad=True))
    for t, want in ((leaf, total), (big, float(world - 1)), (under, total), (strided, total)):
        assert t.is_leaf and t.requires_grad and t.grad_fn is None, t
        assert np.all(t.detach().numpy() == want), (t, want)
    assert [o.tolist() for o in outs] == [[float(q)] * 2 for q in range(world)]
    (leaf * leaf).sum().backward()  # the reduced value is an ordinary leaf: d/dx x^2 = 2x
    assert leaf.grad.tolist() == [2 * total] * 5, leaf.grad
    return [w.tolist() for w in (lin.weight.detach(),)] + [lin.bias.tolist()]


# --------------------------------------------------------------------- device tensors

class FakeCudaTensor:
    """Stands in for a CUDA tensor on machines without a GPU: ``numpy()`` raises, as it does
    for a real one, so collectives must stage through ``cpu()`` and write back with ``copy_``.
    Views (``reshape``, slices) share the "device memory" and the copy counters.

    Its device is a real ``cuda:0``: where a device exists (the simulated one, a GPU) the staging
    code makes its side stream on that device and orders the copies on it, so the stand-in must
    name a device ``tritensor.cuda.Stream`` accepts."""

    def __init__(self, host, stats=None):
        import tritensor as tt

        # the "device memory": host memory, so that cpu() gives a host tensor as a real one does (a
        # device tensor made on the test device is copied here once; views share the host memory)
        self._host = host.cpu()
        self.device = tt.device("cuda", 0)
        self.dtype = host.dtype
        self.shape = host.shape
        self.stats = stats if stats is not None else {"d2h_bytes": 0, "h2d": 0}

    def numel(self):
        return self._host.numel()

    def numpy(self):
        raise TypeError("can't convert cuda tensor to numpy")

    def reshape(self, *shape):
        return FakeCudaTensor(self._host.reshape(*shape), self.stats)

    def __getitem__(self, index):
        return FakeCudaTensor(self._host[index], self.stats)

    def cpu(self):
        self.stats["d2h_bytes"] += self._host.numel() * self._host.element_size()
        return self._host.clone()

    def copy_(self, src):
        self.stats["h2d"] += 1
        self._host.copy_(src)
        return self


def fake_cuda(rank, world):
    import numpy as np
    import tritensor as tt
    import tritensor.comm as dist

    total = sum(range(world))
    for n, dt in ((5, tt.float32), (300_001, tt.float32), (300_001, tt.float16)):  # direct, ring, ring in fp32
        t = FakeCudaTensor(tt.full((n,), float(rank), dtype=dt))
        dist.all_reduce(t)
        assert np.array_equal(t._host.float().numpy(), np.full(n, total, np.float32)), t._host.numpy()[:4]
        # every byte crossed to the host exactly once (whole, or segment by segment), and came back once
        assert t.stats == {"d2h_bytes": n * t._host.element_size(), "h2d": 1}, t.stats
    src = FakeCudaTensor(tt.full((7,), float(rank)))
    dist.broadcast(src, src=0)
    assert src._host.tolist() == [0.0] * 7 and src.stats["h2d"] == (0 if rank == 0 else 1)
    outs = [FakeCudaTensor(tt.zeros(3)) for _ in range(world)]
    dist.all_gather(outs, FakeCudaTensor(tt.full((3,), float(rank))))
    assert [o._host.tolist() for o in outs] == [[float(q)] * 3 for q in range(world)]
    return True


def cuda_battery(rank, world):
    """Real CUDA tensors (run where a GPU is lent)."""
    import numpy as np
    import tritensor as tt
    import tritensor.comm as dist

    for n, dt in ((1, tt.float32), (1000, tt.float16), (3_000_001, tt.float32), (4097, tt.bfloat16)):
        vals = [rank_values(q, n, "float32").astype(np.float32) for q in range(world)]
        t = tt.from_numpy(vals[rank]).to(dt).cuda()
        dist.all_reduce(t)
        assert np.array_equal(t.float().cpu().numpy(), sum(vals)), (n, dt)
        b = tt.from_numpy(vals[rank]).to(dt).cuda()
        dist.broadcast(b, src=world - 1)
        assert np.array_equal(b.float().cpu().numpy(), vals[world - 1])
        outs = [tt.zeros(n, dtype=dt, device="cuda") for _ in range(world)]
        dist.all_gather(outs, tt.from_numpy(vals[rank]).to(dt).cuda())
        for q in range(world):
            assert np.array_equal(outs[q].float().cpu().numpy(), vals[q])
    w = dist.all_reduce(tt.ones(10, device="cuda"), async_op=True)
    assert w.wait() and w.get_future().value()[0].cpu().tolist() == [float(world)] * 10
    return True


class BrokenCudaTensor(FakeCudaTensor):
    """A device tensor whose copies to the host fail (a device error mid-collective)."""

    def reshape(self, *shape):
        return BrokenCudaTensor(self._host.reshape(*shape), self.stats)

    def __getitem__(self, index):
        return BrokenCudaTensor(self._host[index], self.stats)

    def cpu(self):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")


def device_copy_fails(rank, world):
    import tritensor as tt
    import tritensor.comm as dist

    cls = BrokenCudaTensor if rank == 1 else FakeCudaTensor
    try:
        dist.all_reduce(cls(tt.ones(300_001)))  # the ring path stages segment by segment
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return "no error"


# --------------------------------------------------------------- any-source receives
# Phases are separated by barriers: a barrier is a collective, which an any-source receive
# never takes, so no phase's message can be claimed by another phase's receive.

def any_source(rank, world):
    """recv/irecv with src=None: senders collected once each, ranks returned, MPI ordering."""
    import numpy as np
    import tritensor as tt
    import tritensor.comm as dist

    def payload(sender, phase, n=4):
        return np.arange(n, dtype=np.float32) + 100 * sender + 10 * phase

    def got(t, sender, phase, what):
        assert np.array_equal(t.numpy(), payload(sender, phase, t.numel())), (what, t.tolist(), sender)

    # 1. rank 0 receives from any rank once per other rank: each sender exactly once
    if rank == 0:
        seen = []
        for _ in range(world - 1):
            t = tt.zeros(4)
            src = dist.recv(t)
            got(t, src, 1, "recv(src=None)")
            seen.append(src)
        assert sorted(seen) == list(range(1, world)), seen
    else:
        dist.send(tt.from_numpy(payload(rank, 1)), dst=0)
    dist.barrier()
    # 2. a ring: every rank irecv(src=None) while its left neighbour sends to it
    left, right = (rank - 1) % world, (rank + 1) % world
    t = tt.zeros(3, dtype=tt.float32)
    w = dist.irecv(t)
    s = dist.isend(tt.from_numpy(payload(rank, 2, 3)), dst=right)
    assert w.wait() and s.wait()
    assert w._source_rank() == left, w._source_rank()
    got(t, left, 2, "irecv(src=None)")
    dist.barrier()
    # 3. rank 1 sends A then B then C then D to rank 0
    if rank == 1:
        for phase in (30, 31, 32, 33):
            dist.send(tt.from_numpy(payload(1, phase)), dst=0)
    elif rank == 0:
        ts = [tt.zeros(4) for _ in range(4)]
        w_a = dist.irecv(ts[0], src=1)  # a specific receive posted first keeps its peer's first message
        w_b = dist.irecv(ts[1])
        w_c = dist.irecv(ts[2])  # any-source posted before a specific one takes the earlier message
        w_d = dist.irecv(ts[3], src=1)
        for w in (w_d, w_c, w_b, w_a):  # waiting out of order changes nothing
            w.wait()
        assert (w_b._source_rank(), w_c._source_rank(), w_d._source_rank()) == (1, 1, 1)
        for t, phase in zip(ts, (30, 31, 32, 33)):
            got(t, 1, phase, f"ordering phase {phase}")
        # the engine's sequence numbers stayed in step with rank 1's sends: one more, specific
    dist.barrier()
    if world >= 3:
        # 4. tags: an any-source receive takes only its tag; rank 2's other-tag message
        # goes to the specific receive posted after it
        if rank == 2:
            dist.send(tt.from_numpy(payload(2, 40)), dst=0, tag=6)
            dist.send(tt.from_numpy(payload(2, 41)), dst=0, tag=5)
        elif rank == 0:
            t5, t6 = tt.zeros(4), tt.zeros(4)
            w5 = dist.irecv(t5, tag=5)
            w6 = dist.irecv(t6, src=2, tag=6)
            w6.wait()
            w5.wait()
            assert w5._source_rank() == 2
            got(t6, 2, 40, "tag 6")
            got(t5, 2, 41, "tag 5")
        dist.barrier()
    # 5. an any-source receive pending across a collective: it never takes a collective's message
    x = tt.full((5,), float(rank + 1))
    if rank == 0:
        t = tt.zeros(4)
        w = dist.irecv(t)
        dist.all_reduce(x)
        w.wait()
        assert w._source_rank() == world - 1
        got(t, world - 1, 5, "across all_reduce")
    else:
        dist.all_reduce(x)
        if rank == world - 1:
            dist.send(tt.from_numpy(payload(rank, 5)), dst=0)
    assert x.tolist() == [float(sum(range(1, world + 1)))] * 5
    dist.barrier()
    # 6. zero elements, and a specific receive after all of the above still matches
    if rank == 1:
        dist.send(tt.zeros(0), dst=0)
        dist.send(tt.from_numpy(payload(1, 6)), dst=0)
    elif rank == 0:
        assert dist.recv(tt.zeros(0)) == 1
        t = tt.zeros(4)
        assert dist.recv(t, src=1) == 1
        got(t, 1, 6, "specific after any-source")
    dist.barrier()
    return True


def any_source_timeout(rank, world):
    """Nobody sends: rank 0's any-source wait times out naming "any rank"; rank 1 hears why."""
    import tritensor as tt
    import tritensor.comm as dist

    start = time.monotonic()
    try:
        if rank == 0:
            dist.irecv(tt.zeros(4)).wait(timeout=1.0)
        else:
            dist.recv(tt.zeros(4), src=0)
    except Exception as e:
        return f"{type(e).__name__}: {e}", time.monotonic() - start
    return "no error", time.monotonic() - start


def any_source_mismatch(rank, world):
    """Rank 1 sends 5 elements to an any-source receive of 4: rank 0 raises, rank 1's next call too."""
    import tritensor as tt
    import tritensor.comm as dist

    dist.barrier()
    try:
        if rank == 0:
            dist.recv(tt.zeros(4))
        elif rank == 1:
            dist.send(tt.ones(5), dst=0)  # handed to the network: returns before rank 0 looks
        dist.barrier()
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return "no error"


def any_source_sender_dies(rank, world):
    """Rank 0 takes rank 1's message from any rank, then waits again while rank 2 is killed."""
    import signal

    import tritensor as tt
    import tritensor.comm as dist

    if rank == 1:
        dist.send(tt.ones(4), dst=0)
        return "sent"
    if rank == 2:
        dist.recv(tt.zeros(1), src=0)  # rank 0 got rank 1's message: now die
        os.kill(os.getpid(), signal.SIGKILL)
    assert dist.recv(tt.zeros(4)) == 1
    dist.send(tt.zeros(1), dst=2)
    start = time.monotonic()
    try:
        dist.recv(tt.zeros(4))
    except Exception as e:
        return f"{type(e).__name__}: {e}", time.monotonic() - start
    return "no error", time.monotonic() - start


# --------------------- process-group hardening: hung store host, failed outputs, named ranks

def store_host_hangs(rank, world, group_timeout):
    """Rank 0 (the store's host) stops itself (SIGSTOP) while the others run an all_reduce on a
    group with a short timeout; they report how long raising took, then wake rank 0 up (whichever
    survivor is first: rank 0 may be gone by the time the other one tries)."""
    import signal

    import numpy as np
    import tritensor as tt
    import tritensor.comm as dist

    g = dist.new_group(list(range(world)), timeout=group_timeout)
    pids = [tt.zeros(1, dtype=tt.int64) for _ in range(world)]
    dist.all_gather(pids, tt.from_numpy(np.array([os.getpid()], np.int64)))
    dist.barrier()
    if rank == 0:
        os.kill(os.getpid(), signal.SIGSTOP)
        return "resumed"
    start = time.monotonic()
    try:
        dist.all_reduce(tt.ones(10), group=g)
        msg = "no error"
    except Exception as e:
        msg = f"{type(e).__name__}: {e}"
    elapsed = time.monotonic() - start
    try:
        os.kill(int(pids[0].tolist()[0]), signal.SIGCONT)
    except ProcessLookupError:  # the other survivor woke rank 0 first, and it has finished and exited
        pass
    return msg, elapsed


def mismatch_leaves_outputs(rank, world, kind):
    """Rank 1's sizes disagree; returns (error text, whether this rank's outputs are bit-for-bit
    what they were before the call)."""
    import numpy as np
    import tritensor as tt
    import tritensor.comm as dist

    n = 1000 + (8 if rank == 1 else 0)

    def raw(salt, m=n):  # distinct bytes per rank and slot, never what a peer sends
        return np.arange(m, dtype=np.float32) * np.float32(0.25) + np.float32(1000 * rank + 100 * salt + 7)

    def pattern(salt, m=n):
        return tt.from_numpy(raw(salt, m))

    outs = []
    try:
        if kind == "broadcast":
            t = pattern(0)
            outs = [t] if rank != 0 else []
            dist.broadcast(t, src=0)
        elif kind == "scatter":
            t = pattern(0)
            outs = [t]
            dist.scatter(t, [pattern(10 + q, 1000) for q in range(world)] if rank == 0 else None, src=0)
        elif kind == "gather":
            outs = [pattern(q, 1000) for q in range(world)] if rank == 0 else []
            dist.gather(pattern(50), outs if rank == 0 else None, dst=0)
        elif kind == "all_gather":
            outs = [pattern(q) for q in range(world)]
            dist.all_gather(outs, pattern(50))
        elif kind == "all_to_all":
            outs = [pattern(q) for q in range(world)]
            dist.all_to_all(outs, [pattern(20 + q) for q in range(world)])
        elif kind == "all_reduce":
            t = pattern(0)
            outs = [t]
            dist.all_reduce(t)
        elif kind == "recv":
            if rank == 1:
                dist.send(pattern(0, 5), dst=0)
            elif rank == 0:
                t = pattern(0, 4)
                outs = [t]
                dist.recv(t, src=1)
            dist.barrier()
        msg = "no error"
    except Exception as e:
        msg = f"{type(e).__name__}: {e}"
    before = {"broadcast": [0], "scatter": [0], "gather": list(range(world)), "all_gather": list(range(world)),
              "all_to_all": list(range(world)), "all_reduce": [0], "recv": [0]}[kind]
    sizes = {"recv": 4, "gather": 1000}.get(kind, n)
    untouched = all(np.array_equal(o.numpy().view(np.uint32), raw(s, sizes).view(np.uint32))
                    for o, s in zip(outs, before))
    return msg, untouched


def rank_never_joins(rank, world, pg_timeout):
    """Rank 1 connects to the store (so the master's worker count is met) but never calls
    init_process_group: the others must raise naming rank 1."""
    import tritensor.comm as dist

    if rank == 1:
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, timeout=30)
        try:  # absent until rank 0, the store's host, has given up and left (its store goes with it)
            store.wait(["never-set"], pg_timeout + 4)
        except Exception:  # the store's host is gone (or the cap passed): nothing is owed any more
            pass
        store.close()
        return "absent"
    start = time.monotonic()
    try:
        dist.init_process_group("tcp", timeout=pg_timeout)
        msg = "no error"
    except Exception as e:
        msg = f"{type(e).__name__}: {e}"
    return msg, time.monotonic() - start


def rank_never_starts(rank, world, pg_timeout):
    """The last rank never even reaches the store: rank 0, which hosts it, must name that rank."""
    import tritensor.comm as dist

    if rank == world - 1:
        return "absent"
    try:
        dist.init_process_group("tcp", timeout=pg_timeout)
        return "no error"
    except Exception as e:
        return f"{type(e).__name__}: {e}"


# ---------------------------------- input lifetime: async inputs dropped before wait()

LIFETIME_COLLECTIVES = ("all_gather", "all_gather_into_tensor", "gather", "scatter", "reduce_scatter",
                        "reduce_scatter_tensor", "all_to_all")


def async_input_lifetime(rank, world, elems, rounds, sync_dir, names=LIFETIME_COLLECTIVES):
    """Post an async collective, drop every input before ``wait()``, churn the heap, check the result.

    Each round one rank (the "sender") posts first and drops its inputs; its peer posts only
    after the sender has looked (a file in ``sync_dir`` says so), so the sender's work is
    certainly pending then, with ``elems`` float32 per message, more than a socket buffer
    holds. Returns a list of problems: inputs freed while the work was pending, wrong values
    on either side, inputs still held after the work completed."""
    import gc
    import weakref

    import numpy as np
    import tritensor as tt
    import tritensor.comm as dist

    problems = []
    for name in names:
        for i in range(rounds):
            sender = i % world
            val = lambda q, j=0: float(1000 * i + 10 * q + j + 1)  # noqa: E731
            full = lambda v, n=elems: tt.from_numpy(np.full(n, v, np.float32))  # noqa: E731
            flag = os.path.join(sync_dir, f"{name}-{i}")
            if rank != sender:  # post after the sender has dropped its inputs and looked
                deadline = time.monotonic() + 60
                while not os.path.exists(flag):
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"rank {rank}: {flag} never appeared")
                    time.sleep(0.005)
            peer = 1 - rank if world == 2 else None
            if name == "all_gather":
                inputs, outs = [full(val(rank))], [tt.zeros(elems) for _ in range(world)]
                work = dist.all_gather(outs, inputs[0], async_op=True)
                check = lambda: [(o.numpy(), val(q)) for q, o in enumerate(outs)]  # noqa: E731
            elif name == "all_gather_into_tensor":
                inputs, out = [full(val(rank))], tt.zeros(elems * world)
                work = dist.all_gather_into_tensor(out, inputs[0], async_op=True)
                check = lambda: [(out.numpy()[q * elems:(q + 1) * elems], val(q)) for q in range(world)]  # noqa: E731
            elif name == "gather":  # the sender sends to its peer, the root
                inputs = [full(val(rank))]
                gl = [tt.zeros(elems) for _ in range(world)] if rank != sender else None
                work = dist.gather(inputs[0], gl, dst=peer if rank == sender else rank, async_op=True)
                check = lambda: [(g.numpy(), val(q)) for q, g in enumerate(gl)] if gl else []  # noqa: E731
            elif name == "scatter":  # the sender is the root
                inputs = [full(val(sender, q)) for q in range(world)] if rank == sender else []
                out = tt.zeros(elems)
                work = dist.scatter(out, inputs or None, src=sender, async_op=True)
                check = lambda: [(out.numpy(), val(sender, rank))]  # noqa: E731
            elif name == "reduce_scatter":
                inputs, out = [full(val(rank, q)) for q in range(world)], tt.zeros(elems)
                work = dist.reduce_scatter(out, inputs, async_op=True)
                check = lambda: [(out.numpy(), sum(val(q, rank) for q in range(world)))]  # noqa: E731
            elif name == "reduce_scatter_tensor":
                inputs = [tt.from_numpy(np.concatenate([np.full(elems, val(rank, q), np.float32) for q in range(world)]))]
                out = tt.zeros(elems)
                work = dist.reduce_scatter_tensor(out, inputs[0], async_op=True)
                check = lambda: [(out.numpy(), sum(val(q, rank) for q in range(world)))]  # noqa: E731
            elif name == "all_to_all":
                inputs, outs = [full(val(rank, q)) for q in range(world)], [tt.zeros(elems) for _ in range(world)]
                work = dist.all_to_all(outs, inputs, async_op=True)
                check = lambda: [(o.numpy(), val(q, rank)) for q, o in enumerate(outs)]  # noqa: E731
            else:
                raise ValueError(name)
            held = [weakref.ref(t) for t in inputs]
            del inputs
            gc.collect()
            junk = [np.full(elems, -7.0, np.float32) for _ in range(6)]  # reuses freed memory
            if rank == sender:
                if not work.is_completed() and any(h() is None for h in held):
                    problems.append(f"{name} #{i}: an input was freed while the work was pending")
                open(flag, "w").close()
            work.wait()
            for got, want in check():
                if not (got == want).all():
                    problems.append(f"{name} #{i} rank {rank}: got {np.unique(got)[:4]}, expected {want}")
            if any(h() is not None for h in held):  # the caller may keep its work handles
                problems.append(f"{name} #{i}: an input is still held after the work completed")
            del work, junk
            dist.barrier()
    return problems
