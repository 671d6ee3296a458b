"""``set_multithreading_enabled`` (torch.autograd's): whether backward may run on worker threads.

torch's engine runs a backward pass over accelerator devices on per-device worker threads unless
this is switched off, when it runs on the calling thread. tritensor's engine always runs a
backward pass on the calling thread (``engine.py``: one graph task per call, local to its
thread), which is what torch does with the setting off; the setting is kept, thread-local as
torch's, so that code setting and reading it behaves as with torch.
"""
from __future__ import annotations

import functools
import threading

__all__ = ["is_multithreading_enabled", "set_multithreading_enabled"]

_local = threading.local()


def is_multithreading_enabled() -> bool:
    """The setting in this thread (True unless switched off)."""
    return getattr(_local, "enabled", True)


class set_multithreading_enabled:
    """``set_multithreading_enabled(mode)``: sets the mode at once (as a function), for a ``with`` block, or for a
    decorated function; the previous mode comes back at the block's end."""

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, bool):
            raise TypeError(f"set_multithreading_enabled(): argument 'mode' must be bool, not {type(mode).__name__}")
        self.prev = is_multithreading_enabled()
        _local.enabled = mode
        self.mode = mode

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        _local.enabled = self.prev

    def clone(self) -> "set_multithreading_enabled":
        """A new context manager with the same mode (torch's, for its decorator machinery)."""
        return self.__class__(self.mode)

    def __call__(self, func):
        _local.enabled = self.prev  # decorator use: undo the immediate set
        mode = self.mode

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with set_multithreading_enabled(mode):
                return func(*args, **kwargs)

        return wrapper
