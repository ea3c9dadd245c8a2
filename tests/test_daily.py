"""The daily surface (issue 26): summary metrics in the record, `ledger list` filters, `--json`/`--csv`,
`tag`/`note`/`archive` as metadata commits merged across clones. Real runs of a small job that
logs Miles-shaped metric lines (the shape of `rollout.py`'s `perf N: {...}` lines, see
shared/miles-facts.md)."""

from __future__ import annotations

import csv
import io
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import LEDGER, git, ledger, make_repo

EMIT = """
import argparse
ap = argparse.ArgumentParser()
ap.add_argument("--scale", type=float, default=1.0)
ap.add_argument("--steps", type=int, default=4)
a = ap.parse_args()
for step in range(a.steps):
    loss = a.scale * (4 - step) if step != 1 else a.scale * 9
    print(f"[2026-11-29 10:00:{step:02d}.000 main] train.py:2 - perf {step}: "
          f"{{'train/loss': {loss}, 'perf/step_time': {1.5 + step}}}")
"""


def _record(repo: Path, name: str, *args: str) -> str:
    proc = ledger(repo, "run", "--name", name, "--no-debug-data", "--no-heat-guard", "--", sys.executable, "emit.py", *args)
    assert proc.returncode == 0, proc.stderr
    return ledger(repo, "path", "latest").stdout.strip().rsplit("/", 1)[-1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """One repository with three runs: a (scale 1), b (scale 2), c (scale 0.1, 2 steps)."""
    home = tmp_path_factory.mktemp("home-daily")
    (home / ".gitconfig").write_text("[user]\n\tname = T\n\temail = t@e.com\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        mp.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
        repo = make_repo(tmp_path_factory.mktemp("daily") / "proj", {"README.md": "x\n", "emit.py": EMIT})
        ids = {
            "a": _record(repo, "a", "--scale", "1"),
            "b": _record(repo, "b", "--scale", "2"),
            "c": _record(repo, "c", "--scale", "0.1", "--steps", "2"),
        }
    return repo, ids


def _listed(repo: Path, *args: str) -> list[str]:
    proc = ledger(repo, "list", "--json", *args)
    assert proc.returncode == 0, proc.stderr
    return [r["name"] for r in json.loads(proc.stdout)]


def test_summary_metrics_are_in_the_record(runs: tuple[Path, dict[str, str]]) -> None:
    repo, ids = runs
    rid = ids["a"]
    summary = json.loads(git(repo, "show", f"experiments:runs/{rid[-4:-2]}/{rid}/summary.json"))
    loss = summary["metrics"]["train/loss"]  # losses 4, 9, 2, 1 at steps 0..3
    assert loss == {"last": 1.0, "last_step": 3, "min": 1.0, "min_step": 3, "max": 9.0, "max_step": 1}
    assert summary["metrics"]["perf/step_time"]["last"] == 4.5


def test_list_filters_on_settings_metrics_name_state_and_since(runs: tuple[Path, dict[str, str]]) -> None:
    repo, _ = runs
    assert _listed(repo, "--where", "scale=2") == ["b"]
    assert _listed(repo, "--where", "scale=2.0") == ["b"]  # numbers compare as numbers
    assert _listed(repo, "--where", "scale!=2") == ["c", "a"]
    assert _listed(repo, "--where", "train/loss<1.5") == ["c", "a"]  # the last value: 0.1, 2, 1
    assert _listed(repo, "--where", "train/loss>=1", "--where", "scale<=1") == ["a"]
    assert _listed(repo, "--where", "steps=2") == ["c"]
    assert _listed(repo, "--name", "[ab]") == ["b", "a"]
    assert _listed(repo, "--state", "finished") == ["c", "b", "a"]
    assert _listed(repo, "--state", "failed") == []
    assert _listed(repo, "--since", "2000-01-01") == ["c", "b", "a"]
    assert _listed(repo, "--since", "2999-01-01") == []
    assert _listed(repo, "--since", "30d") == ["c", "b", "a"]


def test_list_unknown_where_key_names_the_nearest(runs: tuple[Path, dict[str, str]]) -> None:
    repo, _ = runs
    proc = ledger(repo, "list", "--where", "train/los<1")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "no setting or metric named 'train/los'" in proc.stderr and "train/loss" in proc.stderr
    bad = ledger(repo, "list", "--where", "scale<big")
    assert bad.returncode == 2 and "needs a number" in bad.stderr
    state = ledger(repo, "list", "--state", "finshed")
    assert state.returncode == 2 and "did you mean finished" in state.stderr


def test_list_metric_columns_json_and_csv(runs: tuple[Path, dict[str, str]]) -> None:
    repo, ids = runs
    table = ledger(repo, "list", "--metric", "train/*").stdout
    header, *rows = table.splitlines()
    assert "train/loss" in header and "perf/step_time" not in header
    assert any(r.startswith(ids["a"]) and r.rstrip().endswith(" 1") for r in rows), table
    (a,) = [r for r in json.loads(ledger(repo, "list", "--json").stdout) if r["name"] == "a"]
    assert a["settings"]["scale"] == 1.0 and a["metrics"]["train/loss"]["max"] == 9.0
    assert a["tags"] == [] and a["note"] is None
    rows_csv = list(csv.DictReader(io.StringIO(ledger(repo, "list", "--csv").stdout)))
    (c,) = [r for r in rows_csv if r["name"] == "c"]
    assert c["settings.steps"] == "2" and float(c["metrics.train/loss.last"]) == pytest.approx(0.9)


def _changed_files(repo: Path, commit: str) -> list[str]:
    return git(repo, "diff", "--name-only", f"{commit}^", commit).split()


def test_tag_note_archive_are_metadata_commits(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "proj", {"README.md": "x\n", "emit.py": EMIT})
    first = _record(repo, "lr", "--scale", "1")
    second = _record(repo, "lr", "--scale", "3")
    folder = f"runs/{first[-4:-2]}/{first}"
    record_before = git(repo, "ls-tree", "-r", f"experiments:{folder}")

    assert ledger(repo, "tag", first, "baseline", "bad-flag").returncode == 0
    tip = git(repo, "rev-parse", "experiments").strip()
    assert _changed_files(repo, tip) == [f"{folder}/meta.json"]
    assert f"Ledger-Meta: {first}" in git(repo, "log", "-1", "--format=%B", tip)
    assert ledger(repo, "note", first, "the flag was wrong").returncode == 0
    assert ledger(repo, "tag", "--rm", first, "bad-flag").returncode == 0
    (row,) = [r for r in json.loads(ledger(repo, "list", "--json").stdout) if r["id"] == first]
    assert row["tags"] == ["baseline"] and row["note"] == "the flag was wrong"
    assert _listed(repo, "--tag", "baseline") == ["lr"]
    # the run's own record files are byte for byte what they were
    after = dict(line.split("\t")[::-1] for line in git(repo, "ls-tree", "-r", f"experiments:{folder}").splitlines())
    before = dict(line.split("\t")[::-1] for line in record_before.splitlines())
    assert {k: v for k, v in after.items() if k != "meta.json"} == before

    # archive the newer one: hidden from list, and `lr` now names the older run
    assert ledger(repo, "archive", second).returncode == 0
    assert [r["id"] for r in json.loads(ledger(repo, "list", "--json").stdout)] == [first]
    assert second in ledger(repo, "list", "--archived").stdout
    assert ledger(repo, "path", "lr").stdout.strip().endswith(first)
    assert ledger(repo, "unarchive", second).returncode == 0
    assert ledger(repo, "path", "lr").stdout.strip().endswith(second)
    # a run recorded after metadata commits keeps them; `latest` still names runs only
    third = _record(repo, "z")
    assert ledger(repo, "path", "latest").stdout.strip().endswith(third)
    assert ledger(repo, "path", "latest~1").stdout.strip().endswith(second)
    assert _listed(repo, "--tag", "baseline") == ["lr"]
    bad = ledger(repo, "tag", first, "two words")
    assert bad.returncode == 2 and "not one short word" in bad.stderr


def test_concurrent_tags_from_two_clones_are_both_kept(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "proj", {"README.md": "x\n", "emit.py": EMIT})
    rid = _record(repo, "shared")
    git(tmp_path, "init", "-q", "--bare", "shared.git")
    git(repo, "remote", "add", "origin", str(tmp_path / "shared.git"))
    assert ledger(repo, "push").returncode in (0, 5)  # 5: no DVC remote for data (the run has none)
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(tmp_path / "shared.git"), str(other))
    git(other, "fetch", "-q", "origin", "experiments:experiments")
    assert ledger(repo, "tag", rid, "from-a").returncode == 0
    assert ledger(other, "tag", rid, "from-b").returncode == 0
    assert ledger(other, "note", rid, "note from b").returncode == 0
    assert ledger(repo, "push").returncode in (0, 5)
    pushed = ledger(other, "push")
    assert pushed.returncode in (0, 5), pushed.stderr
    assert ledger(repo, "pull").returncode == 0
    for clone in (repo, other):
        (row,) = json.loads(ledger(clone, "list", "--json").stdout)
        assert row["tags"] == ["from-a", "from-b"] and row["note"] == "note from b"


def test_compare_shows_only_differing_settings_and_metrics_side_by_side(runs: tuple[Path, dict[str, str]]) -> None:
    repo, ids = runs
    proc = ledger(repo, "compare", "a", "b", "c", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [r["name"] for r in data["runs"]] == ["a", "b", "c"] and data["runs"][0]["id"] == ids["a"]
    assert set(data["settings"]) == {"scale", "steps"}  # the rest is the same in all three
    assert data["settings"]["scale"] == [1.0, 2.0, 0.1] and data["settings"]["steps"][:2] == [None, None]
    assert [m["last"] for m in data["metrics"]["train/loss"]] == [1.0, 2.0, pytest.approx(0.9)]
    text = ledger(repo, "compare", "a", "b", "--metric", "train/*").stdout
    assert "scale" in text and "steps" not in text and "perf/step_time" not in text and "train/loss" in text
    one = ledger(repo, "compare", "a")
    assert one.returncode == 2 and "at least two runs" in one.stderr


def test_compare_page_overlays_every_metric_and_groups(runs: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    from browser import CHROMIUM, assert_self_contained, open_page, polylines

    repo, ids = runs
    out = tmp_path / "cmp.html"
    assert ledger(repo, "compare", "a", "b", "c", "--html", str(out)).returncode == 0
    html = out.read_text()
    assert_self_contained(html)
    assert 'data-group="perf"' in html and 'data-group="train"' in html
    assert f"<title>{ids['a']}</title>" in html  # ids on hover, names in legends
    grouped = tmp_path / "grouped.html"
    proc = ledger(repo, "compare", "a", "b", "c", "--html", str(grouped), "--group-by", "steps", "--metric", "train/*")
    assert proc.returncode == 0, proc.stderr
    assert grouped.read_text().count('data-kind="band"') == 2  # steps absent (a, b) and steps=2 (c)
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH: the pages were checked as text only")
    page = open_page(out, tmp_path)
    lines = polylines(page.dom)
    assert lines["a"] == [4, 4] and lines["c"] == [2, 2] and lines["b"] == [4]
    assert lines["b (identical to a)"] == [4]  # perf/step_time is the same in a and b
    # hovering a point shows run, step and value (an SVG <title>: no script)
    assert "<title>a: rollout 1, 9</title>" in page.dom


def test_a_ledger_option_typo_is_a_usage_error_never_passed_to_the_job(repo: Path) -> None:
    proc = ledger(repo, "run", "--nmae", "x", "--", "touch", "ran")
    assert proc.returncode == 2, proc.stderr  # was: `--nmae x -- touch ran` run as the job (exit 127)
    assert "no option --nmae" in proc.stderr and "did you mean --name?" in proc.stderr
    assert not (repo / "ran").exists() and "no runs recorded" in ledger(repo, "list").stdout


def test_could_not_record_is_not_the_jobs_exit_1(repo: Path) -> None:
    assert ledger(repo, "run", "--no-heat-guard", "--", "sh", "-c", "exit 1").returncode == 1  # the job's own 1
    lock = repo / ".git" / "refs" / "heads" / "experiments.lock"
    proc = ledger(repo, "run", "--no-heat-guard", "--", "sh", "-c", f"touch {lock}; exit 1")
    assert proc.returncode == 75, proc.stderr  # EXIT_NOT_RECORDED (was 1, like the job)
    assert "ledger recover" in proc.stderr


def test_log_and_heat_speak_json(repo: Path) -> None:
    (repo / "heat.timeline").write_text("0 0 60\n0.2 0 70\n")
    (repo / ".ledger.yaml").write_text("heat_guard:\n  interval_s: 0.1\n  sensor: {timeline: heat.timeline}\n")
    (repo / "nap.py").write_text("import time\ntime.sleep(0.5)\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "heat config")
    for lr in ("1", "2"):
        proc = ledger(repo, "run", "--no-debug-data", "--", sys.executable, "nap.py", "--lr", lr)
        assert proc.returncode == 0, proc.stderr
    log = json.loads(ledger(repo, "log", "--json").stdout)
    assert [e["first"] for e in log] == [False, True]
    assert [c["name"] for c in log[0]["changed"]] == ["lr"]
    heat = json.loads(ledger(repo, "heat", "latest", "--json").stdout)
    assert heat["gpus"]["0"]["peak_c"] >= 60 and heat["gpus"]["0"]["samples"] >= 1


def test_diff_page_leads_with_the_answer_and_charts_every_metric(runs: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    from browser import CHROMIUM, assert_self_contained, open_page, polylines

    repo, ids = runs
    out = tmp_path / "diff.html"
    proc = ledger(repo, "diff", "a", "b", "--html", str(out))
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert_self_contained(html)
    answer = html.index('data-kind="answer"')
    assert answer < html.index("<svg")  # the answer comes before any chart (was: text report after them)
    table = html[answer : html.index("</table>", answer)]
    assert "median A" in table and 'data-metric="train/loss"' in table and "scale: 1 → 2" in html
    assert 'data-group="perf"' in html and "perf/step_time" in html  # not among the six fixed charts
    assert f"<title>{ids['a']}</title>" in html and "A a" in html  # names in legends, ids on hover
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH: the page was checked as text only")
    page = open_page(out, tmp_path)
    assert page.console == []
    assert 'data-kind="answer"' in page.dom and polylines(page.dom)["a"] == [4]  # perf/step_time, in its group


def test_a_single_point_is_a_visible_marker_and_hostile_names_stay_text(tmp_path: Path) -> None:
    from ledger.pages.svg import Chart, Series, render

    svg = render(Chart("one step", "rollout", "s", [Series("<img src=x onerror=alert(1)>", [(0.0, 1.5)], hover="<b>")]))
    assert 'data-kind="point"' in svg and "<img" not in svg and "&lt;img src=x" in svg and "<b>" not in svg
    repo = make_repo(tmp_path / "proj", {"README.md": "x\n", "emit.py": EMIT})
    # a name holding markup can no longer be recorded (`ledger run --name` takes a word); one that
    # is pulled is shown as text on the compare page: tests/test_hostile_tree.py
    for scale in ("1", "2"):
        proc = ledger(
            repo,
            "run",
            "--name",
            "one" if scale == "1" else "ok",
            "--no-debug-data",
            "--",
            sys.executable,
            "emit.py",
            "--scale",
            scale,
            "--steps",
            "1",
        )
        assert proc.returncode == 0, proc.stderr
    page = tmp_path / "one.html"
    assert ledger(repo, "compare", "one", "ok", "--html", str(page)).returncode == 0
    html = page.read_text()
    assert html.count('data-kind="point"') == 4  # 2 metrics x 2 runs of one step each (was: empty charts)


def test_installed_like_pipx_the_job_runs_in_the_users_python(repo: Path, tmp_path: Path) -> None:
    """`pipx install .` / `uv tool install .` put only the `ledger` script on PATH (a link into the
    tool's own venv, whose bin/ is not on PATH): the job's `python3` must be the user's, with the
    user's packages, never the interpreter ledger runs in. Same layout here: ledger's venv script
    linked from a bin folder, a "user" python3 (another interpreter) first on PATH."""
    import os
    import shutil

    script = Path(sys.executable).parent / "ledger"
    if not script.exists():
        pytest.skip("ledger is not installed as a console script in this venv")
    user_python = shutil.which("python3", path="/usr/bin:/usr/local/bin")
    if user_python is None or Path(user_python).resolve() == Path(sys.executable).resolve():
        pytest.skip("no second Python interpreter to stand for the user's")
    tools = tmp_path / "local-bin"
    tools.mkdir()
    (tools / "ledger").symlink_to(script)
    user_bin = tmp_path / "user-bin"
    user_bin.mkdir()
    (user_bin / "python3").symlink_to(user_python)
    (repo / "where.py").write_text("import sys\nprint('PREFIX', sys.prefix)\n")
    env = {**os.environ, "PATH": f"{user_bin}:{tools}:/usr/bin:/bin"}
    proc = subprocess.run(
        [str(tools / "ledger"), "run", "--no-heat-guard", "--no-debug-data", "--", "python3", "where.py"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    (prefix,) = [line.split(" ", 1)[1] for line in proc.stdout.splitlines() if line.startswith("PREFIX ")]
    assert Path(prefix).resolve() != Path(sys.prefix).resolve()  # not ledger's venv
    assert prefix == subprocess.run([user_python, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True).stdout.strip()


def test_export_per_step_metrics(runs: tuple[Path, dict[str, str]]) -> None:
    repo, _ = runs
    rows = list(csv.DictReader(io.StringIO(ledger(repo, "export", "a").stdout)))
    assert [r["step"] for r in rows] == ["0", "1", "2", "3"] and [float(r["train/loss"]) for r in rows] == [4, 9, 2, 1]
    tsv = ledger(repo, "export", "a", "--format", "tsv").stdout.splitlines()
    assert tsv[0].split("\t")[:3] == ["step", "t_start", "t_end"] and len(tsv) == 5
    data = json.loads(ledger(repo, "export", "c", "--format", "json").stdout)
    assert [d["perf/step_time"] for d in data] == [1.5, 2.5]
    none = ledger(repo, "export", "a", "--axis", "train")
    assert none.returncode == 1 and "try --axis rollout" in none.stderr


TRACKED = """
print("wandb: Tracking run with wandb version 0.19.1")
print("wandb: Syncing run vivid-glade-86")
print("wandb: \\U0001f680 View run at https://wandb.ai/team/grpo/runs/11cqdt05")
print("\\U0001f3c3 View run bold-owl-3 at: http://127.0.0.1:5000/#/experiments/7/runs/0f3c2a9be1d84c55a1f2b3c4d5e6f708")
"""


def test_tracker_links_are_recorded_and_shown(tmp_path: Path) -> None:
    """The shapes W&B and MLflow print as a run starts (as in public training logs)."""
    repo = make_repo(tmp_path / "proj", {"README.md": "x\n", "emit.py": EMIT, "tracked.py": TRACKED})
    proc = ledger(repo, "run", "--name", "t", "--no-debug-data", "--", sys.executable, "tracked.py", "--tensorboard-dir", "/tb/run7")
    assert proc.returncode == 0, proc.stderr
    _record(repo, "u")
    shown = json.loads(ledger(repo, "show", "t", "--json").stdout)["trackers"]
    assert shown["wandb"] == {"url": "https://wandb.ai/team/grpo/runs/11cqdt05", "run_id": "11cqdt05"}
    assert shown["mlflow"]["run_id"] == "0f3c2a9be1d84c55a1f2b3c4d5e6f708" and shown["mlflow"]["experiment_id"] == "7"
    assert shown["tensorboard"] == {"logdir": "/tb/run7"}
    (row,) = [r for r in json.loads(ledger(repo, "list", "--json").stdout) if r["name"] == "t"]
    assert row["trackers"]["wandb"]["run_id"] == "11cqdt05"
    page = tmp_path / "c.html"
    assert ledger(repo, "compare", "t", "u", "--html", str(page)).returncode == 0
    assert 'href="https://wandb.ai/team/grpo/runs/11cqdt05"' in page.read_text()


def test_ctrl_c_says_what_happens(repo: Path) -> None:
    (repo / "job.py").write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    proc = subprocess.Popen(
        [*LEDGER, "run", "--no-heat-guard", "--", sys.executable, "job.py"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "started"
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert "ledger: forwarded SIGINT to the job; SIGKILL in 30 s; Ctrl-C again to kill now" in err, err


def test_diff_of_a_running_run_says_it_is_running(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "proj", {"README.md": "x\n", "emit.py": EMIT})
    _record(repo, "a")
    (repo / "slow.py").write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    proc = subprocess.Popen(
        [*LEDGER, "run", "--name", "slow", "--no-heat-guard", "--", sys.executable, "slow.py"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
        diff = ledger(repo, "diff", "a", "slow")
        assert diff.returncode == 4 and "is still running" in diff.stderr, diff.stderr  # was: no run named 'slow'
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


def test_report_sparklines_share_a_y_scale_per_metric_and_say_units() -> None:
    import re

    from ledger.metrics.table import MetricsTable, StepRow
    from ledger.pages.html import ReportRow, report_page

    def table(scale: float) -> MetricsTable:
        return MetricsTable(rows={s: StepRow(s, None, None, {"train/loss": scale * s, "perf/rollout_time": 1.0 + s}) for s in range(5)})

    rows = [ReportRow({"id": f"r{i}"}, "-", table(scale)) for i, scale in enumerate((1.0, 10.0))]
    html = report_page(rows, "two runs")
    losses = re.findall(r'aria-label="loss">(.*?)</svg>', html)
    ticks = [re.findall(r'text-anchor="end">([^<]*)<', svg) for svg in losses]
    assert len(ticks) == 2 and ticks[0] == ticks[1]  # was: each sparkline fitted to its own run
    assert 'aria-label="rollout time (s)"' in html


def test_a_pulled_metadata_commit_that_changes_more_is_refused(tmp_path: Path) -> None:
    """A crafted clone: a commit with a `Ledger-Meta:` trailer that also changes code is not data."""
    repo = make_repo(tmp_path / "proj", {"README.md": "x\n", "emit.py": EMIT})
    rid = _record(repo, "r")
    git(tmp_path, "init", "-q", "--bare", "shared.git")
    git(repo, "remote", "add", "origin", str(tmp_path / "shared.git"))
    ledger(repo, "push")
    evil = tmp_path / "evil"
    git(tmp_path, "clone", "-q", "-b", "experiments", str(tmp_path / "shared.git"), str(evil))
    (evil / "emit.py").write_text("print('pwned')\n")
    (evil / "runs" / rid[-4:-2] / rid / "meta.json").write_text('{"tags": ["x"]}\n')
    git(evil, "add", "-A")
    git(evil, "commit", "-q", "-m", f"meta {rid} (r): tag\n\nLedger-Meta: {rid}\n")
    git(evil, "push", "-q", "origin", "experiments")
    proc = ledger(repo, "pull")
    assert proc.returncode == 5 and "changes more than" in proc.stderr, proc.stderr


def test_diff_page_says_identical_where_a_and_b_coincide_on_every_common_step() -> None:
    """The six question charts and the other metrics' charts both label B's line "identical to A"
    where the two series are equal on every step both logged (B may have fewer: a partial diff)."""
    import re

    from ledger.compare.diffcore import build_report
    from ledger.metrics.table import MetricsTable, StepRow
    from ledger.pages.html import DiffPageInput, diff_page

    def table(steps: int, lr: float) -> MetricsTable:
        rows = {s: StepRow(s, None, None, {"perf/rollout_time": 2.0 + s, "train/loss": lr * s, "perf/x": 1.0 * s}) for s in range(steps)}
        return MetricsTable(rows=rows)

    ma, mb = {"id": "ra", "name": "a", "settings": {"lr": 1}}, {"id": "rb", "name": "b", "settings": {"lr": 2}}
    ta, tb = table(6, 1.0), table(4, 2.0)  # B stopped after 4 steps
    html = diff_page(DiffPageInput(build_report(ma, mb, ta, tb), "", ma, mb, ta, tb))
    labels = re.findall(r'<polyline data-series="([^"]*)"', html)
    assert "B b (identical to A a)" in labels  # rollout time: the same on steps 0-3 (was: "B b")
    assert labels.count("B b (identical to A a)") == 1 and "B b" in labels  # the loss differs: not identical
    assert "b (identical to a)" in labels  # perf/x, in the other metrics' group, on the common steps


SLOW_JOB = """
import argparse, os, time
ap = argparse.ArgumentParser()
ap.add_argument("--lr", type=float, default=1.0)
ap.add_argument("--wait-for", default=None)
a = ap.parse_args()
for step in range(6):
    if step == 3 and a.wait_for:
        while not os.path.exists(a.wait_for):  # the test lets it go on once it has diffed
            time.sleep(0.05)
    ts = f"[2026-11-29 10:00:{step:02d}.000 main] train.py:2 -"
    print(f"{ts} step {step}: {{'train/loss': {a.lr * (6 - step)}, 'train/grad_norm': 0.5}}", flush=True)
    print(f"{ts} perf {step}: {{'perf/rollout_time': {10 + step * a.lr}, 'perf/train_time': 3.0}}", flush=True)
"""


def test_diff_partial_compares_the_steps_a_running_run_has_logged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ledger diff A B` of a running B says it is running (exit 4) and names --partial; with
    --partial it compares B's steps so far (parsed from its staged output) with A on the common
    steps, under a banner saying so, in text, JSON and the page's title."""
    import time

    # a variable of ledger's own environment is an env.* setting of A's record, unknown for the
    # running B (was: refused, "env.RAY_CLIENT_MODE: '0' -> <absent>", when a test had imported ray)
    monkeypatch.setenv("RAY_CLIENT_MODE", "0")

    repo = make_repo(tmp_path / "proj", {"README.md": "x\n", "job.py": SLOW_JOB})
    base = ["run", "--no-debug-data", "--no-heat-guard"]
    go = tmp_path / "go"  # both runs wait for it at step 3 (one setting apart: lr); A finds it there
    go.touch()
    assert ledger(repo, *base, "--name", "a", "--", sys.executable, "job.py", "--lr", "1", "--wait-for", str(go)).returncode == 0
    go.unlink()
    proc = subprocess.Popen(
        [*LEDGER, *base, "--name", "b", "--", sys.executable, "job.py", "--lr", "2", "--wait-for", str(go)],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        staging = repo / ".ledger" / "staging"
        for _ in range(1200):  # until the staged output holds three steps (a hang ends at the test timeout)
            raws = list(staging.glob("*/output.raw")) if staging.is_dir() else []
            if raws and raws[0].read_text().count(" perf ") == 3:
                break
            time.sleep(0.1)
        plain = ledger(repo, "diff", "a", "b")
        assert plain.returncode == 4 and "is still running" in plain.stderr and "--partial compares the steps so far" in plain.stderr
        page = tmp_path / "partial.html"
        text = ledger(repo, "diff", "a", "b", "--partial", "--html", str(page))
        assert text.returncode == 0, text.stdout + text.stderr
        assert text.stdout.startswith("PARTIAL comparison: B (") and "still running, 3 step(s) logged so far" in text.stdout
        assert "lr: 1 -> 2" in text.stdout, text.stdout  # its settings, read from its command so far
        assert "incomplete" not in text.stdout  # its python command was seen (the wrapper's record)
        data = json.loads(ledger(repo, "diff", "a", "b", "--partial", "--json").stdout)
        assert data["partial"] is True and len(data["running"]) == 1 and [c["name"] for c in data["changed"]] == ["lr"]
        timing = {t["metric"]: t for t in data["timing"]}
        assert timing["perf/rollout_time"]["common_steps"] == 3  # B's three steps so far, not A's six
        html = page.read_text()
        assert "<title>ledger diff: PARTIAL (still running): lr:" in html and 'data-kind="partial"' in html
        assert "B b (identical to A a)" in html  # perf/train_time is 3.0 in both
    finally:
        go.touch()
        _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert ledger(repo, "diff", "a", "b").returncode == 0  # recorded now: a whole diff


def test_diff_page_answer_table_is_in_the_first_screen_without_horizontal_scroll(runs: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """Chromium's own layout, at 1280 x 800: the answer table (header and every row) is above the
    fold, nothing makes the page scroll sideways, and every chart draws all its points."""
    from browser import CHROMIUM, layout

    if CHROMIUM is None:
        pytest.skip("no chromium on PATH (`make system-deps` installs it as root)")
    repo, _ids = runs
    out = tmp_path / "diff.html"
    assert ledger(repo, "diff", "a", "b", "--html", str(out)).returncode == 0
    seen = layout(out, tmp_path)
    assert "answer" in seen["tables"], seen  # (before issue 26 the page had no answer table: its text report sat below the charts)
    answer = seen["tables"]["answer"]
    assert answer["rows"] >= 3 and answer["bottom"] <= 800, answer  # header + perf/step_time + train/loss
    assert answer["right"] <= 1280 and seen["scrollWidth"] <= 1280, seen
    assert seen["charts"] and all(c["drawn"] == c["expected"] > 0 for c in seen["charts"]), seen["charts"]
    verdicts = seen["tables"]["verdicts"]  # beyond / within noise per metric: before every chart
    assert verdicts["top"] >= answer["bottom"] and verdicts["bottom"] <= 800, verdicts


DEGENERATE_TRAINER = (
    "import argparse\n"
    "ap = argparse.ArgumentParser(); ap.add_argument('--rollout-batch-size', type=int); ap.add_argument('--lr'); a = ap.parse_args()\n"
    "for r in range(4):\n"
    "    print(f\"[2026-12-02 03:00:0{r}.000 RolloutManager] rollout.py:1 - perf {r}: {{'rollout/zero_std/count_0.5': "
    "{a.rollout_batch_size}, 'rollout/zero_std/all_zero_percentage': 0.0, 'rollout/zero_std/all_one_percentage': 0.0, "
    "'perf/rollout_time': {1.0 + r / 10 + float(a.lr)}}}\")\n"
    "    print(f\"[2026-12-02 03:00:0{r}.500 main] train.py:1 - step {r}: {{'train/loss': {2.0 - r / 10 + float(a.lr)}}}\")\n"
)


def test_a_degenerate_diff_page_leads_with_the_banner_and_the_verdicts(tmp_path: Path) -> None:
    """Every group got the same reward: the DEGENERATE banner, the answer and the verdicts are all
    on the first screen (1280 x 800) in Chromium, above the charts."""
    from browser import CHROMIUM, layout

    if CHROMIUM is None:
        pytest.skip("no chromium on PATH (`make system-deps` installs it as root)")
    repo = make_repo(tmp_path / "proj", {"train.py": DEGENERATE_TRAINER})
    for name, lr in (("deg-a", "0.0"), ("deg-b", "0.5")):
        argv = [
            "--no-debug-data",
            "--no-heat-guard",
            "--name",
            name,
            "--",
            sys.executable,
            "train.py",
            "--rollout-batch-size",
            "8",
            "--lr",
            lr,
        ]
        r = ledger(repo, "run", *argv)
        assert r.returncode == 0, r.stderr
    out = tmp_path / "diff.html"
    r = ledger(repo, "diff", "deg-a", "deg-b", "--html", str(out))
    assert r.returncode == 0, r.stderr
    seen = layout(out, tmp_path)
    banner, answer, verdicts = seen["banners"].get("degenerate"), seen["tables"]["answer"], seen["tables"]["verdicts"]
    assert banner is not None and banner["bottom"] <= answer["top"], seen
    assert answer["bottom"] <= verdicts["top"] and verdicts["bottom"] <= 800, seen
    first_chart = out.read_text().index('<div class="charts">')
    assert out.read_text().index("DEGENERATE") < first_chart


def test_diff_partial_says_when_the_running_runs_settings_are_incomplete(tmp_path: Path) -> None:
    """A job whose training command has not shown yet (a shell launcher, no python started):
    its settings are only what the staged manifest knows; one line says so and --partial compares anyway."""
    import time

    script = (
        "for s in 0 1; do echo \"[2026-11-29 10:00:0$s.000 main] train.py:2 - perf $s: {'perf/rollout_time': 1$s}\"; done\n"
        'while [ ! -e "$1" ]; do sleep 0.05; done\n'
    )
    repo = make_repo(tmp_path / "proj", {"README.md": "x\n", "launch.sh": script})
    go = tmp_path / "go"
    go.touch()
    assert ledger(repo, "run", "--name", "a", "--no-debug-data", "--no-heat-guard", "--", "bash", "launch.sh", str(go)).returncode == 0
    go.unlink()
    proc = subprocess.Popen(
        [*LEDGER, "run", "--name", "b", "--no-debug-data", "--no-heat-guard", "--", "bash", "launch.sh", str(go)],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        staging = repo / ".ledger" / "staging"
        for _ in range(1200):  # until the staged output holds both steps
            raws = list(staging.glob("*/output.raw")) if staging.is_dir() else []
            if raws and raws[0].read_text().count(" perf ") == 2:
                break
            time.sleep(0.1)
        text = ledger(repo, "diff", "a", "b", "--partial")
        assert text.returncode == 0, text.stderr
        assert "settings of B are incomplete (its training command has not shown yet)" in text.stdout, text.stdout
        data = json.loads(ledger(repo, "diff", "a", "b", "--partial", "--json").stdout)
        assert data["settings_incomplete"] == ["B"] and {t["metric"]: t["common_steps"] for t in data["timing"]}["perf/rollout_time"] == 2
    finally:
        go.touch()
        proc.communicate(timeout=120)
