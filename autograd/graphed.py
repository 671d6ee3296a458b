"""``make_graphed_callables`` (PyTorch's ``torch.cuda.make_graphed_callables``): a callable's forward
and backward each captured once into a CUDA graph, replayed at every call.

It sits above autograd because the graphed callable is an autograd ``Function``: its forward
copies the inputs into the static inputs the forward graph was captured with and replays it; its
backward copies the incoming gradients into the static gradient outputs the backward graph was
captured with (``autograd.grad`` of the static outputs) and replays that. The captures follow
PyTorch's order and rules: ``num_warmup_iters`` warm-up calls (forward and backward) on a side
stream first, every callable's forward graph in order, then the backward graphs in reverse
order, all in one shared private memory pool. A module's parameters join its inputs; while the
module is in eval mode the graphed module calls its original forward.
"""
from __future__ import annotations

from ..core.factories import empty_like, ones_like
from ..core.tensor import Tensor
from ..runtime import cuda, graphs
from .engine import grad
from .function import Function
from .grad_mode import no_grad


def _is_module(c) -> bool:
    return callable(c) and hasattr(c, "parameters") and hasattr(c, "training")


def _check(callables, sample_args):
    for i, (c, args) in enumerate(zip(callables, sample_args)):
        if not callable(c):
            raise TypeError(f"make_graphed_callables: callables[{i}] is not callable ({type(c).__name__})")
        if not isinstance(args, tuple) or not all(isinstance(a, Tensor) for a in args):
            raise TypeError(f"make_graphed_callables: sample_args[{i}] must be a tuple of Tensors (only Tensor "
                            "arguments are allowed)")
        if _is_module(c):
            hooks = [getattr(c, n, None) for n in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks")]
            if any(hooks):
                raise RuntimeError(f"make_graphed_callables: callables[{i}] has hooks registered; graphing them is "
                                   "not supported (PyTorch refuses too)")
            if any(not p.requires_grad for p in c.parameters()):
                raise RuntimeError(f"make_graphed_callables: every parameter of callables[{i}] must require grad")


def make_graphed_callables(callables, sample_args, num_warmup_iters: int = 3, allow_unused_input: bool = False,
                           pool=None):
    """Graphed versions of ``callables`` (a callable or a tuple of them; modules get a graphed forward)."""
    just_one = not isinstance(callables, tuple)
    if just_one:
        callables, sample_args = (callables,), (sample_args,)
    if not isinstance(sample_args, tuple) or len(sample_args) != len(callables):
        raise TypeError("make_graphed_callables: sample_args must hold one tuple of Tensors per callable")
    if isinstance(num_warmup_iters, bool) or not isinstance(num_warmup_iters, int) or num_warmup_iters < 0:
        raise ValueError(f"make_graphed_callables: num_warmup_iters must be an int >= 0, got {num_warmup_iters!r}")
    _check(callables, sample_args)
    graphs._require_gpu("make_graphed_callables")

    params = [tuple(c.parameters()) if _is_module(c) else () for c in callables]
    surfaces = [tuple(args) + ps for args, ps in zip(sample_args, params)]
    fwd = [graphs.CUDAGraph() for _ in callables]
    bwd = [graphs.CUDAGraph() for _ in callables]
    pool = pool if pool is not None else graphs.graph_pool_handle()

    def backward_of(outputs, surface, grad_outs):
        outs = [o for o in outputs if o.requires_grad]
        ins = [t for t in surface if t.requires_grad]
        gs = [g for o, g in zip(outputs, grad_outs) if o.requires_grad]
        got = grad(outs, ins, grad_outputs=gs, only_inputs=True, allow_unused=allow_unused_input)
        it = iter(got)
        return tuple(next(it) if t.requires_grad else None for t in surface)

    cuda.synchronize()
    side = cuda.Stream()
    side.wait_stream(cuda.current_stream())
    with cuda.stream(side):
        for c, args, surface in zip(callables, sample_args, surfaces):
            for _ in range(num_warmup_iters):
                outputs = _as_tuple(c(*args))
                backward_of(outputs, surface, [ones_like(o) for o in outputs])
    cuda.current_stream().wait_stream(side)

    static_outputs, static_grad_outs, static_grad_ins = [], [None] * len(callables), [None] * len(callables)
    for c, args, g in zip(callables, sample_args, fwd):
        with graphs.graph(g, pool=pool):
            static_outputs.append(_as_tuple(c(*args)))
    for i in reversed(range(len(callables))):
        outs = static_outputs[i]
        static_grad_outs[i] = tuple(empty_like(o) if o.requires_grad else None for o in outs)
        with graphs.graph(bwd[i], pool=pool):
            static_grad_ins[i] = backward_of(outs, surfaces[i], static_grad_outs[i])

    made = []
    for i, c in enumerate(callables):
        graphed = _function(fwd[i], bwd[i], surfaces[i], static_outputs[i], static_grad_outs[i], static_grad_ins[i])
        n_args = len(sample_args[i])

        def run(*user_args, _graphed=graphed, _params=params[i], _n=n_args, _single=len(static_outputs[i]) == 1):
            if len(user_args) != _n:
                raise TypeError(f"graphed callable: expected {_n} tensor arguments, got {len(user_args)}")
            out = _graphed.apply(*user_args, *_params)
            return out[0] if _single else out

        if _is_module(c):
            eager = c.forward
            c.forward = _train_or_eager(c, run, eager)
            made.append(c)
        else:
            made.append(run)
    return made[0] if just_one else tuple(made)


def _train_or_eager(module, graphed, eager):
    def forward(*args):
        return graphed(*args) if module.training else eager(*args)
    return forward


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _function(fwd_graph, bwd_graph, static_inputs, static_outputs, static_grad_outs, static_grad_ins):
    """The autograd Function that replays one callable's two graphs."""

    class Graphed(Function):
        @staticmethod
        def forward(ctx, *inputs):
            with no_grad():
                for static, given in zip(static_inputs, inputs):
                    if static.data_ptr() != given.data_ptr():
                        static.copy_(given)
            fwd_graph.replay()
            return tuple(o.detach() for o in static_outputs)

        @staticmethod
        def backward(ctx, *grads):
            with no_grad():
                for static, given in zip(static_grad_outs, grads):
                    if static is not None and given is not None and static.data_ptr() != given.data_ptr():
                        static.copy_(given)
            bwd_graph.replay()
            return tuple(g.detach() if g is not None else None for g in static_grad_ins)

    return Graphed
