"""Miles log lines and debug events -> per-step metrics, and metrics.jsonl round trips."""

from __future__ import annotations

import calendar
import json
import math
from pathlib import Path

import pytest

from ledger.metrics import jsonl
from ledger.metrics.events import merge, parse_events
from ledger.metrics.jsonl import read_metrics_jsonl, write_metrics_jsonl
from ledger.metrics.logparse import parse_logs
from ledger.metrics.payloads import payload_numbers
from ledger.metrics.table import MetricsTable, StepRow


def utc(text: str) -> float:
    """Unix seconds of 'YYYY-MM-DD HH:MM:SS[.fff]' read as UTC."""
    whole, _, frac = text.partition(".")
    base = calendar.timegm(tuple(int(x) for x in whole.replace("-", " ").replace(":", " ").split()) + (0, 0, 0))
    return base + (int(frac) / 10 ** len(frac) if frac else 0.0)


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


OLD_STYLE = """\
+ ray job submit --address=http://127.0.0.1:8265 -- python3 train.py --lr 1e-6
[2026-04-15 07:50:00] train.py:40 - starting
(RolloutManager pid=1805485) [2026-04-15 07:57:53] rollout.py:1193 - perf 0: {'rollout/response_len/mean': 2773.7, 'perf/rollout_time': 371.18}
(MegatronTrainRayActor pid=2001) [2026-04-15 07:58:10] model.py:500 - step 0: {'train/loss': 0.5, 'train/grad_norm': 1.25}
(MegatronTrainRayActor pid=2001) [2026-04-15 07:58:10] model.py:500 - step 0: {'train/loss': 0.5, 'train/grad_norm': 1.25}
(MegatronTrainRayActor pid=2001) [2026-04-15 07:58:12] actor.py:300 - perf 0: {'perf/train_time': 15.5, 'perf/step_time': 17.0}
(RolloutManager pid=1805485) [2026-04-15 07:58:13] rollout.py:1180 - rollout 0: {'rollout/raw_reward': 0.25}
(RolloutManager pid=1805485) [2026-04-15 08:04:00] rollout.py:1193 - perf 1: {'rollout/response_len/mean': 2800.0, 'perf/rollout_time': 340.0}
(MegatronTrainRayActor pid=2001) [2026-04-15 08:04:20] actor.py:300 - perf 1: {'perf/train_time': 14.0, 'perf/update_weights_time': 3.5}
"""

NEW_STYLE = """\
[2026-11-29 11:13:54.120 main] train.py:88 - Timer train start
(RolloutManager pid=77, ip=10.0.0.2) [2026-11-29 11:20:00.500 rollout_manager] rollout.py:1193 - perf 3: {'perf/rollout_time': 300.5}
(MegatronTrainRayActor pid=78, ip=10.0.0.2) [2026-11-29 11:20:30.250 actor_cell0_rank0] actor.py:300 - perf 3: {'perf/train_time': 20.0}
[2026-11-29 11:21:00.000 main] train.py:120 - eval 3: {'aime': 0.4, 'eval/gsm8k': 0.8}
"""


def test_old_prefix_lines_merge_perf_per_rollout_and_keep_train_steps_apart(
    tmp_path: Path,
) -> None:
    table = parse_logs([write(tmp_path / "trainer.log", OLD_STYLE)])
    assert sorted(table.rows) == [0, 1]
    assert table.rows[0].metrics == {
        "rollout/response_len/mean": 2773.7,
        "perf/rollout_time": 371.18,
        "perf/train_time": 15.5,
        "perf/step_time": 17.0,
        "rollout/raw_reward": 0.25,
    }
    assert table.rows[1].metrics["perf/update_weights_time"] == 3.5
    # `step 0` was logged twice: one train step, and none of its keys leak into the rows
    assert table.train_steps == {0: {"train/loss": 0.5, "train/grad_norm": 1.25}}
    assert "train/loss" not in table.rows[0].metrics
    assert table.malformed == 0


def test_row_times_come_from_last_line_and_previous_row(tmp_path: Path) -> None:
    table = parse_logs([write(tmp_path / "trainer.log", OLD_STYLE)])
    first_line = utc("2026-04-15 07:50:00")
    assert table.rows[0].t_start == first_line
    assert table.rows[0].t_end == utc("2026-04-15 07:58:13")  # the rollout 0 line is its last
    assert table.rows[1].t_start == table.rows[0].t_end
    assert table.rows[1].t_end == utc("2026-04-15 08:04:20")


