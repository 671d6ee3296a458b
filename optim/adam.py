"""Adam and AdamW (PyTorch's update rules, bias-corrected moments):

    m = b1 m + (1 - b1) d;  v = b2 v + (1 - b2) d^2
    p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)

Adam adds ``weight_decay * p`` to the gradient; AdamW (and ``Adam(decoupled_weight_decay=True)``, as
torch 2.13) multiplies ``p`` by ``1 - lr * wd``.
With ``amsgrad=True`` the denominator uses ``max_exp_avg_sq = max(max_exp_avg_sq, v)`` (state
``max_exp_avg_sq``, as torch) in place of ``v``.

``fused=True`` (PyTorch's fused path): the step count ``state["step"]`` is a one-element float32
tensor on the parameter's device, and the kernel takes ``GradScaler``'s found-inf flag and scale:
on inf/NaN nothing changes (the count neither), otherwise the gradient is unscaled inside the
update. No value is read back on the host.

``foreach``: as torch's default on a GPU (``None``) and with ``True``, the multi-tensor update:
one launch for the parameters of a group that share a device, a dtype and a step count (tables of
their addresses, ``triton_kernels/optim.py: adam_multi_step``), instead of one launch each; a
transformer layer has a dozen parameters. ``foreach=False`` is torch's per-tensor loop. Both
give the same bits: the kernels share their update. ``differentiable=True`` raises
``NotImplementedError`` (the step runs under no_grad).

``capturable=True`` (PyTorch's, for CUDA graphs): the step count lives on the device as with
``fused``, advanced and read by kernels only, so a captured step replays with the right bias
correction; nothing of the step is computed on the host.
"""
from __future__ import annotations

from ..autograd.grad_mode import no_grad
from ..core.ops import optim as _core
from ..core.tensor import Tensor
from ..runtime import dtype as dt
from .optimizer import Optimizer, state_like


class Adam(Optimizer):
    """torch.optim.Adam: one fused kernel per parameter per step (the module docstring gives the rule and what
    ``fused``, ``capturable``, ``foreach`` and ``amsgrad`` do); ``decoupled_weight_decay=True`` is AdamW, as torch
    2.13."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for i, b in enumerate(betas):
            if not 0.0 <= b < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {b}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if differentiable:
            raise NotImplementedError(f"{type(self).__name__}: differentiable=True is not supported")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=bool(amsgrad), maximize=maximize, foreach=foreach,
                                      capturable=bool(capturable), differentiable=differentiable, fused=fused,
                                      decoupled_weight_decay=bool(decoupled_weight_decay)))
        self._init_fused(fused)

    @staticmethod
    def _step_state(state, p, on_device):
        """The step count in the form this group's path keeps it (a loaded state may hold the other)."""
        step = state["step"]
        if on_device and not isinstance(step, Tensor):
            state["step"] = p.detach().new_full((), float(step), dtype=dt.float32)
        elif not on_device and isinstance(step, Tensor):
            state["step"] = int(step.item())

    @no_grad()
    def step(self, closure=None):
        """One update of every parameter with a gradient (one kernel each); ``closure`` re-evaluates the loss with
        grad on and its loss is returned, as torch."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            on_device = bool(group.get("fused")) or bool(group.get("capturable"))
            amp_inputs = self._scaler_inputs(group)
            todo = []
            for p, g, state in self._with_grads(group, _new_state):
                if group["amsgrad"] and "max_exp_avg_sq" not in state:
                    state["max_exp_avg_sq"] = state_like(p)
                self._step_state(state, p, on_device)
                if not on_device:
                    state["step"] += 1
                todo.append((p, g, state))
            if on_device:  # the device counts: one launch per device, before any update reads them
                by_device: dict = {}
                for p, _, state in todo:
                    by_device.setdefault(p.device, []).append(state["step"])
                for dev, steps in by_device.items():
                    _core.advance_steps_(steps, amp_inputs(dev)[0])
            hyper = dict(lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
                         weight_decay=group["weight_decay"], decoupled=group.get("decoupled_weight_decay", False),
                         maximize=group["maximize"])
            if group.get("foreach") is False:  # torch's per-tensor loop
                for p, g, state in todo:
                    found_inf, grad_scale = amp_inputs(p.device)
                    _core.adam_step_(p, g, state["exp_avg"], state["exp_avg_sq"], step=state["step"],
                                     max_exp_avg_sq=state["max_exp_avg_sq"] if group["amsgrad"] else None,
                                     found_inf=found_inf, grad_scale=grad_scale, **hyper)
            else:  # multi-tensor: one call per device (and per step count on the host path)
                batches: dict = {}
                for item in todo:
                    state = item[2]
                    batches.setdefault((item[0].device, None if on_device else state["step"]), []).append(item)
                for (dev, count), items in batches.items():
                    found_inf, grad_scale = amp_inputs(dev)
                    states = [state for _, _, state in items]
                    _core.adam_multi_step_(
                        [p for p, _, _ in items], [g for _, g, _ in items], [s["exp_avg"] for s in states],
                        [s["exp_avg_sq"] for s in states], step=[s["step"] for s in states] if on_device else count,
                        max_exp_avg_sqs=[s["max_exp_avg_sq"] for s in states] if group["amsgrad"] else None,
                        found_inf=found_inf, grad_scale=grad_scale, **hyper)
            for p, g, _ in todo:
                self._write_back(p, g, amp_inputs(p.device)[1])
                p._bump_version()
        return loss


class AdamW(Adam):
    """torch.optim.AdamW: Adam with decoupled weight decay (p *= 1 - lr * wd before the update), default weight_decay
    1e-2."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)


def _new_state(p, group) -> dict:
    return {"step": 0, "exp_avg": state_like(p), "exp_avg_sq": state_like(p)}
