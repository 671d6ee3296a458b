"""GPU-path failures the simulated device catches (``TRITENSOR_DEVICE=sim``), one test each.

Why this file exists: GPUs are lent rarely, and each of these bugs either broke on real hardware
(an H100 run: host pointers in address tables, the TMA store past a view, fp64 scalars passed as
fp32, inf cast to int, setitem with repeated indices) or would break only there (graph capture
and the caching allocator's events, address tables a graph does not own, a kernel's first load
during capture, host syncs during capture, autotuner pruning, direct launches across devices).
Each test fails under the simulator when its fix is reverted and passes with it, so the GPU path
stays honest between GPU runs. CI runs the suite in sim mode too; tests that need the simulated
device skip elsewhere (the autotuner-pruning test runs in every mode).
"""
from __future__ import annotations

import gc

import numpy as np
import pytest
import triton
import triton.language as tl

import tritensor as tt
from tolerances import assert_close
from tritensor.runtime import direct, launch, memory, mode

needs_sim = pytest.mark.skipif(not mode.SIM, reason="needs the simulated device")

if mode.SIM:
    from tritensor.runtime import sim


@pytest.fixture(autouse=True)
def _fresh_device():
    """Every test starts and ends with no capture under way and no sticky simulated error."""
    yield
    if mode.SIM:
        sim.clear_error()
        assert not memory.capturing


@triton.jit
def _copy_plus_one(dst, src, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask) + 1, mask=mask)


def _np(t):
    return t.cpu().numpy()


# ----- item 1: the caching allocator records and queries no event during a capture -------------------
@needs_sim
def test_a_block_freed_during_capture_gets_its_events_after_the_capture():
    s = tt.cuda.Stream()
    x = tt.ones(1024, device="cuda")
    t = tt.ones(4096, device="cuda")  # allocated on the default stream ...
    s.wait_stream(tt.cuda.current_stream())
    with tt.cuda.stream(s):
        for _ in range(3):
            t + 1  # ... and used on s: record_stream(s), so its free must wait for s
            y = x * 2 + 1
    tt.cuda.synchronize()
    alloc = memory.device_allocator(0)
    g = tt.cuda.CUDAGraph()
    with tt.cuda.graph(g, stream=s):
        del t  # pending on s: an event recorded now would be a node of the graph
        y = x * 2 + 1  # a cache miss in the graph's pool: querying events now breaks the capture
    assert not alloc._deferred  # the capture ended: its event is on s now
    x.fill_(3.0)
    g.replay()
    np.testing.assert_array_equal(_np(y), np.full(1024, 7.0, np.float32))
    tt.cuda.synchronize()
    tt.cuda.empty_cache()  # the freed block's event has completed: it goes back, nothing stays pending
    stats = tt.cuda.memory_stats()
    assert stats["active_bytes.all.current"] == stats["allocated_bytes.all.current"]


# ----- item 2: a graph keeps the address tables it reads ---------------------------------------------
@needs_sim
def test_a_graph_keeps_the_address_tables_it_reads(monkeypatch):
    from tritensor.triton_kernels import foreach

    monkeypatch.setattr(launch, "_TABLES_KEPT", 1)  # one new table evicts the graph's
    s = tt.cuda.Stream()
    ts = [tt.ones(n, device="cuda") for n in (100, 2000, 7)]
    coef = tt.full((1,), 2.0, device="cuda")
    s.wait_stream(tt.cuda.current_stream())
    with tt.cuda.stream(s):
        for _ in range(3):
            foreach.scale_(ts, coef, "float32")
    g = tt.cuda.CUDAGraph()
    with tt.cuda.graph(g, stream=s):
        foreach.scale_(ts, coef, "float32")
    with tt.cuda.stream(s):  # other tables evict the graph's from the cache; their blocks are reused
        for _ in range(4):
            others = [tt.zeros(64, device="cuda")]
            foreach.scale_(others, coef, "float32")
    for t in ts:
        t.fill_(1.0)
    g.replay()
    for t in ts:
        np.testing.assert_array_equal(_np(t), np.full(t.numel(), 2.0, np.float32))
    g.reset()  # the graph lets go of its tables


