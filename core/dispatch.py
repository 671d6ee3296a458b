"""The one path every op call takes: ``call(op, *args, **kwargs)``.

Every Tensor method, Python operator and ``tritensor.*`` / ``nn.functional.*`` function made from
the op table (``core/ops/table.py``) is ``call(<its Op record>, ...)``. The call passes these
layers, always in this order::

    autocast   pick the dtype the op computes in (its Op.autocast category); registered by amp
    autograd   record the op into the graph when an input requires grad; registered by autograd
    core       op.impl: check the arguments, allocate the output, launch the kernel

Core cannot import the layers above it (the dependency rule: runtime <- triton_kernels <- core <-
autograd <- nn/optim/amp), so those packages *register* their layer here when they are imported,
the way PyTorch's dispatcher takes a kernel per dispatch key. A layer is
``fn(op, args, kwargs, next)``: it either answers the call itself or hands it on with
``next(op, args, kwargs)``. A layer nobody registered passes the call straight through.

The fast path: each layer also says, cheaply, whether it has anything to do with a call
(``needed(op, args, kwargs)``: autograd, the op is Tensor autograd API or an input requires grad
with grad mode on), or names a *flag* it keeps up to date, read without a Python call (autocast:
a region is enabled in this thread; every op asks, and a call per op is what the host pays for
it on a GPU; a call that goes through the layers for another one's sake passes a flag-gated
layer whose flag is off without calling it). A call no layer needs goes
straight to the core entry, which is what almost every op of an inference step, or of code
under ``no_grad``, is.
"""
from __future__ import annotations

ORDER = ("autocast", "autograd")  # the layers above core, outermost first

_layers: dict = {}
_needed: dict = {}  # layer name -> needed(op, args, kwargs)
_gates: tuple = ()  # the registered layers' ``needed``, outermost first
_flags_by_name: dict = {}  # layer name -> its flag, or None
_flags: tuple = ()  # (object, attribute) of the layers registered with a flag: needed while it is true


def core(op, args, kwargs):
    """The bottom layer: the op's core entry (argument checks, output allocation, kernel launch)."""
    return op.impl(*args, **kwargs)


def _chain(i: int):
    """The call as seen from layer ``ORDER[i]`` downwards."""
    while i < len(ORDER) and ORDER[i] not in _layers:
        i += 1  # an unregistered layer passes the call through
    if i == len(ORDER):
        return core
    layer, below = _layers[ORDER[i]], _chain(i + 1)
    flag = _flags_by_name.get(ORDER[i])
    if flag is not None:  # a flag-gated layer has nothing to do while its flag is off: straight below
        obj, attribute = flag
        return lambda op, args, kwargs: (layer(op, args, kwargs, below) if getattr(obj, attribute)
                                         else below(op, args, kwargs))
    return lambda op, args, kwargs: layer(op, args, kwargs, below)


_entry = _chain(0)


def _always(op, args, kwargs) -> bool:
    return True


def register_layer(name: str, fn, needed=None, *, flag=None) -> None:
    """Install ``fn(op, args, kwargs, next)`` as layer ``name`` (one of :data:`ORDER`);
    ``needed(op, args, kwargs)`` says whether it has anything to do with a call (None: always,
    unless ``flag``); ``flag=(obj, attribute)``: the layer is needed while ``obj.<attribute>`` is
    true (for a layer that keeps its own switch, such as a thread-local region flag)."""
    global _entry, _gates, _flags
    if name not in ORDER:
        raise ValueError(f"register_layer: name must be one of {ORDER}, got {name!r}")
    if not callable(fn):
        raise TypeError(f"register_layer: fn must be callable, got {type(fn).__name__}")
    if needed is not None and not callable(needed):
        raise TypeError(f"register_layer: needed must be callable or None, got {type(needed).__name__}")
    if flag is not None:
        if needed is not None:
            raise TypeError("register_layer: give needed or flag, not both")
        if not (isinstance(flag, tuple) and len(flag) == 2 and isinstance(flag[1], str)):
            raise TypeError(f"register_layer: flag must be an (object, attribute name) pair, got {flag!r}")
        getattr(*flag)  # an attribute that is not there fails here, not at the next op
    _layers[name] = fn
    if flag is None:
        _needed[name] = needed or _always
    else:
        _needed.pop(name, None)
    _flags_by_name[name] = flag
    _entry = _chain(0)
    _gates = tuple(_needed[n] for n in ORDER if n in _needed)
    _flags = tuple(_flags_by_name[n] for n in ORDER if _flags_by_name.get(n) is not None)


def registered(name: str):
    """The function registered as layer ``name``, or None."""
    return _layers.get(name)


def call(op, *args, **kwargs):
    """Run ``op`` on the arguments through every registered layer that is needed, then its core entry."""
    for obj, attribute in _flags:
        if getattr(obj, attribute):
            return _entry(op, args, kwargs)
    for needed in _gates:
        if needed(op, args, kwargs):
            return _entry(op, args, kwargs)
    return op.impl(*args, **kwargs)
