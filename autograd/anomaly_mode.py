"""Anomaly detection: torch's ``detect_anomaly`` / ``set_detect_anomaly`` / ``is_anomaly_enabled``.

A NaN that appears in a backward pass is hard to trace back: by the time ``.grad`` is read, the
op that made it is gone. In anomaly mode

* every node recorded keeps the Python stack of its forward call (``node.metadata["traceback_"]``,
  where torch keeps it);
* the engine checks each node's gradients as it runs it: a NaN raises
  ``RuntimeError: Function 'XBackward0' returned nan values in its 0th output.``;
* any error raised while a node runs (that one included) is preceded by torch's warning
  ``Error detected in XBackward0. Traceback of forward call that caused the error:`` and the
  forward's stack.

Off, it costs one attribute load where a node is made and one where it runs: no call is added
to the hot path (``tests/test_host_cost.py`` counts them). The switch is process-wide, as torch's.
"""
from __future__ import annotations

import functools
import os
import traceback
import warnings

__all__ = ["detect_anomaly", "set_detect_anomaly", "set_anomaly_enabled", "is_anomaly_enabled", "is_anomaly_check_nan_enabled"]


class _AnomalyState:
    enabled = False
    check_nan = True


_anomaly = _AnomalyState()
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The dispatch path between a user's call and the node (Tensor's methods, the dispatcher, autocast,
# the autograd layer): torch's equivalent is C++ and never shows in its trace, so neither does ours.
_DISPATCH_DIRS = tuple(os.path.join(_ROOT, d) + os.sep for d in ("core", "autograd", "amp"))


def is_anomaly_enabled() -> bool:
    """torch.is_anomaly_enabled: whether anomaly detection (detect_anomaly / set_detect_anomaly) is on in this
    thread."""
    return _anomaly.enabled


def is_anomaly_check_nan_enabled() -> bool:
    """torch.is_anomaly_check_nan_enabled: whether anomaly detection also checks every backward result for
    NaN."""
    return _anomaly.check_nan


class detect_anomaly:
    """Context manager (and decorator) that turns anomaly detection on inside it."""

    def __init__(self, check_nan: bool = True) -> None:
        self.prev = _anomaly.enabled
        self.check_nan = check_nan
        self.prev_check_nan = _anomaly.check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only "
                      "be enabled for debugging.", stacklevel=2)

    def __enter__(self) -> None:
        _anomaly.enabled, _anomaly.check_nan = True, self.check_nan

    def __exit__(self, *args) -> None:
        _anomaly.enabled, _anomaly.check_nan = self.prev, self.prev_check_nan

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.__class__(self.check_nan):
                return func(*args, **kwargs)

        return wrapper


class set_detect_anomaly:
    """Sets anomaly detection on or off when made; as a context manager, restores it on exit."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.prev = _anomaly.enabled
        self.prev_check_nan = _anomaly.check_nan
        _anomaly.enabled, _anomaly.check_nan = bool(mode), bool(check_nan)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *args) -> None:
        _anomaly.enabled, _anomaly.check_nan = self.prev, self.prev_check_nan


def set_anomaly_enabled(enabled, check_nan=True) -> None:
    """``torch.set_anomaly_enabled(enabled, check_nan=True)``: turns anomaly detection on or off for good (what
    ``set_detect_anomaly`` does when made, without restoring anything later and without a warning)."""
    if not isinstance(enabled, bool):
        raise TypeError(f"set_anomaly_enabled(): argument 'enabled' (position 1) must be bool, not "
                        f"{type(enabled).__name__}")
    if not isinstance(check_nan, bool):
        raise TypeError(f"set_anomaly_enabled(): argument 'check_nan' (position 2) must be bool, not "
                        f"{type(check_nan).__name__}")
    _anomaly.enabled, _anomaly.check_nan = enabled, check_nan


def record_forward(node) -> None:
    """Keep the stack of the forward call that made ``node`` (anomaly mode only): the caller's
    frames, without the dispatch path's (see ``_DISPATCH_DIRS``)."""
    frames = [f for f in traceback.extract_stack() if not f.filename.startswith(_DISPATCH_DIRS)]
    node.metadata["traceback_"] = traceback.format_list(frames)


def _warn_forward_trace(node) -> None:
    trace = node.metadata.get("traceback_") if node._metadata is not None else None
    if trace:
        warnings.warn(f"Error detected in {node.name()}. Traceback of forward call that caused the error:\n"
                      + "".join(trace), stacklevel=3)
    else:
        warnings.warn(f"Error detected in {node.name()}. No forward pass information available. Enable detect "
                      "anomaly during forward pass for more information.", stacklevel=3)


def apply_checked(node, buf) -> tuple:
    """Run ``node`` as the engine does, with the anomaly checks: its forward's stack is shown for
    any error it raises, and (``check_nan``) a gradient holding a NaN is an error."""
    try:
        grads = node.apply(*buf)
        if _anomaly.check_nan:
            for i, g in enumerate(grads):
                if g is not None and g.dtype.is_floating_point and bool(g.isnan().any()):
                    raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")
    except Exception:
        _warn_forward_trace(node)
        raise
    return grads
