"""``python -m tritensor.bench comm --soak``: correctness and latency of collectives under a flood.

Why: a stranger who can connect once could stall or exhaust the store and the rank
listeners. This soak is the end-to-end check that those defences hold under load: four
ranks run a mixed, seeded stream of collectives (all_reduce, broadcast, all_gather,
reduce_scatter, barrier; 1 to 300,001 elements) and check every result against NumPy, first
quietly, then while a flooder process (which never authenticates) hammers the store and the
rank listeners of a group created under the flood with garbage bytes, idle connections and
half handshakes. It reports operations done, wrong results (must be 0), the store master's
peak memory and p50/p99 latency of the quiet phase against the flooded one.

The store runs in a process of its own so its memory (``VmRSS`` from ``/proc``) is the
store's alone. The flooder learns where the rank listeners are as a harness would, from the
store with the job's secret; its flood connections themselves never authenticate. Every wait
is bounded: the run gives up (and reports why) past ``seconds + 120`` s.
"""

from __future__ import annotations

import collections
import json
import multiprocessing as mp
import os
import queue
import socket
import threading
import time

WORLD = 4
SIZES = (1, 7, 1000, 65_536, 300_001)  # elements: direct sends up to the ring path
KINDS = ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier")
PHASES = ("quiet", "flood")


def _vals(rank, n, step):
    import numpy as np

    i = np.arange(n, dtype=np.int64)
    return ((i * 7 + rank * 3 + step) % 5 - 2).astype(np.float32)  # small integers: sums are exact


def _one_op(dist, tt, np, rank, step, rng):
    """Run operation ``step`` of the shared schedule; return True when its result is right."""
    kind, n = KINDS[rng.integers(len(KINDS))], int(SIZES[rng.integers(len(SIZES))])
    if kind == "all_reduce":
        t = tt.from_numpy(_vals(rank, n, step))
        dist.all_reduce(t)
        return np.array_equal(t.numpy(), sum(_vals(q, n, step) for q in range(WORLD)))
    if kind == "broadcast":
        src = step % WORLD
        t = tt.from_numpy(_vals(rank, n, step))
        dist.broadcast(t, src=src)
        return np.array_equal(t.numpy(), _vals(src, n, step))
    if kind == "all_gather":
        outs = [tt.zeros(n) for _ in range(WORLD)]
        dist.all_gather(outs, tt.from_numpy(_vals(rank, n, step)))
        return all(np.array_equal(o.numpy(), _vals(q, n, step)) for q, o in enumerate(outs))
    if kind == "reduce_scatter":
        out = tt.zeros(n)
        dist.reduce_scatter(out, [tt.from_numpy(_vals(rank * WORLD + j, n, step)) for j in range(WORLD)])
        return np.array_equal(out.numpy(), sum(_vals(q * WORLD + rank, n, step) for q in range(WORLD)))
    dist.barrier()
    return True


def _rank(rank, port, secret, seconds, q, go):
    os.environ["TRITENSOR_COMM_SECRET"] = secret
    try:
        import numpy as np

        import tritensor as tt
        import tritensor.comm as dist

        store = dist.TCPStore("127.0.0.1", port, timeout=60)
        dist.init_process_group("tcp", store=store, rank=rank, world_size=WORLD, timeout=30)
        rng = np.random.default_rng(1234)  # the same schedule on every rank
        out, step = {}, 0
        for phase in PHASES:
            if rank == 0:
                q.put(("phase", phase, f"{dist.group.WORLD.name()}group{PHASES.index(phase) + 1}/"))
                if not go.wait(60):
                    raise TimeoutError(f"the harness did not start phase {phase!r} within 60s")
                go.clear()
            dist.barrier()
            st = {"ops": 0, "wrong": 0, "lat": [], "group_setup_s": None, "group_error": None}
            t0 = time.perf_counter()
            try:  # a group created while the flood is on: its listeners are the ones flooded
                dist.new_group(timeout=15)
                st["group_setup_s"] = time.perf_counter() - t0
            except Exception as e:
                st["group_error"] = f"{type(e).__name__}: {e}"
            end = time.monotonic() + seconds / 2
            while True:
                # every 8th operation is a checked broadcast of rank 0's decision to go on
                if step % 8 == 0:
                    ctl = np.array([step, time.monotonic() >= end], np.int64)
                    dist.broadcast(ctl, src=0)
                    if ctl[0] != step:
                        st["wrong"] += 1
                    if ctl[1]:
                        break
                t = time.perf_counter()
                ok = _one_op(dist, tt, np, rank, step, rng)
                st["lat"].append(time.perf_counter() - t)
                st["ops"] += 1
                st["wrong"] += not ok
                step += 1
            dist.barrier()
            out[phase] = st
            if rank == 0:
                q.put(("phase_done", phase, None))
        dist.destroy_process_group()
        q.put(("result", rank, out))
    except BaseException:
        import traceback

        q.put(("error", rank, traceback.format_exc()))


