"""Fix-ups that make Triton's interpreter faster without changing a result (CPU mode).

Registered in ``runtime/interpreter.py`` (which applies them and says why they are safe); each is
checked against the stock interpreter in ``tests/test_interpreter.py``.

* **patch once**: the interpreter rebinds every builtin of ``triton.language`` (found with
  ``inspect.getmembers``) at every launch *and* at every ``@triton.jit`` helper call, and
  restores them after the launch: about half the cost of a small launch.
  :func:`patch_language_once` applies the very same patch (Triton's own ``_patch_lang``) once
  and makes later calls no-ops. Nothing outside a kernel calls ``triton.language`` builtins (they
  only work inside a kernel), and stock Triton already leaves ``triton.language.core`` patched
  for good after the first helper call from its standard library.
* **no host copies**: before each launch the interpreter "copies tensor arguments to the host"
  and copies them back afterwards. Our arguments (:class:`HostArg`, and the buffer types
  ``runtime/launch.py`` passes as they are: :data:`interpreter.HOST_TYPES`) already *are* host
  memory, so both copies are identities; :func:`skip_host_copies` skips them for launches whose
  every pointer argument is one of those, and leaves any other launch to Triton.
* **no dead overflow checks**: the interpreter's options ask for Triton's integer-overflow
  sanitizer (``sanitize_overflow=True``) but not for ``debug``, and ``device_assert`` is a no-op
  without ``debug``. So every int32 ``+ - *`` (``pid * BLOCK + tl.arange(...)``, every index)
  computed its operands again in int64, compared them with both bounds, and dropped the result
  unchecked: a third of a small launch, and six extra passes over a wide block.
  :func:`no_dead_overflow_checks` turns the sanitizer off whenever ``debug`` is off (as the GPU
  compiler does by default); a ``debug=True`` interpreter keeps it, and checks it.
* **bind once**: every launch built a new ``GridExecutor`` (re-reading the kernel's annotations)
  whose ``__call__`` ran ``inspect.getfullargspec`` and ``inspect.getcallargs`` (which runs it
  again): a fifth of a small launch. :func:`bind_once` keeps one executor per kernel and binds
  arguments from the signature read once (scalars typed as ``interpreter_gpu.scalar_arg`` types
  them); the loop over the grid is Triton's.
* **pointer arithmetic in place**: ``ptr + offsets`` computed ``ptr + size * offsets`` as three
  fresh arrays (the offsets widened to uint64, the product, the sum: a block of 2**18 lanes
  allocates and faults in 6 MB for it); :func:`addptr_in_place` widens once and scales and adds
  into that array. The same uint64 arithmetic, wrap-around included.
* **dtype lookups**: ``_get_np_dtype`` builds a 19-entry dict (19 type hashes) at each of its
  calls, about 17 per small launch; :func:`cached_np_dtypes` answers from a table.
* **contiguous loads**: the interpreter loads and stores lane by lane through one pointer per
  lane (about 9 ns a lane: most of a large elementwise op). :func:`contiguous_loads` copies a run
  of consecutive pointers whose masked-in lanes are a prefix as one slice; the same bytes move,
  and lanes masked off are not touched.
"""
from __future__ import annotations

import ctypes
import dataclasses
import inspect

import numpy as np

from .interpreter import HOST_TYPES, fixup, replace
from . import interpreter_gpu


class _NoScope:
    """What the interpreter's ``_patch_lang`` returns once the patch is permanent."""

    __slots__ = ()

    def restore(self) -> None:
        pass


_NO_SCOPE = _NoScope()


def _sees_both_langs():
    """A function whose globals hold ``triton.language`` and ``triton.language.core``."""


@fixup("patch_once")
def patch_language_once():
    """Apply the interpreter's ``triton.language`` patch now, for good; later patches are no-ops."""
    import triton.language as tl
    from triton.runtime import interpreter as interp

    # Triton's own patch, for both spellings a kernel module may import (its langs are the
    # modules among the function's globals that are tl or tl.core).
    probe = type(_sees_both_langs)(_sees_both_langs.__code__, {"tl": tl, "core": tl.core})
    scope = interp._patch_lang(probe)
    undo = replace(interp, _patch_lang=lambda fn: _NO_SCOPE)
    return lambda: (scope.restore(), undo())


def _only_host_args(values, descriptor) -> bool:
    """True when every pointer-like value is host memory as it is (a tuple's items and descriptors' bases included)."""
    for v in values:
        if type(v) in HOST_TYPES or (isinstance(v, descriptor) and type(v.base) in HOST_TYPES):
            continue
        if hasattr(v, "data_ptr") or isinstance(v, descriptor):  # a foreign tensor: Triton copies it
            return False
        if isinstance(v, tuple) and not _only_host_args(v, descriptor):
            return False
    return True


