"""The report's charts, drawn with matplotlib and returned as SVG bytes (text as text).

No pyplot: every chart is its own Figure, so drawing has no global state and works
inside pytest, xdist workers and the ``qconform report`` command alike.

Drawing time goes with the number of artists (a bar, tick, tick mark or text is one or
more, at up to a millisecond each), so: bars are one PolyCollection per chart or row, the
per-op error histograms are small multiples in one figure, category names (ops, error
bins) are texts rather than ticks, log axes have decade ticks only, axis labels sit at
fixed places, and the garbage collector skips what existed before a chart. SVG with
``svg.fonttype: none`` leaves the glyphs to the browser: no rasterizing, no PNG encoding.
"""

from __future__ import annotations

import functools
import gc
import io
import math

import numpy as np

TARGET_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf"]
CAUSE_COLORS = {"unexplained": "#d62728", "saturation": "#ff7f0e", "scheme": "#1f77b4", "tie": "#2ca02c"}


def _own_objects_only(chart):
    """``chart`` run with every older object frozen (``gc.freeze``) and thawed after.

    A chart makes some 10^5 objects, enough for a full collection, which would also walk
    everything else alive (pandas, matplotlib, the rows, pytest's items): a tenth of a second
    or more each time. Frozen objects are only skipped, never lost: ``gc.unfreeze`` puts them
    back.
    """
    @functools.wraps(chart)
    def run(*args, **kwargs):
        gc.freeze()
        try:
            return chart(*args, **kwargs)
        finally:
            gc.unfreeze()
    return run


def _figure(w: float, h: float, left: float = 0.7, bottom: float = 0.55, right: float = 0.15, top: float = 0.35):
    """A figure with fixed margins in inches (no tight-bbox pass: drawing is the slow part)."""
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure
    w = max(w, left + right + 1.0)       # margins never eat the plot
    h = max(h, bottom + top + 1.0)
    fig = Figure(figsize=(w, h))
    FigureCanvasSVG(fig)
    fig.subplots_adjust(left=left / w, bottom=bottom / h, right=1 - right / w, top=1 - top / h)
    return fig


def _svg(fig) -> bytes:
    """The figure as SVG: text as <text> (the browser draws the glyphs), the same bytes for the same chart."""
    from matplotlib import rc_context
    buf = io.BytesIO()
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "qconform"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def _label_inches(labels) -> float:
    """Room for the longest category label (about 0.095 in per character at font size 10)."""
    return 0.3 + 0.095 * max((len(str(x)) for x in labels), default=1)


