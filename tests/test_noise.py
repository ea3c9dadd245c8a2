"""Issue 25, the pure parts: the t distribution, Welch's interval on replica means, its error rates
on simulated runs (fixed seeds, no timing), replicas, same-session notes, degenerate-run flags, and
the noise section's text and HTML."""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest
from noisesim import Noise, binomial_slack, rejection_rate, run_mean_sd, simulate_run

from ledger.compare.diffcore import build_report
from ledger.compare.flags import degenerate_flags, groups_of
from ledger.compare.noise import BEYOND, NO_REPLICAS, TRAIN_AXIS, WITHIN, RunSeries, judge, judge_metric
from ledger.compare.noisestats import permutation_p, replica_difference, t_cdf, t_quantile
from ledger.compare.render import render_text
from ledger.compare.replicas import find_replicas, replica_globs, session_notes
from ledger.metrics.table import MetricsTable, StepRow
from ledger.pages.noisehtml import noise_section

# ---------------------------------------------------------------------------- the t distribution


@pytest.mark.parametrize(
    ("df", "q"), [(1, 12.7062), (2, 4.3027), (3, 3.1824), (4, 2.7764), (5, 2.5706), (10, 2.2281), (30, 2.0423), (1000, 1.9623)]
)
def test_t_quantile_matches_published_tables(df: float, q: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(q, abs=1e-4)
    assert t_cdf(t_quantile(0.975, df), df) == pytest.approx(0.975, abs=1e-12)
    assert t_quantile(0.025, df) == pytest.approx(-q, abs=1e-4)


def test_t_quantile_of_fractional_df_lies_between_its_neighbours() -> None:
    assert t_quantile(0.975, 2) > t_quantile(0.975, 2.5) > t_quantile(0.975, 3)
    assert t_quantile(0.995, 1) == pytest.approx(63.6567, abs=1e-3)
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)


# ---------------------------------------------------------------------------- the interval


def test_welch_interval_worked_example() -> None:
    # docs/noise.md's worked example: loss means of 3 replicas a side
    a, b = [0.812, 0.845, 0.790], [0.741, 0.769, 0.752]
    r = replica_difference(a, b)
    assert r is not None and r.method == "welch"
    va, vb = statistics.variance(a), statistics.variance(b)
    se = math.sqrt(va / 3 + vb / 3)
    df = (va / 3 + vb / 3) ** 2 / ((va / 3) ** 2 / 2 + (vb / 3) ** 2 / 2)
    assert r.diff == pytest.approx(statistics.fmean(b) - statistics.fmean(a))
    assert r.df == pytest.approx(df)
    assert r.ci == pytest.approx((r.diff - t_quantile(0.975, df) * se, r.diff + t_quantile(0.975, df) * se))
    assert r.noise_floor == pytest.approx(math.sqrt((va + vb) / 2))
    assert r.beyond and r.ci[1] < 0


def test_one_run_on_a_side_borrows_the_other_sides_spread_and_none_on_either_gives_nothing() -> None:
    r = replica_difference([1.0], [2.0, 2.2, 1.8])
    assert r is not None and r.method == "pooled-t" and r.df == 2
    assert r.ci[1] - r.ci[0] == pytest.approx(2 * t_quantile(0.975, 2) * 0.2 * math.sqrt(1 + 1 / 3))
    assert replica_difference([1.0], [2.0]) is None
    exact = replica_difference([1.0, 1.0], [1.5, 1.5])  # bitwise-equal replicas: no noise at all
    assert exact is not None and exact.method == "exact" and exact.ci == (0.5, 0.5) and exact.beyond
    same = replica_difference([1.0, 1.0], [1.0, 1.0])
    assert same is not None and not same.beyond


def test_permutation_test_only_where_it_can_reach_five_percent() -> None:
    assert permutation_p([1, 2, 3], [4, 5, 6]) is None  # 20 splits: the smallest two-sided p is 0.1
    assert permutation_p([1, 2, 3, 4], [5, 6, 7, 8]) == pytest.approx(2 / 70)
    assert permutation_p([1, 5, 2, 6], [2, 6, 1, 5]) == 1.0


# ---------------------------------------------------------------------------- error rates

TRIALS = 1500


@pytest.mark.parametrize(("replicas", "seed"), [(2, 11), (3, 12), (5, 13)])
def test_false_positive_rate_on_a_null_effect_stays_at_five_percent(replicas: int, seed: int) -> None:
    rate = rejection_rate(seed, TRIALS, replicas, 0.0)
    slack = binomial_slack(0.05, TRIALS)
    assert rate <= 0.05 + slack  # never above the nominal rate, beyond binomial slack
    if replicas >= 5:  # Welch is exact enough from 5 a side; at 2-3 it is conservative (docs/noise.md)
        assert rate >= 0.05 - slack
    else:
        assert rate >= 0.005


