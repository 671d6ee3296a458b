"""``python -m tritensor.bench --plot PATH``: the kernel report as a PNG, one readable panel per family.

Each panel draws throughput (the family's TFLOP/s or GB/s, log scale) against the family's own
size (elements, M = N = K, H = W, L = S: the family module's ``SIZE_AXIS``), one colour per
series (an op and its variant, without the size) and dtype: tritensor solid, the peer timed in
the same run dashed in the same colour. A family measured at one size only is drawn as bars,
tritensor's and the peer's side by side for each series: a line through one x would only be a
column of dots. Panels sit on a grid of at most three columns; the figure's title names the
mode (GPU, or CPU through Triton's interpreter), the device and the date.

matplotlib is optional (``pip install -e ".[plot]"``): :func:`available` lets the command line
refuse ``--plot`` before anything runs; :func:`save` imports it.
"""
from __future__ import annotations

import importlib.util
import math

__all__ = ["available", "figure", "save", "INSTALL_HINT"]

INSTALL_HINT = 'pip install -e ".[plot]" (or: pip install matplotlib)'
MAX_COLUMNS = 3


def available() -> bool:
    """Whether matplotlib can be imported here."""
    try:
        return importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):
        return False


def _series(results) -> list:
    """[(label, [results])] in first-seen order: one per (series, dtype)."""
    groups: dict = {}
    for r in results:
        groups.setdefault((r.series or r.op, r.dtype), []).append(r)
    return [(f"{series} {dtype}", sorted(rows, key=lambda r: r.size)) for (series, dtype), rows in groups.items()]


def _peer_name(results) -> str:
    names = sorted({r.peer_name for r in results if r.peer_name})
    return " / ".join(names) if names else ""


def _lines(ax, results, colors, size_axis):
    for (label, rows), color in zip(_series(results), colors):
        xs = [r.size for r in rows]
        ax.plot(xs, [r.throughput for r in rows], color=color, marker="o", label=label)
        peer = [(r.size, r.peer_throughput) for r in rows if r.peer_throughput]
        if peer:
            ax.plot(*zip(*peer), color=color, marker="s", markerfacecolor="none", linestyle="--")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(size_axis)


def _bars(ax, results, colors, size_axis):
    groups = _series(results)
    width = 0.4
    for i, ((label, rows), color) in enumerate(zip(groups, colors)):
        r = rows[0]
        ax.bar(i - width / 2, r.throughput, width, color=color, label=label, log=True)
        if r.peer_throughput:
            ax.bar(i + width / 2, r.peer_throughput, width, color=color, alpha=0.45, hatch="//",
                   edgecolor=color, log=True)
    ax.set_xticks(range(len(groups)), [label for label, _ in groups], rotation=30, ha="right", fontsize=7)
    ax.set_xlabel(f"{size_axis} = {results[0].size}")


def save(path: str, results, size_axes: dict, title: str) -> None:
    """Write :func:`figure` of ``results`` to ``path`` as a PNG."""
    import matplotlib.pyplot as plt

    fig = figure(results, size_axes, title)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def figure(results, size_axes: dict, title: str):
    """The figure of ``results`` (bench.common.Result): ``size_axes`` maps a family to its size's
    name, ``title`` heads the figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    families = list(dict.fromkeys(r.family for r in results))
    ncols = min(MAX_COLUMNS, len(families))
    nrows = math.ceil(len(families) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.4 * ncols, 4.8 * nrows), squeeze=False, layout="constrained")
    palette = plt.get_cmap("tab10").colors
    for ax, fam in zip(axes.flat, families):
        rows = [r for r in results if r.family == fam]
        colors = [palette[i % len(palette)] for i in range(len(_series(rows)))]
        one_size = len({r.size for r in rows}) == 1
        (_bars if one_size else _lines)(ax, rows, colors, size_axes.get(fam, "size"))
        if not one_size:
            ax.set_yscale("log")
        ax.set_title(fam, fontsize=11, fontweight="bold")
        ax.set_ylabel(f"{rows[0].unit} (log scale)")
        ax.grid(True, which="major", alpha=0.3)
        handles, _ = ax.get_legend_handles_labels()
        peer = _peer_name(rows)
        if one_size:
            style = [Patch(facecolor="black", label="tritensor")]
            if peer:
                style.append(Patch(facecolor="black", alpha=0.45, hatch="//", label=f"{peer} (same run)"))
        else:
            style = [Line2D([], [], color="black", marker="o", label="tritensor")]
            if peer:
                style.append(Line2D([], [], color="black", marker="s", markerfacecolor="none", linestyle="--",
                                    label=f"{peer} (same run)"))
        ax.legend(handles=handles + style, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  borderaxespad=0.0)
    for ax in list(axes.flat)[len(families):]:
        ax.remove()
    fig.suptitle(title, fontsize=12)
    return fig
