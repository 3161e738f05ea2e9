"""The report's charts, drawn with matplotlib (Agg, no display) and returned as PNG bytes.

No pyplot: every chart is its own Figure, so drawing has no global state and works
inside pytest, xdist workers and the ``qconform report`` command alike.
"""

from __future__ import annotations

import io
import math

import numpy as np

TARGET_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf"]
CAUSE_COLORS = {"unexplained": "#d62728", "saturation": "#ff7f0e", "scheme": "#1f77b4", "tie": "#2ca02c"}


def _figure(w: float, h: float, left: float = 0.7, bottom: float = 0.55, right: float = 0.15, top: float = 0.35):
    """A figure with fixed margins in inches (no tight-bbox pass: drawing is the slow part)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    w = max(w, left + right + 1.0)       # margins never eat the plot
    h = max(h, bottom + top + 1.0)
    fig = Figure(figsize=(w, h), dpi=80)
    FigureCanvasAgg(fig)
    fig.subplots_adjust(left=left / w, bottom=bottom / h, right=1 - right / w, top=1 - top / h)
    return fig


def _label_inches(labels) -> float:
    """Room for the longest tick label (about 0.095 in per character at font size 10)."""
    return 0.3 + 0.095 * max((len(str(x)) for x in labels), default=1)


def _plain_log(axis) -> None:
    """Log axis with plain tick labels (the default math-text labels cost a parser run each)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator
    axis.set_major_locator(LogLocator(base=10, numticks=6))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_locator(NullLocator())   # minor log ticks were most of the drawing time


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def matrix_png(ops: list[str], targets: list[str], pct: dict[tuple[str, str], float | None],
               failed: dict[tuple[str, str], int]) -> bytes:
    """Heat map of bit-exact % per op x target; a cell with failures is outlined and marked."""
    from matplotlib.colors import LinearSegmentedColormap
    from matplotlib.patches import Rectangle
    cmap = LinearSegmentedColormap.from_list("qc", ["#c0392b", "#f1c40f", "#27ae60"])
    data = np.full((len(ops), len(targets)), np.nan)
    for i, op in enumerate(ops):
        for j, t in enumerate(targets):
            v = pct.get((op, t))
            if v is not None:
                data[i, j] = v
    left = _label_inches(ops)
    bottom = 0.3 + 0.06 * max(len(t) for t in targets)
    fig = _figure(left + 1.6 + 1.1 * len(targets), bottom + 0.6 + 0.32 * len(ops), left=left, right=1.5,
                  bottom=bottom)
    ax = fig.add_subplot(111)
    shown = np.clip(np.nan_to_num(data, nan=np.nan), 90, 100)   # the interesting range is 90..100 %
    im = ax.imshow(shown, cmap=cmap, vmin=90, vmax=100, aspect="auto")
    ax.set_xticks(range(len(targets)), targets, rotation=30, ha="right")
    ax.set_yticks(range(len(ops)), ops)
    for i, op in enumerate(ops):
        for j, t in enumerate(targets):
            v = data[i, j]
            nf = failed.get((op, t), 0)
            text = "-" if math.isnan(v) else (f"{v:.3g}" if v < 100 else "100")
            if nf:
                text += f"\n{nf} fail"
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="black", lw=2))
            ax.text(j, i, text, ha="center", va="center", fontsize=7)
    fig.colorbar(im, ax=ax, label="bit-exact % (clipped at 90)")
    ax.set_title("bit-exact % per op x target (outlined: failing cases)", y=1.0)
    return _png(fig)


def histogram_png(op: str, hists: dict[str, dict[str, int]], order) -> bytes:
    """Grouped bars: elements per error (LSB) per target for one op, log count axis."""
    keys = sorted({k for h in hists.values() for k in h}, key=order)
    fig = _figure(max(3.5, 0.9 + 0.45 * len(keys) * max(1, len(hists)) ** 0.5), 2.6, left=0.7, bottom=0.5)
    ax = fig.add_subplot(111)
    n = max(1, len(hists))
    width = 0.8 / n
    x = np.arange(len(keys))
    for j, (t, h) in enumerate(hists.items()):
        ax.bar(x + (j - (n - 1) / 2) * width, [h.get(k, 0) for k in keys], width,
               label=t, color=TARGET_COLORS[j % len(TARGET_COLORS)])
    ax.set_xticks(x, keys)
    ax.set_yscale("log")
    _plain_log(ax.yaxis)
    ax.set_xlabel("got - want (LSB)")
    ax.set_ylabel("elements")
    ax.set_title(f"{op}: error histogram", y=1.0)
    ax.legend(fontsize=7)
    return _png(fig)


def latency_png(ops: list[str], targets: list[str], p50: dict[tuple[str, str], float | None]) -> bytes:
    """Horizontal grouped bars: median p50 latency (µs, log axis) per op and target."""
    left = _label_inches(ops)
    fig = _figure(left + 6.5, 1.0 + 0.22 * len(ops) * max(1, len(targets)) ** 0.6, left=left)
    ax = fig.add_subplot(111)
    n = max(1, len(targets))
    height = 0.8 / n
    y = np.arange(len(ops))
    for j, t in enumerate(targets):
        vals = [p50.get((op, t)) or 0.0 for op in ops]
        ax.barh(y + (j - (n - 1) / 2) * height, vals, height, label=t, color=TARGET_COLORS[j % len(TARGET_COLORS)])
    ax.set_yticks(y, ops)
    ax.invert_yaxis()
    if any(v for v in p50.values()):
        ax.set_xscale("log")
        _plain_log(ax.xaxis)
    ax.set_xlabel("median p50 latency per case (µs)")
    ax.set_title("latency per op and target", y=1.0)
    ax.legend(fontsize=7, loc="lower right")
    return _png(fig)


def causes_png(labels: list[str], counts: dict[str, list[int]]) -> bytes:
    """Stacked horizontal bars: mismatching elements per cause for each (op, target)."""
    left = _label_inches(labels)
    fig = _figure(left + 6.5, 1.0 + 0.28 * len(labels), left=left)
    ax = fig.add_subplot(111)
    y = np.arange(len(labels))
    left = np.zeros(len(labels))
    for cause in ("unexplained", "saturation", "scheme", "tie"):
        vals = np.asarray(counts.get(cause, [0] * len(labels)), dtype=float)
        ax.barh(y, vals, left=left, label=cause, color=CAUSE_COLORS[cause])
        left += vals
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlabel("mismatching elements")
    ax.set_title("mismatch causes (unexplained first)", y=1.0)
    ax.legend(fontsize=7, loc="lower right")
    return _png(fig)
