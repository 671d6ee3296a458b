"""Module backward hooks (``register_full_backward_hook``/``register_full_backward_pre_hook``).

A module's backward hook wants the gradients with respect to the module's inputs and outputs,
which no single graph node holds: a module is many ops. As torch does, the call is bracketed by
two identity Functions, one over the positional tensor inputs and one over the outputs. Backward
reaches the outputs' identity first: its pre-hook runs the backward pre-hooks (which may replace
``grad_output``) and keeps ``grad_output``; the inputs' identity runs last, and its hook calls
``hook(module, grad_input, grad_output)``, whose return replaces ``grad_input``. When no input
requires grad the hooks fire at the outputs, with ``grad_input`` all ``None`` (torch warns so).

A module without backward hooks pays one attribute test per call (``Module.__call__``).
"""
from __future__ import annotations

import warnings

from ...autograd.function import Function
from ...core.tensor import Tensor

_NO_INPUT_GRAD_WARNING = (
    "Full backward hook is firing when gradients are computed with respect to module outputs since no inputs "
    "require gradients. See https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
    "#torch.nn.Module.register_full_backward_hook for more details.")


class BackwardHookFunction(Function):
    """Identity over tensors: its node is where a module's backward hooks see the gradients."""

    @staticmethod
    def forward(ctx, *tensors):
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        """The identity: gradients pass through unchanged; the hooks registered on this node are where the module's
        backward hooks see (and may replace) them."""
        return grads


class BackwardHook:
    """One call of a module with backward hooks: wraps its inputs and outputs (see above)."""

    def __init__(self, module, user_hooks, user_pre_hooks):
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.grad_outputs = None
        self.n_inputs = 0
        self.input_positions = ()
        self.inputs_need_grad = False
        self.input_floating = ()

    def setup_input_hook(self, args: tuple) -> tuple:
        """Wrap the call's tensor arguments in one identity node whose hook runs the module's full backward hooks
        with the gradients of those inputs; returns the arguments to call forward with (unchanged when no input needs
        grad or no hook is registered)."""
        self.n_inputs = len(args)
        self.input_positions = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
        tensors = tuple(args[i] for i in self.input_positions)
        self.input_floating = tuple(t.dtype.is_floating_point for t in tensors)
        self.inputs_need_grad = any(t.requires_grad for t in tensors)
        if not self.inputs_need_grad or not self.user_hooks:
            return args
        wrapped = BackwardHookFunction.apply(*tensors)
        wrapped[0].grad_fn.register_hook(self._input_hook)
        out = list(args)
        for i, t in zip(self.input_positions, wrapped):
            out[i] = t
        return tuple(out)

    def setup_output_hook(self, result):
        """Wrap the outputs in one identity node whose pre-hook sees the output gradients first (running the backward
        pre-hooks, which may replace them); returns the outputs to give the caller."""
        is_tuple = isinstance(result, tuple)
        outs = result if is_tuple else (result,)
        if not outs or not all(isinstance(o, Tensor) for o in outs) or not any(o.requires_grad for o in outs):
            return result
        wrapped = BackwardHookFunction.apply(*outs)
        wrapped[0].grad_fn.register_prehook(self._output_hook)
        return wrapped if is_tuple else wrapped[0]

    def _output_hook(self, grad_outputs):
        grad_outputs = tuple(grad_outputs)
        for hook in list(self.user_pre_hooks.values()):
            r = hook(self.module, grad_outputs)
            if r is None:
                continue
            if len(r) != len(grad_outputs):
                raise RuntimeError(f"Backward pre hook returned an invalid number of grad_output, got {len(r)}, but "
                                   f"expected {len(grad_outputs)}")
            grad_outputs = tuple(r)
        self.grad_outputs = grad_outputs
        if self.user_hooks and not self.inputs_need_grad:
            grad_inputs = (None,) * self.n_inputs
            warnings.warn(_NO_INPUT_GRAD_WARNING, stacklevel=1)
            for hook in list(self.user_hooks.values()):
                r = hook(self.module, grad_inputs, self.grad_outputs)
                if r is not None and not (isinstance(r, tuple) and all(g is None for g in r)):
                    raise RuntimeError("Backward hook for Modules where no input requires gradient should always "
                                       "return None or None for all gradients.")
        return grad_outputs

    def _input_hook(self, grads, grad_outputs_of_node):
        grad_input = [None] * self.n_inputs
        for i, g, floating in zip(self.input_positions, grads, self.input_floating):
            grad_input[i] = g if floating else None  # an index tensor has no gradient
        grad_input = tuple(grad_input)
        for hook in list(self.user_hooks.values()):
            r = hook(self.module, grad_input, self.grad_outputs)
            if r is None:
                continue
            if len(r) != len(grad_input):
                raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got {len(r)}, but "
                                   f"expected {len(grad_input)}")
            grad_input = tuple(r)
        return tuple(grad_input[i] for i in self.input_positions)
