"""Per-step metrics from any trainer (issue 34, item 1): `key=value` / `key: value` step lines,
JSON lines (printed or in a file the command names), TensorBoard event files, Miles' metric events
of `--dump-details`; a run with none says so. Each source gets its metrics through a real
`ledger run` of a small trainer; the line shapes come from real trainers (named at each)."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import git, ledger, make_repo

from ledger.metrics.lineformats import may_hold_metrics, parse_line
from ledger.metrics.logparse import LogScan, last_step, parse_logs
from ledger.metrics.table import NO_METRICS
from ledger.metrics.tbevents import TensorBoardMissing, parse_event_files

# Real shapes, each as the program named prints it.
SHAPES = {
    # the trainer
    "issue 34": ("step 3: loss=0.41 reward=0.52 grad_norm=1.1", 3, {"loss": 0.41, "reward": 0.52, "grad_norm": 1.1}),
    # Megatron-LM's `training_log` (megatron/training/training.py): `|`-separated, keys of several words
    "megatron": (
        " [2026-05-01 10:00:00] iteration       10/     100 | consumed samples:          640 | elapsed time per iteration (ms): "
        "1234.5 | learning rate: 1.000000E-05 | global batch size:    64 | lm loss: 2.345678E+00 | loss scale: 1.0 | "
        "grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |",
        10,
        {
            "consumed samples": 640.0,
            "elapsed time per iteration (ms)": 1234.5,
            "learning rate": 1e-05,
            "global batch size": 64.0,
            "lm loss": 2.345678,
            "loss scale": 1.0,
            "grad norm": 1.234,
            "number of skipped iterations": 0.0,
            "number of nan iterations": 0.0,
        },
    ),
    # PyTorch Lightning's progress bar (TQDMProgressBar, its postfix of logged values)
    "lightning": ("Epoch 1: 100%|██████████| 10/10 [00:01<00:00,  8.53it/s, loss=0.412, v_num=0]", 1, {"loss": 0.412, "v_num": 0.0}),
    # a `key: value` logger line behind Python logging's default format, epoch and step both given
    "logging": ("2026-05-01 10:00:00,123 INFO train: epoch 2 step 150 | loss: -0.3 | kl: nan", 150, {"loss": -0.3, "kl": "nan"}),
    # a JSON line (nested dicts flattened) from a Ray actor, with Ray's prefix
    "json": ('(TrainActor pid=12) {"step": 2, "loss": 0.5, "train": {"reward": 0.25}}', 2, {"loss": 0.5, "train/reward": 0.25}),
    # W&B-style `_step` key
    "wandb step": ('{"_step": 7, "loss": 0.1, "lr": 3e-06}', 7, {"loss": 0.1, "lr": 3e-06}),
    # a Python dict printed after its step
    "dict after step": ("INFO step 4: {'train/loss': 0.31, 'train/kl': 0.002}", 4, {"train/loss": 0.31, "train/kl": 0.002}),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_metric_line_shapes_of_real_trainers_are_read(shape: str) -> None:
    line, step, metrics = SHAPES[shape]
    parsed = parse_line(line)
    assert parsed is not None
    assert parsed.step == step
    assert {k: (repr(v) if v != v else v) for k, v in parsed.metrics.items()} == metrics


@pytest.mark.parametrize(
    "line",
    [
        "Saving checkpoint at step 100 to /ckpt/iter_0000100",  # a step, no number beside it
        "step 5 took 3.2s, time: 12:30:01",  # units and clock times are not metrics
        "warmup_step: 100 lr: 0.1",  # a setting named like a step is no step
        # SGLang's engine line (miles-facts.md): numbers, but no step
        "[2026-04-15 07:57:53 TP0] Decode batch. #running-req: 32, #token: 9000, token usage: 0.05, gen throughput (token/s): 1234.5",
        'ENV_REPORT_JSON={"miles": {"commit": "abc", "dirty": false}}',
        '{"event": "start", "step": "warmup"}',
    ],
)
def test_lines_that_are_not_metric_lines(line: str) -> None:
    assert parse_line(line) is None


def test_the_prefilter_keeps_blocks_without_a_step_word_from_any_regex() -> None:
    assert not may_hold_metrics(b"[2026-04-15 07:57:53 TP0] Decode batch. #running-req: 32\n" * 100)
    assert may_hold_metrics(b"x\nStep 3: loss=1\n")


def test_a_log_with_miles_lines_keeps_only_them(tmp_path: Path) -> None:
    log = tmp_path / "trainer.log"
    log.write_text(
        "step 0: loss=9.0\n"
        "[2026-11-29 11:13:54.120 main] train.py:88 - step 0: {'train/loss': 0.31}\n"
        "[2026-11-29 11:13:55.120 main] rollout.py:9 - perf 0: {'perf/rollout_time': 3.5}\n"
        "step 1: loss=8.0\n"
    )
    table = parse_logs([log])
    assert table.train_steps == {0: {"train/loss": 0.31}}
    assert {k: r.metrics for k, r in table.rows.items()} == {0: {"perf/rollout_time": 3.5}}
    assert table.formats == ["miles"]


def test_other_formats_read_block_by_block_equal_one_pass(tmp_path: Path) -> None:
    lines = [f"[2026-05-01 10:00:{i % 60:02d}] step {i}: loss={1 / (i + 1):.4f} acc: {i / 100}" for i in range(300)]
    lines[40:40] = ['{"step": 40, "eval/acc": 0.5}', "noise " * 50]
    data = ("\n".join(lines) + "\n").encode()
    log = tmp_path / "trainer.log"
    log.write_bytes(data)
    whole = parse_logs([log])
    scan, at, base = LogScan(), 0, 0
    while at < len(data):  # whole lines at a time, as the streamed worker feeds them
        end = data.rfind(b"\n", at, at + 997) + 1 or data.find(b"\n", at) + 1
        scan.scan_bytes(data[at:end], log, base)
        base += data[at:end].count(b"\n")
        at = end
    streamed = scan.finish()
    assert {k: (r.t_start, r.t_end, r.metrics) for k, r in streamed.rows.items()} == {
        k: (r.t_start, r.t_end, r.metrics) for k, r in whole.rows.items()
    }
    assert len(whole.rows) == 300 and whole.rows[40].metrics["eval/acc"] == 0.5
    assert whole.formats == ["key-value lines", "json lines"]


def test_a_running_trainer_of_another_format_shows_its_current_step() -> None:
    tail = b"[2026-05-01 10:00:03] step 3: loss=0.5\n[2026-05-01 10:00:04] step 4: loss=0.4\nsaving at step 5\n"
    assert last_step(tail) == (4, "2026-05-01 10:00:04")  # what `ledger list` shows of a run in progress
    assert last_step(b"loading\n") is None


# --- through a real `ledger run` ----------------------------------------------------------------

KEY_VALUE_TRAINER = """
import argparse
ap = argparse.ArgumentParser()
ap.add_argument("--lr", type=float, default=0.1)
a = ap.parse_args()
print("starting")
for step in range(4):
    print(f"step {step}: loss={a.lr * (4 - step):.3f} reward={0.1 * step:.2f} grad_norm=1.1", flush=True)
