"""tritensor.cuda's memory API (torch.cuda.memory): the allocator's per-process limit, pool routing and snapshot
over a fake backend (any mode), torch's answers and errors in CPU mode, and the API itself on the GPU path
(the simulated device in CI): mem_get_info from the driver, set_per_process_memory_fraction's out-of-memory
error, memory_summary's table, memory_snapshot, MemPool/use_mem_pool, caching_allocator_alloc/delete."""
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import warnings

import pytest

import tritensor as tt
from tritensor.runtime import mode
from tritensor.runtime import allocator, mode
from tritensor.runtime.allocator import CachingAllocator, OutOfMemoryError

MiB = 1 << 20
gpu = pytest.mark.skipif(not mode.GPU, reason="needs the GPU path (a GPU or TRITENSOR_DEVICE=sim)")
cpu_only = pytest.mark.skipif(mode.GPU, reason="CPU mode's answers")


class Backend(allocator.Backend):
    """Addresses from a counter; every event completes when ``done`` says so."""

    def __init__(self):
        self.next, self.done, self.live = 1 << 32, False, {}

    def allocate(self, nbytes, stream):
        ptr, self.next = self.next, self.next + nbytes
        self.live[ptr] = nbytes
        return ptr, ptr

    def free(self, handle, stream):
        del self.live[handle]

    def record_event(self, stream):
        return object()

    def event_done(self, event):
        return self.done

    def wait_event(self, stream, event):
        pass


class Stream:  # what the allocator keys blocks by; a raw handle as a tritensor Stream has
    cuda_stream = 0x77


