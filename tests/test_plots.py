"""The report's charts (reports/plots.py): SVG written as text, checked by parsing it back.

Every data mark sits in a ``<g class=...>`` of its kind (bars, legend), so the tests count
marks per kind and compare them with what the inputs hold. (The op x target matrix is the page's
HTML table: tests/test_reports.py.)
"""

from __future__ import annotations

import math
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from reports import plots
from reports.causes import hist_key_order
from tests.conftest import ROOT

NS = "{http://www.w3.org/2000/svg}"
NASTY = "a<b&c\"d'e>"          # must reach the reader unchanged


def _svg(data: bytes) -> ET.Element:
    root = ET.fromstring(data)
    assert root.tag == NS + "svg"
    return root


def _texts(root: ET.Element) -> list[str]:
    """Every text line (a multi-line text gives one entry per line)."""
    out = []
    for t in root.iter(NS + "text"):
        spans = list(t.iter(NS + "tspan"))
        out += [s.text or "" for s in spans] if spans else [t.text or ""]
    return out


def _marks(root: ET.Element, cls: str, tag: str = "rect") -> list[ET.Element]:
    return [e for g in root.iter(NS + "g") if g.get("class") == cls for e in g.iter(NS + tag)]


def _num(e: ET.Element, attr: str) -> float:
    return float(e.get(attr))


def _hist_inputs():
    hists = {"ADD": {"a": {"0": 1000, "1": 10, "-1": 0}, "b": {"0": 900, ">16": 3}},
             "MUL": {"a": {"0": 5}},
             "ONLY_C": {"c": {"2": 7}}}               # target c is not drawn: not in the target list
    return hists, ["a", "b"]


def _latency_inputs():
    ops, targets = ["ADD", "MUL", "CONV"], ["a", "b"]
    p50 = {("ADD", "a"): 1.5, ("ADD", "b"): 700.0, ("MUL", "a"): None, ("MUL", "b"): 20.0, ("CONV", "a"): 0.0}
    return ops, targets, p50


def _causes_inputs():
    labels = ["ADD @ a", "MUL @ b", "Z @ c"]
    counts = {"unexplained": [10, 0, 0], "saturation": [5, 0, 0], "tie": [0, 20, 0]}   # no "scheme": all 0
    return labels, counts


CHARTS = {
    "histograms": lambda: plots.histograms_svg(*_hist_inputs(), hist_key_order),
    "latency": lambda: plots.latency_svg(*_latency_inputs()),
    "causes": lambda: plots.causes_svg(*_causes_inputs()),
}


@pytest.mark.parametrize("chart", CHARTS)
def test_chart_is_an_svg_with_viewbox(chart):
    data = CHARTS[chart]()
    root = _svg(data)
    x, y, w, h = map(float, root.get("viewBox").split())
    assert (x, y) == (0, 0) and w > 100 and h > 100
    assert root.get("width") == f"{plots._f(w)}pt" and root.get("height") == f"{plots._f(h)}pt"
    assert root.get("font-family") == "sans-serif"
    assert b"matplotlib" not in data.lower()
    # every rect lies inside the view box
    for r in root.iter(NS + "rect"):
        x, y = _num(r, "x") if r.get("x") else 0, _num(r, "y") if r.get("y") else 0
        assert 0 <= x and x + _num(r, "width") <= w + 0.01 and 0 <= y and y + _num(r, "height") <= h + 0.01


@pytest.mark.parametrize("chart", CHARTS)
def test_same_inputs_same_bytes(chart):
    assert CHARTS[chart]() == CHARTS[chart]()


