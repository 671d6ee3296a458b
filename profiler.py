"""``tritensor.profiler`` (torch.profiler): ``record_function`` only.

Instrumented code marks regions with ``torch.profiler.record_function("name")``; it is the same
marker as ``tritensor.autograd.profiler.record_function``, a no-op until tritensor has a profiler
that collects ranges (that module says so). ``profile``, schedules and trace handlers are not
provided: a script that builds a profiler gets an ``AttributeError`` naming what is missing, not a
profiler that silently records nothing.
"""
from .autograd.profiler import record_function

__all__ = ["record_function"]
