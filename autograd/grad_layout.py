"""``enforce_grad_layout_policy``: whether a leaf's first gradient must be laid out as the leaf
to become its ``.grad`` without a copy (torch's gradient layout contract).

The engine hands a gradient it made and owns to the leaf as ``.grad`` (``graph.AccumulateGrad``)
when its strides are the leaf's; otherwise it copies it into the leaf's layout, so optimizers and
reducers walk parameter and gradient alike. Relaxing the policy (thread-local, as torch's) lets such
a gradient be taken whatever its layout, saving the copy; a gradient that is not the engine's to
give is still copied, as torch still clones one that is not stealable.
"""
from __future__ import annotations

import functools
import threading

__all__ = ["enforce_grad_layout_policy", "is_grad_layout_enforced"]


class _State(threading.local):
    enforced = True


_state = _State()


def is_grad_layout_enforced() -> bool:
    """Whether this thread keeps the gradient layout contract (the default)."""
    return _state.enforced


class enforce_grad_layout_policy:
    """``torch.autograd.enforce_grad_layout_policy(enable=True)``: sets the policy at once (as a
    function call) or for a ``with`` block, or for the calls of a function it decorates."""

    def __init__(self, enable: bool = True) -> None:
        if not isinstance(enable, bool):
            raise TypeError(f"enforce_grad_layout_policy(): argument 'enable' must be bool, not "
                            f"{type(enable).__name__}")
        self.prev = _state.enforced
        _state.enforced = enable
        self.mode = enable

    def __call__(self, func):
        _state.enforced = self.prev  # decorator use: undo the immediate set
        mode = self.mode

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with enforce_grad_layout_policy(mode):
                return func(*args, **kwargs)

        return wrapper

    def __enter__(self) -> None:
        pass

    def __exit__(self, exc_type, exc_value, traceback) -> None:
        _state.enforced = self.prev

    def clone(self) -> "enforce_grad_layout_policy":
        """A copy of this policy setting (torch's)."""
        return self.__class__(self.mode)
