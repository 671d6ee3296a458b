"""The rest of torch.cuda's names: set_sync_debug_mode, ExternalStream, nvtx, profiler, device/device_of, the
driver's facts (NVML), torch.cuda's submodule paths, CudaError/check_error, and the root's torch.Stream/Event,
OutOfMemoryError, Future, GradScaler. CPU mode checks the errors and answers without CUDA; the GPU path runs
on the simulated device in CI."""
import importlib
import warnings

import pytest

import tritensor as tt
from tritensor.runtime import mode

gpu = pytest.mark.skipif(not mode.GPU, reason="needs the GPU path (a GPU or TRITENSOR_DEVICE=sim)")
cpu_only = pytest.mark.skipif(mode.GPU, reason="CPU mode's answers")
sim_only = pytest.mark.skipif(not mode.SIM, reason="what the simulated device cannot answer")
SYNC = "called a synchronizing CUDA operation"


@pytest.mark.parametrize("sub", ["memory", "random", "streams", "graphs", "nvtx", "profiler"])
def test_submodules_import_under_torchs_paths(sub):
    module = importlib.import_module(f"tritensor.cuda.{sub}")
    assert module is getattr(tt.cuda, sub) and module.__name__ == f"tritensor.gpu.{sub}"
    assert module.__all__ and all(hasattr(module, name) for name in module.__all__)
    if sub not in ("nvtx", "profiler"):  # torch.cuda re-exports the others' names, as here
        assert all(getattr(tt.cuda, name) is getattr(module, name) for name in module.__all__)


def test_root_names():
    assert tt.OutOfMemoryError is tt.cuda.OutOfMemoryError and issubclass(tt.OutOfMemoryError, RuntimeError)
    assert tt.Future is tt.futures.Future and tt.GradScaler is tt.amp.GradScaler
    s, e = tt.Stream("cpu"), tt.Event("cpu", enable_timing=True)
    assert isinstance(s, tt.Stream) and s.device == tt.device("cpu") and s.query() and s.stream_id == 0
    assert repr(s) == "tritensor.Stream device_type=cpu, device_index=-1, stream_id=0"
    e2 = tt.Event("cpu", enable_timing=True)
    s.record_event(e)
    e2.record()
    assert isinstance(e, tt.Event) and e.query() and e.elapsed_time(e2) >= 0.0
    s.wait_event(e)
    s.synchronize()
    with pytest.raises(ValueError, match="enable_timing=True"):
        tt.Event("cpu").elapsed_time(e2)


def test_cuda_error_and_check_error():
    assert issubclass(tt.cuda.CudaError, RuntimeError)
    tt.cuda.check_error(0)
    with pytest.raises(tt.cuda.CudaError, match=r"out of memory \(2\)") as e:
        tt.cuda.check_error(2)
    assert e.value.code == 2
    assert tt.cuda.has_half is True and tt.cuda.has_magma is False
    assert (tt.cuda.cudaStatus.SUCCESS, tt.cuda.cudaStatus.ERROR_NOT_READY) == (0, 34)
    assert issubclass(tt.cuda.DeferredCudaCallError, Exception)


@cpu_only
def test_cpu_mode_answers_and_errors():
    assert tt.cuda.get_arch_list() == [] and tt.cuda.get_gencode_flags() == "" and not tt.cuda.is_initialized()
    assert tt.cuda.default_generators == () and not tt.cuda.is_tf32_supported()
    for call in (tt.cuda.init, tt.cuda.ipc_collect, lambda: tt.cuda.set_sync_debug_mode("warn"),
                 tt.cuda.get_sync_debug_mode, lambda: tt.cuda.ExternalStream(1), tt.cuda.clock_rate,
                 tt.cuda.temperature, tt.cuda.power_draw, tt.cuda.utilization, tt.cuda.memory_usage,
                 tt.cuda.device_memory_used, lambda: tt.cuda.nvtx.range_push("a"), tt.cuda.nvtx.range_pop,
                 tt.cuda.profiler.start, lambda: tt.cuda.can_device_access_peer(0, 1), lambda: tt.Stream("cuda")):
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            call()
    with tt.cuda.device(None), tt.cuda.device_of(tt.ones(1)):  # -1: nothing to change, as torch's
        pass


