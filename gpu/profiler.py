"""``tritensor.cuda.profiler`` (torch.cuda.profiler): start and stop the CUDA profiler's collection
(``cuProfilerStart``/``cuProfilerStop``: what Nsight Systems' ``--capture-range=cudaProfilerApi``
waits for). The simulated device has no profiler: it raises saying so."""
from __future__ import annotations

import contextlib

from ..runtime import cuda as _cuda
from ..runtime import driver as _drv
from ..runtime import mode
from ._errors import check_error

__all__ = ["start", "stop", "profile"]


def _call(name: str) -> None:
    _cuda._require(f"profiler.{name}")
    if mode.SIM:
        raise RuntimeError(f"profiler.{name}: the simulated CUDA device has no profiler (TRITENSOR_DEVICE=sim)")
    _cuda._cu_device()
    check_error(getattr(_drv.driver, "cuProfilerStart" if name == "start" else "cuProfilerStop")()[0])


def start() -> None:
    """Start the CUDA profiler's data collection (raises CudaError if it cannot)."""
    _call("start")


def stop() -> None:
    """Stop the CUDA profiler's data collection (raises CudaError if it cannot)."""
    _call("stop")


@contextlib.contextmanager
def profile():
    """Collect profiling data for the block."""
    try:
        start()
        yield
    finally:
        stop()
