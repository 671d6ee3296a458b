"""``Optimizer``: parameter groups, per-parameter state, ``zero_grad``, ``state_dict``, and the
AMP hand-over of PyTorch's ``fused=True`` optimizers (``GradScaler.step`` sets ``grad_scale`` and
``found_inf`` on an optimizer whose ``_step_supports_amp_scaling`` is true, for one step)."""
from __future__ import annotations

import copy

from ..core.shape import channels_last, contiguous_format
from ..core.tensor import Tensor
from ..autograd.grad_mode import enable_grad

_REQUIRED = object()


def same_layout(t, p):
    """``t`` laid out as the dense parameter ``p`` (itself when it already is)."""
    if t.stride() == p.stride():
        return t
    return t.contiguous(memory_format=contiguous_format if p.is_contiguous() else channels_last)


def state_like(p, value=0.0):
    """A new state tensor of ``p``'s shape, dtype, device and layout, filled with ``value``."""
    t = p.detach().clone()
    return t.fill_(value)


class Optimizer:
    """The base of the optimizers, as torch.optim.Optimizer: parameter groups with the defaults filled in, per-
    parameter ``state``, state_dict/load_state_dict in torch's layout; parameters must be dense leaf tensors
    (contiguous or channels-last)."""

    def __init__(self, params, defaults: dict):
        self.defaults = defaults
        self.state: dict = {}
        self.param_groups: list = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {type(params).__name__}")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, group: dict) -> None:
        """Add a group of parameters with its own options (missing ones from the defaults); torch's checks: leaf
        tensors, no parameter in two groups, required options given."""
        group = dict(group)
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
            if not (p.is_contiguous() or p.is_contiguous(memory_format=channels_last)):
                raise ValueError(f"optimizer: parameters must be dense (contiguous or channels-last), got one with "
                                 f"shape {list(p.shape)} and strides {list(p.stride())}")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        group["params"] = params
        for k, v in self.defaults.items():
            if v is _REQUIRED and k not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {k}")
            group.setdefault(k, v)
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear each parameter's gradient: None (torch's default) or, with ``set_to_none=False``, zeros in place."""
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad = p.grad.detach()
                    p.grad.zero_()

    def _grads(self, p, group):
        """The gradient as the kernel walks it: laid out as its parameter (a copy when ``p.grad``
        is not, see :meth:`_write_back`); the update kernels walk parameter, gradient and states as
        one flat array each, so all of them share the parameter's strides."""
        g = p.grad
        if g is None:
            return None
        if g.shape != p.shape or g.dtype is not p.dtype or g.device != p.device:
            raise RuntimeError(f"{type(self).__name__}.step(): grad of shape {list(g.shape)} / {g.dtype} / "
                               f"{g.device} doesn't match its parameter {list(p.shape)} / {p.dtype} / {p.device}")
        return same_layout(g.detach(), p)

    def _with_grads(self, group, new_state):
        """``(param, grad, state)`` for each parameter of ``group`` that has a gradient; a parameter
        seen for the first time gets ``new_state(p, group)`` (torch creates state at the first step)."""
        for p in group["params"]:
            g = self._grads(p, group)
            if g is None:
                continue
            state = self.state.setdefault(p, {})
            if not state:
                state.update(new_state(p, group))
            yield p, g, state

    def _init_fused(self, fused) -> None:
        """``fused=True``: the step takes the scaler's found-inf flag and scale (PyTorch's fused path)."""
        if not fused:
            return
        for g in self.param_groups:
            for p in g["params"]:
                if not p.dtype.is_floating_point:
                    raise RuntimeError("`fused=True` requires all the params to be floating point Tensors of "
                                       f"supported devices: ['cuda', 'cpu'] but {p.dtype} and {p.device.type}")
        self._step_supports_amp_scaling = True

    def _scaler_inputs(self, group):
        """{device: (found_inf, grad_scale)} getter for this step: what ``GradScaler.step`` set on the
        optimizer, moved to each parameter's device once (no host read); ``(None, None)`` without it."""
        found_inf = getattr(self, "found_inf", None)
        grad_scale = getattr(self, "grad_scale", None)
        if not group.get("fused") and (found_inf is not None or grad_scale is not None):
            raise AssertionError("Expected grad_scale and found_inf to be None")
        cache: dict = {}

        def get(dev):
            if dev not in cache:
                cache[dev] = tuple(t if t is None or t.device == dev else t.to(dev) for t in (found_inf, grad_scale))
            return cache[dev]
        return get

    @staticmethod
    def _write_back(p, g, grad_scale) -> None:
        """A fused step unscales the gradient it was given in place; keep ``p.grad`` that one."""
        if grad_scale is not None and g.data_ptr() != p.grad.data_ptr():
            p.grad.copy_(g)

    def state_dict(self) -> dict:
        """{'state': index -> state, 'param_groups': options with parameter indices}, torch's layout, so torch
        checkpoints of the same model load."""
        index = {}
        groups = []
        for g in self.param_groups:
            ids = []
            for p in g["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            groups.append({**{k: v for k, v in g.items() if k != "params"}, "params": ids})
        state = {index[id(p)]: s for g in self.param_groups for p in g["params"] if (s := self.state.get(p))}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Take group options and per-parameter state from a state_dict, tensors moved to each parameter's device;
        group counts and sizes must match (ValueError, torch's messages)."""
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        params = [p for g in self.param_groups for p in g["params"]]
        for mine, theirs in zip(self.param_groups, groups):
            if len(mine["params"]) != len(theirs["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                                 "optimizer's group")
            mine.update({k: v for k, v in theirs.items() if k != "params"})
        self.state = {}
        for idx, s in state_dict["state"].items():
            p = params[int(idx)]
            self.state[p] = {k: (v.to(p.device).clone() if isinstance(v, Tensor) else copy.deepcopy(v))
                             for k, v in s.items()}

    def step(self, closure=None):
        """One update of every parameter with a gradient; each optimizer implements it."""
        raise NotImplementedError

    @staticmethod
    def _closure_loss(closure):
        """Re-evaluate the model through ``closure`` (with grad on, as step() runs under no_grad)."""
        if closure is None:
            return None
        with enable_grad():
            return closure()

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(g.items()) if k != "params"]
        return "\n".join(lines + [")"])
