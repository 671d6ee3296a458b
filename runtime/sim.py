"""A simulated CUDA device (``TRITENSOR_DEVICE=sim``): the GPU path runs on a CPU, and is checked.

GPUs are lent rarely; the GPU path (device storages, the caching allocator, streams, events and
``record_stream``, multi-tensor address tables, the direct launcher, CUDA graphs) must not wait
for one to be tested. In sim mode that code runs unchanged: only what it asks of cuda.core and of
the driver, and the final kernel launch, are answered here instead (``runtime/driver.py`` is the
seam and the only importer of this module). Kernels run in Triton's interpreter, with the fix-ups
that make it compute what a GPU computes (``runtime/interpreter_gpu.py``).

What the simulator checks, as a GPU and compute-sanitizer would, but with a message that names
the culprit:

* **Device memory is its own address space.** Device addresses start at :data:`DEVICE_BASE`, far
  above any address a host process is given (past 2**56: no 48- or 57-bit virtual address is
  there), so a device address never coincides with a host one. Each allocation is backed by host
  bytes of its own and separated from the next by an unmapped gap; addresses are never reused, so
  a freed allocation stays freed. Every load, store and atomic a kernel makes is translated and
  checked: a lane outside every live allocation raises :class:`IllegalAddress` naming the kernel,
  the pointer argument nearest below it and the byte offset; a host address reaching a kernel
  (an argument, or a pointer read from an address table) is named as such. Masked-off lanes are
  not accesses, as on hardware. The caching allocator says which bytes of a block a tensor holds
  (``block_lent``, ``block_returned``, in stream order), so the check is at tensor granularity: a
  lane past a tensor's bytes faults even inside its 512-byte block. Fresh allocations are filled
  with :data:`POISON` (0xFF: NaN in every float format, -1 in every integer), and so is a block
  the caching allocator takes back, so reading memory nobody wrote, or memory freed, gives NaN,
  not a plausible number; with ``TRITENSOR_SIM_STRICT=1`` any access to a block in the
  allocator's cache faults instead. A host copy whose host side is a device address (or the
  other way round) is refused.
* **Launch limits**: grid dimensions (x < 2**31, y and z < 2**16) and threads per block. The
  interpreter compiles nothing, so shared memory and registers are unknown; the opt-in slow mode
  ``TRITENSOR_SIM_COMPILE=1`` (from a checkout) compiles each new kernel specialisation for sm_90,
  every configuration the GPU autotuner would try, with ``tools/sm90_compile.py`` in a process of
  its own, and fails the launch of one that does not compile or needs more shared memory than an
  H100 has.
* **Streams are queues.** A launch, copy, memset, free or event record is queued on its stream and
  runs only when something waits for it: a synchronize, an event query or sync, a host copy, or a
  queue grown past :data:`QUEUE_DEPTH`. Work on one stream runs in order; across streams only
  events order it, so a stream no one waits for runs late, and memory reused before its reader
  stream is done gives wrong values, as it can on a GPU.
* **Graph capture follows the driver's rules.** Work queued on a capturing stream is recorded, not
  run. A synchronize, an event query or sync, a host-device copy on the capturing stream (but
  one from pinned host memory to the device, recorded as a copy node that reads those bytes at
  every replay), a stream-ordered allocation on it, ``cuMemAlloc``/``cuMemFree`` outside relaxed
  mode and a kernel's first module load are errors that invalidate the capture (``global`` mode:
  from any thread), as the driver makes them; ``end_building`` then raises, once. Replay queues
  the recorded work with its arguments as captured: pointers baked in, so a graph whose table was
  freed reads poison.
* **Driver calls are counted** (:data:`counts`, :func:`counting`): launches, graph launches, driver
  allocations and frees, synchronizations, event records and queries, host and device copies.
* **Errors are sticky**, as a CUDA context's are: after an illegal address every driver call
  raises it again until :func:`clear_error` (tests only; a real process must exit).

What it cannot check: timing, real concurrency (streams are run one at a time, on demand), and
the compiler's code generation (registers, shared memory, spills: ``tools/sm90_compile.py`` and
``tools/sm90_report.py`` compile kernels for sm_90 without a GPU).
"""
from __future__ import annotations

import bisect
import collections
import contextlib
import ctypes
import dataclasses
import gc
import itertools
import os
import json
import subprocess
import sys
import threading
import weakref
import time

import numpy as np
from cuda.bindings import driver as _real_driver  # its enums and types; none of its functions is called
from triton.backends.compiler import BaseBackend
from triton.runtime.interpreter import InterpretedFunction, InterpreterError
from triton.runtime.jit import JITFunction, create_function_from_signature
from triton.tools.tensor_descriptor import TensorDescriptor

from . import interpreter, launch_log

CUresult = _real_driver.CUresult
OK = CUresult.CUDA_SUCCESS

DEVICE_BASE = 0x0D00_0000_0000_0000  # device 0's first address; device d's space starts d * DEVICE_SPAN above
DEVICE_SPAN = 1 << 52
GAP = 1 << 16  # unmapped bytes after every allocation: an overrun lands in no allocation
ALIGN = 512  # allocations start on this boundary (cudaMalloc gives 256 or more)
POISON = 0xFF
QUEUE_DEPTH = 1024  # a stream's queued items before it runs on its own (a GPU's work queue is finite)
DEVICES = int(os.environ.get("TRITENSOR_SIM_DEVICES", "2"))
STRICT = os.environ.get("TRITENSOR_SIM_STRICT", "0").strip() not in ("", "0")  # freed blocks fault
COMPILE = os.environ.get("TRITENSOR_SIM_COMPILE", "0").strip() not in ("", "0")  # compile each kernel key
MEMORY = int(float(os.environ.get("TRITENSOR_SIM_MEMORY_GB", "16")) * (1 << 30))  # per device
NAME = "tritensor simulated H100 (sm_90)"
CAPABILITY = (9, 0)
SM_COUNT = 132
# Green contexts (cuDevSmResourceSplitByCount): on compute capability 9.0 an SM partition holds at
# least 8 SMs, in steps of 8 (the driver reports both as minSmPartitionSize and
# smCoscheduledAlignment); a count between steps is rounded up.
SM_PARTITION_MIN = 8
SM_PARTITION_ALIGN = 8
# The workqueue configuration's default concurrency limit: the driver's default number of
# hardware work queues (connections) per context, which CUDA_DEVICE_MAX_CONNECTIONS also defaults to.
WORKQUEUE_CONCURRENCY = 8
DRIVER_VERSION = 13040  # the CUDA driver the simulator stands for: 13.4 has green contexts with workqueues
MAX_THREADS = 1024

class _DeviceLock:
    """The simulator's one lock (one device model for every thread: its state and the interpreter).

    While a thread holds it, the cyclic garbage collector is paused. A collection may run on any
    thread that allocates, and run a tensor storage's ``__del__`` there, whose free takes the
    caching allocator's lock; meanwhile another thread may hold the allocator's lock and wait here
    (the allocator calls the device with its lock held, as it calls a real driver): a deadlock. A
    real driver never runs Python, so it cannot have it; paused collection keeps the simulator so."""

    def __init__(self):
        self._lock = threading.RLock()
        self._local = threading.local()

    def __enter__(self):
        self._lock.acquire()
        depth = getattr(self._local, "depth", 0)
        if depth == 0:
            self._local.collect = gc.isenabled()
            if self._local.collect:
                gc.disable()
        self._local.depth = depth + 1
        return self

    def __exit__(self, *exc):
        self._local.depth -= 1
        if self._local.depth == 0 and self._local.collect:
            gc.enable()
        self._lock.release()
        return False