def test_new_prefix_with_millis_process_and_ray_ip(tmp_path: Path) -> None:
    table = parse_logs([write(tmp_path / "trainer.log", NEW_STYLE)])
    row = table.rows[3]
    assert row.metrics == {
        "perf/rollout_time": 300.5,
        "perf/train_time": 20.0,
        "eval/aime": 0.4,  # prefixed
        "eval/gsm8k": 0.8,  # already prefixed, not doubled
    }
    assert row.t_start == utc("2026-11-29 11:13:54.120")
    assert row.t_end == utc("2026-11-29 11:21:00.000")


def test_several_files_merge_on_rollout_id(tmp_path: Path) -> None:
    trainer = write(
        tmp_path / "trainer.log",
        "[2026-11-29 11:00:10.000 actor] actor.py:1 - perf 0: {'perf/train_time': 2.0}\n",
    )
    engine = write(
        tmp_path / "engine.log",
        "[2026-11-29 11:00:00.000 TP0] Decode batch. #running-req: 3\n"
        "(RolloutManager pid=5) [2026-11-29 11:00:05.000 rm] rollout.py:2 - perf 0: {'perf/rollout_time': 4.0}\n",
    )
    table = parse_logs([trainer, engine, tmp_path / "missing.log"])
    assert table.rows[0].metrics == {"perf/train_time": 2.0, "perf/rollout_time": 4.0}
    assert table.rows[0].t_start == utc("2026-11-29 11:00:00")  # earliest line of any file
    assert table.rows[0].t_end == utc("2026-11-29 11:00:10")
    assert table.sources == [str(trainer), str(engine)]


def test_malformed_payload_and_truncated_last_line_are_counted_not_fatal(
    tmp_path: Path,
) -> None:
    text = (
        "[2026-04-15 07:57:53] rollout.py:1193 - perf 0: {'perf/rollout_time': 10.0}\n"
        "[2026-04-15 07:57:54] rollout.py:1193 - perf 1: {'perf/rollout_time': oops}\n"
        "[2026-04-15 07:57:55] rollout.py:1193 - perf 2: ['not', 'a', 'dict']\n"
        "[2026-04-15 07:57:56] rollout.py:1193 - perf 3: {'perf/rollout_time': 13.0}\n"
        "[2026-04-15 07:57:57] rollout.py:1193 - perf 4: {'perf/rollout_ti"
    )
    table = parse_logs([write(tmp_path / "trainer.log", text)])
    assert sorted(table.rows) == [0, 3]
    assert table.malformed == 3
    assert table.malformed_examples == [
        "trainer.log:2: perf 1: payload is not a dict literal",
        "trainer.log:3: perf 2: payload is not a dict literal",
        "trainer.log:5: perf 4: truncated last line",
    ]


def test_invalid_utf8_is_tolerated(tmp_path: Path) -> None:
    data = (
        b"\xff\xfe\x00 binary junk from a crashed process\n"
        b"[2026-04-15 07:57:53] rollout.py:1 - perf 0: {'perf/rollout_time': 5.0, 'note\xe9': 1.0}\n"
        b"more junk \xc3\x28 - perf 9: {'perf/rollout_time': 99.0}\n"
    )
    table = parse_logs([write(tmp_path / "trainer.log", data)])
    assert list(table.rows) == [0]  # the junk line has no Miles prefix: not a metrics line
    assert table.rows[0].metrics["perf/rollout_time"] == 5.0
    assert len(table.rows[0].metrics) == 2
    assert table.malformed == 0


def test_python_reprs_that_are_not_literals(tmp_path: Path) -> None:
    text = (
        "[2026-04-15 07:57:53] actor.py:1 - perf 0: "
        "{'perf/train_time': np.float64(1.5), 'train/grad_norm': nan, 'x': -inf, 'ok': True, 'name': 'a'}"
        " [repeated 2x across cluster]\n"
    )
    metrics = parse_logs([write(tmp_path / "trainer.log", text)]).rows[0].metrics
    assert metrics["perf/train_time"] == 1.5
    assert math.isnan(metrics["train/grad_norm"])
    assert metrics["x"] == -math.inf
    assert "ok" not in metrics and "name" not in metrics  # only numbers are metrics


