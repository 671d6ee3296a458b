"""``tritensor.jit``: the parts of ``torch.jit`` that model code calls outside TorchScript.

Model libraries (Hugging Face, timm) guard code paths with ``torch.jit.is_scripting()`` and mark
methods with ``@torch.jit.ignore`` / ``@torch.jit.unused`` / ``@torch.jit.export``. tritensor runs
eagerly and never scripts or traces, so it answers as torch does outside scripting:
``is_scripting()`` and ``is_tracing()`` are ``False``, the decorators return the function
unchanged, ``Final`` is ``typing.Final``, ``annotate`` returns its value. Compiling a model to
TorchScript is not provided: ``script`` and ``trace`` raise ``NotImplementedError`` rather than
return something that only looks scripted (``tritensor.compile`` is the way to capture a step).
"""
from __future__ import annotations

from typing import Final

__all__ = ["Final", "annotate", "export", "ignore", "is_scripting", "is_tracing", "script", "trace", "unused"]


def is_scripting() -> bool:
    """``False``: tritensor code always runs as Python, never as TorchScript."""
    return False


def is_tracing() -> bool:
    """``False``: there is no tracer."""
    return False


def ignore(drop=False, **kwargs):
    """``@ignore`` or ``@ignore(drop=...)``: the function, unchanged."""
    if callable(drop):
        return drop

    def decorator(fn):
        return fn

    return decorator


def unused(fn):
    """``@unused``: the function, unchanged (it only matters to TorchScript)."""
    return fn


def export(fn):
    """``@export``: the function, unchanged (it only matters to TorchScript)."""
    return fn


def annotate(the_type, the_value):
    """``the_value`` itself: the type is a TorchScript hint."""
    return the_value


_NO_TORCHSCRIPT = ("{}: TorchScript is not provided by tritensor (it runs eagerly); call the module or function "
                   "directly, or capture a training step with tritensor.compile")


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """Refused with NotImplementedError: tritensor does not compile to TorchScript (see the module docstring)."""
    raise NotImplementedError(_NO_TORCHSCRIPT.format("tritensor.jit.script"))


def trace(func, example_inputs=None, *args, **kwargs):
    """Refused with NotImplementedError: there is no tracer (see the module docstring)."""
    raise NotImplementedError(_NO_TORCHSCRIPT.format("tritensor.jit.trace"))