def test_histograms_have_every_panel_and_bar():
    hists, targets = _hist_inputs()
    root = _svg(plots.histograms_svg(hists, targets, hist_key_order))
    bold = [t.text for t in root.iter(NS + "text") if t.get("font-weight") == "bold"]
    assert bold == list(hists)                       # every op's panel has its name
    bars = _marks(root, "bars")
    want = [(op, t, k, n) for op, hs in hists.items() for t in targets for k, n in hs.get(t, {}).items() if n > 0]
    assert len(bars) == len(want) == 5
    colors = [b.get("fill") for b in bars]
    assert colors.count(plots.TARGET_COLORS[0]) == 3 and colors.count(plots.TARGET_COLORS[1]) == 2
    texts = _texts(root)
    for k in ["-1", "0", "1", ">16", "2"]:           # bin names, "-1" too though it is empty
        assert k in texts
    for t in targets:
        assert t in [e.text for e in _marks(root, "legend", "text")]
    assert "c" not in texts
    # the count axis is logarithmic and shared: heights go with log(count / 0.5)
    h = sorted(_num(b, "height") for b in bars)
    counts = sorted(n for *_, n in want)
    for (ha, na), (hb, nb) in zip(zip(h, counts), zip(h[1:], counts[1:])):
        assert hb / ha == pytest.approx(math.log(nb / 0.5) / math.log(na / 0.5), rel=1e-3)
    assert {"elements", "got - want (LSB)"} <= set(texts)


def test_histograms_wrap_into_rows_of_slots():
    hists = {f"OP{i}": {"a": {str(k): k + 1 for k in range(8)}, "b": {str(k): 2 for k in range(8)}} for i in range(12)}
    root = _svg(plots.histograms_svg(hists, ["a", "b"], hist_key_order, slots=36))
    texts = _texts(root)
    assert texts.count("elements") == 3              # 8 + 1 + 8 + 1 + 8 + 1 + 8 = 35 bins: four ops a row
    assert [t.text for t in root.iter(NS + "text") if t.get("font-weight") == "bold"] == list(hists)
    assert len(_marks(root, "bars")) == 12 * 8 * 2
    # one panel frame per row, each below the last; the decade labels on each
    frames = [r for r in root.iter(NS + "rect") if r.get("stroke") and r.get("fill") == "none"]
    assert len(frames) == 3 and sorted(_num(f, "y") for f in frames) == [_num(f, "y") for f in frames]
    assert [t.text for t in root.iter(NS + "text") if t.get("text-anchor") == "end"] == ["1", "10"] * 3


def test_histograms_decade_ticks():
    # the largest count 40000: the axis reaches 10^5, labels at every other decade (at most 3)
    root = _svg(plots.histograms_svg({"X": {"a": {"0": 40000, "1": 3}}}, ["a"], hist_key_order))
    ticks = [t.text for t in root.iter(NS + "text") if t.get("text-anchor") == "end"]
    assert ticks == ["1", "100", "10000"]


def test_latency_bars_ticks_and_legend():
    ops, targets, p50 = _latency_inputs()
    root = _svg(plots.latency_svg(ops, targets, p50))
    texts = _texts(root)
    for name in ops:
        assert name in texts
    assert [e.text for e in _marks(root, "legend", "text")] == targets
    assert [e.get("fill") for e in _marks(root, "legend")] == plots.TARGET_COLORS[:2]
    assert {"latency per op and target", "median p50 latency per case (µs)"} <= set(texts)
    bars = _marks(root, "bars")
    assert len(bars) == 3                             # None, 0 and missing: no bar
    # 1.5 .. 700 us: the axis runs 1 .. 1000 with a label at every decade, left to right
    ticks = [t for t in root.iter(NS + "text") if t.get("dy") == "0.8em"]
    assert [t.text for t in ticks] == ["1", "10", "100", "1000"]
    xs = [_num(t, "x") for t in ticks]
    assert xs == sorted(xs)
    # log axis from 1: a bar's length goes with log10(value); first op on top
    by_len = sorted(bars, key=lambda b: _num(b, "width"))
    assert [b.get("fill") for b in by_len] == [plots.TARGET_COLORS[0], plots.TARGET_COLORS[1], plots.TARGET_COLORS[1]]
    w = [_num(b, "width") for b in by_len]
    assert w[2] / w[1] == pytest.approx(math.log10(700) / math.log10(20), rel=1e-3)
    assert w[2] == pytest.approx((xs[3] - xs[0]) * math.log10(700) / 3, rel=1e-3)
    add_a, mul_b, add_b = by_len                        # 1.5, 20, 700 us
    assert _num(add_a, "y") < _num(add_b, "y") < _num(mul_b, "y")


