"""tritensor.cuda.GreenContext (torch.cuda.green_contexts.GreenContext, torch 2.13).

On the simulated device the driver's green-context calls are modelled (``runtime/sim.py``): SM
partitions rounded up to the sm_90 step of 8, torch's errors for bad counts and arguments, the
workqueue configuration, ``set_context``/``pop_context`` and streams of a green context that run
work like any stream. In CPU mode every entry refuses: there is no driver.
"""
from __future__ import annotations

import numpy as np
import pytest

import tritensor as tt
from tritensor.runtime import mode
from tolerances import assert_close

GreenContext = tt.cuda.GreenContext
gpu_only = pytest.mark.skipif(not mode.GPU, reason="green contexts need a CUDA device (or TRITENSOR_DEVICE=sim)")
sim_only = pytest.mark.skipif(not mode.SIM, reason="inspects the simulated driver's record of the partition")
cpu_only = pytest.mark.skipif(mode.GPU, reason="CPU mode's answer")


def test_names_in_torchs_places():
    import tritensor.cuda.green_contexts as gc

    assert GreenContext is gc.GreenContext and gc.__all__ == ["GreenContext"]
    for name in ("create", "max_workqueue_concurrency", "set_context", "pop_context", "Stream"):
        assert callable(getattr(GreenContext, name)), name


@cpu_only
def test_cpu_mode_refuses():
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        GreenContext.create(num_sms=8)
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        GreenContext.max_workqueue_concurrency()


@sim_only
@pytest.mark.parametrize("num_sms, granted", [(1, 8), (8, 8), (12, 16), (64, 64), (127, 128), (128, 128)])
def test_partition_is_rounded_up_as_the_driver_does(num_sms, granted):
    from tritensor.runtime import sim

    g = GreenContext.create(num_sms=num_sms, device_id=1)
    assert g.device_id == 1
    assert sim._green[int(g._green)].sm_count == granted and sim._green[int(g._green)].device == 1


@gpu_only
def test_bad_arguments_get_torchs_errors():
    sms = tt.cuda.get_device_properties(0).multi_processor_count
    with pytest.raises(RuntimeError, match=f"Invalid number of SMs requested for green context: 0 "
                                           rf"\(device has {sms} SMs\)"):
        GreenContext.create(num_sms=0)
    with pytest.raises(RuntimeError, match=f"Invalid number of SMs requested for green context: {sms + 1}"):
        GreenContext.create(num_sms=sms + 1)
    with pytest.raises(RuntimeError, match="At least one of num_sms or workqueue_scope must be specified"):
        GreenContext.create()
    with pytest.raises(RuntimeError, match="workqueue_concurrency_limit requires workqueue_scope to be set"):
        GreenContext.create(num_sms=8, workqueue_concurrency_limit=2)
    with pytest.raises(ValueError, match="workqueue_scope must be 'device_ctx' or 'balanced', got 'wide'"):
        GreenContext.create(workqueue_scope="wide")
    with pytest.raises(TypeError, match="num_sms must be an int"):
        GreenContext.create(num_sms=8.0)
    with pytest.raises(ValueError, match="out of range"):
        GreenContext.create(num_sms=8, device_id=tt.cuda.device_count())
    with pytest.raises(TypeError):
        GreenContext.create(8)  # keyword-only, as torch's


@sim_only
def test_all_sms_of_an_h100_is_no_single_partition():
    # 132 SMs rounded up to the step of 8 is 136: the driver makes no group, and torch says so
    with pytest.raises(RuntimeError, match="Failed to create single SM resource group"):
        GreenContext.create(num_sms=132)


@sim_only
def test_workqueue_configuration():
    from tritensor.runtime import sim

    assert GreenContext.max_workqueue_concurrency() == GreenContext.max_workqueue_concurrency(1) == 8
    g = GreenContext.create(workqueue_scope="balanced", workqueue_concurrency_limit=4)
    rec = sim._green[int(g._green)]
    assert rec.sm_count == 132 and rec.workqueue == (
        sim._real_driver.CUdevWorkqueueConfigScope.CU_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED, 4)
    both = GreenContext.create(num_sms=16, workqueue_scope="device_ctx")
    rec = sim._green[int(both._green)]
    assert rec.sm_count == 16 and rec.workqueue == (
        sim._real_driver.CUdevWorkqueueConfigScope.CU_WORKQUEUE_SCOPE_DEVICE_CTX, 8)


@gpu_only
def test_streams_of_a_green_context_run_work():
    g = GreenContext.create(num_sms=16)
    s = g.Stream()
    assert isinstance(s, tt.cuda.Stream) and s.device == tt.device("cuda:0")
    assert s != tt.cuda.current_stream() and g.Stream() != s
    x = tt.arange(7, dtype=tt.float32, device="cuda")
    s.wait_stream(tt.cuda.current_stream())
    with tt.cuda.stream(s):
        y = (x * 3).sum()
    tt.cuda.current_stream().wait_stream(s)
    assert_close(y, np.arange(7.0).sum() * 3, tt.float32, profile="exact")


@gpu_only
def test_set_and_pop_context_switch_streams_in_order():
    g = GreenContext.create(num_sms=8)
    side = tt.cuda.Stream()
    with tt.cuda.stream(side):
        x = tt.arange(5, dtype=tt.float32, device="cuda") + 1  # queued on the side stream
        g.set_context()
        # inside: the default stream, which waits for what the side stream had queued
        assert tt.cuda.current_stream() == tt.cuda.default_stream()
        y = x * 2
        g.pop_context()
        assert tt.cuda.current_stream() == side  # back, and ordered after the green context's work
        z = y + 1
    tt.cuda.current_stream().wait_stream(side)  # z was queued on the side stream
    assert_close(z, (np.arange(5.0) + 1) * 2 + 1, tt.float32, profile="exact")
    with pytest.raises(RuntimeError, match="was not made current by set_context"):
        g.pop_context()
