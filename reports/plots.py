"""The report's charts, written directly as SVG text (numpy does the arithmetic; no plotting library).

Why: drawing the charts with matplotlib took about half a second per report (0.5 s of the
0.62 s ``build_html`` on a 6,024-row run), and importing matplotlib about as much again. A chart
is a few hundred rects, lines and texts: writing them as strings takes milliseconds. (The op x
target matrix is an HTML table of the page, not a chart: one matrix, one colour meaning.)

How: ``_Svg`` collects elements (rect, line, text) as strings, in points (72 per inch;
``width``/``height`` are given in ``pt`` with a matching ``viewBox``, so a chart shows at its
size in print units). ``_linear`` and ``_log`` map data to positions, ``_decades`` picks the
ticks of a log axis (powers of ten, plain labels) and ``_nice`` those of a linear one, ``_legend``
draws colour swatches in rows. Data marks are grouped by kind (``<g class="bars">``, ``legend``)
for anyone reading the SVG. Text stays ``<text>`` (sans-serif):
the browser draws the glyphs. Their width is only estimated (``_EM`` per character) to leave room
for category names. Every string goes through XML escaping, and the output has no dates, random
ids or hashes: the same inputs give the same bytes.
"""

from __future__ import annotations

import html
import itertools
import math
import re

import numpy as np

TARGET_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf"]
CAUSE_COLORS = {"unexplained": "#d62728", "clamp": "#9467bd", "saturation": "#ff7f0e", "scheme": "#1f77b4", "tie": "#2ca02c"}

IN = 72.0          # points per inch
_EM = 0.684        # estimated width of a character, in font sizes (about DejaVu Sans; only for leaving room)
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")   # not allowed in XML 1.0, even escaped


def _esc(s) -> str:
    """``s`` as XML text or attribute value (``<``, ``&``, quotes escaped; control characters replaced)."""
    return _XML_BAD.sub("\ufffd", html.escape(str(s), quote=True))


def _f(v) -> str:
    """A coordinate: two decimals at most, no trailing zeros."""
    s = f"{v:.2f}".rstrip("0").rstrip(".")
    return "0" if s == "-0" else s


def _width(labels, size: float = 10) -> float:
    """Estimated width of the longest of ``labels`` at font ``size``."""
    return _EM * size * max((len(str(x)) for x in labels), default=1)


class _Svg:
    """An SVG document of ``w`` x ``h`` points: elements appended as strings, ``bytes()`` closes it."""

    def __init__(self, w: float, h: float):
        self.w, self.h = w, h      # ``h`` may be set later, once the content is laid out
        self.out: list[str] = []

    def open(self, cls: str, attrs: str = "") -> None:
        self.out.append(f'<g class="{cls}"{attrs}>')

    def close(self) -> None:
        self.out.append("</g>")

    def rect(self, x, y, w, h, fill: str = "none", stroke: str | None = None, stroke_width: float = 0.8) -> None:
        s = f' stroke="{stroke}" stroke-width="{_f(stroke_width)}"' if stroke else ""
        self.out.append(f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(w)}" height="{_f(h)}" fill="{fill}"{s}/>')

    def rects(self, x, y, w, h, fill) -> None:
        """Many rects: ``x``, ``y``, ``w``, ``h`` arrays (or scalars), ``fill`` one colour or one per rect."""
        x, y, w, h = (np.atleast_1d(np.asarray(a, dtype=float)) for a in (x, y, w, h))
        x, y, w, h = (a.tolist() for a in np.broadcast_arrays(x, y, w, h))
        fills = [fill] * len(x) if isinstance(fill, str) else list(fill)
        self.out += [f'<rect x="{_f(a)}" y="{_f(b)}" width="{_f(c)}" height="{_f(d)}" fill="{e}"/>'
                     for a, b, c, d, e in zip(x, y, w, h, fills)]

    def line(self, x1, y1, x2, y2, stroke: str = "#000000", stroke_width: float = 0.8) -> None:
        self.out.append(f'<line x1="{_f(x1)}" y1="{_f(y1)}" x2="{_f(x2)}" y2="{_f(y2)}" stroke="{stroke}" '
                        f'stroke-width="{_f(stroke_width)}"/>')

    def text(self, x, y, s, size: float = 10, anchor: str = "start", valign: str = "baseline",
             rotate: float = 0, bold: bool = False) -> None:
        """Text at (x, y): ``anchor`` start/middle/end, ``valign`` baseline/center/top (in the text's own
        frame, so it holds when rotated by ``rotate`` degrees, clockwise); lines split at ``\\n``."""
        lines = str(s).split("\n")
        more = len(lines) - 1                     # lines after the first, 1.15 em apart
        first = {"baseline": -1.15 * more, "center": 0.35 - 0.575 * more, "top": 0.8}[valign]   # the first's dy, em
        attrs = f'x="{_f(x)}" y="{_f(y)}" font-size="{_f(size)}"'
        attrs += f' text-anchor="{anchor}"' if anchor != "start" else ""
        attrs += ' font-weight="bold"' if bold else ""
        attrs += f' transform="rotate({_f(rotate)} {_f(x)} {_f(y)})"' if rotate else ""
        if len(lines) == 1:
            dy = f' dy="{_f(first)}em"' if first else ""
            self.out.append(f"<text {attrs}{dy}>{_esc(s)}</text>")
        else:
            spans = "".join(f'<tspan x="{_f(x)}" dy="{_f(first if i == 0 else 1.15)}em">{_esc(t)}</tspan>'
                            for i, t in enumerate(lines))
            self.out.append(f"<text {attrs}>{spans}</text>")

    def bytes(self, defs: str = "") -> bytes:
        w, h = _f(self.w), _f(self.h)
        head = (f'<?xml version="1.0" encoding="utf-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" version="1.1" '
                f'width="{w}pt" height="{h}pt" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="10">\n')
        back = f'<rect width="{w}" height="{h}" fill="#ffffff"/>\n'
        return (head + (f"<defs>{defs}</defs>\n" if defs else "") + back + "\n".join(self.out) + "\n</svg>\n").encode()


