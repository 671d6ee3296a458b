"""tritensor.elastic.events: record what happens in a job, as ``torch.distributed.elastic.events``.

It exists so that agents and workers can publish ``Event``\\ s to the standard ``logging`` module
(one logger per destination, ``"null"`` by default, ``"console"`` to stderr) and to a custom
``EventHandler`` set with :func:`configure`::

    from tritensor.elastic import events

    event = events.Event(name="test_event", source=events.EventSource.WORKER, metadata={"step": 3})
    events.get_logging_handler(destination="console")   # a logging.Handler
    events.record(event, destination="console")          # the JSON line on stderr

    class MyEventHandler(events.EventHandler):
        def record(self, event): ...
    events.configure(MyEventHandler())
"""

from __future__ import annotations

import logging
import os
from typing import Dict

from .api import Event, EventHandler, EventMetadataValue, EventSource, NullEventHandler
from .handlers import get_logging_handler

__all__ = ["Event", "EventSource", "EventMetadataValue", "EventHandler", "NullEventHandler", "record",
           "configure", "get_logging_handler"]

_events_loggers: Dict[str, logging.Logger] = {}
_event_handler: EventHandler = NullEventHandler()


def _get_or_create_logger(destination: str = "null") -> logging.Logger:
    if destination not in _events_loggers:
        handler = get_logging_handler(destination)  # an unknown destination raises here
        logger = logging.getLogger(f"torchelastic-events-{destination}")
        logger.setLevel(os.environ.get("LOGLEVEL", "INFO"))
        logger.propagate = False  # events are not the application's log lines
        logger.addHandler(handler)
        _events_loggers[destination] = logger
    return _events_loggers[destination]


def configure(handler: EventHandler) -> None:
    """Send every recorded event to ``handler`` too (the default ``NullEventHandler`` ignores them)."""
    if not isinstance(handler, EventHandler):
        raise TypeError(f"events.configure: handler must be an EventHandler, got {type(handler).__name__}")
    global _event_handler
    _event_handler = handler


def record(event: Event, destination: str = "null") -> None:
    """Log ``event`` as one JSON line to ``destination``'s logger and hand it to the configured handler."""
    logger = _get_or_create_logger(destination)
    _event_handler.record(event)
    logger.info(event.serialize())