_lock = _DeviceLock()
# ``bench launch --sim`` times the GPU path's host side: a launch is then counted and does nothing
# (the driver's launch call a no-op), and the per-tensor bookkeeping, which a GPU has not, is off.
HOST_ONLY = False
counts: collections.Counter = collections.Counter()


class SimError(RuntimeError):
    """A driver error as the simulator reports it: ``code`` is the CUresult; the message starts with
    its name, as cuda.core's errors do."""

    def __init__(self, code, message: str):
        super().__init__(f"{code.name}: {message}")
        self.code = code


class IllegalAddress(SimError):
    """A kernel or a copy touched memory outside every live device allocation."""

    def __init__(self, message: str):
        super().__init__(CUresult.CUDA_ERROR_ILLEGAL_ADDRESS, message)


_sticky: SimError | None = None


def clear_error() -> None:
    """Forget the sticky error and the work queued on every stream (tests that provoke one). The
    allocator's bookkeeping queued there (which bytes of a block a tensor holds, the poison of a
    block taken back) still runs: the blocks go on being handed out."""
    global _sticky
    with _lock:
        _sticky = None
        for s in list(_streams.values()):
            queued, s.done = list(s.queue), s.submitted
            s.queue.clear()
            for item in queued:
                if type(item) is _Bookkeeping:
                    item()


def _check_sticky() -> None:
    if _sticky is not None:
        raise _sticky


_initialised = False  # a device was made current in this process


def _forked_child() -> None:
    """A process forked after its parent used the device holds a dead copy of the context, as on a
    GPU: every driver call in the child fails with CUDA_ERROR_NOT_INITIALIZED."""
    global _sticky
    if _initialised:
        _sticky = SimError(CUresult.CUDA_ERROR_NOT_INITIALIZED,
                           "this process was forked from one that had used the device; a forked child "
                           "cannot use its parent's CUDA context")


os.register_at_fork(after_in_child=_forked_child)


@contextlib.contextmanager
def counting():
    """``with counting() as c:`` ... ``c`` is the Counter of driver calls made inside the block."""
    before = counts.copy()
    delta: collections.Counter = collections.Counter()
    try:
        yield delta
    finally:
        after = counts.copy()
        after.subtract(before)
        delta.update({k: v for k, v in after.items() if v})


# ---------------------------------------------------------------------------------------------
# Device memory

class _Allocation:
    __slots__ = ("start", "end", "size", "host", "host_ptr", "delta", "device", "alive", "kind", "tensor", "cached")

    def __init__(self, start: int, size: int, device: int, kind: str):
        # ``end``: where accesses stop being legal: the allocation's end, or that of the tensor the
        # caching allocator lent it to (``tensor`` bytes), or its start while it sits in the
        # allocator's cache in strict mode.
        self.start, self.size, self.end, self.device, self.kind = start, size, start + size, device, kind
        self.tensor = None
        self.cached = False
        self.host = np.full(max(size, 1), POISON, dtype=np.uint8)
        self.host_ptr = self.host.ctypes.data
        self.delta = np.uint64((self.host_ptr - start) % (1 << 64))  # device -> host address, mod 2**64
        self.alive = True


