"""Issue 25 end to end: replicas recorded through `ledger run`, replays with `--seeds`, repeats, a
degenerate run, and the noise section of `ledger diff` (text, JSON, HTML).

The trainer is a small script written here (train.py, so ledger reads its settings as Miles'): its
loss curve has a known effect of `--lr` (0.4 lowers the loss by 2.0) and seeded noise (a run offset
of SD 0.05 plus step noise), its train time has none; at lr 0.4 every GRPO group gets the same
reward (Miles' `zero_std/all_one_percentage` = 1.0). It saves and loads rollout files as Miles'
debug flags do, and a replay's training noise depends on `--seed`, as a real trainer's does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import git, ledger, make_repo

TRAIN = r"""
import argparse, json, math, os, random
ap = argparse.ArgumentParser()
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--lr", type=float, default=0.1)
ap.add_argument("--num-rollout", type=int, default=5)
ap.add_argument("--save-debug-rollout-data")
ap.add_argument("--load-debug-rollout-data")
ap.add_argument("--save-debug-event-data")
ap.add_argument("--debug-train-only", action="store_true")
a = ap.parse_args()
rng = random.Random(a.seed * 7919 + (1 if a.load_debug_rollout_data else 0))
offset = rng.gauss(0, 0.05)  # this seed's run starts a little better or worse, and stays so
collapsed = a.lr >= 0.4  # too high a learning rate: every group answers alike
def line(process, text):
    print(f"[2026-12-02 03:00:00.000 {process}] train.py:1 - {text}", flush=True)
if a.save_debug_event_data:
    os.makedirs(a.save_debug_event_data, exist_ok=True)
    open(os.path.join(a.save_debug_event_data, "main.jsonl"), "w").write('{"type": "start"}\n')
for r in range(a.num_rollout):
    if a.load_debug_rollout_data:
        samples = json.load(open(a.load_debug_rollout_data.format(rollout_id=r)))["samples"]
    else:
        samples = [{"group": g, "reward": 1.0 if collapsed else float(rng.random() < 0.5)} for g in range(8) for _ in range(4)]
        if a.save_debug_rollout_data:
            path = a.save_debug_rollout_data.format(rollout_id=r)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            json.dump({"rollout_id": r, "samples": samples}, open(path, "w"))
        ones = sum(all(s["reward"] == 1.0 for s in samples if s["group"] == g) for g in range(8)) / 8
        zeros = sum(all(s["reward"] == 0.0 for s in samples if s["group"] == g) for g in range(8)) / 8
        line("RolloutManager", f"perf {r}: {{'perf/rollout_time': {1.0 + rng.gauss(0, 0.05)}, "
             f"'rollout/zero_std/all_one_percentage': {ones}, 'rollout/zero_std/all_zero_percentage': {zeros}, "
             f"'rollout/truncated_ratio': 0.0}}")
    for k in range(2):
        step = 2 * r + k
        loss = 2 * math.exp(-step / 4) - (a.lr - 0.1) / 0.3 * 2.0 + offset + rng.gauss(0, 0.02)
        line("main", f"step {step}: {{'train/loss': {loss}}}")
    line("main", f"perf {r}: {{'perf/train_time': {1.0 + rng.gauss(0, 0.05)}}}")
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """a: lr 0.1, seeds 1 (with rollout data) and 2; b: lr 0.4, seeds 1, 2; rep: a repeat of a's seed 2;
    replays of a~1 on rollouts 1..3 with --seeds 1,2 (r0) and with --set lr=0.4 (r1)."""
    home = tmp_path_factory.mktemp("home-noise")
    (home / ".gitconfig").write_text("[user]\n\tname = T\n\temail = t@e.com\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        mp.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
        mp.setenv("PATH", f"{Path(sys.executable).parent}:{__import__('os').environ['PATH']}")
        repo = make_repo(tmp_path_factory.mktemp("noise") / "proj", {"train.py": TRAIN})
        assert ledger(repo, "init").returncode == 0
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "trainer")
        plain = ["--no-debug-data", "--"]
        for args in (
            ["--name", "a", "--", "python3", "train.py", "--lr", "0.1", "--seed", "1"],
            ["--name", "a", *plain, "python3", "train.py", "--lr", "0.1", "--seed", "2"],
            ["--name", "b", *plain, "python3", "train.py", "--lr", "0.4", "--seed", "1"],
            ["--name", "b", *plain, "python3", "train.py", "--lr", "0.4", "--seed", "2"],
            ["--name", "rep", *plain, "python3", "train.py", "--lr", "0.1", "--seed", "2"],
        ):
            r = ledger(repo, "run", *args)
            assert r.returncode == 0, r.stderr
        for extra in ([], ["--set", "lr=0.4"]):
            name = "r1" if extra else "r0"
            r = ledger(repo, "replay", "a~1", "--steps", "1:4", "--seeds", "1,2", "--name", name, *extra)
            assert r.returncode == 0, r.stderr
            assert f"recorded 2 replicas: {name}-s1, {name}-s2" in r.stderr
        return repo


