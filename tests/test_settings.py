"""Settings from the training command's arguments."""

from __future__ import annotations

import pytest

from ledger.understand.settings import (
    DEFAULT_IGNORE,
    convert_value,
    flag_groups,
    ignored_settings,
    is_flag,
    parse_settings,
    split_training_command,
)


def test_values_convert_to_their_types() -> None:
    settings = parse_settings(
        ["--lr", "1e-6", "--seed", "1234", "--ratio", "0.5", "--on", "true", "--off", "False",
         "--none", "None", "--null", "null", "--name", "qwen3-4B", "--gpus", "007"]
    )  # fmt: skip
    assert settings == {
        "lr": 1e-06,
        "seed": 1234,
        "ratio": 0.5,
        "on": True,
        "off": False,
        "none": None,
        "null": None,
        "name": "qwen3-4B",
        "gpus": "007",
    }
    assert isinstance(settings["seed"], int) and isinstance(settings["lr"], float)


def test_switches_and_their_negations() -> None:
    assert parse_settings(["--colocate", "--no-offload-train", "--offload"]) == {
        "colocate": True,
        "offload-train": False,
        "offload": True,
    }
    # the last of a switch and its negation wins, as with argparse
    assert parse_settings(["--offload-train", "--no-offload-train"]) == {"offload-train": False}


def test_key_equals_value_keeps_everything_after_the_first_equals() -> None:
    assert parse_settings(["--eq=a=b", "--neg=-x", "--empty="]) == {
        "eq": "a=b",
        "neg": "-x",
        "empty": "",
    }


def test_negative_numbers_are_values_not_flags() -> None:
    settings = parse_settings(["--eps", "-1e-5", "--clip", "-1", "--half", "-.5", "--x"])
    assert settings == {"eps": -1e-05, "clip": -1, "half": -0.5, "x": True}
    assert not is_flag("-1") and not is_flag("-") and not is_flag("--")
    assert is_flag("-v") and is_flag("--lr")


def test_multi_value_flags_are_lists_and_a_repeated_flag_keeps_its_last_value() -> None:
    # Shape from radixark/miles examples/**/run-*.sh: MODEL_ARGS from a sourced model file first,
    # MISC_ARGS overrides later; Megatron/argparse keep the last value (issue 9, item 5).
    settings = parse_settings(
        ["--offload-rollout-level", "kv_cache", "weight", "--tag", "a", "--tag", "b",
         "--ids", "1", "2", "--ids", "3",
         "--moe-token-dispatcher-type", "alltoall", "--moe-token-dispatcher-type", "flex"]
    )  # fmt: skip
    assert settings == {
        "offload-rollout-level": ["kv_cache", "weight"],
        "tag": "b",
        "ids": 3,
        "moe-token-dispatcher-type": "flex",
    }


def test_json_looking_values_stay_strings() -> None:
    text = '{"max_new_tokens": 8, "stop": ["\\n"]}'
    settings = parse_settings(["--sampling", text, "--list", "[1, 2]"])
    assert settings == {"sampling": text, "list": "[1, 2]"}


def test_positional_leftovers_are_kept_apart() -> None:
    assert parse_settings(["data.jsonl", "3", "--lr", "1", "--", "--not-a-flag"]) == {
        "lr": 1,
        "_positional": ["data.jsonl", 3, "--not-a-flag"],
    }
    assert "_positional" not in parse_settings(["--lr", "1"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [("TRUE", True), ("1.0", 1.0), ("1e3", 1000.0), ("+3", 3), ("inf", "inf"), ("0", 0),
     ("0.0", 0.0), ("01.5", "01.5"), ("1_000", "1_000")],
)  # fmt: skip
def test_convert_value_edge_cases(text: str, expected: object) -> None:
    value = convert_value(text)
    assert value == expected and type(value) is type(expected)


def test_flag_groups_keep_the_exact_tokens() -> None:
    groups = flag_groups(["pos", "--a=1", "--b", "x", "y", "--c"])
    assert [(g.name, g.tokens, g.values, g.inline) for g in groups] == [
        (None, ["pos"], ["pos"], False),
        ("a", ["--a=1"], ["1"], True),
        ("b", ["--b", "x", "y"], ["x", "y"], False),
        ("c", ["--c"], [], False),
    ]


def test_ignored_settings_by_glob_and_by_run_id() -> None:
    run_id = "20261129-111354-a3f9"
    settings: dict[str, object] = {
        "lr": 1e-6,
        "save": "/ckpt",
        "load": "/ckpt",
        "ref-load": "/ref",
        "hf-checkpoint": "/models/qwen",
        "wandb-project": "p",
        "use-wandb": True,
        "tb-dir": "/tb",
        "save-debug-rollout-data": "/d/{rollout_id}.pt",
        "load-debug-rollout-data": "/d/{rollout_id}.pt",
        "dump-details": "/d",
        "output-name": f"run-{run_id}",
        "paths": ["/a", f"/x/{run_id}/y"],
        "seed": 1234,
        "debug-train-only": True,
    }
    ignored = ignored_settings(settings, run_id, extra_ignore=["seed"])
    assert ignored == set(settings) - {"lr", "debug-train-only"}
    assert "save" in DEFAULT_IGNORE
    assert ignored_settings({"lr": 1}, None) == set()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["python3", "train.py", "--lr", "1"], (["python3"], "train.py", ["--lr", "1"])),
        (["python", "-u", "train.py"], (["python", "-u"], "train.py", [])),
        (
            ["/usr/bin/python3.11", "-X", "dev", "-W", "ignore", "t.py", "-v"],
            (["/usr/bin/python3.11", "-X", "dev", "-W", "ignore"], "t.py", ["-v"]),
        ),
        (
            ["python3", "-Wignore::DeprecationWarning", "t.py"],
            (["python3", "-Wignore::DeprecationWarning"], "t.py", []),
        ),
        (
            ["python3", "-m", "miles.train", "--a", "1"],
            (["python3", "-m"], "miles.train", ["--a", "1"]),
        ),
        (["python3", "-mmiles.train", "--a"], (["python3", "-m"], "miles.train", ["--a"])),
        (["python3", "-um", "miles.train"], (["python3", "-um"], "miles.train", [])),
        (
            ["env", "A=1", "python3", "train.py", "--x"],
            (["env", "A=1", "python3"], "train.py", ["--x"]),
        ),
        (
            [
                "torchrun",
                "--nproc_per_node=8",
                "--nnodes",
                "1",
                "--standalone",
                "train.py",
                "--lr",
                "1",
            ],
            (
                ["torchrun", "--nproc_per_node=8", "--nnodes", "1", "--standalone"],
                "train.py",
                ["--lr", "1"],
            ),
        ),
        (
            ["python3", "-m", "torch.distributed.run", "--nproc_per_node", "2", "train.py", "--a"],
            (
                ["python3", "-m", "torch.distributed.run", "--nproc_per_node", "2"],
                "train.py",
                ["--a"],
            ),
        ),
        (["./train.py", "--lr", "1"], ([], "./train.py", ["--lr", "1"])),
        (["python3", "-c", "print(1)"], (["python3", "-c", "print(1)"], None, [])),
        (["bash", "run.sh"], (["bash", "run.sh"], None, [])),
        (["python3"], (["python3"], None, [])),
    ],
)
def test_split_training_command(argv: list[str], expected: tuple[list[str], str | None, list[str]]) -> None:
    assert split_training_command(argv) == expected
