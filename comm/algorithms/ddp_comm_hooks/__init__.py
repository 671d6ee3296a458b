"""DDP communication hooks at torch's module paths: :mod:`.default_hooks` (allreduce, fp16/bf16
compression and wrappers) and :mod:`.powerSGD_hook` (PowerSGD)."""
from . import default_hooks, powerSGD_hook

__all__ = ["default_hooks", "powerSGD_hook"]
