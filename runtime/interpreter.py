"""Every change tritensor makes to Triton's interpreter, in one place, pinned to checked versions.

CPU mode runs the kernels in Triton's interpreter (``TRITON_INTERPRET=1``). tritensor owns that
mode for the whole process (``runtime/mode.py`` picks it before Triton loads) and serialises every
launch (``runtime/launch.py``), which makes these fix-ups safe:

* **bf16 casts** (correctness): Triton 3.9's interpreter converts fp32 -> bf16 by truncation,
  mishandles subnormals and routes other bf16 casts through NumPy on the raw uint16 bits.
  :func:`fix_bf16_casts` routes every conversion touching bf16 through ml_dtypes, which rounds
  to nearest even like the GPU's ``cvt.rn.bf16.f32``.
* **patch once** (speed): the interpreter rebinds every builtin of ``triton.language`` (found
  with ``inspect.getmembers``) at every launch *and* at every ``@triton.jit`` helper call, and
  restores them after the launch: about half the cost of a small launch.
  :func:`patch_language_once` applies the very same patch (Triton's own ``_patch_lang``) once
  and makes later calls no-ops. Nothing outside a kernel calls ``triton.language`` builtins (they
  only work inside a kernel), and stock Triton already leaves ``triton.language.core`` patched
  for good after the first helper call from its standard library.
* **no host copies** (speed): before each launch the interpreter "copies tensor arguments to
  the host" and copies them back afterwards. Our arguments (:class:`HostArg`) already *are*
  host memory, so both copies are identities; :func:`skip_host_copies` skips them for launches
  whose every pointer argument is a :class:`HostArg`, and leaves any other launch to Triton.
* **no dead overflow checks** (speed): the interpreter's options ask for Triton's integer-overflow
  sanitizer (``sanitize_overflow=True``) but not for ``debug``, and ``device_assert`` is a no-op
  without ``debug``. So every int32 ``+ - *`` (``pid * BLOCK + tl.arange(...)``, every index)
  computed its operands again in int64, compared them with both bounds, and dropped the result
  unchecked: a third of a small launch, and six extra passes over a wide block.
  :func:`no_dead_overflow_checks` turns the sanitizer off whenever ``debug`` is off (as the GPU
  compiler does by default); a ``debug=True`` interpreter keeps it, and checks it.
* **bind once** (speed): every launch built a new ``GridExecutor`` (re-reading the kernel's
  annotations) whose ``__call__`` ran ``inspect.getfullargspec`` and ``inspect.getcallargs``
  (which runs it again): a fifth of a small launch. :func:`bind_once` keeps one executor per
  kernel and binds arguments from the signature read once; the loop over the grid is Triton's.
* **pointer arithmetic in place** (speed): ``ptr + offsets`` computed ``ptr + size * offsets``
  as three fresh arrays (the offsets widened to uint64, the product, the sum: a block of 2**18
  lanes allocates and faults in 6 MB for it); :func:`addptr_in_place` widens once and scales and
  adds into that array. The same uint64 arithmetic, wrap-around included.
* **dtype lookups** (speed): ``_get_np_dtype`` builds a 19-entry dict (19 type hashes) at each
  of its calls, about 17 per small launch; :func:`cached_np_dtypes` answers from a table.
* **contiguous loads** (speed): the interpreter loads and stores lane by lane through one
  pointer per lane (about 9 ns a lane: most of a large elementwise op). :func:`contiguous_loads`
  copies a run of consecutive pointers whose masked-in lanes are a prefix as one slice; the
  same bytes move, and lanes masked off are not touched.

One setting is not a fix-up of Triton's and holds on any version: :func:`keep_heap_pad` asks
glibc to keep 64 MB of freed heap (``M_TOP_PAD``) instead of returning it to the system at each
free. A block of 2**18 lanes makes megabyte-sized NumPy temporaries at every step; returned
and mapped again, each cost its page faults anew, a third of a wide elementwise kernel's time.

Each fix-up patches private interpreter internals, so each is pinned to the Triton versions it
was checked on (:data:`CHECKED_VERSIONS`; ``tests/test_interpreter.py`` checks each one). On any
other version :func:`apply_fixups` applies none of them and warns once: kernels then run on the stock
interpreter (slower; bf16 casts round as that interpreter does), and the pinned tests fail,
which is where a new Triton gets re-checked.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import functools
import inspect
import warnings

import numpy as np

CHECKED_VERSIONS = ("3.9.0",)

installed: dict[str, bool] = {
    "bf16_casts": False, "patch_once": False, "skip_host_copies": False, "no_dead_overflow_checks": False,
    "bind_once": False, "cached_np_dtypes": False, "addptr_in_place": False, "contiguous_loads": False,
}
_undo: dict[str, object] = {}  # fix-up name -> what puts back what it replaced (remove_fixups, tests)


def _fixup(name: str):
    """A fix-up's installer, run at most once; it returns the function that undoes it."""
    def deco(install):
        @functools.wraps(install)
        def apply() -> None:
            if not installed[name]:
                _undo[name] = install()
                installed[name] = True
        return apply
    return deco


