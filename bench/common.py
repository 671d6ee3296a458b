"""What every kernel-family benchmark shares: a case, timers, the device's peaks, tables.

Timing. GPU mode: ``triton_kernels.autotune.do_bench`` (CUDA events on the current stream, L2
flushed before each call; the median of the calls that fill 100 ms after 25 ms of warm-up) for
tritensor, and torch's own CUDA events for the torch peer (median of 50 calls after one),
since torch launches on its own stream. CPU mode: wall clock, the median of 3 to 50 calls (as
many as fit in 0.2 s) after one warm-up call, for both tritensor (Triton's interpreter) and the
NumPy peer. :func:`timing_note` says so in the report's header.

Peaks. Memory: measured, the best of :data:`PEAK_RUNS` large device-to-device copies (GPU) or
NumPy copies (CPU), counting bytes read + written. Compute: the vendor's dense tensor-core
figure for known GPUs (fp32 without TF32 uses the CUDA-core figure); on CPU, the best of
:data:`PEAK_RUNS` NumPy fp32 matmuls, measured once and used for every dtype (NumPy has no
fast half-precision matmul: a second, fp16 measurement only added noise). The best run, not
the median, because a busy machine only ever slows a run down; :class:`Peak` keeps every run
so the header shows the spread.
"""
from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from typing import Callable, Optional

import numpy as np

from ..runtime import cuda, memory

# Dense peak TFLOP/s by device-name fragment, first match wins: (fp16/bf16 tensor core, tf32,
# fp32 CUDA core, fp64). The SXM H100 reports itself as "NVIDIA H100 80GB HBM3", hence the order.
_NOMINAL_TFLOPS = {
    "H200": (989.0, 494.0, 67.0, 67.0),
    "H100 NVL": (835.0, 418.0, 60.0, 60.0),
    "H100 PCIe": (756.0, 378.0, 51.0, 51.0),
    "H100": (989.0, 494.0, 67.0, 67.0),
    "A100": (312.0, 156.0, 19.5, 19.5),
    "L40S": (362.0, 183.0, 91.6, 1.4),
}


@dataclasses.dataclass
class Case:
    """One measurement: tritensor's ``run`` and (optionally) a peer doing the same work."""

    family: str
    op: str
    shape: str
    dtype: str
    size: int  # the x-axis of the plot (elements, or M for matmul, or H for conv)
    run: Callable[[], object]
    flops: Optional[float] = None  # compute-bound families report TFLOP/s
    nbytes: Optional[float] = None  # memory-bound families report GB/s
    peer: Optional[Callable[[], object]] = None
    peer_name: str = ""
    series: str = ""  # the plot's line (op and variant, without the size); default: op


@dataclasses.dataclass
class Result:
    family: str
    op: str
    shape: str
    dtype: str
    size: int
    ms: float
    throughput: float  # TFLOP/s or GB/s
    unit: str
    peak_fraction: Optional[float]
    peer_name: str
    peer_ms: Optional[float]
    speed_vs_peer: Optional[float]  # peer time / tritensor time: > 1 means tritensor is faster
    series: str = ""

    @property
    def peer_throughput(self) -> Optional[float]:
        return self.throughput / self.speed_vs_peer if self.speed_vs_peer else None


class Context:
    """What a family needs to build its cases: mode, dtypes, sizes, the torch peer (GPU only)."""

    def __init__(self, gpu: bool, dtypes, sizes, quick: bool, peer: bool):
        self.gpu, self.dtypes, self.sizes, self.quick = gpu, list(dtypes), sizes, quick
        self.device = "cuda" if gpu else "cpu"
        self.torch = _import_torch() if (gpu and peer) else None
        self.numpy_peer = (not gpu) and peer

    def pick(self, cpu_quick, cpu_full, gpu_quick, gpu_full):
        """Default sizes for this mode unless --sizes was given."""
        if self.sizes:
            return list(self.sizes)
        if self.gpu:
            return gpu_quick if self.quick else gpu_full
        return cpu_quick if self.quick else cpu_full

    def randn(self, shape, dtype: str):
        import tritensor as tt

        return tt.randn(*shape, dtype=getattr(tt, dtype), device=self.device)

    def peer_tensor(self, t, dtype: str):
        """The same values for the peer: a torch CUDA tensor, or a NumPy array (bf16 as fp32)."""
        host = t.cpu().numpy()
        if self.torch is not None:
            torch = self.torch
            return torch.from_numpy(host.astype(np.float32)).to(device="cuda", dtype=getattr(torch, dtype))
        return host.astype(np.float32) if dtype == "bfloat16" else host

    def make_peer(self, dtype: str, tensors, torch_fn, numpy_fn):
        """(peer callable or None, peer name): ``torch_fn``/``numpy_fn`` take the peer copies of ``tensors``."""
        if self.torch is not None and torch_fn is not None:
            args = [self.peer_tensor(t, dtype) for t in tensors]
            return (lambda: torch_fn(*args)), "torch"
        if self.numpy_peer and numpy_fn is not None:
            args = [self.peer_tensor(t, dtype) for t in tensors]
            return (lambda: numpy_fn(*args)), self.peer_label(dtype)
        return None, ""

    def peer_label(self, dtype: str) -> str:
        if self.torch is not None:
            return "torch"
        return "numpy(fp32)" if dtype == "bfloat16" else "numpy"


