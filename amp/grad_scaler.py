"""``GradScaler``: dynamic loss scaling (PyTorch's torch.amp.GradScaler), on the AMP kernels.

``unscale_`` groups an optimizer's gradients by (device, dtype) and unscales each group with ONE
fused launch (``core.ops.amp.unscale_and_check_``) that also writes the device's found-inf flag;
``update`` runs the scale rule as a kernel (``core.ops.amp.update_scale_``). Neither reads a
device value on the host; ``step`` reads each device's flag once to decide whether to step.

An optimizer built with ``fused=True`` (``_step_supports_amp_scaling``) gets PyTorch's fused
path instead: ``step`` checks the gradients with a read-only launch when ``unscale_`` was not
called (``core.ops.amp.check_finite_``), sets ``optimizer.grad_scale`` (the scale, or None when
already unscaled) and ``optimizer.found_inf`` for the duration of ``optimizer.step``, whose kernels
skip the update on the flag and unscale inside: no unscale pass and no host read at all.
"""
from __future__ import annotations

import warnings
from collections import defaultdict
from enum import Enum

from ..core.ops import amp as _amp
from ..core.tensor import Tensor
from ..runtime import cuda
from ..runtime import dtype as dt
from ..runtime.device import device as _device


class OptState(Enum):
    """Where an optimizer is in the current iteration, for GradScaler (torch's enum): ready, gradients unscaled,
    stepped."""

    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh_per_optimizer_state():
    return {"stage": OptState.READY, "found_inf_per_device": {}}


def _full(value, dtype_, dev):
    t = Tensor._empty((), dtype_, dev)
    t.fill_(value)
    return t


