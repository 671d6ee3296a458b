"""tritensor.ao.ns: the numeric suite, re-targeted from int8 to float formats.

``_numeric_suite`` has PyTorch's names (``compare_weights``, ``compare_model_stub``,
``compare_model_outputs`` ..., and ``compare_model_outputs_autocast``: a model against itself under
autocast); ``report`` prints a per-layer SQNR table
(``python -m tritensor.ao.ns.report``)."""
from . import _numeric_suite
from ._numeric_suite import compute_sqnr, reduced_precision_copy

__all__ = ["_numeric_suite", "compute_sqnr", "reduced_precision_copy"]
