"""How a tensor prints: PyTorch's ``torch/_tensor_str.py`` rules, on a host copy of the values.

The same options (``set_printoptions``: precision=4, threshold=1000, edgeitems=3, linewidth=80,
sci_mode, the ``default``/``short``/``full`` profiles), the same choice of fixed, integer-valued
(``1.``) or scientific notation from the nonzero finite values, the same summarisation (``...``
beyond ``threshold`` elements, ``edgeitems`` at each end), line wrapping and suffixes (device,
non-default dtype, ``size=`` of empty tensors, ``grad_fn``/``requires_grad``). So a tensor prints
as it would in PyTorch, with ``tritensor.`` dtype names. Printing launches no kernel.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math

import numpy as np

from ..runtime import dtype as dt


@dataclasses.dataclass
class _PrinterOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


PRINT_OPTS = _PrinterOptions()
_PROFILES = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80), "full": (4, math.inf, 3, 80)}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """Set the options for printing tensors (``torch.set_printoptions``): ``precision`` digits
    (4), ``threshold`` elements before summarising (1000), ``edgeitems`` shown at each end of a
    summarised dimension (3), ``linewidth`` (80), ``profile`` (``default``, ``short``, ``full``),
    ``sci_mode`` (True/False forces scientific notation on or off; None chooses)."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions(): profile must be one of {sorted(_PROFILES)}, got {profile!r}")
        (PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems,
         PRINT_OPTS.linewidth) = _PROFILES[profile]
    for name, value in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                        ("linewidth", linewidth)):
        if value is not None:
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise TypeError(f"set_printoptions(): {name} must be a non-negative number, got {value!r}")
            setattr(PRINT_OPTS, name, value)
    PRINT_OPTS.sci_mode = sci_mode


def get_printoptions() -> dict:
    """The current print options, as keyword arguments for :func:`set_printoptions`."""
    return dataclasses.asdict(PRINT_OPTS)


@contextlib.contextmanager
def printoptions(**kwargs):
    """Change the print options inside a ``with`` block."""
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)


class _Formatter:
    def __init__(self, values: np.ndarray, floating: bool):
        self.floating_dtype = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = values.reshape(-1)
        if not floating:
            for value in flat.tolist():
                self.max_width = max(self.max_width, len(f"{value}"))
            return
        nonzero = flat[np.isfinite(flat) & (flat != 0)]
        if nonzero.size == 0:
            return
        absval = np.abs(nonzero)
        lo, hi = float(absval.min()), float(absval.max())
        self.int_mode = bool(np.all(nonzero == np.ceil(nonzero)))
        self.sci_mode = (hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4) if PRINT_OPTS.sci_mode is None \
            else PRINT_OPTS.sci_mode
        p = PRINT_OPTS.precision
        for value in nonzero.tolist():
            if self.sci_mode:
                width = len(f"{value:.{p}e}")
            elif self.int_mode:
                width = len(f"{value:.0f}") + 1
            else:
                width = len(f"{value:.{p}f}")
            self.max_width = max(self.max_width, width)

    def width(self) -> int:
        return self.max_width

    def format(self, value) -> str:
        if self.floating_dtype:
            p = PRINT_OPTS.precision
            if self.sci_mode:
                ret = f"{value:{self.max_width}.{p}e}"
            elif self.int_mode:
                ret = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    ret += "."
            else:
                ret = f"{value:.{p}f}"
        else:
            ret = f"{value}"
        return (self.max_width - len(ret)) * " " + ret


def _vector_str(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    element_length = fmt.width() + 2
    elements_per_line = max(1, math.floor((PRINT_OPTS.linewidth - indent) / element_length))
    e = PRINT_OPTS.edgeitems
    if summarize and not e:
        data = ["..."]
    elif summarize and a.shape[0] > 2 * e:
        data = [fmt.format(v) for v in a[:e].tolist()] + [" ..."] + [fmt.format(v) for v in a[-e:].tolist()]
    else:
        data = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(data[i:i + elements_per_line]) for i in range(0, len(data), elements_per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str_with_formatter(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector_str(a, indent, summarize, fmt)
    e = PRINT_OPTS.edgeitems
    if summarize and a.shape[0] > 2 * e:
        rows = list(range(e)) + [None] + list(range(a.shape[0] - e, a.shape[0]))
    else:
        rows = range(a.shape[0])
    slices = ["..." if i is None else _tensor_str_with_formatter(a[i], indent + 1, summarize, fmt) for i in rows]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def _summarized(a: np.ndarray) -> np.ndarray:
    """The values a summarised print shows (what the formatter sizes its columns for)."""
    e = PRINT_OPTS.edgeitems
    if a.ndim == 0:
        return a
    if a.ndim == 1:
        return np.concatenate([a[:e], a[-e:]]) if a.shape[0] > 2 * e else a
    if not e:
        return a[(slice(0, 0),) * a.ndim]
    rows = list(range(e)) + list(range(a.shape[0] - e, a.shape[0])) if a.shape[0] > 2 * e else range(a.shape[0])
    parts = [_summarized(a[i]).reshape(-1) for i in rows]
    return np.concatenate(parts) if parts else a.reshape(-1)


def _tensor_str(a: np.ndarray, floating: bool, indent: int) -> str:
    if a.size == 0:
        return "[]"
    summarize = a.size > PRINT_OPTS.threshold
    fmt = _Formatter(_summarized(a) if summarize else a, floating)
    return _tensor_str_with_formatter(a, indent, summarize, fmt)


def _add_suffixes(tensor_str: str, suffixes: list, indent: int) -> str:
    out = [tensor_str]
    last_line_len = len(tensor_str) - tensor_str.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > PRINT_OPTS.linewidth:
            out.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            out.append(", " + suffix)
            last_line_len += len(suffix) + 2
    out.append(")")
    return "".join(out)


def tensor_repr(t, host: np.ndarray) -> str:
    """``repr(t)``, given ``host``, a host copy of ``t``'s values (bf16 already widened)."""
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    floating = t.dtype.is_floating_point
    a = host.astype(np.float64) if floating else host
    if t.numel() == 0:
        if t.ndim != 1:
            suffixes.append("size=" + str(tuple(t.shape)))
        if t.dtype is not dt.get_default_dtype():
            suffixes.append(f"dtype={t.dtype}")
        body = "[]"
    else:
        if not PRINT_OPTS.edgeitems:
            suffixes.append("size=" + str(tuple(t.shape)))
        if t.dtype not in (dt.get_default_dtype(), dt.int64, dt.bool_):
            suffixes.append(f"dtype={t.dtype}")
        body = _tensor_str(a, floating, indent)
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{type(t.grad_fn).__name__}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