class _AddressSpace:
    """Every allocation ever made, sorted by address (addresses are never reused)."""

    def __init__(self):
        self.starts: list[int] = []
        self.allocs: list[_Allocation] = []
        self.next = [DEVICE_BASE + d * DEVICE_SPAN for d in range(DEVICES)]
        self.used = [0] * DEVICES
        self._arrays = None  # (starts, ends, deltas, alive) as NumPy arrays for per-lane lookups
        self._last = None

    def allocate(self, device: int, size: int, kind: str) -> _Allocation:
        if self.used[device] + size > MEMORY:
            raise SimError(CUresult.CUDA_ERROR_OUT_OF_MEMORY,
                           f"simulated device {device} has {MEMORY - self.used[device]} of {MEMORY} bytes free, "
                           f"{size} asked (TRITENSOR_SIM_MEMORY_GB sets its size)")
        start = self.next[device]
        self.next[device] = start + -(-max(size, 1) // ALIGN) * ALIGN + GAP
        a = _Allocation(start, size, device, kind)
        i = bisect.bisect(self.starts, start)
        self.starts.insert(i, start)
        self.allocs.insert(i, a)
        self.used[device] += size
        self._arrays = None
        return a

    def changed(self) -> None:
        """An allocation's legal range changed (a tensor took or left its block)."""
        self._arrays = None
        self._last = None

    def release(self, a: _Allocation) -> None:
        a.alive = False
        a.host = None  # its bytes go; its range stays known, for the message of a later access
        self.used[a.device] -= a.size
        self._arrays = None
        if self._last is a:
            self._last = None

    def find(self, address: int) -> _Allocation | None:
        """The allocation (live or freed) whose range holds ``address``."""
        i = bisect.bisect(self.starts, address) - 1
        if i >= 0:
            a = self.allocs[i]
            if address < a.start + a.size or (a.size == 0 and address == a.start):
                return a
        return None

    def live(self, address: int, nbytes: int) -> _Allocation | None:
        a = self._last
        if a is None or not (a.start <= address and address + nbytes <= a.end):
            a = self.find(address)
            if a is None or not a.alive or address + nbytes > a.end:
                return None
            self._last = a
        return a

    def arrays(self):
        if self._arrays is None:
            self._arrays = (np.array(self.starts, dtype=np.uint64),
                            np.array([a.end for a in self.allocs], dtype=np.uint64),
                            np.array([a.delta if a.alive else 0 for a in self.allocs], dtype=np.uint64),
                            np.array([a.alive for a in self.allocs], dtype=bool))
        return self._arrays

    def host_address(self, address: int, nbytes: int, what: str) -> int:
        """The host address of ``nbytes`` of device memory at ``address``, checked."""
        a = self.live(address, nbytes)
        if a is None:
            raise IllegalAddress(f"{what}: {self.describe(address, nbytes)}")
        return address - a.start + a.host_ptr

    def describe(self, address: int, nbytes: int, args=()) -> str:
        """Why ``nbytes`` at ``address`` is no live device memory, naming the nearest argument."""
        if address < DEVICE_BASE or address >= DEVICE_BASE + DEVICES * DEVICE_SPAN:
            where = f"address {address:#x} is no device address (a host pointer, or garbage, reached the device)"
        else:
            a = self.find(address)
            if a is not None and not a.alive:
                where = (f"address {address:#x} is {address - a.start} bytes into a {a.size}-byte allocation at "
                         f"{a.start:#x} that was freed (use after free)")
            elif a is not None and a.cached:
                where = (f"address {address:#x} is {address - a.start} bytes into a {a.size}-byte block at "
                         f"{a.start:#x} that the caching allocator holds: the tensor that had it was freed "
                         "(use after free)")
            elif a is not None and a.tensor is not None:
                where = (f"{nbytes} bytes at {address:#x} run past the end of the {a.tensor}-byte tensor storage at "
                         f"{a.start:#x} (offset {address - a.start}; its block is {a.size} bytes)")
            elif a is not None:
                where = (f"{nbytes} bytes at {address:#x} run past the end of the {a.size}-byte allocation at "
                         f"{a.start:#x} (offset {address - a.start})")
            else:
                i = bisect.bisect(self.starts, address) - 1
                near = self.allocs[i] if i >= 0 else None
                where = f"address {address:#x} is in no allocation" + (
                    f" ({address - near.end} bytes past the end of the {near.size}-byte allocation at {near.start:#x})"
                    if near is not None else "")
        named = [(n, p) for n, p in args if p <= address]
        if named:
            name, base = max(named, key=lambda np_: np_[1])
            where += f"; through argument '{name}' (element 0 at {base:#x}) at byte offset {address - base}"
        return where


space = _AddressSpace()


def _translate(ptrs: np.ndarray, mask, nbytes: int, access: str) -> np.ndarray:
    """The host addresses of a kernel's device pointers, every masked-in lane checked."""
    p = ptrs
    if mask is not None:
        m = np.broadcast_to(mask, p.shape)
        if not m.all():
            if not m.any():
                return p  # no lane is accessed: nothing to translate or check
            sel = p[m]
        else:
            m, sel = None, p
    else:
        m, sel = None, p
    lo, hi = int(sel.min()), int(sel.max())
    a = space.live(lo, hi - lo + nbytes)
    if a is not None:
        return p + a.delta
    # Lanes spread over several allocations (address tables, gathers), or a bad one: lane by lane.
    starts, ends, deltas, alive = space.arrays()
    idx = np.searchsorted(starts, sel, side="right").astype(np.int64) - 1
    ok = idx >= 0
    safe = np.where(ok, idx, 0)
    ok &= alive[safe] & (sel + np.uint64(nbytes) <= ends[safe]) & (sel >= starts[safe])
    if not ok.all():
        bad = int(sel[np.argmin(ok)])
        raise IllegalAddress(_kernel_message(access, bad, nbytes))
    host = sel + deltas[safe]
    if m is None:
        return host
    out = p.copy()
    out[m] = host
    return out


def _kernel_message(access: str, address: int, nbytes: int) -> str:
    run = _running
    name = run.name if run is not None else "a kernel"
    args = run.pointer_args if run is not None else ()
    return f"kernel {name}: illegal {access} of {nbytes} bytes: {space.describe(address, nbytes, args)}"


_checked_access_installed = False


def _install_checked_access() -> None:
    """Wrap the interpreter's memory operations (all loads, stores and atomics funnel into these
    four) so that every device address is checked and translated to its host bytes."""
    global _checked_access_installed
    if _checked_access_installed:
        return
    from triton.runtime import interpreter as interp

    b = interp.InterpreterBuilder
    load, store, cas, rmw = b.create_masked_load, b.create_masked_store, b.create_atomic_cas, b.create_atomic_rmw

    def _itemsize(ptrs) -> int:
        return max(1, ptrs.get_element_ty().primitive_bitwidth // 8)

    def _moved(ptrs, data):
        return interp.TensorHandle(data, ptrs.dtype)

    def create_masked_load(self, ptrs, mask, other, cache_policy, is_volatile):
        host = _translate(ptrs.data, mask.data, _itemsize(ptrs), "load")
        return load(self, _moved(ptrs, host), mask, other, cache_policy, is_volatile)

    def create_masked_store(self, ptrs, value, mask, cache_policy):
        host = _translate(ptrs.data, mask.data, _itemsize(ptrs), "store")
        return store(self, _moved(ptrs, host), value, mask, cache_policy)

    def create_atomic_cas(self, ptr, cmp, val, sem, scope):
        return cas(self, _moved(ptr, _translate(ptr.data, None, _itemsize(ptr), "atomic")), cmp, val, sem, scope)

    def create_atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope):
        host = _translate(ptr.data, mask.data, _itemsize(ptr), "atomic")
        return rmw(self, rmwOp, _moved(ptr, host), val, mask, sem, scope)

    interpreter.replace(b, create_masked_load=create_masked_load, create_masked_store=create_masked_store,
                        create_atomic_cas=create_atomic_cas, create_atomic_rmw=create_atomic_rmw)
    _checked_access_installed = True


# ---------------------------------------------------------------------------------------------
# Streams, events, capture

class _Wait:
    __slots__ = ("stream", "seq")

    def __init__(self, stream, seq):
        self.stream, self.seq = stream, seq


class _Stream:
    """A device queue. ``submitted`` items were queued, the first ``done`` of them have run."""

    def __init__(self, device: int, handle: int):
        self.device, self.handle = device, handle
        self.queue: collections.deque = collections.deque()
        self.submitted = self.done = 0
        self.capture: _Capture | None = None

    def enqueue(self, item) -> None:
        if self.capture is not None:
            self.capture.items.append(item)
            return
        self.queue.append(item)
        self.submitted += 1
        if len(self.queue) > QUEUE_DEPTH:
            self.run_to(self.submitted)

    def run_to(self, seq: int) -> None:
        """Run this stream's work up to item ``seq``, and first what it waits for on other streams."""
        global _sticky
        _check_sticky()
        while self.done < seq:
            item = self.queue.popleft()
            self.done += 1
            if type(item) is _Wait:
                item.stream.run_to(item.seq)
                continue
            try:
                item()
            except SimError as e:
                _sticky = e
                raise

    def __repr__(self) -> str:
        return f"<simulated stream {self.handle:#x} of device {self.device}>"


_streams: dict = {}  # (device, handle) -> _Stream
_handles = itertools.count(0x1000)
_local = threading.local()  # the thread's current device, and its capture mode


def _stream_of(handle: int) -> _Stream:
    s = _streams.get((_current_device(), int(handle)))
    if s is None:
        s = next((v for (d, h), v in _streams.items() if h == int(handle)), None)
    if s is None:
        raise SimError(CUresult.CUDA_ERROR_INVALID_HANDLE, f"no stream with handle {int(handle):#x}")
    return s


def _current_device() -> int:
    return getattr(_local, "device", 0)


class _Capture:
    def __init__(self, stream: _Stream, mode: str):
        self.stream, self.mode, self.items = stream, mode, []
        self.thread = threading.get_ident()
        self.invalid: str | None = None


_captures: list[_Capture] = []


def _unsafe_during_capture(what: str, stream: _Stream | None = None) -> None:
    """The driver's rule: ``what`` (a sync, a query, a blocking allocation...) is not allowed while
    a capture that sees it is under way; it invalidates that capture and fails."""
    relaxed = getattr(_local, "capture_mode", "global") == "relaxed"
    hit = [c for c in _captures if c.invalid is None and (c.stream is stream or (
        not relaxed and (c.mode == "global" or (c.mode == "thread_local" and c.thread == threading.get_ident()))))]
    if hit:
        for c in hit:
            c.invalid = what
        raise SimError(CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                       f"{what} while a CUDA graph is being captured on {hit[0].stream}: the capture is invalidated")


class _Event:
    def __init__(self, timing: bool):
        self.timing = timing
        self.stream: _Stream | None = None
        self.seq = 0
        self.captured = False
        self.time = None
        self.handle = next(_handles)
        _events[self.handle] = self

    def record(self, stream: _Stream) -> None:
        counts["event_record"] += 1
        self.stream, self.captured = stream, stream.capture is not None
        if self.captured:
            return
        if self.timing:
            stream.enqueue(self._stamp)
        else:
            stream.enqueue(_nothing)
        self.seq = stream.submitted

    def _stamp(self) -> None:
        self.time = time.perf_counter()

    def _check(self, what: str) -> None:
        _check_sticky()
        if self.captured:
            raise SimError(CUresult.CUDA_ERROR_CAPTURED_EVENT, f"{what} of an event recorded during a graph capture")
        _unsafe_during_capture(what)

    def query(self) -> bool:
        counts["event_query"] += 1
        self._check("cuEventQuery")
        if self.stream is not None:
            self.stream.run_to(self.seq)  # the device has done what it was asked, when asked
        return True

    def sync(self) -> None:
        counts["sync"] += 1
        self._check("cuEventSynchronize")
        if self.stream is not None:
            self.stream.run_to(self.seq)


def _nothing() -> None:
    pass


_events: dict = {}


def _sync_device(device: int, what: str) -> None:
    counts["sync"] += 1
    _check_sticky()
    _unsafe_during_capture(what)
    for (d, _h), s in sorted(_streams.items(), key=lambda kv: kv[0][1]):
        if d == device:
            s.run_to(s.submitted)


# ---------------------------------------------------------------------------------------------
# Kernels

@dataclasses.dataclass(eq=False)
class SimPointer:
    """A device pointer as the interpreter receives it; its accesses are translated and checked."""

    address: int
    dtype: object

    def data_ptr(self) -> int:
        """The simulated device address, as Triton's launcher asks any tensor-like argument for it."""
        return self.address


interpreter.HOST_TYPES.add(SimPointer)  # the interpreter copies nothing for it: the checked accesses translate


_running = None  # the launch the interpreter is running now (for messages)


class _Launch:
    __slots__ = ("kernel", "grid", "args", "name", "pointer_args")

    def __init__(self, kernel, grid, args, name, pointer_args):
        self.kernel, self.grid, self.args, self.name, self.pointer_args = kernel, grid, args, name, pointer_args

    def __call__(self) -> None:
        global _running
        _install_checked_access()
        _running = self
        try:
            with np.errstate(all="ignore"):
                self.kernel.run(*self.args, grid=self.grid, warmup=False)
        except InterpreterError as e:
            cause = e.__cause__
            if isinstance(cause, SimError):
                raise cause from None
            raise
        finally:
            _running = None


def _device_arg(a, name: str, kernel_name: str, pointers: list):
    """A launch argument as the interpreter gets it: pointers as :class:`SimPointer`, checked to be device addresses."""
    if type(a) in (int, float, bool, str) or a is None:
        return a
    if type(a) is tuple:
        return tuple(_device_arg(x, f"{name}[{i}]", kernel_name, pointers) for i, x in enumerate(a))
    if type(a) is TensorDescriptor:
        return dataclasses.replace(a, base=_device_arg(a.base, f"{name}.base", kernel_name, pointers))
    if hasattr(a, "data_ptr") and hasattr(a, "dtype"):
        p = int(a.data_ptr())
        if not DEVICE_BASE <= p < DEVICE_BASE + DEVICES * DEVICE_SPAN:
            raise IllegalAddress(f"kernel {kernel_name}: argument '{name}' is a host pointer ({p:#x}), not device memory")
        pointers.append((name, p))
        return SimPointer(p, a.dtype)
    return a


class SimCompiled:
    """What Triton's JIT would have compiled and loaded for one specialisation on one device."""

    def __init__(self, kernel, names, device: int, values=()):
        self.kernel, self.names, self.device = kernel, names, device
        self.name = kernel.fn.__name__
        self.function = self.packed_metadata = None
        self.num_warps = 4
        # A GPU launcher takes a pointer as a plain int too (the direct launcher passes them so); the
        # specialisation fixes each pointer parameter's element type, which the interpreter needs.
        self.pointer_dtypes = {i: v.dtype for i, v in enumerate(values)
                               if hasattr(v, "data_ptr") and hasattr(v, "dtype")}

    def launch_metadata(self, grid, stream, *args):
        """No launch metadata: the simulator runs no launch hooks (Triton's compiled kernel builds it for
        them)."""
        return None

    def run(self, gx, gy, gz, stream, function, packed_metadata, launch_metadata, enter_hook, exit_hook, *args):
        """A kernel launch (``cuLaunchKernel``): checked now, run when its stream gets to it."""
        if HOST_ONLY:
            counts["launch"] += 1
            return
        with _lock:
            counts["launch"] += 1
            _check_sticky()
            s = _stream_of(stream)
            if s.device != self.device:
                raise SimError(CUresult.CUDA_ERROR_INVALID_HANDLE,
                               f"kernel {self.name}: its module was loaded on device {self.device}, and it was "
                               f"launched on a stream of device {s.device}")
            _check_context(s, f"kernel {self.name}")
            if not (0 <= gx < 2**31 and 0 <= gy < 2**16 and 0 <= gz < 2**16):
                raise SimError(CUresult.CUDA_ERROR_INVALID_VALUE,
                               f"kernel {self.name}: grid ({gx}, {gy}, {gz}) exceeds the device's limits "
                               f"(x < 2**31, y and z < 65536)")
            if self.num_warps * 32 > MAX_THREADS:
                raise SimError(CUresult.CUDA_ERROR_INVALID_VALUE,
                               f"kernel {self.name}: {self.num_warps * 32} threads a block, more than {MAX_THREADS}")
            if gx * gy * gz == 0:  # Triton's launcher launches nothing for an empty grid
                return
            pointers: list = []
            dtypes = self.pointer_dtypes
            args = [SimPointer(a, dtypes[i]) if type(a) is int and i in dtypes else a for i, a in enumerate(args)]
            conv = [_device_arg(a, n, self.name, pointers) for a, n in zip(args, self.names)]
            s.enqueue(_Launch(self.kernel, (gx, gy, gz), conv, self.name, pointers))


_compiled: dict = {}  # (kernel id, device, Triton's specialisation) -> SimCompiled
_binders: dict = {}  # id(InterpretedFunction) -> (its JITFunction twin, Triton's binder)
_loaded: set = set()


def kernel_function(kernel):
    """The JITFunction twin of an interpreted kernel (its signature and parameters, for the direct
    launcher and Triton's binder), or None for what the simulator does not launch direct."""
    if type(kernel) is not InterpretedFunction:
        return None
    found = _binders.get(id(kernel))
    if found is None:
        twin = JITFunction(kernel.fn, **kernel.kwargs)
        twin.pre_run_hooks = kernel.pre_run_hooks
        found = _binders[id(kernel)] = (twin, create_function_from_signature(twin.signature, twin.params, BaseBackend))
    return found[0]


def triton_binder(jit_fn):
    """A function that binds a launch's arguments as ``jit_fn``'s interpreted twin would, returning their
    values in parameter order (driver.triton_binder's simulated form)."""
    binder = next(b for twin, b in _binders.values() if twin is jit_fn)

    def bind(args, kwargs) -> list:
        return list(binder(*args, **kwargs)[0].values())

    return bind


def _spec_key(spec) -> tuple:
    return tuple(tuple(x) if isinstance(x, list) else x for x in spec)


def _check_context(s, what: str) -> None:
    """A stream, like a module, belongs to its device's context: a launch on it while another device's
    context is current in this thread is refused, as the driver refuses a foreign handle."""
    current = getattr(_local, "device", s.device)
    if current != s.device:
        raise SimError(CUresult.CUDA_ERROR_INVALID_HANDLE,
                       f"{what}: launched on a stream of device {s.device} while device {current}'s context is "
                       "current in this thread")


def jit_run(kernel, grid, args, kwargs, stream: int):
    """``kernel[grid](*args, **kwargs)`` on ``stream`` as Triton's JIT does it: bind, specialise,
    compile (here: note the first load of a specialisation), launch. Returns the compiled kernel."""
    with _lock:
        if type(kernel) is not InterpretedFunction:  # an autotuner or a user's wrapper: run it as it is, in order
            counts["launch"] += 1
            s = _stream_of(stream)
            _check_context(s, repr(kernel))
            pointers: list = []
            conv = [_device_arg(a, f"args[{i}]", repr(kernel), pointers) for i, a in enumerate(args)]
            s.enqueue(lambda: kernel[grid](*conv, **kwargs))
            return None
        twin = kernel_function(kernel)
        binder = _binders[id(kernel)][1]
        options = {k: v for k, v in kwargs.items() if k not in twin.arg_names}
        params = {k: v for k, v in kwargs.items() if k in twin.arg_names}
        bound, spec, _opts = binder(*args, **params)
        s = _stream_of(stream)
        key = (id(kernel), s.device, _spec_key(spec), tuple(sorted(options.items())))
        compiled = _compiled.get(key)
        if compiled is None:
            _unsafe_during_capture(f"compiling and loading {kernel.fn.__name__} (its first launch with these "
                                   "argument types)", s)
            if COMPILE:
                _compile_for_sm90(kernel, args, kwargs)
            compiled = _compiled[key] = SimCompiled(kernel, tuple(bound), s.device, tuple(bound.values()))
            compiled.num_warps = options.get("num_warps", 4)
        values = list(bound.values())
        g = grid(bound) if callable(grid) else grid
        compiled.run(g[0], g[1] if len(g) > 1 else 1, g[2] if len(g) > 2 else 1, stream, None, None, None, None, None,
                     *values)
        return compiled


_compiler = None  # the sm90_compile.py --serve process of TRITENSOR_SIM_COMPILE=1


def _compile_for_sm90(kernel, args, kwargs) -> None:
    """Compile one launch for sm_90 as a GPU would (every autotune configuration it would try);
    a configuration that fails to compile or overflows shared memory fails the launch."""
    global _compiler
    if _compiler is None or _compiler.poll() is not None:
        tool = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools", "sm90_compile.py")
        if not os.path.exists(tool):
            raise RuntimeError(f"TRITENSOR_SIM_COMPILE=1 compiles with {tool}, which only a checkout of tritensor has")
        env = {k: v for k, v in os.environ.items() if k not in ("TRITENSOR_DEVICE", "TRITON_INTERPRET")}
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # the kernels' modules, as this process sees them
        _compiler = subprocess.Popen([sys.executable, tool, "--serve", str(CAPABILITY[0] * 10 + CAPABILITY[1])],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    fn = kernel.fn
    entry = {"kernel": f"{fn.__module__}:{fn.__qualname__}", "args": [launch_log.encode(a) for a in args],
             "kwargs": {k: launch_log.encode(v) for k, v in sorted(kwargs.items())}}
    _compiler.stdin.write(json.dumps(entry, sort_keys=True) + "\n")
    _compiler.stdin.flush()
    line = _compiler.stdout.readline()
    if not line:
        raise RuntimeError(f"the sm_90 compiler process ended while compiling {fn.__name__} (its stderr says why)")
    failed = [f"{config}: {err}" for config, err, _res in json.loads(line) if err]
    if failed:
        raise SimError(CUresult.CUDA_ERROR_INVALID_VALUE, f"kernel {fn.__name__} cannot run on an H100 (sm_90): "
                       + "; ".join(failed[:3]))


# ---------------------------------------------------------------------------------------------
# cuda.core's shapes: Device, Stream, Event, memory resources, graphs

@dataclasses.dataclass
class StreamOptions:
    """cuda.core's ``StreamOptions``: how a stream is created (non-blocking, priority); the simulator accepts
    and ignores them."""
    nonblocking: bool = True
    priority: int = 0


@dataclasses.dataclass
class EventOptions:
    """cuda.core's ``EventOptions``: whether an event times, blocks the host on sync, or can be shared between
    processes; the simulator keeps timing only."""
    timing_enabled: bool = False
    blocking_sync: bool = False
    ipc_enabled: bool = False


class _Properties:
    multiprocessor_count = SM_COUNT


class Device:
    """cuda.core's ``Device`` for a simulated device."""

    _made: dict = {}

    def __new__(cls, device_id: int = 0):
        with _lock:
            d = cls._made.get(device_id)
            if d is None:
                if not 0 <= device_id < DEVICES:
                    raise SimError(CUresult.CUDA_ERROR_INVALID_DEVICE, f"device {device_id} of {DEVICES}")
                d = cls._made[device_id] = super().__new__(cls)
                d.device_id = device_id
                d.name = NAME
                d.compute_capability = CAPABILITY
                d.properties = _Properties()
                d.memory_resource = _PoolResource(device_id)
                d.default_stream = CoreStream(_new_stream(device_id, 0))
            return d

    def set_current(self) -> None:
        """Make this device current in the simulated driver (cuda.core's Device.set_current); the first call
        initialises the driver, and a sticky error raises here."""
        global _initialised
        _check_sticky()
        _initialised = True
        _local.device = self.device_id

    def create_stream(self, options=None) -> "CoreStream":
        """A new simulated stream on this device (cuda.core's Device.create_stream)."""
        with _lock:
            return CoreStream(_new_stream(self.device_id, next(_handles)))

    def create_event(self, options=None) -> "CoreEvent":
        """A new simulated event, timing when the options ask for it (cuda.core's Device.create_event)."""
        return CoreEvent(_Event(bool(options is not None and options.timing_enabled)))

    def sync(self) -> None:
        """Run every stream of this device to its end (cudaDeviceSynchronize)."""
        with _lock:
            _sync_device(self.device_id, "cudaDeviceSynchronize")


def _new_stream(device: int, handle: int) -> _Stream:
    s = _streams[(device, handle)] = _Stream(device, handle)
    return s


class CoreStream:
    """cuda.core's ``Stream``."""

    def __init__(self, s: _Stream):
        self._s = s
        self.handle = s.handle

    @staticmethod
    def from_handle(handle: int) -> "CoreStream":
        """cuda.core's ``Stream.from_handle``: a stream created elsewhere, known by its raw handle."""
        with _lock:
            return CoreStream(_stream_of(int(handle)))

    def record(self, event: "CoreEvent | None" = None) -> "CoreEvent":
        """Record ``event`` (a new one if None) at this stream's current end and return it (cuda.core's
        Stream.record)."""
        with _lock:
            _check_sticky()
            event = CoreEvent(_Event(False)) if event is None else event
            event._e.record(self._s)
            return event

    def wait(self, event: "CoreEvent") -> None:
        """Make later work on this stream wait for ``event`` (cuda.core's Stream.wait)."""
        with _lock:
            _check_sticky()
            e = event._e
            if e.stream is not None and not e.captured:
                self._s.enqueue(_Wait(e.stream, e.seq))

    def sync(self) -> None:
        """Run this stream's queued work to its end, as the host waits for it (cuStreamSynchronize)."""
        with _lock:
            counts["sync"] += 1
            _check_sticky()
            _unsafe_during_capture("cuStreamSynchronize", self._s)
            self._s.run_to(self._s.submitted)

    def create_graph_builder(self) -> "GraphBuilder":
        """A builder that captures this stream's work into a graph (cuda.core's Stream.create_graph_builder)."""
        return GraphBuilder(self._s)


class CoreEvent:
    """cuda.core's ``Event``."""

    def __init__(self, e: _Event):
        self._e = e
        self.handle = e.handle

    @property
    def is_done(self) -> bool:
        """Whether the work this event was recorded after has run (cuEventQuery)."""
        with _lock:
            return self._e.query()

    def sync(self) -> None:
        """Run the work this event was recorded after, as the host waits for it (cuEventSynchronize)."""
        with _lock:
            self._e.sync()


class _DeviceBuffer:
    """A stream-ordered pool allocation (cuda.core's ``Buffer``): ``handle`` is its device address."""

    def __init__(self, a: _Allocation):
        self._a = a
        self.handle, self.size = a.start, a.size

    def close(self, stream=None) -> None:
        with _lock:
            counts["free"] += 1
            a = self._a
            if a is None:
                return
            self._a = None
            if stream is None:
                space.release(a)
            else:
                stream._s.enqueue(lambda: space.release(a))


class _PoolResource:
    """A device's stream-ordered memory pool (cuda.core's ``DeviceMemoryResource``)."""

    def __init__(self, device: int):
        self.device = device
        self.handle = 0x9000 + device

    def allocate(self, nbytes: int, stream=None) -> _DeviceBuffer:
        with _lock:
            counts["alloc"] += 1
            _check_sticky()
            if stream is not None and stream._s.capture is not None:
                stream._s.capture.invalid = "a stream-ordered allocation outside the graph's pool"
                raise SimError(CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                               f"cuMemAllocFromPoolAsync of {nbytes} bytes on {stream._s}, which is capturing a "
                               "CUDA graph: the graph's memory must come from its private pool")
            return _DeviceBuffer(space.allocate(self.device, int(nbytes), "pool"))


class _HostBuffer:
    """Page-locked host memory (cuda.core's pinned ``Buffer``): plain host bytes here."""

    def __init__(self, nbytes: int):
        self._bytes = np.empty(max(int(nbytes), 1), dtype=np.uint8)
        self.handle, self.size = self._bytes.ctypes.data, int(nbytes)
        _pinned_buffers[self.handle] = self

    def close(self, stream=None) -> None:
        self._bytes = None
        _pinned_buffers.pop(self.handle, None)


_pinned_buffers = weakref.WeakValueDictionary()  # address -> live pinned buffer


def _is_pinned(address: int, nbytes: int) -> bool:
    """Do ``nbytes`` at ``address`` lie in one live pinned buffer? (A copy from such bytes may be
    recorded into a graph: the driver refuses only pageable host memory there.)"""
    return any(b._bytes is not None and a <= address and address + nbytes <= a + b.size
               for a, b in list(_pinned_buffers.items()))


class LegacyPinnedMemoryResource:
    """cuda.core's ``LegacyPinnedMemoryResource``: page-locked host buffers (cuMemAllocHost), counted, and
    refused during a graph capture as the driver does."""
    def allocate(self, nbytes: int, stream=None) -> _HostBuffer:
        """A page-locked host buffer of ``nbytes`` (cuMemAllocHost)."""
        with _lock:
            counts["host_alloc"] += 1
            _unsafe_during_capture("cuMemAllocHost")
            return _HostBuffer(nbytes)


class GraphBuilder:
    """Stream capture (cuda.core's ``GraphBuilder``)."""

    def __init__(self, s: _Stream):
        self._s = s
        self._capture: _Capture | None = None
        self._items = None

    def begin_building(self, mode: str = "global") -> "GraphBuilder":
        """Start capturing this stream's work (cuStreamBeginCapture); refused on the legacy default stream and
        on a stream already capturing."""
        with _lock:
            if self._s.handle == 0:
                raise SimError(CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "capture on the legacy default stream")
            if self._s.capture is not None:
                raise SimError(CUresult.CUDA_ERROR_ILLEGAL_STATE, f"{self._s} is capturing already")
            self._capture = self._s.capture = _Capture(self._s, mode)
            _captures.append(self._capture)
            return self

    def end_building(self) -> "GraphBuilder":
        """Stop capturing (cuStreamEndCapture): the captured items become this builder's graph, or an error if
        the capture was invalidated."""
        with _lock:
            c = self._capture
            if c is None or self._s.capture is not c:
                raise SimError(CUresult.CUDA_ERROR_ILLEGAL_STATE, "end_building without begin_building")
            self._s.capture = None
            _captures.remove(c)
            if c.invalid is not None:
                raise SimError(CUresult.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                               f"the capture on {self._s} was invalidated by {c.invalid}")
            self._items = c.items
            return self

    def complete(self) -> "Graph":
        """The executable graph of what was captured (cuGraphInstantiate); only after end_building."""
        if self._items is None:
            raise SimError(CUresult.CUDA_ERROR_ILLEGAL_STATE, "complete() before end_building()")
        return Graph(self._items)

    def close(self) -> None:
        """Release the builder; closed mid-capture, the capture ends invalidated, as the driver's does."""
        with _lock:
            c = self._capture
            if c is not None and self._s.capture is c:  # closed mid-capture: the capture ends, invalid
                self._s.capture = None
                _captures.remove(c)


class Graph:
    """An executable graph: its launch queues every captured item, as captured."""

    def __init__(self, items):
        self._items = list(items)

    def launch(self, stream: CoreStream) -> None:
        """Queue every captured item on ``stream``, in capture order (cuGraphLaunch)."""
        with _lock:
            counts["graph_launch"] += 1
            _check_sticky()
            if self._items is None:
                raise SimError(CUresult.CUDA_ERROR_INVALID_HANDLE, "launch of a closed graph")
            for item in self._items:
                stream._s.enqueue(item)

    def close(self) -> None:
        """Release the graph's items (cuGraphExecDestroy)."""
        self._items = None


# ---------------------------------------------------------------------------------------------
# The driver bindings' shapes (cuda.bindings.driver): what the GPU path calls by name

def _host_side(address: int, nbytes: int, what: str) -> None:
    if DEVICE_BASE <= address < DEVICE_BASE + DEVICES * DEVICE_SPAN:
        raise IllegalAddress(f"{what}: its host side {address:#x} is a device address (a device pointer read "
                             "or written on the host)")


class _GreenCtx:
    """A green context: the device, its SM partition and workqueue configuration, its context handle."""

    def __init__(self, handle: int, device: int, sm_count: int, workqueue):
        self.handle, self.device, self.sm_count, self.workqueue = handle, device, sm_count, workqueue


_descs: dict = {}  # resource descriptor handle -> (SM count or None, (scope, limit) or None)
_green: dict = {}  # green context handle (also its context's handle) -> _GreenCtx
_green_handles = itertools.count(0x6000)


def _ctx_stack() -> list:
    """This thread's pushed contexts (green contexts' handles), innermost last."""
    stack = getattr(_local, "ctx_stack", None)
    if stack is None:
        stack = _local.ctx_stack = []
    return stack


class _GreenDriver:
    """The driver's green-context calls over simulated devices: SM resources split as the driver
    splits them on sm_90, descriptors, green contexts, their streams and the context stack."""

    CUdevResourceType = _real_driver.CUdevResourceType
    CUdevWorkqueueConfigScope = _real_driver.CUdevWorkqueueConfigScope
    CUgreenCtxCreate_flags = _real_driver.CUgreenCtxCreate_flags
    CUstream_flags = _real_driver.CUstream_flags

    @staticmethod
    def cuDriverGetVersion():
        return OK, DRIVER_VERSION

    @staticmethod
    def cuDeviceGet(ordinal):
        if not 0 <= int(ordinal) < DEVICES:
            return CUresult.CUDA_ERROR_INVALID_DEVICE, None
        return OK, _real_driver.CUdevice(int(ordinal))

    @staticmethod
    def cuDeviceGetDevResource(device, kind):
        if not 0 <= int(device) < DEVICES:
            return CUresult.CUDA_ERROR_INVALID_DEVICE, None
        r = _real_driver.CUdevResource()
        r.type = kind
        if kind == _real_driver.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM:
            r.sm.smCount = SM_COUNT
            r.sm.minSmPartitionSize, r.sm.smCoscheduledAlignment = SM_PARTITION_MIN, SM_PARTITION_ALIGN
        elif kind == _real_driver.CUdevResourceType.CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG:
            r.wqConfig.device = int(device)
            r.wqConfig.sharingScope = _real_driver.CUdevWorkqueueConfigScope.CU_WORKQUEUE_SCOPE_DEVICE_CTX
            r.wqConfig.wqConcurrencyLimit = WORKQUEUE_CONCURRENCY
        else:
            return CUresult.CUDA_ERROR_INVALID_RESOURCE_TYPE, None
        return OK, r

    @staticmethod
    def cuDevSmResourceSplitByCount(nb_groups, input_, flags, min_count):
        """Groups of ``min_count`` SMs rounded up to the partition step (at least the minimum
        partition), as many as fit and were asked for; the rest is the remainder."""
        if input_.type != _real_driver.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM:
            return CUresult.CUDA_ERROR_INVALID_RESOURCE_TYPE, [], 0, None
        total, min_count = int(input_.sm.smCount), int(min_count)
        if min_count > total:
            return CUresult.CUDA_ERROR_INVALID_VALUE, [], 0, None
        size = max(SM_PARTITION_MIN, -(-min_count // SM_PARTITION_ALIGN) * SM_PARTITION_ALIGN)
        made = min(int(nb_groups), total // size)
        groups = []
        for _ in range(made):
            g = _real_driver.CUdevResource()
            g.type = input_.type
            g.sm.smCount, g.sm.minSmPartitionSize, g.sm.smCoscheduledAlignment = size, SM_PARTITION_MIN, \
                SM_PARTITION_ALIGN
            groups.append(g)
        remainder = _real_driver.CUdevResource()
        remainder.type = input_.type
        remainder.sm.smCount = total - made * size
        return OK, groups, made, remainder

    @staticmethod
    def cuDevResourceGenerateDesc(resources, nb_resources):
        sm = workqueue = None
        for r in list(resources)[:int(nb_resources)]:
            if r.type == _real_driver.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM:
                if sm is not None:
                    return CUresult.CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, None
                sm = int(r.sm.smCount)
            elif r.type == _real_driver.CUdevResourceType.CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG:
                workqueue = (r.wqConfig.sharingScope, int(r.wqConfig.wqConcurrencyLimit))
            else:
                return CUresult.CUDA_ERROR_INVALID_RESOURCE_TYPE, None
        if sm == 0:  # an empty SM group cannot run anything
            return CUresult.CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, None
        handle = next(_green_handles)
        _descs[handle] = (sm, workqueue)
        return OK, _real_driver.CUdevResourceDesc(handle)

    @staticmethod
    def cuGreenCtxCreate(desc, device, flags):
        if not int(flags) & int(_real_driver.CUgreenCtxCreate_flags.CU_GREEN_CTX_DEFAULT_STREAM):
            return CUresult.CUDA_ERROR_INVALID_VALUE, None
        spec = _descs.get(int(desc))
        if spec is None:
            return CUresult.CUDA_ERROR_INVALID_HANDLE, None
        if not 0 <= int(device) < DEVICES:
            return CUresult.CUDA_ERROR_INVALID_DEVICE, None
        handle = next(_green_handles)
        sm, workqueue = spec
        _green[handle] = _GreenCtx(handle, int(device), SM_COUNT if sm is None else sm, workqueue)
        return OK, _real_driver.CUgreenCtx(handle)

    @staticmethod
    def cuCtxFromGreenCtx(green):
        if int(green) not in _green:
            return CUresult.CUDA_ERROR_INVALID_HANDLE, None
        return OK, _real_driver.CUcontext(int(green))

    @staticmethod
    def cuGreenCtxStreamCreate(green, flags, priority):
        """A stream whose work runs on the green context's SMs: a stream of its device, like any other."""
        g = _green.get(int(green))
        if g is None:
            return CUresult.CUDA_ERROR_INVALID_HANDLE, None
        with _lock:
            s = _new_stream(g.device, next(_handles))
            s.green = g
        return OK, _real_driver.CUstream(s.handle)

    @staticmethod
    def cuGreenCtxDestroy(green):
        g = _green.get(int(green))
        if g is None:
            return (CUresult.CUDA_ERROR_INVALID_HANDLE,)
        if g.handle in _ctx_stack():
            return (CUresult.CUDA_ERROR_CONTEXT_IS_DESTROYED,)
        del _green[g.handle]
        return (OK,)

    @staticmethod
    def cuCtxPushCurrent(ctx):
        g = _green.get(int(ctx))
        if g is None:
            return (CUresult.CUDA_ERROR_INVALID_CONTEXT,)
        _ctx_stack().append((g.handle, _current_device()))
        _local.device = g.device
        return (OK,)

    @staticmethod
    def cuCtxPopCurrent():
        stack = _ctx_stack()
        if not stack:
            return CUresult.CUDA_ERROR_INVALID_CONTEXT, None
        handle, previous = stack.pop()
        _local.device = previous
        return OK, _real_driver.CUcontext(handle)


class _Driver(_GreenDriver):
    """``cuda.bindings.driver`` as the GPU path uses it: the real enums, simulated calls."""

    CUresult = CUresult
    CUstreamCaptureMode = _real_driver.CUstreamCaptureMode
    CUmemPool_attribute = _real_driver.CUmemPool_attribute
    cuuint64_t = _real_driver.cuuint64_t

    _MODES = {_real_driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL: "global",
              _real_driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: "thread_local",
              _real_driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED: "relaxed"}

    @staticmethod
    def cuInit(flags):
        return (OK,)

    @staticmethod
    def cuDeviceGetCount():
        return OK, DEVICES

    @staticmethod
    def cuDeviceTotalMem(device_id):
        return OK, MEMORY

    @staticmethod
    def cuMemGetInfo():
        """Free and total bytes of the current device: its capacity less what is allocated on it
        (the stream-ordered pool's blocks and cuMemAlloc's), as the driver counts them."""
        with _lock:
            _check_sticky()
            device = _current_device()
            return OK, MEMORY - space.used[device], MEMORY

    @staticmethod
    def cuMemPoolSetAttribute(pool, attr, value):
        return (OK,)

    @staticmethod
    def cuMemPoolTrimTo(pool, nbytes):
        return (OK,)

    @staticmethod
    def cuEventElapsedTime(start, end):
        a, b = _events.get(int(start)), _events.get(int(end))
        if a is None or b is None or a.time is None or b.time is None:
            return CUresult.CUDA_ERROR_NOT_READY, 0.0
        return OK, (b.time - a.time) * 1e3

    @classmethod
    def cuThreadExchangeStreamCaptureMode(cls, mode):
        previous = getattr(_local, "capture_mode", "global")
        _local.capture_mode = cls._MODES[mode]
        back = {v: k for k, v in cls._MODES.items()}
        return OK, back[previous]

    @staticmethod
    def cuMemAlloc(nbytes):
        with _lock:
            counts["alloc"] += 1
            _check_sticky()
            _unsafe_during_capture("cuMemAlloc")
            try:
                a = space.allocate(_current_device(), int(nbytes), "cuMemAlloc")
            except SimError as e:
                return e.code, 0
            _raw[a.start] = a
            return OK, a.start

    @staticmethod
    def cuMemFree(ptr):
        with _lock:
            counts["free"] += 1
            _check_sticky()
            _unsafe_during_capture("cuMemFree")
            a = _raw.pop(int(ptr), None)
            if a is None:
                return (CUresult.CUDA_ERROR_INVALID_VALUE,)
            _sync_device(a.device, "cuMemFree")  # cuMemFree waits for the device
            space.release(a)
            return (OK,)

    @staticmethod
    def cuMemcpyHtoDAsync(dst, src, nbytes, stream):
        return _host_copy("htod", int(dst), int(src), int(nbytes), stream)

    @staticmethod
    def cuMemcpyDtoHAsync(dst, src, nbytes, stream):
        return _host_copy("dtoh", int(dst), int(src), int(nbytes), stream)

    @staticmethod
    def cuMemcpyDtoDAsync(dst, src, nbytes, stream):
        with _lock:
            counts["dtod"] += 1
            _check_sticky()
            dst, src, nbytes = int(dst), int(src), int(nbytes)

            def copy():
                ctypes.memmove(space.host_address(dst, nbytes, "cuMemcpyDtoDAsync: destination"),
                               space.host_address(src, nbytes, "cuMemcpyDtoDAsync: source"), nbytes)
            _stream_of(stream).enqueue(copy)
            return (OK,)

    @staticmethod
    def cuMemsetD8Async(dst, value, nbytes, stream):
        with _lock:
            counts["memset"] += 1
            _check_sticky()
            _stream_of(stream).enqueue(_memset(int(dst), int(value), int(nbytes), "cuMemsetD8Async"))
            return (OK,)

    @staticmethod
    def cuCtxGetCurrent():
        stack = getattr(_local, "ctx_stack", None)
        if stack:  # a pushed green context
            return OK, stack[-1][0]
        return OK, (1 + _current_device()) if Device._made else 0

    @staticmethod
    def cuCtxSynchronize():
        try:
            with _lock:
                _sync_device(_current_device(), "cuCtxSynchronize")
        except SimError as e:
            return (e.code,)
        return (OK,)


def _host_copy(kind: str, dst: int, src: int, nbytes: int, stream):
    """A copy between host memory and the device ("htod" or "dtoh"), queued on ``stream``: its host
    side must be no device address, and only a host-to-device copy from pinned memory may be
    recorded into a graph."""
    name = "cuMemcpyHtoDAsync" if kind == "htod" else "cuMemcpyDtoHAsync"
    host, device = (src, dst) if kind == "htod" else (dst, src)
    with _lock:
        counts[kind] += 1
        _check_sticky()
        s = _stream_of(stream)
        _host_side(host, nbytes, name)
        # A capture records a host-to-device copy from pinned memory as a node (each replay copies
        # those bytes again); pageable memory and device-to-host copies it refuses.
        if s.capture is not None and not (kind == "htod" and _is_pinned(host, nbytes)):
            _unsafe_during_capture("a host-to-device copy" if kind == "htod" else "a device-to-host copy", s)

        def copy():
            on_device = space.host_address(device, nbytes, name)  # checked when it runs: the bytes live then
            if kind == "htod":
                ctypes.memmove(on_device, host, nbytes)
            else:
                ctypes.memmove(host, on_device, nbytes)
        s.enqueue(copy)
        return (OK,)


def _memset(dst: int, value: int, nbytes: int, what: str):
    def fill():
        ctypes.memset(space.host_address(dst, nbytes, what), value, nbytes)
    return fill


driver = _Driver()
_raw: dict = {}  # cuMemAlloc'd address -> allocation


class _Bookkeeping:
    """A queued change of the simulator's own records (not device work): kept by clear_error."""

    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __call__(self) -> None:
        self.fn()


def _block_record(ptr: int, stream, change) -> None:
    """Queue ``change(allocation)`` on ``stream`` (a tritensor Stream or cuda.core's, of the
    simulator's; tests may drive the allocator with fakes, which are ignored) for the allocation
    that starts at ``ptr``."""
    s = getattr(getattr(stream, "_cu", stream), "_s", None)
    if s is None:
        return
    with _lock:
        a = space.find(ptr)
        if a is None or a.start != ptr:
            return

        def apply():
            change(a)
            space.changed()
        s.enqueue(_Bookkeeping(apply))


def block_lent(ptr: int, nbytes: int, stream: CoreStream) -> None:
    """The caching allocator handed the block at ``ptr`` to a tensor of ``nbytes``: from this point
    of its stream on, accesses past those bytes fault. (Not a driver call: not counted.)"""
    if HOST_ONLY:  # first: the host-cost figures count no call of the simulator's own bookkeeping
        return

    def lend(a):
        a.tensor, a.cached, a.end = nbytes, False, a.start + nbytes
    _block_record(ptr, stream, lend)


def block_returned(ptr: int, size: int, stream: CoreStream) -> None:
    """The block at ``ptr`` went back into the allocator's cache: from this point of its stream on
    it holds poison (strict mode: any access faults)."""
    if HOST_ONLY:
        return

    def retire(a):
        if a.host is not None:
            a.host[:] = POISON
        a.tensor, a.cached, a.end = None, True, a.start if STRICT else a.start + a.size
    _block_record(ptr, stream, retire)


def device_count() -> int:
    """The simulated devices (driver.device_count's simulated form)."""
    return DEVICES


_current_stream_handle = None  # tritensor's current stream, as Triton's driver would be told it


def hook_triton_stream(get_stream, get_device, set_device) -> None:
    """Triton's driver is pointed at tritensor's current stream on a GPU; here a user's own
    ``kernel[grid](...)`` launch asks the same function which stream it goes on."""
    global _current_stream_handle
    _current_stream_handle = get_stream


def _user_launch(self, grid):
    """``kernel[grid]`` of an interpreted kernel called by a user (a ``@triton.jit`` kernel of their
    own over tritensor tensors): launched as Triton's JIT launches it on a GPU, on the current
    stream, through :func:`jit_run`, so its accesses are checked and it is ordered like any other
    launch. (tritensor's own launches reach :func:`jit_run` or a compiled kernel directly.)"""
    def launch(*args, **kwargs):
        stream = _current_stream_handle() if _current_stream_handle is not None else 0
        return jit_run(self, grid, args, kwargs, stream)
    return launch


InterpretedFunction.__getitem__ = _user_launch


def launch_hooks():
    """No launch hooks in the simulator (driver.launch_hooks' simulated form)."""
    return None, None
