"""NAdam (torch's rule, Dozat 2016 with torch's momentum schedule), written with tensor ops
(``_tensor_ops.py`` says why and what ``foreach``/``capturable``/``differentiable`` do):

    mu_t = b1 (1 - 0.5 * 0.96^(t * momentum_decay));  mu_product *= mu_t
    m = lerp(m, d, 1 - b1);  v = b2 v + (1 - b2) d^2;  denom = sqrt(v / (1 - b2^t)) + eps
    p -= lr (1 - mu_t) / (1 - mu_product) d / denom + lr mu_{t+1} / (1 - mu_product mu_{t+1}) m / denom

``weight_decay`` adds ``wd * p`` to ``d``, or with ``decoupled_weight_decay=True`` multiplies
``p`` by ``1 - lr * wd`` first (NAdamW). State as torch: ``step``, ``mu_product``, ``exp_avg``,
``exp_avg_sq`` (``step`` and ``mu_product`` Python numbers).
"""
from __future__ import annotations

from ..autograd.grad_mode import no_grad
from ._tensor_ops import check_flags, check_lr_eps_betas_wd, direction, host_scalars
from .optimizer import Optimizer, state_like


class NAdam(Optimizer):
    """torch.optim.NAdam: Adam with Nesterov momentum and torch's momentum schedule (``decoupled_weight_decay``:
    NAdamW), the rule in the module docstring; ``capturable``/``differentiable`` are refused."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        check_lr_eps_betas_wd(lr, eps, betas, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        check_flags("NAdam", capturable, differentiable)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable))

    @no_grad()
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, (beta1, beta2), wd = group["lr"], group["betas"], group["weight_decay"]
            decoupled = group["decoupled_weight_decay"]
            for p, g, state in self._with_grads(group, _new_state):
                host_scalars(state, "step", "mu_product")
                d = direction(p, g, group, coupled_decay=not decoupled)
                state["step"] += 1
                t = state["step"]
                if decoupled and wd != 0:
                    p.mul_(1 - lr * wd)
                mu = beta1 * (1.0 - 0.5 * 0.96 ** (t * group["momentum_decay"]))
                mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * group["momentum_decay"]))
                state["mu_product"] *= mu
                mu_product = state["mu_product"]
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.mul_(beta1).add_(d, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).add_(d * d, alpha=1 - beta2)
                denom = exp_avg_sq.div(1 - beta2 ** t).sqrt_().add_(group["eps"])
                p.add_(d.div(denom), alpha=-lr * (1.0 - mu) / (1.0 - mu_product))
                p.add_(exp_avg.div(denom), alpha=-lr * mu_next / (1.0 - mu_product * mu_next))
        return loss


def _new_state(p, group) -> dict:
    return {"step": 0, "mu_product": 1.0, "exp_avg": state_like(p), "exp_avg_sq": state_like(p)}