def test_false_positive_rate_holds_when_the_setting_changes_the_noise() -> None:
    rate = rejection_rate(21, TRIALS, 3, 0.0, noise_b=Noise(run_sd=3.0, step_sd=3.0))
    assert rate <= 0.05 + binomial_slack(0.05, TRIALS)


def test_power_grows_with_replicas_and_effect() -> None:
    small = rejection_rate(31, 300, 2, 3.0)
    large = rejection_rate(32, 300, 5, 3.0)
    assert 0.1 < small < large and large > 0.8
    assert rejection_rate(33, 200, 5, 5.0) > 0.97


def test_the_per_step_interval_without_replicas_would_call_seeds_real() -> None:
    # one run a side: the per-step interval ignores the run offset, so it excludes zero for most seeds
    import random

    rng, noise, hits = random.Random(41), Noise(), 0
    for _ in range(200):
        a, b = RunSeries("a", simulate_run(rng, noise, 0.0)), RunSeries("b", simulate_run(rng, noise, 0.0))
        judged = judge_metric("train/loss", TRAIN_AXIS, [a], [b])
        assert judged is not None and judged.verdict == NO_REPLICAS
        low, high = judged.diff_ci or (0.0, 0.0)
        hits += low > 0 or high < 0
    assert hits / 200 > 0.4


def test_run_mean_sd_matches_simulated_runs() -> None:
    import random

    rng, noise = random.Random(51), Noise()
    means = [statistics.fmean(v["train/loss"] for v in simulate_run(rng, noise, 0.0).train_steps.values()) for _ in range(3000)]
    assert statistics.stdev(means) == pytest.approx(run_mean_sd(noise), rel=0.05)


# ---------------------------------------------------------------------------- replicas


def _m(rid: str, started: str = "2026-12-02T03:00:00Z", state: str = "finished", **settings: Any) -> dict[str, Any]:
    base = {"lr": 0.1, "seed": 1, "image.digest": "sha256:aa", "code.tree": "t1", "save": f"/ckpt/{rid}"}
    base.update({k.replace("_", "-"): v for k, v in settings.items()})
    return {
        "id": rid,
        "started": started,
        "status": {"state": state},
        "settings": base,
        "replay_of": None,
        "host": {"hostname": "h1"},
        "gpu": {"gpus": [{"name": "H200", "driver_version": "570"}]},
    }


def test_replicas_differ_only_in_seeds_and_share_image_code_and_age() -> None:
    target = _m("A")
    keys = replica_globs(["data-seed"])
    runs = [
        _m("s2", seed=2),
        _m("rs", rollout_seed=9, seed=3),
        _m("ds", data_seed=4),
        _m("lr", lr=0.2, seed=2),
        _m("img", seed=2, image_digest="sha256:bb"),
        _m("code", seed=2, code_tree="t2"),
        _m("old", "2026-11-28T03:00:00Z", seed=5),
        _m("failed", state="failed", seed=6),
    ]
    found = find_replicas(target, runs, ["save"], keys, 24)
    assert sorted(m["id"] for m in found) == ["ds", "rs", "s2"]
    # an ignored image or code setting still parts replicas
    assert "img" not in [m["id"] for m in find_replicas(target, runs, ["save", "image.*", "code.*"], keys, 24)]
    assert "old" in [m["id"] for m in find_replicas(target, runs, ["save"], keys, 24, any_age=True)]
    assert [m["id"] for m in find_replicas(target, runs, ["save"], ["seed"], 24)] == ["s2"]


def test_replays_are_replicas_only_on_the_same_samples() -> None:
    def replay(rid: str, mapping: dict[str, int], seed: int, of: str = "src") -> dict[str, Any]:
        m = _m(rid, seed=seed)
        m["replay_of"], m["replay"] = of, {"mode": "train", "mapping": mapping}
        return m

    target = replay("A", {"0": 2, "1": 3}, 1)
    runs = [
        replay("same", {"0": 2, "1": 3}, 2),
        replay("other-steps", {"0": 0, "1": 1}, 2),
        replay("other-run", {"0": 2, "1": 3}, 2, of="x"),
        _m("not-a-replay", seed=2),
    ]
    assert [m["id"] for m in find_replicas(target, runs, ["save"], replica_globs(), 24)] == ["same"]


