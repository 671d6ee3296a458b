"""Rprop, resilient backpropagation (torch's rule, Riedmiller and Braun 1993), written with tensor
ops (``_tensor_ops.py`` says why and what ``foreach``/``capturable``/``differentiable`` do):

    s = sign(d * prev):  step_size *= eta+ where s > 0, eta- where s < 0; clamped to step_sizes
    d = 0 where s < 0;   p -= sign(d) * step_size;   prev = d

State as torch: ``step``, ``prev``, ``step_size`` (starting at ``lr``).
"""
from __future__ import annotations

from ..autograd.grad_mode import no_grad
from ..core.functional import where
from ._tensor_ops import check_flags, direction, host_scalars
from .optimizer import Optimizer, state_like


class Rprop(Optimizer):
    """torch.optim.Rprop: per-element step sizes grown or shrunk by the gradient's sign, the rule in the module
    docstring; ``capturable``/``differentiable`` are refused."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
                 maximize=False, differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        check_flags("Rprop", capturable, differentiable)
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes), foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, capturable=capturable))

    @no_grad()
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            etaminus, etaplus = group["etas"]
            step_size_min, step_size_max = group["step_sizes"]
            for p, g, state in self._with_grads(group, _new_state):
                host_scalars(state, "step")
                d = direction(p, g, group, coupled_decay=False)
                state["step"] += 1
                sign = d.mul(state["prev"]).sign()
                sign = where(sign.gt(0), etaplus, sign)
                sign = where(sign.lt(0), etaminus, sign)
                sign = where(sign.eq(0), 1.0, sign)
                state["step_size"].mul_(sign).clamp_(step_size_min, step_size_max)
                d = where(sign.eq(etaminus), 0.0, d)
                p.sub_(d.sign().mul_(state["step_size"]))
                state["prev"].copy_(d)
        return loss


def _new_state(p, group) -> dict:
    return {"step": 0, "prev": state_like(p), "step_size": state_like(p, group["lr"])}