def test_look_alike_messages_without_miles_prefix_are_ignored(tmp_path: Path) -> None:
    text = "INFO:     127.0.0.1:5000 - perf 1: {'perf/rollout_time': 1.0}\n[2026-04-15 07:57:53 TP0] Decode batch - step 4: {'a': 1}\n"
    table = parse_logs([write(tmp_path / "engine.log", text)])
    assert table.rows == {} and table.train_steps == {} and table.malformed == 0


def events_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "events"
    directory.mkdir()
    lines = [
        {
            "type": "metric",
            "rollout_id": 0,
            "metrics": {"perf/rollout_time": 370.0, "perf/extra": 1.0},
        },
        {"type": "span", "name": "generate", "rollout_id": 0},
        {"type": "metric", "rollout_id": 2, "metrics": {"perf/rollout_time": 300.0}},
        {"type": "metric", "step": 7, "metrics": {"train/loss": 0.25}},
        {"type": "metric", "rollout_id": "eval_0", "metrics": {"eval/x": 1.0}},
    ]
    text = "\n".join(json.dumps(x) for x in lines) + '\n{"type": "metric", "rollout_id": 1, "metr\n'
    write(directory / "rollout_manager.jsonl", text)
    write(
        directory / "notes.txt",
        '{"type": "metric", "rollout_id": 5, "metrics": {"a": 1}}\n',
    )
    return directory


def test_events_parse_and_win_over_log_metrics(tmp_path: Path) -> None:
    logs = parse_logs([write(tmp_path / "trainer.log", OLD_STYLE)])
    events = parse_events(events_dir(tmp_path))
    assert sorted(events.rows) == [0, 2]
    assert events.train_steps == {7: {"train/loss": 0.25}}
    assert events.malformed == 1
    assert events.malformed_examples == ["rollout_manager.jsonl:6: not a JSON object"]

    table = merge(logs, events)
    assert table.rows[0].metrics["perf/rollout_time"] == 370.0  # event wins
    assert table.rows[0].metrics["perf/train_time"] == 15.5  # log-only metric kept
    assert table.rows[0].metrics["perf/extra"] == 1.0
    assert table.rows[0].t_end == logs.rows[0].t_end  # times from the logs
    assert sorted(table.rows) == [0, 1, 2]
    assert table.rows[2].t_end is None  # an event-only row has no log times
    assert sorted(table.train_steps) == [0, 7]
    assert table.malformed == 1


def test_missing_events_dir_gives_empty_table(tmp_path: Path) -> None:
    table = parse_events(tmp_path / "nope")
    assert table.rows == {} and table.malformed == 0


def test_metrics_jsonl_round_trip(tmp_path: Path) -> None:
    table = MetricsTable(
        rows={
            1: StepRow(
                1,
                100.0,
                110.5,
                {"perf/rollout_time": 1e-06, "train/grad_norm": math.nan},
            ),
            0: StepRow(0, None, 100.0, {"perf/rollout_time": 2.5}),
        },
        train_steps={3: {"train/loss": 0.125}},
        malformed=2,
        malformed_examples=["trainer.log:9: perf 4: truncated last line"],
        sources=["trainer.log"],
    )
    path = tmp_path / "metrics.jsonl"
    write_metrics_jsonl(path, table)
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["meta"]["version"] == 1
    assert [json.loads(x).get("rollout_id") for x in lines[1:3]] == [
        0,
        1,
    ]  # sorted by id
    assert "NaN" not in path.read_text()  # strict JSON

    back = read_metrics_jsonl(path)
    assert list(back.rows) == [0, 1]
    assert back.rows[1].t_start == 100.0 and back.rows[0].t_start is None
    assert back.rows[1].metrics["perf/rollout_time"] == 1e-06
    assert math.isnan(back.rows[1].metrics["train/grad_norm"])
    assert back.train_steps == {3: {"train/loss": 0.125}}
    assert back.malformed == 2 and back.malformed_examples == table.malformed_examples
    assert back.sources == ["trainer.log"]


def test_metrics_jsonl_with_a_damaged_line_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    write_metrics_jsonl(path, MetricsTable(rows={0: StepRow(0, 1.0, 2.0, {"m": 1.0})}))
    with open(path, "a") as fh:
        fh.write('{"rollout_id": 1, "metr\n\n')
    back = read_metrics_jsonl(path)
    assert list(back.rows) == [0]
    assert back.malformed == 1


