"""ASGD, averaged SGD (torch's rule, Polyak and Juditsky 1992), written with tensor ops
(``_tensor_ops.py`` says why and what ``foreach``/``capturable``/``differentiable`` do):

    d = grad + wd p;  p = p (1 - lambd eta) - eta d
    ax += (p - ax) mu  (ax = p while mu == 1)
    eta = lr / (1 + lambd lr t)^alpha;  mu = 1 / max(1, t - t0)

State as torch: ``step``, ``eta``, ``mu``, ``ax`` (the average; ``step``, ``eta`` and ``mu`` are
Python numbers).
"""
from __future__ import annotations

from ..autograd.grad_mode import no_grad
from ._tensor_ops import check_flags, direction, host_scalars
from .optimizer import Optimizer, state_like


class ASGD(Optimizer):
    """torch.optim.ASGD: SGD with Polyak averaging (state ``ax``), the rule in the module docstring;
    ``capturable``/``differentiable`` are refused."""

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        check_flags("ASGD", capturable, differentiable)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    @no_grad()
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, lambd = group["lr"], group["lambd"]
            for p, g, state in self._with_grads(group, _new_state):
                host_scalars(state, "step", "eta", "mu")
                d = direction(p, g, group)
                state["step"] += 1
                eta = state["eta"]
                p.mul_(1 - lambd * eta).add_(d, alpha=-eta)
                if state["mu"] != 1:
                    state["ax"].add_(p.sub(state["ax"]).mul_(state["mu"]))
                else:
                    state["ax"].copy_(p)
                t = state["step"]
                state["eta"] = lr / ((1 + lambd * lr * t) ** group["alpha"])
                state["mu"] = 1 / max(1, t - group["t0"])
        return loss


def _new_state(p, group) -> dict:
    return {"step": 0, "eta": float(group["lr"]), "mu": 1.0, "ax": state_like(p)}
