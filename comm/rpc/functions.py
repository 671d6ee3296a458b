"""``functions.async_execution``: a function that returns a Future completes its RPC when that
Future does (the callee's thread is free meanwhile), as ``torch.distributed.rpc.functions``."""

from __future__ import annotations

import functools

__all__ = ["async_execution"]


def async_execution(fn):
    """Mark ``fn`` as returning a :class:`tritensor.comm.Future` whose value is the RPC's result."""
    if not callable(fn):
        raise TypeError(f"async_execution: expected a callable, got {type(fn).__name__}")

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    wrapper._tritensor_async_execution = True
    return wrapper