@pytest.mark.parametrize(
    "prefix",
    [
        "",
        "(RolloutManager pid=1)",
        "(RolloutManager pid=1, ip=1.2.3.4)",
        "\x1b[36m(RolloutManager pid=1, ip=1.2.3.4)\x1b[0m",  # Ray colours actor names on a terminal
    ],
)
def test_ray_prefix_variants(tmp_path: Path, prefix: str) -> None:
    line = f"{prefix} [2026-04-15 07:57:53] rollout.py:1 - perf 5: {{'perf/rollout_time': 1.0}}\n".lstrip()
    table = parse_logs([write(tmp_path / "t.log", line)])
    assert table.rows[5].metrics == {"perf/rollout_time": 1.0}


def test_crlf_line_endings(tmp_path: Path) -> None:
    text = "[2026-04-15 07:57:53] rollout.py:1 - perf 0: {'perf/rollout_time': 1.0}\r\n" * 2
    table = parse_logs([write(tmp_path / "t.log", text)])
    assert table.rows[0].metrics == {"perf/rollout_time": 1.0} and table.malformed == 0


def test_critic_multi_turn_and_coloured_repeated_lines(tmp_path: Path) -> None:
    # shapes: miles-facts.md "More per-step lines" and Ray's dedup summary with colour codes
    log = write(
        tmp_path / "trainer.log",
        (
            "\x1b[36m(MegatronTrainRayActor pid=9)\x1b[0m [2026-04-15 07:58:10] model.py:500 - critic-step 3: {'value_loss': 0.25}\n"
            "\x1b[36m(RolloutManager pid=7)\x1b[0m [2026-04-15 07:58:11] rollout.py:9 - multi_turn 3: {'num_turns': 2.5}\n"
            "\x1b[36m(RolloutManager pid=7)\x1b[0m [2026-04-15 07:58:12] rollout.py:9 - perf 3: {'perf/rollout_time': 4.0}\x1b[32m [repeated 2x across cluster]\x1b[0m\n"
        ),
    )
    table = parse_logs([log])
    assert table.malformed == 0
    assert table.train_steps == {3: {"critic/value_loss": 0.25}}
    assert table.rows[3].metrics == {"multi_turn/num_turns": 2.5, "perf/rollout_time": 4.0}


# Payload spellings a block may mix: JSON-shaped ones take one parse per block, the rest the
# per-line path; each line must read exactly as it does alone.
PAYLOADS = [
    "{'a': 1, 'b': 2.5, 'c': -0.125, 'd': 1e-05, 'e': 3E+2}",
    "{'a': 1., 'b': .5, 'c': 007}",  # Python's spellings that are not JSON numbers
    "{'a': nan, 'b': -inf, 'c': np.float64(2.5)}",
    "{'ключ': 1.0, 'it\"s': 2.0, 'tab\there': 3.0}",  # keys that are not plain ASCII
    "{'a': 123456789012345678901234567890, 'b': 1e999}",
    "{'a': 1, 'a': 2}",
    "{}",
    "{'a': True, 'b': 'text', 'c': [1, 2], 'd': None}",
    "{'a': 1.5}  ",
    "not a dict",
]


def test_payloads_read_the_same_in_a_block_as_alone(tmp_path: Path) -> None:
    lines = [f"[2026-04-15 07:57:{i:02d}.5 main] train.py:1 - perf {i}: {p}\n" for i, p in enumerate(PAYLOADS)]
    together = parse_logs([write(tmp_path / "trainer.log", "".join(lines * 3))])
    for i, line in enumerate(lines):
        alone = parse_logs([write(tmp_path / f"alone{i}.log", line)])
        if i == len(lines) - 1:
            assert not alone.rows and alone.malformed == 1
            continue
        got, want = together.rows[i].metrics, alone.rows[i].metrics
        assert list(got) == list(want) == list(payload_numbers(PAYLOADS[i].strip()) or {})  # the per-line reading
        assert all(math.isnan(w) if math.isnan(w) else g == w and type(g) is float for g, w in zip(got.values(), want.values()))
        assert together.rows[i].t_end == alone.rows[i].t_end == utc(f"2026-04-15 07:57:{i:02d}.5")
    assert together.malformed == 3
    assert together.rows[0].metrics == {"a": 1.0, "b": 2.5, "c": -0.125, "d": 1e-05, "e": 300.0}
    assert together.rows[4].metrics == {"a": 1.2345678901234568e29, "b": math.inf}