"""

JSON_TRAINER = """
import json
for step in range(3):
    print(json.dumps({"step": step, "loss": 1.0 / (step + 1), "rollout": {"reward": 0.5 * step}}), flush=True)
"""

# writes its metrics to the file its --metrics-file flag names, prints nothing per step
METRICS_FILE_TRAINER = """
import argparse, json, os
ap = argparse.ArgumentParser()
ap.add_argument("--metrics-file")
a = ap.parse_args()
os.makedirs(os.path.dirname(a.metrics_file), exist_ok=True)
with open(a.metrics_file, "w") as f:
    for step in range(3):
        f.write(json.dumps({"iteration": step * 10, "loss": 2.0 - step}) + "\\n")
print("done")
"""

# Miles' TensorBoard layout (`--use-tensorboard`: tensorboard_log/<project>/<experiment>, miles-facts.md),
# written as torch's SummaryWriter writes it: TensorBoard's own EventFileWriter, one simple_value per
# add_scalar(tag, value, step)
TB_TRAINER = """
import argparse, os, time
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
ap = argparse.ArgumentParser()
ap.add_argument("--use-tensorboard", action="store_true")
ap.add_argument("--tb-project-name")
ap.add_argument("--tb-experiment-name")
a = ap.parse_args()
writer = EventFileWriter(os.path.join("tensorboard_log", a.tb_project_name, a.tb_experiment_name))
for step in range(3):
    for tag, value in (("train/loss", 1.0 / (step + 1)), ("rollout/raw_reward", 0.25 * step)):
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
        writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))
writer.close()
print("training done")
"""

# Miles' `--dump-details DIR` writes its metric events to DIR/events/<process>.jsonl (miles-facts.md);
# its log line for the same step says otherwise: the events win
DUMP_DETAILS_TRAINER = """
import argparse, json, os
ap = argparse.ArgumentParser()
ap.add_argument("--dump-details")
a = ap.parse_args()
os.makedirs(os.path.join(a.dump_details, "events"), exist_ok=True)
with open(os.path.join(a.dump_details, "events", "rollout_manager.jsonl"), "w") as f:
    for rid in range(2):
        f.write(json.dumps({"type": "metric", "rollout_id": rid, "metrics": {"rollout/raw_reward": 0.5 + rid}}) + "\\n")
