"""Which of the three execution modes this process runs in, decided once, before Triton loads.

GPU mode: a CUDA driver answers and has a device; Triton compiles kernels for it.
CPU mode: no driver/device, or ``TRITENSOR_DEVICE=cpu``; ``TRITON_INTERPRET=1`` is set so the
very same ``@triton.jit`` kernels run in Triton's interpreter on host (NumPy) buffers.
Simulated device (``TRITENSOR_DEVICE=sim``): the GPU path runs (device storages, the caching
allocator, streams, events, graphs, the direct launcher) over a simulated CUDA device
(``runtime/sim.py``, reached only through ``runtime/driver.py``); its kernels run in Triton's
interpreter, as in CPU mode, with every memory access checked.

``GPU`` is true wherever the GPU path runs (a real device or the simulated one); ``SIM`` says
which; ``INTERPRET`` whether kernels run in the interpreter (CPU mode and the simulator).

Triton reads ``TRITON_INTERPRET`` when a ``@triton.jit`` decorator runs, so this module must be
imported before any kernel module; ``tritensor/__init__.py`` imports it first.
"""
from __future__ import annotations

import functools
import os
import sys
import warnings


@functools.cache
def _cuda_device_count() -> int:
    try:
        from cuda.bindings import driver
    except Exception:
        return 0
    try:
        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return 0
        err, n = driver.cuDeviceGetCount()
        return int(n) if err == driver.CUresult.CUDA_SUCCESS else 0
    except Exception:  # no libcuda.so: the driver library itself is missing
        return 0


def _decide() -> str:
    want = os.environ.get("TRITENSOR_DEVICE", "").strip().lower()
    if want not in ("", "cpu", "cuda", "gpu", "sim"):
        raise ValueError(f"TRITENSOR_DEVICE must be 'cpu', 'cuda' or 'sim', got {want!r}")
    if want in ("cpu", "sim"):
        return want
    n = _cuda_device_count()
    if want in ("cuda", "gpu") and n == 0:
        raise RuntimeError("TRITENSOR_DEVICE=cuda but no CUDA driver or device answered")
    return "gpu" if n > 0 else "cpu"


MODE = _decide()
SIM = MODE == "sim"
GPU = MODE in ("gpu", "sim")  # the GPU path runs
CPU = not GPU
INTERPRET = MODE in ("cpu", "sim")  # kernels run in Triton's interpreter

if INTERPRET:
    # (A tool that sets TRITON_INTERPRET=0 itself before importing Triton, tools/sm90_compile.py,
    # wants exactly that and rebuilds the kernels it compiles.)
    if "triton.language" in sys.modules and os.environ.get("TRITON_INTERPRET") is None:
        warnings.warn("triton was imported before tritensor: Triton's own library was built for a compiler, not for "
                      "the interpreter that tritensor runs kernels in here, and kernels that call it (tl.randn, "
                      "tl.sigmoid ...) will fail. Import tritensor before triton.", RuntimeWarning, stacklevel=2)
    os.environ["TRITON_INTERPRET"] = "1"
elif os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
    warnings.warn("TRITON_INTERPRET is set but a GPU is present: tritensor runs in GPU mode and compiles kernels")
    os.environ["TRITON_INTERPRET"] = "0"