def _store_host(secret, q, stop):
    os.environ["TRITENSOR_COMM_SECRET"] = secret
    from ..comm.store import TCPStore

    master = TCPStore("127.0.0.1", 0, is_master=True, timeout=60)
    q.put(("store", master.port, os.getpid()))
    stop.wait(3600)
    master.close()


def _flood_target(family, addr, stop, counts, until_refused, hold=32, pace=0.002):
    from ..comm.backend.auth import MAGIC, SERVER_HELLO_LEN

    held, i, garbage = collections.deque(), 0, os.urandom(4096)
    while not stop.is_set():
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(0.5)
        try:
            s.connect(addr)
        except OSError:
            s.close()
            counts["connect failed"] += 1
            if until_refused:
                break
            time.sleep(0.01)
            continue
        kind = ("garbage", "idle", "half handshake")[i % 3]
        i += 1
        counts[kind] += 1
        try:
            if kind == "garbage":
                s.sendall(garbage)
                s.close()
            elif kind == "idle":
                held.append(s)
            else:
                s.recv(SERVER_HELLO_LEN)
                s.sendall(MAGIC + b"\0" * 30)
                held.append(s)
        except OSError:
            s.close()
        while len(held) > hold:
            held.popleft().close()
        time.sleep(pace)
    for s in held:
        s.close()


def _find_listeners(port, secret, prefix, stop, counts, threads):
    from ..comm.store import TCPStore

    look = TCPStore("127.0.0.1", port, timeout=10, secret=secret)  # the harness, not the flood
    deadline = time.monotonic() + 15
    todo = set(range(WORLD - 1))  # the last rank only connects
    while todo and not stop.is_set() and time.monotonic() < deadline:
        for r in sorted(todo):
            key = f"{prefix}addr/{r}"
            if look.check([key]):
                todo.discard(r)
                tcp, _, upath = look.get(key).decode().split("\n")
                host, p = tcp.rsplit(":", 1)
                targets = [(socket.AF_INET, (host, int(p)))] + ([(socket.AF_UNIX, upath)] if upath else [])
                for fam, addr in targets:
                    counts["listeners flooded"] += 1
                    th = threading.Thread(target=_flood_target, args=(fam, addr, stop, counts, True), daemon=True)
                    th.start()
                    threads.append(th)
        time.sleep(0.005)
    look.close()


def _flooder(port, secret, cmd, result):
    stop, counts, threads = threading.Event(), collections.Counter(), []
    threads.append(threading.Thread(target=_flood_target, args=(socket.AF_INET, ("127.0.0.1", port), stop, counts,
                                                                  False), daemon=True))
    threads[0].start()
    result.put("flooding")
    while True:
        c = cmd.get(timeout=3600)
        if c[0] == "stop":
            break
        threading.Thread(target=_find_listeners, args=(port, secret, c[1], stop, counts, threads), daemon=True).start()
    stop.set()
    for th in threads:
        th.join(5)
    result.put(dict(counts))


def _rss_mb(pid, field="VmRSS"):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def _pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else float("nan")


