"""``tritensor.compile`` (PyTorch's ``torch.compile(fn, mode="reduce-overhead")``): a whole step
captured into CUDA graphs and replayed.

Why it exists: on a GPU a training step's time is host time, about 1,000 launches at 5 to 15 us
each (DESIGN.md's measurements), and a replayed CUDA graph launches them all with one driver call.
``tritensor.cuda.graph`` already captures a step, but leaves the rules to the user: warm up on a
side stream, allocate static inputs, capture, copy each batch in, replay, capture again for a new
shape, and never sync inside. ``compile`` applies those rules to a function, as torch.compile's
CUDA-graph mode (and tinygrad's TinyJit) does, so a PyTorch training loop keeps its shape:

    @tritensor.compile(mode="reduce-overhead")
    def step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

It sits above autograd (layer 4, beside nn/optim/amp, which it never imports): the function it
captures runs the forward, the backward, ``clip_grad_norm_``, the optimizer step and the
GradScaler, and all of them are recorded because all of them launch kernels on the current
stream; the graph machinery below it is ``runtime/graphs.py``.

What happens per call of the compiled function, keyed by the *signature* of its arguments
(each tensor's shape, dtype, device and requires_grad; every other argument by value, or by
identity for objects such as modules):

1. A new signature's first call runs ``fn`` eagerly on a side stream: a warm-up that compiles
   and autotunes its kernels, fills the caching allocator and the address tables. It watches
   for host syncs (``.item()``, ``.cpu()``, ``print(t)``, a data-dependent shape, a
   synchronize): one means a capture would be refused, so the function stays eager from then
   on, with one warning naming the op and the line that ran it.
2. Its second call copies the tensor arguments into static buffers and captures ``fn`` on the
   side stream into a CUDA graph (its own private memory pool), then replays it once: a capture
   records work without running it, so the replay is what computes this call.
3. Later calls copy the tensor arguments into the static buffers and replay: one dict lookup,
   one ``copy_`` per tensor argument, one graph launch (``{"graph_launch": 1}`` plus the copies
   in ``tritensor.runtime.sim.counting()``).

Outputs are the graph's static output tensors, as torch.compile's CUDA graphs return them: the
same tensors at every replay, **overwritten by the next call** of the compiled function (torch:
"CUDAGraphs ... accessing tensor output of CUDAGraphs that has been overwritten by a subsequent
run"). Keep a result across calls with ``.clone()`` (or ``.item()`` outside the function).

Gradients flow out of it, as out of torch.compile's: when grad mode is on and the outputs require
grad (a compiled forward whose backward runs outside, ``loss = F.mse_loss(step(x), y);
loss.backward()``), the capture also records the backward of the outputs, to the tensor arguments
that require grad and to every leaf the outputs came from (a model's parameters: found from the
warm-up's autograd graph), as a second graph in the first one's pool, the way
``tritensor.cuda.make_graphed_callables`` graphs a module. The outputs are then those of an
autograd node (``GraphedBackward``) whose backward copies the incoming gradients in and replays
the second graph; the warm-up runs that backward once too (``autograd.grad``, nothing accumulated)
so its kernels are compiled before the capture. Call the backward of one call's outputs before
the next call: the next call overwrites what it reads. Grad mode is part of a call's signature
(a step under ``no_grad`` gets a graph of its own). Without outputs that require grad, the outputs
are detached and the backward run inside the function is captured with the rest. The gradients
that backward leaves in ``.grad`` are the graph's too: with ``zero_grad(set_to_none=True)``
(torch's default) backward makes them during the capture, from the graph's pool, and every replay
writes them again, as torch's CUDA graphs do; the multi-tensor kernels that read them
(``clip_grad_norm_``, the optimizers, GradScaler) read their addresses from tables the graph copies
in itself (``runtime/launch.py: _device_table``).

Falling back to eager, with one warning each, as torch.compile does:

* a capture refused (``tritensor.cuda.CaptureError``: a host sync, a data-dependent shape, a
  kernel first launched during the capture): the function is eager from then on. The call
  whose capture failed runs ``fn`` again eagerly (no captured kernel ran) and returns its
  result. The host-side state ``fn`` changed before the refused op is not rolled back: most
  such ops are caught by the warm-up's watch before any capture;
* a random op inside ``fn`` (tritensor's generator keeps its offset on the host, so a replay
  would draw the same numbers again): the call that captured it replays once, with the numbers
  eager would have drawn, and the function is eager from then on;
* more than ``cache_size_limit`` signatures (torch's ``recompile_limit``, 8): new signatures run
  eagerly; the captured ones keep replaying;
* tensor arguments that live on the CPU, or an argument that cannot be hashed: that call runs
  eagerly;
* CPU mode (no device: nothing to capture): ``fn`` runs eagerly, and the first call says so.

What torch's signature has and tritensor does not use: ``backend`` (``"inductor"`` and
``"cudagraphs"`` both capture; ``"eager"`` and ``"aot_eager"`` run eagerly; there is no graph
of Python ops to hand to a custom backend), ``dynamic`` (a graph has fixed shapes: every new
shape is captured on its own, as ``dynamic=False``), ``options`` (only ``"triton.cudagraphs"``
is read; tritensor's kernels are already Triton). ``mode="default"`` and
``"max-autotune-no-cudagraphs"`` run eagerly: tritensor fuses nothing, CUDA graphs are what it
adds. ``fullgraph=True`` raises the CaptureError instead of falling back.

Random ops passed their own ``generator=`` are not watched (only the default generator is).
Ops that read a device value on the host in eager mode keep a step eager (the warm-up names
them): today ``F.cross_entropy``/``nll_loss`` with class-index targets, which check the targets
and count the non-ignored ones on the host (torch checks on the device). A synchronize inside
``fn`` is not seen by the warm-up's watch: the capture refuses it (the mid-capture fallback).
"""
from __future__ import annotations

