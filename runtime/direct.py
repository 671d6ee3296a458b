"""Direct launch (GPU mode): call a compiled kernel's launcher, not Triton's binder, at every launch.

``kernel[grid](*args)`` costs about 15 us on the host in Triton 3.9 (JITFunction.run: its binder
specialises every argument, builds a string key, checks globals), where the compiled kernel's
own launcher, ``CompiledKernel.run`` with raw ints, costs about 5 us (H100, 2026-11-25). A step
of a thousand launches pays the difference a thousand times.

:class:`DirectLauncher` keeps, per kernel, a map from a cheap *key* of the converted arguments to
the compiled kernel (and, for an autotuned kernel, its chosen configuration), per device: a
compiled kernel is a module loaded on one device, and launching it on another device's stream is
an invalid handle (Triton keeps its compiled kernels per device too). The key is built
from what a launch already has: each pointer's dtype and 16-byte alignment, each int's range
class, its divisibility by 16 and whether it is 1, floats and bools by type, None, tuples item by
item, descriptors by dtype, block shape and geometry, and the keyword arguments (constexprs and
options) by value; an autotuned kernel's ints by value (its configuration may depend on them).
That key is never coarser than Triton's own specialisation (``tests/test_direct_launch.py``
proves it over a battery against Triton's ``native_specialize_impl``), so one key never meets
two compiled kernels.

A key is trusted only after checks on the real thing. Its first launch goes through Triton,
which compiles (and autotunes) as usual and returns the compiled kernel; the launcher then binds
the arguments itself and compares them with Triton's binder's, value for value. Its second
launch goes through Triton too, and must return the very same compiled kernel. From the third
launch on the key runs direct. A kernel whose binding or kernel identity ever disagrees is sent
through Triton for good, with one warning: slower, never wrong.

The per-launch path (:meth:`DirectLauncher.launch_converted`, which ``runtime/launch.py`` takes
for device tensors) does not rebuild that key at every launch. The converted arguments arrive as
the compiled kernel takes them (device pointers as plain ints) with a *signature* built in the
same loop: per pointer a :class:`PointerKey` (one shared object per element type and alignment),
per other argument its value (a float by its type). That signature, the device and the keyword
arguments pick a :class:`Plan`: the ready launch of a trusted key (the compiled kernel, its
launcher, function and metadata, and the constexpr values that follow the arguments). A plan is
made only from an entry that passed both checks, and it is looked up by values at least as fine
as the entry's key, so it changes nothing but the cost: per launch only pointers, sizes and the
stream change. A signature never seen goes the checked way above and then gets its plan.

What cannot run direct goes through Triton as before: an argument kind the key does not know,
a kernel that is neither a JITFunction nor an Autotuner over one, and Triton's launch hooks.
``TRITENSOR_DIRECT_LAUNCH=0`` turns the whole path off.
"""
from __future__ import annotations

import os
import warnings

from triton.tools.tensor_descriptor import TensorDescriptor

from . import driver as drv

ENABLED = os.environ.get("TRITENSOR_DIRECT_LAUNCH", "1").strip() != "0"

_UNKNOWN = object()  # an argument the key cannot describe: the launch goes through Triton
POINTER_TYPES: set = set()  # argument types that are pointers (runtime/launch.py adds its own)
_CHECKS = 2  # launches of a key that go through Triton (and are checked) before it runs direct


class Pointer:
    """A device pointer argument (an address and the element type it points to), as Triton's
    binder and the key's checks want it: ``data_ptr()`` and ``dtype``."""

    __slots__ = ("_ptr", "dtype")

    def __init__(self, ptr, dtype):
        self._ptr, self.dtype = ptr, dtype

    def data_ptr(self) -> int:
        """The raw address, as Triton's launcher asks any tensor-like argument for it."""
        return self._ptr

    def __repr__(self) -> str:
        return f"Pointer({self._ptr:#x}, {self.dtype})"


POINTER_TYPES.add(Pointer)