@fixup("skip_host_copies")
def skip_host_copies():
    """Skip the interpreter's copy-to-host and copy-back for launches of host buffers only."""
    from triton.runtime import interpreter as interp

    ex, desc = interp.GridExecutor, interp.TensorDescriptor
    init_stock, restore_stock = ex._init_args_hst, ex._restore_args_dev

    def _init_args_hst(self, args_dev, kwargs):
        if _only_host_args(args_dev, desc) and _only_host_args(kwargs.values(), desc):
            return args_dev, kwargs  # already host memory: the "host copies" are the arguments
        return init_stock(self, args_dev, kwargs)

    def _restore_args_dev(self, args_dev, args_hst, kwargs, kwargs_hst):
        if args_hst is args_dev and kwargs_hst is kwargs:  # nothing was copied, nothing to copy back
            return
        restore_stock(self, args_dev, args_hst, kwargs, kwargs_hst)

    return replace(ex, _init_args_hst=_init_args_hst, _restore_args_dev=_restore_args_dev)


@fixup("no_dead_overflow_checks")
def no_dead_overflow_checks():
    """Skip the overflow sanitizer while ``debug`` is off: its checks are computed, then dropped."""
    from triton.runtime import interpreter as interp

    builder = interp.interpreter_builder
    return replace(builder, options=dataclasses.replace(builder.options, sanitize_overflow=builder.options.debug))


class _Binder:
    """A kernel's parameters, read once: binds a launch's arguments as ``inspect.getcallargs``."""

    __slots__ = ("names", "accepted", "defaults", "scalar_types")

    def __init__(self, fn):
        from triton.runtime.jit import _normalize_ty

        spec = inspect.getfullargspec(fn)
        # Scalar parameters annotated with a type (``lr: tl.float64``): the compiler passes them
        # as that type, and so does the interpreter (interpreter_gpu.scalar_arg).
        self.scalar_types = {name: ty for name, ty in ((n, _normalize_ty(a)) for n, a in inspect.get_annotations(fn).items())
                             if ty in interpreter_gpu.SCALAR_TYPES}
        self.names = tuple(spec.args) + tuple(spec.kwonlyargs)
        self.accepted = frozenset(self.names)
        self.defaults = dict(zip(spec.args[len(spec.args) - len(spec.defaults or ()):], spec.defaults or ()))
        self.defaults.update(spec.kwonlydefaults or {})

    def bind(self, fn_name, args, kwargs) -> dict:
        if len(args) > len(self.names):
            raise TypeError(f"{fn_name}() takes {len(self.names)} arguments but {len(args)} were given")
        bound = dict(zip(self.names, args))
        for k, v in kwargs.items():
            if k in bound:
                raise TypeError(f"{fn_name}() got multiple values for argument '{k}'")
            bound[k] = v
        if len(bound) < len(self.names):
            for name in self.names:
                if name not in bound:
                    if name not in self.defaults:
                        raise TypeError(f"{fn_name}() missing required argument: '{name}'")
                    bound[name] = self.defaults[name]
        return bound


@fixup("bind_once")
def bind_once():
    """One GridExecutor per kernel, and arguments bound from a signature read once."""
    import triton
    from triton.runtime import interpreter as interp

    ex_cls, fn_cls = interp.GridExecutor, interp.InterpretedFunction
    executors: dict = {}  # rewritten kernel function -> its GridExecutor (which holds its _Binder)

    def run(self, *args, grid, warmup, **kwargs):
        if warmup:
            return
        fn = self.rewrite()
        executor = executors.get(fn)
        if executor is None or executor.pre_run_hooks is not self.pre_run_hooks:
            executor = executors[fn] = ex_cls(fn, self.arg_names, grid, self.pre_run_hooks)
            executor.binder = _Binder(fn)
        executor.grid = grid
        return executor(*args, **kwargs)

    def call(self, *args_dev, **kwargs):
        # Triton's GridExecutor.__call__ (3.9.0), the signature read once instead of per launch
        # (an executor made elsewhere than run() reads it at its launch).
        binder = getattr(self, "binder", None) or _Binder(self.fn)
        kwargs = {k: v for k, v in kwargs.items() if k in binder.accepted}
        args_hst, kwargs_hst = self._init_args_hst(args_dev, kwargs)
        for hook in self.pre_run_hooks:
            hook(*args_hst, **kwargs_hst)
        patch_scope = interp._patch_lang(self.fn)
        try:
            args = binder.bind(self.fn.__name__, args_hst, kwargs_hst)
            typed = binder.scalar_types
            args = {name: arg if name in self.constexprs else
                    interpreter_gpu.scalar_arg(arg, typed[name]) if name in typed and isinstance(arg, (int, float)) else
                    interp._implicit_cvt(arg) for name, arg in args.items()}
            grid = self.grid(args) if callable(self.grid) else self.grid
            assert len(grid) <= 3, "grid must have at most 3 dimensions"
            grid = grid + (1, ) * (3 - len(grid))
            interp.interpreter_builder.set_grid_dim(*grid)
            order = reversed if interpreter_gpu.REVERSE_GRID else iter
            try:
                for x in order(range(grid[0])):
                    for y in order(range(grid[1])):
                        for z in order(range(grid[2])):
                            interp.interpreter_builder.set_grid_idx(x, y, z)
                            self.fn(**args)
            except Exception as e:
                if triton.knobs.compilation.front_end_debugging:
                    raise
                raise interp.InterpreterError(repr(e)) from e
        finally:
            patch_scope.restore()
        self._restore_args_dev(args_dev, args_hst, kwargs, kwargs_hst)

    undo_call, undo_run = replace(ex_cls, __call__=call), replace(fn_cls, run=run)
    return lambda: (undo_call(), undo_run())


