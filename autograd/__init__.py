"""tritensor.autograd: reverse-mode automatic differentiation on tritensor's kernels.

Read in this order: ``grad_mode.py`` (is recording on?), ``function.py`` (how an op is
recorded), ``graph.py`` (nodes, edges, saved tensors, hooks), ``engine.py`` (running the graph
backwards), ``functions/`` (each op's derivative), ``layer.py`` (the dispatcher layer that
records ops, registered on import), ``gradcheck.py``.
"""
from . import layer  # noqa: F401  (registers the autograd layer with core/dispatch.py)
from .anomaly_mode import (detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled, set_anomaly_enabled,
                           set_detect_anomaly)
from .engine import backward, grad
from . import functional  # torch.autograd.functional: jacobian, hessian, vjp, jvp, hvp, vhp
from .function import Function, FunctionCtx
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
                        set_grad_enabled)
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .grad_layout import enforce_grad_layout_policy
from .graph import Node
from .multithreading import set_multithreading_enabled
from .variable import Variable, variable  # torch's legacy names: the class, and the deprecated function

__all__ = ["backward", "grad", "Function", "FunctionCtx", "Node", "no_grad", "enable_grad", "set_grad_enabled",
           "inference_mode", "is_inference_mode_enabled",
           "is_grad_enabled", "gradcheck", "GradcheckError", "gradgradcheck", "detect_anomaly", "set_detect_anomaly",
           "is_anomaly_enabled", "is_anomaly_check_nan_enabled", "set_multithreading_enabled", "Variable", "variable",
           "enforce_grad_layout_policy"]
