"""Grad mode: whether ops record a graph. Thread-local, as in PyTorch (a new thread starts enabled).

``no_grad``, ``enable_grad`` and ``set_grad_enabled`` are context managers and decorators.
``Function.apply`` reads :data:`_state.enabled` once per op, so the check is one attribute load.
"""
from __future__ import annotations

import functools
import threading

from ..core.tensor_base import inference_state


class _State(threading.local):
    enabled = True


_state = _State()


def is_grad_enabled() -> bool:
    """torch.is_grad_enabled: whether ops record a graph in this thread (False inside no_grad and
    inference_mode)."""
    return _state.enabled


class _GradModeContext:
    """Base for the grad-mode context managers: usable as ``with``, ``@cm()`` and ``@cm``."""

    _mode = True

    def __new__(cls, func=None):
        self = super().__new__(cls)
        if callable(func):  # bare decorator: @no_grad
            return self(func)
        return self

    def __init__(self, func=None):
        self._prev = []

    def __enter__(self):
        self._prev.append(_state.enabled)
        _state.enabled = self._mode

    def __exit__(self, *exc):
        _state.enabled = self._prev.pop()
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with type(self)():
                return func(*args, **kwargs)

        return wrapper


class no_grad(_GradModeContext):
    """Ops inside record nothing: outputs don't require grad and nothing is saved for backward."""

    _mode = False


class enable_grad(_GradModeContext):
    """Re-enable recording inside a ``no_grad`` block."""

    _mode = True


class set_grad_enabled(_GradModeContext):
    """``set_grad_enabled(mode)``: sets the mode at once (as a function) or for a ``with`` block."""

    def __new__(cls, mode):
        return object.__new__(cls)

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled(): argument 'mode' must be bool, not {type(mode).__name__}")
        self._prev = [_state.enabled]
        self._mode = mode
        _state.enabled = mode

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _state.enabled = self._prev[0]
        return False

    def __call__(self, func):
        _state.enabled = self._prev[0]  # decorator use: undo the immediate set
        mode = self._mode

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return func(*args, **kwargs)

        return wrapper


class inference_mode(_GradModeContext):
    """``torch.inference_mode(mode=True)``: no_grad, and every tensor made inside is an *inference
    tensor* (``t.is_inference()``) that cannot later join autograd: ``requires_grad_()`` on it
    outside inference mode raises, and so does saving it for backward. A context manager and a
    decorator (``@inference_mode``, ``@inference_mode()``, ``inference_mode(False)``).

    Differences from torch: any tensor made inside is an inference tensor (torch makes views of
    normal tensors normal), and in-place updates of inference tensors outside the mode are not
    rejected (torch raises)."""

    def __new__(cls, mode=True):
        if callable(mode):  # bare decorator: @inference_mode
            return cls()(mode)
        return object.__new__(cls)

    def __init__(self, mode=True):
        if not isinstance(mode, bool):
            raise TypeError(f"inference_mode(): argument 'mode' must be bool, not {type(mode).__name__}")
        self.mode = mode
        self._prev = []

    def __enter__(self):
        self._prev.append((_state.enabled, inference_state.enabled))
        if self.mode:
            _state.enabled = False
        inference_state.enabled = self.mode

    def __exit__(self, *exc):
        _state.enabled, inference_state.enabled = self._prev.pop()
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with inference_mode(self.mode):
                return func(*args, **kwargs)

        return wrapper


def is_inference_mode_enabled() -> bool:
    """torch.is_inference_mode_enabled: whether this thread is inside inference_mode."""
    return inference_state.enabled