@fixup("cached_np_dtypes")
def cached_np_dtypes():
    """Answer the interpreter's Triton-dtype -> NumPy-dtype lookups from a table."""
    import triton.language as tl
    from triton.runtime import interpreter as interp

    stock = interp._get_np_dtype
    table: dict = {}
    uint64 = np.dtype(np.uint64)

    def _get_np_dtype(tt_dtype):
        if isinstance(tt_dtype, tl.block_type):
            tt_dtype = tt_dtype.element_ty
        if isinstance(tt_dtype, tl.pointer_type):
            return uint64
        np_dtype = table.get(tt_dtype)
        if np_dtype is None:
            np_dtype = table[tt_dtype] = stock(tt_dtype)
        return np_dtype

    return replace(interp, _get_np_dtype=_get_np_dtype)


@fixup("addptr_in_place")
def addptr_in_place():
    """``ptr + offsets`` into one new uint64 array instead of three."""
    from triton.runtime import interpreter as interp

    stock = interp.InterpreterBuilder.create_addptr

    def create_addptr(self, ptr, offset):
        if ptr.data.shape != offset.data.shape:  # not what the semantics hand over: the stock path decides
            return stock(self, ptr, offset)
        out = offset.data.astype(np.uint64)  # a new array (a copy even when already uint64)
        size = max(1, ptr.get_element_ty().primitive_bitwidth // 8)  # int1 is addressed by bytes
        if size != 1:
            out *= np.uint64(size)
        out += ptr.data
        return interp.TensorHandle(out, ptr.dtype)

    return replace(interp.InterpreterBuilder, create_addptr=create_addptr)


def _contiguous_span(ptrs, mask, itemsize):
    """``(address, k)`` when the first ``k`` lanes are the only ones masked in and their pointers
    are consecutive ``itemsize`` steps from ``address``; None otherwise (the stock path decides)."""
    if ptrs.dtype != np.uint64 or not ptrs.flags.c_contiguous or ptrs.size < _SPAN_MIN:
        return None
    p = ptrs.reshape(-1)
    m = np.asarray(mask).reshape(-1) if mask is not None else None
    if m is not None and m.size != p.size:
        return None
    if m is None or m.all():
        k = p.size
    else:
        k = int(m.argmin())  # first masked-off lane
        if k == 0 or m[k:].any():
            return None
    base = int(p[0])
    if int(p[k - 1]) - base != (k - 1) * itemsize or not (np.diff(p[:k]) == itemsize).all():
        return None
    return base, k


_SPAN_MIN = 64  # below this the stock per-lane loop is as fast as the checks


def _host_array(address: int, k: int, dtype):
    return np.frombuffer((ctypes.c_uint8 * (k * dtype.itemsize)).from_address(address), dtype=dtype)


@fixup("contiguous_loads")
def contiguous_loads():
    """Load and store a run of consecutive pointers as one NumPy copy instead of lane by lane.

    The interpreter gathers every lane through its own pointer (about 9 ns a lane). When the
    lanes masked in are a prefix of the block and their pointers consecutive (what an
    elementwise kernel's ``ptr + lin`` is), the same bytes are one slice copy; only lanes that
    are masked in are touched, as the stock path does. Anything else takes the stock path.
    """
    from triton.runtime import interpreter as interp

    builder = interp.InterpreterBuilder
    load_stock, store_stock = builder.create_masked_load, builder.create_masked_store

    def create_masked_load(self, ptrs, mask, other, cache_policy, is_volatile):
        dtype_tt = ptrs.get_element_ty()
        dtype_np = interp._get_np_dtype(dtype_tt)
        span = _contiguous_span(ptrs.data, mask.data, dtype_np.itemsize)
        if span is None or (other is not None and (other.data.shape != ptrs.data.shape or other.data.dtype != dtype_np)):
            return load_stock(self, ptrs, mask, other, cache_policy, is_volatile)
        address, k = span
        if k == ptrs.data.size:
            out = _host_array(address, k, dtype_np).copy()
        else:
            out = np.zeros(ptrs.data.size, dtype_np) if other is None else np.array(other.data, dtype_np).reshape(-1)
            out[:k] = _host_array(address, k, dtype_np)
        return interp.TensorHandle(out.reshape(ptrs.data.shape), dtype_tt)

    def create_masked_store(self, ptrs, value, mask, cache_policy):
        v = value.data
        span = None if v.shape != ptrs.data.shape else _contiguous_span(ptrs.data, mask.data, v.dtype.itemsize)
        if span is None:
            return store_stock(self, ptrs, value, mask, cache_policy)
        address, k = span
        _host_array(address, k, v.dtype)[:] = v.reshape(-1)[:k]

    return replace(builder, create_masked_load=create_masked_load, create_masked_store=create_masked_store)