# ----- item 3: a kernel's first launch during a capture is refused before Triton compiles it ---------
@needs_sim
def test_the_first_launch_of_a_kernel_during_capture_is_refused_clearly():
    s = tt.cuda.Stream()
    x = tt.arange(100, dtype=tt.float32, device="cuda")
    y = tt.empty(100, device="cuda")
    s.wait_stream(tt.cuda.current_stream())
    with tt.cuda.stream(s):
        (x * 2).relu()  # what the capture runs besides the new kernel, warmed up
    tt.cuda.synchronize()
    with pytest.raises(tt.cuda.CaptureError, match=r"first launch of _copy_plus_one.*warm up"):
        with tt.cuda.graph(tt.cuda.CUDAGraph(), stream=s):
            (x * 2).relu()
            launch.launch(_copy_plus_one, (1,), y, x, 100, BLOCK=128)
    assert not tt.cuda.is_current_stream_capturing()
    with tt.cuda.stream(s):  # warmed up, the same launch captures and replays
        for _ in range(3):
            launch.launch(_copy_plus_one, (1,), y, x, 100, BLOCK=128)
    tt.cuda.synchronize()
    g = tt.cuda.CUDAGraph()
    with tt.cuda.graph(g, stream=s):
        launch.launch(_copy_plus_one, (1,), y, x, 100, BLOCK=128)
    x.fill_(4.0)
    g.replay()
    np.testing.assert_array_equal(_np(y), np.full(100, 5.0, np.float32))


# ----- item 4: host syncs during a capture are refused clearly; a broken capture raises once ----------
@needs_sim
def test_host_syncs_during_capture_are_refused_and_leave_the_capture_valid():
    s, other = tt.cuda.Stream(), tt.cuda.Stream()
    x = tt.ones(256, device="cuda")
    before = tt.cuda.Event()
    before.record()
    with tt.cuda.stream(s):
        for _ in range(3):
            y = x + 1
    tt.cuda.synchronize()
    g = tt.cuda.CUDAGraph()
    with tt.cuda.graph(g, stream=s):
        y = x + 1
        inside = s.record_event()
        for call, name in ((tt.cuda.synchronize, r"tritensor\.cuda\.synchronize"),
                           (s.synchronize, r"Stream\.synchronize"), (s.query, r"Stream\.query"),
                           (other.synchronize, r"Stream\.synchronize"),  # global mode: any stream
                           (before.query, r"Event\.query"), (before.synchronize, r"Event\.synchronize")):
            with pytest.raises(tt.cuda.CaptureError, match=name + r".*being captured"):
                call()
    with pytest.raises(tt.cuda.CaptureError, match="recorded while a CUDA graph was being captured"):
        inside.query()
    x.fill_(2.0)
    g.replay()  # the refusals broke nothing: the capture is whole
    np.testing.assert_array_equal(_np(y), np.full(256, 3.0, np.float32))


@needs_sim
def test_a_capture_the_driver_invalidated_raises_once():
    from tritensor.runtime import driver as drv

    s = tt.cuda.Stream()
    x = tt.ones(256, device="cuda")
    with tt.cuda.stream(s):
        for _ in range(3):
            x + 1
    tt.cuda.synchronize()
    # Inside `with graph(...)`: the block's own error is the one raised, not a second one about the capture.
    with pytest.raises(sim.SimError, match="STREAM_CAPTURE_UNSUPPORTED: cuMemAlloc") as info:
        with tt.cuda.graph(tt.cuda.CUDAGraph(), stream=s):
            x + 1
            drv.driver.cuMemAlloc(64)  # what the driver refuses during a global capture: it invalidates it
    assert "INVALIDATED" not in str(info.value) and info.value.__context__ is None
    assert not tt.cuda.is_current_stream_capturing()
    # capture_begin / capture_end by hand: one clear error, then nothing in progress.
    g = tt.cuda.CUDAGraph()
    with tt.cuda.stream(s):
        g.capture_begin()
        x + 1
        with pytest.raises(sim.SimError):
            drv.driver.cuMemAlloc(64)
        with pytest.raises(tt.cuda.CaptureError, match="invalidated.*cuMemAlloc"):
            g.capture_end()
        with pytest.raises(RuntimeError, match="no capture in progress"):
            g.capture_end()
        g.capture_begin()  # the graph can capture again
        y = x + 1
        g.capture_end()
    g.replay()
    np.testing.assert_array_equal(_np(y), np.full(256, 2.0, np.float32))


# ----- item 5: autotuner pruning that leaves one configuration times nothing --------------------------
def _autotuned(prune):
    by = {"early_config_prune": prune} if prune is not None else None
    return triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"],
                           prune_configs_by=by, do_bench=lambda *a, **k: 0.0)(_copy_plus_one)


def test_needs_autotuning_follows_the_autotuners_pruning():
    x = tt.ones(8)
    args = (x, x, 8)
    assert direct.needs_autotuning(_autotuned(None), args, {})  # two configurations: it would time them
    seen = []

    def keep_first(configs, named_args, **kwargs):
        seen.append(named_args["n"])
        return configs[:1]

    k = _autotuned(keep_first)
    assert not direct.needs_autotuning(k, args, {})  # one left after pruning: nothing to time
    assert seen == [8] and k.nargs is None  # pruned with the call's arguments, as Autotuner.run does
    assert direct.needs_autotuning(_autotuned(lambda configs, named_args, **kw: configs), args, {})