def test_session_notes_name_another_day_host_gpu_and_driver() -> None:
    a = _m("A")
    late = _m("r1", "2026-12-03T01:00:00Z")
    other = _m("r2")
    other["host"] = {"hostname": "h2"}
    other["gpu"] = {"gpus": [{"name": "A100", "driver_version": "535"}]}
    no_gpu = _m("r3")
    no_gpu["gpu"] = {"gpus": []}
    notes = session_notes(a, [("B", late), ("B's replica r2", other), ("B's replica r3", no_gpu)])
    assert notes == [
        "different day than A (2026-12-02): B (2026-12-03)",
        "different host than A (h1): B's replica r2 (h2)",
        "different GPU than A (H200): B's replica r2 (A100)",
        "different driver than A (570): B's replica r2 (535)",
    ]
    assert session_notes(a, [("B", _m("B"))]) == []


# ---------------------------------------------------------------------------- degenerate runs


def _rollouts(*metrics: dict[str, float], train: dict[str, float] | None = None) -> MetricsTable:
    table = MetricsTable()
    for step, m in enumerate(metrics):
        table.rows[step] = StepRow(step, None, None, dict(m))
    if train:
        table.train_steps[0] = dict(train)
    return table


def test_zero_reward_spread_in_half_the_groups_is_flagged() -> None:
    z, o = "rollout/zero_std/all_zero_percentage", "rollout/zero_std/all_one_percentage"
    table = _rollouts({z: 0.3, o: 0.3}, {z: 0.5, o: 0.2}, {z: 0.1, o: 0.1}, train={"train/train_rollout_logprob_abs_diff": 0.02})
    (flag,) = degenerate_flags("r", table)
    assert flag.flag == "zero-std" and flag.value == pytest.approx(0.5) and flag.steps == [0, 1]
    assert flag.context == {"train/train_rollout_logprob_abs_diff": 0.02}
    assert "50% of groups had zero reward spread" in flag.describe()
    assert degenerate_flags("r", table, steps=[2]) == []  # only the compared steps count
    assert degenerate_flags("r", _rollouts({z: 0.2, o: 0.29})) == []
    # percentages written as such; other constant rewards counted through zero_std/count_<r>
    assert degenerate_flags("r", _rollouts({z: 60.0}))[0].value == pytest.approx(0.6)
    counted = _rollouts({z: 0.25, o: 0.0, "rollout/zero_std/count_0.0": 2, "rollout/zero_std/count_0.5": 2})
    assert degenerate_flags("r", counted)[0].value == pytest.approx(0.5)


def test_every_group_on_one_reward_other_than_0_and_1_is_flagged_from_the_recorded_group_count() -> None:
    # Miles' zero_std counts per rounded reward (miles/ray/rollout/metrics.py): 8 groups, every one all 0.5
    constant = {
        "rollout/zero_std/count_0.5": 8,
        "rollout/zero_std/all_zero_percentage": 0.0,
        "rollout/zero_std/all_one_percentage": 0.0,
    }
    table = _rollouts(constant, constant)
    (flag,) = degenerate_flags("r", table, groups=groups_of({"rollout-batch-size": 8}))
    assert flag.flag == "zero-std" and flag.value == 1.0 and flag.steps == [0, 1]
    # half the groups constant, at 0.5 and at 0.0 alike; the shares alone could not tell
    mixed = _rollouts({"rollout/zero_std/count_0.5": 2, "rollout/zero_std/count_0.0": 2, "rollout/zero_std/all_zero_percentage": 0.25})
    assert degenerate_flags("r", mixed, groups=8)[0].value == pytest.approx(0.5)
    assert degenerate_flags("r", _rollouts({"rollout/zero_std/count_0.5": 3}), groups=8) == []
    assert groups_of({"rollout-batch-size": "16"}) == 16 and groups_of({}) is None and groups_of({"rollout-batch-size": True}) is None


def test_a_recorded_constant_reward_run_is_flagged_on_the_report(tmp_path: Any) -> None:
    import sys
    from pathlib import Path

    from conftest import ledger, make_repo

    trainer = (
        "import argparse\n"
        "ap = argparse.ArgumentParser(); ap.add_argument('--rollout-batch-size', type=int); a = ap.parse_args()\n"
        "for r in range(3):\n"
        "    print(f\"[2026-12-02 03:00:0{r}.000 RolloutManager] rollout.py:1 - perf {r}: {{'rollout/zero_std/count_0.5': "
        "{a.rollout_batch_size}, 'rollout/zero_std/all_zero_percentage': 0.0, 'rollout/zero_std/all_one_percentage': 0.0, "
        "'perf/rollout_time': 1.0}}\")\n"
    )
    repo = make_repo(Path(tmp_path) / "proj", {"train.py": trainer})
    proc = ledger(repo, "run", "--no-debug-data", "--no-heat-guard", "--", sys.executable, "train.py", "--rollout-batch-size", "8")
    assert proc.returncode == 0, proc.stderr
    page = Path(tmp_path) / "report.html"
    assert ledger(repo, "report", "--html", str(page)).returncode == 0
    assert "DEGENERATE: 100% of groups had zero reward spread" in page.read_text()


