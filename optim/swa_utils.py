"""``tritensor.optim.swa_utils`` (torch.optim.swa_utils): Stochastic Weight Averaging and exponential moving
averages of a model's weights.

``AveragedModel`` keeps a copy of a model whose parameters (and, with ``use_buffers=True``, buffers)
are the running average of the model's at each ``update_parameters`` call: equal weights (SWA) by
default, or any rule given as ``avg_fn`` (one tensor at a time, returns the new average) or
``multi_avg_fn`` (all of them in place); ``get_ema_*``/``get_swa_*`` make torch's rules. ``SWALR``
anneals each group's learning rate to its ``swa_lr``; ``update_bn`` recomputes BatchNorm statistics
for averaged weights with one pass over the data. torch's rules and messages throughout.
"""
from __future__ import annotations

import itertools
import math
import warnings
from copy import deepcopy

from ..autograd.grad_mode import no_grad
from ..core.factories import tensor
from ..core.tensor import Tensor
from ..nn.modules.batchnorm import _BatchNorm
from ..nn.modules.module import Module
from ..runtime import dtype as dt
from .lr_scheduler import LRScheduler, _format_param

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn",
           "get_ema_avg_fn", "get_swa_avg_fn"]


def _check_decay(decay) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def get_ema_multi_avg_fn(decay=0.999):
    """An in-place exponential moving average of lists of tensors: ``ema = decay * ema + (1 - decay) * current``."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param_list, current_param_list, _) -> None:
        if ema_param_list[0].is_floating_point():
            for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
                p_ema.lerp_(p_model, 1 - decay)
        else:
            for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
                p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """An in-place equally weighted average of lists of tensors, ``num_averaged`` models averaged so far."""

    @no_grad()
    def swa_update(averaged_param_list, current_param_list, num_averaged) -> None:
        n = float(num_averaged.item()) if isinstance(num_averaged, Tensor) else float(num_averaged)
        if averaged_param_list[0].is_floating_point():
            for p_avg, p_model in zip(averaged_param_list, current_param_list, strict=True):
                p_avg.lerp_(p_model, 1 / (n + 1))
        else:
            for p_avg, p_model in zip(averaged_param_list, current_param_list, strict=True):
                p_avg.copy_(p_avg + (p_model - p_avg) / (n + 1))

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """The exponential moving average of one tensor: returns ``decay * ema + (1 - decay) * current``."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """The equally weighted average of one tensor: returns ``avg + (current - avg) / (num_averaged + 1)``."""

    @no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` (on ``device`` if given) holding the running average of its parameters (and buffers,
    with ``use_buffers``); ``forward`` runs the copy. The first ``update_parameters`` copies the model's values,
    each later one averages them in with ``avg_fn``/``multi_avg_fn`` (equal weights by default)."""

    def __init__(self, model: Module, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=dt.int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        """Average ``model``'s current values in (copy them, the first time)."""
        self_param = (itertools.chain(self.module.parameters(), self.module.buffers()) if self.use_buffers
                      else self.parameters())
        model_param = itertools.chain(model.parameters(), model.buffers()) if self.use_buffers else model.parameters()
        averaged, current = [], []
        n = int(self.n_averaged.item())
        for p_averaged, p_model in zip(self_param, model_param):
            p_model_ = p_model.detach().to(p_averaged.device)
            averaged.append(p_averaged.detach())
            current.append(p_model_)
            if n == 0:
                p_averaged.detach().copy_(p_model_)
        if n > 0:
            if self.avg_fn is None:
                # One call per (device, dtype) group, as torch's: a multi-tensor rule sees tensors it can combine.
                groups: dict = {}
                for a, c in zip(averaged, current):
                    pair = groups.setdefault((a.device, a.dtype), ([], []))
                    pair[0].append(a)
                    pair[1].append(c)
                rule = self.multi_avg_fn if self.multi_avg_fn is not None else get_swa_multi_avg_fn()
                for (device, _), (avg_list, cur_list) in groups.items():
                    rule(avg_list, cur_list, self.n_averaged.to(device))
            else:
                for a, c in zip(averaged, current):
                    a.copy_(self.avg_fn(a, c, self.n_averaged.to(a.device)))
        if not self.use_buffers:
            # The buffers (BatchNorm's running statistics) follow the model's: update_bn recomputes them otherwise.
            for b_swa, b_model in zip(self.module.buffers(), model.buffers(), strict=True):
                b_swa.detach().copy_(b_model.detach().to(b_swa.device))
        self.n_averaged.add_(1)


@no_grad()
def update_bn(loader, model: Module, device=None) -> None:
    """Recompute the running statistics of every BatchNorm layer of ``model`` with one pass over ``loader`` (each
    batch a tensor, or a list/tuple whose first element is the input), as a cumulative average."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for input in loader:
        if isinstance(input, (list, tuple)):
            input = input[0]
        if device is not None:
            input = input.to(device)
        model(input)
    for bn_module in momenta:
        bn_module.momentum = momenta[bn_module]
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's learning rate from its value to ``swa_lr`` (a number, or one per group) over
    ``anneal_epochs`` epochs, by cosine (``"cos"``) or linearly (``"linear"``), then keep it there."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1) -> None:
        swa_lrs = _format_param("swa_lr", optimizer, swa_lr)
        for swa_lr_, group in zip(swa_lrs, optimizer.param_groups, strict=True):
            group["swa_lr"] = swa_lr_
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self):
        if not getattr(self, "_get_lr_called_within_step", False):
            warnings.warn("To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                          UserWarning, stacklevel=2)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha)
                    for group in self.optimizer.param_groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [group["swa_lr"] * alpha + lr * (1 - alpha)
                for group, lr in zip(self.optimizer.param_groups, prev_lrs, strict=True)]

    def _set_anneal_func(self, anneal_strategy) -> None:
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def state_dict(self) -> dict:
        """Every attribute but the optimizer and the annealing function (restored from its name)."""
        return {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
