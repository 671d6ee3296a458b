"""Autotuning without torch: an event timer for ``@triton.autotune`` and a mode-aware decorator.

Triton's default benchmarker (``triton.testing.do_bench``) imports torch to allocate its L2
flush buffer and to create CUDA events. tritensor is torch-free, so :func:`do_bench` times
kernels with ``tritensor.cuda.Event`` and flushes L2 with a tritensor buffer instead.

In CPU mode the kernels run in Triton's interpreter, where timing configurations is both
meaningless (it measures Python, not a GPU) and slow, so :func:`autotune` returns the plain
``@triton.jit`` function and the launcher passes one interpreter-friendly configuration.

``TRITENSOR_AUTOTUNE=0`` (read at import) pins every autotuned kernel to its first
configuration: no configuration is timed, so a new shape costs one compile, not one per
configuration plus their timing runs. The GPU-mode test suite sets it (its hundreds of shapes
spent minutes autotuning); results do not depend on the configuration, and every configuration
is compiled for Hopper by ``tests/test_sm90_compile.py``.
"""
from __future__ import annotations

import os
import statistics

import triton

from ..runtime import cuda, memory
from ._common import INTERPRET

PINNED = os.environ.get("TRITENSOR_AUTOTUNE", "1").strip() == "0"  # every kernel takes its first configuration
_L2_FLUSH_BYTES = 256 * 1024 * 1024  # larger than any current L2 (H100: 50 MB, B200: 126 MB)
_flush_buf = None


def _l2_flush_buffer():
    global _flush_buf
    if _flush_buf is None:
        stream = cuda.current_stream()
        _flush_buf = memory.CudaStorage(_L2_FLUSH_BYTES, stream.device, stream)
    return _flush_buf


def do_bench(fn, warmup: int = 25, rep: int = 100, quantiles=None, return_mode: str = "mean", flush_l2: bool = True):
    """Time ``fn()`` on the current stream with CUDA events; milliseconds, like triton.testing.do_bench.

    ``fn`` is called once to compile/warm caches, then enough times to fill ``warmup`` ms,
    then timed ``rep`` ms worth of calls, each bracketed by its own pair of events and preceded
    by an L2 flush (a fill of a 256 MB buffer) so every call reads operands from HBM.
    Returns the requested ``quantiles`` (list) or the ``return_mode`` statistic.
    """
    stream = cuda.current_stream()
    buf = _l2_flush_buffer() if flush_l2 else None

    fn()
    stream.synchronize()
    # Estimate one call's time from five calls.
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    start.record(stream)
    for _ in range(5):
        if buf is not None:
            memory.device_memset(buf.data_ptr(), 0, buf.nbytes, stream)
        fn()
    end.record(stream)
    est = max(start.elapsed_time(end) / 5, 1e-3)
    n_warmup = max(1, int(warmup / est))
    n_rep = max(1, int(rep / est))

    for _ in range(n_warmup):
        fn()
    starts = [cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [cuda.Event(enable_timing=True) for _ in range(n_rep)]
    for s, e in zip(starts, ends):
        if buf is not None:
            memory.device_memset(buf.data_ptr(), 0, buf.nbytes, stream)
        s.record(stream)
        fn()
        e.record(stream)
    stream.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    if quantiles is not None:
        out = [_quantile(times, q) for q in quantiles]
        return out[0] if len(out) == 1 else out
    return {"mean": statistics.fmean, "median": statistics.median, "min": min, "max": max}[return_mode](times)


def _quantile(sorted_times, q: float) -> float:
    """Linear-interpolated quantile of an already sorted list (numpy's default method)."""
    pos = q * (len(sorted_times) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_times) - 1)
    return sorted_times[lo] + (sorted_times[hi] - sorted_times[lo]) * (pos - lo)


# CPU mode: the configurations each autotuned kernel would try on a GPU, by "module:qualname",
# for tools/sm90_compile.py (which compiles every one of them for Hopper without a GPU).
GPU_CONFIGS: dict[str, list] = {}
GPU_PRUNES: dict = {}  # and the prune function of those that have one (autotune's ``prune``)


def autotune(configs, key, prune=None, **kwargs):
    """``@triton.autotune(configs, key, do_bench=<event timer>)`` on GPU; a no-op in the interpreter.

    In the interpreter the caller supplies the meta-parameters itself (see each launcher's
    ``INTERPRET_CONFIG``), exactly as if the autotuner had picked them. ``prune(configs,
    named_args)`` drops the configurations that cannot run for a call's arguments (tiles of a wide
    dtype overflowing shared memory) before any is compiled; a pinned run (``TRITENSOR_AUTOTUNE=0``)
    takes the first one that remains, so it never pins one the device can't launch.
    """
    def deco(fn):
        if INTERPRET:
            name = f"{fn.fn.__module__}:{fn.fn.__qualname__}"
            GPU_CONFIGS[name] = list(configs)
            if prune is not None:
                GPU_PRUNES[name] = prune
            return fn
        if prune is None:
            # One configuration: Triton's autotuner runs it (pre-hooks included) and times nothing.
            return triton.autotune(configs=list(configs)[:1] if PINNED else configs, key=key, do_bench=do_bench,
                                   **kwargs)(fn)

        def early_config_prune(all_configs, named_args, **_):
            kept = prune(all_configs, named_args)
            return kept[:1] if PINNED else kept

        return triton.autotune(configs=list(configs), key=key, do_bench=do_bench,
                               prune_configs_by={"early_config_prune": early_config_prune}, **kwargs)(fn)

    return deco