class PointerKey:
    """A pointer's part of a plan's signature: its element type and whether it is 16-byte aligned
    (what Triton specialises a pointer on). One object per pair (:func:`pointer_keys`), so a
    signature hashes and compares a pointer by identity, with no call."""

    __slots__ = ("dtype", "aligned")

    def __init__(self, dtype, aligned: bool):
        self.dtype, self.aligned = dtype, aligned

    def __repr__(self) -> str:
        return f"PointerKey({self.dtype}, aligned={self.aligned})"


_pointer_keys: dict = {}  # dtype -> (its unaligned PointerKey, its aligned one)


def pointer_keys(dtype) -> tuple:
    """``(unaligned, aligned)``: index it with ``address & 15 == 0``."""
    keys = _pointer_keys.get(dtype)
    if keys is None:
        keys = _pointer_keys[dtype] = (PointerKey(dtype, False), PointerKey(dtype, True))
    return keys


class Plan:
    """The ready launch of one trusted key: what a launch passes besides pointers, sizes and the
    stream."""

    __slots__ = ("run", "function", "metadata", "compiled", "tail")

    def __init__(self, compiled, tail: tuple):
        self.compiled, self.run = compiled, compiled.run
        self.function, self.metadata = compiled.function, compiled.packed_metadata
        self.tail = tail  # the bound values after the positional arguments: keywords, configuration, defaults


_PLANS_KEPT = 4096  # plans per kernel: a workload of ever new sizes starts again rather than grow


def int_key(v: int):
    """What Triton's specialisation can tell apart in an int (value 1, divisibility by 16, i32 /
    i64 / u64 range), as one small int. Finer than Triton's key wherever the two differ."""
    if v == 1:
        return 1
    cls = 0 if -2147483648 <= v < 2147483648 else (1 if -9223372036854775808 <= v < 9223372036854775808 else 2)
    return 2 | ((v & 15) == 0) << 2 | cls << 3


def arg_key(a, exact_ints: bool):
    """The key of one converted argument, or :data:`_UNKNOWN`."""
    t = type(a)
    if t is int:
        return a if exact_ints else int_key(a)
    if t in POINTER_TYPES or (hasattr(a, "data_ptr") and hasattr(a, "dtype")):  # element type and alignment
        return (a.dtype, a.data_ptr() & 15 == 0)
    if t is float:
        return float
    if t is bool:
        return (bool, a)  # not a bare True: True == 1, and 1 is an int's key
    if a is None:
        return None
    if t is tuple:
        parts = tuple(arg_key(x, exact_ints) for x in a)
        return _UNKNOWN if _UNKNOWN in parts else parts
    if t is TensorDescriptor:
        base = a.base
        return (TensorDescriptor, base.dtype, base.data_ptr() & 15 == 0, tuple(a.shape), tuple(a.strides),
                tuple(a.block_shape), a.padding, a.round_f32_to_tf32)
    return _UNKNOWN


def launch_key(args, kwargs, exact_ints: bool):
    """The key of one launch: its arguments' keys and its keyword arguments, or None."""
    key = [arg_key(a, exact_ints) for a in args]
    if _UNKNOWN in key:
        return None
    kw = tuple(kwargs.items())
    try:
        hash(kw)
    except TypeError:  # an unhashable keyword argument
        return None
    key.append(kw)
    return tuple(key)


class _Entry:
    """One key of one kernel: its compiled kernel, configuration and how often it was checked."""

    __slots__ = ("compiled", "config", "seen")

    def __init__(self, compiled, config):
        self.compiled, self.config, self.seen = compiled, config, 1


