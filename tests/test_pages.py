"""The HTML pages (`diff --html`, `report --html`, `heat --html`) opened in headless Chromium.

Real parts: a temp git repo, `ledger run` of the toy trainer with the scripted heat sensor (so
the run has a real heat log with one pause), the real `ledger` CLI writing the pages, and
Chromium rendering them. Each test checks the page is self-contained, that Chromium logs no
console message, and that the charts hold one point per step; screenshots stay in tmp_path.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser import assert_self_contained, needs_chromium, open_page, polylines
from conftest import ledger, module_home, toy_repo, toy_train

TRAIN = toy_train(rollout_batch_size=8, n_samples_per_prompt=4, seed=3, global_batch_size=16)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with module_home(tmp_path_factory, "home-pages"):
        # GPU 0 is hot from 0.3 s to 0.6 s: one short pause in every run (scripted sensor)
        files = {
            "README.md": "x\n",
            "heat.timeline": "0 0 60\n0 1 55\n0.3 0 90\n0.6 0 70\n",
            ".ledger.yaml": "heat_guard:\n  interval_s: 0.05\n  pause_at: 85\n  resume_at: 75\n  resume_after: 0.1\n"
            "  max_pause: 600\n  sensor: {timeline: heat.timeline}\n",
        }
        repo = toy_repo(tmp_path_factory.mktemp("pages") / "proj", files, init=False)
        for name, extra in (("a", ["--num-rollout", "6"]), ("b", ["--num-rollout", "8"])):
            r = ledger(repo, "run", "--name", name, "--", *TRAIN, *extra)
            assert r.returncode == 0, r.stderr
        return repo


@needs_chromium
def test_diff_page(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "diff.html"
    r = ledger(runs, "diff", "a", "b", "--html", str(out))
    assert r.returncode == 0, r.stderr
    html = out.read_text()
    assert_self_contained(html)
    assert "<h1" in html and "num-rollout: 6 -&gt; 8" in html
    page = open_page(out, tmp_path)
    assert page.console == []
    lines = polylines(page.dom)
    # six questions, A then B: rollout time, response length, per 1k tokens, train time, loss, reward
    a = next(k for k in lines if k.startswith("A "))
    b = ["B b", "B b (identical to A a)"]  # "identical" where the toy's series coincide on the common steps (issue 26)
    assert lines[a] == [6, 6, 6, 6, 12, 6] and sorted(n for k in b for n in lines[k]) == [8, 8, 8, 8, 8, 16]
    assert page.dom.count('data-kind="mark"') == 2 * 5 + 4  # steps only in B, under each chart
    assert "learning on common steps" in page.dom  # the text report beside the charts
    # a paused step is shaded in each of the five charts on rollout ids (whether the scripted
    # pause falls inside a logged step depends on start-up time; test_svg checks it exactly)
    assert page.dom.count('data-kind="span"') % 5 == 0
    assert page.screenshot.stat().st_size > 10_000


@needs_chromium
def test_report_page(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    r = ledger(runs, "report", "--html", str(out))
    assert r.returncode == 0, r.stderr
    assert "(2 runs)" in r.stderr
    assert_self_contained(out.read_text())
    page = open_page(out, tmp_path)
    assert page.console == []
    ids = [x["id"] for x in json.loads(ledger(runs, "list", "--json").stdout)]
    assert page.dom.index(f'data-run="{ids[0]}"') < page.dom.index(f'data-run="{ids[-1]}"')  # newest first
    assert "num-rollout: 6 -&gt; 8" in page.dom
    assert polylines(page.dom)["train/loss"] == [16, 12] and polylines(page.dom)["perf/rollout_time"] == [8, 6]


@needs_chromium
def test_heat_page(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "heat.html"
    r = ledger(runs, "heat", "a", "--html", str(out))
    assert r.returncode == 0, r.stderr
    assert "legend:" in r.stdout and "one column = 0s" not in r.stdout
    assert_self_contained(out.read_text())
    page = open_page(out, tmp_path)
    assert page.console == []
    lines = polylines(page.dom)
    assert set(lines) == {"GPU 0", "GPU 1"} and lines["GPU 0"] == lines["GPU 1"] and lines["GPU 0"][0] > 5
    assert "seconds since start" in page.dom  # a run of seconds reads in seconds
    assert page.dom.count('data-kind="span"') == 1 and page.dom.count('data-kind="hline"') == 2
    legend = page.dom.count('data-kind="legend"')
    assert legend == 2 + 2 + 1 + 1  # two GPUs, two thresholds, paused, step boundary
    from browser import layout

    summary = layout(out, tmp_path)["pres"]["summary"]  # the summary whole, in no scroll box
    assert summary["scrollWidth"] <= summary["clientWidth"] and summary["scrollHeight"] <= summary["clientHeight"], summary


@needs_chromium
def test_the_console_check_sees_what_a_page_logs(tmp_path: Path) -> None:
    """The `console == []` checks above are not vacuous: Chromium's console reaches `open_page`."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><script>console.error("boom"); nope();</script></body></html>')
    console = open_page(bad, tmp_path).console
    assert any("boom" in m for m in console) and any("nope is not defined" in m for m in console)
