"""A one-call numeric-suite report: per layer, the SQNR (dB) of the reduced-precision copy's
weights and activations against the float32 model's.

    from tritensor.ao.ns.report import numeric_report
    text = numeric_report(model, tritensor.bfloat16, x)      # or a ready copy instead of the dtype
    text = numeric_report(model, tritensor.autocast("cpu"), x)  # the same model under autocast

    python -m tritensor.ao.ns.report [--dtype bf16|fp16] [--autocast] [--model pkg.mod:factory
                                     --input-shape 2,1,8,8] [--png PATH | --no-png]

Prints the table; writes a PNG bar chart when matplotlib is installed (it is optional: without it
the report says so and still prints). The models given are not changed (the suite runs on copies).
"""
from __future__ import annotations

import argparse
import importlib
import math
import sys

from ... import nn
from ...amp import autocast
from ...core import factories
from ...runtime.dtype import bfloat16, dtype as _dtype, float16
from . import _numeric_suite as ns

try:  # optional: only the chart needs it
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as _plt
except ImportError:  # pragma: no cover - depends on the environment
    _plt = None

__all__ = ["numeric_report", "sqnr_table", "main"]

NO_MATPLOTLIB = 'matplotlib is not installed: no chart written (pip install -e ".[plot]", or pip install matplotlib)'


def sqnr_table(float_model, q_model, *data, allow_list=None):
    """The report's rows, one per layer with a weight or a logged activation:
    ``[(name, type_name, weight_sqnr or None, activation_sqnr or None)]`` in module order.
    ``q_model`` an ``autocast`` region: activations of the same model run inside it, and no weight
    column (the weights stay float32; each op casts what it uses)."""
    if isinstance(q_model, autocast):
        weights = {}
        acts = ns.compare_model_outputs_autocast(ns._copy_model(float_model), *data, device_type=q_model.device,
                                                 dtype=q_model.fast_dtype, allow_list=allow_list)
    else:
        weights = ns.compare_weights(float_model.state_dict(), q_model.state_dict())
        acts = ns.compare_model_outputs(ns._copy_model(float_model), ns._copy_model(q_model), *data,
                                        allow_list=allow_list)
    rows = []
    for name, mod in float_model.named_modules():
        if not name:
            continue
        w = weights.get(name + ".weight")
        a = acts.get(name + ".stats")
        if w is None and a is None:
            continue
        rows.append((name, type(mod).__name__,
                     None if w is None else ns.compute_sqnr(w["float"], w["quantized"]),
                     None if a is None else ns.compute_sqnr(a["float"], a["quantized"])))
    return rows


def _fmt(v):
    if v is None:
        return "-"
    return "inf" if math.isinf(v) and v > 0 else f"{v:.2f}"


def format_table(rows, title=""):
    """The (layer, type, weight SQNR, activation SQNR) rows as an aligned text table under ``title``."""
    head = ("layer", "type", "weight SQNR (dB)", "activation SQNR (dB)")
    body = [(n, t, _fmt(w), _fmt(a)) for n, t, w, a in rows]
    widths = [max(len(r[i]) for r in [head] + body) for i in range(4)]
    lines = [title] if title else []
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in body]
    return "\n".join(lines)


def _chart(rows, path, title):
    names = [r[0] for r in rows]
    fig, ax = _plt.subplots(figsize=(max(4, 0.8 * len(rows) + 2), 3.5))
    xs = range(len(rows))
    cap = lambda v: float("nan") if v is None else (200.0 if math.isinf(v) else v)  # noqa: E731
    ax.bar([x - 0.2 for x in xs], [cap(r[2]) for r in rows], width=0.4, label="weights")
    ax.bar([x + 0.2 for x in xs], [cap(r[3]) for r in rows], width=0.4, label="activations")
    ax.set_xticks(list(xs), names, rotation=45, ha="right")
    ax.set_ylabel("SQNR (dB)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    _plt.close(fig)


def numeric_report(float_model, q_model, *data, allow_list=None, png=None, file=None):
    """Print (to ``file``, default stdout) and return the per-layer SQNR table of ``q_model`` (a
    reduced-precision copy of ``float_model``, or a dtype, float16/bfloat16, to make one, or an
    ``autocast`` region to run the same model in) against ``float_model`` on ``data``. With ``png``
    a path, also write a bar chart there when matplotlib is installed (otherwise say so)."""
    if isinstance(q_model, _dtype):
        q_model = ns.reduced_precision_copy(float_model, q_model)
    if isinstance(q_model, autocast):
        title = (f"numeric suite: float32 model vs the same model under autocast({q_model.device!r}, "
                 f"{str(q_model.fast_dtype).split('.')[-1]}), SQNR per layer (higher is closer)")
    else:
        lowp = ns._param_dtype(q_model)
        title = (f"numeric suite: float32 model vs its {str(lowp).split('.')[-1]} copy, SQNR per layer "
                 "(higher is closer)")
    rows = sqnr_table(float_model, q_model, *data, allow_list=allow_list)
    text = format_table(rows, title)
    if png is not None:
        if _plt is None:
            text += "\n" + NO_MATPLOTLIB
        else:
            _chart(rows, png, title)
            text += f"\nchart written to {png}"
    print(text, file=file or sys.stdout)
    return text


def tiny_convnet():
    """The demo model: Conv2d, ReLU, MaxPool2d, Flatten, Linear on 1x8x8 inputs."""
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(4 * 4 * 4, 10))


def main(argv=None) -> int:
    """The command line (``python -m tritensor.ao.ns.report``): build the model, compare it against its reduced-
    precision twin, print the table; returns the exit status."""
    p = argparse.ArgumentParser(prog="python -m tritensor.ao.ns.report", description=__doc__.split("\n\n")[0])
    p.add_argument("--dtype", choices=["bf16", "fp16"], default="bf16", help="the reduced precision (default bf16)")
    p.add_argument("--autocast", action="store_true",
                   help="compare against the same model under autocast('cpu' or 'cuda', --dtype) instead of a copy")
    p.add_argument("--model", default=None,
                   help="pkg.module:factory returning a float32 nn.Module (default: a tiny convnet)")
    p.add_argument("--input-shape", default="2,1,8,8", help="shape of the random input batch (default 2,1,8,8)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--png", default="numeric_suite.png", help="where to write the chart (needs matplotlib)")
    p.add_argument("--no-png", action="store_true", help="write no chart")
    args = p.parse_args(argv)
    factories.manual_seed(args.seed)
    if args.model:
        mod_name, _, attr = args.model.partition(":")
        if not attr:
            p.error("--model must be pkg.module:factory")
        model = getattr(importlib.import_module(mod_name), attr)()
    else:
        model = tiny_convnet()
    shape = tuple(int(s) for s in args.input_shape.split(","))
    x = factories.randn(*shape)
    lowp = bfloat16 if args.dtype == "bf16" else float16
    params = list(model.parameters())
    dev = params[0].device.type if params else "cpu"
    numeric_report(model, autocast(dev, dtype=lowp) if args.autocast else lowp, x,
                   png=None if args.no_png else args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
