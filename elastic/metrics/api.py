"""The metrics API: named values published to per-group handlers (``torch.distributed.elastic.metrics.api``).

It exists so that the elastic layer (and a user's job) can publish telemetry -- restart counts,
rendezvous latency, a function's duration -- without knowing where it goes: each metric group
is routed to a ``MetricHandler`` chosen with :func:`configure`; by default everything goes to
``NullMetricHandler`` (nowhere).
"""

from __future__ import annotations

import abc
import time
from collections import namedtuple
from functools import wraps
from typing import Callable, Dict, Optional

__all__ = ["MetricData", "MetricsConfig", "MetricHandler", "ConsoleMetricHandler", "NullMetricHandler",
           "MetricStream", "configure", "getStream", "prof", "put_metric", "get_elapsed_time_ms"]

MetricData = namedtuple("MetricData", ["timestamp", "group_name", "name", "value"])
MetricData.__doc__ = "One data point: ``timestamp`` (seconds), ``group_name``, ``name``, ``value``."


class MetricsConfig:
    """Free-form ``params`` (str -> str) for a metric handler's configuration, as torch's."""

    __slots__ = ["params"]

    def __init__(self, params: Optional[Dict[str, str]] = None):
        self.params = params if params is not None else {}


class MetricHandler(abc.ABC):
    """Receives every data point of the groups it is configured for, through :meth:`emit`."""

    @abc.abstractmethod
    def emit(self, metric_data: MetricData):
        """Receive one data point; the base does nothing, subclasses publish it."""
        pass


class ConsoleMetricHandler(MetricHandler):
    """Prints ``[timestamp][group]: name=value`` to stdout."""

    def emit(self, metric_data: MetricData):
        """Print ``[timestamp][group]: name=value``."""
        print(f"[{metric_data.timestamp}][{metric_data.group_name}]: {metric_data.name}={metric_data.value}")


class NullMetricHandler(MetricHandler):
    """Drops everything (the default)."""

    def emit(self, metric_data: MetricData):
        """Discard the data point."""
        pass


class MetricStream:
    """A group bound to its handler: ``add_value(name, value)`` emits a timestamped ``MetricData``."""

    def __init__(self, group_name: str, handler: MetricHandler):
        self.group_name = group_name
        self.handler = handler

    def add_value(self, metric_name: str, metric_value: int):
        """Emit ``metric_name=metric_value`` now, in this stream's group, to its handler."""
        self.handler.emit(MetricData(time.time(), self.group_name, metric_name, metric_value))


_metrics_map: Dict[str, MetricHandler] = {}
_default_metrics_handler: MetricHandler = NullMetricHandler()


def configure(handler: MetricHandler, group: Optional[str] = None):
    """Route ``group`` to ``handler``; with no group, make it the default for unconfigured groups."""
    if not isinstance(handler, MetricHandler):
        raise TypeError(f"metrics.configure: handler must be a MetricHandler, got {type(handler).__name__}")
    global _default_metrics_handler
    if group is None:
        _default_metrics_handler = handler
    else:
        _metrics_map[group] = handler


def getStream(group: str) -> MetricStream:
    """The stream of ``group``: its configured handler, else the default one."""
    return MetricStream(group, _metrics_map.get(group, _default_metrics_handler))


def _get_metric_name(fn: Callable) -> str:
    qualname = fn.__qualname__
    split = qualname.split(".")
    if len(split) == 1:
        module = fn.__module__
        return module.split(".")[-1] + "." + split[0] if module else split[0]
    return qualname


def get_elapsed_time_ms(start_time_in_seconds: float) -> int:
    """Milliseconds since ``start_time_in_seconds`` (a ``time.time()`` value), as an int."""
    return int((time.time() - start_time_in_seconds) * 1000)


def put_metric(metric_name: str, metric_value: int, metric_group: str = "torchelastic"):
    """Publish one data point: ``put_metric("restarts", 1)``, ``put_metric("loss", 3, "my_app")``."""
    getStream(metric_group).add_value(metric_name, metric_value)


def prof(fn: Optional[Callable] = None, group: str = "torchelastic"):
    """Decorator publishing ``{name}.success`` (1), or ``{name}.failure`` (1) when it raises, and
    ``{name}.duration.ms``; ``name`` is ``Class.method``, or ``module.function`` for a plain function.
    Usable bare (``@prof``) or with a group (``@prof(group="agent")``)."""

    def wrap(f: Callable) -> Callable:
        @wraps(f)
        def wrapper(*args, **kwargs):
            key = _get_metric_name(f)
            start = time.time()
            try:
                result = f(*args, **kwargs)
                put_metric(f"{key}.success", 1, group)
            except Exception:
                put_metric(f"{key}.failure", 1, group)
                raise
            finally:
                put_metric(f"{key}.duration.ms", get_elapsed_time_ms(start), group)
            return result

        return wrapper

    return wrap(fn) if fn else wrap
