"""The one place a Triton kernel is launched, in either execution mode.

:func:`launch` knows nothing of ``Tensor``: an argument is a *kernel buffer* when its type
offers the buffer protocol below, and is passed to the kernel as a pointer; anything else
(ints, floats, tuples, dtypes) goes to Triton unchanged.

CPU mode: Triton's interpreter runs the kernel on host memory: a buffer whose ``data_ptr()`` and
``dtype`` are its own (a Tensor) as it is, any other through a :class:`HostArg`
(``runtime/interpreter.py``, which applies tritensor's fix-ups to the interpreter: those of
``interpreter_gpu.py``, which make it compute what a GPU computes, and ``interpreter_speed.py``).
The interpreter keeps global state and is not thread-safe, so launches are serialised by a lock.

GPU mode: kernels compile for the device and go on ``tritensor.cuda.current_stream()``:
Triton's ``driver.active.get_current_stream`` is pointed at it once. The common launch (device
tensors of the current device, numbers, no capture under way) is one loop that turns each tensor
into its address and builds the launch's signature beside it, then the kernel's cached plan
(``runtime/direct.py``); anything else (host buffers to stage, address tables, descriptors,
another device's tensors, a capture's checks) takes the general conversion below. A host buffer handed to a
kernel in GPU mode is staged through a temporary device buffer and copied back, so ops on CPU
tensors still work (slowly, like any host<->device round trip).

Multi-tensor kernels (GradScaler's unscale, clip_grad_norm_, the optimizers' step counts) read
the addresses of many buffers from a table: an :class:`AddressTable` argument. Its addresses are
taken here, from each buffer as the kernel will see it (staged like any host buffer in GPU
mode), so a host address never reaches a device kernel; the device copy of a table is cached
by its bytes, so a training step with a stable parameter list copies no table after its first.
A table used while a CUDA graph is captured is also held by the graph (``memory.Capture.keep``):
the graph bakes in its address, and the cache may evict it, freeing its block for reuse, while
the graph still reads it at every replay.
"""
from __future__ import annotations

import collections
import dataclasses
import operator
import threading

import numpy as np

from . import cuda, interpreter, interpreter_gpu, interpreter_speed, launch_log, memory, mode  # noqa: F401 (the fix-up modules register themselves)
from . import direct
from . import driver as drv
from . import dtype as dt
from .device import device
from .interpreter import HostArg
from triton.tools.tensor_descriptor import TensorDescriptor  # after .mode: it chose the interpreter or not

if mode.INTERPRET:  # CPU mode, and the simulated device: kernels run in the interpreter
    interpreter.apply_fixups()
    HEAP_PAD_KEPT = interpreter.keep_heap_pad()

_interp_lock = threading.Lock()
_hooked = False


_DevArg = direct.Pointer  # a kernel buffer in device memory (its own, or a host buffer staged to the GPU)


