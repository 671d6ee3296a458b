"""tritensor.ao: model-accuracy tooling. ``ao.ns`` is the numeric suite (float32 vs fp16/bf16)."""
from . import ns

__all__ = ["ns"]
