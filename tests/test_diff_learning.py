"""Issue 12 acceptance: two replays of the toy trainer one `--set` apart, compared on learning.

Real parts only: a temp git repo, `ledger run` of examples/toy_grpo, two `ledger replay`s on the
recorded samples (train mode), `ledger diff` text and JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ledger, module_home, toy_repo, toy_train

TRAIN = toy_train(rollout_batch_size=8, n_samples_per_prompt=4, seed=3, num_rollout=6, global_batch_size=16, lr=0.2)


@pytest.fixture(scope="module")
def replays(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with module_home(tmp_path_factory, "home-learning"):
        repo = toy_repo(tmp_path_factory.mktemp("learning") / "proj")
        for args in (
            ["run", "--name", "base", "--", *TRAIN],
            ["replay", "base", "--name", "ra"],
            ["replay", "base", "--name", "rb", "--set", "lr=0.05"],
        ):
            r = ledger(repo, *args)
            assert r.returncode == 0, r.stderr
        return repo


def test_learning_section_shows_per_step_loss_difference_and_where_it_begins(replays: Path) -> None:
    r = ledger(replays, "diff", "ra", "rb", "--no-git-diff")
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert "lr: 0.2 -> 0.05" in text
    assert text.index("timing on common steps") < text.index("learning on common steps")
    loss = next(line for line in text.splitlines() if line.strip().startswith("train/loss "))
    # the first train step sees the same weights: identical; lr acts from the second on
    assert "train step 1; bitwise identical before" in loss
    assert "train/loss B-A per train step from 1: 1: " in text

    data = json.loads(ledger(replays, "diff", "ra", "rb", "--json").stdout)
    assert data["same_samples"] is True
    learned = {x["metric"]: x for x in data["learning"]}
    assert set(learned) >= {"train/loss", "train/grad_norm", "train/entropy", "rollout/raw_reward"}
    loss_json = learned["train/loss"]
    assert loss_json["axis"] == "train step" and loss_json["common_steps"] == 12
    assert loss_json["first_divergence"] == 1 and loss_json["identical_before"] is True
    assert loss_json["first_bitwise_difference"] == 1
    first = loss_json["first_diffs"][0]
    assert first["step"] == 1 and first["diff"] == pytest.approx(first["b"] - first["a"]) and first["diff"] != 0
    # the samples were replayed: rewards are the recorded ones in both runs
    assert learned["rollout/raw_reward"]["first_divergence"] is None
    assert "timing" in data and all(t["metric"].startswith("perf/") for t in data["timing"])


def test_steps_on_a_learning_metric_gives_b_minus_a(replays: Path) -> None:
    r = ledger(replays, "diff", "ra", "rb", "--no-git-diff", "--steps", "train/loss")
    assert r.returncode == 0, r.stderr
    table = r.stdout.split("per-step train/loss:")[1].splitlines()
    assert table[1].split() == ["step", "A", "B", "B-A"]
    assert len(table) == 2 + 12  # heading, header, 12 train steps
    assert table[2].split()[3] == "+0"


def test_metric_matching_nothing_says_so_and_lists_what_was_logged(replays: Path) -> None:
    r = ledger(replays, "diff", "ra", "rb", "--no-git-diff", "--metric", "train/no_such*")
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if "matched nothing" in x)
    assert "'train/no_such*'" in line and "train/loss" in line and "perf/step_time" in line
    extra = ledger(replays, "diff", "ra", "rb", "--json", "--metric", "train/lr")
    names = [x["metric"] for x in json.loads(extra.stdout)["learning"]]
    assert "train/lr" in names and "train/lr" not in [t["metric"] for t in json.loads(extra.stdout)["timing"]]