def _diff(repo: Path, *args: str) -> tuple[int, dict]:
    r = ledger(repo, "diff", *args, "--json")
    return r.returncode, json.loads(r.stdout)


def _ids(repo: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for run in json.loads(ledger(repo, "list", "--json", "--reverse").stdout):
        out.setdefault(run["name"], []).append(run["id"])
    return out


def test_a_known_effect_is_beyond_noise_and_no_effect_within_it(runs: Path) -> None:
    r = ledger(runs, "diff", "a", "b", "--no-git-diff")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[3] == "lr: 0.1 -> 0.4"
    # the degenerate B runs are named in the diff's first lines
    assert lines[4].startswith("DEGENERATE: B ") and "100% of groups had zero reward spread" in lines[4]
    heading = next(x for x in lines if x.startswith("noise ("))
    assert "3 runs for A (2 replicas), 2 runs for B (1 replica)" in heading and "Welch" in heading
    section = lines[lines.index(heading) :]
    loss = next(x for x in section if x.strip().startswith("train/loss "))
    train_time = next(x for x in section if x.strip().startswith("perf/train_time "))
    assert loss.rstrip().endswith("beyond noise") and train_time.rstrip().endswith("within noise")

    code, data = _diff(runs, "a", "b")
    ids = _ids(runs)
    noise = data["noise"]
    assert code == 0 and noise["method"] == "welch"
    assert noise["replicas_a"][0] == data["a"] and sorted(noise["replicas_a"]) == sorted([*ids["a"], *ids["rep"]])
    assert noise["replicas_b"][0] == data["b"] and sorted(noise["replicas_b"]) == sorted(ids["b"])
    judged = {m["metric"]: m for m in noise["metrics"]}
    assert set(judged) == {"train/loss", "perf/train_time", "perf/rollout_time"}
    lj = judged["train/loss"]
    assert lj["verdict"] == "beyond noise" and lj["replicas"] == [3, 2] and lj["steps"] == 10
    assert lj["diff"] == pytest.approx(-2.0, abs=0.2) and lj["diff_ci"][1] < 0
    assert 0 < lj["noise_floor"] < 0.2  # the seeds' run offsets have SD 0.05
    assert judged["perf/train_time"]["verdict"] == "within noise"
    assert judged["perf/train_time"]["diff_ci"][0] < 0 < judged["perf/train_time"]["diff_ci"][1]
    flagged = {(f["run"], f["flag"]) for f in data["flags"]}
    assert flagged == {(rid, "zero-std") for rid in ids["b"]}
    assert all(f["value"] == 1.0 and f["steps"] == [0, 1, 2, 3, 4] for f in data["flags"])


def test_the_diff_page_shows_each_sides_band_and_the_verdicts(runs: Path, tmp_path: Path) -> None:
    page = tmp_path / "diff.html"
    assert ledger(runs, "diff", "a", "b", "--no-git-diff", "--html", str(page)).returncode == 0
    html = page.read_text()
    assert '<tr data-metric="train/loss" data-verdict="beyond noise">' in html
    assert '<tr data-metric="perf/train_time" data-verdict="within noise">' in html
    band = html.split('<div class="band" data-metric="train/loss">')[1].split("</div>")[0]
    assert 'data-series="A mean of 3 runs" data-n="10"' in band
    assert 'data-series="A band: lowest replica"' in band and 'data-series="B band: highest replica"' in band
    assert "DEGENERATE" in html
    report = tmp_path / "runs.html"  # and every report: the runs table names them in their state
    assert ledger(runs, "report", "--html", str(report)).returncode == 0
    rows = {row.split('"')[0]: row for row in report.read_text().split('<tr data-run="')[1:]}
    ids = _ids(runs)
    assert all("DEGENERATE: 100% of groups had zero reward spread" in rows[rid] for rid in ids["b"])
    assert not any("DEGENERATE" in rows[rid] for rid in ids["a"])


def test_two_runs_with_identical_settings_compare_as_a_repeat(runs: Path) -> None:
    r = ledger(runs, "diff", "a", "rep", "--no-git-diff")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[3] == "no setting differs: this compares two repeats"
    assert "learning on common steps" in r.stdout and "timing on common steps" in r.stdout
    code, data = _diff(runs, "a", "rep")
    assert code == 0 and data["repeat"] is True and data["refused"] is False
    assert data["noise"]["method"] == "repeat" and {m["verdict"] for m in data["noise"]["metrics"]} == {"repeat"}
    # the two runs share their seed: identical numbers, no noise at all
    loss = next(m for m in data["noise"]["metrics"] if m["metric"] == "train/loss")
    assert loss["diff"] == 0 and loss["noise_floor"] == 0
    # runs one seed apart are replicas too: their difference is the noise
    code, data = _diff(runs, "a~1", "a")
    assert code == 0 and data["repeat"] is True and data["changed"] == [{"name": "seed", "a": 1, "b": 2}]
    loss = next(m for m in data["noise"]["metrics"] if m["metric"] == "train/loss")
    assert loss["verdict"] == "repeat" and loss["noise_floor"] > 0


def test_replays_with_seeds_are_replicas_and_show_the_training_side_noise(runs: Path) -> None:
    ids = _ids(runs)
    assert len(ids["r0-s1"]) == len(ids["r0-s2"]) == len(ids["r1-s1"]) == len(ids["r1-s2"]) == 1
    shown = json.loads(ledger(runs, "show", "r0-s2", "--json").stdout)
    assert shown["settings"]["seed"] == 2 and shown["replay"]["mapping"] == {"0": 1, "1": 2, "2": 3}
    code, data = _diff(runs, "r0-s1", "r1-s1")
    assert code == 0 and data["changed"] == [{"name": "lr", "a": 0.1, "b": 0.4}]
    noise = data["noise"]
    assert noise["replicas_a"] == [*ids["r0-s1"], *ids["r0-s2"]]
    assert noise["replicas_b"] == [*ids["r1-s1"], *ids["r1-s2"]]
    loss = next(m for m in noise["metrics"] if m["metric"] == "train/loss")
    assert loss["verdict"] == "beyond noise" and loss["steps"] == 6 and loss["noise_floor"] > 0
    assert data["flags"] == []  # replays log no rollout metrics (as Miles' replays)


def test_seeds_dry_run_and_usage_errors(runs: Path) -> None:
    r = ledger(runs, "replay", "a~1", "--steps", "1:3", "--seeds", "5,6", "--dry-run")
    assert r.returncode == 0, r.stderr
    commands = r.stdout.strip().splitlines()
    assert len(commands) == 2 and "--seed 5" in commands[0] and "--seed 6" in commands[1]
    assert "recorded" not in r.stderr
    r = ledger(runs, "replay", "a~1", "--seeds", "1,2", "--set", "lr=0.2")
    assert r.returncode == 2 and "--seeds with --set needs --name" in r.stderr
    r = ledger(runs, "replay", "a~1", "--seeds", "1,x", "--name", "z")
    assert r.returncode == 2 and "--seeds '1,x' is not a comma-separated list" in r.stderr


def test_seeds_ask_one_question_for_all_replays(runs: Path) -> None:
    """On a terminal, `--seeds` asks once, saying what the yes covers; a no replays none of them."""
    from ledger.replay.replay import ReplayOptions
    from ledger.replay.seeds import replay_seeds

    asked: list[str] = []
    said: list[str] = []

    def no(question: str, default: bool) -> bool:
        asked.append(question)
        return False

    opts = ReplayOptions(run="a~1", steps="1:3", name="asked")
    assert replay_seeds(runs, opts, [5, 6], said.append, None, lambda text: None, confirm=no) == 0
    assert asked == ["run this command? (for seeds 5, 6: 2 replays named asked-s5 ...)"]
    assert "ledger: not replayed" in said and not any("recorded" in line for line in said)
    assert "asked-s5" not in ledger(runs, "list").stdout