def _linear(d0: float, d1: float, p0: float, p1: float):
    """Data in [d0, d1] -> positions in [p0, p1] (arrays in, arrays out)."""
    k = (p1 - p0) / ((d1 - d0) or 1.0)
    return lambda v: p0 + (np.asarray(v, dtype=float) - d0) * k


def _log(d0: float, d1: float, p0: float, p1: float):
    """Like ``_linear``, on log10 of the data (d0, d1 > 0)."""
    scale = _linear(math.log10(d0), math.log10(d1), p0, p1)
    return lambda v: scale(np.log10(np.asarray(v, dtype=float)))


def _decades(lo: float, hi: float, most: int = 6) -> list[float]:
    """Ticks of a log axis: the powers of ten in [lo, hi], every k-th so that at most ``most``."""
    d = np.arange(np.ceil(np.log10(lo)), np.floor(np.log10(hi)) + 1)
    d = d[::-(-len(d) // most)] if len(d) else np.log10([lo])
    return (10.0 ** d).tolist()


def _nice(hi: float, most: int = 7) -> list[float]:
    """Ticks of a linear axis from 0 to ``hi``: multiples of 1, 2, 2.5 or 5 x 10^k, at most ``most`` + 1."""
    raw = hi / most
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [i * step for i in range(int(hi / step + 1e-9) + 1)]


def _tick_label(v: float) -> str:
    return f"{v:g}"


def _frame(svg: _Svg, x0, y0, x1, y1) -> None:
    svg.rect(x0, y0, x1 - x0, y1 - y0, stroke="#000000")


def _xticks(svg: _Svg, pos, labels, y: float, size: float = 10) -> None:
    """Tick marks below ``y`` at positions ``pos``, their labels under them."""
    for p, label in zip(pos, labels):
        svg.line(p, y, p, y + 3.5)
        svg.text(p, y + 5.5, label, size, "middle", "top")


def _yticks(svg: _Svg, pos, labels, x: float, size: float = 10) -> None:
    """Tick marks left of ``x`` at positions ``pos``, their labels left of them."""
    for p, label in zip(pos, labels):
        svg.line(x - 3.5, p, x, p)
        svg.text(x - 5.5, p, label, size, "end", "center")


def _legend(svg: _Svg, x: float, y: float, width: float, colors: dict[str, str], size: float = 8,
            center: bool = False) -> float:
    """A swatch and name per entry, in rows from (x, y) that fit ``width``; returns the height used."""
    items = [(name, c, size * (2.8 + _EM * len(str(name)))) for name, c in colors.items()]
    rows: list[list] = []
    for item in items:
        if rows and sum(i[2] for i in rows[-1]) + item[2] <= width:
            rows[-1].append(item)
        else:
            rows.append([item])
    svg.open("legend")
    for r, row in enumerate(rows):
        at = x + (width - sum(i[2] for i in row)) / 2 if center else x
        mid = y + (r + 0.5) * size * 1.5
        for name, c, w in row:
            svg.rect(at, mid - size * 0.4, size * 1.6, size * 0.8, c)
            svg.text(at + size * 2.0, mid, name, size, valign="center")
            at += w
    svg.close()
    return len(rows) * size * 1.5


def _target_colors(targets: list[str]) -> dict[str, str]:
    return {t: TARGET_COLORS[j % len(TARGET_COLORS)] for j, t in enumerate(targets)}


def histograms_svg(hists: dict[str, dict[str, dict[str, int]]], targets: list[str], order, slots: int = 36) -> bytes:
    """Error histograms of every op in one chart: elements per error (LSB), a bar per target, log count axis.

    ``hists`` is {op: {target: {error key: elements}}}; ``order`` sorts the error keys. The ops are
    small multiples placed side by side in rows of ``slots`` error bins (each op in the first row
    with room; a line and an empty bin between two ops, the op's name above). Every row has the
    same bin width and count axis, so panels compare; a target has the same colour and place in
    every panel. Targets not in ``targets`` are not drawn.
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
    offset = (np.arange(len(targets)) - (len(targets) - 1) / 2)[:, None] * width   # per target, in bins

    ph, gap = 0.9 * IN, 0.55 * IN                 # a panel's height; room for bin names and op names between
    x0 = 0.75 * IN
    svg = _Svg(x0 + 0.32 * slots * IN + 0.25 * IN, 0)
    x1 = svg.w - 0.15 * IN
    lh = _legend(svg, x0, 0.1 * IN, x1 - x0, colors, 8, center=True)
    y = 0.1 * IN + lh + 0.3 * IN                    # the first panel's top
    to_x = _linear(-0.6, slots - 0.4, x0, x1)
    unit = float(to_x(1) - to_x(0))
    hi = max(top * 2.5, 1.0)
    ticks = _decades(1, hi, 3)
    for row in rows:
        to_y = _log(0.5, hi, y + ph, y)
        x = np.concatenate([np.arange(first, first + len(keys[op])) for op, first in row])
        n = np.array([[hists[op].get(t, {}).get(k, 0) for op, _ in row for k in keys[op]] for t in targets],
                     dtype=float).reshape(len(targets), len(x))                        # elements: target x bin
        shown = n > 0
        left = to_x((x + offset - width / 2)[shown])
        ybar = to_y(np.maximum(n[shown], 0.5))
        svg.open("bars")
        svg.rects(left, ybar, width * unit, y + ph - ybar,
                  np.broadcast_to(np.array(list(colors.values()), dtype=object)[:, None], n.shape)[shown])
        svg.close()
        for op, first in row[1:]:
            svg.line(float(to_x(first - 1)), y, float(to_x(first - 1)), y + ph, "#999999")
        for op, first in row:
            svg.text(float(to_x(first + (len(keys[op]) - 1) / 2)), y - 3, op, 8, "middle", bold=True)
        for p, k in zip(to_x(x).tolist(), [k for op, _ in row for k in keys[op]]):
            svg.text(p, y + ph + 2.5, k, 7, "middle", "top")
        _frame(svg, x0, y, x1, y + ph)
        _yticks(svg, to_y(ticks).tolist(), [_tick_label(v) for v in ticks], x0, 7)
        svg.text(x0 - 0.45 * IN, y + ph / 2, "elements", 10, "middle", "center", rotate=-90)
        y += ph + gap
    svg.text((x0 + x1) / 2, y - gap + 0.35 * IN, "got - want (LSB)", 10, "middle", "center")
    svg.h = y - gap + 0.55 * IN
    return svg.bytes()


def _hbar_chart(labels: list[str], band: float, title: str, legend: dict[str, str]):
    """The frame of a horizontal bar chart: a band per label (first on top), names on the left,
    title and legend above. Returns (svg, x0, x1, y0, y1)."""
    x0 = 0.3 * IN + _width(labels)
    svg = _Svg(x0 + 6.5 * IN, 0)
    x1 = svg.w - 0.15 * IN
    svg.text((x0 + x1) / 2, 0.25 * IN, title, 12, "middle")
    y0 = 0.35 * IN + _legend(svg, x0, 0.35 * IN, x1 - x0, legend, 8) + 0.1 * IN
    y1 = y0 + max(band * len(labels), 0.5 * IN)
    svg.h = y1 + 0.55 * IN
    for i, label in enumerate(labels):
        svg.text(x0 - 3.5, y0 + (i + 0.5) * band, label, 10, "end", "center")
    return svg, x0, x1, y0, y1


def latency_svg(ops: list[str], targets: list[str], p50: dict[tuple[str, str], float | None]) -> bytes:
    """Horizontal grouped bars: median p50 latency (µs, log axis) per op and target; None or 0: no bar."""
    colors = _target_colors(targets)
    band = 0.22 * IN * max(1, len(targets)) ** 0.6
    svg, x0, x1, y0, y1 = _hbar_chart(ops, band, "latency per op and target", colors)
    height = band * 0.8 / max(1, len(targets))
    offset = (np.arange(len(targets)) - (len(targets) - 1) / 2) * height   # per target
    us = np.array([[p50.get((op, t)) or 0.0 for t in targets] for op in ops], dtype=float).reshape(len(ops),
                                                                                                 len(targets))
    shown = us > 0
    if shown.any():
        # from the decade below the shortest (a decade lower if it is a power of ten, so that it shows)
        lo, hi = 10 ** (np.ceil(np.log10(us[shown].min())) - 1), 10 ** np.ceil(np.log10(us[shown].max() * 1.2))
        to_x = _log(lo, hi, x0, x1)
        ycen = y0 + (np.arange(len(ops))[:, None] + 0.5) * band + offset
        svg.open("bars")
        svg.rects(x0, (ycen - height / 2)[shown], to_x(us[shown]) - x0, height,
                  np.broadcast_to(np.array(list(colors.values()), dtype=object)[None, :], us.shape)[shown])
        svg.close()
        ticks = _decades(lo, hi)
        _xticks(svg, to_x(ticks).tolist(), [_tick_label(v) for v in ticks], y1)
    _frame(svg, x0, y0, x1, y1)
    svg.text((x0 + x1) / 2, y1 + 0.4 * IN, "median p50 latency per case (µs)", 10, "middle")
    return svg.bytes()


def causes_svg(labels: list[str], counts: dict[str, list[int]]) -> bytes:
    """Stacked horizontal bars: mismatching elements per cause (``CAUSE_COLORS`` order) for each label
    ("op @ target"); ``counts`` is {cause: a count per label}, a missing cause counts 0."""
    svg, x0, x1, y0, y1 = _hbar_chart(labels, 0.28 * IN, "mismatch causes (unexplained first)", CAUSE_COLORS)
    n = np.array([counts.get(c, [0] * len(labels)) for c in CAUSE_COLORS], dtype=float).reshape(len(CAUSE_COLORS),
                                                                                                 len(labels))
    end = n.cumsum(axis=0)                                                 # cause x label, stacked
    hi = max(1.0, end.max(initial=0)) * 1.03
    to_x = _linear(0, hi, x0, x1)
    ytop = np.broadcast_to(y0 + (np.arange(len(labels)) + 0.1) * 0.28 * IN, n.shape)
    shown = n > 0
    svg.open("bars")
    svg.rects(to_x((end - n)[shown]), ytop[shown], (to_x(end) - to_x(end - n))[shown], 0.8 * 0.28 * IN,
              np.broadcast_to(np.array(list(CAUSE_COLORS.values()))[:, None], n.shape)[shown])
    svg.close()
    ticks = _nice(hi)
    _xticks(svg, to_x(ticks).tolist(), [_tick_label(v) for v in ticks], y1)
    _frame(svg, x0, y0, x1, y1)
    svg.text((x0 + x1) / 2, y1 + 0.4 * IN, "mismatching elements", 10, "middle")
    return svg.bytes()


def layers_svg(model: str, layers: list[int], errors: dict[str, list[float | None]],
               first: dict[str, int | None]) -> bytes:
    """Error per layer of one model: a line per target (max |error| in LSB, against the golden
    chain where the target ran the whole model, else its layer case's own), log axis (0 drawn at the
    bottom); each target's first divergent layer marked by a ring and a dashed line."""
    colors = _target_colors(list(errors))
    x0, y0 = 0.75 * IN, 0.35 * IN
    svg = _Svg(x0 + max(6.5 * IN, 0.06 * IN * len(layers)), 0)
    x1 = svg.w - 0.2 * IN
    svg.text((x0 + x1) / 2, 0.25 * IN, f"{model}: max |error| per layer (LSB)", 12, "middle")
    y0 += _legend(svg, x0, y0, x1 - x0, colors, 8) + 0.1 * IN
    y1 = y0 + 2.2 * IN
    svg.h = y1 + 0.6 * IN
    vals = [v for vs in errors.values() for v in vs if v]
    hi = 10 ** np.ceil(np.log10(max(vals + [1.0]) * 1.5))
    to_y = _log(0.5, hi, y1, y0)
    to_x = _linear(-0.5, max(len(layers), 1) - 0.5, x0, x1)
    for t, vs in errors.items():
        pts = [(float(to_x(i)), float(to_y(max(v, 0.5)))) for i, v in enumerate(vs) if v is not None]
        svg.open("series", f' data-target="{_esc(t)}"')
        for (a, b), (c, d) in itertools.pairwise(pts):
            svg.line(a, b, c, d, colors[t], 1.2)
        k = first.get(t)
        if k is not None and k in layers and vs[layers.index(k)] is not None:
            i = layers.index(k)
            px, py = float(to_x(i)), float(to_y(max(vs[i], 0.5)))
            svg.out.append(f'<circle class="first-divergent" cx="{_f(px)}" cy="{_f(py)}" r="4" fill="none" '
                           f'stroke="{colors[t]}" stroke-width="1.5"/>')
            svg.out.append(f'<line x1="{_f(px)}" y1="{_f(y0)}" x2="{_f(px)}" y2="{_f(y1)}" stroke="{colors[t]}" '
                           f'stroke-dasharray="3,3" stroke-width="0.8"/>')
        svg.close()
    ticks = _decades(1, hi, 4)
    _yticks(svg, to_y(ticks).tolist(), [_tick_label(v) for v in ticks], x0, 7)
    step = max(1, len(layers) // 20)
    _xticks(svg, [float(to_x(i)) for i in range(0, len(layers), step)], [str(layers[i]) for i in range(0, len(layers), step)],
            y1, 7)
    _frame(svg, x0, y0, x1, y1)
    svg.text((x0 + x1) / 2, y1 + 0.45 * IN, "layer (0 |error| drawn at the bottom)", 10, "middle")
    return svg.bytes()


# ---- the history's trend (reports/history.py, #22)
def trend_svg(runs: list[str], new_failures: list[int], pass_pct: list[float | None]) -> bytes:
    """Per run (x, oldest first): its new failures as red bars (left axis) and its pass rate as a
    blue line (right axis, 0-100 %)."""
    n = max(1, len(runs))
    x0, x1, y0, y1 = 0.55 * IN, 0.55 * IN + max(2.0 * IN, n * 0.3 * IN), 0.3 * IN, 1.6 * IN
    svg = _Svg(x1 + 0.6 * IN, y1 + 0.45 * IN)
    svg.text((x0 + x1) / 2, 0.2 * IN, "new failures (bars) and pass rate (line) per run", 9, "middle")
    slot = (x1 - x0) / n
    top = max([1, *new_failures])
    ticks = _nice(top, 4)
    to_y = _linear(0, ticks[-1], y1, y0)
    svg.open("bars")
    for i, k in enumerate(new_failures):
        if k:
            svg.rect(x0 + (i + 0.2) * slot, float(to_y(k)), 0.6 * slot, y1 - float(to_y(k)), CAUSE_COLORS["unexplained"])
    svg.close()
    pct_y = _linear(0, 100, y1, y0)
    svg.open("line")
    pts = [(x0 + (i + 0.5) * slot, float(pct_y(p))) for i, p in enumerate(pass_pct) if p is not None]
    for (a, b), (c, d) in zip(pts, pts[1:]):
        svg.line(a, b, c, d, TARGET_COLORS[0], 1.5)
    for a, b in pts:
        svg.rect(a - 1.5, b - 1.5, 3, 3, TARGET_COLORS[0])
    svg.close()
    _yticks(svg, to_y(ticks).tolist(), [_tick_label(v) for v in ticks], x0, 8)
    for v in (0, 50, 100):
        svg.line(x1, float(pct_y(v)), x1 + 3.5, float(pct_y(v)))
        svg.text(x1 + 5.5, float(pct_y(v)), f"{v}%", 8, "start", "center")
    for i in range(len(runs)):
        svg.text(x0 + (i + 0.5) * slot, y1 + 5, str(i + 1), 7, "middle", "top")
    _frame(svg, x0, y0, x1, y1)
    svg.text((x0 + x1) / 2, y1 + 0.38 * IN, "run (oldest first)", 8, "middle")
    return svg.bytes()
