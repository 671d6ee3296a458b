"""tritensor.elastic.metrics and tritensor.elastic.events, captured by custom handlers."""

import json
import logging
import time

import pytest

from tritensor.elastic import events, metrics
from tritensor.elastic.events import api as events_api
from tritensor.elastic.metrics import api as metrics_api


@pytest.fixture(autouse=True)
def fresh_sinks(monkeypatch):
    """Each test configures its own handlers; the module-wide routing is restored afterwards."""
    monkeypatch.setattr(metrics_api, "_metrics_map", {})
    monkeypatch.setattr(metrics_api, "_default_metrics_handler", metrics.NullMetricHandler())
    monkeypatch.setattr(events, "_event_handler", events.NullEventHandler())


class ListMetricHandler(metrics.MetricHandler):
    def __init__(self):
        self.data = []

    def emit(self, metric_data):
        self.data.append(metric_data)


def test_put_metric_routes_groups_to_their_handlers():
    default, mine = ListMetricHandler(), ListMetricHandler()
    metrics.configure(default)
    metrics.configure(mine, group="my_app")
    t0 = time.time()
    metrics.put_metric("restarts", 1)  # group "torchelastic"
    metrics.put_metric("loss", 3, "my_app")
    assert [(d.group_name, d.name, d.value) for d in default.data] == [("torchelastic", "restarts", 1)]
    assert [(d.group_name, d.name, d.value) for d in mine.data] == [("my_app", "loss", 3)]
    d = mine.data[0]
    assert isinstance(d, metrics.MetricData) and t0 <= d.timestamp <= time.time()
    stream = metrics.getStream("my_app")
    assert stream.handler is mine and metrics.getStream("other").handler is default
    stream.add_value("x", 7)
    assert mine.data[-1][1:] == ("my_app", "x", 7)


class Bar:
    @metrics.prof(group="agent")
    def baz(self, fail=False):
        time.sleep(0.01)
        if fail:
            raise RuntimeError("no")
        return "ok"


@metrics.prof
def plain():
    return 5


def test_prof_publishes_success_failure_and_duration():
    h = ListMetricHandler()
    metrics.configure(h, "agent")
    metrics.configure(h, "torchelastic")
    assert Bar().baz() == "ok"
    with pytest.raises(RuntimeError):
        Bar().baz(fail=True)
    assert plain() == 5
    got = [(d.group_name, d.name, d.value) for d in h.data]
    assert got[0] == ("agent", "Bar.baz.success", 1) and got[1][:2] == ("agent", "Bar.baz.duration.ms")
    assert got[1][2] >= 10 and isinstance(got[1][2], int)
    assert got[2] == ("agent", "Bar.baz.failure", 1) and got[3][1] == "Bar.baz.duration.ms"
    # a plain function is named after its module's leaf name
    assert [n for _, n, _ in got[4:]] == [f"{plain.__module__.split('.')[-1]}.plain.success",
                                          f"{plain.__module__.split('.')[-1]}.plain.duration.ms"]


def test_console_and_null_handlers(capsys):
    metrics.configure(metrics.ConsoleMetricHandler(), "my_app")
    metrics.put_metric("my_metric", 4, "my_app")
    metrics.put_metric("dropped", 1)  # default: NullMetricHandler
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.rstrip().endswith("[my_app]: my_metric=4")
    assert metrics.ConsoleMetricsHandler is metrics.ConsoleMetricHandler  # the seed's spelling
    with pytest.raises(TypeError, match="MetricHandler"):
        metrics.configure(print)


def test_event_serialises_and_round_trips():
    e = events.Event(name="test_event", source=events.EventSource.WORKER, timestamp=123,
                     metadata={"rank": 0, "ok": True, "loss": 0.5, "note": None})
    assert json.loads(str(e)) == {"name": "test_event", "source": "WORKER", "timestamp": 123,
                                  "metadata": {"rank": 0, "ok": True, "loss": 0.5, "note": None}}
    assert events.Event.deserialize(e.serialize()) == e and events.Event.deserialize(e) is e
    assert events_api.Event is events.Event and [s.value for s in events.EventSource] == ["AGENT", "WORKER"]


def test_record_reaches_custom_handler_and_logging_destinations():
    class ListEventHandler(events.EventHandler):
        def __init__(self):
            self.events = []

        def record(self, event):
            self.events.append(event)

    h = ListEventHandler()
    events.configure(h)
    e = events.Event(name="agent.start", source=events.EventSource.AGENT)
    events.record(e)  # destination "null": logged nowhere, still handed to the handler
    assert h.events == [e]

    lines = []

    class Capture(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    cap = Capture()
    logging.getLogger("torchelastic-events-console").addHandler(cap)
    try:
        events.record(e, destination="console")
    finally:
        logging.getLogger("torchelastic-events-console").removeHandler(cap)
    assert lines == [e.serialize()] and h.events == [e, e]
    assert isinstance(events.get_logging_handler("console"), logging.StreamHandler)
    assert isinstance(events.get_logging_handler(), logging.NullHandler)
    with pytest.raises(KeyError, match="unknown events destination 'nowhere'"):
        events.record(e, destination="nowhere")
    with pytest.raises(TypeError, match="EventHandler"):
        events.configure(object())
