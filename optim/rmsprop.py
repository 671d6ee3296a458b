"""RMSprop (torch's rule; one fused kernel per parameter per step, ``triton_kernels/optim.py``):

    v = alpha v + (1 - alpha) d^2;   centered: a = lerp(a, d, 1 - alpha), denom = sqrt(v - a^2) + eps
    momentum: b = momentum b + d / denom, p -= lr b;   else p -= lr d / denom

State keys as torch: ``step``, ``square_avg``, ``momentum_buffer`` (momentum > 0), ``grad_avg`` (centered).
``foreach`` and ``capturable`` are accepted and stored and change nothing: the rule reads no step
count, so a captured step replays correctly, and each parameter's step is one kernel either way.
"""
from __future__ import annotations

from ..autograd.grad_mode import no_grad
from ..core.ops import optim as _core
from .optimizer import Optimizer, state_like


class RMSprop(Optimizer):
    """torch.optim.RMSprop: one fused kernel per parameter per step (the rule in the module docstring, ``centered``
    and ``momentum`` included); ``differentiable=True`` is refused."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        if differentiable:
            raise NotImplementedError("RMSprop: differentiable=True is not supported")
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=bool(centered),
                                      weight_decay=weight_decay, maximize=maximize, foreach=foreach,
                                      capturable=capturable, differentiable=False))

    @no_grad()
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            for p, g, state in self._with_grads(group, _new_state):
                state["step"] += 1
                _core.rmsprop_step_(p, g, state["square_avg"], lr=group["lr"], alpha=group["alpha"],
                                    eps=group["eps"], weight_decay=group["weight_decay"],
                                    momentum=group["momentum"], centered=group["centered"],
                                    maximize=group["maximize"], grad_avg=state.get("grad_avg"),
                                    momentum_buffer=state.get("momentum_buffer"))
                p._bump_version()
        return loss


def _new_state(p, group) -> dict:
    state = {"step": 0, "square_avg": state_like(p)}
    if group["momentum"] > 0:
        state["momentum_buffer"] = state_like(p)
    if group["centered"]:
        state["grad_avg"] = state_like(p)
    return state
