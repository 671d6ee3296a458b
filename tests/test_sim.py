"""The simulated CUDA device itself (``runtime/sim.py``): what it checks, and the driver calls it counts.

Each check is shown failing on purpose: a kernel reading past a tensor, a host pointer reaching a
kernel, a host copy given a device address, a launch over the grid limits, a read of a block the
allocator took back, a stream whose reader runs late, the capture rules. Then the steady-state
driver calls of an eager op, a matmul, a recorded backward and a replayed graph are pinned, so that
a change that adds a driver call to every op shows in CI. These tests run on the simulated device
(the CI's second run, ``TRITENSOR_DEVICE=sim``); in CPU or GPU mode they skip.
"""
from __future__ import annotations

import numpy as np
import pytest
import triton
import triton.language as tl

import tritensor as tt
from tritensor.runtime import driver as drv
from tritensor.runtime import mode

pytestmark = pytest.mark.skipif(not mode.SIM, reason="needs the simulated device (TRITENSOR_DEVICE=sim)")
if mode.SIM:
    from tritensor.runtime import sim


@pytest.fixture(autouse=True)
def clean_device():
    """Every test starts and ends with no sticky error (some provoke one on purpose)."""
    sim.clear_error()
    yield
    sim.clear_error()


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def _copy_unmasked(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


@triton.jit
def _store_at(y_ptr, at, value):
    tl.store(y_ptr + at, value)


def test_device_memory_is_its_own_address_space():
    x = tt.ones(4, device="cuda")
    assert x.data_ptr() >= sim.DEVICE_BASE
    assert x.cpu().data_ptr() < sim.DEVICE_BASE  # a host copy lives at a host address
    other = tt.ones(4, device="cuda:1")
    assert other.data_ptr() >= sim.DEVICE_BASE + sim.DEVICE_SPAN  # each device has its own range


def test_a_users_kernel_runs_on_tritensor_tensors():
    x = tt.arange(100, dtype=tt.float32, device="cuda")
    y = tt.empty(100, device="cuda")
    _copy[(4,)](x, y, 100, BLOCK=32)  # masked-off lanes past 100 are no accesses
    np.testing.assert_array_equal(y.cpu().numpy(), np.arange(100, dtype=np.float32))


def test_a_read_past_a_tensor_names_the_kernel_the_argument_and_the_offset():
    x = tt.arange(10, dtype=tt.float32, device="cuda")  # 40 bytes in a 512-byte block
    y = tt.empty(16, device="cuda")
    _copy_unmasked[(1,)](x, y, BLOCK=16)
    with pytest.raises(sim.IllegalAddress, match=r"kernel _copy_unmasked: illegal load of 4 bytes.*past the end "
                       r"of the 40-byte tensor storage.*argument 'x_ptr' .* at byte offset 40"):
        tt.cuda.synchronize()
    # The error is sticky, as a CUDA context's: every later call reports it.
    with pytest.raises(sim.IllegalAddress):
        tt.ones(1, device="cuda").cpu()


def test_a_write_into_no_allocation_is_caught():
    y = tt.zeros(8, dtype=tt.int32, device="cuda")
    # 2**51 bytes on: past anything the device's bump allocator hands out in a run (a few MB on
    # could land in a later live allocation, which a GPU would not catch either)
    _store_at[(1,)](y, 1 << 49, 5)
    with pytest.raises(sim.IllegalAddress, match=r"kernel _store_at: illegal store of 4 bytes.*in no allocation"
                                                  r".*argument 'y_ptr'.*byte offset 2251799813685248"):
        tt.cuda.synchronize()


def test_a_host_tensor_reaching_a_users_kernel_is_named():
    y = tt.empty(4, device="cuda")
    with pytest.raises(sim.IllegalAddress, match=r"kernel _copy: argument 'x_ptr' is a host pointer"):
        _copy[(1,)](tt.ones(4, device="cpu"), y, 4, BLOCK=4)


def test_a_host_copy_given_a_device_address_on_its_host_side_is_refused():
    x = tt.ones(4, device="cuda")
    stream = tt.cuda.current_stream().cuda_stream
    with pytest.raises(sim.IllegalAddress, match="is a device address"):
        drv.driver.cuMemcpyDtoHAsync(x.data_ptr(), x.data_ptr(), 16, stream)


def test_launch_limits_are_the_devices():
    y = tt.zeros(1, device="cuda")
    with pytest.raises(sim.SimError, match=r"CUDA_ERROR_INVALID_VALUE.*grid \(1, 70000, 1\)"):
        _store_at[(1, 70000)](y, 0, 1.0)
    with pytest.raises(sim.SimError, match="2048 threads a block"):
        _store_at[(1,)](y, 0, 1.0, num_warps=64)


def test_fresh_memory_reads_as_poison():
    assert np.isnan(tt.empty(5, device="cuda").cpu().numpy()).all()
    assert (tt.empty(3, dtype=tt.int32, device="cuda").cpu().numpy() == -1).all()


def test_a_freed_tensors_block_reads_as_poison():
    x = tt.full((64,), 7.0, device="cuda")
    address = x.data_ptr()
    y = tt.zeros(64, device="cuda")
    stale = type("Stale", (), {"data_ptr": lambda self: address, "dtype": tt.float32})()
    del x  # its block goes back to the allocator's cache: poisoned, in stream order
    _copy[(1,)](stale, y, 64, BLOCK=64)  # a kernel that kept the raw address
    if sim.STRICT:  # TRITENSOR_SIM_STRICT=1: a block in the cache faults instead
        with pytest.raises(sim.IllegalAddress, match="the caching allocator holds"):
            y.cpu()
        return
    assert np.isnan(y.cpu().numpy()).all()


def test_streams_run_late_unless_an_event_orders_them():
    """A user's kernel reads a tensor on a side stream; the tensor is freed on the main stream and
    its block reused there. tritensor's own launches note every argument's stream (record_stream),
    a user's Triton launch does not, as on a GPU: without record_stream the main stream runs first
    and the reader sees the new contents; with it, the block waits for the reader."""
    def run(record: bool) -> np.ndarray:
        main, side = tt.cuda.current_stream(), tt.cuda.Stream()
        x = tt.full((256,), 1.0, device="cuda")
        y = tt.empty(256, device="cuda")
        side.wait_stream(main)
        with tt.cuda.stream(side):
            _copy[(1,)](x, y, 256, BLOCK=256)
        if record:
            x.record_stream(side)
        del x
        z = tt.zeros(256, device="cuda")  # the same size class, on the main stream
        main.synchronize()  # the main stream runs ahead of the side stream
        side.synchronize()
        del z
        return y.cpu().numpy()

    assert (run(record=True) == 1.0).all()
    assert (run(record=False) == 0.0).all()  # read after reuse: wrong values, as on a GPU


def test_work_is_queued_until_something_waits_for_it():
    x = tt.ones(8, device="cuda")
    tt.cuda.synchronize()
    s = sim._streams[(0, tt.cuda.current_stream().cuda_stream)]
    y = x + 1
    # The add is queued on its stream, not run (other bookkeeping may sit in the queue beside it).
    assert any(type(item) is sim._Launch for item in s.queue)
    np.testing.assert_array_equal(y.cpu().numpy(), 2.0)  # the copy back waits for it
    assert not any(type(item) is sim._Launch for item in s.queue)  # run (bookkeeping queued after may wait)


def test_a_sync_during_capture_invalidates_it_as_the_driver_does():
    stream = tt.cuda.Stream()
    builder = stream._cu.create_graph_builder()
    builder.begin_building("global")
    with pytest.raises(sim.SimError, match="CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED.*cudaDeviceSynchronize"):
        drv.Device(0).sync()
    with pytest.raises(sim.SimError, match="CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"):
        builder.end_building()
    builder.close()


def test_an_event_recorded_during_capture_cannot_be_queried():
    stream = tt.cuda.Stream()
    builder = stream._cu.create_graph_builder()
    builder.begin_building("relaxed")
    event = stream._cu.record()
    builder.end_building()
    builder.close()
    with pytest.raises(sim.SimError, match="CUDA_ERROR_CAPTURED_EVENT"):
        event.is_done


def test_a_captured_graph_replays_what_it_captured():
    static_in = tt.ones(16, device="cuda")
    static_out = static_in * 3  # warm up the kernel outside the capture
    g = tt.cuda.CUDAGraph()
    with tt.cuda.graph(g):
        static_out = static_in * 3
    static_in.copy_(tt.full((16,), 2.0, device="cuda"))
    with sim.counting() as c:
        g.replay()
    assert dict(c) == {"graph_launch": 1}
    np.testing.assert_array_equal(static_out.cpu().numpy(), 6.0)


# ----- driver calls per op, in the steady state ---------------------------------------------------
def _steady(fn, warm: int = 3) -> dict:
    for _ in range(warm):
        fn()
    tt.cuda.synchronize()
    with sim.counting() as c:
        fn()
    return dict(c)


def test_driver_calls_of_an_eager_op():
    a, b = tt.ones(1024, device="cuda"), tt.ones(1024, device="cuda")
    assert _steady(lambda: a + b) == {"launch": 1}  # no allocation, sync, event or copy


def test_driver_calls_of_a_matmul_and_a_reduction():
    m = tt.randn(64, 64, device="cuda")
    assert _steady(lambda: m @ m) == {"launch": 1}
    # Two launches: partial sums and their combine (the interpreter's block sizes split 4,096
    # elements in two passes); still no allocation: the partials' buffer comes from the cache.
    assert _steady(lambda: m.sum()) == {"launch": 2}


def test_driver_calls_of_a_recorded_backward():
    a = tt.randn(256, device="cuda", requires_grad=True)
    b = tt.randn(256, device="cuda", requires_grad=True)

    def step():
        (a * b).sum().backward()
        a.grad = b.grad = None

    calls = _steady(step)
    assert set(calls) == {"launch"}, calls  # launches only: no allocation, sync, event or copy
    assert calls["launch"] <= 7, calls


def test_reading_a_value_back_is_one_copy_and_one_sync():
    x = tt.ones(4, device="cuda")
    calls = _steady(lambda: x.sum().item())
    assert calls == {"launch": 1, "dtoh": 1, "sync": 1}, calls


@pytest.mark.slow
def test_the_compile_mode_fails_a_kernel_an_h100_cannot_launch(tmp_path):
    """TRITENSOR_SIM_COMPILE=1 compiles each new kernel key for sm_90: a tile pipelined in two
    stages fits an H100's shared memory and runs; in four stages it needs 256 KB and its launch
    fails, as it would on the device. (A process of its own: the mode is read at import.)"""
    import os
    import subprocess
    import sys

    script = tmp_path / "run.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "import tritensor as tt\n"
        "from sim_kernels import tile_matmul\n"
        "from tritensor.runtime import sim\n"
        "a, b = tt.ones(128, 256, device='cuda'), tt.ones(256, 128, device='cuda')\n"
        "c = tt.empty(128, 128, device='cuda')\n"
        "for stages in (2, 4):\n"
        "    try:\n"
        "        tile_matmul[(1,)](a, b, c, 256, BLOCK=128, BLOCK_K=64, num_stages=stages)\n"
        "        print(stages, 'ran', float(c.cpu().numpy()[0, 0]))\n"
        "    except sim.SimError as e:\n"
        "        print(stages, 'refused', e)\n")
    env = dict(os.environ, TRITENSOR_DEVICE="sim", TRITENSOR_SIM_COMPILE="1")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "2 ran 256.0", out.stdout
    assert lines[1].startswith("4 refused CUDA_ERROR_INVALID_VALUE: kernel tile_matmul cannot run on an H100"), out.stdout
    assert "needs 262144 B of shared memory, sm_90 has 232448" in lines[1], out.stdout
