"""A run's bulky outputs named in its training argv, and the debug flags ledger adds."""

from __future__ import annotations

import pytest

from ledger.data.outputs import (
    Output,
    find_outputs,
    inject_debug_flags,
    template_folder,
)


def test_find_outputs_reads_every_debug_flag() -> None:
    argv = [
        "python3", "train.py", "--lr", "1e-6",
        "--save-debug-rollout-data", "/data/run/rollout/{rollout_id}.pt",
        "--save-debug-event-data=/data/run/events/",
        "--save-debug-train-data", "/data/run/train/{rollout_id}_{rank}.pt",
        "--dump-details", "/data/details",
    ]  # fmt: skip
    assert find_outputs(argv) == [
        Output("rollout", "--save-debug-rollout-data", "/data/run/rollout/{rollout_id}.pt",
               "/data/run/rollout"),
        Output("events", "--save-debug-event-data", "/data/run/events/", "/data/run/events"),
        Output("train", "--save-debug-train-data", "/data/run/train/{rollout_id}_{rank}.pt",
               "/data/run/train"),
        Output("details", "--dump-details", "/data/details/trajectory/{rollout_id}.jsonl",
               "/data/details/trajectory"),
    ]  # fmt: skip


def test_dump_details_stands_for_each_dump_so_replay_finds_the_rollouts() -> None:
    # miles-facts.md: --dump-details DIR writes DIR/rollout_data/{rollout_id}.pt, DIR/events, ...
    argv = ["ray", "job", "submit", "--", "python3", "train.py", "--dump-details", "/d/x/"]
    assert [(o.role, o.template, o.path) for o in find_outputs(argv)] == [
        ("rollout", "/d/x/rollout_data/{rollout_id}.pt", "/d/x/rollout_data"),
        ("events", "/d/x/events", "/d/x/events"),
        ("train", "/d/x/train_data/{rollout_id}_{rank}.pt", "/d/x/train_data"),
        ("details", "/d/x/trajectory/{rollout_id}.jsonl", "/d/x/trajectory"),
    ]


def test_outputs_are_found_after_ray_job_submit_separator() -> None:
    # issue 9, item 3: flags after `ray job submit ... --` were never looked at
    argv = [
        "ray",
        "job",
        "submit",
        "--address",
        "http://127.0.0.1:1",
        "--",
        "python3",
        "train.py",
        "--save-debug-rollout-data",
        "/r/{rollout_id}.pt",
    ]
    assert [o.path for o in find_outputs(argv)] == ["/r"]


def test_a_flag_named_only_in_a_comment_does_not_count() -> None:
    # the bundled examples/run.sh mentions --save-debug-event-data in a comment (issue 9, item 4)
    text = '#!/bin/bash\n# add --save-debug-event-data DIR to keep events\npython3 train.py "$@"  # --save-debug-rollout-data\n'
    assert inject_debug_flags(["bash", "run.sh"], "/d", text)[1] == ["--save-debug-rollout-data", "--save-debug-event-data"]


def test_find_outputs_without_debug_flags_is_empty() -> None:
    assert find_outputs(["python3", "train.py", "--lr", "1", "--save", "/ckpt"]) == []


def test_the_last_occurrence_of_a_flag_wins() -> None:
    argv = ["--save-debug-event-data", "/a", "--save-debug-event-data", "/b"]
    assert [o.path for o in find_outputs(argv)] == ["/b"]


@pytest.mark.parametrize(
    ("template", "folder"),
    [
        ("/d/rollout/{rollout_id}.pt", "/d/rollout"),
        ("/d/{rollout_id}/data.pt", "/d"),
        ("/d/rollout_{rollout_id}.pt", "/d"),
        ("{rollout_id}.pt", "."),
        ("out/{rollout_id}.pt", "out"),
        ("/r_{rollout_id}.pt", "/"),
        ("/d/fixed.pt", "/d"),
    ],
)
def test_template_folder(template: str, folder: str) -> None:
    assert template_folder(template) == folder


def test_inject_adds_both_flags_when_none_is_set() -> None:
    argv = ["python3", "train.py", "--lr", "1"]
    new_argv, added = inject_debug_flags(argv, "/runs/.ledger/staging/x/data/")
    assert new_argv == [
        *argv,
        "--save-debug-rollout-data", "/runs/.ledger/staging/x/data/rollout/{rollout_id}.pt",
        "--save-debug-event-data", "/runs/.ledger/staging/x/data/events",
    ]  # fmt: skip
    assert added == ["--save-debug-rollout-data", "--save-debug-event-data"]
    assert argv == ["python3", "train.py", "--lr", "1"]  # the input is not changed
    outputs = find_outputs(new_argv)
    assert [o.path for o in outputs] == [
        "/runs/.ledger/staging/x/data/rollout",
        "/runs/.ledger/staging/x/data/events",
    ]


def test_inject_respects_flags_already_set_in_argv() -> None:
    argv = ["python3", "train.py", "--save-debug-rollout-data=/mine/{rollout_id}.pt"]
    new_argv, added = inject_debug_flags(argv, "/d")
    assert added == ["--save-debug-event-data"]
    assert new_argv == [*argv, "--save-debug-event-data", "/d/events"]


def test_inject_respects_flags_set_in_the_launcher_script() -> None:
    bash_text = 'ARGS+=(--save-debug-event-data "$OUT/events")\n'
    python_text = "args.save_debug_rollout_data = f'{out}/{{rollout_id}}.pt'\n"
    assert inject_debug_flags(["bash", "run.sh"], "/d", bash_text)[1] == ["--save-debug-rollout-data"]
    assert inject_debug_flags(["python3", "launch.py"], "/d", python_text)[1] == ["--save-debug-event-data"]


def test_inject_adds_nothing_under_dump_details() -> None:
    argv = ["python3", "train.py", "--dump-details", "/details"]
    assert inject_debug_flags(argv, "/d") == (argv, [])
    assert inject_debug_flags(["bash", "run.sh"], "/d", "--dump-details /x") == (
        ["bash", "run.sh"],
        [],
    )
