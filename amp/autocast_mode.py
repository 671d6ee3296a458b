"""``autocast``: regions where ops run in the dtype their autocast category picks (PyTorch's torch.autocast).

State is thread-local (one record per device type: enabled, dtype; plus cache_enabled and the
nesting depth), so a region in one thread never changes another thread's ops. The dispatch
layer :func:`autocast_layer` (registered with ``core/dispatch.py`` when this module is imported)
asks :func:`tritensor.amp.lists.category` for the op's category in each enabled region and casts
the eligible inputs: floating tensors, not float64, on the region's device type, in the
positional and keyword arguments and inside lists/tuples of them (``cat``-style). A call with an
explicit ``dtype=`` is not eligible (PyTorch's rule). A cast is the recorded op ``to`` (it goes on
down through the autograd layer), so backward casts gradients back and every derivative runs in
the dtype its forward ran in. Casts of a leaf that requires grad from float32 to the region's
low dtype are cached for the outermost region (``cache_enabled``), one cast per weight per region.
"""
from __future__ import annotations

import functools
import threading
import warnings

from ..core import dispatch
from ..core.ops.table import OPS
from ..core.tensor import Tensor
from ..runtime import cuda
from ..runtime import dtype as dt
from . import lists

_DEFAULT_DTYPE = {"cuda": dt.float16, "cpu": dt.bfloat16}
_SUPPORTED = {"cuda": (dt.float16, dt.bfloat16), "cpu": (dt.bfloat16, dt.float16)}
_TO = OPS["to"]


def _device_type_of(t) -> str:
    """The device type a tensor counts as for autocast (tests may substitute this to run the
    "cuda" lists on host tensors in CPU mode)."""
    return t.device.type


def _cuda_available() -> bool:
    return cuda.is_available()


class _State(threading.local):
    def __init__(self):
        self.enabled = {d: False for d in lists.DEVICE_TYPES}
        self.any = False  # some device type's region is enabled (the dispatcher's gate)
        self.dtype = dict(_DEFAULT_DTYPE)
        self.cache_enabled = True
        self.depth = 0
        self.cache = {}  # (id(leaf), dtype) -> (leaf, its cast)


_state = _State()


def _check_device_type(device_type, where: str) -> str:
    if not isinstance(device_type, str) or device_type not in lists.DEVICE_TYPES:
        raise RuntimeError(f"{where}: unsupported device_type {device_type!r}; expected one of "
                           f"{', '.join(lists.DEVICE_TYPES)}")
    return device_type


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    """Whether ops on ``device_type`` tensors autocast in this thread now."""
    return _state.enabled[_check_device_type(device_type, "is_autocast_enabled")]


def get_autocast_dtype(device_type: str):
    """The low dtype of ``device_type``'s autocast regions in this thread (float16 for cuda, bfloat16 for cpu by default)."""
    return _state.dtype[_check_device_type(device_type, "get_autocast_dtype")]


def is_autocast_cache_enabled() -> bool:
    """Whether autocast regions of this thread cache the low-precision casts of leaf tensors (weights), one cast per
    weight per outermost region."""
    return _state.cache_enabled


def clear_autocast_cache() -> None:
    """Drop this thread's cached weight casts (done on leaving the outermost region)."""
    _state.cache.clear()


# ----- torch's root-level autocast state functions (torch.set_autocast_enabled ...) -----------------
# torch exposes its C++ autocast state at the root: the autocast class is written with them in torch, and
# code that manages regions by hand (compilers, custom context managers) calls them. They read and write
# the same thread-local record the ``autocast`` class uses. The cpu/gpu-named forms are deprecated in
# torch and warn as torch's do.
_TORCH_DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia",
                       "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")


def _torch_device_type(device_type, where: str) -> str:
    """torch's check of a device-type string: its RuntimeError for a name torch does not know; tritensor keeps
    state for cuda and cpu only, so torch's other known types are refused with a clear error too."""
    if not isinstance(device_type, str):
        raise TypeError(f"{where}(): argument 'device_type' (position 1) must be str, not {type(device_type).__name__}")
    if device_type not in _TORCH_DEVICE_TYPES:
        raise RuntimeError(f"Expected one of {', '.join(_TORCH_DEVICE_TYPES)} device type at start of device string: "
                           f"{device_type}")
    if device_type not in lists.DEVICE_TYPES:
        raise RuntimeError(f"{where}(): autocast has no state for device type {device_type!r} in tritensor "
                           f"(only {', '.join(lists.DEVICE_TYPES)})")
    return device_type


