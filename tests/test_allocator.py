"""The caching device allocator, over a fake backend: runs the same in CPU and GPU mode.

The fake hands out fake addresses, logs every call, and its events complete when a test says so,
so each rule of ``runtime/allocator.py`` is checked exactly: reuse without a backend call,
streams and ``record_stream``, torch's statistics, ``empty_cache``, out-of-memory retries, private
pools, no growth over 1,000 training-like steps, threads, bad input. ``tritensor.cuda``'s memory
functions in CPU mode are at the end; test_cuda.py checks them on a device.
"""
import random
import threading

import pytest

import tritensor as tt
from tritensor.runtime import allocator, memory
from tritensor.runtime.allocator import CachingAllocator, OutOfMemoryError

MiB = 1 << 20


class FakeStream:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<stream {self.name}>"


class FakeEvent:
    def __init__(self, stream):
        self.stream, self.done = stream, False


class FakeBackend(allocator.Backend):
    """Addresses from a counter (never reused); ``live`` maps the ones handed out to their size."""

    def __init__(self, capacity=None):
        self.calls, self.live, self.events = [], {}, []
        self.capacity = capacity
        self.on_allocate = None  # a hook run inside allocate (a GC-driven free, say)
        self._next = 1 << 32

    def allocate(self, nbytes, stream):
        self.calls.append(("allocate", nbytes, stream))
        if self.on_allocate is not None:
            self.on_allocate()
        if self.capacity is not None and sum(self.live.values()) + nbytes > self.capacity:
            raise OutOfMemoryError(f"fake device full: {nbytes} bytes asked")
        ptr, self._next = self._next, self._next + nbytes
        self.live[ptr] = nbytes
        return ptr, ptr

    def free(self, handle, stream):
        self.calls.append(("free", handle, stream))
        del self.live[handle]

    def record_event(self, stream):
        event = FakeEvent(stream)
        self.events.append(event)
        self.calls.append(("record_event", stream))
        return event

    def event_done(self, event):
        self.calls.append(("event_done", event))
        return event.done

    def wait_event(self, stream, event):
        self.calls.append(("wait_event", stream, event))


@pytest.fixture
def fake():
    backend = FakeBackend()
    return backend, CachingAllocator(backend), FakeStream("s")


def test_a_freed_block_is_reused_on_its_stream_without_a_backend_call(fake):
    backend, alloc, s = fake
    a = alloc.malloc(1000, s)
    assert a.size == 1024 and backend.calls == [("allocate", 1024, s)]
    alloc.free(a)
    b = alloc.malloc(600, s)  # the same 1,024-byte class
    assert b is a and b.ptr == a.ptr and b.requested == 600
    alloc.free(b)
    assert backend.calls == [("allocate", 1024, s)]  # the hit and both frees asked nothing