class DirectLauncher:
    """Direct launches of one kernel (a JITFunction, or an Autotuner over one)."""

    def __init__(self, kernel, jit_fn, autotuned: bool, triton_bind, hooks, jit_run=None):
        """``triton_bind(args, kwargs)``: Triton's binder's values for a call (the check);
        ``hooks()``: Triton's launch enter and exit hooks (None and None unless a profiler set them);
        ``jit_run(kernel, grid, args, kwargs, stream)``: a launch through Triton's JIT, returning the
        compiled kernel (``runtime/driver.py``'s; by default ``kernel[grid](*args, **kwargs)``)."""
        self.kernel, self.jit_fn, self.autotuned = kernel, jit_fn, autotuned
        self.triton_bind, self.hooks = triton_bind, hooks
        self.jit_run = jit_run or _subscript
        params = jit_fn.signature.parameters
        self.names = tuple(params)
        self.defaults = {n: p.default for n, p in params.items() if p.default is not p.empty}
        self.entries: dict = {}  # device index -> {launch key -> _Entry}
        self.plans: dict = {}  # (device index, keyword names, *their values, *signature) -> Plan
        self.off = False  # a check failed: every launch goes through Triton

    def bind(self, args, kwargs) -> list:
        """Every parameter's value in signature order, as Triton's binder gives them."""
        names = self.names
        bound = list(args)
        for name in names[len(bound):]:
            if name in kwargs:
                bound.append(kwargs[name])
            elif name in self.defaults:
                bound.append(self.defaults[name])
            else:
                raise TypeError(f"{self.jit_fn.__name__}() missing required argument: '{name}'")
        return bound

    def launch(self, grid, args, kwargs, stream, device: int = 0) -> None:
        """Launch on ``stream`` (a raw handle of device ``device``), direct when this launch's key
        is trusted on that device; else through Triton, learning the key."""
        key = None if self.off else launch_key(args, kwargs, self.autotuned)
        entries = self.entries.get(device)
        entry = entries.get(key) if key is not None and entries is not None else None
        if entry is not None and entry.seen >= _CHECKS:
            config = entry.config
            if config is not None:
                kwargs = {**kwargs, **config.all_kwargs()}
                if config.pre_hook is not None:
                    config.pre_hook({**dict(zip(self.kernel.arg_names, args)), **kwargs})
            bound = self.bind(args, kwargs)
            if callable(grid):
                grid = grid(dict(zip(self.names, bound)))
            compiled = entry.compiled
            enter, exit_ = self.hooks()
            meta = None if enter is None else compiled.launch_metadata(grid, stream, *bound)
            compiled.run(grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1, stream,
                         compiled.function, compiled.packed_metadata, meta, enter, exit_, *bound)
            return
        compiled = self.jit_run(self.kernel, grid, args, kwargs, stream)
        if key is None or self.off:
            return
        config = self.kernel.best_config if self.autotuned else None
        full = {**kwargs, **config.all_kwargs()} if config is not None else kwargs
        if entry is None:
            mine = self.bind(args, full)
            theirs = self.triton_bind(args, full)
            if len(mine) != len(theirs) or any(m is not t and m != t for m, t in zip(mine, theirs)):
                self._give_up("its arguments bind differently from Triton's binder")
                return
            if entries is None:
                entries = self.entries[device] = {}
            entries[key] = _Entry(compiled, config)
        elif compiled is not entry.compiled or config is not entry.config:
            self._give_up("one launch key met two compiled kernels")
        else:
            entry.seen += 1

    def launch_converted(self, grid, values: list, signature: list, kwargs, stream, device: int = 0) -> None:
        """:meth:`launch` for arguments converted by ``runtime/launch.py``: ``values`` as the compiled
        kernel takes them (device pointers as ints), ``signature`` per argument its
        :class:`PointerKey`, or the value itself (``float`` for a float, ``(bool, v)`` for a bool).

        A plan's key is ``(device, keyword names, *keyword values, *signature)``: the names fix how
        many values follow, so it is as fine as the pairs and builds no tuple per keyword
        (``runtime/launch.py`` looks plans up with the same layout)."""
        key = (device, tuple(kwargs), *kwargs.values(), *signature)
        try:
            plan = self.plans.get(key)
        except TypeError:  # an unhashable keyword argument: Triton's binder decides (see launch_key)
            plan = None
        if plan is not None:
            if callable(grid):
                grid = grid(dict(zip(self.names, [*values, *plan.tail])))
            enter, exit_ = self.hooks()
            meta = None if enter is None else plan.compiled.launch_metadata(grid, stream, *values, *plan.tail)
            n = len(grid)
            plan.run(grid[0], grid[1] if n > 1 else 1, grid[2] if n > 2 else 1, stream, plan.function, plan.metadata,
                     meta, enter, exit_, *values, *plan.tail)
            return
        # Not seen: the checked way, with pointer objects; then the plan, once its key is trusted.
        args = [Pointer(v, k.dtype) if type(k) is PointerKey else v for v, k in zip(values, signature)]
        self.launch(grid, args, kwargs, stream, device)
        if self.off:
            return
        entry = self.entries.get(device, {}).get(launch_key(args, kwargs, self.autotuned))
        if entry is None or entry.seen < _CHECKS:
            return
        config = entry.config
        if config is not None:
            if config.pre_hook is not None:  # it is handed the arguments by name at every launch
                return
            kwargs = {**kwargs, **config.all_kwargs()}
        if len(self.plans) >= _PLANS_KEPT:
            self.plans.clear()
        self.plans[key] = Plan(entry.compiled, tuple(self.bind(values, kwargs)[len(values):]))

    def first_launch(self, args, kwargs, device: int) -> bool:
        """Would this launch be the first of its key on ``device`` (Triton would compile the kernel
        and load its module)? False where the launcher cannot tell (no key, or direct launch off)."""
        if self.off:
            return False
        key = launch_key(args, kwargs, self.autotuned)
        if key is None:
            return False
        entries = self.entries.get(device)
        return entries is None or key not in entries

    def _give_up(self, why: str) -> None:
        self.off = True
        self.entries.clear()
        self.plans.clear()
        warnings.warn(f"tritensor: direct launch of {self.jit_fn.__name__} is off ({why}); it launches "
                      "through Triton's binder from now on (slower, same results)", RuntimeWarning, stacklevel=3)