def _bool_arg(value, where: str, name: str, position: int) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{where}(): argument '{name}' (position {position}) must be bool, not {type(value).__name__}")
    return value


def _dtype_arg(value) -> dt.dtype:
    if not isinstance(value, dt.dtype):
        raise TypeError(f"dtype must be a torch.dtype (got {type(value).__name__})")
    return value


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"torch.{old} is deprecated. Please use torch.{new} instead.", DeprecationWarning, stacklevel=3)


def set_autocast_enabled(device_type, enabled=None) -> None:
    """``torch.set_autocast_enabled(device_type, enabled)`` (or the legacy one-argument form, for cuda): turns
    autocast on or off for ``device_type`` in this thread, outside any ``autocast`` region's bookkeeping."""
    if enabled is None:  # the legacy form set_autocast_enabled(enabled) steers cuda
        device_type, enabled = "cuda", _bool_arg(device_type, "set_autocast_enabled", "enabled", 1)
    else:
        device_type = _torch_device_type(device_type, "set_autocast_enabled")
        _bool_arg(enabled, "set_autocast_enabled", "enabled", 2)
    _state.enabled[device_type] = enabled
    _state.any = any(_state.enabled.values())


def set_autocast_dtype(device_type, dtype) -> None:
    """``torch.set_autocast_dtype(device_type, dtype)``: the low dtype of ``device_type``'s autocast in this
    thread (what ``get_autocast_dtype`` returns)."""
    _state.dtype[_torch_device_type(device_type, "set_autocast_dtype")] = _dtype_arg(dtype)


def set_autocast_cache_enabled(enabled) -> None:
    """``torch.set_autocast_cache_enabled(enabled)``: whether autocast caches the casts of leaf tensors."""
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be a bool (got {type(enabled).__name__})")
    _state.cache_enabled = enabled


def autocast_increment_nesting() -> int:
    """``torch.autocast_increment_nesting()``: one region deeper; returns the new depth (the cast cache lives
    until the depth goes back to 0)."""
    _state.depth += 1
    return _state.depth


def autocast_decrement_nesting() -> int:
    """``torch.autocast_decrement_nesting()``: one region shallower; returns the new depth, which torch lets go
    below 0 (it counts, it does not check). The cast cache is dropped at depth 0, as on leaving a region."""
    _state.depth -= 1
    if _state.depth == 0:
        _state.cache.clear()
    return _state.depth


def get_autocast_cpu_dtype():
    """Deprecated ``torch.get_autocast_cpu_dtype()``: ``get_autocast_dtype('cpu')``."""
    _deprecated("get_autocast_cpu_dtype()", "get_autocast_dtype('cpu')")
    return _state.dtype["cpu"]


def get_autocast_gpu_dtype():
    """Deprecated ``torch.get_autocast_gpu_dtype()``: ``get_autocast_dtype('cuda')``."""
    _deprecated("get_autocast_gpu_dtype()", "get_autocast_dtype('cuda')")
    return _state.dtype["cuda"]


def is_autocast_cpu_enabled() -> bool:
    """Deprecated ``torch.is_autocast_cpu_enabled()``: ``is_autocast_enabled('cpu')``."""
    _deprecated("is_autocast_cpu_enabled()", "is_autocast_enabled('cpu')")
    return _state.enabled["cpu"]


def set_autocast_cpu_enabled(enabled) -> None:
    """Deprecated ``torch.set_autocast_cpu_enabled(enabled)``: ``set_autocast_enabled('cpu', enabled)``."""
    _deprecated("set_autocast_cpu_enabled(enabled)", "set_autocast_enabled('cpu', enabled)")
    set_autocast_enabled("cpu", _bool_arg(enabled, "set_autocast_cpu_enabled", "enabled", 1))


def set_autocast_cpu_dtype(dtype) -> None:
    """Deprecated ``torch.set_autocast_cpu_dtype(dtype)``: ``set_autocast_dtype('cpu', dtype)``."""
    _deprecated("set_autocast_cpu_dtype(dtype)", "set_autocast_dtype('cpu', dtype)")
    set_autocast_dtype("cpu", dtype)


def set_autocast_gpu_dtype(dtype) -> None:
    """Deprecated ``torch.set_autocast_gpu_dtype(dtype)``: ``set_autocast_dtype('cuda', dtype)``."""
    _deprecated("set_autocast_gpu_dtype(dtype)", "set_autocast_dtype('cuda', dtype)")
    set_autocast_dtype("cuda", dtype)


