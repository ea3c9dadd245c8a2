"""`ledger diff` and `ledger log` on real recorded runs (toy trainer and hand-made jobs)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import git, ledger, make_repo, module_home, toy_repo, toy_train

TRAIN = toy_train(rollout_batch_size=8, n_samples_per_prompt=4, seed=7)

EMIT = """
import argparse, datetime, time
ap = argparse.ArgumentParser()
ap.add_argument("--range", default="0:6")
ap.add_argument("--scale", type=float, default=1.0)
ap.add_argument("--tag", default="x")
a = ap.parse_args()
lo, hi = map(int, a.range.split(":"))
t0 = datetime.datetime(2026, 11, 29, 10, 0, 0)
for step in range(lo, hi):
    ts = (t0 + datetime.timedelta(seconds=10 * step)).strftime("%Y-%m-%d %H:%M:%S.000")
    rt = a.scale * (10.0 - step)  # answers shorten: later steps are faster
    print(f"(RolloutManager pid=1) [{ts} RolloutManager] rollout.py:1 - perf {step}: "
          f"{{'perf/rollout_time': {rt}, 'rollout/response_len/mean': {100.0 * (10 - step)}}}")
    print(f"[{ts} main] train.py:2 - perf {step}: {{'perf/train_time': {a.scale}, 'perf/step_time': {rt + a.scale}}}")
"""


@pytest.fixture(scope="module")
def toy_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One repository with toy runs: base, lr changed, two settings changed, a longer run."""
    with module_home(tmp_path_factory, "home-diff"):
        return _record_toy_runs(tmp_path_factory)


def _record_toy_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = toy_repo(tmp_path_factory.mktemp("diff") / "proj", {"README.md": "x\n", "emit.py": EMIT}, init=False)
    runs = [
        ["--name", "base", "--", *TRAIN, "--num-rollout", "4"],
        ["--name", "lr", "--", *TRAIN, "--num-rollout", "4", "--lr", "0.02"],
        ["--name", "two", "--", *TRAIN, "--num-rollout", "4", "--lr", "0.02", "--offload-rollout"],
        ["--name", "long", "--", *TRAIN, "--num-rollout", "8"],
        ["--name", "same", "--", *TRAIN, "--num-rollout", "4"],
        ["--name", "e1", "--no-debug-data", "--", sys.executable, "emit.py", "--range", "0:6"],
        ["--name", "e2", "--no-debug-data", "--", sys.executable, "emit.py", "--range", "2:9"],
        ["--name", "quiet", "--no-debug-data", "--", sys.executable, "emit.py", "--range", "0:0"],
    ]
    for args in runs:
        r = ledger(repo, "run", *args)
        assert r.returncode == 0, r.stderr
    return repo


def _json(repo: Path, *args: str) -> tuple[int, dict]:
    r = ledger(repo, "diff", *args, "--json")
    return r.returncode, json.loads(r.stdout)


def test_one_setting_compares(toy_runs: Path) -> None:
    r = ledger(toy_runs, "diff", "base", "lr")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[3].startswith("lr: <absent> -> 0.02")
    assert "manifest.yaml" in r.stdout  # the git diff of the two records
    code, data = _json(toy_runs, "base", "lr")
    assert code == 0 and data["refused"] is False and data["forced"] is False
    assert data["changed"] == [{"name": "lr", "a": "<absent>", "b": 0.02}]
    metrics = {t["metric"]: t for t in data["timing"]}
    assert metrics["perf/train_time"]["common_steps"] == 4
    for key in ("a", "b", "warnings", "timing"):
        assert key in data


def test_two_settings_refused_with_both_named(toy_runs: Path) -> None:
    r = ledger(toy_runs, "diff", "base", "two")
    assert r.returncode == 3
    assert "lr" in r.stdout and "offload-rollout" in r.stdout
    code, data = _json(toy_runs, "base", "two")
    assert code == 3 and data["refused"] is True and data["timing"] == []
    assert sorted(c["name"] for c in data["changed"]) == ["lr", "offload-rollout"]
    assert data["suggested_baseline"] is not None
    sugg = data["suggested_baseline"]
    names = json.loads(ledger(toy_runs, "list", "--json").stdout)
    by_id = {r["id"]: r["name"] for r in names}
    assert by_id[sugg] == "lr"  # "lr" differs from "two" only in offload-rollout


def test_zero_settings_compare_as_repeats_and_force(toy_runs: Path) -> None:
    code, data = _json(toy_runs, "base", "same")  # issue 25: the difference of two repeats is the noise
    assert code == 0 and data["changed"] == [] and data["repeat"] is True and data["timing"]
    r = ledger(toy_runs, "diff", "base", "two", "--force", "--no-git-diff")
    assert r.returncode == 0
    assert "FORCED" in r.stderr and "FORCED" in r.stdout.upper()
    code, data = _json(toy_runs, "base", "two", "--force")
    assert code == 0 and data["forced"] is True and data["timing"]