def _replace(obj, **new):
    """Set attributes of ``obj`` (a Triton class or module); return what sets the old ones back."""
    old = {k: getattr(obj, k) for k in new}
    for k, v in new.items():
        setattr(obj, k, v)
    return lambda: [setattr(obj, k, v) for k, v in old.items()]


class HostArg:
    """A kernel argument over host memory: what the interpreter needs from a tensor.

    The interpreter converts an argument to a pointer by ``data_ptr()`` and derives its element
    type from ``str(dtype)``. The storage methods (``untyped_storage``, ``storage_offset``,
    ``size``, ``stride``, ``new_empty``, ``set_``, ``copy_``) are the stock interpreter's
    copy-to-host protocol; with :func:`skip_host_copies` installed it never calls them.
    """

    __slots__ = ("_storage", "dtype", "_offset", "_size", "_stride")

    def __init__(self, storage, dtype, offset=0, size=(), stride=()):
        self._storage, self.dtype, self._offset, self._size, self._stride = storage, dtype, offset, size, stride

    def data_ptr(self) -> int:
        return self._storage.data_ptr() + self._offset * self.dtype.itemsize

    def untyped_storage(self):
        return self._storage

    def storage_offset(self) -> int:
        return self._offset

    def size(self):
        return self._size

    def stride(self):
        return self._stride

    def new_empty(self, *args, **kwargs):
        return HostArg(None, self.dtype)

    def set_(self, storage, offset, size, stride):
        self._storage, self._offset, self._size, self._stride = storage, offset, size, stride
        return self

    def copy_(self, other):
        return self


@_fixup("bf16_casts")
def fix_bf16_casts():
    """Make the interpreter's bf16 conversions round like the GPU (and ml_dtypes) do."""
    import ml_dtypes
    import triton.language as tl
    from triton.runtime import interpreter as interp

    builder = interp.InterpreterBuilder
    orig_cast, orig_fp_to_fp = builder.cast_impl, builder.create_fp_to_fp

    def _bf16_cast(src, dst_type):
        s, d = src.dtype.scalar, dst_type.scalar
        data = src.data.view(ml_dtypes.bfloat16) if s == tl.bfloat16 else src.data
        if d == tl.bfloat16:
            return interp.TensorHandle(data.astype(ml_dtypes.bfloat16).view(np.uint16), d)
        return interp.TensorHandle(data.astype(interp._get_np_dtype(dst_type)), d)

    def cast_impl(self, src, dst_type):
        if tl.bfloat16 in (src.dtype.scalar, dst_type.scalar):
            return _bf16_cast(src, dst_type)
        return orig_cast(self, src, dst_type)

    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        if tl.bfloat16 in (src.dtype.scalar, dst_type.scalar):
            return _bf16_cast(src, dst_type)
        return orig_fp_to_fp(self, src, dst_type, rounding_mode)

    return _replace(builder, cast_impl=cast_impl, create_fp_to_fp=create_fp_to_fp)


class _NoScope:
    """What the interpreter's ``_patch_lang`` returns once the patch is permanent."""

    __slots__ = ()

    def restore(self) -> None:
        pass


_NO_SCOPE = _NoScope()


def _sees_both_langs():
    """A function whose globals hold ``triton.language`` and ``triton.language.core``."""


@_fixup("patch_once")
def patch_language_once():
    """Apply the interpreter's ``triton.language`` patch now, for good; later patches are no-ops."""
    import triton.language as tl
    from triton.runtime import interpreter as interp

    # Triton's own patch, for both spellings a kernel module may import (its langs are the
    # modules among the function's globals that are tl or tl.core).
    probe = type(_sees_both_langs)(_sees_both_langs.__code__, {"tl": tl, "core": tl.core})
    scope = interp._patch_lang(probe)
    undo = _replace(interp, _patch_lang=lambda fn: _NO_SCOPE)
    return lambda: (scope.restore(), undo())