def run_soak(seconds: float = 30.0) -> dict:
    """Run the soak for about ``seconds`` (half quiet, half flooded); return the report."""
    import secrets

    secret = os.environ.get("TRITENSOR_COMM_SECRET") or secrets.token_hex(32)
    ctx = mp.get_context("spawn")
    q, go, stop_store = ctx.Queue(), ctx.Event(), ctx.Event()
    cmd, fres = ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=_store_host, args=(secret, q, stop_store), daemon=True)]
    procs[0].start()
    deadline = time.monotonic() + seconds + 120
    report = {"seconds": seconds, "world": WORLD, "errors": [], "phases": {}, "flood": {}}
    peak = {p: 0.0 for p in PHASES}
    phase, flooder = None, None
    try:
        _, port, store_pid = q.get(timeout=60)
        report["store_rss_mb_start"] = _rss_mb(store_pid)
        procs += [ctx.Process(target=_rank, args=(r, port, secret, seconds, q, go), daemon=True) for r in range(WORLD)]
        for p in procs[1:]:
            p.start()
        results = {}
        while len(results) < WORLD and not report["errors"]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the soak did not finish within {seconds + 120:g}s")
            if phase is not None:
                peak[phase] = max(peak[phase], _rss_mb(store_pid))
            try:
                kind, a, b = q.get(timeout=0.05)
            except queue.Empty:
                if not all(p.is_alive() for p in procs[1:]) and len(results) < WORLD:
                    dead = [r for r, p in enumerate(procs[1:]) if not p.is_alive() and r not in results]
                    if dead and q.empty():
                        report["errors"].append(f"rank(s) {dead} died")
                continue
            if kind == "phase":
                phase = a
                if a == "flood":
                    flooder = ctx.Process(target=_flooder, args=(port, secret, cmd, fres), daemon=True)
                    flooder.start()
                    if fres.get(timeout=60) != "flooding":
                        raise RuntimeError("the flooder did not start")
                    cmd.put(("listeners", b))
                    time.sleep(0.5)  # let the flood build up before the first operation
                go.set()
            elif kind == "phase_done":
                peak[a] = max(peak[a], _rss_mb(store_pid))
                if a == "flood" and flooder is not None:
                    cmd.put(("stop",))
                    report["flood"] = fres.get(timeout=30)
                phase = None
            elif kind == "result":
                results[a] = b
            else:
                report["errors"].append(f"rank {a} failed:\n{b}")
        report["store_peak_rss_mb_during_run"] = _rss_mb(store_pid, "VmHWM")
        for ph in PHASES if results else ():
            lat = [x for r in results.values() for x in r[ph]["lat"]]
            setups = [r[ph]["group_setup_s"] for r in results.values() if r[ph]["group_setup_s"] is not None]
            report["phases"][ph] = {
                "ops": results[0][ph]["ops"], "wrong": sum(r[ph]["wrong"] for r in results.values()),
                "p50_ms": _pct(lat, 50) * 1e3, "p99_ms": _pct(lat, 99) * 1e3, "store_peak_rss_mb": peak[ph],
                "group_setup_s": max(setups) if setups else None,
                "group_errors": sorted({r[ph]["group_error"] for r in results.values() if r[ph]["group_error"]})}
    except Exception as e:
        report["errors"].append(f"{type(e).__name__}: {e}")
    finally:
        cmd.put(("stop",))
        stop_store.set()
        for p in procs + ([flooder] if flooder is not None else []):
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join(5)
    report["wrong"] = sum(ph["wrong"] for ph in report["phases"].values())
    return report


def print_report(rep) -> None:
    print(f"\n## soak: {rep['world']} ranks, {rep['seconds']:g}s (half quiet, half under a flood)")
    print("| phase | ops | wrong | p50 (ms) | p99 (ms) | store peak RSS (MB) | new_group setup (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, ph in rep["phases"].items():
        setup = f"{ph['group_setup_s']:.2f}" if ph["group_setup_s"] is not None else "failed"
        print(f"| {name} | {ph['ops']} | {ph['wrong']} | {ph['p50_ms']:.2f} | {ph['p99_ms']:.2f} "
              f"| {ph['store_peak_rss_mb']:.0f} | {setup} |")
        for err in ph["group_errors"]:
            print(f"  {name}: new_group failed on some ranks: {err}")
    print(f"store RSS at start {rep.get('store_rss_mb_start', float('nan')):.0f} MB; flood connections: "
          + (", ".join(f"{k} {v}" for k, v in sorted(rep["flood"].items())) or "none"))
    print(f"wrong results: {rep['wrong']}")
    for err in rep["errors"]:
        print(f"ERROR: {err}")


def main_soak(seconds: float, json_path=None) -> int:
    rep = run_soak(seconds)
    print_report(rep)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(rep, f, indent=1)
    return 1 if rep["wrong"] or rep["errors"] else 0