def test_more_steps_in_b_uses_only_common_steps(toy_runs: Path) -> None:
    code, data = _json(toy_runs, "base", "long")
    assert code == 0 and data["changed"][0]["name"] == "num-rollout"
    rt = {t["metric"]: t for t in data["timing"]}["perf/rollout_time"]
    assert rt["common_steps"] == 4 and rt["only_b"] == [4, 5, 6, 7] and rt["only_a"] == []


def test_partial_overlap_medians_differ_from_naive(toy_runs: Path) -> None:
    code, data = _json(toy_runs, "e1", "e2")
    assert code == 0, data
    rt = {t["metric"]: t for t in data["timing"]}["perf/rollout_time"]
    assert rt["common_steps"] == 4 and rt["only_a"] == [0, 1] and rt["only_b"] == [6, 7, 8]
    # common steps 2..5 -> times 8,7,6,5 in both runs: medians 6.5, ratio 1
    assert rt["median_a"] == pytest.approx(6.5) and rt["median_b"] == pytest.approx(6.5)
    assert rt["median_ratio"] == pytest.approx(1.0)
    naive_a = 7.5  # median of 10..5 over steps 0..5
    naive_b = 5.0  # median of 8..2 over steps 2..8
    assert naive_b / naive_a < rt["median_ratio"]  # the naive comparison would claim B is faster


def test_no_metrics_compares_settings_only(toy_runs: Path) -> None:
    code, data = _json(toy_runs, "e1", "quiet")
    assert code == 0
    assert data["timing"] == [] and "no per-step metrics" in data["timing_unavailable"]


def test_bad_names(toy_runs: Path) -> None:
    r = ledger(toy_runs, "diff", "base", "base")
    assert r.returncode == 2 and "same run" in r.stderr
    r = ledger(toy_runs, "diff", "base", "nope")
    assert r.returncode == 4 and "no run named 'nope'" in r.stderr
    r = ledger(toy_runs, "diff", "2026", "base")
    assert r.returncode == 4 and "ambiguous" in r.stderr


def test_log_shows_one_change_set_per_run(toy_runs: Path) -> None:
    r = ledger(toy_runs, "log", "--reverse")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert len(lines) == 8
    assert "(first run)" in lines[0]
    assert "lr: <absent> -> 0.02" in lines[1] and "comparable" in lines[1]
    assert ledger(toy_runs, "log").stdout.splitlines() == lines[::-1]  # newest first by default
    r = ledger(toy_runs, "list", "--changed", "--json", "--reverse")
    rows = json.loads(r.stdout)
    assert [c["name"] for c in rows[1]["changed"]] == ["lr"]
    newest_first = [x["name"] for x in json.loads(ledger(toy_runs, "list", "--json").stdout)]
    assert newest_first == [x["name"] for x in rows][::-1]


def test_newer_schema_is_refused_with_version(tmp_path: Path) -> None:
    from ledger import yamlio
    from ledger.manifest import new_manifest
    from ledger.storage.git import Repo
    from ledger.storage.store import commit_message, write_run
    from ledger.timefmt import utc_now

    repo_dir = make_repo(tmp_path / "r")
    assert ledger(repo_dir, "run", "--", "true").returncode == 0
    repo = Repo(repo_dir)
    m = new_manifest("20261129-000000-beef", utc_now())
    m["schema"] = 2
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "manifest.yaml").write_text(yamlio.dumps(m))
    code = repo.code_snapshot()
    write_run(repo, "experiments", code, m["id"], repo.tree_from_dir(run_dir), commit_message(m["id"], None, "exit 0", "1s", code.commit))
    r = ledger(repo_dir, "diff", "latest~1", "latest")
    assert r.returncode == 1 and "schema 2" in r.stderr
    r = ledger(repo_dir, "list")
    assert r.returncode == 0 and "skipped" in r.stderr and "schema 2" in r.stderr  # others still listed
    assert len(r.stdout.splitlines()) == 2


def test_paths_holding_the_run_id_are_not_settings(repo: Path) -> None:
    (repo / "train.py").write_text("print('ok')\n")
    (repo / "run.sh").write_text('set -x\npython3 train.py --out-dir "/tmp/out/$LEDGER_RUN_ID" --lr "$1"\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "launcher")
    for lr in ("1", "1", "2"):
        assert ledger(repo, "run", "--no-debug-data", "--", "bash", "run.sh", lr).returncode == 0
    r = ledger(repo, "diff", "latest~2", "latest~1", "--json")
    data = json.loads(r.stdout)  # only the run-id paths differ: two repeats (issue 25: compared, not refused)
    assert r.returncode == 0 and data["changed"] == [] and data["repeat"] is True
    r = ledger(repo, "diff", "latest~1", "latest", "--json")  # and a repeat of A is its replica
    assert len(json.loads(r.stdout)["noise"]["replicas_a"]) == 2
    r = ledger(repo, "diff", "latest~1", "latest", "--json")
    assert r.returncode == 0 and [c["name"] for c in json.loads(r.stdout)["changed"]] == ["lr"]
