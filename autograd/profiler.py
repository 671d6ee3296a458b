"""``tritensor.autograd.profiler.record_function``: names a region of code for a profiler.

Code instrumented for ``torch.profiler`` wraps regions in ``record_function("name")`` (a context
manager or decorator). tritensor has no profiler that collects such ranges, so a region marked
here records nothing and costs one object: the call is accepted so that instrumented code runs
unchanged, and it is a no-op marker until a profiler exists to listen.
"""
from __future__ import annotations

import functools

__all__ = ["record_function"]


class record_function:
    """``with record_function("name"):`` or ``@record_function("name")``: a no-op marker."""

    def __init__(self, name: str, args: str | None = None) -> None:
        if not isinstance(name, str):
            raise TypeError(f"record_function(): argument 'name' must be str, not {type(name).__name__}")
        self.name, self.args = name, args
        self.record = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with record_function(self.name, self.args):
                return func(*args, **kwargs)

        return wrapper