def test_latency_bar_on_a_power_of_ten_shows():
    root = _svg(plots.latency_svg(["X"], ["a", "b"], {("X", "a"): 1.0, ("X", "b"): 100.0}))
    assert [t.text for t in root.iter(NS + "text") if t.get("dy") == "0.8em"] == ["0.1", "1", "10", "100", "1000"]
    w = [_num(b, "width") for b in _marks(root, "bars")]
    assert len(w) == 2 and w[1] == pytest.approx(3 * w[0], rel=1e-3) and w[0] > 10


def test_log_decades():
    assert plots._decades(1, 1000) == [1, 10, 100, 1000]
    assert plots._decades(0.1, 1000) == [0.1, 1, 10, 100, 1000]
    assert plots._decades(0.01, 1e7) == [0.01, 1, 100, 1e4, 1e6]            # every other decade: at most 6
    assert [plots._tick_label(v) for v in plots._decades(0.01, 1e7)] == ["0.01", "1", "100", "10000", "1e+06"]
    assert plots._decades(1, 2.5e4, 3) == [1, 100, 10000]
    root = _svg(plots.latency_svg(["X"], ["a", "b"], {("X", "a"): 0.05, ("X", "b"): 5e6}))
    assert [t.text for t in root.iter(NS + "text") if t.get("dy") == "0.8em"] == ["0.01", "1", "100", "10000",
                                                                                  "1e+06"]


def test_causes_stacked_bars_and_legend():
    labels, counts = _causes_inputs()
    root = _svg(plots.causes_svg(labels, counts))
    texts = _texts(root)
    for name in labels:
        assert name in texts
    assert [e.text for e in _marks(root, "legend", "text")] == list(plots.CAUSE_COLORS)
    assert [e.get("fill") for e in _marks(root, "legend")] == list(plots.CAUSE_COLORS.values())
    assert {"mismatch causes (unexplained first)", "mismatching elements"} <= set(texts)
    bars = _marks(root, "bars")
    assert [b.get("fill") for b in bars] == [plots.CAUSE_COLORS[c] for c in ("unexplained", "saturation", "tie")]
    unexplained, saturation, tie = bars
    # linear axis: lengths go with counts; saturation stacked right after unexplained, on the same row
    assert _num(unexplained, "width") == pytest.approx(2 * _num(saturation, "width"), rel=1e-3)
    assert _num(tie, "width") == pytest.approx(2 * _num(unexplained, "width"), rel=1e-3)
    assert _num(saturation, "x") == pytest.approx(_num(unexplained, "x") + _num(unexplained, "width"), abs=0.02)
    assert _num(saturation, "y") == _num(unexplained, "y") < _num(tie, "y")
    ticks = [t.text for t in root.iter(NS + "text") if t.get("dy") == "0.8em"]
    assert ticks == ["0", "5", "10", "15", "20"]


@pytest.mark.parametrize("chart", ["histograms", "latency", "causes"])
def test_names_are_escaped(chart):
    if chart == "histograms":
        data = plots.histograms_svg({NASTY: {NASTY + "t": {"<-16": 3, "0": 5}}}, [NASTY + "t"], hist_key_order)
        want = [NASTY, NASTY + "t", "<-16"]
    elif chart == "latency":
        data = plots.latency_svg([NASTY], [NASTY + "t"], {(NASTY, NASTY + "t"): 3.0})
        want = [NASTY, NASTY + "t"]
    else:
        data = plots.causes_svg([NASTY], {"unexplained": [4]})
        want = [NASTY]
    texts = _texts(_svg(data))
    for name in want:
        assert name in texts
    assert b"<b&" not in data


