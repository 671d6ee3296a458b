"""tritensor.cuda on a real GPU: streams ordered by events, memory stats, device round trips.

These need a CUDA device; on CPU-only machines (CI) the CPU-mode contract is tested in
test_tensor.py::test_cpu_mode_is_selected_without_gpu instead.
"""
import gc

import numpy as np
import pytest

import tritensor as tt
from tolerances import assert_close

pytestmark = pytest.mark.skipif(not tt.cuda.is_available(), reason="needs a CUDA device (GPU mode)")


def test_device_queries():
    assert tt.cuda.device_count() >= 1
    props = tt.cuda.get_device_properties(0)
    assert props.total_memory > 0 and props.multi_processor_count > 0
    assert tt.cuda.get_device_name() == props.name


def test_roundtrip_and_kernels_on_device():
    a = np.random.default_rng(0).standard_normal((257, 129)).astype(np.float32)
    x = tt.from_numpy(a).cuda()
    assert x.device == tt.device("cuda:0") and x.is_cuda
    y = (x.T * 2 + 1).exp().cpu()
    assert_close(y, np.exp(a.T * 2 + 1), tt.float32, "relative")
    assert x.half().bfloat16().float().cpu().numpy().dtype == np.float32


def test_two_streams_ordered_by_an_event():
    s1, s2 = tt.cuda.Stream(), tt.cuda.Stream()
    x = tt.zeros(1 << 22, device="cuda")
    tt.cuda.synchronize()
    with tt.cuda.stream(s1):
        for _ in range(50):  # enough work that s2 would overtake it without the event
            x.add_(1.0)
        done = s1.record_event()
    s2.wait_event(done)
    with tt.cuda.stream(s2):
        y = x * 2.0
    s2.synchronize()
    assert y[0].item() == 100.0 and y[-1].item() == 100.0


def test_event_timing():
    start, end = tt.cuda.Event(enable_timing=True), tt.cuda.Event(enable_timing=True)
    x = tt.ones(1 << 20, device="cuda")
    start.record()
    for _ in range(10):
        x = x + 1.0
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) > 0 and end.query()


def test_memory_stats_follow_tensors():
    tt.cuda.synchronize()
    before = tt.cuda.memory_allocated()
    x = tt.empty(1 << 20, device="cuda")
    assert tt.cuda.memory_allocated() == before + (4 << 20)
    assert tt.cuda.max_memory_allocated() >= before + (4 << 20)
    assert tt.cuda.memory_reserved() >= tt.cuda.memory_allocated()
    del x
    assert tt.cuda.memory_allocated() == before
    tt.cuda.empty_cache()


def test_memory_freed_while_another_stream_reads_stays_valid():
    s = tt.cuda.Stream()
    x = tt.full((1 << 22,), 3.0, device="cuda")
    s.wait_stream(tt.cuda.current_stream())  # x is written on the default stream: s reads it after
    with tt.cuda.stream(s):
        for _ in range(20):
            y = x * 1.0
    del x  # freed on the default stream while s may still read it: record_stream keeps it safe
    z = tt.full((1 << 22,), 5.0, device="cuda")  # would reuse x's bytes if the free were not ordered
    s.synchronize()
    assert y[0].item() == 3.0 and z[0].item() == 5.0


def test_caching_allocator_reuses_a_freed_block_without_the_driver():
    x = tt.empty(1000, device="cuda")
    ptr, before = x.data_ptr(), tt.cuda.memory_stats()
    del x
    y = tt.empty(1000, device="cuda")
    after = tt.cuda.memory_stats()
    assert y.data_ptr() == ptr and after["num_device_alloc"] == before["num_device_alloc"]
    assert after["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
    assert after["allocation.all.allocated"] == before["allocation.all.allocated"] + 1


def test_empty_cache_leaves_only_live_blocks_reserved():
    # Earlier tests' garbage (cycles: tracebacks, autograd graphs, CUDA graphs holding private
    # pools) is collected first, so what stays reserved is only what is alive.
    gc.collect()
    x = tt.empty(1 << 20, device="cuda")
    tmp = tt.empty(3 << 20, device="cuda")
    del tmp
    assert tt.cuda.memory_reserved() >= tt.cuda.memory_allocated() + (12 << 20)
    tt.cuda.empty_cache()
    assert tt.cuda.memory_reserved() == tt.cuda.memory_allocated() and x.data_ptr() != 0
    assert tt.cuda.max_memory_reserved() >= tt.cuda.memory_reserved()


def test_a_training_loop_does_not_grow_reserved_memory():
    w = tt.randn(256, 256, device="cuda", requires_grad=True)
    x = tt.randn(64, 256, device="cuda")

    def step():
        (x @ w).relu().sum().backward()
        w.grad = None

    for _ in range(5):
        step()
    gc.collect()  # earlier tests' garbage, collected mid-loop, would free blocks the loop never held
    tt.cuda.synchronize()
    before = tt.cuda.memory_stats()
    for _ in range(1000):
        step()
    tt.cuda.synchronize()
    after = tt.cuda.memory_stats()
    for key in ("reserved_bytes.all.current", "num_device_alloc", "allocated_bytes.all.current"):
        assert after[key] == before[key], key