import functools
import sys
import traceback
import warnings
import weakref

from .autograd import graph as autograd_graph
from .autograd.engine import grad
from .autograd.grad_mode import _state as _grad_mode, no_grad
from .autograd.graphed import _function as graphed_function
from .core.factories import empty_like, ones_like
from .core.generator import default_generator
from .core.tensor import Tensor
from .runtime import cuda, graphs, memory, mode

__all__ = ["compile", "reset"]

_MODES = {"default": False, "reduce-overhead": True, "max-autotune": True, "max-autotune-no-cudagraphs": False}
_BACKENDS = {"inductor": True, "cudagraphs": True, "eager": False, "aot_eager": False}
_KNOWN_OPTIONS = ("triton.cudagraphs",)
_WARMUP_CALLS = 1  # per signature: torch's CUDA-graph trees warm up once too
_compiled: weakref.WeakSet = weakref.WeakSet()  # for reset(); a compiled function dies with its last user


class _Uncapturable(Exception):
    """A call that cannot be captured, for a reason that concerns this call only."""


def compile(model=None, *, fullgraph: bool = False, dynamic=None, backend="inductor", mode: str | None = None,
            options: dict | None = None, disable: bool = False, cache_size_limit: int = 8):
    """``torch.compile``: ``fn`` whose calls are captured into CUDA graphs and replayed (see the module).

    Usable as ``tritensor.compile(fn, mode=...)`` and as a decorator, with or without arguments.
    ``cache_size_limit``: how many argument signatures get a graph of their own before new ones
    run eagerly (torch's ``torch._dynamo.config.recompile_limit``, 8)."""
    if mode is not None and options is not None:
        raise RuntimeError("compile: either mode or options can be specified, but both can't be specified at "
                           "the same time.")
    if mode is None:
        mode = "default" if options is None else "reduce-overhead"
    if not isinstance(mode, str) or mode not in _MODES:
        raise ValueError(f"compile: argument 'mode' must be one of {sorted(_MODES)}, got {mode!r}")
    if callable(backend) and not isinstance(backend, str):
        raise ValueError("compile: argument 'backend' as a callable is not supported: tritensor has no graph of "
                         f"Python ops to hand it; use one of {sorted(_BACKENDS)}")
    if backend not in _BACKENDS:
        raise ValueError(f"compile: argument 'backend' must be one of {sorted(_BACKENDS)}, got {backend!r}")
    if options is not None:
        if not isinstance(options, dict):
            raise TypeError(f"compile: argument 'options' must be a dict, got {type(options).__name__}")
        if "triton.cudagraphs" in options and not isinstance(options["triton.cudagraphs"], bool):
            raise TypeError("compile: options['triton.cudagraphs'] must be a bool")
    if dynamic not in (None, True, False):
        raise TypeError(f"compile: argument 'dynamic' must be None, True or False, got {dynamic!r}")
    for name, value in (("fullgraph", fullgraph), ("disable", disable)):
        if not isinstance(value, bool):
            raise TypeError(f"compile: argument '{name}' must be a bool, got {type(value).__name__}")
    if isinstance(cache_size_limit, bool) or not isinstance(cache_size_limit, int) or cache_size_limit < 0:
        raise ValueError(f"compile: argument 'cache_size_limit' must be an int >= 0, got {cache_size_limit!r}")
    graphed = _MODES[mode] and _BACKENDS[backend]
    if options is not None and "triton.cudagraphs" in options:
        graphed = options["triton.cudagraphs"] and _BACKENDS[backend]

    def wrap(fn):
        if not callable(fn):
            raise TypeError(f"compile: argument 'model' must be callable, got {type(fn).__name__}")
        if disable:
            return fn
        compiled = CompiledFunction(fn, graphed=graphed, fullgraph=fullgraph, cache_size_limit=cache_size_limit)
        _compiled.add(compiled)
        return compiled

    return wrap if model is None else wrap(model)