# ----- item 6: direct launches are keyed by device ---------------------------------------------------
@needs_sim
def test_a_kernel_launched_direct_on_one_device_is_compiled_again_for_another():
    assert tt.cuda.device_count() == 2
    for index in (0, 1):
        tt.cuda.set_device(index)
        try:
            a = tt.arange(1000, dtype=tt.float32, device=f"cuda:{index}")
            for _ in range(4):  # past the checked launches: direct from the third on
                b = a * 3.0 + 1.0
            np.testing.assert_array_equal(_np(b), np.arange(1000, dtype=np.float32) * 3 + 1)
        finally:
            tt.cuda.set_device(0)


# ----- item 7: address tables hold device addresses, host buffers staged -----------------------------
@needs_sim
@pytest.mark.parametrize("where", ["cpu", "cuda"])
def test_multi_tensor_kernels_read_device_addresses_from_their_tables(where):
    from tritensor.core.ops import amp as amp_ops

    rng = np.random.default_rng(7)
    vals = [rng.standard_normal(n).astype(np.float32) for n in (5, 3000, 257)]
    grads = [tt.tensor(v, device=where) for v in vals]
    found = tt.zeros(1, device=where)
    amp_ops.unscale_and_check_(grads, found, tt.full((1,), 0.5, device=where))
    for g, v in zip(grads, vals):
        np.testing.assert_array_equal(_np(g), v * np.float32(0.5))
    assert _np(found)[0] == 0.0
    params = [tt.tensor(v, device=where, requires_grad=True) for v in vals]
    for p, v in zip(params, vals):
        p.grad = tt.tensor(v * 10, device=where)
    total = tt.nn.utils.clip_grad_norm_(params, 1.0)
    want = np.sqrt(sum(float((v.astype(np.float64) * 10) @ (v.astype(np.float64) * 10)) for v in vals))
    assert_close(np.float32(total.item()), want, tt.float32, "fp32_norm")  # a norm over 3,262 fp32 terms


@needs_sim
def test_a_host_address_in_an_address_table_is_an_illegal_address(monkeypatch):
    from tritensor.core.ops import amp as amp_ops

    # What the H100 ran before tables were converted at launch: each buffer's own data_ptr(),
    # a host address for a host tensor, copied into a device table.
    monkeypatch.setattr(launch, "_with_base", lambda a, convert: a)
    grads = [tt.ones(100, device="cpu"), tt.ones(10, device="cpu")]  # host tensors, whatever the default device
    with pytest.raises(sim.IllegalAddress, match="no device address"):
        amp_ops.unscale_and_check_(grads, tt.zeros(1, device="cpu"), tt.full((1,), 0.5, device="cpu"))


# ----- item 8: the TMA matmul never stores past its output view -------------------------------------
@needs_sim
@pytest.mark.parametrize("dtype", [tt.float16, tt.bfloat16])
def test_the_tma_matmul_leaves_the_bytes_after_its_view_alone(dtype):
    from tritensor.triton_kernels import matmul_tma

    M, N, K, PAD = 70, 45, 50, 8  # rows of 45 fp16: 90 bytes, not a multiple of 16
    rng = np.random.default_rng(8)
    a = tt.zeros((M, 56), device="cuda", dtype=dtype)[:, :K]  # operand rows padded to 16 bytes, as TMA needs
    a.copy_(tt.tensor(rng.standard_normal((M, K)), device="cuda").to(dtype))
    b = tt.zeros((K, 48), device="cuda", dtype=dtype)[:, :N]
    b.copy_(tt.tensor(rng.standard_normal((K, N)), device="cuda").to(dtype))
    out_base = tt.full((M, N + PAD - N % PAD), 7.0, device="cuda", dtype=dtype)  # the neighbours: 7.0
    out = out_base[:, :N]
    # Called directly, as test_matmul_tma does: tt.matmul picks it on sm_90 from 256 rows up
    # (matmul_tma.usable), a size the interpreter runs slowly.
    matmul_tma.matmul(out, a, b, allow_tf32=False)
    ref = _np(a.to(tt.float64)) @ _np(b.to(tt.float64))
    assert_close(out, ref, dtype, "accumulate", k=K)
    np.testing.assert_array_equal(_np(out_base.to(tt.float32))[:, N:], 7.0)  # untouched


# ----- item 9: fp64 hyper-parameters reach the kernel as fp64 ----------------------------------------
@needs_sim
def test_an_fp64_optimizer_step_uses_fp64_hyperparameters():
    rng = np.random.default_rng(9)
    p0, g0 = rng.standard_normal(300), rng.standard_normal(300)
    p = tt.tensor(p0, dtype=tt.float64, device="cuda", requires_grad=True)
    p.grad = tt.tensor(g0, dtype=tt.float64, device="cuda")
    lr, wd, mom = 0.1, 0.01, 0.9  # none is an fp32 number
    opt = tt.optim.SGD([p], lr=lr, momentum=mom, weight_decay=wd)
    ref, buf = p0.copy(), None
    for _ in range(3):
        opt.step()
        d = g0 + wd * ref
        buf = d if buf is None else mom * buf + d
        ref = ref - lr * buf
    # fp32 hyper-parameters put the result 2e-10 off (relative); fp64 ones keep it to a few ulps
    assert_close(p.detach(), ref, tt.float64, "ulps")