def test_control_characters_do_not_break_the_xml():
    texts = _texts(_svg(plots.causes_svg(["a\x01b\x1fc"], {"tie": [1]})))
    assert "a\ufffdb\ufffdc" in texts


EMPTY = {
    "histograms, nothing": lambda: plots.histograms_svg({}, [], hist_key_order),
    "histograms, no targets": lambda: plots.histograms_svg({"X": {"a": {"0": 3}}}, [], hist_key_order),
    "histograms, op without bins": lambda: plots.histograms_svg({"X": {}}, ["a"], hist_key_order),
    "latency, nothing": lambda: plots.latency_svg([], [], {}),
    "latency, all None": lambda: plots.latency_svg(["X"], ["a"], {("X", "a"): None}),
    "latency, NaN": lambda: plots.latency_svg(["X"], ["a", "b"], {("X", "a"): float("nan"), ("X", "b"): 2.0}),
    "causes, nothing": lambda: plots.causes_svg([], {}),
    "causes, all zero": lambda: plots.causes_svg(["X @ a"], {"unexplained": [0]}),
}


@pytest.mark.parametrize("case", EMPTY)
def test_empty_and_none_inputs_draw_an_empty_chart(case):
    root = _svg(EMPTY[case]())
    assert len(root.get("viewBox").split()) == 4
    marks = _marks(root, "bars")
    assert len(marks) == (1 if case == "latency, NaN" else 0)


def test_no_matplotlib_import():
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from reports import plots; "
            "from reports.causes import hist_key_order; "
            "plots.histograms_svg({'A': {'t': {'0': 3}}}, ['t'], hist_key_order); "
            "plots.latency_svg(['A'], ['t'], {('A', 't'): 3.0}); plots.causes_svg(['A @ t'], {'tie': [3]}); "
            "assert not [m for m in sys.modules if m.split('.')[0] == 'matplotlib'], 'matplotlib imported'")
    subprocess.run([sys.executable, "-c", code, str(ROOT)], check=True, timeout=120)


def test_charts_of_a_default_size_run():
    """47 ops x 4 targets (the default run), histograms filling 36 slots, 82 cause rows: every bar drawn.
    (Printed, not asserted: no test depends on the machine's speed.)"""
    ops = [f"OP_NUMBER_{i}" for i in range(47)]
    targets = ["tflite", "tflite-ref", "ort", "htp"]
    p50 = {(op, t): 0.5 + (i * 3 + j * 40) % 300 for i, op in enumerate(ops) for j, t in enumerate(targets)}
    keys = ["<-16"] + [str(k) for k in range(-16, 17)] + [">16"]                      # 35 bins at most
    hists = {op: {t: {k: (i * 31 + j * 7 + n) % 20000 for n, k in enumerate(keys[: 3 + (i * 5) % 33])}
                  for j, t in enumerate(targets)} for i, op in enumerate(ops[:33])}
    labels = [f"{op} @ {t}" for op in ops[:21] for t in targets][:82]
    counts = {c: [(i * (k + 3)) % 900 for i in range(len(labels))] for k, c in enumerate(plots.CAUSE_COLORS)}
    t0 = time.perf_counter()
    out = [plots.histograms_svg(hists, targets, hist_key_order), plots.latency_svg(ops, targets, p50),
           plots.causes_svg(labels, counts)]
    took = time.perf_counter() - t0
    print(f"\nthe charts of a default-size run: {took * 1000:.1f} ms, {sum(map(len, out))} bytes")
    assert len(_marks(_svg(out[1]), "bars")) == 47 * 4
    assert len(_marks(_svg(out[2]), "bars")) == sum(1 for c in counts.values() for n in c if n)