# ----- set_sync_debug_mode -----------------------------------------------------------------------------
@gpu
def test_sync_debug_mode_warns_and_raises_on_host_waits():
    x = tt.arange(6, device="cuda", dtype=tt.float32)
    with pytest.raises(RuntimeError, match="invalid value of debug_mode, expected one of `default`, `warn`, `error`"):
        tt.cuda.set_sync_debug_mode("loud")
    try:
        tt.cuda.set_sync_debug_mode("warn")
        assert tt.cuda.get_sync_debug_mode() == 1
        for what in (lambda: x.sum().item(), lambda: x.cpu(), lambda: tt.nonzero(x)):
            with pytest.warns(UserWarning, match=SYNC):
                what()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            y = x * 2 + 1  # no host wait: no warning
            tt.cuda.synchronize()  # torch's device synchronize does not check the setting either
        tt.cuda.set_sync_debug_mode(2)
        assert tt.cuda.get_sync_debug_mode() == 2
        with pytest.raises(RuntimeError, match=SYNC):
            y.max().item()
        with pytest.raises(RuntimeError, match=SYNC):
            tt.cuda.current_stream().synchronize()
        tt.cuda.set_sync_debug_mode("default")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert y.tolist() == [1.0, 3.0, 5.0, 7.0, 9.0, 11.0]
    finally:
        tt.cuda.set_sync_debug_mode(0)
    assert tt.cuda.get_sync_debug_mode() == 0


# ----- ExternalStream -------------------------------------------------------------------------------
@gpu
def test_external_stream_wraps_a_raw_handle():
    owner = tt.cuda.Stream()
    ext = tt.cuda.ExternalStream(owner.cuda_stream)
    assert isinstance(ext, tt.cuda.Stream) and isinstance(ext, tt.cuda.streams.ExternalStream)
    assert ext == owner and ext.cuda_stream == owner.cuda_stream and ext.device == tt.device("cuda:0")
    x = tt.ones(64, device="cuda")
    tt.cuda.synchronize()
    with tt.cuda.stream(ext):
        y = x * 3
    done = ext.record_event()
    tt.cuda.current_stream().wait_event(done)
    assert y.sum().item() == 192.0
    assert tt.cuda.get_stream_from_external(owner.cuda_stream, 0) == owner
    with pytest.raises(TypeError, match="stream_ptr must be an int"):
        tt.cuda.ExternalStream("0x10")
    cuda_stream = tt.Stream("cuda")
    assert isinstance(cuda_stream, tt.cuda.Stream) and isinstance(cuda_stream, tt.Stream)
    assert isinstance(tt.cuda.current_stream(), tt.Stream) and isinstance(tt.Event("cuda"), tt.cuda.Event)


# ----- the device context, initialisation, what the device supports -------------------------------
@gpu
def test_device_context_and_queries():
    tt.cuda.init()
    assert tt.cuda.is_initialized()
    assert len(tt.cuda.default_generators) == tt.cuda.device_count()
    assert all(g is tt.default_generator for g in tt.cuda.default_generators)
    major, minor = tt.cuda.get_device_capability()
    assert f"sm_{major}{minor}" in tt.cuda.get_arch_list()
    assert f"-gencode compute=compute_{major}{minor},code=sm_{major}{minor}" in tt.cuda.get_gencode_flags()
    assert tt.cuda.is_tf32_supported() == tt.cuda.is_bf16_supported()
    tt.cuda.ipc_collect()
    last = tt.cuda.device_count() - 1
    with tt.cuda.device(last):
        assert tt.cuda.current_device() == last
        with tt.cuda.device_of(tt.ones(1, device="cuda:0")):
            assert tt.cuda.current_device() == 0
        assert tt.cuda.current_device() == last
    assert tt.cuda.current_device() == 0


@sim_only
def test_simulated_device_has_no_driver_sensors():
    for call in (tt.cuda.clock_rate, tt.cuda.temperature, tt.cuda.power_draw, tt.cuda.utilization,
                 tt.cuda.memory_usage, tt.cuda.device_memory_used, tt.cuda.list_gpu_processes):
        with pytest.raises(RuntimeError, match="simulated CUDA device has no NVML"):
            call()
    with pytest.raises(RuntimeError, match="simulated CUDA device has no profiler"):
        tt.cuda.profiler.start()
    with pytest.raises(RuntimeError, match="does not model peer access"):
        tt.cuda.can_device_access_peer(0, 1)


# ----- nvtx -----------------------------------------------------------------------------------------
@gpu
def test_nvtx_ranges_nest_and_pair():
    nvtx = tt.cuda.nvtx
    assert nvtx.range_push("outer") == 0 and nvtx.range_push("inner") == 1
    assert nvtx.range_pop() == 1 and nvtx.range_pop() == 0 and nvtx.range_pop() == -1
    with nvtx.range("step {}", 3):
        assert nvtx.range_push("x") == 1
        nvtx.range_pop()
    a, b = nvtx.range_start("a"), nvtx.range_start("b")
    assert a != b
    nvtx.range_end(a)
    nvtx.range_end(b)
    nvtx.mark("here")
    with pytest.raises(ValueError, match="no open range"):
        nvtx.range_end(a)
    with pytest.raises(TypeError, match="msg must be a str"):
        nvtx.range_push(3)