def with_kernel_off(module, fn):
    """``fn`` run with ``module.ENABLED`` False: a Hopper variant (``matmul_tma``,
    ``attention_tma``) switched off, so a row times the general kernel it replaces."""
    def run():
        module.ENABLED = False
        try:
            return fn()
        finally:
            module.ENABLED = True
    return run


def _import_torch():
    """torch as the GPU peer, only in the benchmark process and only if installed."""
    try:
        import torch
    except Exception:
        return None
    return torch if torch.cuda.is_available() else None


# ----- timers ---------------------------------------------------------------------------------------
CPU_MIN_TIME, CPU_MIN_REPS, CPU_MAX_REPS = 0.2, 3, 50
GPU_WARMUP_MS, GPU_REP_MS, TORCH_REPS = 25, 100, 50


def timing_note(gpu: bool) -> str:
    """What a time in the tables is, for the report's header."""
    if gpu:
        return (f"time = the median of the calls that fill {GPU_REP_MS} ms after {GPU_WARMUP_MS} ms of warm-up "
                f"(CUDA events, L2 flushed before each); torch: the median of {TORCH_REPS} calls after one")
    return (f"time = the median of {CPU_MIN_REPS} to {CPU_MAX_REPS} calls (as many as fit in {CPU_MIN_TIME:g} s) "
            "after one warm-up call, for tritensor and its peer alike")


