"""Headless Chromium for page tests: the DOM after rendering, console messages, a screenshot.

Chromium comes from `make system-deps` (Debian's `chromium`); where it is missing the tests that
need it skip and say why. Every run gets its own profile folder and no network features.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (`make system-deps` installs it as root)")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
    "--window-size=1400,2000",
]
# Chromium writes each console message as `...:INFO:CONSOLE:N] "text", source: URL (line)`.
CONSOLE = re.compile(r":CONSOLE(?:\(\d+\)|:\d+)\] (.*)")


@dataclass
class Rendered:
    dom: str
    console: list[str]
    screenshot: Path


def open_page(page: Path, tmp: Path) -> Rendered:
    """Render `page` twice (DOM dump, then screenshot) and collect console messages."""
    assert CHROMIUM is not None
    console: list[str] = []
    shot = tmp / f"{page.stem}.png"
    outputs = []
    for n, extra in enumerate((["--dump-dom"], [f"--screenshot={shot}"])):
        profile = tmp / f"profile-{page.stem}-{n}"
        r = subprocess.run(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *extra, page.resolve().as_uri()], capture_output=True, text=True, timeout=120
        )
        assert r.returncode == 0, r.stderr[-2000:]
        console += CONSOLE.findall(r.stderr)
        outputs.append(r.stdout)
    return Rendered(outputs[0], console, shot)


def polylines(dom: str) -> dict[str, list[int]]:
    """series label -> for each chart line with that label: (data-n, points actually drawn)."""
    out: dict[str, list[int]] = {}
    for m in re.finditer(r'<polyline data-series="([^"]*)" data-n="(\d+)" points="([^"]*)"', dom):
        drawn = len(m.group(3).split())
        assert drawn == int(m.group(2)), "a small series is drawn point for point"
        out.setdefault(m.group(1), []).append(drawn)
    return out


def assert_self_contained(html: str) -> None:
    """Nothing is fetched at view time: no script, no stylesheet link, no remote URL."""
    assert "<script" not in html and "<link" not in html
    assert not re.search(r'(?:src|href)="(?:https?:)?//', html)


# The harness page of `layout`: it loads the page under test in a same-origin iframe of the given
# size and writes what the layout gave into its own DOM, which `--dump-dom` returns. The page under
# test stays script-free; only the harness (written by the test, next to it) has a script.
_HARNESS = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body style="margin:0">
<iframe id="page" src="%(src)s" style="border:0;width:%(w)dpx;height:%(h)dpx"></iframe><pre id="layout">pending</pre>
<script>
document.getElementById("page").addEventListener("load", function () {
  var doc = this.contentDocument, out = {scrollWidth: doc.documentElement.scrollWidth, tables: {}, charts: [], banners: {}};
  out.pres = {};
  doc.querySelectorAll("pre[data-kind]").forEach(function (p) {
    out.pres[p.dataset.kind] = {scrollWidth: p.scrollWidth, clientWidth: p.clientWidth, scrollHeight: p.scrollHeight, clientHeight: p.clientHeight};
  });
  doc.querySelectorAll("[data-banner]").forEach(function (b) {
    var r = b.getBoundingClientRect();
    out.banners[b.dataset.banner] = {top: r.top, bottom: r.bottom};
  });
  doc.querySelectorAll("table[data-kind], p[data-kind]").forEach(function (t) {
    var r = t.getBoundingClientRect(), rows = t.querySelectorAll("tr");
    out.tables[t.dataset.kind] = {top: r.top, bottom: r.bottom, left: r.left, right: r.right, rows: rows.length,
      row_bottoms: Array.prototype.map.call(rows, function (row) { return row.getBoundingClientRect().bottom; })};
  });
  doc.querySelectorAll("svg.chart").forEach(function (svg) {
    var drawn = 0, expected = 0;
    svg.querySelectorAll("polyline[data-n]").forEach(function (p) {
      drawn += p.getAttribute("points").trim() ? p.getAttribute("points").trim().split(/\\s+/).length : 0;
      expected += Number(p.dataset.n);
    });
    var r = svg.getBoundingClientRect();
    out.charts.push({title: svg.getAttribute("aria-label"), drawn: drawn, expected: expected, width: r.width});
  });
  document.getElementById("layout").textContent = JSON.stringify(out);
});
</script></body></html>
"""


def layout(page: Path, tmp: Path, width: int = 1280, height: int = 800) -> dict[str, Any]:
    """What Chromium's layout makes of `page` in a `width` x `height` viewport: the page's
    scrollWidth, each `table[data-kind]`'s (or `p[data-kind]`'s) box (and each row's bottom), each
    `[data-banner]`'s box and, per chart, the points
    its lines draw and the points they should draw. Offline: the page is a file, read by a
    harness page beside it (`--allow-file-access-from-files`), rendered with virtual time."""
    assert CHROMIUM is not None
    harness = page.parent / f".harness-{page.stem}.html"
    harness.write_text(_HARNESS % {"src": html.escape(page.name), "w": width, "h": height})
    r = subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            "--allow-file-access-from-files",
            "--virtual-time-budget=10000",
            f"--user-data-dir={tmp / f'profile-layout-{page.stem}'}",
            "--dump-dom",
            harness.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    found = re.search(r'<pre id="layout">([^<]*)</pre>', r.stdout)
    assert found is not None and found.group(1) != "pending", r.stdout[-2000:]
    out: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    return out