def _subscript(kernel, grid, args, kwargs, stream):
    return kernel[grid](*args, **kwargs)


def needs_autotuning(kernel, args, kwargs) -> bool:
    """Would launching an autotuned kernel with these arguments time its configurations first?
    (Triton 3.9's Autotuner: its key is its key arguments' values, then every argument's dtype; on
    a new key it prunes its configurations (``prune_configs_by``: ``early_config_prune``,
    ``perf_model``) and times them only if more than one remains, as a pinned run's prune leaves
    one.) Pruning runs only for a key not in the cache: during a capture, not per launch."""
    configs = getattr(kernel, "configs", None)
    cache = getattr(kernel, "cache", None)
    if configs is None or cache is None or len(configs) <= 1:
        return False
    named = {**dict(zip(kernel.arg_names, args)), **kwargs}
    named = {k: v for k, v in named.items() if k in kernel.arg_names}
    key = [named[k] for k in kernel.keys if k in named]
    key += [str(v.dtype) for v in named.values() if hasattr(v, "dtype")]
    if tuple(key) in cache:
        return False
    prune = getattr(kernel, "prune_configs", None)
    if prune is None or not (getattr(kernel, "early_config_prune", None) or getattr(kernel, "perf_model", None)):
        return True
    saved = getattr(kernel, "nargs", None)
    kernel.nargs = dict(zip(kernel.arg_names, args))  # what Autotuner.run sets before it prunes
    try:
        return len(prune(kwargs)) > 1
    finally:
        kernel.nargs = saved


_launchers: dict = {}  # id(kernel object) -> DirectLauncher, or None where none applies


def launcher_for(kernel):
    """The DirectLauncher of a kernel object, or None (not a JITFunction or an Autotuner over one)."""
    found = _launchers.get(id(kernel), _UNKNOWN)
    if found is not _UNKNOWN:
        return found
    made = None
    jit_fn = drv.kernel_function(kernel)
    if jit_fn is not None and not jit_fn.pre_run_hooks:
        made = DirectLauncher(kernel, jit_fn, jit_fn is not kernel and hasattr(kernel, "configs"),
                              drv.triton_binder(jit_fn), drv.launch_hooks, drv.jit_run)
    _launchers[id(kernel)] = made  # kernels are module-level objects: they live as long as the process
    return made
