"""``LazyModuleMixin``, in torch's file: the base of the lazy modules (``LazyLinear``, ``LazyConv*``,
``LazyBatchNorm*`` ...), whose parameters' shapes come from their first input.

A lazy module holds ``UninitializedParameter``/``UninitializedBuffer`` placeholders. A forward
pre-hook runs ``initialize_parameters(*args)`` on the first call, which materializes them from the
input's shape and initialises them as the eager layer would; the hook then removes itself and the
module becomes its ``cls_to_become`` (``LazyLinear`` -> ``Linear``). Before that, ``state_dict`` holds
the placeholders themselves, and ``load_state_dict`` materializes them to the loaded shapes (the
module keeps its lazy class, as torch's). Build an optimizer after a dry run: before it, the
parameters have no shape.
"""
from __future__ import annotations

import itertools

from ...autograd.grad_mode import no_grad
from ..parameter import is_lazy


class LazyModuleMixin:
    """A module whose parameters are materialized on its first forward, as torch.nn.modules.lazy.LazyModuleMixin
    (see the module docstring); subclasses define ``initialize_parameters``."""

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._load_hook = self._register_load_state_dict_pre_hook(self._lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters)

    def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                        error_msgs) -> None:
        for name, param in itertools.chain(self._parameters.items(), self._buffers.items()):
            key = prefix + name
            if key in state_dict and param is not None and is_lazy(param) and not is_lazy(state_dict[key]):
                with no_grad():
                    param.materialize(state_dict[key].shape)

    def initialize_parameters(self, *args, **kwargs) -> None:
        """Materialize and initialise the parameters from the first input (each lazy class's own)."""
        raise NotImplementedError(f"initialize_parameters is not implemented for {type(self).__name__}")

    def has_uninitialized_params(self) -> bool:
        """Whether any parameter or buffer is still a placeholder."""
        return any(is_lazy(t) for t in itertools.chain(self._parameters.values(), self._buffers.values()))

    def _infer_parameters(self, module, args) -> None:
        module.initialize_parameters(*args)
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {type(self).__name__} has not been fully initialized")
        module._initialize_hook.remove()
        module._load_hook.remove()
        delattr(module, "_initialize_hook")
        delattr(module, "_load_hook")
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _replicate_for_data_parallel(self):
        raise RuntimeError("Modules with uninitialized parameters can't be used with `DataParallel`. Run a dummy "
                           "forward pass to correctly initialize the modules")
