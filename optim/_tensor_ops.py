"""What the optimizers written with tensor ops (NAdam, RAdam, Adamax, Adadelta, ASGD, Rprop) share.

Those six have no fused kernel of their own: each ``step()`` is torch's single-tensor update rule
(``torch/optim/<name>.py: _single_tensor_<name>``) written with tensor ops, a handful of
elementwise launches per parameter. Their step counts (and ASGD's ``eta``/``mu``, NAdam's
``mu_product``) are Python numbers on the host, so the scalar coefficients are computed there.

torch's flags, and what they change here:

- ``foreach``: accepted and stored, changes nothing: torch picks between a per-tensor loop and its
  ``_foreach_*`` multi-tensor kernels, which give the same numbers; here the per-tensor ops run.
- ``maximize``: ascends (the gradient is negated), as torch.
- ``capturable=True``: raises ``NotImplementedError``: torch keeps the step count on the device
  so that a CUDA-graph-captured step replays with the right coefficients; these steps read it on
  the host, and a captured replay would silently repeat the first step's coefficients.
- ``differentiable=True``: raises ``NotImplementedError`` (the step runs under ``no_grad``).
"""
from __future__ import annotations

from ..core.tensor import Tensor


def check_flags(name: str, capturable: bool, differentiable: bool) -> None:
    """Refuse ``capturable=True`` and ``differentiable=True`` with NotImplementedError naming the optimizer (the
    module docstring says why)."""
    if capturable:
        raise NotImplementedError(f"{name}: capturable=True is not supported (the step count is kept on the host)")
    if differentiable:
        raise NotImplementedError(f"{name}: differentiable=True is not supported")


def check_lr_eps_betas_wd(lr, eps, betas, weight_decay) -> None:
    """torch's checks and messages, in torch's order."""
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


def direction(p, g, group, *, coupled_decay: bool = True):
    """The gradient the rule uses: negated for ``maximize``, plus ``weight_decay * p`` (L2) when
    ``coupled_decay``. A new tensor whenever it differs from ``g``: ``p.grad`` is never written."""
    if group["maximize"]:
        g = g.neg()
    wd = group.get("weight_decay", 0)
    if coupled_decay and wd != 0:
        g = g.add(p, alpha=wd)
    return g


def host_scalars(state: dict, *keys) -> None:
    """Make the named per-parameter scalars Python numbers: a state dict saved by torch (read with
    ``tt.load``) holds them as 0-d tensors, and these rules compute their coefficients on the host."""
    for k in keys:
        v = state.get(k)
        if isinstance(v, Tensor):
            state[k] = int(v.item()) if k == "step" else float(v.item())
