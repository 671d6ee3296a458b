"""``tritensor.onnx``: the names model code touches, for a library that does not export ONNX.

tritensor has no graph tracer to export from (its programs are eager Python over Triton kernels),
so ONNX export is left out by design. Programs written for torch still import ``torch.onnx`` and
ask ``torch.onnx.is_in_onnx_export()`` on their forward path; those work here, and an actual
export says plainly that it is not provided instead of failing on a missing attribute.
"""
from __future__ import annotations

__all__ = ["export", "is_in_onnx_export"]


def is_in_onnx_export() -> bool:
    """Whether an ONNX export is tracing the caller: never, since tritensor does not export ONNX."""
    return False


def export(model, args=(), f=None, *unused_args, **unused_kwargs):
    """Refused: tritensor does not export ONNX (no tracer over its eager programs). Save the weights
    with ``tritensor.save(model.state_dict(), path)`` (a safetensors file) and export from a
    library that traces, such as torch, after loading them there."""
    raise NotImplementedError(
        "tritensor.onnx.export: ONNX export is not provided by tritensor (it has no graph tracer). "
        "Save the weights with tritensor.save(model.state_dict(), path), a safetensors file, and export "
        "from torch after loading them there.")
