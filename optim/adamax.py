"""Adamax (torch's rule: Adam with the infinity norm), written with tensor ops
(``_tensor_ops.py`` says why and what ``foreach``/``capturable``/``differentiable`` do):

    d = grad + wd p;  m = lerp(m, d, 1 - b1);  u = max(b2 u, |d| + eps)
    p -= lr / (1 - b1^t) * m / u

State as torch: ``step``, ``exp_avg``, ``exp_inf``.
"""
from __future__ import annotations

from ..autograd.grad_mode import no_grad
from ._tensor_ops import check_flags, check_lr_eps_betas_wd, direction, host_scalars
from .optimizer import Optimizer, state_like


class Adamax(Optimizer):
    """torch.optim.Adamax: Adam with the infinity norm, the rule in the module docstring;
    ``capturable``/``differentiable`` are refused."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        check_lr_eps_betas_wd(lr, eps, betas, weight_decay)
        check_flags("Adamax", capturable, differentiable)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, capturable=capturable))

    @no_grad()
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p, g, state in self._with_grads(group, _new_state):
                host_scalars(state, "step")
                d = direction(p, g, group)
                state["step"] += 1
                exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
                exp_avg.mul_(beta1).add_(d, alpha=1 - beta1)
                exp_inf.copy_(exp_inf.mul(beta2).maximum(d.abs().add_(group["eps"])))
                p.add_(exp_avg.div(exp_inf), alpha=-group["lr"] / (1 - beta1 ** state["step"]))
        return loss


def _new_state(p, group) -> dict:
    return {"step": 0, "exp_avg": state_like(p), "exp_inf": state_like(p)}
