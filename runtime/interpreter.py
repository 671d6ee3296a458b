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
* **contiguous loads** (speed): the interpreter loads and stores lane by lane through one
  pointer per lane (about 9 ns a lane: most of a large elementwise op). :func:`contiguous_loads`
  copies a run of consecutive pointers whose masked-in lanes are a prefix as one slice; the
  same bytes move, and lanes masked off are not touched.

Each fix-up patches private interpreter internals, so each is pinned to the Triton versions it
was checked on (:data:`CHECKED_VERSIONS`; ``tests/test_interpreter.py`` checks each one). On any
other version :func:`apply_fixups` applies none of them and warns once: kernels then run on the stock
interpreter (slower; bf16 casts round as that interpreter does), and the pinned tests fail,
which is where a new Triton gets re-checked.
"""
from __future__ import annotations

import ctypes
import warnings

import numpy as np

CHECKED_VERSIONS = ("3.9.0",)

installed: dict[str, bool] = {
    "bf16_casts": False, "patch_once": False, "skip_host_copies": False, "contiguous_loads": False,
}
_stock: dict[str, object] = {}  # what each fix-up replaced, for remove_fixups (tests)


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


def fix_bf16_casts() -> None:
    """Make the interpreter's bf16 conversions round like the GPU (and ml_dtypes) do."""
    import ml_dtypes
    import triton.language as tl
    from triton.runtime import interpreter as interp

    if installed["bf16_casts"]:
        return
    builder = interp.InterpreterBuilder
    orig_cast, orig_fp_to_fp = builder.cast_impl, builder.create_fp_to_fp
    _stock["bf16_casts"] = (orig_cast, orig_fp_to_fp)

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

    builder.cast_impl, builder.create_fp_to_fp = cast_impl, create_fp_to_fp
    installed["bf16_casts"] = True


class _NoScope:
    """What the interpreter's ``_patch_lang`` returns once the patch is permanent."""

    __slots__ = ()

    def restore(self) -> None:
        pass


_NO_SCOPE = _NoScope()


def _sees_both_langs():
    """A function whose globals hold ``triton.language`` and ``triton.language.core``."""


def patch_language_once() -> None:
    """Apply the interpreter's ``triton.language`` patch now, for good; later patches are no-ops."""
    import triton.language as tl
    from triton.runtime import interpreter as interp

    if installed["patch_once"]:
        return
    stock = interp._patch_lang
    # Triton's own patch, for both spellings a kernel module may import (its langs are the
    # modules among the function's globals that are tl or tl.core).
    probe = type(_sees_both_langs)(_sees_both_langs.__code__, {"tl": tl, "core": tl.core})
    scope = stock(probe)
    _stock["patch_once"] = (stock, scope)
    interp._patch_lang = lambda fn: _NO_SCOPE
    installed["patch_once"] = True


def _only_host_args(values, descriptor) -> bool:
    """True when every pointer-like value is a HostArg (a tuple's items included)."""
    for v in values:
        if type(v) is HostArg:
            continue
        if hasattr(v, "data_ptr") or isinstance(v, descriptor):  # a foreign tensor: Triton copies it
            return False
        if isinstance(v, tuple) and not _only_host_args(v, descriptor):
            return False
    return True


def skip_host_copies() -> None:
    """Skip the interpreter's copy-to-host and copy-back for launches made of HostArgs only."""
    from triton.runtime import interpreter as interp

    if installed["skip_host_copies"]:
        return
    ex, desc = interp.GridExecutor, interp.TensorDescriptor
    init_stock, restore_stock = ex._init_args_hst, ex._restore_args_dev
    _stock["skip_host_copies"] = (init_stock, restore_stock)

    def _init_args_hst(self, args_dev, kwargs):
        if _only_host_args(args_dev, desc) and _only_host_args(kwargs.values(), desc):
            return args_dev, kwargs  # already host memory: the "host copies" are the arguments
        return init_stock(self, args_dev, kwargs)

    def _restore_args_dev(self, args_dev, args_hst, kwargs, kwargs_hst):
        if args_hst is args_dev and kwargs_hst is kwargs:  # nothing was copied, nothing to copy back
            return
        restore_stock(self, args_dev, args_hst, kwargs, kwargs_hst)

    ex._init_args_hst, ex._restore_args_dev = _init_args_hst, _restore_args_dev
    installed["skip_host_copies"] = True


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


def contiguous_loads() -> None:
    """Load and store a run of consecutive pointers as one NumPy copy instead of lane by lane.

    The interpreter gathers every lane through its own pointer (about 9 ns a lane). When the
    lanes masked in are a prefix of the block and their pointers consecutive (what an
    elementwise kernel's ``ptr + lin`` is), the same bytes are one slice copy; only lanes that
    are masked in are touched, as the stock path does. Anything else takes the stock path.
    """
    from triton.runtime import interpreter as interp

    if installed["contiguous_loads"]:
        return
    builder = interp.InterpreterBuilder
    load_stock, store_stock = builder.create_masked_load, builder.create_masked_store
    _stock["contiguous_loads"] = (load_stock, store_stock)

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

    builder.create_masked_load, builder.create_masked_store = create_masked_load, create_masked_store
    installed["contiguous_loads"] = True


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
    contiguous_loads()
    return True


def remove_fixups() -> None:
    """Put back what :func:`apply_fixups` replaced (for tests that compare with stock behaviour)."""
    import triton.language as tl  # noqa: F401  (the patch scope restores attributes on it)
    from triton.runtime import interpreter as interp

    if installed["contiguous_loads"]:
        interp.InterpreterBuilder.create_masked_load, interp.InterpreterBuilder.create_masked_store = _stock.pop(
            "contiguous_loads")
        installed["contiguous_loads"] = False
    if installed["skip_host_copies"]:
        interp.GridExecutor._init_args_hst, interp.GridExecutor._restore_args_dev = _stock.pop("skip_host_copies")
        installed["skip_host_copies"] = False
    if installed["patch_once"]:
        stock, scope = _stock.pop("patch_once")
        scope.restore()
        interp._patch_lang = stock
        installed["patch_once"] = False
    if installed["bf16_casts"]:
        interp.InterpreterBuilder.cast_impl, interp.InterpreterBuilder.create_fp_to_fp = _stock.pop("bf16_casts")
        installed["bf16_casts"] = False