def _only_host_args(values, descriptor) -> bool:
    """True when every pointer-like value is a HostArg (a tuple's items and descriptors' bases included)."""
    for v in values:
        if type(v) is HostArg or (isinstance(v, descriptor) and type(v.base) is HostArg):
            continue
        if hasattr(v, "data_ptr") or isinstance(v, descriptor):  # a foreign tensor: Triton copies it
            return False
        if isinstance(v, tuple) and not _only_host_args(v, descriptor):
            return False
    return True


@_fixup("skip_host_copies")
def skip_host_copies():
    """Skip the interpreter's copy-to-host and copy-back for launches made of HostArgs only."""
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

    return _replace(ex, _init_args_hst=_init_args_hst, _restore_args_dev=_restore_args_dev)


@_fixup("no_dead_overflow_checks")
def no_dead_overflow_checks():
    """Skip the overflow sanitizer while ``debug`` is off: its checks are computed, then dropped."""
    from triton.runtime import interpreter as interp

    builder = interp.interpreter_builder
    return _replace(builder, options=dataclasses.replace(builder.options, sanitize_overflow=builder.options.debug))


class _Binder:
    """A kernel's parameters, read once: binds a launch's arguments as ``inspect.getcallargs``."""

    __slots__ = ("names", "accepted", "defaults")

    def __init__(self, fn):
        spec = inspect.getfullargspec(fn)
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


@_fixup("bind_once")
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
            args = {name: arg if name in self.constexprs else interp._implicit_cvt(arg) for name, arg in args.items()}
            grid = self.grid(args) if callable(self.grid) else self.grid
            assert len(grid) <= 3, "grid must have at most 3 dimensions"
            grid = grid + (1, ) * (3 - len(grid))
            interp.interpreter_builder.set_grid_dim(*grid)
            try:
                for x in range(grid[0]):
                    for y in range(grid[1]):
                        for z in range(grid[2]):
                            interp.interpreter_builder.set_grid_idx(x, y, z)
                            self.fn(**args)
            except Exception as e:
                if triton.knobs.compilation.front_end_debugging:
                    raise
                raise interp.InterpreterError(repr(e)) from e
        finally:
            patch_scope.restore()
        self._restore_args_dev(args_dev, args_hst, kwargs, kwargs_hst)

    undo_call, undo_run = _replace(ex_cls, __call__=call), _replace(fn_cls, run=run)
    return lambda: (undo_call(), undo_run())


@_fixup("cached_np_dtypes")
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

    return _replace(interp, _get_np_dtype=_get_np_dtype)


@_fixup("addptr_in_place")
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

    return _replace(interp.InterpreterBuilder, create_addptr=create_addptr)


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


@_fixup("contiguous_loads")
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

    return _replace(builder, create_masked_load=create_masked_load, create_masked_store=create_masked_store)


HEAP_PAD = 64 << 20  # bytes of freed heap glibc keeps for the next temporaries
_M_TOP_PAD = -2  # mallopt's parameter number, from glibc's malloc.h


def keep_heap_pad() -> bool:
    """Have glibc keep :data:`HEAP_PAD` bytes of freed heap (CPU mode); False where there is no
    glibc ``mallopt`` (macOS, musl): nothing to tune there."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return mallopt(_M_TOP_PAD, HEAP_PAD) == 1


def checked(version: str | None = None) -> bool:
    """Is this Triton version (default: the installed one) one the fix-ups were checked on?"""
    if version is None:
        import triton

        version = triton.__version__
    return version in CHECKED_VERSIONS


def apply_fixups() -> bool:
    """Apply every fix-up (CPU mode, once per process); on an unchecked Triton, warn and apply none."""
    import triton

    if not checked(triton.__version__):
        warnings.warn(
            f"tritensor's interpreter fix-ups were checked on Triton {', '.join(CHECKED_VERSIONS)}, not "
            f"{triton.__version__}: CPU mode runs Triton's stock interpreter (slower launches; bf16 casts "
            "round as that interpreter does). Run tests/test_interpreter.py to re-check them.",
            RuntimeWarning, stacklevel=2,
        )
        return False
    fix_bf16_casts()
    patch_language_once()
    skip_host_copies()
    no_dead_overflow_checks()
    bind_once()
    cached_np_dtypes()
    addptr_in_place()
    contiguous_loads()
    return True


def remove_fixups() -> None:
    """Put back what :func:`apply_fixups` replaced, last first (for tests that compare with stock behaviour)."""
    for name in reversed(list(_undo)):
        _undo.pop(name)()
        installed[name] = False
