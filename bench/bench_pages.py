"""Which way to draw ledger's pages: size of the file and time to render it in headless Chromium.

The `ledger diff --html` page (six charts, A and B per step) drawn four ways from the same data:

- `svg`: ledger's own static SVG (`ledger.pages.svg`), what ledger ships;
- `mpl-svg`: matplotlib figures saved as SVG, inlined;
- `mpl-png`: matplotlib figures saved as PNG, inlined as base64;
- `plotly`: plotly with its JavaScript inline (`include_plotlyjs=True`), only when a Python with
  plotly is given (`--plotly-python`); ledger does not depend on it.

Render time is Chromium's wall time to load the page and dump its DOM, with the same for an
empty page as the baseline (browser start-up), reported as a ratio and a difference.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ledger.compare.diffcore import build_report  # noqa: E402
from ledger.compare.render import render_text  # noqa: E402
from ledger.metrics.table import MetricsTable, StepRow  # noqa: E402
from ledger.pages.html import DiffPageInput, diff_charts, diff_page  # noqa: E402

PLOTLY = """
import json, sys
import plotly.graph_objects as go
from plotly.subplots import make_subplots
charts = json.load(open(sys.argv[1]))
fig = make_subplots(rows=len(charts), cols=1, subplot_titles=[c["title"] for c in charts])
for i, c in enumerate(charts, 1):
    for s in c["series"]:
        fig.add_trace(go.Scattergl(x=[p[0] for p in s["points"]], y=[p[1] for p in s["points"]], name=s["label"]), row=i, col=1)
fig.update_layout(height=260 * len(charts), width=900)
open(sys.argv[2], "w").write(fig.to_html(include_plotlyjs=True, full_html=True))
"""


def table(steps: int, scale: float) -> MetricsTable:
    t = MetricsTable()
    for s in range(steps):
        length = 100 + 900 * math.exp(-s / (steps / 5))
        t.rows[s] = StepRow(
            s,
            10.0 * s,
            10.0 * s + 9,
            {
                "perf/rollout_time": scale * length / 100,
                "rollout/response_len/mean": length,
                "perf/train_time": scale * 3.0,
                "rollout/raw_reward": 1 - length / 1000,
            },
        )
        t.train_steps[s] = {"train/loss": scale * math.sin(s / 50) / (1 + s / 100)}
    return t


def manifest(run_id: str, lr: float) -> dict[str, object]:
    return {"id": run_id, "settings": {"lr": lr}, "status": {"state": "finished"}, "started": "2026-12-01T10:00:00Z"}


def mpl_pages(data: DiffPageInput, fmt: str) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: TID251
    from matplotlib.figure import Figure  # noqa: TID251

    parts = []
    for chart in diff_charts(data):
        fig = Figure(figsize=(7.6, 2.6), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        for s in chart.series:
            xs, ys = zip(*s.points)
            ax.plot(xs, ys, label=s.label, linewidth=1)
        ax.set_title(chart.title)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1))
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt)
        if fmt == "svg":
            parts.append(buf.getvalue().decode())
        else:
            parts.append(f'<img src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">')
    return "<!DOCTYPE html><html><body>" + "".join(parts) + "</body></html>"


def render_s(chromium: str, page: Path, repeat: int) -> float:
    times = []
    for n in range(repeat):
        with tempfile.TemporaryDirectory() as profile:
            start = time.perf_counter()
            subprocess.run(
                [
                    chromium,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    f"--user-data-dir={profile}",
                    "--dump-dom",
                    page.as_uri(),
                ],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=300,
            )
            times.append(time.perf_counter() - start)
        del n
    return sorted(times)[len(times) // 2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, nargs="+", default=[100, 10000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--plotly-python", help="a Python interpreter with plotly installed")
    args = ap.parse_args()
    chromium = shutil.which("chromium")
    out = Path(tempfile.mkdtemp(prefix="ledger-bench-pages-"))
    empty = out / "empty.html"
    empty.write_text("<!DOCTYPE html><html><body></body></html>")
    base = render_s(chromium, empty, args.repeat) if chromium else math.nan
    print(f"chromium, empty page (baseline): {base:.2f} s" if chromium else "no chromium: sizes only")
    print(f"{'steps':>6} {'way':8} {'size':>10} {'build s':>8} {'render s':>9} {'vs empty':>9}")
    for steps in args.steps:
        ma, mb = manifest("a", 1e-6), manifest("b", 2e-6)
        ta, tb = table(steps, 1.0), table(steps, 1.1)
        report = build_report(ma, mb, ta, tb)
        data = DiffPageInput(report, render_text(report), ma, mb, ta, tb)
        ways = {
            "svg": lambda d=data: diff_page(d),
            "mpl-svg": lambda d=data: mpl_pages(d, "svg"),
            "mpl-png": lambda d=data: mpl_pages(d, "png"),
        }
        for way, build in ways.items():
            start = time.perf_counter()
            html = build()
            built = time.perf_counter() - start
            page = out / f"{way}-{steps}.html"
            page.write_text(html)
            rendered = render_s(chromium, page, args.repeat) if chromium else math.nan
            print(f"{steps:>6} {way:8} {page.stat().st_size:>10,} {built:>8.2f} {rendered:>9.2f} {rendered / base:>8.2f}x", flush=True)
        if args.plotly_python:
            spec = out / f"charts-{steps}.json"
            spec.write_text(
                json.dumps(
                    [{"title": c.title, "series": [{"label": s.label, "points": s.points} for s in c.series]} for c in diff_charts(data)]
                )
            )
            page = out / f"plotly-{steps}.html"
            start = time.perf_counter()
            subprocess.run([args.plotly_python, "-c", PLOTLY, str(spec), str(page)], check=True)
            built = time.perf_counter() - start
            rendered = render_s(chromium, page, args.repeat) if chromium else math.nan
            print(f"{steps:>6} {'plotly':8} {page.stat().st_size:>10,} {built:>8.2f} {rendered:>9.2f} {rendered / base:>8.2f}x", flush=True)
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
