"""The logging handlers behind event destinations: ``"console"`` (stderr), ``"null"`` (nowhere).

It exists because events are integrated with the standard ``logging`` module: each destination
is a ``logging.Handler`` on its own non-propagating logger, ``torchelastic-events-{destination}``.
"""

from __future__ import annotations

import logging
from typing import Dict

__all__ = ["get_logging_handler"]

_log_handlers: Dict[str, logging.Handler] = {
    "console": logging.StreamHandler(),
    "dynamic_rendezvous": logging.NullHandler(),
    "null": logging.NullHandler(),
}


def get_logging_handler(destination: str = "null") -> logging.Handler:
    """The ``logging.Handler`` of ``destination``; ``KeyError`` naming the known ones otherwise."""
    try:
        return _log_handlers[destination]
    except KeyError:
        raise KeyError(f"unknown events destination {destination!r}; known: {sorted(_log_handlers)}") from None