class AddressTable:
    """An int64 table of buffer addresses for a multi-tensor kernel, filled in at launch.

    ``AddressTable(buffers, block)``: a row of three int64 per ``block`` elements of each buffer,
    (address of the buffer's element 0, the block's start, the buffer's element count): a program
    per row. ``block=None``: one int64 per buffer, its address. Buffers are kernel buffers (see
    :func:`launch`), contiguous; a launch converts each as it converts any argument, so the table
    holds host addresses in CPU mode and device addresses (host buffers staged) in GPU mode.
    """

    __slots__ = ("buffers", "block", "_sizes")

    def __init__(self, buffers, block: int | None = None):
        self.buffers, self.block = list(buffers), block
        self._sizes = []
        for i, b in enumerate(self.buffers):
            _st, _off, shape, strides, _dt = type(b).__kernel_buffer__(b)
            n = 1
            for d in shape:
                n *= d
            expect, contiguous = 1, True
            for d, st in zip(reversed(shape), reversed(strides)):
                contiguous &= d == 1 or st == expect
                expect *= d
            if not contiguous:
                raise ValueError(f"AddressTable: buffers[{i}] is not contiguous (shape {tuple(shape)}, "
                                 f"strides {tuple(strides)}): a table names flat buffers")
            self._sizes.append(n)

    def __len__(self) -> int:
        """Rows: programs of ``block`` elements (or buffers, without a block)."""
        if self.block is None:
            return len(self.buffers)
        return sum(-(-n // self.block) for n in self._sizes)

    def entries(self, addresses) -> np.ndarray:
        """The table's int64 values given each buffer's address as the kernel sees it. Built by
        NumPy: a model's parameters make tens of thousands of rows, one per block."""
        if self.block is None:
            return np.asarray(addresses, dtype=np.int64)
        sizes = np.asarray(self._sizes, dtype=np.int64)
        counts = -(-sizes // self.block)
        total = int(counts.sum())
        first = np.repeat(np.cumsum(counts) - counts, counts)  # each row's buffer's first row
        rows = np.empty((total, 3), dtype=np.int64)
        rows[:, 0] = np.repeat(np.asarray(addresses, dtype=np.int64), counts)
        rows[:, 1] = (np.arange(total, dtype=np.int64) - first) * self.block
        rows[:, 2] = np.repeat(sizes, counts)
        return rows.reshape(-1)

    def key(self, addresses) -> tuple:
        """What the table's values depend on, short: the device cache looks a table up by it
        without building the values."""
        return (self.block, tuple(addresses), tuple(self._sizes))


def _host_table(table: AddressTable) -> HostArg:
    """CPU mode: the table in host memory, over the buffers' host addresses."""
    values = table.entries([_with_base(b, _host_arg).data_ptr() for b in table.buffers])
    st = memory.HostStorage(values.nbytes)
    st.bytes_view()[...] = values.view(np.uint8)
    return HostArg(st, dt.int64, 0, values.shape, (1,))


_TABLES_KEPT = 64  # device tables cached per process (a few hundred bytes each)
_device_tables: collections.OrderedDict = collections.OrderedDict()  # (device index, bytes) -> CudaStorage
_tables_lock = threading.Lock()


def _device_table(table: AddressTable, addresses, stream):
    """GPU mode: device memory holding ``table``'s values over ``addresses``; the same buffers give
    the same (cached) storage, so a stable parameter list pays one host-to-device copy, at its
    first step, and later steps build no values (looked up by :meth:`AddressTable.key`).

    A table first seen while ``stream`` captures a graph (the gradients of a step whose
    ``zero_grad(set_to_none=True)`` lets backward allocate them from the graph's pool) is copied
    by a node of the graph, from pinned bytes the graph keeps (``memory.captured_host_to_device``),
    into memory of the graph's pool: it is in place from the first replay on. It is not cached for
    eager launches, whose work would read it before any replay wrote it."""
    dev = _default_cuda()
    key = (dev.index, table.key(addresses))
    graph = memory.capturing.get(id(stream)) if memory.capturing else None
    with _tables_lock:
        st = _device_tables.get(key)
        if st is not None:
            _device_tables.move_to_end(key)
    if st is None and graph is not None:
        st = graph.tables.get(key)
        if st is None:
            values = table.entries(addresses)
            st = graph.tables[key] = memory.CudaStorage(values.nbytes, dev, stream)
            memory.captured_host_to_device(
                st.data_ptr(), values.view(np.uint8), stream, graph, "the address table of a multi-tensor kernel "
                "(GradScaler's unscale, clip_grad_norm_, the optimizers' step counts)")
    elif st is None:
        values = table.entries(addresses)
        st = memory.CudaStorage(values.nbytes, dev, stream)
        # Not waited for: a step whose gradients moved makes a new table every time, and a wait
        # would drain the GPU's queue at each such step.
        memory.host_to_device_async(st.data_ptr(), values.view(np.uint8), stream)
        with _tables_lock:
            _device_tables[key] = st
            while len(_device_tables) > _TABLES_KEPT:
                _device_tables.popitem(last=False)
            held = sum((t.nbytes + 15) & -16 for t in _device_tables.values())  # as captured copies round
        # A capture of the step that uses these tables may meet new ones of the same sizes (new
        # gradients): pinned bytes for their copies are set aside now, outside it.
        memory.reserve_captured_copies(held)
    st.record_stream(stream)
    if graph is not None:  # the graph replays this address: it keeps the table, whatever the cache evicts
        graph.keep.append(st)
    return _DevArg(st.data_ptr(), dt.int64)


def _hook_triton_stream() -> None:
    global _hooked
    drv.hook_triton_stream(lambda device=None: cuda.current_stream(device).cuda_stream, cuda.current_device,
                           cuda.set_device)
    _hooked = True


class Site:
    """One call site of a kernel: the kernel and its keyword arguments (constexprs, options), fixed.

    ``launch(site, grid, *args)`` launches ``site.kernel[grid](*args, **site.kwargs)``. A launcher
    that calls the same kernel with the same keywords again and again (elementwise's ``add`` in
    float32) keeps one Site for them: the plans it has met are kept here, looked up by the device
    and the arguments' signature alone, so a launch neither rebuilds nor hashes the keywords (a
    ``tl.dtype`` among them hashes through a Python call). The plans are the kernel's own
    (``runtime/direct.py: DirectLauncher.plans``), shared: a site only finds them faster."""

    __slots__ = ("kernel", "kwargs", "plans", "_names")

    def __init__(self, kernel, **kwargs):
        self.kernel, self.kwargs = kernel, kwargs
        self._names = (tuple(kwargs), *kwargs.values())  # the keywords' part of the kernel's plan key
        hash(self._names)  # an unhashable keyword fails here, not at a launch
        self.plans: dict = {}  # (device index, *signature) -> direct.Plan

    def __repr__(self) -> str:
        return f"Site({_kernel_name(self.kernel)}, {self.kwargs})"


def launch(kernel, grid, *args, **kwargs) -> None:
    """Run ``kernel[grid](*args, **kwargs)``; kernel-buffer arguments are passed by pointer.
    ``kernel`` may be a :class:`Site` (and then no keyword arguments: the site's are used).

    The kernel-buffer protocol: a positional argument whose type defines
    ``__kernel_buffer__()`` returning ``(storage, offset, shape, strides, dtype)``:

    * ``storage``: the memory. ``data_ptr()`` is the address of its first byte, ``nbytes`` its
      size and ``device.type`` is ``"cpu"`` (host memory) or ``"cuda"``. Host storages also
      offer ``bytes_view()`` (a writable uint8 NumPy array over all of it: GPU mode stages
      through it); device storages offer ``record_stream(stream)``.
    * ``offset``: where element 0 is, in elements of ``dtype`` from the storage's start.
    * ``shape``, ``strides``: tuples of ints, strides in elements (kernels get the layout they
      index by as explicit arguments; these describe the buffer to Triton's interpreter).
    * ``dtype``: ``itemsize`` in bytes, and ``str(dtype)`` ends in the element type's canonical
      name (``float32``, ``bfloat16`` ...), from which Triton derives the pointer type.

    A type may also name, in a class attribute ``__kernel_pointer__``, the three attributes holding
    its storage, offset and dtype (Tensor does): the GPU path then reads them without a call.

    A ``triton.tools.tensor_descriptor.TensorDescriptor`` (a TMA descriptor) whose ``base`` is a
    kernel buffer is passed with its base converted the same way. Other arguments (numbers,
    tuples, dtypes) and every keyword argument go to Triton as given.
    """
    site = None
    if type(kernel) is Site:
        site = kernel
        kernel, kwargs = site.kernel, site.kwargs
    if mode.CPU:
        conv = _convert(args, _host_arg, _host_table)
        for a in conv:
            if getattr(a, "dtype", None) in _NO_KERNEL_DTYPES:
                _refuse_dtype(kernel, a.dtype)
        if launch_log.PATH:  # TRITENSOR_RECORD_LAUNCHES: note it for tools/sm90_compile.py
            launch_log.record(kernel, conv, kwargs)
        _final(kernel, grid, conv, kwargs, None)
        return

    if not _hooked:
        _hook_triton_stream()
    try:
        # The current stream, known (cuda.current_stream's own first read, without its call), or asked.
        stream = getattr(_cuda_local, "current", None) or cuda.current_stream()
        if _final is triton_launch and direct.ENABLED and not memory.capturing:
            fast = _launchers.get(id(kernel)) or direct.launcher_for(kernel)
            if fast is not None and not fast.off:
                # The common case (every buffer a device tensor of the stream's device, the other
                # arguments numbers, None or tuples): the arguments converted and the launch's
                # signature built in one loop, then the kernel's plan (``runtime/direct.py``), all
                # in this frame: each Python call here would be paid at every launch.
                index = stream.device.index
                # Most arguments (ints, tuples of ints, None) are passed as they are and are their
                # own part of the signature: both lists start as the arguments, and only the others
                # are replaced.
                values, signature = list(args), list(args)
                for i, a in enumerate(args):
                    t = type(a)
                    if t is int or t is tuple or a is None:
                        continue
                    if t is float:
                        signature[i] = float  # Triton specialises a float by its type only
                    elif t is bool:
                        signature[i] = (bool, a)  # not a bare True: True == 1
                    else:
                        fields = _pointer_fields.get(t, _convert)
                        if fields is _convert:  # a type not seen before
                            fields = _pointer_fields[t] = _pointer_fields_of(t)
                        if fields is None:
                            break
                        st, offset, dtype = fields(a)
                        if type(st) is not _CudaStorage:
                            break  # host memory to stage
                        if st._block.stream is not stream:  # (a block of this stream is of its device)
                            if st.device.index != index:
                                break  # another device's
                            st.record_stream(stream)
                        p = values[i] = st._ptr + offset * dtype.itemsize
                        signature[i] = (_pointer_keys.get(dtype) or _first_pointer_keys(kernel, dtype))[p & 15 == 0]
                else:
                    if site is not None:
                        plan = site.plans.get((index, *signature))
                        if plan is None:  # not met at this site: the kernel's plan, or the checked way
                            _site_miss(site, fast, grid, values, signature, stream, index)
                            return
                    else:
                        key = (index, tuple(kwargs), *kwargs.values(), *signature)  # direct.plan_key's layout
                        try:
                            plan = fast.plans.get(key)
                        except TypeError:  # an unhashable keyword argument: the checked way decides
                            plan = None
                        if plan is None:  # a signature not seen: checked through Triton, then planned
                            fast.launch_converted(grid, values, signature, kwargs, stream.cuda_stream, index)
                            return
                    if callable(grid):
                        grid = grid(dict(zip(fast.names, [*values, *plan.tail])))
                    # Triton's launch hooks: None unless a profiler registered one (read, not called).
                    hk = _hook_knobs
                    enter = exit_ = None
                    if hk is not None:
                        enter, exit_ = hk.launch_enter_hook, hk.launch_exit_hook
                        if enter is not None and not getattr(enter, "calls", True):
                            enter = None
                        if exit_ is not None and not getattr(exit_, "calls", True):
                            exit_ = None
                    meta = None if enter is None else plan.compiled.launch_metadata(grid, stream.cuda_stream, *values,
                                                                                    *plan.tail)
                    n = len(grid)
                    plan.run(grid[0], grid[1] if n > 1 else 1, grid[2] if n > 2 else 1, stream.cuda_stream,
                             plan.function, plan.metadata, meta, enter, exit_, *values, *plan.tail)
                    return
        _device_launch(kernel, grid, args, kwargs, stream)
    except _OtherDevice as e:
        # The tensors are on another device than the current one (x on cuda:1, no set_device(1)):
        # the kernel runs on their device's current stream, where their memory is ordered, with
        # that device current while it launches (its context, Triton's compile, host staging),
        # as torch's ops do under a device guard.
        prev = cuda.current_device()
        cuda.set_device(e.index)
        try:
            _device_launch(kernel, grid, args, kwargs, cuda.current_stream())
        finally:
            cuda.set_device(prev)


def _site_miss(site: Site, fast, grid, values, signature, stream, index: int) -> None:
    """A signature a site has not met: launched as :func:`launch` launches without a site (the
    kernel's plan if it has one, else the checked way, which makes one once the key is trusted),
    then that plan kept at the site. The kernel's plans and the site's are the same objects, and a
    kernel whose launcher gave up (``fast.off``, checked before any site lookup) runs no plan."""
    fast.launch_converted(grid, values, signature, site.kwargs, stream.cuda_stream, index)
    plan = fast.plans.get((index, *site._names, *signature))
    if plan is not None:
        if len(site.plans) >= direct._PLANS_KEPT:
            site.plans.clear()
        site.plans[(index, *signature)] = plan


class _OtherDevice(Exception):
    """A launch's device buffers are on device ``index``, not on the current device."""

    def __init__(self, index: int):
        self.index = index


def _pointer_fields_of(t):
    """How to read a kernel buffer type's storage, offset and dtype: an ``attrgetter`` of the
    attributes its ``__kernel_pointer__`` names (no Python call per argument), else through
    ``__kernel_buffer__``; None for a type that is no kernel buffer."""
    names = getattr(t, "__kernel_pointer__", None)
    if names is not None:
        return operator.attrgetter(*names)
    buffer = getattr(t, "__kernel_buffer__", None)
    if buffer is None:
        return None

    def fields(a):
        st, offset, _shape, _strides, dtype = buffer(a)
        return st, offset, dtype
    return fields


_pointer_fields: dict = {}  # argument type -> its storage, offset and dtype (None: not a kernel buffer)
_CudaStorage = memory.CudaStorage
_cuda_local = cuda._local  # per thread: ``current``, the current device's current stream once asked
_pointer_keys = direct._pointer_keys
_launchers = direct._launchers
_hook_knobs = drv.hook_knobs  # where Triton's launch hooks are registered (None: nowhere)


def _device_launch(kernel, grid, args, kwargs, stream) -> None:
    """GPU mode: convert the arguments and launch on ``stream`` (the current device's current
    stream; :class:`_OtherDevice` before anything is queued when a buffer is on another device)."""
    staged: dict[int, tuple] = {}  # id(host storage) -> (host storage, device storage)
    index = stream.device.index

    def dev_arg(a, buffer):
        st, offset, _shape, _strides, dtype = buffer(a)
        if dtype in _NO_KERNEL_DTYPES:
            _refuse_dtype(kernel, dtype)
        if st.device.type == "cuda" and st.device.index != index:
            raise _OtherDevice(st.device.index)
        if st.device.type == "cpu":
            if memory.capturing:
                memory.refuse_while_capturing(
                    stream, f"{_kernel_name(kernel)}: a host (CPU) tensor argument",
                    "it is staged through host memory at every launch; move it to the GPU first")
            if id(st) not in staged:
                dst = memory.CudaStorage(st.nbytes, _default_cuda(), stream)
                memory.host_to_device(dst.data_ptr(), st.bytes_view(), stream)
                staged[id(st)] = (st, dst)
            return _DevArg(staged[id(st)][1].data_ptr() + offset * dtype.itemsize, dtype)
        st.record_stream(stream)
        return _DevArg(st.data_ptr() + offset * dtype.itemsize, dtype)

    def dev_table(a):
        return _device_table(a, [_with_base(b, dev_arg).data_ptr() for b in a.buffers], stream)

    conv = _convert(args, dev_arg, dev_table)
    _final(kernel, grid, conv, kwargs, stream)
    for host, dev in staged.values():
        memory.device_to_host(host.bytes_view(), dev.data_ptr(), stream)


def triton_launch(kernel, grid, args, kwargs, stream) -> None:
    """The last step of every launch: the kernel runs on the converted arguments.

    GPU mode: on ``stream``, through its direct launcher (``runtime/direct.py``) where it has one.
    CPU mode: Triton's interpreter, one launch at a time (it is not thread-safe); masked-off lanes
    still compute there (log of padding ...), so NumPy's warnings are silenced."""
    if mode.CPU:
        with _interp_lock, np.errstate(all="ignore"):
            kernel[grid](*args, **kwargs)
        return
    fast = direct.launcher_for(kernel) if direct.ENABLED else None
    if memory.capturing:
        _refuse_what_capture_cannot_record(kernel, args, kwargs, stream, fast)
    if fast is None:
        drv.jit_run(kernel, grid, args, kwargs, stream.cuda_stream)
    else:
        fast.launch(grid, args, kwargs, stream.cuda_stream, stream.device.index)


def _refuse_what_capture_cannot_record(kernel, args, kwargs, stream, fast) -> None:
    """During a capture: an autotuned kernel meeting a new shape would time its configurations,
    and a launch key never seen on this device would make Triton compile the kernel and load its
    module (a driver call that invalidates the capture). Both are refused before they start. The
    launch key is at least as fine as Triton's specialisation, so a new key may, rarely, find a
    compiled kernel; warming up with the shapes the graph will see avoids both."""
    if direct.needs_autotuning(kernel, args, kwargs):
        memory.refuse_while_capturing(stream, f"autotuning {_kernel_name(kernel)} for a new shape",
                                      "it times every configuration and waits for each on the host")
    if fast is not None and fast.first_launch(args, kwargs, stream.device.index):
        memory.refuse_while_capturing(stream, f"the first launch of {_kernel_name(kernel)} with these argument "
                                      f"types on {stream.device}", "Triton compiles the kernel and loads its module, "
                                      "which the driver does not allow during a capture")


_final = triton_launch  # ``bench launch --host-only`` swaps in a no-op to time everything before it


def _host_arg(a, buffer):
    """CPU mode: ``a`` as the interpreter takes it. A buffer type that already speaks the
    interpreter's language (its ``data_ptr()`` and ``dtype`` are the buffer's: Tensor's are) goes
    as it is, its memory being host memory in CPU mode; any other is wrapped in a HostArg."""
    t = type(a)
    ready = _interp_ready.get(t)
    if ready is None:
        ready = _interp_ready[t] = _speaks_interpreter(a, buffer)
        if ready:
            interpreter.HOST_TYPES.add(t)
    if ready and _fixups_installed["skip_host_copies"]:  # the stock interpreter would copy it through torch's API
        return a
    storage, offset, shape, strides, dtype = buffer(a)
    return HostArg(storage, dtype, offset, shape, strides)


_interp_ready: dict = {}  # buffer type -> passed to the interpreter as it is (see _host_arg)
_fixups_installed = interpreter.installed


def _speaks_interpreter(a, buffer) -> bool:
    """Does ``a``'s type report the address and element type its buffer describes?"""
    storage, offset, _shape, _strides, dtype = buffer(a)
    try:
        return a.data_ptr() == storage.data_ptr() + offset * dtype.itemsize and a.dtype is dtype
    except AttributeError:
        return False


_PLAIN = frozenset((int, float, bool, tuple, str, type(None)))  # passed to Triton as they are
_buffer_of: dict = {}  # argument type -> its __kernel_buffer__ (None: not a kernel buffer)


def _convert(args, convert, table) -> list:
    """Every argument as the kernel receives it (see :func:`_with_base`; ``table`` converts an
    AddressTable). One flat loop over the arguments: this runs at every launch."""
    out = []
    append = out.append
    for a in args:
        t = type(a)
        if t in _PLAIN:
            append(a)
            continue
        buffer = _buffer_of.get(t, _convert)
        if buffer is _convert:  # a type not seen before
            buffer = _buffer_of[t] = getattr(t, "__kernel_buffer__", None)
        if buffer is not None:
            append(convert(a, buffer))
        elif t is AddressTable:
            append(table(a))
        else:
            append(_with_base(a, convert))  # a TMA descriptor, or passed as it is
    return out


def _with_base(a, convert):
    """``a`` as the kernel receives it: ``convert(a, buffer)`` for a kernel buffer, a descriptor
    over the converted base for a TensorDescriptor over one, anything else unchanged."""
    t = type(a)
    buffer = _buffer_of.get(t, _with_base)
    if buffer is _with_base:  # a type not seen before
        buffer = _buffer_of[t] = getattr(t, "__kernel_buffer__", None)
    if buffer is not None:
        return convert(a, buffer)
    if t is TensorDescriptor:
        base_buffer = getattr(type(a.base), "__kernel_buffer__", None)
        if base_buffer is not None:
            return dataclasses.replace(a, base=convert(a.base, base_buffer))
    return a


# Element types no kernel reads as such: the float8 formats reach the kernels that handle them as their bytes
# (uint8 views; triton_kernels/float8.py decodes them), so a float8 buffer at any other kernel is an op torch
# has no float8 kernel for either, refused with torch's NotImplementedError before it runs.
_NO_KERNEL_DTYPES = frozenset(dt.FLOAT8)


def _refuse_dtype(kernel, dtype):
    raise NotImplementedError(f"\"{_kernel_name(kernel).lstrip('_')}\" not implemented for '{dtype.type_name}'")


def _first_pointer_keys(kernel, dtype) -> tuple:
    """A dtype's pointer keys on its first launch (then read from ``_pointer_keys``): refused for a float8 dtype."""
    if dtype in _NO_KERNEL_DTYPES:
        _refuse_dtype(kernel, dtype)
    return direct.pointer_keys(dtype)


def _kernel_name(kernel) -> str:
    fn = getattr(kernel, "fn", kernel)
    return getattr(getattr(fn, "fn", fn), "__name__", repr(kernel))


def _default_cuda():
    return device("cuda", cuda.current_device())