def reset() -> None:
    """``torch.compiler.reset()``: every compiled function forgets its graphs and warm-ups (and
    whether it fell back to eager); the next calls warm up and capture again."""
    for c in _compiled:
        c._reset()


class _Graph:
    """One captured signature: its graph, the static tensors its inputs are copied into, and the
    static outputs every replay overwrites. A differentiable one (outputs that require grad) also
    has ``fn``, the autograd Function whose forward replays the graph and whose backward replays
    the backward graph, applied to the tensors gradients flow to: the arguments that require grad
    (it copies them in itself) and ``leaves``."""

    __slots__ = ("graph", "static", "out", "fn", "grad_args", "leaves")

    def __init__(self, graph, static, out, fn=None, grad_args=(), leaves=()):
        self.graph, self.static, self.out, self.fn = graph, static, out, fn
        self.grad_args, self.leaves = grad_args, leaves  # positions of the tensor arguments that require grad


class CompiledFunction:
    """What ``tritensor.compile(fn)`` returns: call it as ``fn``; ``__wrapped__`` is ``fn``."""

    def __init__(self, fn, *, graphed: bool, fullgraph: bool, cache_size_limit: int):
        functools.update_wrapper(self, fn)
        self._fn, self._graphed, self._fullgraph, self._limit = fn, graphed, fullgraph, cache_size_limit
        # A partial has no name of its own: its function's.
        self._name = getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", type(fn).__name__)
        self._reset()

    def _reset(self) -> None:
        self._graphs: dict = {}  # signature -> _Graph
        self._seen: dict = {}  # signature -> warm-up calls made
        self._eager = not self._graphed  # the whole function runs eagerly from now on
        self._warned: set = set()

    def __get__(self, obj, objtype=None):  # a compiled method binds like the function it wraps
        return self if obj is None else functools.partial(self.__call__, obj)

    def __call__(self, *args, **kwargs):
        if self._eager:
            return self._fn(*args, **kwargs)
        tensors: list = []
        try:
            # Grad mode decides whether the outputs are on the autograd graph: a graph of each.
            key = (_grad_mode.enabled, _signature(args, kwargs, tensors))
            entry = self._graphs.get(key)
        except TypeError as e:  # an argument that cannot be hashed: no signature
            return self._run_eager(args, kwargs, "unhashable", f"an argument cannot be a graph's key ({e})")
        if entry is not None:  # the steady state: copy the inputs in, replay
            fn = entry.fn
            with no_grad():
                for static, given in zip(entry.static, tensors):
                    if static is not given and not (fn is not None and given.requires_grad):
                        static.copy_(given)
            if fn is not None:  # outputs on the autograd graph: the Function replays the forward graph
                return _replace(entry.out, iter(fn.apply(*[tensors[i] for i in entry.grad_args], *entry.leaves)))
            entry.graph.replay()
            return entry.out
        return self._first_calls(key, tensors, args, kwargs)

    # ----- the cold path: warm-ups, captures, fallbacks -----------------------------------------------------
    def _first_calls(self, key, tensors, args, kwargs):
        if not mode.GPU:
            self._eager = True
            self._warn("cpu", "tritensor runs in CPU mode (no CUDA device), so there is nothing to capture: "
                              f"{self._name} runs eagerly")
            return self._fn(*args, **kwargs)
        for t in tensors:
            if t.device.type != "cuda":
                return self._run_eager(args, kwargs, "cpu tensor", f"a tensor argument is on {t.device}, and a "
                                       "graph replays device work only: that call runs eagerly")
        warmups = self._seen.get(key)
        if warmups is None:
            if len(self._seen) >= self._limit:
                return self._run_eager(args, kwargs, "limit", f"{self._name} has been captured for "
                                       f"cache_size_limit={self._limit} argument signatures; calls with new ones "
                                       "run eagerly")
            warmups = 0
        if warmups < _WARMUP_CALLS:
            self._seen[key] = warmups + 1
            return self._warm_up(tensors, args, kwargs)
        return self._capture(key, tensors, args, kwargs)

    def _warm_up(self, tensors, args, kwargs):
        """Run ``fn`` eagerly on the capture stream, watching for what a capture would refuse."""
        cur = cuda.current_stream()
        side = _side_stream(cur.device.index)
        side.wait_stream(cur)
        syncs: list = []
        rng = default_generator.get_state().tolist()

        def watch(what):
            if not syncs:
                syncs.append((what, _user_line(traceback.extract_stack()[:-1])))

        memory.watch = watch
        try:
            with cuda.stream(side):
                out = self._fn(*args, **kwargs)
                outs = _differentiable(_tensors_of(out))
                if outs and not syncs:  # the backward graph's kernels, launched once outside its capture
                    surface = [t for t in tensors if t.requires_grad] + _leaves(outs, tensors)
                    if surface:
                        grad(outs, surface, [ones_like(t) for t in outs], retain_graph=True, allow_unused=True)
        finally:
            memory.watch = None
            cur.wait_stream(side)
        for t in _tensors_of(out):
            if t.device.type == "cuda":
                t.record_stream(cur)  # made on the side stream, read on this one: its free waits for both
        if syncs:
            what, line = syncs[0]
            why = f"{what} {line}cannot be captured into a CUDA graph (the host waits for the device)"
            if self._fullgraph:
                raise memory.CaptureError(f"tritensor.compile(fullgraph=True): {self._name}: {why}")
            self._fall_back(why)
        elif default_generator.get_state().tolist() != rng:
            self._fall_back("a random op draws from tritensor's default generator, whose offset a graph would "
                            "replay unchanged (the same numbers at every step)")
        return out

    def _capture(self, key, tensors, args, kwargs):
        with no_grad():  # outside the graph's pool: the graph only reads them
            static = [t.clone().requires_grad_() if t.requires_grad else t.clone() for t in tensors]
        g = graphs.CUDAGraph()
        rng = default_generator.get_state().tolist()
        side = _side_stream(cuda.current_stream().device.index)
        fn = None
        try:
            with graphs.graph(g, stream=side):
                out = self._fn(*_replace(args, iter(static)), **_replace(kwargs, iter(static)))
            flat = list(_tensors_of(out))
            outs = _differentiable(flat)
            surface = [t for t in static if t.requires_grad] + _leaves(outs, static) if outs else []
            if surface:
                # Gradients flow out: the backward of the outputs to every tensor they came from
                # (the tensor arguments that require grad, the leaves the function reads, such as
                # a model's parameters) captured as a second graph, in the first one's pool; an
                # autograd Function replays the first at each call and the second at its backward.
                grad_outs = [empty_like(t) if t.requires_grad else None for t in flat]
                bwd = graphs.CUDAGraph()
                with graphs.graph(bwd, pool=g.pool(), stream=side):
                    got = iter(grad(outs, surface, [o for o in grad_outs if o is not None], allow_unused=True))
                grad_ins = [next(got) for _ in surface]
                fn = graphed_function(g, bwd, surface, flat, grad_outs, grad_ins)
        except memory.CaptureError as e:
            if self._fullgraph:
                raise
            self._fall_back(f"{_first_line(e)} {_user_line(traceback.extract_tb(e.__traceback__))}"
                            "(the capture was refused)")
            return self._fn(*args, **kwargs)  # nothing captured ran: this call's result, computed eagerly
        grad_args = tuple(i for i, t in enumerate(tensors) if t.requires_grad)
        if fn is not None:  # replays the forward graph (the capture recorded it without running it)
            out = _replace(out, iter(fn.apply(*[tensors[i] for i in grad_args], *surface[len(grad_args):])))
        else:
            out = _detached(out)
            g.replay()  # the capture recorded the call without running it
        if default_generator.get_state().tolist() != rng:
            # This replay drew what eager would have; the next one would draw the same numbers again.
            self._fall_back("a random op draws from tritensor's default generator, whose offset a graph would "
                            "replay unchanged (the same numbers at every step)")
            return out
        if fn is None:
            self._graphs[key] = _Graph(g, static, out)
        else:
            self._graphs[key] = _Graph(g, static, out, fn, grad_args, tuple(surface[len(grad_args):]))
        return out

    def _fall_back(self, why: str) -> None:
        self._eager = True
        self._graphs.clear()
        self._warn("fallback", f"{self._name} runs eagerly from now on: {why}")

    def _run_eager(self, args, kwargs, kind: str, why: str):
        self._warn(kind, why)
        return self._fn(*args, **kwargs)

    def _warn(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(f"tritensor.compile: {message}", UserWarning, stacklevel=4)


_side_streams: dict = {}


def _side_stream(device: int):
    """One side stream per device for every compiled function's warm-ups and captures."""
    s = _side_streams.get(device)
    if s is None:
        s = _side_streams[device] = cuda.Stream(device)
    return s


def _signature(obj, kwargs, tensors: list):
    """The key of a call: tensors by (shape, dtype, device), the rest by value (hash, or identity
    for objects without a value hash); ``tensors`` gets the tensors in order."""
    parts: list = []
    _flatten(obj, tensors, parts)
    if kwargs:
        parts.append(tuple(kwargs))
        _flatten(tuple(kwargs.values()), tensors, parts)
    key = tuple(parts)
    hash(key)  # TypeError for an unhashable argument
    return key


def _flatten(obj, tensors: list, parts: list) -> None:
    if isinstance(obj, Tensor):
        tensors.append(obj)
        parts.append((obj.shape, obj.dtype, obj.device, obj.requires_grad))
    elif type(obj) in (tuple, list):
        parts.append((type(obj), len(obj)))
        for o in obj:
            _flatten(o, tensors, parts)
    elif type(obj) is dict:
        parts.append((dict, tuple(obj)))
        for o in obj.values():
            _flatten(o, tensors, parts)
    else:
        parts.append(obj)


def _replace(obj, static):
    """``obj`` with each tensor replaced by the next static tensor (in ``_flatten``'s order)."""
    if isinstance(obj, Tensor):
        return next(static)
    if type(obj) in (tuple, list):
        return type(obj)(_replace(o, static) for o in obj)
    if type(obj) is dict:
        return {k: _replace(v, static) for k, v in obj.items()}
    return obj


def _differentiable(tensors) -> list:
    """The outputs whose gradients can flow out: they require grad and their autograd graph is
    still there (a step that ran its backward inside returns a loss whose graph is freed)."""
    return [t for t in tensors if t.requires_grad and (t.grad_fn is None or not t.grad_fn._released)]


def _leaves(outputs, exclude) -> list:
    """The leaf tensors the outputs' autograd graph accumulates into (a model's parameters ...), in
    the order a walk from the outputs meets them, less those in ``exclude`` (the arguments)."""
    skip = {id(t) for t in exclude}
    seen, found = set(), []
    stack = [t.grad_fn for t in reversed(outputs) if t.grad_fn is not None]
    for t in outputs:
        if t.grad_fn is None and t.requires_grad and id(t) not in skip:  # an output that is a leaf itself
            skip.add(id(t))
            found.append(t)
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if isinstance(node, autograd_graph.AccumulateGrad):
            v = node.variable
            if id(v) not in skip:
                skip.add(id(v))
                found.append(v)
            continue
        stack.extend(e[0] for e in reversed(node._edges) if e)
    return found


def _tensors_of(obj):
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            yield from _tensors_of(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors_of(o)


def _detached(obj):
    """The static outputs, detached: a replay rewrites them; no autograd graph reaches past it."""
    if isinstance(obj, Tensor):
        return obj.detach()
    if type(obj) in (tuple, list):
        return type(obj)(_detached(o) for o in obj)
    if type(obj) is dict:
        return {k: _detached(v) for k, v in obj.items()}
    return obj


def _first_line(e: BaseException) -> str:
    text = str(e)
    return text.split(" cannot run while", 1)[0]


def _user_line(frames) -> str:
    """'at file:line (code) ' for the innermost frame outside tritensor's own modules: the user's
    line that ran the op a capture refuses."""
    library = {getattr(m, "__file__", None) for name, m in list(sys.modules.items())
               if name == "tritensor" or name.startswith("tritensor.")}
    for f in reversed(frames):
        if f.filename not in library:
            return f"at {f.filename}:{f.lineno} ({(f.line or '').strip()}) "
    return ""