# ----- the allocator: limit, routing, snapshot (every mode) -----------------------------------------
def test_torch_format_size():
    """torch's format_size: bytes up to 1 KiB, then KiB/MiB/GiB with two decimals, each up to 1024 of itself."""
    cases = {0: "0 bytes", 1024: "1024 bytes", 1025: "1.00 KiB", MiB: "1024.00 KiB", MiB + 1: "1.00 MiB",
             3 * MiB // 2: "1.50 MiB", 1 << 30: "1024.00 MiB", 3 << 30: "3.00 GiB", 5 << 40: "5120.00 GiB"}
    assert {n: allocator.format_size(n) for n in cases} == cases


def test_fraction_refuses_segments_past_it_with_torchs_message():
    alloc, s = CachingAllocator(Backend()), Stream()
    alloc.set_memory_fraction(0.5, 8 * MiB, 3, lambda: (5 * MiB, 8 * MiB))
    assert alloc.memory_fraction() == 0.5
    a = alloc.malloc(2 * MiB, s)
    b = alloc.malloc(2 * MiB, s)  # 4 MiB reserved: the limit exactly
    with pytest.raises(OutOfMemoryError) as e:
        alloc.malloc(600, s)
    assert str(e.value) == (
        "CUDA out of memory. Tried to allocate 1024 bytes. GPU 3 has a total capacity of 8.00 MiB of which "
        "5.00 MiB is free. 4.00 MiB allowed; Of the allocated memory 4.00 MiB is allocated by tritensor, and "
        "0 bytes is reserved by tritensor but unallocated.")
    stats = alloc.memory_stats()
    assert stats["num_ooms"] == 1 and stats["num_alloc_retries"] == 1
    alloc.free(b)  # cached: the retry gives it back to the backend and the request then fits
    c = alloc.malloc(1 * MiB, s)
    assert alloc.memory_stats()["num_alloc_retries"] == 2 and alloc.memory_stats()["num_ooms"] == 1
    alloc.set_memory_fraction(None, 8 * MiB, 3, lambda: (0, 8 * MiB))
    assert alloc.memory_fraction() == 1.0
    alloc.malloc(8 * MiB, s)
    alloc.free(a)
    alloc.free(c)


def test_route_sends_this_threads_default_requests_to_a_pool():
    alloc, s = CachingAllocator(Backend()), Stream()
    pool = alloc.create_pool()
    assert alloc.route(pool) == 0
    mine = alloc.malloc(512, s)
    seen = []
    t = threading.Thread(target=lambda: seen.append(alloc.malloc(512, s)))
    t.start()
    t.join()
    assert mine.pool.id == pool and seen[0].pool.id == 0  # another thread is not routed
    assert alloc.malloc(512, s, pool=0).pool.id == pool
    assert alloc.route(None) == pool
    assert alloc.malloc(512, s).pool.id == 0
    with pytest.raises(ValueError, match="pool: no pool with id 99"):
        alloc.route(99)


def test_snapshot_lists_segments_and_block_states():
    backend = Backend()
    alloc, s, other = CachingAllocator(backend), Stream(), Stream()
    small, large = alloc.malloc(1000, s), alloc.malloc(3 * MiB, s)
    pending = alloc.malloc(512, s)
    alloc.record_stream(pending, other)
    alloc.free(pending)  # waits on other's event: active, pending free
    cached = alloc.malloc(700, s)
    alloc.free(cached)
    snap = alloc.snapshot(device=1)
    assert [seg["address"] for seg in snap] == sorted(seg["address"] for seg in snap)
    by = {seg["address"]: seg for seg in snap}
    assert by[small.ptr] == {
        "device": 1, "address": small.ptr, "total_size": 1024, "allocated_size": 1024, "active_size": 1024,
        "requested_size": 1000, "stream": 0x77, "segment_type": "small", "segment_pool_id": (0, 0),
        "is_expandable": False, "frames": [],
        "blocks": [{"address": small.ptr, "size": 1024, "requested_size": 1000, "state": "active_allocated",
                    "frames": []}]}
    assert by[large.ptr]["segment_type"] == "large" and by[large.ptr]["total_size"] == 3 * MiB
    assert by[pending.ptr]["blocks"][0]["state"] == "active_pending_free" and by[pending.ptr]["allocated_size"] == 0
    assert by[pending.ptr]["active_size"] == 512
    assert by[cached.ptr]["blocks"][0]["state"] == "inactive" and by[cached.ptr]["active_size"] == 0
    assert sum(seg["total_size"] for seg in snap) == alloc.memory_stats()["reserved_bytes.all.current"]
    pool = alloc.create_pool()
    in_pool = alloc.malloc(512, s, pool=pool)
    assert [seg["address"] for seg in alloc.snapshot(pool=pool)] == [in_pool.ptr]
    backend.done = True
    alloc.empty_cache()  # the cached and the no-longer-pending blocks go back: gone from the snapshot
    assert sorted(seg["address"] for seg in alloc.snapshot()) == sorted([small.ptr, large.ptr, in_pool.ptr])


def test_caching_off_gives_freed_blocks_back():
    backend = Backend()
    alloc, s = CachingAllocator(backend), Stream()
    cached = alloc.malloc(512, s)
    alloc.free(cached)
    alloc.set_caching(False)  # empties the cache
    assert not alloc.caching() and backend.live == {}
    a = alloc.malloc(512, s)
    alloc.free(a)
    assert backend.live == {} and alloc.memory_stats()["reserved_bytes.all.current"] == 0
    b = alloc.malloc(512, s)
    assert b.ptr != a.ptr  # nothing cached: a new block from the backend
    other = Stream()
    alloc.record_stream(b, other)
    alloc.free(b)  # pending on other's event: kept until it completes, then given back
    assert b.ptr in backend.live
    backend.done = True
    alloc.malloc(512, s)  # a miss polls the events
    assert b.ptr not in backend.live
    pool = alloc.create_pool()
    kept = alloc.malloc(512, s, pool=pool)
    alloc.free(kept)  # a private pool keeps its blocks whatever the setting
    assert kept.ptr in backend.live and alloc.malloc(512, s, pool=pool) is kept
    alloc.set_caching(True)
    c = alloc.malloc(1024, s)
    alloc.free(c)
    assert c.ptr in backend.live and alloc.malloc(1024, s) is c
    stats = alloc.memory_stats()
    assert stats["segment.all.current"] == len(backend.live) and stats["num_device_free"] == 3


# ----- CPU mode: torch's answers without CUDA, tritensor.cuda's error for the rest ---------------------
@cpu_only
def test_cpu_mode_answers_and_errors():
    assert tt.cuda.memory_snapshot() == [] and tt.cuda.memory_stats_as_nested_dict() == {}
    assert tt.cuda.get_allocator_backend() == "native"
    tt.cuda.caching_allocator_enable(False)  # nothing to do before CUDA is initialised, as torch's
    with pytest.warns(FutureWarning, match="`torch.cuda.memory_cached` has been renamed to"):
        assert tt.cuda.memory_cached() == 0
    with pytest.warns(FutureWarning, match="reset_max_memory_allocated now calls"):
        tt.cuda.reset_max_memory_allocated()
    for call in (tt.cuda.mem_get_info, lambda: tt.cuda.set_per_process_memory_fraction(0.5),
                 tt.cuda.get_per_process_memory_fraction, tt.cuda.memory_summary, tt.cuda.MemPool,
                 lambda: tt.cuda.caching_allocator_alloc(16), tt.cuda.list_gpu_processes,
                 lambda: tt.cuda.caching_allocator_disabled().__enter__()):
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            call()


def test_memory_submodule_is_torchs_path():
    import tritensor.cuda.memory as memory

    assert memory is tt.cuda.memory and tt.cuda.mem_get_info is memory.mem_get_info
    assert all(hasattr(memory, name) for name in memory.__all__)


# ----- the GPU path (the simulated device in CI) ------------------------------------------------------
@gpu
def test_mem_get_info_counts_what_the_allocator_reserves():
    # The driver's free memory is the whole device's: on a real GPU other processes (the GPU run's
    # other test files among them) allocate and free at the same time, so the exact equalities hold
    # only on the simulated device, which this process has alone; the allocator's own count holds
    # everywhere.
    tt.cuda.empty_cache()
    free0, total = tt.cuda.mem_get_info()
    reserved0 = tt.cuda.memory_reserved()
    assert total == tt.cuda.get_device_properties().total_memory and 0 < free0 <= total
    x = tt.empty(4 * MiB, dtype=tt.uint8, device="cuda")
    free1, _ = tt.cuda.mem_get_info("cuda:0")
    assert tt.cuda.memory_reserved() - reserved0 >= 4 * MiB
    if mode.SIM:
        assert free0 - free1 >= 4 * MiB
    del x  # cached by the allocator: still not free for the driver
    assert tt.cuda.memory_reserved() - reserved0 >= 4 * MiB
    if mode.SIM:
        assert tt.cuda.mem_get_info()[0] == free1
    tt.cuda.empty_cache()
    tt.cuda.synchronize()
    assert tt.cuda.memory_reserved() == reserved0
    if mode.SIM:
        assert tt.cuda.mem_get_info()[0] == free0


@gpu
def test_per_process_fraction_raises_torchs_out_of_memory_error():
    total = tt.cuda.mem_get_info()[1]
    with pytest.raises(TypeError, match="Invalid type for fraction argument, must be `float`"):
        tt.cuda.set_per_process_memory_fraction(1)
    with pytest.raises(ValueError, match=r"Invalid fraction value: 1.5. Allowed range: 0~1"):
        tt.cuda.set_per_process_memory_fraction(1.5)
    tt.cuda.empty_cache()
    fraction = (tt.cuda.memory_reserved() + 4 * MiB) / total
    tt.cuda.set_per_process_memory_fraction(fraction)
    try:
        assert tt.cuda.get_per_process_memory_fraction() == fraction
        ok = tt.empty(2 * MiB, dtype=tt.uint8, device="cuda")
        with pytest.raises(tt.cuda.OutOfMemoryError) as e:
            tt.empty(8 * MiB, dtype=tt.uint8, device="cuda")
        assert re.fullmatch(r"CUDA out of memory\. Tried to allocate 8\.00 MiB\. GPU 0 has a total capacity of "
                            r"\d+\.\d\d GiB of which \S+ \S+ is free\. \S+ \S+ allowed; Of the allocated memory .*",
                            str(e.value)), str(e.value)
        assert isinstance(e.value, tt.OutOfMemoryError) and isinstance(e.value, RuntimeError)
        del ok
    finally:
        tt.cuda.set_per_process_memory_fraction(1.0)
    tt.empty(8 * MiB, dtype=tt.uint8, device="cuda")


def _table_cell(n, pref):
    """torch's _format_size, written out: scale while the row's reference value is at least 768 of the unit."""
    units = ["B  ", "KiB", "MiB", "GiB"]
    i = 0
    while i < 3 and pref >= 768 * 1024:
        n //= 1024
        pref /= 1024
        i += 1
    return f"{n:6d} {units[i]}"


@gpu
def test_memory_summary_is_torchs_table_of_the_statistics():
    keep = [tt.empty(n, device="cuda") for n in (10, 300_000, 1000)]
    stats = tt.cuda.memory_stats()
    text = tt.cuda.memory_summary()
    lines = text.splitlines()
    assert text.endswith("|\n") and all(len(line) == 77 and line[0] == line[-1] == "|" for line in lines)
    assert lines[1] == "|                tritensor CUDA memory summary, device ID 0                 |"
    assert lines[3] == (f"|            CUDA OOMs: {stats['num_ooms']:<12d} |        cudaMalloc retries: "
                        f"{stats['num_alloc_retries']:<8d}  |")
    assert lines[5] == "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |"
    row = next(line for line in lines if line.startswith("| Allocated memory "))
    vals = [stats[f"allocated_bytes.all.{f}"] for f in ("current", "peak", "allocated", "freed")]
    assert row == "| Allocated memory      | " + " | ".join(_table_cell(v, v) for v in vals) + " |"
    row = next(line for line in lines if line.startswith("|       from small pool |"))
    small = [stats[f"allocated_bytes.small_pool.{f}"] for f in ("current", "peak", "allocated", "freed")]
    assert row == "|       from small pool | " + " | ".join(_table_cell(v, p) for v, p in zip(small, vals)) + " |"
    row = next(line for line in lines if line.startswith("| Allocations "))
    assert row.split("|")[2] == f" {stats['allocation.all.current']:7d}    "
    assert len(lines) == 47 and len(tt.cuda.memory_summary(abbreviated=True).splitlines()) == 29
    del keep


@gpu
def test_memory_snapshot_follows_a_tensor():
    x = tt.empty(1000, device="cuda")
    seg = next(s for s in tt.cuda.memory_snapshot() if s["address"] == x.data_ptr())
    assert seg["blocks"][0]["state"] == "active_allocated" and seg["requested_size"] == 4000
    assert seg["total_size"] == 4096 and seg["segment_pool_id"] == (0, 0) and seg["device"] == 0
    assert seg["stream"] == tt.cuda.current_stream().cuda_stream
    ptr = x.data_ptr()
    del x
    seg = next(s for s in tt.cuda.memory_snapshot() if s["address"] == ptr)
    assert seg["blocks"][0]["state"] == "inactive"
    tt.cuda.empty_cache()
    assert all(s["address"] != ptr for s in tt.cuda.memory_snapshot())


@gpu
def test_mem_pool_takes_this_threads_allocations():
    pool = tt.cuda.MemPool()
    assert pool.id[0] == 0 and pool.id[1] > 0 and pool.use_count() == 1
    other = []
    with tt.cuda.use_mem_pool(pool):
        assert pool.use_count() == 2
        x = tt.ones(300, device="cuda")
        t = threading.Thread(target=lambda: other.append(tt.ones(300, device="cuda").data_ptr()))
        t.start()
        t.join()
    y = tt.ones(300, device="cuda")
    in_pool = [s["address"] for s in pool.snapshot()]
    assert x.data_ptr() in in_pool and y.data_ptr() not in in_pool and other[0] not in in_pool
    assert all(s["segment_pool_id"] == pool.id for s in pool.snapshot())
    assert pool.use_count() == 1 and x.sum().item() == 300.0
    with pytest.raises(TypeError, match="use_mem_pool: pool must be a MemPool"):
        with tt.cuda.use_mem_pool(3):
            pass
    with pytest.raises(ValueError, match="allocator must be None"):
        tt.cuda.MemPool(allocator=object())


@gpu
def test_caching_allocator_alloc_and_delete():
    before = tt.cuda.memory_allocated()
    ptr = tt.cuda.caching_allocator_alloc(1000)
    assert tt.cuda.memory_allocated() == before + 1024
    ptr2 = tt.cuda.caching_allocator_alloc(100, stream=tt.cuda.current_stream().cuda_stream)
    tt.cuda.caching_allocator_delete(ptr)
    tt.cuda.caching_allocator_delete(ptr2)
    assert tt.cuda.memory_allocated() == before
    with pytest.raises(RuntimeError, match="invalid device pointer"):
        tt.cuda.caching_allocator_delete(ptr)
    with pytest.raises(TypeError, match="Invalid type for stream argument"):
        tt.cuda.caching_allocator_alloc(10, stream="s")


@gpu
def test_nested_stats_deprecated_names_and_resets():
    x = tt.ones(10, device="cuda")
    nested = tt.cuda.memory_stats_as_nested_dict()
    flat = tt.cuda.memory_stats()
    assert nested["allocated_bytes"]["all"]["current"] == flat["allocated_bytes.all.current"]
    assert nested["num_ooms"] == flat["num_ooms"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(FutureWarning, match="renamed to `torch.cuda.max_memory_reserved`"):
            tt.cuda.max_memory_cached()
    with pytest.warns(FutureWarning, match="memory_reserved"):
        assert tt.cuda.memory_cached() == tt.cuda.memory_reserved()
    del x
    with pytest.warns(FutureWarning, match="which resets /all/ peak memory stats"):
        tt.cuda.reset_max_memory_cached()
    assert tt.cuda.max_memory_allocated() == tt.cuda.memory_allocated()


@gpu
def test_caching_allocator_disabled_block():
    tt.cuda.init()
    tt.ones(1, device="cuda")
    with tt.cuda.caching_allocator_disabled():
        x = tt.ones(1000, device="cuda")
        ptr = x.data_ptr()
        reserved = tt.cuda.memory_reserved()
        del x
        assert tt.cuda.memory_reserved() == reserved - 4096
        assert all(s["address"] != ptr for s in tt.cuda.memory_snapshot())
    y = tt.ones(1000, device="cuda")
    r = tt.cuda.memory_reserved()
    del y
    assert tt.cuda.memory_reserved() == r  # cached again


PLUGGABLE_C = r"""
#include <sys/types.h>
static void *(*alloc_cb)(ssize_t, int, void *);
static void (*free_cb)(void *, ssize_t, int, void *);
static long calls;
void set_callbacks(void *a, void *f) { alloc_cb = (void *(*)(ssize_t, int, void *))a;
                                       free_cb = (void (*)(void *, ssize_t, int, void *))f; }
void *my_alloc(ssize_t size, int device, void *stream) { calls++; return alloc_cb(size, device, stream); }
void my_free(void *ptr, ssize_t size, int device, void *stream) { calls++; free_cb(ptr, size, device, stream); }
long n_calls(void) { return calls; }
"""

PLUGGABLE_SCRIPT = r"""
import ctypes, json, sys
import tritensor as tt
from tritensor.runtime import driver as drv

lib = ctypes.CDLL(sys.argv[1])
log = []

@ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p)
def alloc(size, device, stream):  # the library's allocation: device memory from the driver
    err, ptr = drv.driver.cuMemAlloc(size)
    log.append(["alloc", size, device])
    return int(ptr)

@ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p)
def free(ptr, size, device, stream):
    drv.driver.cuMemFree(ptr)
    log.append(["free", size, device])

lib.set_callbacks(ctypes.cast(alloc, ctypes.c_void_p), ctypes.cast(free, ctypes.c_void_p))
tt.cuda.change_current_allocator(tt.cuda.CUDAPluggableAllocator(sys.argv[1], "my_alloc", "my_free"))
x = tt.arange(10, device="cuda", dtype=tt.float32)
total = (x * 2).sum().item()
del x
try:
    tt.cuda.change_current_allocator(tt.cuda.CUDAPluggableAllocator(sys.argv[1], "my_alloc", "my_free"))
    refused = None
except RuntimeError as e:
    refused = str(e)
print(json.dumps({"log": log, "calls": lib.n_calls(), "total": total, "refused": refused,
                  "allocated": tt.cuda.memory_allocated(), "reserved": tt.cuda.memory_reserved()}))
"""


@gpu
@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler to build the allocator library")
def test_pluggable_allocator_serves_every_tensor(tmp_path):
    """A fresh process (the allocator can only be swapped before any device memory is allocated) takes its
    device memory from a C library's functions: every tensor's comes from them and goes back to them."""
    src, lib = tmp_path / "alloc.c", tmp_path / "alloc.so"
    src.write_text(PLUGGABLE_C)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    out = subprocess.run([sys.executable, "-c", PLUGGABLE_SCRIPT, str(lib)], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, TRITENSOR_TEST_DEVICE="cpu"))
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["total"] == 90.0 and result["refused"] == "Can't swap an already initialized allocator"
    allocs = [e for e in result["log"] if e[0] == "alloc"]
    frees = [e for e in result["log"] if e[0] == "free"]
    assert allocs and ["alloc", 512, 0] in allocs and len(frees) == len(allocs) - result["reserved"] // 512
    assert result["calls"] == len(result["log"]) and result["allocated"] == result["reserved"]
