"""`ledger diff`'s pure core: changed settings, context warnings, baselines, reports and text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ledger.compare.changes import Change, change_log, changed_settings, suggest_baseline
from ledger.compare.diffcore import ABSENT, build_report, context_warnings, pauses_from_manifest
from ledger.compare.render import compact_steps, render_text
from ledger.metrics.table import MetricsTable, StepRow
from ledger.textfmt import show_value


def manifest(run_id: str, started: str = "2026-11-29T11:00:00Z", **settings: Any) -> dict[str, Any]:
    base = {
        "lr": 1e-06,
        "offload-rollout": False,
        "seed": 1234,
        "save": f"/ckpt/{run_id}",
    }
    base.update({k.replace("_", "-"): v for k, v in settings.items()})
    return {
        "id": run_id,
        "name": run_id,
        "started": started,
        "finished": started,
        "host": {"hostname": "gpu-node-1"},
        "gpu": {
            "gpus": [{"name": "NVIDIA H200", "driver_version": "570.1"}],
            "pauses": [],
        },
        "settings": base,
        "status": {"state": "finished", "exit_code": 0},
        "replay_of": None,
    }


def table(times: dict[int, float]) -> MetricsTable:
    return MetricsTable(rows={s: StepRow(s, s * 10.0, s * 10.0 + 10, {"perf/rollout_time": t}) for s, t in times.items()})


# ---------------------------------------------------------------------------- settings


def test_changed_settings_ignores_globs_and_shows_absent_keys() -> None:
    a = {"lr": 1e-06, "save": "/a", "wandb-group": "x", "only-a": 1}
    b = {"lr": 2e-06, "save": "/b", "wandb-group": "y", "only-b": True}
    changes = changed_settings(a, b, ignore=["save", "wandb-*"])
    assert changes == [
        Change("lr", 1e-06, 2e-06),
        Change("only-a", 1, ABSENT),
        Change("only-b", ABSENT, True),
    ]


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (1e-06, 1.0e-06, True),
        (
            1e-06,
            "1.0e-06",
            True,
        ),  # a string from an old YAML reader is still the number
        ("1e-6", "0.000001", True),
        (1e-06, 1.0000001e-06, False),  # exact, no tolerance
        (True, 1, False),
        (False, "false", False),
        (None, "null", False),
        ([1, "2"], [1.0, 2], True),
        ([1, 2], [1, 2, 3], False),
        ("abc", "abc", True),
    ],
)
def test_value_comparison(a: Any, b: Any, same: bool) -> None:
    assert (changed_settings({"x": a}, {"x": b}) == []) is same


def test_change_log_lists_each_runs_changes_against_the_previous() -> None:
    runs = [
        manifest("r1"),
        manifest("r2", offload_rollout=True),
        manifest("r3", offload_rollout=True, lr=2e-06),
    ]
    log = change_log(runs, ignore=["save"])
    assert log == [
        ("r1", []),
        ("r2", [Change("offload-rollout", False, True)]),
        ("r3", [Change("lr", 1e-06, 2e-06)]),
    ]


def test_suggest_baseline_picks_most_recent_earlier_run_one_setting_away() -> None:
    b = manifest("b", "2026-11-29T12:00:00Z", offload_rollout=True, lr=2e-06)
    older = manifest("old", "2026-11-29T08:00:00Z", offload_rollout=True)  # differs in lr only
    newer = manifest("new", "2026-11-29T10:00:00Z", lr=2e-06)  # differs in offload-rollout only
    two_away = manifest("two", "2026-11-29T11:00:00Z")
    later = manifest("later", "2026-11-29T13:00:00Z", lr=2e-06)  # one away, but after B
    assert suggest_baseline(b, [older, two_away, newer, later, b], ignore=["save"]) == "new"
    assert suggest_baseline(b, [two_away], ignore=["save"]) is None


# ---------------------------------------------------------------------------- context


def test_context_warnings_for_identical_context_are_empty() -> None:
    assert context_warnings(manifest("a"), manifest("b")) == []


def test_context_warnings_name_each_difference() -> None:
    a = manifest("a", "2026-11-27T11:00:00Z")
    b = manifest("b", "2026-11-29T11:00:00Z")
    b["host"]["hostname"] = "gpu-node-2"
    b["gpu"]["gpus"] = [{"name": "NVIDIA H100", "driver_version": "580.2"}]
    b["status"] = {"state": "killed", "exit_code": -9}
    b["replay_of"] = "a"
    warnings = context_warnings(a, b, max_age_hours=24)
    assert warnings == [
        "different hosts: gpu-node-1 vs gpu-node-2",
        "different GPUs: NVIDIA H200 vs NVIDIA H100",
        "different GPU drivers: 570.1 vs 580.2",
        "runs started 48.0 h apart (more than 24 h)",
        "run B (b) did not finish: killed",
        "only B is a replay (of a); replays skip rollout generation",
    ]
    assert not any("apart" in w for w in context_warnings(a, b, max_age_hours=72))


def test_missing_gpu_facts_are_a_warning() -> None:
    b = manifest("b")
    b["gpu"] = {"unavailable": "NVML Shared Library Not Found"}
    assert context_warnings(manifest("a"), b) == ["GPU facts unavailable for B"]


def test_pauses_from_manifest() -> None:
    m = manifest("a")
    m["gpu"]["pauses"] = [
        {"start": "1970-01-01T00:01:00Z", "end": "1970-01-01T00:02:00Z"},
        {"start": "1970-01-01T00:03:00Z", "end": None},
    ]
    assert pauses_from_manifest(m) == [(60.0, 120.0), (180.0, float("inf"))]


# ---------------------------------------------------------------------------- reports


def test_one_change_gives_timing_and_renders_it_first() -> None:
    ma, mb = manifest("a"), manifest("b", offload_rollout=True)
    report = build_report(
        ma,
        mb,
        table(dict.fromkeys(range(8), 10.0)),
        table(dict.fromkeys(range(10), 11.0)),
        ignore=["save"],
        steps_metric="perf/rollout_time",
    )
    assert not report.refused and not report.forced
    assert report.changed == [Change("offload-rollout", False, True)]
    (timing,) = report.timing
    assert timing.common_steps == 8 and timing.only_b == [8, 9]
    assert len(report.steps) == 10

    text = render_text(report)
    lines = text.splitlines()
    assert lines[3] == "offload-rollout: false -> true"
    assert "perf/rollout_time" in text and "1.100x [1.100, 1.100]" in text
    assert "steps only in B (perf/rollout_time): 8-9" in text
    assert "per-step perf/rollout_time:" in text
    assert "per-step perf" not in render_text(report, show_steps=False)

    data = json.loads(json.dumps(report.to_json_dict()))
    assert data["changed"] == [{"name": "offload-rollout", "a": False, "b": True}]
    assert data["timing"][0]["ratio_ci"] == pytest.approx([1.1, 1.1])
    assert data["timing"][0]["only_b"] == [8, 9]
    assert {"a", "b", "refused", "forced", "warnings", "suggested_baseline"} <= set(data)


def test_two_changes_refuse_with_every_difference_and_a_baseline() -> None:
    earlier = manifest("base", "2026-11-29T10:00:00Z", lr=2e-06)
    ma, mb = (
        manifest("a"),
        manifest("b", "2026-11-29T12:00:00Z", offload_rollout=True, lr=2e-06),
    )
    report = build_report(
        ma,
        mb,
        table({0: 1.0}),
        table({0: 1.0}),
        ignore=["save"],
        earlier_runs=[earlier, ma],
    )
    assert report.refused and report.timing == []
    assert report.suggested_baseline == "base"
    text = render_text(report)
    assert "refused: 2 settings differ" in text
    assert "  lr: 1e-06 -> 2e-06" in text and "  offload-rollout: false -> true" in text
    assert "ledger diff base b" in text
    assert "timing" not in text


def test_no_change_compares_two_repeats() -> None:
    # issue 25: two runs with identical settings are repeats: compared (their difference is the noise)
    report = build_report(
        manifest("a"), manifest("b"), table(dict.fromkeys(range(6), 2.0)), table(dict.fromkeys(range(6), 2.2)), ignore=["save"]
    )
    assert not report.refused and not report.forced and report.repeat and report.changed == []
    text = render_text(report)
    assert text.splitlines()[3] == "no setting differs: this compares two repeats"
    assert report.timing[0].median_ratio == pytest.approx(1.1)
    assert report.to_json_dict()["repeat"] is True


def test_only_seeds_differing_is_a_repeat_and_other_settings_are_not() -> None:
    ma, mb = manifest("a"), manifest("b", seed=5)
    keys = ("seed", "rollout-seed")
    report = build_report(ma, mb, table({0: 1.0}), table({0: 1.0}), ignore=["save"], replica_keys=keys)
    assert report.repeat and not report.refused
    assert "only seed settings differ (seed: 1234 -> 5)" in render_text(report)
    two = build_report(ma, manifest("b", seed=5, lr=3e-06), None, None, ignore=["save"], replica_keys=keys)
    assert two.refused and not two.repeat


def test_force_compares_anyway_under_a_banner() -> None:
    ma, mb = manifest("a"), manifest("b", offload_rollout=True, seed=1)
    report = build_report(
        ma,
        mb,
        table(dict.fromkeys(range(6), 2.0)),
        table(dict.fromkeys(range(6), 3.0)),
        ignore=["save"],
        force=True,
    )
    assert report.forced and not report.refused
    assert report.timing[0].median_ratio == 1.5
    text = render_text(report)
    assert "FORCED: 2 settings differ" in text
    assert "  seed: 1234 -> 1" in text


def test_timing_unavailable_and_malformed_lines_are_reported() -> None:
    ma, mb = manifest("a"), manifest("b", lr=3e-06)
    broken = table({0: 1.0})
    broken.malformed, broken.malformed_examples = (
        2,
        ["trainer.log:7: perf 3: truncated last line"],
    )
    report = build_report(ma, mb, None, broken, ignore=["save"])
    # what is really missing: metrics in the formats ledger reads, not "logs" (issue 34, item 1)
    assert report.timing_unavailable.startswith(
        "run A recorded no per-step metrics in any format ledger reads (Miles' `step N: {...}` lines, `step N: key=value`"
    )
    assert report.malformed_b == 2
    assert "2 malformed metric line(s) in run B: trainer.log:7" in " ".join(report.warnings)
    assert "timing: unavailable (run A recorded no per-step metrics" in render_text(report)
    apart = build_report(ma, mb, table({0: 1.0}), table({1: 1.0}), ignore=["save"])
    assert apart.timing_unavailable == "the runs have no rollout step in common"


def test_render_appends_git_diff() -> None:
    report = build_report(manifest("a"), manifest("b", lr=3e-06), None, None, ignore=["save"])
    assert render_text(report, git_diff="diff --git a/x b/x\n").endswith("\n\ndiff --git a/x b/x\n")


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (True, "true"),
        (None, "null"),
        (ABSENT, "<absent>"),
        (1e-06, "1e-06"),
        ("x", "x"),
        ("true", "'true'"),
        ("1.5", "'1.5'"),
        ([1, "a"], "[1, a]"),
    ],
)
def test_show_value_is_yaml_ish(value: Any, shown: str) -> None:
    assert show_value(value) == shown


def test_compact_steps() -> None:
    assert compact_steps([9, 3, 4, 5, 7]) == "3-5, 7, 9"
    assert compact_steps(list(range(0, 40, 2)), limit=3) == "0, 2, 4, ... (20 steps)"


def test_absent_values_serialise_as_json() -> None:
    (change,) = changed_settings({"x": 1}, {})
    assert change.b is ABSENT
    assert json.loads(json.dumps({"a": change.a, "b": change.b})) == {"a": 1, "b": "<absent>"}
    assert changed_settings({"x": "<absent>"}, {}) != []  # a real string is not the marker


def test_timing_columns_carry_units_and_a_missing_interval_says_why() -> None:
    def rows(steps: int, time: float, length: float) -> MetricsTable:
        return MetricsTable(
            rows={
                s: StepRow(s, s * 10.0, s * 10.0 + 10, {"perf/rollout_time": time, "rollout/response_len/mean": length})
                for s in range(steps)
            }
        )

    report = build_report(manifest("a"), manifest("b", lr=2e-06), rows(4, 2.0, 500.0), rows(4, 3.0, 500.0), ignore=["save"])
    lines = {line.split()[0]: line for line in render_text(report).splitlines() if line.startswith("  ")}
    assert "2.00 s" in lines["perf/rollout_time"] and "3.00 s" in lines["perf/rollout_time"]
    assert "500 tok" in lines["rollout/response_len/mean"]
    assert "4.00 s/1k tok" in lines["perf/rollout_time_per_1k_tokens"]
    assert "1.500x (no CI: n < 6)" in lines["perf/rollout_time"]
    assert lines["no"] == "  no CI: a 95% interval for a median needs at least 6 common steps"


def test_changed_settings_sees_what_compares_alike_but_is_not_the_same() -> None:
    """The scalars compared as sets first (`_maybe_changed`) keep True and 1 apart, and the
    values left to `same_value` keep its rules: numbers by value, lists element by element."""
    from ledger.compare.changes import changed_settings, prepare

    a = {"flag": True, "zero": 0, "lr": 0.001, "lr2": "1e-3", "n": 1, "xs": [True, 2], "same": "x", "none": None}
    b = {"flag": 1, "zero": False, "lr": "1e-3", "lr2": 0.001, "n": 1.0, "xs": [1, 2], "same": "x", "none": None, "new": 3}
    assert [c.name for c in changed_settings(a, b)] == ["flag", "new", "xs", "zero"]
    assert changed_settings(a, dict(a)) == []
    # prepared once for a search over many runs: the same answer, either way round
    pa, pb = prepare(a), prepare(b)
    assert changed_settings(pa, pb) == changed_settings(a, pb) == changed_settings(a, b)
    assert [c.name for c in changed_settings(pb, a, ignore=["x*"])] == ["flag", "new", "zero"]
    nested = {"xs": [True, 2], "cfg": {"k": 1}}
    assert [c.name for c in changed_settings(prepare(nested), prepare({"xs": [True, 2], "cfg": {"k": 2}}))] == ["cfg"]