@pytest.mark.parametrize("nbytes, size", [
    (0, 512), (1, 512), (512, 512), (513, 1024), (MiB, MiB),  # small: multiples of 512
    (MiB + 1, MiB + MiB // 4), (3 * MiB, 3 * MiB), (5 * MiB + 1, 6 * MiB),  # quarter of the power of two
    (100 * MiB + 1, 102 * MiB),  # at most 2 MiB steps
])
def test_size_classes(fake, nbytes, size):
    _, alloc, s = fake
    assert alloc.malloc(nbytes, s).size == size


def test_a_block_serves_only_its_class_and_its_stream(fake):
    backend, alloc, s = fake
    other = FakeStream("other")
    a = alloc.malloc(1000, s)
    alloc.free(a)
    assert alloc.malloc(2000, s) is not a  # another class
    assert alloc.malloc(1000, other) is not a  # another stream
    assert len(backend.live) == 3


def test_record_stream_defers_reuse_until_the_other_streams_event(fake):
    backend, alloc, s = fake
    side = FakeStream("side")
    a = alloc.malloc(4096, s)
    alloc.record_stream(a, side)
    alloc.free(a)
    assert backend.calls[-1] == ("record_event", side)
    event = backend.events[-1]
    b = alloc.malloc(4096, s)  # the event has not completed: a new block
    assert b is not a and backend.calls[-1] == ("allocate", 4096, s)
    event.done = True
    c = alloc.malloc(4096, s)  # a miss polls the events: a is free again
    assert c is a and backend.calls[-1] == ("event_done", event)
    assert len(backend.live) == 2


def test_record_stream_waits_for_every_stream_and_ignores_its_own(fake):
    backend, alloc, s = fake
    s1, s2 = FakeStream("s1"), FakeStream("s2")
    a = alloc.malloc(4096, s)
    for stream in (s, s1, s2, s1):
        alloc.record_stream(a, stream)
    alloc.free(a)
    assert [c for c in backend.calls if c[0] == "record_event"] == [("record_event", s1), ("record_event", s2)]
    e1, e2 = backend.events
    e1.done = True
    assert alloc.malloc(4096, s) is not a
    e2.done = True
    assert alloc.malloc(4096, s) is a


def test_a_block_without_record_stream_records_no_event(fake):
    backend, alloc, s = fake
    alloc.free(alloc.malloc(4096, s))
    assert backend.events == []


def _torch_keys():
    stats = ("allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
             "active_bytes", "inactive_split_bytes", "requested_bytes")
    keys = {f"{s}.{p}.{f}" for s in stats for p in ("all", "small_pool", "large_pool")
            for f in ("current", "peak", "allocated", "freed")}
    keys |= {f"{s}.{f}" for s in ("oversize_allocations", "oversize_segments")
             for f in ("current", "peak", "allocated", "freed")}
    return keys | {"num_alloc_retries", "num_ooms", "max_split_size", "num_sync_all_streams",
                   "num_device_alloc", "num_device_free"}


def test_memory_stats_has_torchs_keys_sorted_and_starts_at_zero(fake):
    _, alloc, _ = fake
    stats = alloc.memory_stats()
    assert set(stats) == _torch_keys() and list(stats) == sorted(stats)
    assert stats["max_split_size"] == -1
    assert all(v == 0 for k, v in stats.items() if k != "max_split_size")


def _pick(stats, *keys):
    return [stats[k] for k in keys]


def test_memory_stats_are_exact(fake):
    _, alloc, s = fake
    side = FakeStream("side")
    small = alloc.malloc(1000, s)  # 1,024-byte block
    large = alloc.malloc(3 * MiB, s)
    st = alloc.memory_stats()
    assert _pick(st, "allocation.all.current", "allocation.small_pool.current",
                 "allocation.large_pool.current") == [2, 1, 1]
    assert st["allocated_bytes.all.current"] == 1024 + 3 * MiB == st["allocated_bytes.all.peak"]
    assert st["requested_bytes.all.current"] == 1000 + 3 * MiB
    assert _pick(st, "reserved_bytes.all.current", "segment.all.current",
                 "num_device_alloc") == [1024 + 3 * MiB, 2, 2]
    assert st["reserved_bytes.small_pool.current"] == 1024 and st["reserved_bytes.large_pool.current"] == 3 * MiB

    alloc.free(small)
    st = alloc.memory_stats()
    assert _pick(st, "allocation.all.current", "allocation.all.allocated", "allocation.all.freed") == [1, 2, 1]
    assert _pick(st, "allocated_bytes.all.current", "allocated_bytes.all.freed") == [3 * MiB, 1024]
    assert st["allocated_bytes.all.peak"] == 1024 + 3 * MiB  # the peak stays
    assert _pick(st, "active.all.current", "active_bytes.small_pool.current") == [1, 0]
    assert st["reserved_bytes.all.current"] == 1024 + 3 * MiB  # cached, still reserved

    alloc.reset_peak_memory_stats()
    st = alloc.memory_stats()
    assert st["allocated_bytes.all.peak"] == 3 * MiB and st["reserved_bytes.all.peak"] == 1024 + 3 * MiB

    again = alloc.malloc(700, s)  # the cached block
    assert again is small
    alloc.record_stream(again, side)
    alloc.free(again)  # pending: no longer allocated, still active
    st = alloc.memory_stats()
    assert _pick(st, "allocation.all.current", "active.all.current", "active.small_pool.current") == [1, 2, 1]
    assert _pick(st, "allocated_bytes.all.current", "active_bytes.all.current") == [3 * MiB, 3 * MiB + 1024]
    assert st["requested_bytes.all.current"] == 3 * MiB + 700
    assert _pick(st, "allocation.all.allocated", "num_device_alloc") == [3, 2]

    alloc.reset_accumulated_memory_stats()
    st = alloc.memory_stats()
    assert _pick(st, "allocation.all.allocated", "allocation.all.freed", "allocation.all.current") == [0, 0, 1]
    assert st["num_device_alloc"] == 0
    alloc.free(large)
    st = alloc.memory_stats()
    assert _pick(st, "allocation.all.freed", "allocated_bytes.all.freed",
                 "allocated_bytes.all.current") == [1, 3 * MiB, 0]


def test_peaks_count_pending_blocks(fake):
    backend, alloc, s = fake
    a, c = alloc.malloc(4096, s), alloc.malloc(4096, s)  # allocation peak: 2
    alloc.record_stream(a, FakeStream("side"))
    alloc.free(a)  # pending: still active
    b = alloc.malloc(4096, s)  # a new block: 2 allocated (no new peak), 3 active (a new peak)
    st = alloc.memory_stats()
    assert _pick(st, "allocation.all.peak", "active.all.peak", "active_bytes.small_pool.peak") == [2, 3, 3 * 4096]
    assert st["requested_bytes.all.peak"] == 3 * 4096
    alloc.free(b)
    alloc.free(c)


def test_every_peak_is_the_largest_current_value_seen(fake):
    # malloc compares fewer statistics with their peaks while no block is pending (active is then
    # allocated): a random walk of mallocs, frees, record_streams, completed events and peak resets
    # checks every peak against the largest current value observed after each step.
    backend, alloc, s = fake
    side = FakeStream("side")
    rng = random.Random(7)
    live, seen = [], {}
    stats = [f"{stat}.{pool}" for stat in ("allocation", "allocated_bytes", "active", "active_bytes",
                                           "requested_bytes") for pool in allocator.POOL_TYPES]
    for step in range(400):
        r = rng.random()
        if r < 0.45 or not live:
            live.append(alloc.malloc(rng.choice((100, 600, 4096, 2 * MiB, 3 * MiB)), s))
        elif r < 0.85:
            block = live.pop(rng.randrange(len(live)))
            if rng.random() < 0.3:
                alloc.record_stream(block, side)  # pending once freed
            alloc.free(block)
        elif r < 0.95:
            for e in backend.events:  # the side stream caught up: the next cache miss unpends
                e.done = True
        else:
            alloc.reset_peak_memory_stats()
            seen = {}
        st = alloc.memory_stats()
        for k in stats:
            seen[k] = max(seen.get(k, 0), st[k + ".current"])
            assert st[k + ".peak"] == seen[k], (step, k)
    assert alloc._pending > 0 or any(e.done for e in backend.events)  # both paths were walked


def test_empty_cache_returns_cached_blocks_and_keeps_live_ones(fake):
    backend, alloc, s = fake
    side = FakeStream("side")
    live = alloc.malloc(1000, s)
    cached = [alloc.malloc(1000, s), alloc.malloc(5 * MiB, s)]
    pending = alloc.malloc(8000, s)
    for b in cached:
        alloc.free(b)
    alloc.record_stream(pending, side)
    alloc.free(pending)
    event = backend.events[-1]
    alloc.empty_cache()
    assert set(backend.live) == {live.ptr}
    freed = [c for c in backend.calls if c[0] == "free"]
    assert sorted(c[1] for c in freed) == sorted(b.ptr for b in (*cached, pending))
    assert all(c[2] is s for c in freed)  # ordered on each block's own stream
    # the pending block goes back after its stream waits on the event (the host never waits)
    assert backend.calls.index(("wait_event", s, event)) < backend.calls.index(("free", pending.ptr, s))
    st = alloc.memory_stats()
    assert _pick(st, "reserved_bytes.all.current", "segment.all.current", "num_device_free") == [1024, 1, 3]
    assert _pick(st, "active.all.current", "allocation.all.current") == [1, 1]
    alloc.free(live)
    assert alloc.memory_stats()["reserved_bytes.all.current"] == 1024  # cached until the next empty_cache
    alloc.empty_cache()
    assert backend.live == {} and alloc.memory_stats()["reserved_bytes.all.current"] == 0


def test_out_of_memory_empties_the_cache_and_retries_once():
    backend = FakeBackend(capacity=4 * MiB)
    alloc, s = CachingAllocator(backend), FakeStream("s")
    alloc.free(alloc.malloc(3 * MiB, s))
    b = alloc.malloc(2 * MiB, s)  # 3 + 2 > 4: the cached 3 MiB block goes back, then it fits
    st = alloc.memory_stats()
    assert _pick(st, "num_alloc_retries", "num_ooms", "reserved_bytes.all.current") == [1, 0, 2 * MiB]
    with pytest.raises(OutOfMemoryError, match=r"Tried to allocate 3\.00 MiB") as info:
        alloc.malloc(3 * MiB, s)
    assert isinstance(info.value, RuntimeError)
    st = alloc.memory_stats()
    assert _pick(st, "num_alloc_retries", "num_ooms", "allocation.all.current") == [2, 1, 1]
    alloc.free(b)


def test_private_pools_keep_their_blocks(fake):
    backend, alloc, s = fake
    pool = alloc.create_pool()
    assert pool != 0
    a = alloc.malloc(1000, s, pool=pool)
    alloc.free(a)
    other = alloc.malloc(1000, s)
    assert other is not a  # the default pool does not get it
    alloc.free(other)
    alloc.empty_cache()
    assert other.ptr not in backend.live
    assert a.ptr in backend.live  # a live private pool's cache stays
    kept = alloc.malloc(1000, s, pool=pool)
    assert kept is a
    cached = alloc.malloc(5000, s, pool=pool)
    alloc.free(cached)
    alloc.release_pool(pool)  # its owner is gone: cached blocks go back now, live ones when freed
    assert cached.ptr not in backend.live and kept.ptr in backend.live
    with pytest.raises(ValueError, match="pool: no pool with id"):
        alloc.malloc(1000, s, pool=pool)
    alloc.free(kept)
    alloc.empty_cache()
    assert kept.ptr not in backend.live
    assert alloc.memory_stats()["reserved_bytes.all.current"] == 0


def test_training_steps_do_not_grow_reserved_memory(fake):
    """1,000 steps: parameters, activations kept for backward, temporaries, gradients recorded on a
    communication stream whose events complete a step later, a short last batch every 10 steps."""
    backend, alloc, s = fake
    comm = FakeStream("comm")
    params = [alloc.malloc(n, s) for n in (4 * MiB, 4096, 300_000, 12_000)]
    history = []
    for step in range(1000):
        for event in backend.events:
            event.done = True  # last step's communication has finished
        batch = 32 if step % 10 != 9 else 7
        acts = []
        for width in (3072, 1500, 777):
            tmp = alloc.malloc(batch * width * 4, s)
            acts.append(alloc.malloc(batch * width * 4, s))
            alloc.free(tmp)
        grads = [alloc.malloc(p.requested, s) for p in params]
        for a in reversed(acts):
            alloc.free(a)
        for g in grads:
            alloc.record_stream(g, comm)
            alloc.free(g)
        if step in (99, 999):
            history.append((alloc.memory_stats()["reserved_bytes.all.current"], len(backend.live)))
    assert history[0] == history[1]
    st = alloc.memory_stats()
    assert st["allocation.all.current"] == len(params) and st["num_ooms"] == 0


def test_threads_never_share_a_live_block():
    backend = FakeBackend()
    alloc = CachingAllocator(backend)
    shared = FakeStream("shared")
    live, live_lock, errors = set(), threading.Lock(), []

    def work(i):
        own = FakeStream(f"t{i}")
        try:
            for j in range(300):
                held = [alloc.malloc((j % 7 + 1) * 1000, shared if j % 2 else own) for _ in range(3)]
                with live_lock:
                    for b in held:
                        if b.ptr in live:
                            errors.append(f"block {b.ptr:#x} handed out twice")
                        live.add(b.ptr)
                with live_lock:
                    for b in held:
                        live.discard(b.ptr)
                for b in held:
                    alloc.free(b)
        except Exception as e:  # reported below: an exception in a thread would be lost
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    st = alloc.memory_stats()
    assert _pick(st, "allocation.all.current", "allocated_bytes.all.current", "active.all.current") == [0, 0, 0]
    assert st["allocation.all.allocated"] == 4 * 300 * 3
    assert st["reserved_bytes.all.current"] == sum(backend.live.values())


def test_a_free_run_by_the_gc_inside_malloc_does_not_deadlock(fake):
    backend, alloc, s = fake
    victim = alloc.malloc(1000, s)
    backend.on_allocate = lambda: alloc.free(victim)  # as a storage's __del__ would, mid-malloc
    b = alloc.malloc(5000, s)
    backend.on_allocate = None
    assert alloc.malloc(1000, s) is victim
    assert alloc.memory_stats()["allocation.all.current"] == 2 and b.size == 5120


def test_bad_input_raises_a_clear_error(fake):
    _, alloc, s = fake
    with pytest.raises(ValueError, match="nbytes: expected a size >= 0, got -1"):
        alloc.malloc(-1, s)
    with pytest.raises(TypeError, match="nbytes: expected an int, got float"):
        alloc.malloc(1.5, s)
    with pytest.raises(ValueError, match="pool: no pool with id 7"):
        alloc.malloc(8, s, pool=7)
    with pytest.raises(ValueError, match="pool: the default pool"):
        alloc.release_pool(0)
    assert alloc.memory_stats()["allocation.all.allocated"] == 0


# ----- runtime/memory.py's glue, over fakes of the cuda.core calls it makes (cuda-core 1.2's API:
# MemoryResource.allocate(size, *, stream) -> Buffer; Buffer.handle, Buffer.close(stream);
# Stream.record() -> Event, Stream.wait(event); Event.is_done). test_cuda.py runs the real ones.
class FakeCuEvent:
    is_done = False


class FakeCuStream:
    def __init__(self, log):
        self.log = log

    def record(self):
        self.log.append("record")
        event = FakeCuEvent()
        self.log.append(event)
        return event

    def wait(self, event):
        self.log.append(("wait", event))


class FakeBuffer:
    def __init__(self, handle, log):
        self.handle, self.log = handle, log

    def close(self, stream):
        self.log.append(("close", self.handle, stream))


class FakePool:
    def __init__(self, log, full=False):
        self.log, self.full, self.next = log, full, 4096

    def allocate(self, size, *, stream):
        if self.full:
            raise RuntimeError("CUDA_ERROR_OUT_OF_MEMORY: out of memory")  # cuda.core's CUDAError text
        self.log.append(("allocate", size, stream))
        self.next += size
        return FakeBuffer(self.next, self.log)


class FakeTTStream:  # runtime/cuda.py's Stream: the cuda.core stream and its device's pool
    def __init__(self, log, pool):
        self._cu, self.memory_resource = FakeCuStream(log), pool


@pytest.fixture
def fake_device(monkeypatch):
    monkeypatch.setattr(memory, "_allocators", {})
    log = []
    pool = FakePool(log)
    return log, pool, FakeTTStream(log, pool), tt.device("cuda", 0)


def test_cuda_storage_allocates_and_frees_through_the_allocator(fake_device):
    log, pool, s, dev = fake_device
    st = memory.CudaStorage(1000, dev, s)
    assert log == [("allocate", 1024, s._cu)] and st.nbytes == 1000
    ptr = st.data_ptr()
    del st
    again = memory.CudaStorage(900, dev, s)
    assert again.data_ptr() == ptr and len(log) == 1  # cached: no cuda.core call
    assert memory.device_allocator(0).memory_stats()["allocated_bytes.all.current"] == 1024
    del again
    memory.device_allocator(0).empty_cache()
    assert log[1:] == [("close", ptr, s._cu)]


def test_cuda_storage_record_stream_waits_for_the_other_streams_event(fake_device):
    log, pool, s, dev = fake_device
    side = FakeTTStream(log, pool)
    st = memory.CudaStorage(4096, dev, s)
    ptr = st.data_ptr()
    st.record_stream(s)  # its own stream: nothing to wait for
    st.record_stream(side)
    del st
    assert log[-2] == "record"  # recorded on the side stream
    event = log[-1]
    held = memory.CudaStorage(4096, dev, s)
    assert held.data_ptr() != ptr
    event.is_done = True
    assert memory.CudaStorage(4096, dev, s).data_ptr() == ptr


def test_the_pools_out_of_memory_error_becomes_torchs(fake_device):
    log, pool, s, dev = fake_device
    pool.full = True
    with pytest.raises(tt.cuda.OutOfMemoryError, match="CUDA out of memory. Tried to allocate"):
        memory.CudaStorage(4096, dev, s)
    assert memory.device_allocator(0).memory_stats()["num_ooms"] == 1


@pytest.mark.skipif(tt.cuda.is_available(), reason="CPU mode's answers; test_cuda.py checks a device")
def test_cuda_memory_functions_in_cpu_mode_answer_zero():
    assert tt.cuda.memory_stats() == {}
    assert [tt.cuda.memory_allocated(), tt.cuda.max_memory_allocated(), tt.cuda.memory_reserved(),
            tt.cuda.max_memory_reserved()] == [0, 0, 0, 0]
    assert tt.cuda.reset_peak_memory_stats() is None and tt.cuda.reset_accumulated_memory_stats() is None
    assert tt.cuda.empty_cache() is None
    assert issubclass(tt.cuda.OutOfMemoryError, RuntimeError)
