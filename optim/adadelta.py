"""Adadelta (torch's rule, Zeiler 2012), written with tensor ops (``_tensor_ops.py`` says why
and what ``foreach``/``capturable``/``differentiable`` do):

    d = grad + wd p;  v = rho v + (1 - rho) d^2
    delta = sqrt(u + eps) / sqrt(v + eps) * d;  u = rho u + (1 - rho) delta^2;  p -= lr delta

State as torch: ``step``, ``square_avg`` (v), ``acc_delta`` (u).
"""
from __future__ import annotations

from ..autograd.grad_mode import no_grad
from ._tensor_ops import check_flags, direction, host_scalars
from .optimizer import Optimizer, state_like


class Adadelta(Optimizer):
    """torch.optim.Adadelta: the rule in the module docstring, torch's defaults, checks and state keys;
    ``capturable``/``differentiable`` are refused."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        check_flags("Adadelta", capturable, differentiable)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      capturable=capturable, foreach=foreach, differentiable=differentiable))

    @no_grad()
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            rho, eps = group["rho"], group["eps"]
            for p, g, state in self._with_grads(group, _new_state):
                host_scalars(state, "step")
                d = direction(p, g, group)
                state["step"] += 1
                square_avg, acc_delta = state["square_avg"], state["acc_delta"]
                square_avg.mul_(rho).add_(d * d, alpha=1 - rho)
                delta = acc_delta.add(eps).sqrt_().div_(square_avg.add(eps).sqrt_()).mul_(d)
                acc_delta.mul_(rho).add_(delta * delta, alpha=1 - rho)
                p.add_(delta, alpha=-group["lr"])
        return loss


def _new_state(p, group) -> dict:
    return {"step": 0, "square_avg": state_like(p), "acc_delta": state_like(p)}
