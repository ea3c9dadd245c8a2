"""`ledger replay` safety: a dry run writes nothing at all; a `--set` of a setting the run never
had is refused (a typo, most likely) unless `--force`; `--yes` skips the question (asked only on a
terminal, so never here). Real parts: a temp repo, a recorded toy run, the CLI as a subprocess."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

import pytest
from conftest import LEDGER, ledger, module_home, toy_repo, toy_train

TRAIN = toy_train(rollout_batch_size=4, n_samples_per_prompt=2, seed=3, num_rollout=3, lr=0.2)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with module_home(tmp_path_factory, "home-replay"):
        repo = toy_repo(tmp_path_factory.mktemp("replay") / "proj")
        r = ledger(repo, "run", "--name", "base", "--", *TRAIN)
        assert r.returncode == 0, r.stderr
        return repo


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            st = path.lstat()
            out[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def test_dry_run_writes_nothing_at_all(recorded: Path) -> None:
    before = _snapshot(recorded)
    for args in (["--dry-run"], ["--steps", "1:3", "--dry-run"], ["--set", "lr=0.1", "--dry-run"]):
        r = ledger(recorded, "replay", "base", *args)
        assert r.returncode == 0, r.stderr
        assert "--debug-train-only" in r.stdout
    after = _snapshot(recorded)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert changed == []


def test_set_of_a_setting_the_run_never_had_needs_force(recorded: Path) -> None:
    r = ledger(recorded, "replay", "base", "--set", "num-rolout=5", "--dry-run")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "never had the setting 'num-rolout'" in r.stderr and "did you mean num-rollout?" in r.stderr
    assert "--force" in r.stderr
    r = ledger(recorded, "replay", "base", "--set", "lr-warmup=5", "--dry-run", "--force")
    assert r.returncode == 0, r.stderr
    assert "warning: --set lr-warmup adds a setting" in r.stderr and "--lr-warmup 5" in r.stdout


def test_yes_replays_without_asking(recorded: Path) -> None:
    r = ledger(recorded, "replay", "base", "--yes", "--name", "again", "--set", "lr=0.1")
    assert r.returncode == 0, r.stderr
    assert "run this command?" not in r.stderr and "recorded run" in r.stderr


def test_a_terminal_is_asked_first_and_no_replays_nothing(recorded: Path) -> None:
    before = json.loads(ledger(recorded, "list", "--json").stdout)
    master, slave = pty.openpty()  # stdin is a terminal: the question is asked there
    proc = subprocess.Popen(
        [*LEDGER, "replay", "base", "--name", "asked"], cwd=recorded, stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    os.close(slave)
    os.write(master, b"n\n")
    out, err = proc.communicate(timeout=60)
    os.close(master)
    assert proc.returncode == 0, err
    assert "ledger: replaying" in err and "run this command? [Y/n]" in err and "ledger: not replayed" in err
    assert json.loads(ledger(recorded, "list", "--json").stdout) == before
