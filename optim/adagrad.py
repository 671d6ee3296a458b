"""Adagrad (torch's rule; one fused kernel per parameter per step, ``triton_kernels/optim.py``):

    clr = lr / (1 + (step - 1) lr_decay);  s += d^2;  p -= clr d / (sqrt(s) + eps)

State keys as torch: ``step`` and ``sum`` (starting at ``initial_accumulator_value``).
"""
from __future__ import annotations

from ..autograd.grad_mode import no_grad
from ..core.ops import optim as _core
from .optimizer import Optimizer, state_like


class Adagrad(Optimizer):
    """torch.optim.Adagrad: one fused kernel per parameter per step (the rule in the module docstring), torch's
    defaults, checks and state keys; ``differentiable=True`` is refused."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if differentiable:
            raise NotImplementedError("Adagrad: differentiable=True is not supported")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                                      maximize=maximize, differentiable=False, fused=fused))
        for group in self.param_groups:  # torch creates Adagrad's state at construction
            for p in group["params"]:
                self.state[p] = _new_state(p, group)

    @no_grad()
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            for p, g, state in self._with_grads(group, _new_state):
                state["step"] += 1
                _core.adagrad_step_(p, g, state["sum"], step=state["step"], lr=group["lr"],
                                    lr_decay=group["lr_decay"], eps=group["eps"],
                                    weight_decay=group["weight_decay"], maximize=group["maximize"])
                p._bump_version()
        return loss


def _new_state(p, group) -> dict:
    return {"step": 0, "sum": state_like(p, group["initial_accumulator_value"])}