class GradScaler:
    """Loss scaling for fp16 training, as torch.amp.GradScaler: scale(loss), unscale_(optimizer), step(optimizer)
    (skipped on inf/NaN gradients, the check made on the device), update(); fused optimizers take its flag and scale
    in their kernel. ``device`` must be 'cuda' or 'cpu'."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if not isinstance(device, str) or device not in ("cuda", "cpu"):
            raise RuntimeError(f"GradScaler: unsupported device {device!r}; expected 'cuda' or 'cpu'")
        self._device = device
        self._enabled = bool(enabled)
        if self._enabled and device == "cuda" and not cuda.is_available():
            warnings.warn("GradScaler is enabled, but CUDA is not available. Disabling.")
            self._enabled = False
        if self._enabled:
            if not growth_factor > 1.0:
                raise ValueError(f"GradScaler: growth_factor should be > 1, got {growth_factor}")
            if not backoff_factor < 1.0:
                raise ValueError(f"GradScaler: backoff_factor should be < 1, got {backoff_factor}")
            if not (isinstance(growth_interval, int) and growth_interval > 0):
                raise ValueError(f"GradScaler: growth_interval should be a positive int, got {growth_interval!r}")
            self._init_scale = float(init_scale)
            self._scale = None  # fp32 0-d device tensor, made lazily by scale()
            self._growth_factor = float(growth_factor)
            self._backoff_factor = float(backoff_factor)
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker = None  # int32 0-d device tensor
            self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    # ----- scaling ------------------------------------------------------------------------------
    def _lazy_init(self, dev):
        if self._scale is None:
            self._scale = _full(self._init_scale, dt.float32, dev)
            self._growth_tracker = _full(self._init_growth_tracker, dt.int32, dev)

    def _check_outputs(self, outputs, path="outputs"):
        if isinstance(outputs, Tensor):
            if not outputs.dtype.is_floating_point:
                raise TypeError(f"GradScaler.scale: {path} is a {outputs.dtype} tensor; only floating tensors "
                                "(losses) can be scaled")
            if outputs.device.type != self._device:
                raise RuntimeError(f"GradScaler.scale: {path} is on {outputs.device}, the scaler on {self._device!r}")
        elif isinstance(outputs, (list, tuple)):
            for i, o in enumerate(outputs):
                self._check_outputs(o, f"{path}[{i}]")
        else:
            raise TypeError(f"GradScaler.scale: {path} must be a Tensor or a list/tuple of them, "
                            f"not {type(outputs).__name__}")

    def scale(self, outputs):
        """``outputs`` (a tensor, or nested lists/tuples of them) multiplied by the scale factor."""
        if not self._enabled:
            return outputs
        self._check_outputs(outputs)  # everything checked before any kernel runs

        def apply(o):
            if isinstance(o, Tensor):
                self._lazy_init(o.device)
                return o * (self._scale if self._scale.device == o.device else self._scale.to(o.device))
            return type(o)(apply(x) for x in o)

        return apply(outputs)

    # ----- unscale / step / update --------------------------------------------------------------
    def _unscale_grads_(self, optimizer, inv_scale, found_inf, allow_fp16):
        """Unscale (``inv_scale=None``: only check) the grads by (device, dtype); {device: found_inf}."""
        groups = defaultdict(list)  # (device, dtype) -> grads
        for group in optimizer.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if not allow_fp16 and g.dtype is dt.float16:
                    raise ValueError("Attempting to unscale FP16 gradients.")
                groups[(g.device, g.dtype)].append(g)
        per_device = {}
        for (dev, _), grads in groups.items():
            if dev not in per_device:
                per_device[dev] = (found_inf if found_inf.device == dev else found_inf.to(dev),
                                   inv_scale if inv_scale is None or inv_scale.device == dev else inv_scale.to(dev))
            f, inv = per_device[dev]
            if inv is None:
                _amp.check_finite_(grads, f.view(1))
            else:
                _amp.unscale_and_check_(grads, f.view(1), inv.view(1))
        return {dev: f for dev, (f, _) in per_device.items()}

    def unscale_(self, optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale in place (one fused launch per dtype and device)."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = self._scale.double().reciprocal().float()
        found_inf = _full(0.0, dt.float32, self._scale.device)
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, found_inf, False)
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step(*args, **kwargs)`` unless a gradient held inf/NaN (then the parameters stay as they were)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if getattr(optimizer, "_step_supports_amp_scaling", False):
            return self._fused_step(optimizer, state, args, kwargs)
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if not state["found_inf_per_device"]:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        retval = None
        if not sum(float(v.item()) for v in state["found_inf_per_device"].values()):  # the one host read
            retval = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return retval

    def _check_inf_per_device(self, optimizer) -> dict:
        """Check (not unscale) ``optimizer``'s gradients: {device: found_inf}, recorded for ``update``."""
        self._check_scale_growth_tracker("_check_inf_per_device")
        found_inf = _full(0.0, dt.float32, self._scale.device)
        found = self._unscale_grads_(optimizer, None, found_inf, True)
        self._per_optimizer_states[id(optimizer)]["found_inf_per_device"] = found
        return found

    def _fused_step(self, optimizer, state, args, kwargs):
        """PyTorch's path for optimizers with ``_step_supports_amp_scaling``: they get the flag and the
        scale as ``optimizer.found_inf`` / ``optimizer.grad_scale`` and skip or unscale themselves."""
        if state["stage"] is OptState.READY:
            self._check_inf_per_device(optimizer)
        dev = self._scale.device
        flags = [f if f.device == dev else f.to(dev) for f in state["found_inf_per_device"].values()]
        if not flags:  # no gradients at all: nothing to skip on, nothing to unscale
            found_inf = _full(0.0, dt.float32, dev)
        else:
            found_inf = flags[0]
            for f in flags[1:]:
                found_inf = found_inf + f
        if state["stage"] is OptState.UNSCALED:
            grad_scale = getattr(optimizer, "grad_scale", None)
        else:  # the product with a scale the user set on the optimizer, as torch
            user = getattr(optimizer, "grad_scale", None)
            grad_scale = self._scale if user is None else self._scale * user
        optimizer.grad_scale = grad_scale
        optimizer.found_inf = found_inf
        try:
            retval = optimizer.step(*args, **kwargs)
        finally:
            del optimizer.grad_scale
            del optimizer.found_inf
        state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale=None) -> None:
        """Back off or grow the scale from this iteration's found-inf flags, or set it to ``new_scale``."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                if new_scale.numel() != 1 or new_scale.requires_grad or not new_scale.dtype.is_floating_point:
                    raise ValueError("new_scale should be a float or a one-element floating tensor with "
                                     "requires_grad=False.")
                self._scale.copy_(new_scale.reshape(()).to(self._scale.dtype))
            elif isinstance(new_scale, (int, float)) and not isinstance(new_scale, bool):
                self._scale.fill_(float(new_scale))
            else:
                raise TypeError(f"update: new_scale must be a float or a Tensor, not {type(new_scale).__name__}")
        else:
            found = [f for s in self._per_optimizer_states.values() for f in s["found_inf_per_device"].values()]
            if not found:
                raise AssertionError("No inf checks were recorded prior to update.")
            dev = self._scale.device
            combined = found[0] if found[0].device == dev else found[0].to(dev)
            for f in found[1:]:
                combined = combined + (f if f.device == dev else f.to(dev))
            _amp.update_scale_(self._scale, self._growth_tracker, combined, self._growth_factor,
                               self._backoff_factor, self._growth_interval)
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    def _check_scale_growth_tracker(self, name):
        if self._scale is None:
            raise AssertionError(f"Attempted {name} but _scale is None.  This may indicate your script did not "
                                 "use scaler.scale(loss or outputs) earlier in the iteration.")

    # ----- getters, setters, state --------------------------------------------------------------
    def get_scale(self) -> float:
        """The current scale as a Python float (reads it back from the device: a synchronization); 1.0 when disabled."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def get_growth_factor(self) -> float:
        """The factor the scale grows by after ``growth_interval`` clean steps."""
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        """Set the factor the scale grows by."""
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        """The factor the scale shrinks by on a step with inf/NaN gradients."""
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        """Set the factor the scale shrinks by."""
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        """How many consecutive clean steps grow the scale."""
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        """Set how many consecutive clean steps grow the scale."""
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else int(self._growth_tracker.item())

    def is_enabled(self) -> bool:
        """Whether scaling is on (False when disabled, or for 'cuda' with no CUDA device, with torch's warning)."""
        return self._enabled

    def state_dict(self) -> dict:
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale.fill_(self._init_scale)
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(self._init_growth_tracker)
