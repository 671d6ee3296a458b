"""Muon (torch's rule, Keller Jordan's optimizer for 2-D hidden-layer weights), written with tensor
ops: a momentum buffer, then the update orthogonalised by a quintic Newton-Schulz iteration
rounded as torch's bfloat16 one (five rounds of a matmul and two addmms, on the matmul kernel), a shape-dependent
learning-rate scale and decoupled weight decay:

    B = mu B + (1 - mu) g   (``lerp``);  U = lerp(g, B, mu) if nesterov else B
    X = bf16(U) (transposed when tall) / max(||X||_F, eps);  k times: A = X X^T,
    X = a X + (b A + c A A) X;  O = X (transposed back), each product and sum rounded to bf16 once
    p *= 1 - lr wd;  p -= adjust(lr, shape) O

``adjust`` is ``sqrt(max(1, A / B))`` ("original", the default) or ``0.2 sqrt(max(A, B))``
("match_rms_adamw") of the parameter's (A, B). State as torch: ``momentum_buffer``. The
orthogonalisation kernel of PowerSGD (``orthogonalize_``, Gram-Schmidt) is not this iteration:
Muon needs the odd polynomial of the singular values Newton-Schulz gives, whose matmuls are the
whole cost and already the matmul kernel's.
"""
from __future__ import annotations

import math

from ..autograd.grad_mode import no_grad
from ..core import functional as _tf
from ..core.tensor import Tensor
from .optimizer import Optimizer, state_like

__all__ = ["Muon"]

EPS = 1e-7
DEFAULT_A = 3.4445
DEFAULT_B = -4.7750
DEFAULT_C = 2.0315
DEFAULT_NS_STEPS = 5


def _zeropower_via_newtonschulz(grad: Tensor, ns_coefficients, ns_steps: int, eps: float) -> Tensor:
    """The Newton-Schulz orthogonalisation of a 2-D ``grad``, in bfloat16 (torch's)."""
    if ns_steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if len(grad.shape) != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = ns_coefficients
    # torch runs the iteration on bf16 tensors, and a bf16 GEMM (cuBLAS's addmm) rounds its
    # result once, from fp32. The values are kept as bf16-rounded fp32 here, rounded where torch's
    # results are: a product of bf16 values is exact in fp32 (and in TF32), so each matmul below is
    # the bf16 GEMM, and each addmm rounds once instead of after its product and after its sum
    def rounded(t):
        return t.bfloat16().float()

    ortho = rounded(grad)
    tall = grad.size(0) > grad.size(1)
    if tall:
        ortho = ortho.T
    # a Frobenius norm of at most one bounds the spectral norm by one
    ortho = rounded(ortho.div(rounded(ortho.norm()).clamp(min=eps)))
    for _ in range(ns_steps):
        gram = rounded(ortho @ ortho.T)
        update = rounded(_tf.addmm(gram, gram, gram, beta=b, alpha=c))
        ortho = rounded(_tf.addmm(ortho, update, ortho, beta=a))
    return (ortho.T if tall else ortho).bfloat16()


def _adjust_lr(lr: float, adjust_lr_fn, param_shape) -> float:
    A, B = param_shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        ratio = math.sqrt(max(1, A / B))
    elif adjust_lr_fn == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(A, B))
    else:
        ratio = 1.0
    return lr * ratio


def _scalar(v):
    return v.item() if isinstance(v, Tensor) else v


class Muon(Optimizer):
    """torch.optim.Muon: the rule in the module docstring, torch's defaults, checks and state key;
    2-D parameters only (biases and embeddings belong to another optimizer, as torch says)."""

    def __init__(self, params, lr: float = 1e-3, weight_decay: float = 0.1, momentum: float = 0.95,
                 nesterov: bool = True, ns_coefficients: tuple = (DEFAULT_A, DEFAULT_B, DEFAULT_C), eps: float = EPS,
                 ns_steps: int = DEFAULT_NS_STEPS, adjust_lr_fn: str | None = None) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= _scalar(lr):
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ["original", "match_rms_adamw"]:
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        super().__init__(params, {"lr": lr, "weight_decay": weight_decay, "momentum": momentum, "nesterov": nesterov,
                                  "ns_coefficients": ns_coefficients, "eps": eps, "ns_steps": ns_steps,
                                  "adjust_lr_fn": adjust_lr_fn})
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(f"Muon only supports 2D parameters whereas we found a parameter with size: "
                                     f"{p.size()}")

    @no_grad()
    def step(self, closure=None):
        """Performs a single optimization step."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, wd, momentum = _scalar(group["lr"]), group["weight_decay"], group["momentum"]
            for p, grad, state in self._with_grads(group, _new_state):
                if grad.ndim != 2:
                    raise ValueError("Param gradient must be a 2D matrix")
                buf = state["momentum_buffer"]
                buf.lerp_(grad, 1 - momentum)
                update = grad.lerp(buf, momentum) if group["nesterov"] else buf
                update = _zeropower_via_newtonschulz(update, group["ns_coefficients"], group["ns_steps"],
                                                     group["eps"])
                p.mul_(1 - lr * wd)
                p.add_(update, alpha=-_adjust_lr(lr, group["adjust_lr_fn"], p.shape))
        return loss


def _new_state(p, group) -> dict:
    return {"momentum_buffer": state_like(p)}
