"""A replay's fidelity verdict: on the original's step numbers, step counters as axes, and a replay
that cannot match (started mid-run without the original's weights) is `not comparable`, never
`diverged`."""

from __future__ import annotations

from ledger.compare.fidelity import compare, describe
from ledger.metrics.table import MetricsTable, StepRow


def _table(rows: dict[int, dict[str, float]], train: dict[int, dict[str, float]] | None = None) -> MetricsTable:
    t = MetricsTable()
    t.rows = {s: StepRow(s, None, None, m) for s, m in rows.items()}
    t.train_steps = train or {}
    return t


SOURCE = _table(
    {s: {"rollout/step": float(s), "rollout/reward": 0.1 * s, "perf/rollout_time": 5.0 + s} for s in range(6)},
    {s: {"train/loss": 1.0 / (s + 1), "train/step": float(s)} for s in range(6)},
)


def test_a_step_counter_is_an_axis_not_a_difference() -> None:
    """Miles' replay from rollout 1 logs rollout/step from 0: the same training is bitwise."""
    replay = _table(
        {s: {"rollout/step": float(s), "rollout/reward": 0.1 * (s + 1)} for s in range(3)},
        {s: {"train/loss": 1.0 / (s + 2), "train/step": float(s)} for s in range(3)},
    )
    out = compare(SOURCE, replay, {0: 1, 1: 2, 2: 3})
    assert out["verdict"] == "bitwise", out
    assert out["compared"] == 6  # reward on 3 rollouts, loss on 3 train steps: no step counter, no timing


def test_train_steps_are_compared_on_the_originals_numbers() -> None:
    """A stand-in replay from step 2 numbers its train steps from 0; they are mapped back."""
    replay = _table({s: {"rollout/reward": 0.1 * (s + 2)} for s in range(3)}, {s: {"train/loss": 1.0 / (s + 3)} for s in range(3)})
    out = compare(SOURCE, replay, {0: 2, 1: 3, 2: 4})
    assert out["verdict"] == "bitwise" and out["steps"] == 6, out


def test_a_mid_run_replay_that_differs_is_not_comparable_with_its_reason() -> None:
    replay = _table({s: {"rollout/reward": 0.1 * (s + 2)} for s in range(3)}, {s: {"train/loss": 9.0} for s in range(3)})
    out = compare(SOURCE, replay, {0: 2, 1: 3, 2: 4})
    assert out["verdict"] == "not comparable", out
    line = describe(out)
    assert line is not None and line.startswith("not comparable (replayed from rollout 2 without the original's weights")


def test_a_replay_from_rollout_0_that_differs_is_diverged() -> None:
    replay = _table({s: {"rollout/reward": 0.1 * s} for s in range(6)}, {s: {"train/loss": 1.0 / (s + 1) + (s == 4)} for s in range(6)})
    out = compare(SOURCE, replay, None)
    assert out["verdict"] == "diverged" and out["first_difference"]["step"] == 4, out
    assert describe(out) == "diverged at train step 4 (train/loss: 0.2 -> 1.2)"
