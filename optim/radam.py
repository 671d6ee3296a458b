"""RAdam (torch's rule, Liu et al. 2019), written with tensor ops (``_tensor_ops.py`` says why
and what ``foreach``/``capturable``/``differentiable`` do):

    m = lerp(m, d, 1 - b1);  v = b2 v + (1 - b2) d^2;  m_hat = m / (1 - b1^t)
    rho_inf = 2 / (1 - b2) - 1;  rho_t = rho_inf - 2 t b2^t / (1 - b2^t)
    rho_t > 5:  r = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
                p -= lr m_hat r sqrt(1 - b2^t) / (sqrt(v) + eps)
    otherwise:  p -= lr m_hat

``weight_decay`` adds ``wd * p`` to ``d``, or with ``decoupled_weight_decay=True`` multiplies
``p`` by ``1 - lr * wd`` first. State as torch: ``step``, ``exp_avg``, ``exp_avg_sq``.
"""
from __future__ import annotations

import math

from ..autograd.grad_mode import no_grad
from ._tensor_ops import check_flags, check_lr_eps_betas_wd, direction, host_scalars
from .optimizer import Optimizer, state_like


class RAdam(Optimizer):
    """torch.optim.RAdam: Adam with the variance rectification of Liu et al., the rule in the module docstring;
    ``capturable``/``differentiable`` are refused."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False):
        check_lr_eps_betas_wd(lr, eps, betas, weight_decay)
        check_flags("RAdam", capturable, differentiable)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay, differentiable=differentiable))

    @no_grad()
    def step(self, closure=None):
        """One update of every parameter with a gradient (a few elementwise launches each); ``closure``'s loss is
        returned."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, (beta1, beta2), wd = group["lr"], group["betas"], group["weight_decay"]
            decoupled = group["decoupled_weight_decay"]
            for p, g, state in self._with_grads(group, _new_state):
                host_scalars(state, "step")
                d = direction(p, g, group, coupled_decay=not decoupled)
                state["step"] += 1
                t = state["step"]
                if decoupled and wd != 0:
                    p.mul_(1 - lr * wd)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.mul_(beta1).add_(d, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).add_(d * d, alpha=1 - beta2)
                bias_correction1 = 1 - beta1 ** t
                bias_correction2 = 1 - beta2 ** t
                rho_inf = 2 / (1 - beta2) - 1
                rho_t = rho_inf - 2 * t * (beta2 ** t) / bias_correction2
                if rho_t > 5.0:
                    rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                    denom = exp_avg_sq.sqrt().add_(group["eps"])
                    p.add_(exp_avg.div(denom),
                           alpha=-lr * rect * math.sqrt(bias_correction2) / bias_correction1)
                else:
                    p.add_(exp_avg, alpha=-lr / bias_correction1)
        return loss


def _new_state(p, group) -> dict:
    return {"step": 0, "exp_avg": state_like(p), "exp_avg_sq": state_like(p)}