def _decades(axis, lo: float, hi: float, most: int = 6) -> None:
    """Ticks of a log axis at the powers of ten in [lo, hi] (at most ``most``), plain labels, no minor
    ticks (the default locators also make ticks beyond the view, with math-text labels)."""
    from matplotlib.ticker import NullLocator
    d = np.arange(np.ceil(np.log10(lo)), np.floor(np.log10(hi)) + 1)
    d = d[::-(-len(d) // most)] if len(d) else np.log10([lo])
    axis.set_ticks(10.0 ** d, [f"{v:g}" for v in 10.0 ** d])
    axis.set_minor_locator(NullLocator())


def _labels(ax, x: str = "", y: str = "", below: float = 0.4, aside: float = 0.5) -> None:
    """Axis labels ``below`` and ``aside`` inches off the axes (placing them automatically measures
    every tick label first)."""
    w, h = ax.get_position().size * ax.figure.get_size_inches()
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.xaxis.set_label_coords(0.5, -below / h)
    ax.yaxis.set_label_coords(-aside / w, 0.5)


def _category_labels(ax, axis: str, pos, labels, pad: float = 3.5, **text) -> None:
    """Category names along the ``axis`` ("x" or "y") as texts, and no ticks there.

    A tick is five artists (marks, labels, grid line) and costs about three texts; on the long
    category axes (ops, bins) ticks were a third of the drawing time.
    """
    from matplotlib.transforms import offset_copy
    if axis == "x":
        ax.set_xticks([])
        at = offset_copy(ax.get_xaxis_transform(), ax.figure, y=-pad, units="points")
        for p, label in zip(pos, labels):
            ax.text(p, 0, label, transform=at, ha="center", va="top", **text)
    else:
        ax.set_yticks([])
        at = offset_copy(ax.get_yaxis_transform(), ax.figure, x=-pad, units="points")
        for p, label in zip(pos, labels):
            ax.text(0, p, label, transform=at, ha="right", va="center", **text)


def _bars(ax, pos, length, width: float, color, start=0.0, horizontal: bool = False):
    """Bars centred at ``pos``, from ``start`` over ``length``, as one PolyCollection.

    ``color`` is one colour or one per bar. One artist instead of a Rectangle per bar (what
    ``Axes.bar`` makes); the caller sets the axis limits.
    """
    from matplotlib.collections import PolyCollection
    pos = np.asarray(pos, dtype=float)
    start = np.broadcast_to(np.asarray(start, dtype=float), pos.shape)
    end = start + np.asarray(length, dtype=float)
    lo, hi = pos - width / 2, pos + width / 2
    xy = np.stack([np.c_[lo, start], np.c_[lo, end], np.c_[hi, end], np.c_[hi, start]], axis=1)   # (bars, 4, 2)
    coll = PolyCollection(xy[..., ::-1] if horizontal else xy, facecolors=color, linewidths=0)
    ax.add_collection(coll, autolim=False)
    return coll


def _legend(colors: dict[str, str]) -> list:
    """Legend handles: a patch per name."""
    from matplotlib.patches import Patch
    return [Patch(color=c, label=name) for name, c in colors.items()]


def _target_colors(targets: list[str]) -> dict[str, str]:
    return {t: TARGET_COLORS[j % len(TARGET_COLORS)] for j, t in enumerate(targets)}


@_own_objects_only
def matrix_svg(ops: list[str], targets: list[str], pct: dict[tuple[str, str], float | None],
               failed: dict[tuple[str, str], int]) -> bytes:
    """Heat map of bit-exact % per op x target; a cell with failures is outlined and marked.

    Cells at 100 % are plain green (the HTML matrix above has every number).
    """
    from matplotlib.colors import LinearSegmentedColormap
    cmap = LinearSegmentedColormap.from_list("qc", ["#c0392b", "#f1c40f", "#27ae60"])
    data = np.array([[np.nan if pct.get((op, t)) is None else pct[(op, t)] for t in targets] for op in ops])
    nfail = np.array([[failed.get((op, t), 0) for t in targets] for op in ops])
    left = _label_inches(ops)
    bottom = 0.3 + 0.06 * max(len(t) for t in targets)
    fig = _figure(left + 1.6 + 1.1 * len(targets), bottom + 0.6 + 0.32 * len(ops), left=left, right=1.5,
                  bottom=bottom)
    ax = fig.add_subplot(111)
    im = ax.imshow(np.clip(data, 90, 100), cmap=cmap, vmin=90, vmax=100, aspect="auto")   # interesting: 90..100 %
    ax.tick_params(bottom=False)   # before the ticks exist: new ones copy it
    ax.set_xticks(range(len(targets)), targets, rotation=30, ha="right")
    _category_labels(ax, "y", range(len(ops)), ops)
    i, j = np.nonzero(nfail)
    _bars(ax, j, np.ones(len(j)), 1.0, "none", start=i - 0.5).set(edgecolor="black", linewidth=2)   # outlines
    for (i, j), v in np.ndenumerate(data):
        if v == 100 and not nfail[i, j]:
            continue
        text = "-" if math.isnan(v) else "100" if v == 100 else f"{v:.3g}" if v < 99.95 else ">99.9"
        ax.text(j, i, text + (f"\n{nfail[i, j]} fail" if nfail[i, j] else ""), ha="center", va="center", fontsize=7)
    fig.colorbar(im, ax=ax, label="bit-exact % (clipped at 90)", ticks=range(90, 101, 2))
    ax.set_title("bit-exact % per op x target (plain green: 100; outlined: failing cases)", y=1.0, fontsize=10)
    return _svg(fig)


@_own_objects_only
def histograms_svg(hists: dict[str, dict[str, dict[str, int]]], targets: list[str], order, slots: int = 36) -> bytes:
    """Error histograms of every op in one figure: elements per error (LSB), a bar per target, log count axis.

    ``hists`` is {op: {target: {error key: elements}}}. The ops are small multiples placed side
    by side in rows of ``slots`` error bins (each op in the first row with room; a line and an
    empty bin between two ops, the op's name above). Every row has the same bin width and count
    axis, so panels compare; a target has the same colour and place in every panel.
    """
    keys = {op: sorted({k for h in hs.values() for k in h}, key=order) for op, hs in hists.items()}
    slots = max([slots] + [len(k) for k in keys.values()])
    rows: list[list[tuple[str, int]]] = []   # per row: (op, its first bin)
    for op in hists:
        row = next((r for r in rows if r[-1][1] + len(keys[r[-1][0]]) + 1 + len(keys[op]) <= slots), None)
        if row is None:
            rows.append([(op, 0)])
        else:
            row.append((op, row[-1][1] + len(keys[row[-1][0]]) + 1))
    top = max((v for hs in hists.values() for h in hs.values() for v in h.values()), default=1)
    colors = _target_colors(targets)
    width = 0.8 / max(1, len(targets))
    offset = (np.arange(len(targets)) - (len(targets) - 1) / 2)[:, None] * width   # per target
    fig = _figure(1.0 + 0.32 * slots, 1.2 + 1.45 * len(rows), left=0.75, bottom=0.65, top=0.55)
    axes = fig.subplots(len(rows), 1, squeeze=False, gridspec_kw={"hspace": 0.62})[:, 0]
    for ax, row in zip(axes, rows):
        x = np.concatenate([np.arange(first, first + len(keys[op])) for op, first in row])
        n = np.array([[hists[op].get(t, {}).get(k, 0) for op, _ in row for k in keys[op]] for t in targets],
                     dtype=float).reshape(len(targets), len(x))                        # elements: target x bin
        shown = n > 0
        _bars(ax, (x + offset)[shown], n[shown] - 0.5, width,
              np.broadcast_to(np.array(list(colors.values()))[:, None], n.shape)[shown], start=0.5)
        for op, first in row:
            ax.text(first + (len(keys[op]) - 1) / 2, 1.02, op, transform=ax.get_xaxis_transform(), ha="center",
                    va="bottom", fontsize=8, fontweight="bold")
        ax.vlines([first - 1 for _, first in row[1:]], 0, 1, transform=ax.get_xaxis_transform(), color="#999",
                  linewidth=0.8)
        ax.set_xlim(-0.6, slots - 0.4)
        _category_labels(ax, "x", x, [k for op, _ in row for k in keys[op]], pad=2, fontsize=7)
        ax.tick_params(labelsize=7, pad=1.5)   # before the ticks exist: new ones copy it
        ax.set_yscale("log")
        ax.set_ylim(0.5, top * 2.5)
        _decades(ax.yaxis, 1, top * 2.5, 3)
        _labels(ax, y="elements", aside=0.45)
    axes[-1].set_xlabel("got - want (LSB)")
    fig.legend(handles=_legend(colors), loc="upper center", ncol=len(targets), fontsize=8, frameon=False)
    return _svg(fig)


@_own_objects_only
def latency_svg(ops: list[str], targets: list[str], p50: dict[tuple[str, str], float | None]) -> bytes:
    """Horizontal grouped bars: median p50 latency (µs, log axis) per op and target."""
    left = _label_inches(ops)
    fig = _figure(left + 6.5, 1.0 + 0.22 * len(ops) * max(1, len(targets)) ** 0.6, left=left)
    ax = fig.add_subplot(111)
    colors = _target_colors(targets)
    height = 0.8 / max(1, len(targets))
    offset = (np.arange(len(targets)) - (len(targets) - 1) / 2) * height   # per target
    y = np.arange(len(ops))
    us = np.array([[p50.get((op, t)) or 0.0 for t in targets] for op in ops]).reshape(len(ops), len(targets))
    shown = us > 0
    _bars(ax, (y[:, None] + offset)[shown], us[shown], height,
          np.broadcast_to(list(colors.values()), us.shape)[shown], horizontal=True)
    ax.set_ylim(len(ops) - 0.5, -0.5)      # first op on top
    _category_labels(ax, "y", y, ops)
    if shown.any():
        lo, hi = 10 ** np.floor(np.log10(us[shown].min())), 10 ** np.ceil(np.log10(us.max() * 1.2))
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        _decades(ax.xaxis, lo, hi)
    _labels(ax, "median p50 latency per case (µs)")
    ax.set_title("latency per op and target", y=1.0)
    ax.legend(handles=_legend(colors), fontsize=7, loc="lower right")
    return _svg(fig)


@_own_objects_only
def causes_svg(labels: list[str], counts: dict[str, list[int]]) -> bytes:
    """Stacked horizontal bars: mismatching elements per cause for each (op, target)."""
    left = _label_inches(labels)
    fig = _figure(left + 6.5, 1.0 + 0.28 * len(labels), left=left)
    ax = fig.add_subplot(111)
    y = np.arange(len(labels))
    n = np.array([counts.get(c, [0] * len(labels)) for c in CAUSE_COLORS], dtype=float).reshape(-1, len(labels))
    end = n.cumsum(axis=0)                                                 # cause x label, stacked
    _bars(ax, np.broadcast_to(y, n.shape).ravel(), n.ravel(), 0.8,
          np.broadcast_to(np.array(list(CAUSE_COLORS.values()))[:, None], n.shape).ravel(), start=(end - n).ravel(),
          horizontal=True)
    ax.set_ylim(len(labels) - 0.5, -0.5)   # first label on top
    _category_labels(ax, "y", y, labels)
    ax.set_xlim(0, max(1.0, end.max(initial=0)) * 1.03)
    _labels(ax, "mismatching elements")
    ax.set_title("mismatch causes (unexplained first)", y=1.0)
    ax.legend(handles=_legend(CAUSE_COLORS), fontsize=7, loc="lower right")
    return _svg(fig)
