"""`make demo`'s script, on a fresh clone of this repository (with this venv's `ledger`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import REPO_ROOT, git, ledger


@pytest.mark.slow
def test_demo_script_records_diffs_and_replays(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(REPO_ROOT), str(clone))
    main_before = git(clone, "rev-parse", "HEAD")
    r = subprocess.run(["bash", "examples/demo.sh"], cwd=clone, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "refused: 2 settings differ" in r.stdout and "(exit 3)" in r.stdout
    assert "offload-rollout: <absent> -> true" in r.stdout and "lr: 0.05 -> 0.02" in r.stdout
    runs = json.loads(ledger(clone, "list", "--json", "--reverse").stdout)
    assert [x["name"] for x in runs] == ["demo-base", "demo-offload", "demo-two", "demo-replay-a", "demo-replay-b"]
    assert runs[3]["replay_of"] == runs[0]["id"]
    # a no---set replay of every rollout of the deterministic toy run trains exactly as it did
    r = ledger(clone, "replay", "demo-base", "--yes", "--name", "demo-replay-all")
    assert r.returncode == 0, r.stderr
    fidelity = json.loads(ledger(clone, "show", "demo-replay-all", "--json").stdout)["replay"]["fidelity"]
    assert fidelity["verdict"] == "bitwise" and fidelity["steps"] >= 3, fidelity
    steps_replay = json.loads(ledger(clone, "show", "demo-replay-a", "--json").stdout)["replay"]["fidelity"]
    assert "without the original's weights" in steps_replay.get("note", ""), steps_replay
    assert steps_replay["verdict"] == "not comparable" and "without the original's weights" in steps_replay["reason"], steps_replay
    assert git(clone, "rev-parse", "HEAD") == main_before  # main is never touched
    assert git(clone, "status", "--porcelain") == ""