def time_cpu(fn, min_time: float = CPU_MIN_TIME, min_reps: int = CPU_MIN_REPS, max_reps: int = CPU_MAX_REPS) -> float:
    """Median wall-clock milliseconds of ``fn()`` after one warm-up call (which also compiles)."""
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < min_reps or (time.perf_counter() - start < min_time and len(times) < max_reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def time_gpu(fn) -> float:
    from ..triton_kernels.autotune import do_bench

    return do_bench(fn, warmup=GPU_WARMUP_MS, rep=GPU_REP_MS, return_mode="median")


def time_torch(torch, fn, reps: int = TORCH_REPS) -> float:
    """Median milliseconds of a torch op, timed with torch's events on torch's current stream."""
    fn()
    torch.cuda.synchronize()
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    times = []
    for _ in range(reps):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


# ----- peaks ----------------------------------------------------------------------------------------
def device_name(gpu: bool) -> str:
    if gpu:

        return cuda.get_device_name()
    import platform

    return f"CPU ({platform.processor() or platform.machine()}), Triton interpreter"


PEAK_RUNS = 7


@dataclasses.dataclass
class Peak:
    """A device peak: ``value`` (None: unknown) and where it comes from; ``runs`` holds every
    measured run when it was measured (``value`` is then their best)."""

    value: Optional[float]
    unit: str
    source: str
    runs: list = dataclasses.field(default_factory=list)

    def describe(self) -> str:
        if self.value is None:
            return f"unknown ({self.source})"
        spread = f"; the {len(self.runs)} runs ranged {min(self.runs):.3g}-{max(self.runs):.3g}" if self.runs else ""
        return f"{self.value:.3g} {self.unit} = {self.source}{spread}"


def _best_of(fn, work: float, scale: float) -> list:
    """Throughputs (``work`` / seconds / ``scale``) of :data:`PEAK_RUNS` calls after a warm-up."""
    fn()
    runs = []
    for _ in range(PEAK_RUNS):
        t0 = time.perf_counter()
        fn()
        runs.append(work / (time.perf_counter() - t0) / scale)
    return runs


def memory_peak(gpu: bool) -> Peak:
    """Measured copy bandwidth in GB/s (bytes read + bytes written): the best of PEAK_RUNS copies."""
    if gpu:
        import tritensor as tt

        src = tt.empty((1 << 30) // 4, dtype=tt.int32, device="cuda")  # 1 GiB each way: far beyond any cache
        dst = tt.empty_like(src)
        stream = cuda.current_stream()
        runs = do_bench_runs(lambda: memory.device_to_device(dst.data_ptr(), src.data_ptr(), src.nbytes, stream))
        runs = [2 * src.nbytes / ms / 1e6 for ms in runs]
        what = f"the best of {PEAK_RUNS} device-to-device copies of 1 GiB"
    else:
        src = np.ones((1 << 27) // 8)
        dst = np.empty_like(src)
        runs = _best_of(lambda: np.copyto(dst, src), 2 * src.nbytes, 1e9)
        what = f"the best of {PEAK_RUNS} NumPy copies of 128 MiB"
    return Peak(max(runs), "GB/s", what + " (bytes read + written)", runs)


def do_bench_runs(fn) -> list:
    """Milliseconds of PEAK_RUNS GPU calls (CUDA events)."""
    from ..triton_kernels.autotune import do_bench

    return [do_bench(fn, warmup=5, rep=20, return_mode="median") for _ in range(PEAK_RUNS)]


def compute_peaks(gpu: bool, name: str, dtypes, tf32: bool) -> dict:
    """{dtype: Peak} in TFLOP/s: the vendor's figure on known GPUs; on CPU one measured reference."""
    if gpu:
        out = {}
        for dt in dtypes:
            frag = next((f for f in _NOMINAL_TFLOPS if f in name), None)
            if frag is None:
                out[dt] = Peak(None, "TFLOP/s", f"no nominal figure for {name!r}")
                continue
            peaks = _NOMINAL_TFLOPS[frag]
            value, kind = {"float16": (peaks[0], "tensor cores"), "bfloat16": (peaks[0], "tensor cores"),
                           "float32": (peaks[1], "TF32 tensor cores") if tf32 else (peaks[2], "CUDA cores")}.get(
                dt, (peaks[3], "fp64"))
            out[dt] = Peak(value, "TFLOP/s", f"{frag}'s nominal dense {dt} figure ({kind})")
        return out
    a = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    runs = _best_of(lambda: a @ a, 2 * 1024**3, 1e12)
    ref = Peak(max(runs), "TFLOP/s", f"the best of {PEAK_RUNS} NumPy float32 1024x1024 matmuls on this CPU, "
                                     "the reference for every dtype", runs)
    return {dt: ref for dt in dtypes}


# ----- running, printing, saving ---------------------------------------------------------------------
class Progress:
    """A one-line progress bar on stderr (only when it is a terminal; logs stay clean)."""

    def __init__(self, total: int):
        self.total, self.done, self.tty = total, 0, sys.stderr.isatty()

    def step(self, label: str) -> None:
        self.done += 1
        if self.tty:
            filled = int(30 * self.done / max(self.total, 1))
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} {label:<40.40}")
            sys.stderr.flush()

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\r" + " " * 80 + "\r")
            sys.stderr.flush()


def measure(case: Case, ctx: Context, peaks: dict) -> Result:
    ms = time_gpu(case.run) if ctx.gpu else time_cpu(case.run)
    if case.flops is not None:
        thr, unit = case.flops / ms / 1e9, "TFLOP/s"
        peak = peaks["tflops"].get(case.dtype)
    else:
        thr, unit = case.nbytes / ms / 1e6, "GB/s"
        peak = peaks["gbs"]
    peak = peak.value if isinstance(peak, Peak) else peak
    peer_ms = None
    if case.peer is not None:
        peer_ms = time_torch(ctx.torch, case.peer) if ctx.torch is not None else time_cpu(case.peer)
    return Result(case.family, case.op, case.shape, case.dtype, case.size, ms, thr, unit,
                  thr / peak if peak else None, case.peer_name if case.peer else "", peer_ms,
                  peer_ms / ms if peer_ms else None, case.series or case.op)


def print_table(family: str, results, out=None) -> None:
    if not results:
        return
    out = out or sys.stdout  # looked up per call, so redirected stdout is honoured
    unit = results[0].unit
    peer = next((r.peer_name for r in results if r.peer_name), "peer")
    head = ["op", "shape", "dtype", "time (ms)", unit, "% of peak", f"{peer} (ms)", f"speed vs {peer}"]
    rows = [[r.op, r.shape, r.dtype, f"{r.ms:.4g}", f"{r.throughput:.4g}",
             "-" if r.peak_fraction is None else f"{100 * r.peak_fraction:.3g}%",
             "-" if r.peer_ms is None else f"{r.peer_ms:.4g}",
             "-" if r.speed_vs_peer is None else f"{r.speed_vs_peer:.3g}x"] for r in results]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    print(f"\n== {family} ==", file=out)
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)), file=out)


# ----- pytest-benchmark glue (benchmarks/test_bench_*.py) ----------------------------------------------
def pytest_context(peer: bool = True) -> Context:
    """The context the pytest-benchmark suites use: this machine's mode, quick sizes, fp32 and fp16."""
    import tritensor as tt

    return Context(tt.cuda.is_available(), ["float32", "float16"], None, quick=True, peer=peer)


def case_id(case: Case) -> str:
    return f"{case.op}-{case.shape}-{case.dtype}".replace(" ", "")


def run_benchmark(benchmark, case: Case, impl: str, ctx: Context) -> None:
    """Time ``case`` (impl "tritensor" or "peer") with pytest-benchmark, grouped so the two sit side by side.

    pytest-benchmark reads a wall clock, so GPU work is synchronised inside the timed call.
    """
    import pytest

    fn = case.run if impl == "tritensor" else case.peer
    if fn is None:
        pytest.skip(f"no peer for {case.op} on this machine")
    benchmark.group = f"{case.family}: {case.op} {case.shape} {case.dtype}"
    benchmark.extra_info.update(flops=case.flops, nbytes=case.nbytes, peer=case.peer_name)
    if ctx.gpu:
        if impl == "peer" and ctx.torch is not None:
            sync = ctx.torch.cuda.synchronize
        else:

            sync = cuda.synchronize
        inner = fn

        def fn():
            inner()
            sync()

    fn()  # warm-up: compile (GPU) or first interpretation outside the timing
    benchmark.pedantic(fn, rounds=3 if not ctx.gpu else 20, iterations=1)