print("[2026-11-29 11:13:54.120 main] rollout.py:9 - rollout 0: {'rollout/raw_reward': 9.0}")
"""

QUIET_TRAINER = """
print("loading the model")
print("training done in 3 steps")
"""


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    files = {
        "kv.py": KEY_VALUE_TRAINER,
        "js.py": JSON_TRAINER,
        "mf.py": METRICS_FILE_TRAINER,
        "tb.py": TB_TRAINER,
        "dd.py": DUMP_DETAILS_TRAINER,
        "quiet.py": QUIET_TRAINER,
        ".gitignore": "tensorboard_log/\nout/\ndump/\n",
    }
    return make_repo(tmp_path / "proj", {name: textwrap.dedent(text) for name, text in files.items()})


def _run(repo: Path, *argv: str) -> tuple[dict[str, dict[str, float]], str, str]:
    """`ledger run` a trainer: the recorded run's summary metrics (last values), its id, ledger's stderr."""
    proc = ledger(repo, "run", "--no-debug-data", "--no-heat-guard", "--", sys.executable, *argv)
    assert proc.returncode == 0, proc.stderr
    run_id = ledger(repo, "path", "latest").stdout.strip().rsplit("/", 1)[-1]
    listed = json.loads(ledger(repo, "list", "--json").stdout)
    metrics = next(r for r in listed if r["id"] == run_id)["metrics"]
    return {name: m["last"] for name, m in metrics.items()}, run_id, proc.stderr


def _export(repo: Path, run_id: str) -> list[dict[str, object]]:
    proc = ledger(repo, "export", run_id, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    rows: list[dict[str, object]] = json.loads(proc.stdout)
    return rows


def test_a_key_value_trainer_gets_its_metrics(proj: Path) -> None:
    last, run_id, err = _run(proj, "kv.py", "--lr", "0.5")
    assert last == {"loss": 0.5, "reward": 0.3, "grad_norm": 1.1}
    assert [r["loss"] for r in _export(proj, run_id)] == [2.0, 1.5, 1.0, 0.5]
    assert "no per-step metrics" not in err


def test_a_json_lines_trainer_gets_its_metrics(proj: Path) -> None:
    last, run_id, _ = _run(proj, "js.py")
    assert last == {"loss": pytest.approx(1 / 3), "rollout/reward": 1.0}
    assert [r["step"] for r in _export(proj, run_id)] == [0, 1, 2]


def test_a_metrics_file_named_by_a_flag_is_read(proj: Path) -> None:
    last, run_id, _ = _run(proj, "mf.py", "--metrics-file", "out/metrics.jsonl")
    assert last == {"loss": 0.0}
    assert [(r["step"], r["loss"]) for r in _export(proj, run_id)] == [(0, 2.0), (10, 1.0), (20, 0.0)]


def test_a_tensorboard_writing_trainer_gets_its_metrics_and_older_event_files_are_left_out(proj: Path) -> None:
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    folder = proj / "tensorboard_log" / "p" / "e"
    writer = EventFileWriter(str(folder), filename_suffix=".older")  # an earlier run's file in the same folder
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="train/stale", simple_value=9.0)])
    writer.add_event(event_pb2.Event(wall_time=time.time(), step=5, summary=summary))
    writer.close()
    (older,) = folder.iterdir()
    os.utime(older, (time.time() - 3600, time.time() - 3600))
    last, run_id, err = _run(proj, "tb.py", "--use-tensorboard", "--tb-project-name", "p", "--tb-experiment-name", "e")
    assert last == {"train/loss": pytest.approx(1 / 3), "rollout/raw_reward": 0.5}
    rows = _export(proj, run_id)
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert all(isinstance(r["t_end"], float) for r in rows)  # the events' wall times
    assert "tensorboard" not in err


def test_miles_metric_events_of_dump_details_are_read_and_win_over_the_log(proj: Path) -> None:
    last, _run_id, _ = _run(proj, "dd.py", "--dump-details", "dump")
    assert last == {"rollout/raw_reward": 1.5}
    path = ledger(proj, "path", "latest").stdout.strip()
    table = json.loads(git(proj, "show", f"experiments:{path}/metrics.jsonl").splitlines()[1])
    assert table["metrics"] == {"rollout/raw_reward": 0.5}  # the event's 0.5, not the log's 9.0


def test_a_trainer_without_per_step_metrics_is_told_in_one_line_naming_the_formats(proj: Path) -> None:
    last, _run_id, err = _run(proj, "quiet.py")
    assert last == {}
    said = [line for line in err.splitlines() if "per-step metrics" in line]
    assert said == [f"ledger: {NO_METRICS}"]
    for fmt in ("key=value", "key: value", "JSON lines", "TensorBoard", "--metrics-"):
        assert fmt in said[0]


def test_event_files_without_the_tensorboard_package_say_how_to_add_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # as if not installed: its import fails
    events = tmp_path / "tb" / "events.out.tfevents.1.host"
    events.parent.mkdir()
    events.write_bytes(b"")
    with pytest.raises(TensorBoardMissing) as err:
        parse_event_files([events])
    assert "tensorboard package is not installed" in err.value.message
    assert err.value.hint == "pip install 'ledger[tensorboard]'"


def test_the_no_metrics_line_and_the_formats_are_in_the_docs() -> None:
    from conftest import REPO_ROOT

    doc = (REPO_ROOT / "docs" / "recording.md").read_text()
    assert f"ledger: {NO_METRICS}" in doc
    for shape in ("step 3: loss=0.41 reward=0.52 grad_norm=1.1", "--use-tensorboard", "--dump-details", "--metrics-file"):
        assert shape in doc
