"""The seam between tritensor's GPU path and the device: what it asks of cuda.core and the CUDA
driver, and the final kernel launch. Nothing else in tritensor imports cuda.core, the driver
bindings or Triton's JIT launcher.

GPU mode binds these names to the real things. The simulated device (``TRITENSOR_DEVICE=sim``)
binds them to ``runtime/sim.py``, which answers the same calls over simulated memory, streams
and graphs and runs kernels in Triton's interpreter. The GPU path above this module (storages,
the caching allocator, streams and events, address tables, the direct launcher, graphs) is the
same code in both, so the simulator tests what a GPU runs. CPU mode has no device: the names are
None and the GPU path refuses before it reaches them (``tritensor.cuda``'s ``_require``).

The names:

* ``Device``, ``StreamOptions``, ``EventOptions``, ``LegacyPinnedMemoryResource``: cuda.core's.
* ``CoreStream``: cuda.core's ``Stream`` class (``tritensor.cuda.ExternalStream`` wraps a handle in one).
* ``driver``: ``cuda.bindings.driver`` (enums and the few ``cu*`` calls cuda.core has no method for, the
  green-context calls of ``tritensor.cuda.GreenContext`` among them).
* ``device_count()``: CUDA devices visible to this process.
* ``kernel_function(kernel)``: the ``JITFunction`` behind a kernel object the direct launcher can
  launch (a JITFunction itself, in GPU mode; the JIT twin of an interpreted kernel in the
  simulator), or None.
* ``jit_run(kernel, grid, args, kwargs, stream)``: ``kernel[grid](*args, **kwargs)`` on ``stream``
  (a raw handle) through Triton's JIT: binds, specialises, compiles on a new key, launches; returns
  the compiled kernel, whose ``run(...)`` is the direct launch.
* ``triton_binder(jit_fn)``: Triton's own binder for a kernel (the direct launcher's check).
* ``launch_hooks()``: Triton's launch enter and exit hooks.
* ``hook_knobs``: the object whose ``launch_enter_hook``/``launch_exit_hook`` attributes hold them
  (Triton's ``knobs.runtime``), read without a call by the per-launch path; None where no hook
  can be registered (the simulator, CPU mode).
* ``hook_triton_stream(get_stream, get_device, set_device)``: point Triton's driver at
  tritensor's current stream and device.
* ``block_lent(ptr, nbytes, stream)``, ``block_returned(ptr, size, stream)``: the caching
  allocator handed a block out for ``nbytes``, or took it back (stream-ordered). None on a GPU,
  where nothing is done; the simulator checks accesses against them and poisons returned blocks.
"""
from __future__ import annotations

from . import mode

if mode.SIM:
    from .sim import (CoreStream, Device, EventOptions, LegacyPinnedMemoryResource, StreamOptions,  # noqa: F401
                      device_count, block_lent, block_returned, driver, hook_triton_stream, jit_run, kernel_function,
                      launch_hooks, triton_binder)

    hook_knobs = None  # the simulator's launches take no Triton hooks
elif mode.GPU:
    from cuda.bindings import driver  # noqa: F401
    from cuda.core import Device, EventOptions, LegacyPinnedMemoryResource, StreamOptions  # noqa: F401
    from cuda.core import Stream as CoreStream  # noqa: F401
    from triton import knobs
    from triton.runtime import driver as _triton_driver
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    block_lent = block_returned = None
    hook_knobs = knobs.runtime

    def device_count() -> int:
        """The CUDA devices visible to this process (what torch.cuda.device_count reports); 0 when there is no
        driver."""
        return mode._cuda_device_count()

    def kernel_function(kernel):
        """The ``JITFunction`` behind ``kernel`` (a JIT function, or an autotuner over one), or None for
        anything else: what the direct launcher can plan."""
        if type(kernel) is JITFunction:
            return kernel
        if type(kernel) is Autotuner and type(kernel.fn) is JITFunction:
            return kernel.fn
        return None

    def jit_run(kernel, grid, args, kwargs, stream):
        """Launch ``kernel[grid](*args, **kwargs)`` through Triton's own JIT launcher, on tritensor's current
        stream (Triton's driver is pointed at it by hook_triton_stream)."""
        return kernel[grid](*args, **kwargs)  # on tritensor's current stream: hook_triton_stream

    def triton_binder(jit_fn):
        """A function that binds a launch's arguments as ``jit_fn`` would, returning their values in parameter
        order (constexprs and defaults filled in)."""
        def bind(args, kwargs) -> list:
            binder = jit_fn.device_caches[_triton_driver.active.get_current_device()][4]
            return list(binder(*args, **kwargs)[0].values())

        return bind

    def launch_hooks():
        """Triton's launch enter/exit hooks, each None unless something is registered, so a launch without
        hooks skips building their metadata."""
        # Triton 3.9's hooks are HookChains, never None: handed to the launcher as they are, every
        # launch would build its metadata and call an empty chain twice. None when nothing is registered.
        enter, exit_ = knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook
        return (enter if enter is not None and getattr(enter, "calls", True) else None,
                exit_ if exit_ is not None and getattr(exit_, "calls", True) else None)

    def hook_triton_stream(get_stream, get_device, set_device) -> None:
        """Point Triton's active driver at tritensor's current stream and device, so a user's own
        ``kernel[grid](...)`` launch is ordered with tritensor's work."""
        active = _triton_driver.active
        active.get_current_stream = get_stream
        active.get_current_device = get_device
        active.set_current_device = set_device
else:
    CoreStream = Device = EventOptions = LegacyPinnedMemoryResource = StreamOptions = driver = None
    block_lent = block_returned = jit_run = kernel_function = triton_binder = launch_hooks = hook_triton_stream = None
    hook_knobs = None

    def device_count() -> int:
        """The CUDA devices visible to this process (what torch.cuda.device_count reports); 0 when there is no
        driver."""
        return 0
