"""``cuda.host_memory_stats`` and its resets: torch's keys; a pinned tensor counted as an active
request and as an allocation of the pinned pool, freed when it dies; peak and accumulated resets."""
import gc

import numpy as np
import pytest

import tritensor as tt

KEYS = sorted([f"{s}.{m}" for s in ("allocations", "allocated_bytes", "active_requests", "active_bytes")
               for m in ("current", "peak", "allocated", "freed")]
              + [f"{t}.{m}" for t in ("host_alloc_time", "host_free_time")
                 for m in ("total", "max", "min", "count", "avg")]
              + ["num_host_alloc", "num_host_free"])


@pytest.mark.skipif(tt.cuda.is_available(), reason="CUDA is initialised by the device run's tensors")
def test_empty_before_cuda_is_initialised():
    assert tt.cuda.host_memory_stats() == {} and tt.cuda.host_memory_stats_as_nested_dict() == {}
    tt.cuda.reset_peak_host_memory_stats()
    tt.cuda.reset_accumulated_host_memory_stats()


@pytest.mark.skipif(not tt.cuda.is_available(), reason="pinned memory needs the CUDA driver (or the simulator)")
def test_a_pinned_tensor_is_counted_while_it_lives():
    tt.ones(4, device="cuda").cpu()  # initialised, with its staging buffers made
    gc.collect()
    before = tt.cuda.host_memory_stats()
    assert list(before) == KEYS
    pinned = tt.from_numpy(np.ones(1000, dtype=np.float32)).pin_memory()
    during = tt.cuda.host_memory_stats()
    for key, grew in (("active_requests.current", 1), ("active_bytes.current", 4000), ("allocations.current", 1),
                      ("allocated_bytes.current", 4000), ("num_host_alloc", 1), ("host_alloc_time.count", 1)):
        assert during[key] - before[key] == grew, key
    assert during["active_bytes.peak"] >= during["active_bytes.current"]
    del pinned
    gc.collect()
    after = tt.cuda.host_memory_stats()
    assert after["active_requests.current"] == before["active_requests.current"]
    assert after["active_bytes.freed"] - before["active_bytes.freed"] == 4000
    assert after["num_host_free"] - before["num_host_free"] == 1
    assert after["active_bytes.peak"] == during["active_bytes.peak"]
    tt.cuda.reset_peak_host_memory_stats()
    reset = tt.cuda.host_memory_stats()
    assert reset["active_bytes.peak"] == reset["active_bytes.current"]
    tt.cuda.reset_accumulated_host_memory_stats()
    reset = tt.cuda.host_memory_stats()
    assert reset["active_bytes.allocated"] == reset["active_bytes.freed"] == reset["num_host_alloc"] == 0
    assert reset["host_alloc_time.count"] == 0 and reset["allocations.current"] == after["allocations.current"]
    nested = tt.cuda.host_memory_stats_as_nested_dict()
    assert nested["allocations"]["current"] == reset["allocations.current"]
