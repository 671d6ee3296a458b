"""tritensor.elastic.metrics: publish telemetry to per-group handlers, as ``torch.distributed.elastic.metrics``.

It exists so that elastic's own metrics (group ``"torchelastic"``) and a job's reach whatever sink
the user configures; by default they go nowhere::

    import tritensor.elastic.metrics as metrics

    metrics.configure(metrics.NullMetricHandler())            # everything else: dropped
    metrics.configure(metrics.ConsoleMetricHandler(), "my_module")
    metrics.put_metric("calculate_latency", 12, "my_module")

    @metrics.prof(group="my_module")                          # .success/.failure/.duration.ms
    def step(): ...

A custom sink subclasses ``MetricHandler`` and implements ``emit(metric_data)``.
"""

from .api import (ConsoleMetricHandler, MetricData, MetricHandler, MetricsConfig, MetricStream, NullMetricHandler,
                  configure, get_elapsed_time_ms, getStream, prof, put_metric)

# The spellings used in the examples of PyTorch's metrics page, kept so those examples run.
ConsoleMetricsHandler = ConsoleMetricHandler
NullMetricsHandler = NullMetricHandler

__all__ = ["ConsoleMetricHandler", "MetricData", "MetricHandler", "MetricsConfig", "MetricStream",
           "NullMetricHandler", "configure", "get_elapsed_time_ms", "getStream", "prof", "put_metric",
           "ConsoleMetricsHandler", "NullMetricsHandler"]
