"""index.html of a real run, laid out by a real browser (headless Chromium) at 1400 px: nothing
is wider than the page (a wide table scrolls in its own box), a reproduction command is one line,
and its copy button selects all of it, offline.

Needs Debian's chromium (``bash scripts/setup.sh --dev`` installs it); skipped without it.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import struct
import subprocess

import pytest

from tests.inprocess import run_inprocess

pytest_plugins = "pytester"

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTH = 1400
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on this machine: bash scripts/setup.sh --dev "
                                                         "installs it")

#: added to a copy of the page: writes the layout into the DOM that --dump-dom prints
MEASURE = """<script>
window.addEventListener('load', function () {
  var vw = document.documentElement.clientWidth, wide = [];
  function scrolls(e) {   // inside a box that scrolls (or clips) sideways and itself fits the page
    for (var p = e.parentElement; p && p !== document.body; p = p.parentElement) {
      var o = getComputedStyle(p).overflowX;
      if (o !== 'visible' && p.getBoundingClientRect().right <= vw + 0.5) return true;
    }
    return false;
  }
  document.querySelectorAll('body *').forEach(function (e) {
    var r = e.getBoundingClientRect();
    if ((r.right > vw + 0.5 || r.left < -0.5) && !scrolls(e))
      wide.push(e.tagName + (e.id ? '#' + e.id : '') + ' ' + Math.round(r.left) + '..' + Math.round(r.right));
  });
  var code = document.querySelector('#new-failures code'), button = code.parentElement.querySelector('button.copy');
  var text = document.createRange();
  text.selectNodeContents(code);
  var lines = text.getClientRects().length;   // one box per line the command takes
  button.click();
  var out = document.createElement('pre');
  out.id = 'qc-layout';
  out.textContent = JSON.stringify({viewport: vw, scrollWidth: document.documentElement.scrollWidth,
    wide: wide, command: code.textContent, selected: window.getSelection().toString(),
    lines: lines, verdict: document.getElementById('verdict').textContent});
  document.body.appendChild(out);
});
</script>"""


def _chromium(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           "--proxy-server=http://127.0.0.1:9",   # nothing may come from the network
                           f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={WIDTH},900",
                           "--virtual-time-budget=5000", *args],
                          check=False, capture_output=True, text=True, timeout=180)


def test_index_html_at_1400_px(pytester, tmp_path):
    """A run with new failures (a wrong target, a raising one) and a waived one: its page, measured
    and photographed at 1400 px."""
    waivers = tmp_path / "w.toml"
    waivers.write_text('format = "qconform-waivers/1"\ntarget = "*"\n[[waiver]]\ncase = "TANH-zp_min-000"\n'
                       'reason = "known"\nversions = { helper = "1.*" }\nexpires = 2099-12-31\n')
    proc, rd = run_inprocess(pytester, "--target=tests.helper_targets:WrongTarget,tests.spine_targets:Raises",
                             "--ops", "ADD,CONV_2D,TANH", "--cases-per-op", "3", f"--waivers={waivers}")
    assert proc.returncode == 1, proc.stdout[-3000:]
    page = rd / "index.html"
    text = page.read_text(encoding="utf-8")
    assert 'class="cell known"' in text and 'id="new-failures"' in text   # both kinds are on the page

    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    proc = _chromium(tmp_path, "--dump-dom", probe.as_uri())
    m = re.search(r'<pre id="qc-layout">(.*?)</pre>', proc.stdout, re.S)
    assert m, proc.stderr[-2000:]
    got = json.loads(html.unescape(m.group(1)))
    assert got["verdict"].startswith("FAIL: ")
    assert got["scrollWidth"] <= got["viewport"] <= WIDTH, got      # no sideways scrolling of the page
    assert got["wide"] == [], got["wide"][:20]                        # nothing overflows outside a scrolling box
    # the command: one line, selected whole by its copy button
    assert got["lines"] == 1, got
    assert got["command"].startswith("qconform repro ") and "\n" not in got["command"]
    assert got["selected"] == got["command"]

    png = tmp_path / "index.png"
    proc = _chromium(tmp_path, f"--screenshot={png}", page.as_uri())
    assert png.exists(), proc.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24]) == (WIDTH, 900)
    print(f"\nscreenshot: {png}")
