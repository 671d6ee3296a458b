"""Triton's interpreter as CPU mode uses it: the argument type, and the registry of tritensor's fix-ups.

CPU mode runs the kernels in Triton's interpreter (``TRITON_INTERPRET=1``). tritensor owns that
mode for the whole process (``runtime/mode.py`` picks it before Triton loads) and serialises every
launch (``runtime/launch.py``), which makes patching the interpreter safe. The fix-ups come in two
modules, each registered here when it is imported (``runtime/launch.py`` imports both):

* ``interpreter_gpu.py``, **the interpreter computes what the GPU computes**: bf16 casts round to
  nearest even; scalar arguments get the types the compiler gives them (a Python float is fp32
  unless the parameter is annotated ``tl.float64``); a TMA descriptor store writes whole 16-byte
  chunks of the innermost dimension, as the hardware does. Without them CPU mode would pass tests
  that fail on a GPU.
* ``interpreter_speed.py``, **the same results, sooner**: the language patched once, no host
  copies of host buffers, no dead overflow checks, arguments bound once, dtype lookups from a
  table, pointer arithmetic in place, contiguous loads and stores as slices.

Each fix-up patches private interpreter internals, so each is pinned to the Triton versions it
was checked on (:data:`CHECKED_VERSIONS`; ``tests/test_interpreter.py`` checks each one). On any
other version :func:`apply_fixups` applies none of them and warns once: kernels then run on the stock
interpreter (slower; bf16 casts round as that interpreter does), and the pinned tests fail,
which is where a new Triton gets re-checked.

One setting is not a fix-up of Triton's and holds on any version: :func:`keep_heap_pad` asks
glibc to keep 64 MB of freed heap (``M_TOP_PAD``) instead of returning it to the system at each
free. A block of 2**18 lanes makes megabyte-sized NumPy temporaries at every step; returned
and mapped again, each cost its page faults anew, a third of a wide elementwise kernel's time.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import warnings

CHECKED_VERSIONS = ("3.9.0",)

installed: dict[str, bool] = {}  # fix-up name -> applied now; in the order apply_fixups applies them
_installers: dict[str, object] = {}  # fix-up name -> its installer
_undo: dict[str, object] = {}  # fix-up name -> what puts back what it replaced (remove_fixups, tests)


def fixup(name: str):
    """Register a fix-up's installer under ``name``; the installer runs at most once and returns
    the function that undoes it."""
    def deco(install):
        @functools.wraps(install)
        def apply() -> None:
            if not installed[name]:
                _undo[name] = install()
                installed[name] = True
        installed[name] = False
        _installers[name] = apply
        return apply
    return deco


def replace(obj, **new):
    """Set attributes of ``obj`` (a Triton class or module); return what sets the old ones back."""
    old = {k: getattr(obj, k) for k in new}
    for k, v in new.items():
        setattr(obj, k, v)
    return lambda: [setattr(obj, k, v) for k, v in old.items()]


HOST_TYPES: set = set()  # argument types whose memory is host memory as they are (HostArg; launch.py adds)


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
        """The host address of the first element (storage address plus offset), what the interpreter reads."""
        return self._storage.data_ptr() + self._offset * self.dtype.itemsize

    def untyped_storage(self):
        """The storage the interpreter copies into and back from around a launch (torch's
        Tensor.untyped_storage)."""
        return self._storage

    def storage_offset(self) -> int:
        """The offset of the first element in its storage, in elements (torch's Tensor.storage_offset)."""
        return self._offset

    def size(self):
        """The shape, as the interpreter asks a tensor argument for it (torch's Tensor.size)."""
        return self._size

    def stride(self):
        """The strides in elements (torch's Tensor.stride)."""
        return self._stride

    def new_empty(self, *args, **kwargs):
        """An argument of the same dtype with no storage yet: the interpreter makes one before set_ points it
        at its copy."""
        return HostArg(None, self.dtype)

    def set_(self, storage, offset, size, stride):
        """Point this argument at ``storage`` with the given offset, size and strides (torch's Tensor.set_),
        as the interpreter does with its host copy."""
        self._storage, self._offset, self._size, self._stride = storage, offset, size, stride
        return self

    def copy_(self, other):
        """Nothing to copy: the argument already addresses host memory the kernel wrote in place, so the
        interpreter's copy back is a no-op."""
        return self


HOST_TYPES.add(HostArg)


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
    """Apply every registered fix-up (CPU mode, once per process); on an unchecked Triton, warn and
    apply none."""
    import triton

    if not checked(triton.__version__):
        warnings.warn(
            f"tritensor's interpreter fix-ups were checked on Triton {', '.join(CHECKED_VERSIONS)}, not "
            f"{triton.__version__}: CPU mode runs Triton's stock interpreter (slower launches; bf16 casts "
            "round as that interpreter does). Run tests/test_interpreter.py to re-check them.",
            RuntimeWarning, stacklevel=2,
        )
        return False
    for apply in _installers.values():
        apply()
    return True


def remove_fixups() -> None:
    """Put back what :func:`apply_fixups` replaced, last first (for tests that compare with stock behaviour)."""
    for name in reversed(list(_undo)):
        _undo.pop(name)()
        installed[name] = False