def test_a_quarter_truncated_is_flagged_with_repetition_as_context() -> None:
    table = _rollouts(
        {"rollout/truncated_ratio": 0.25, "rollout/repetition_frac": 0.1}, {"rollout/truncated_ratio": 0.3, "rollout/repetition_frac": 0.3}
    )
    (flag,) = degenerate_flags("r", table)
    assert flag.flag == "truncated" and flag.value == pytest.approx(0.275) and flag.steps == [0, 1]
    assert flag.context == {"repetition_frac": pytest.approx(0.2)}
    assert degenerate_flags("r", _rollouts({"truncated_ratio": 0.2})) == []


# ---------------------------------------------------------------------------- text and page


def _series(rid: str, level: float, offset: float) -> RunSeries:
    table = MetricsTable()
    for step in range(8):
        table.train_steps[step] = {"train/loss": level + offset + 0.01 * (step % 3)}
        table.rows[step] = StepRow(step, None, None, {"perf/train_time": 1.0 + offset})
    return RunSeries(rid, table)


def test_noise_section_in_text_and_page() -> None:
    side_a = [_series("A", 1.0, 0.0), _series("a2", 1.0, 0.02), _series("a3", 1.0, -0.01)]
    side_b = [_series("B", 0.5, 0.01), _series("b2", 0.5, -0.02)]
    noise = judge([("perf/train_time", "rollout"), ("train/loss", TRAIN_AXIS)], side_a, side_b)
    assert [m.verdict for m in noise.metrics] == [WITHIN, BEYOND]
    ma, mb = _m("A"), _m("B", lr=0.2)
    report = build_report(ma, mb, side_a[0].table, side_b[0].table, ignore=["save"])
    report.noise = noise
    text = render_text(report)
    loss = next(x for x in text.splitlines() if x.strip().startswith("train/loss ") and "noise" in x)
    assert "3+2" in loss and loss.endswith("beyond noise")
    assert text.index("learning on common steps") < text.index("noise (3 runs for A")
    html = noise_section(report, [s.table for s in side_a], [s.table for s in side_b])
    assert 'data-verdict="beyond noise"' in html and 'data-series="B mean of 2 runs" data-n="8"' in html
    single = judge([("train/loss", TRAIN_AXIS)], side_a[:1], side_b[:1])
    report.noise = single
    assert single.method == "per-step" and "IGNORES run-to-run noise" in render_text(report)


def test_a_suggested_baseline_from_another_session_is_named_under_the_hint() -> None:
    earlier = _m("base", "2026-11-29T10:00:00Z", lr=0.3)
    report = build_report(
        _m("A", lr=0.2, seed=3), _m("B", lr=0.3, seed=2), None, None, ignore=["save"], earlier_runs=[earlier], replica_keys=replica_globs()
    )
    assert report.refused and report.suggested_baseline == "base"
    report.baseline_session = session_notes(_m("B"), [("suggested baseline base", earlier)], "B")
    text = render_text(report)
    hint = text.index("hint: base differs from B in one setting")
    assert text.index("session: different day than B (2026-12-02): suggested baseline base (2026-11-29)") > hint


def test_flags_from_miles_shaped_perf_lines(tmp_path: Any) -> None:
    # the rollout manager's `perf N:` dict as miles/ray/rollout/metrics.py builds it (rollout/ prefix)
    from pathlib import Path

    from ledger.metrics.logparse import parse_logs

    log = Path(tmp_path) / "trainer.log"
    log.write_text(
        "".join(
            f"(RolloutManager pid=18) [2026-04-15 07:5{n}:53] rollout.py:1193 - perf {n}: {{'rollout/response_len/mean': "
            f"2773.7, 'rollout/zero_std/count_0.0': {c0}, 'rollout/zero_std/all_zero_percentage': {c0 / 64}, "
            f"'rollout/zero_std/all_one_percentage': 0.0, 'rollout/repetition_frac': 0.05, "
            f"'rollout/truncated_ratio': {t}, 'perf/rollout_time': 371.18}}\n"
            for n, (c0, t) in enumerate([(40, 0.1), (30, 0.3)])
        )
    )
    flags = {f.flag: f for f in degenerate_flags("r", parse_logs([log]))}
    assert set(flags) == {"zero-std"} and flags["zero-std"].value == pytest.approx(70 / 128)
    assert flags["zero-std"].steps == [0] and flags["zero-std"].context == {"repetition_frac": pytest.approx(0.05)}