# ----- item 10: inf and out-of-range floats saturate when cast to int --------------------------------
@needs_sim
@pytest.mark.parametrize("dst", [tt.int32, tt.int64])
def test_float_to_int_saturates_on_the_device(dst):
    info = np.iinfo(np.int32 if dst is tt.int32 else np.int64)
    x = tt.tensor([np.inf, -np.inf, np.nan, 3.7, -3.7, 1e30, -1e30], dtype=tt.float16 if dst is tt.int32
                  else tt.float32, device="cuda")
    got = _np(x.to(dst))
    np.testing.assert_array_equal(got, [info.max, info.min, 0, 3, -3, info.max, info.min])
    # a Python inf written into an integer tensor is torch's overflow error, checked on the host before
    # any kernel runs (only tensor casts reach the device's saturating conversion)
    with pytest.raises(RuntimeError, match="cannot be converted to type .* without overflow"):
        tt.empty(4, dtype=dst, device="cuda").fill_(float("inf"))


# ----- item 11: setitem with repeated indices writes the last value, whatever the programs' order ---
@needs_sim
@pytest.mark.parametrize("dtype", [tt.int64, tt.int32])
def test_setitem_with_repeated_indices_on_the_device(dtype, monkeypatch):
    from tritensor.runtime import interpreter_gpu
    from tritensor.triton_kernels._common import ELEMENTWISE_BLOCK

    monkeypatch.setattr(interpreter_gpu, "REVERSE_GRID", True)  # a GPU runs programs in no fixed order
    n = 2 * ELEMENTWISE_BLOCK + 9
    rng = np.random.default_rng(11)
    idx = rng.integers(0, 7, n)
    idx[[0, ELEMENTWISE_BLOCK, n - 1]] = 3
    v = (np.arange(n) % 100 + 1).astype(np.int64)
    np_dtype = np.int64 if dtype is tt.int64 else np.int32
    x = tt.zeros(7, dtype=dtype, device="cuda")
    x[tt.tensor(idx, device="cuda")] = tt.tensor(v, dtype=dtype, device="cuda")
    ref = np.zeros(7, np_dtype)
    ref[idx] = v.astype(np_dtype)
    np.testing.assert_array_equal(_np(x), ref)
    x[tt.tensor(idx, device="cuda")] = 5  # a Python int
    ref[idx] = 5
    np.testing.assert_array_equal(_np(x), ref)


@needs_sim
def test_new_address_tables_each_step_do_not_allocate_pinned_memory_each_step():
    """An optimizer step whose gradients moved builds a new device address table every step, and
    the pinned reserve for captured copies of such tables grows with the table cache. Sized to each
    request, the reserve was a page-locked allocation (and a free) at every step: 14 ms of an H100
    transformer step's host time. It grows by doubling, so steps stop allocating."""
    block_rows = 4096  # 96 KiB of table per step: past the reserve's 64 KiB floor at once
    stream = tt.cuda.current_stream()
    keep = []
    with sim.counting() as c:
        for _ in range(40):
            grad = tt.empty(block_rows, device="cuda")
            keep.append(grad)  # a new address every step, as gradients made by each backward
            table = launch.AddressTable([grad], 1)
            launch._device_table(table, [grad.data_ptr()], stream)
    # doubling from 64 KiB to the 64 cached tables' 6 MiB is at most 7 allocations; one per step was 40
    assert c["host_alloc"] <= 8, c


@needs_sim
def test_touching_another_device_leaves_the_current_devices_ops_in_its_own_context():
    """Asking for another device's stream (or its properties, or allocating there) makes that device's
    context current in the driver; the current device's next op must make its own current again
    before it launches. It did not: its cached stream was reused with device 1's context current,
    and on the simulated device the next fill read as NaN. The simulator now refuses a launch on a
    stream of a device whose context is not current, as the driver refuses a foreign handle."""
    a = tt.ones(3, device="cuda:0") * 2
    tt.cuda.current_stream(1)
    b = tt.ones(3, device="cuda:0") * 3
    tt.cuda.get_device_properties(1)
    c = b + a
    tt.arange(4.0, device="cuda:1").sum()  # another device's tensors, launched under a device guard
    d = c - 1
    assert (b.tolist(), c.tolist(), d.tolist()) == ([3.0] * 3, [5.0] * 3, [4.0] * 3)
    assert tt.cuda.current_device() == 0
