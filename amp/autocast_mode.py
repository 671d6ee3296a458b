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
