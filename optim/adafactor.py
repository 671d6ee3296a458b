"""Adafactor (torch 2.5+'s rule: Shazeer & Stern 2018 with torch's use of ``lr`` and ``eps1``), written with
tensor ops (``_tensor_ops.py`` says why, and what ``foreach``/``maximize`` do):

    t += 1;  beta2_hat = 1 - t^beta2_decay;  rho = min(lr, 1 / sqrt(t))
    alpha = max(eps2, RMS(p)) * rho;  p *= 1 - lr * weight_decay
    a matrix (or a stack of them): R = lerp(R, mean(G^2, dim=-1), 1 - beta2_hat)
                                   C = lerp(C, mean(G^2, dim=-2), 1 - beta2_hat)
                                   V = (R @ C) / max(mean(R, dim=-2), eps1)
    a vector:                      V = lerp(V, G^2, 1 - beta2_hat)
    U = G / max(sqrt(V), eps1);  p -= alpha / max(1, RMS(U) / d) * U

The second moment of a matrix is kept factored, a row and a column vector (``row_var``,
``col_var``), which is the point of Adafactor: O(n + m) state for an n x m parameter; a vector
keeps ``variance``. ``eps1=None`` (the default) is ``finfo(p.dtype).eps``. The two RMS values
are read on the host, as torch's single-tensor rule reads them. State as torch: ``step``,
``row_var``/``col_var`` or ``variance`` (``step`` a Python number here).
"""
from __future__ import annotations

import math

from ..autograd.grad_mode import no_grad
from ..core.tensor import Tensor
from ..runtime.dtype import finfo
from ._tensor_ops import host_scalars
from .optimizer import Optimizer, state_like

__all__ = ["Adafactor"]


class Adafactor(Optimizer):
    """torch.optim.Adafactor: the rule in the module docstring; ``foreach`` is accepted and changes nothing."""

    def __init__(self, params, lr=1e-2, beta2_decay: float = -0.8, eps=(None, 1e-3), d: float = 1.0,
                 weight_decay: float = 0.0, *, foreach=None, maximize: bool = False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize))

    @no_grad()
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr = group["lr"]
            lr = float(lr.item()) if isinstance(lr, Tensor) else float(lr)
            eps1, eps2 = group["eps"]
            wd, d, decay = group["weight_decay"], group["d"], group["beta2_decay"]
            for p, g, state in self._with_grads(group, _new_state):
                host_scalars(state, "step")
                grad = g.neg() if group["maximize"] else g
                e1 = finfo(p.dtype).eps if eps1 is None else eps1
                state["step"] += 1
                t = float(state["step"])
                one_minus_beta2 = t ** decay
                rho = min(lr, 1 / math.sqrt(t))
                numel = max(p.numel(), 1)
                alpha = max(eps2, p.norm(2).item() / math.sqrt(numel)) * rho
                if wd != 0:
                    p.mul_(1 - lr * wd)
                if grad.dim() > 1:
                    row_var, col_var = state["row_var"], state["col_var"]
                    row_var.lerp_(grad.norm(2, dim=-1, keepdim=True).square_().div_(grad.size(-1)), one_minus_beta2)
                    col_var.lerp_(grad.norm(2, dim=-2, keepdim=True).square_().div_(grad.size(-2)), one_minus_beta2)
                    var_estimate = row_var @ col_var
                    var_estimate.div_(row_var.mean(dim=-2, keepdim=True).clamp_(min=e1))
                else:
                    variance = state["variance"]
                    variance.lerp_(grad * grad, one_minus_beta2)
                    var_estimate = variance.clone()
                update = var_estimate.clamp_(min=e1 * e1).rsqrt_()  # eps1 squared: the root keeps its size
                update.mul_(grad)
                denom = max(1.0, update.norm(2).item() / (math.sqrt(numel) * d))
                p.add_(update, alpha=-alpha / denom)
        return loss


def _new_state(p, group) -> dict:
    if p.dim() > 1:
        row = list(p.shape)
        row[-1] = 1
        col = list(p.shape)
        col[-2] = 1
        return {"step": 0, "row_var": p.new_zeros(row), "col_var": p.new_zeros(col)}
    return {"step": 0, "variance": state_like(p)}