def test_a_block_read_at_once_equals_it_read_line_by_line(tmp_path: Path) -> None:
    # the shapes a Miles block mixes: Ray prefixes (coloured, with ip), millis or none, `T`, kinds
    heads = [
        "(RolloutManager pid=1) [2026-04-15 07:57:53] rollout.py:1193",
        "\x1b[36m(MegatronTrainRayActor pid=2, ip=10.0.0.2)\x1b[0m [2026-04-15 07:57:54.25 actor] model.py:5",
        "[2026-04-15T07:57:55,5 main] train.py:88",
        "(X pid=3)\t [2026-04-15 07:57:55.123456] a/b-c.py:1",
    ]
    kinds = ["perf", "rollout", "step", "eval", "critic-step", "multi_turn"]
    lines = [f"{heads[i % 4]} - {kinds[i % 6]} {i // 3}: {{'m{i % 5}': {i}.5, 'loss': -{i}e-3}}\n" for i in range(120)]
    data = "".join(["plain line - perf 1: {'not': 1}\n", *lines, "(SGLangEngine pid=1) [2026-04-15 07:58:00 TP0] Decode\n"]).encode()
    from ledger.metrics.logparse import LogScan

    at_once, by_line = LogScan(), LogScan()
    at_once.scan_bytes(data, tmp_path / "trainer.log")
    by_line._line_by_line(data, tmp_path / "trainer.log", 0)
    by_line.first_ts = at_once.first_ts
    a, b = at_once.finish(), by_line.finish()
    assert a.rows == b.rows and a.train_steps == b.train_steps and a.formats == b.formats == ["miles"]
    assert len(a.rows) == 40 and a.malformed == 0


def test_a_file_ledger_wrote_reads_in_one_pass_as_line_by_line(tmp_path: Path) -> None:
    """The one-pass decoding (msgspec) takes exactly the files `write_metrics_jsonl` writes and
    gives the table the line-by-line reading gives; any other line sends the file down that path."""
    table = MetricsTable(sources=["trainer.log"], malformed=2, malformed_examples=["trainer.log:3: x"], formats=["miles"])
    table.rows = {
        0: StepRow(0, None, 10.0, {"perf/rollout_time": 1.5, "x": math.nan}),
        1: StepRow(1, 10.0, 20.5, {"perf/rollout_time": 2.0}),
    }
    table.train_steps = {0: {"train/loss": 0.5}, 3: {"train/loss": 0.25}}
    write_metrics_jsonl(tmp_path / "m.jsonl", table)
    raw = (tmp_path / "m.jsonl").read_bytes()
    clean = raw.replace(b', "x": null', b"")  # no null: the one-pass shape
    assert jsonl._plain_table(clean, "m") is not None
    for text in (raw, clean):
        slow = text.replace(b"\n", b"\n\n", 1)  # a blank line: read line by line
        assert jsonl._plain_table(slow, "m") is None
        assert _same(jsonl.metrics_from_bytes(text, "m"), jsonl.metrics_from_bytes(slow, "m"))
    for odd, malformed in (
        (b'{"rollout_id": true, "metrics": {}}', 3),  # the meta's 2, and this line
        (b'{"rollout_id": 2, "metrics": {"a": "1"}}', 3),
        (b'{"train_step": 1, "t_end": 3, "metrics": {}}', 2),  # not ledger's shape, but readable
    ):
        text = clean + odd + b"\n"
        assert jsonl._plain_table(text, "m") is None
        assert jsonl.metrics_from_bytes(text, "m").malformed == malformed


def _same(x: MetricsTable, y: MetricsTable) -> bool:
    """Equal tables, nan equal to nan."""

    def rows(t: MetricsTable) -> list[object]:
        return [(n, r.t_start, r.t_end, repr(r.metrics)) for n, r in t.rows.items()]

    return (
        rows(x) == rows(y)
        and repr(x.train_steps) == repr(y.train_steps)
        and (x.malformed, x.malformed_examples, x.sources, x.formats)
        == (
            y.malformed,
            y.malformed_examples,
            y.sources,
            y.formats,
        )
    )
