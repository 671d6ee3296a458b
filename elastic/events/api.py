"""Event types of the elastic layer (``torch.distributed.elastic.events.api``).

It exists so that what happens during a job -- an agent changing state, a worker starting --
can be recorded as a small, JSON-serialisable ``Event`` and shipped to a handler.
"""

from __future__ import annotations

import abc
import json
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Dict, Optional, Union

__all__ = ["EventSource", "Event", "EventMetadataValue", "EventHandler", "NullEventHandler"]

EventMetadataValue = Optional[Union[str, int, float, bool]]


class EventSource(str, Enum):
    """Known identifiers of the event producers."""

    AGENT = "AGENT"
    WORKER = "WORKER"


@dataclass
class Event:
    """A generic event of a job: ``name``, ``source`` (``EventSource``), ``timestamp`` in
    milliseconds and ``metadata`` (str -> str/int/float/bool/None). ``str(event)`` is its JSON."""

    name: str
    source: EventSource
    timestamp: int = 0
    metadata: Dict[str, EventMetadataValue] = field(default_factory=dict)

    def __str__(self):
        return self.serialize()

    @staticmethod
    def deserialize(data: Union[str, "Event"]) -> "Event":
        """An Event from its JSON (an Event is returned as it is)."""
        if isinstance(data, Event):
            return data
        data_dict = json.loads(data)
        data_dict["source"] = EventSource[data_dict["source"]]
        return Event(**data_dict)

    def serialize(self) -> str:
        """The event as JSON, its source written by name, as torch's."""
        d = asdict(self)
        d["source"] = self.source.value if isinstance(self.source, EventSource) else str(self.source)
        return json.dumps(d)


class EventHandler(abc.ABC):
    """A sink for events (CloudWatch, a database, a test's list): implement :meth:`record`."""

    @abc.abstractmethod
    def record(self, event: Event) -> None:
        """Receive one event; the base does nothing, subclasses (and the handler given to tritensor-run) store or
        print it."""
        pass


class NullEventHandler(EventHandler):
    """Ignores every event (the default)."""

    def record(self, event: Event) -> None:
        """Discard the event."""
        pass
