"""SGD with momentum, dampening, Nesterov and weight decay (PyTorch's update rule):

    d = grad + wd * p;  b = momentum * b + (1 - dampening) * d  (b = d on the first step)
    d = d + momentum * b if nesterov else b;  p -= lr * d

``fused=True`` (PyTorch's fused path): the kernel takes ``GradScaler``'s found-inf flag and scale:
on inf/NaN nothing changes, otherwise the gradient is unscaled inside the update. The momentum
buffer is allocated zeroed: when the first step is skipped for inf/NaN the next one starts from
``b = 0`` (``b = (1 - dampening) * d``, the same as ``b = d`` for the default dampening 0;
PyTorch leaves the buffer uninitialised there).

``foreach`` is accepted and stored and changes nothing: torch chooses between a per-tensor loop
and multi-tensor kernels giving the same numbers; here each parameter's step is one fused kernel
either way. ``differentiable=True`` raises ``NotImplementedError`` (the step runs under no_grad).
"""
from __future__ import annotations

from ..autograd.grad_mode import no_grad
from ..core.ops import optim as _core
from .optimizer import _REQUIRED, Optimizer, state_like


class SGD(Optimizer):
    """torch.optim.SGD with momentum, dampening, Nesterov and weight decay: one fused kernel per parameter per step
    (the module docstring gives the rule and what ``fused`` and ``foreach`` do)."""

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        if lr is not _REQUIRED and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        if differentiable:
            raise NotImplementedError("SGD: differentiable=True is not supported")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))
        self._init_fused(fused)

    @no_grad()
    def step(self, closure=None):
        """One update of every parameter with a gradient (one kernel each); ``closure``'s loss is returned."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            fused = bool(group.get("fused"))
            amp_inputs = self._scaler_inputs(group)
            for p in group["params"]:
                g = self._grads(p, group)
                if g is None:
                    continue
                state = self.state.setdefault(p, {})
                buf = state.get("momentum_buffer")
                first = buf is None
                if group["momentum"] != 0 and first:
                    # laid out as p; zeroed for a fused step, which may skip the first update on inf
                    buf = state["momentum_buffer"] = state_like(p) if fused else p.detach().clone()
                found_inf, grad_scale = amp_inputs(p.device)
                _core.sgd_step_(p, g, buf, lr=group["lr"], weight_decay=group["weight_decay"],
                                momentum=group["momentum"], dampening=group["dampening"], nesterov=group["nesterov"],
                                maximize=group["maximize"], first=first, found_inf=found_inf, grad_scale=grad_scale)
                self._write_back(p, g, grad_scale)
                p._bump_version()
        return loss
