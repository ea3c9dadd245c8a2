"""Headless Chromium for page tests: the DOM after rendering, console messages, a screenshot.

Chromium comes from `make system-deps` (Debian's `chromium`); where it is missing the tests that
need it skip and say why. Every run gets its own profile folder and no network features.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

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
