"""Replay argv building: mode flags, rollout count, --set and extra arguments."""

from __future__ import annotations

import pytest

from ledger.errors import UsageError
from ledger.replay.command import build_replay_argv, parse_set
from ledger.understand.settings import parse_settings, split_training_command

RECORDED = [
    "python3", "train.py",
    "--lr", "1e-6",
    "--colocate",
    "--offload-rollout-level", "kv_cache", "weight",
    "--save-debug-rollout-data", "/old/rollout/{rollout_id}.pt",
    "--save-debug-event-data", "/old/events",
    "--num-rollout", "100",
    "--start-rollout-id", "7",
    "--rollout-seed=42",
    "--sglang-mem-fraction-static", "0.7",
]  # fmt: skip


def settings_of(argv: list[str]) -> dict[str, object]:
    return parse_settings(split_training_command(argv)[2])


def test_train_mode_loads_recorded_rollouts_and_keeps_other_settings() -> None:
    argv = build_replay_argv(
        [
            *RECORDED,
            "--debug-rollout-only",
            "--load-debug-rollout-data",
            "/older/{rollout_id}.pt",
        ],
        mode="train",
        load_template="/replay/steps/{rollout_id}.pt",
    )
    assert argv[:2] == ["python3", "train.py"]
    settings = settings_of(argv)
    assert settings["load-debug-rollout-data"] == "/replay/steps/{rollout_id}.pt"
    assert settings["debug-train-only"] is True
    assert "save-debug-rollout-data" not in settings
    assert "debug-rollout-only" not in settings
    kept = settings_of(RECORDED)
    del kept["save-debug-rollout-data"]
    assert {k: settings[k] for k in kept} == kept
    assert argv.count("--load-debug-rollout-data") == 1


def test_rollout_mode_saves_rollouts_and_drops_train_only_flags() -> None:
    argv = build_replay_argv(
        [*RECORDED, "--debug-train-only", "--load-debug-rollout-data", "/x/{rollout_id}.pt",
         "--load-debug-rollout-data-subsample", "0.5"],
        mode="rollout",
        save_template="/new/{rollout_id}.pt",
    )  # fmt: skip
    settings = settings_of(argv)
    assert settings["save-debug-rollout-data"] == "/new/{rollout_id}.pt"
    assert settings["debug-rollout-only"] is True
    for gone in (
        "debug-train-only",
        "load-debug-rollout-data",
        "load-debug-rollout-data-subsample",
    ):
        assert gone not in settings
    # replaced in place, not appended
    assert argv.index("--save-debug-rollout-data") == RECORDED.index("--save-debug-rollout-data")


def test_num_rollout_replaces_the_end_and_drops_the_start() -> None:
    argv = build_replay_argv(RECORDED, mode="train", load_template="/l/{rollout_id}.pt", num_rollout=1)
    settings = settings_of(argv)
    assert settings["num-rollout"] == 1
    assert "start-rollout-id" not in settings
    kept = build_replay_argv(RECORDED, mode="train", load_template="/l/{rollout_id}.pt")
    assert settings_of(kept)["start-rollout-id"] == 7


def test_set_replaces_values_in_every_form() -> None:
    argv = build_replay_argv(
        RECORDED,
        mode="train",
        load_template="/l/{rollout_id}.pt",
        sets=[("lr", "2e-6"), ("--rollout-seed", "7"), ("offload-rollout-level", "weight kv_cache"),
              ("sglang-mem-fraction-static", "0.8"), ("new-flag", "x y")],
    )  # fmt: skip
    assert "--rollout-seed=7" in argv  # the inline form is kept
    settings = settings_of(argv)
    assert settings["lr"] == 2e-06
    assert settings["rollout-seed"] == 7
    assert settings["offload-rollout-level"] == ["weight", "kv_cache"]
    assert settings["sglang-mem-fraction-static"] == 0.8
    assert argv[-2:] == ["--new-flag", "x y"]  # absent: appended as one value


def test_set_drops_repeats_of_the_flag() -> None:
    argv = build_replay_argv(
        ["python3", "train.py", "--tag", "a", "--tag", "b"],
        mode="rollout",
        save_template="/s/{rollout_id}.pt",
        sets=[("tag", "c")],
    )
    assert argv[:4] == ["python3", "train.py", "--tag", "c"]
    assert "b" not in argv


def test_set_true_and_false_on_switches() -> None:
    def replay(argv: list[str], *sets: tuple[str, str]) -> dict[str, object]:
        out = build_replay_argv(
            ["python3", "train.py", *argv],
            mode="train",
            load_template="/l",
            sets=list(sets),
        )
        return settings_of(out)

    assert replay([], ("colocate", "true"))["colocate"] is True
    assert "colocate" not in replay(["--colocate"], ("colocate", "false"))
    # a known --x/--no-x pair: false writes the negation, true removes it
    assert replay(["--offload-train"], ("offload-train", "false"))["offload-train"] is False
    assert replay(["--no-offload-train"], ("offload-train", "true"))["offload-train"] is True
    # the recorded --no-x form marks a pair even when the flag is not known
    assert replay(["--no-foo"], ("foo", "false"))["foo"] is False
    assert replay(["--no-foo"], ("foo", "true"))["foo"] is True
    # the user's own negated form forces the pair
    assert replay(["--bar"], ("no-bar", "true"))["bar"] is False
    assert replay(["--no-bar"], ("no-bar", "false"))["bar"] is True
    # a flag recorded with a value keeps taking a value
    assert replay(["--flag", "true"], ("flag", "false"))["flag"] is False


def test_extra_is_appended_raw_and_new_flags_stay_before_a_double_dash() -> None:
    argv = build_replay_argv(
        ["python3", "train.py", "--lr", "1", "--", "pos"],
        mode="train",
        load_template="/l",
        extra=["--raw", "a b"],
    )
    assert argv == [
        "python3", "train.py", "--lr", "1",
        "--load-debug-rollout-data", "/l", "--debug-train-only",
        "--", "pos", "--raw", "a b",
    ]  # fmt: skip


def test_values_with_spaces_and_json_survive_untouched() -> None:
    recorded = ["python3", "train.py", "--json", '{"a": "b c"}', "--name", "it's x"]
    argv = build_replay_argv(recorded, mode="train", load_template="/l")
    assert argv[:6] == recorded


def test_missing_templates_and_bad_modes_are_usage_errors() -> None:
    with pytest.raises(UsageError):
        build_replay_argv(RECORDED, mode="train")
    with pytest.raises(UsageError):
        build_replay_argv(RECORDED, mode="rollout")
    with pytest.raises(UsageError):
        build_replay_argv(RECORDED, mode="both", load_template="/l")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="runs no python script"):
        build_replay_argv(["bash", "run.sh"], mode="train", load_template="/l")


def test_parse_set() -> None:
    assert parse_set("lr=2e-6") == ("lr", "2e-6")
    assert parse_set('--json={"a": 1}') == ("json", '{"a": 1}')
    assert parse_set("name=") == ("name", "")
    for bad in ("lr", "=3", "--=3", "a b=1"):
        with pytest.raises(UsageError) as caught:
            parse_set(bad)
        assert caught.value.hint is not None and "KEY=VALUE" in caught.value.hint
        assert caught.value.exit_code == 2
