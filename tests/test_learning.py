"""`compare_learning` on hand-made tables (shapes as `metrics.jsonl` reads back: rows by rollout
id, `step N:` metrics by train step)."""

from __future__ import annotations

from ledger.compare.diffcore import build_report
from ledger.compare.learning import compare_learning, learning_json, step_diffs, unmatched_patterns
from ledger.compare.render import render_text
from ledger.metrics.table import MetricsTable, StepRow


def table(loss: list[float], reward: list[float] | None = None, extra: str | None = None) -> MetricsTable:
    t = MetricsTable()
    for s, value in enumerate(loss):
        t.train_steps[s] = {"train/loss": value, "perf/train_time": 1.0, **({extra: 1.0} if extra else {})}
    for s, value in enumerate(reward or []):
        t.rows[s] = StepRow(s, None, None, {"rollout/raw_reward": value, "perf/rollout_time": 2.0})
    return t


def test_divergence_after_identical_steps() -> None:
    a = table([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
    b = table([1.0, 2.0, 3.5, 4.5, 5.5, 6.5, 7.5])
    (loss,) = compare_learning(a, b)
    assert loss.metric == "train/loss" and loss.axis == "train step" and loss.common_steps == 7
    assert loss.first_divergence == 2 and loss.identical_before
    assert loss.median_diff == 0.5 and loss.diff_ci == (0.0, 0.5)
    assert [d.step for d in loss.first_diffs] == [2, 3, 4, 5, 6] and loss.first_diffs[0].diff == 0.5


def test_float_noise_is_not_a_divergence_but_is_not_bitwise_either() -> None:
    a = table([1.0, 2.0, 3.0])
    b = table([1.0 + 1e-12, 2.0, 3.0])
    (loss,) = compare_learning(a, b)
    assert loss.first_divergence is None and not loss.identical_before
    (same,) = compare_learning(a, table([1.0, 2.0, 3.0]))
    assert same.first_divergence is None and same.identical_before and same.diff_ci is None  # n < 6


def test_nondeterministic_replays_are_not_bitwise_identical_before_the_divergence() -> None:
    (loss,) = compare_learning(table([1.0, 2.0, 3.0]), table([1.0 + 1e-9, 2.0, 9.0]))
    assert loss.first_divergence == 2 and not loss.identical_before


def test_rollout_metrics_timing_left_out_and_extra_globs() -> None:
    a = table([1.0], [0.1, 0.2], extra="train/custom")
    b = table([1.0], [0.1, 0.3], extra="train/custom")
    names = [r.metric for r in compare_learning(a, b)]
    assert names == ["rollout/raw_reward", "train/loss"]  # no perf/*, no custom metric by default
    reward = compare_learning(a, b)[0]
    assert reward.axis == "rollout" and reward.first_divergence == 1
    assert [r.metric for r in compare_learning(a, b, ["train/cust*"])] == sorted([*names, "train/custom"])
    assert unmatched_patterns(["train/cust*", "nope*"], ["train/custom"]) == ["nope*"]
    diffs = step_diffs(a, b, "rollout/raw_reward")
    assert diffs is not None and [round(d.diff, 9) for d in diffs] == [0.0, 0.1]
    assert step_diffs(a, b, "perf/rollout_time") is None


def test_the_first_bitwise_difference_is_named_in_data_and_text() -> None:
    (noise,) = compare_learning(table([1.0, 2.0, 3.0]), table([1.0, 2.0 + 1e-12, 3.0]))
    assert noise.first_divergence is None and noise.first_bitwise_difference == 1
    (nondeterministic,) = compare_learning(table([1.0, 2.0, 3.0]), table([1.0 + 1e-9, 2.0, 9.0]))
    assert nondeterministic.first_divergence == 2 and nondeterministic.first_bitwise_difference == 0
    assert learning_json(nondeterministic)["first_bitwise_difference"] == 0
    (same,) = compare_learning(table([1.0, 2.0]), table([1.0, 2.0]))
    assert same.first_bitwise_difference is None
    ma = {"id": "a", "settings": {"lr": 1}, "replay_of": "base", "replay": {"mapping": None}}
    mb = {"id": "b", "settings": {"lr": 2}, "replay_of": "base", "replay": {"mapping": None}}
    text = render_text(build_report(ma, mb, table([1.0, 2.0, 3.0]), table([1.0 + 1e-9, 2.0, 9.0])))
    assert "train step 2; NOT bitwise identical from train step 0" in text  # was: "... before", no step
    text = render_text(build_report(ma, mb, table([1.0, 2.0, 3.0]), table([1.0, 2.0 + 1e-12, 3.0])))
    assert "never (within float noise from train step 1)" in text
