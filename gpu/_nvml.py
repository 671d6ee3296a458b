"""What only the driver's management library knows of a GPU (NVML, through cuda-python's
``cuda.bindings.nvml``): clocks, temperature, power, utilization, the memory every process uses.

torch asks pynvml for the same facts. A device is found in NVML by its PCI bus id, so the answer
is for the CUDA device of that index whatever ``CUDA_VISIBLE_DEVICES`` says. The simulated device
has no such sensors, and a machine may have no NVML: both raise a RuntimeError saying so.
"""
from __future__ import annotations

import numpy as np

from ..runtime import cuda as _cuda
from ..runtime import driver as _drv
from ..runtime import memory as _memory
from ..runtime import mode

_state = {"init": False}
_missing = "CPU mode" if not mode.GPU else "the simulated device" if mode.SIM else None
if _missing is None:  # a real GPU: cuda-python's NVML bindings, if this cuda-python has them
    try:
        from cuda.bindings import nvml as _nvml_lib
    except ImportError as _e:
        _nvml_lib, _missing = None, f"cuda.bindings.nvml cannot be imported ({_e})"


def _nvml():
    if _nvml_lib is None:
        raise RuntimeError(f"NVML is not available: {_missing}")
    return _nvml_lib


def handle(index: int, what: str):
    """The NVML handle of CUDA device ``index``."""
    _cuda._require(what)
    if mode.SIM:
        raise RuntimeError(f"{what}: the simulated CUDA device has no NVML sensors (TRITENSOR_DEVICE=sim): "
                           "this needs a real GPU")
    nvml = _nvml()
    try:
        if not _state["init"]:
            nvml.init_v2()
            _state["init"] = True
        dev = _cuda._cu_device(index).device_id
        err, bus_id = _drv.driver.cuDeviceGetPCIBusId(64, dev)
        _memory._check((err,))
        bus = bus_id.split(b"\x00", 1)[0].decode() if isinstance(bus_id, bytes) else str(bus_id)
        return nvml, nvml.device_get_handle_by_pci_bus_id_v2(bus)
    except RuntimeError:
        raise
    except Exception as e:  # NVML's own errors (no driver loaded, no permission)
        raise RuntimeError(f"{what}: NVML could not answer for cuda:{index}: {e}") from e


def _ask(index: int, what: str, question):
    nvml, h = handle(index, what)
    try:
        return question(nvml, h)
    except Exception as e:
        raise RuntimeError(f"{what}: NVML could not answer for cuda:{index}: {e}") from e


def running_processes(index: int, what: str) -> list[tuple[int, int]]:
    """(pid, bytes used) of each process with a compute context on the device."""
    def ask(nvml, h):
        procs = nvml.device_get_compute_running_processes_v3(h)  # an array of structs: one, several or none
        if len(procs) == 0:
            return []
        pids, used = np.atleast_1d(procs.pid), np.atleast_1d(procs.used_gpu_memory)
        return [(int(pid), int(nbytes)) for pid, nbytes in zip(pids, used)]

    return _ask(index, what, ask)


def utilization(index: int, what: str):
    """NVML's utilization rates: ``.gpu`` and ``.memory``, percent of the last sample period."""
    return _ask(index, what, lambda nvml, h: nvml.device_get_utilization_rates(h))


def temperature(index: int, what: str) -> int:
    """The GPU sensor's temperature, degrees Celsius."""
    return _ask(index, what, lambda nvml, h: int(nvml.device_get_temperature_v(
        h, nvml.TemperatureSensors.TEMPERATURE_GPU)))


def power_draw(index: int, what: str) -> int:
    """The board's power draw, milliwatts."""
    return _ask(index, what, lambda nvml, h: int(nvml.device_get_power_usage(h)))


def clock_rate(index: int, what: str) -> int:
    """The SM clock, MHz."""
    return _ask(index, what, lambda nvml, h: int(nvml.device_get_clock_info(h, nvml.ClockType.CLOCK_SM)))


def memory_used(index: int, what: str) -> int:
    """Bytes of device memory in use, by every process (reserved memory included)."""
    return _ask(index, what, lambda nvml, h: int(nvml.device_get_memory_info_v2(h).used))