class autocast:
    """``autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``: context manager and decorator."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        self.device = _check_device_type(device_type, "autocast")
        if not isinstance(enabled, bool):
            raise TypeError(f"autocast: enabled must be a bool, got {type(enabled).__name__}")
        if dtype is not None and not isinstance(dtype, dt.dtype):
            raise TypeError(f"autocast: dtype must be a tritensor dtype, got {type(dtype).__name__}")
        self.fast_dtype = _DEFAULT_DTYPE[self.device] if dtype is None else dtype
        self._cache_enabled = _state.cache_enabled if cache_enabled is None else bool(cache_enabled)
        self._enabled = enabled
        if enabled and self.device == "cuda" and not _cuda_available():
            warnings.warn("User provided device_type of 'cuda', but CUDA is not available. Disabling")
            self._enabled = False
        if self._enabled and self.fast_dtype not in _SUPPORTED[self.device]:
            warnings.warn(f"In {self.device} autocast, but the target dtype {self.fast_dtype} is not supported "
                          f"(supported: {', '.join(str(d) for d in _SUPPORTED[self.device])}). Disabling autocast.")
            self._enabled = False
        self._saved = []

    def __enter__(self):
        s = _state
        self._saved.append((s.enabled[self.device], s.dtype[self.device], s.cache_enabled))
        s.enabled[self.device] = self._enabled
        s.any = any(s.enabled.values())
        s.dtype[self.device] = self.fast_dtype
        s.cache_enabled = self._cache_enabled
        s.depth += 1
        return self

    def __exit__(self, *exc):
        s = _state
        s.depth -= 1
        if s.depth == 0:
            s.cache.clear()  # the cast cache lives as long as the outermost region
        s.enabled[self.device], s.dtype[self.device], s.cache_enabled = self._saved.pop()
        s.any = any(s.enabled.values())
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return func(*args, **kwargs)

        return wrapper


# ----- the dispatch layer ---------------------------------------------------------------------
def _eligible(x, device_type) -> bool:
    return (isinstance(x, Tensor) and x.dtype.is_floating_point and x.dtype is not dt.float64
            and _device_type_of(x) == device_type)


def _cast(x, to, next):
    s = _state
    cacheable = (s.cache_enabled and x.dtype is dt.float32 and x._requires_grad and x.is_leaf
                 and x._base is None)
    if cacheable:
        hit = s.cache.get((id(x), to))
        if hit is not None and hit[0] is x:
            return hit[1]
    y = next(_TO, (x, to), {})
    if cacheable:
        s.cache[(id(x), to)] = (x, y)
    return y


def _map(args, fn):
    """Apply ``fn`` to every tensor in ``args`` and one level of lists/tuples inside it."""
    out = []
    for a in args:
        if isinstance(a, (list, tuple)) and any(isinstance(b, Tensor) for b in a):
            out.append(type(a)(fn(b) if isinstance(b, Tensor) else b for b in a))
        else:
            out.append(fn(a) if isinstance(a, Tensor) else a)
    return out


def _tensors(args):
    for a in args:
        if isinstance(a, Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (b for b in a if isinstance(b, Tensor))


def cast_inputs(op, args, kwargs, device_type, lowp, next):
    """The eligible inputs of ``op`` cast for a ``device_type`` region whose low dtype is ``lowp``."""
    cat = lists.category(op, device_type)
    if cat == "none" or kwargs.get("dtype") is not None:
        return args, kwargs
    if cat == "lower":
        to = lowp
    elif cat == "fp32":
        to = dt.float32
    else:  # promote: the widest eligible input dtype
        ds = [t.dtype for t in _tensors(list(args) + list(kwargs.values())) if _eligible(t, device_type)]
        if not ds:
            return args, kwargs
        to = functools.reduce(dt.promote_types, ds)

    def fn(t):
        return _cast(t, to, next) if _eligible(t, device_type) and t.dtype is not to else t

    keys = list(kwargs)
    new = _map(list(args) + [kwargs[k] for k in keys], fn)
    return tuple(new[:len(args)]), dict(zip(keys, new[len(args):]))


def autocast_layer(op, args, kwargs, next):
    """The dispatcher's autocast layer: in each device type's enabled region, cast the op's inputs by its category
    (lower, fp32, promote) before passing the call on."""
    s = _state
    for device_type in lists.DEVICE_TYPES:
        if s.enabled[device_type]:
            args, kwargs = cast_inputs(op, args, kwargs, device_type, s.dtype[device_type], next)
    return next(op, args, kwargs)


# The dispatcher reads whether any autocast region is enabled in this thread from the flag itself,
# with no call per op, and skips the layer when none is.
dispatch.register_layer("autocast", autocast_layer, flag=(_state, "any"))
