"""The bundled toy trainer (examples/toy_grpo): real processes, real files, Miles' formats."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

TOY = Path(__file__).resolve().parents[1] / "examples" / "toy_grpo"
SMALL = [
    "--num-rollout",
    "3",
    "--rollout-batch-size",
    "4",
    "--n-samples-per-prompt",
    "4",
]
ROLLOUT_PERF_KEYS = {
    "perf/rollout_time",
    "rollout/response_len/mean",
    "rollout/response_len/median",
    "rollout/response_len/max",
    "rollout/response_len/min",
    "perf/tokens_per_gpu_per_sec",
}
TRAIN_PERF_KEYS = {
    "perf/train_time",
    "perf/train_wait_time",
    "perf/step_time",
    "perf/actor_train_time",
    "perf/log_probs_time",
    "perf/update_weights_time",
}
MILES_LINE = re.compile(
    r"^(?:\((?P<actor>\w+) pid=(?P<pid>\d+)\) )?"
    r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} (?P<process>\w+)\] \w+\.py:\d+ - (?P<msg>.*)$"
)
ENGINE_LINE = re.compile(
    r"^\(SGLangEngine pid=(?P<pid>\d+)\) "
    r"(?:\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP0\] .+|INFO: .+|ENV_REPORT_JSON=\{.*\})$"
)
PAYLOAD = re.compile(r"^(?P<kind>perf|rollout|step|eval) (?P<id>\d+): (?P<dict>\{.*\})$")
TRAINED = re.compile(r"^trained on rollout (\d+): samples_sha256=([0-9a-f]{64})$")


@dataclass
class Payload:
    """One `kind <id>: {...}` log line."""

    actor: str | None
    kind: str
    id: int
    metrics: dict[str, Any]


def run_toy(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run train.py with `args`; stdout and stderr captured."""
    env = {k: v for k, v in os.environ.items() if k != "WANDB_API_KEY"}
    return subprocess.run(
        [sys.executable, str(TOY / "train.py"), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
    )


def ok(*args: str) -> str:
    """Run train.py, insist on exit 0, return its stdout."""
    done = run_toy(*args)
    assert done.returncode == 0, done.stderr + done.stdout[-3000:]
    return done.stdout


def messages(stdout: str) -> list[re.Match[str]]:
    """The Miles-format lines of a log."""
    return [m for m in map(MILES_LINE.match, stdout.splitlines()) if m]


def payloads(stdout: str, kind: str) -> list[Payload]:
    """Every `kind <id>: {...}` line, in order, with its dict parsed as a literal."""
    found = []
    for m in messages(stdout):
        p = PAYLOAD.match(m["msg"])
        if p and p["kind"] == kind:
            found.append(Payload(m["actor"], kind, int(p["id"]), ast.literal_eval(p["dict"])))
    return found


def trained_hashes(stdout: str) -> dict[int, str]:
    """Rollout id -> samples hash, from the `trained on rollout` lines."""
    hits = [TRAINED.match(m["msg"]) for m in messages(stdout)]
    return {int(h[1]): h[2] for h in hits if h}


def losses(stdout: str) -> list[float]:
    """`train/loss` of every step line (each logged twice)."""
    return [p.metrics["train/loss"] for p in payloads(stdout, "step")]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One small run with every debug output on, shared by the format tests."""
    root = tmp_path_factory.mktemp("toy")
    template = str(root / "rollouts" / "{rollout_id}.json")
    stdout = ok(
        *SMALL,
        "--save-debug-rollout-data",
        template,
        "--save-debug-event-data",
        str(root / "events"),
        "--eval-interval",
        "2",
        "--env-report",
        '{"x": 1}',
    )
    return {"root": root, "template": template, "stdout": stdout}


def test_every_line_has_a_known_format(base: dict[str, Any]) -> None:
    lines = base["stdout"].splitlines()
    engine = [line for line in lines if line.startswith("(SGLangEngine")]
    others = [line for line in lines if not line.startswith("(SGLangEngine")]
    assert all(ENGINE_LINE.match(line) for line in engine), engine[:3]
    assert any("Decode batch. #running-req: " in line and "gen throughput (token/s): " in line for line in engine)
    assert all(MILES_LINE.match(line) or line.startswith("ENV_REPORT_JSON={") for line in others)
    manager_pids = {m["pid"] for m in messages(base["stdout"]) if m["actor"] == "RolloutManager"}
    engine_pids = {ENGINE_LINE.match(line)["pid"] for line in engine}  # type: ignore[index]
    assert len(engine_pids) == 1 and engine_pids.isdisjoint(manager_pids)


def test_perf_lines_twice_per_rollout_with_their_keys(base: dict[str, Any]) -> None:
    perf = payloads(base["stdout"], "perf")
    assert sorted(p.id for p in perf) == [0, 0, 1, 1, 2, 2]
    for p in perf:
        if p.actor == "RolloutManager":
            assert set(p.metrics) == ROLLOUT_PERF_KEYS
        else:
            assert p.actor is None and set(p.metrics) == TRAIN_PERF_KEYS
            assert p.metrics["perf/step_time"] == pytest.approx(p.metrics["perf/train_wait_time"] + p.metrics["perf/train_time"])
    assert [p.id for p in payloads(base["stdout"], "rollout")] == [0, 1, 2]
    assert [p.id for p in payloads(base["stdout"], "eval")] == [1]


def test_step_lines_are_logged_twice(base: dict[str, Any]) -> None:
    steps = payloads(base["stdout"], "step")
    assert [p.id for p in steps] == [0, 0, 1, 1, 2, 2]
    assert steps[0].metrics == steps[1].metrics
    assert {"train/loss", "train/grad_norm", "train/reward_mean"} <= set(steps[0].metrics)
    timers = [m["msg"] for m in messages(base["stdout"]) if m["msg"].startswith("Timer train")]
    assert timers[0] == "Timer train start"
    assert re.fullmatch(r"Timer train end \(elapsed: \d+\.\d+s\)", timers[1])


def test_saved_rollouts_hash_to_the_trained_on_lines(base: dict[str, Any]) -> None:
    hashes = trained_hashes(base["stdout"])
    assert sorted(hashes) == [0, 1, 2]
    for rollout_id, digest in hashes.items():
        data = json.loads(Path(base["template"].format(rollout_id=rollout_id)).read_text())
        assert data["rollout_id"] == rollout_id and data["metadata"]["seed"] == 1234
        assert len(data["samples"]) == 16
        text = json.dumps(data["samples"], sort_keys=True, separators=(",", ":"))
        assert hashlib.sha256(text.encode()).hexdigest() == digest
    assert Path(base["template"].format(rollout_id="eval_1")).is_file()


def test_event_data_repeats_every_logged_metrics_dict(base: dict[str, Any]) -> None:
    events = base["root"] / "events"
    main = [json.loads(line) for line in (events / "main.jsonl").read_text().splitlines()]
    manager = [json.loads(line) for line in (events / "rollout_manager.jsonl").read_text().splitlines()]
    assert all(e["type"] == "metric" and isinstance(e["time"], float) for e in main + manager)
    logged_main = [p for kind in ("step", "perf") for p in payloads(base["stdout"], kind) if p.actor is None]
    logged_manager = [p for kind in ("perf", "rollout", "eval") for p in payloads(base["stdout"], kind) if p.actor == "RolloutManager"]
    steps = {json.dumps(p.metrics) for p in logged_main if p.kind == "step"}
    assert len(main) == len(steps) + 3  # step lines are logged twice but recorded once
    assert {json.dumps(e["metrics"]) for e in main} == {json.dumps(p.metrics) for p in logged_main}
    assert sorted(json.dumps(e["metrics"]) for e in manager) == sorted(json.dumps(p.metrics) for p in logged_manager)


def test_env_report_comes_from_both_sides(base: dict[str, Any]) -> None:
    reports = [line for line in base["stdout"].splitlines() if "ENV_REPORT_JSON=" in line]
    assert len(reports) == 2
    parsed = {json.loads(line.split("ENV_REPORT_JSON=", 1)[1])["role"]: line for line in reports}
    assert parsed["main"].startswith("ENV_REPORT_JSON=")
    assert parsed["sglang_engine"].startswith("(SGLangEngine pid=")
    report = json.loads(parsed["main"].split("=", 1)[1])
    assert report["request"] == {"x": 1} and "numpy" in report["pip_list"]


def test_answers_shorten_as_training_goes_on() -> None:
    perf = [p.metrics for p in payloads(ok("--num-rollout", "10"), "perf") if "rollout/response_len/mean" in p.metrics]
    early = sum(m["rollout/response_len/mean"] for m in perf[:2]) / 2
    late = sum(m["rollout/response_len/mean"] for m in perf[-2:]) / 2
    assert late < early / 2


def test_same_seeds_give_the_same_samples_and_losses(base: dict[str, Any]) -> None:
    plain = ok(*SMALL)  # the base run's debug outputs must not change the training either
    assert trained_hashes(plain) == trained_hashes(base["stdout"])
    assert losses(plain) == losses(base["stdout"])
    other = ok(*SMALL, "--rollout-seed", "7")
    assert trained_hashes(other)[0] != trained_hashes(plain)[0]


def test_replay_trains_on_identical_samples(base: dict[str, Any]) -> None:
    replay = ok(*SMALL, "--load-debug-rollout-data", base["template"])
    assert trained_hashes(replay) == trained_hashes(base["stdout"])
    assert losses(replay) == losses(base["stdout"])
    assert "SGLangEngine" not in replay and "perf/rollout_time" not in replay
    assert all(p.actor is None for p in payloads(replay, "perf"))
    assert [p.id for p in payloads(replay, "rollout")] == [0, 1, 2]


def test_one_rollout_replays_as_rollout_zero(base: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "0.json").symlink_to(base["template"].format(rollout_id=2))
    replay = ok(
        "--num-rollout",
        "1",
        "--load-debug-rollout-data",
        str(tmp_path / "{rollout_id}.json"),
    )
    assert trained_hashes(replay) == {0: trained_hashes(base["stdout"])[2]}


def test_missing_rollout_file_exits_1_naming_it(tmp_path: Path) -> None:
    done = run_toy("--load-debug-rollout-data", str(tmp_path / "r{rollout_id}.json"))
    assert done.returncode == 1
    expected = f"train.py: error: rollout data file not found: {tmp_path / 'r0.json'} (--load-debug-rollout-data, rollout 0)"
    assert done.stderr.strip().splitlines() == [expected]


def test_rollout_only_samples_and_saves_without_training(base: dict[str, Any], tmp_path: Path) -> None:
    template = str(tmp_path / "deep" / "er" / "{rollout_id}.json")
    stdout = ok(*SMALL, "--debug-rollout-only", "--save-debug-rollout-data", template)
    assert not payloads(stdout, "step") and not trained_hashes(stdout)
    assert all(p.actor == "RolloutManager" for p in payloads(stdout, "perf"))
    assert len(payloads(stdout, "perf")) == 3
    # Nothing trained, so rollout 0 (sampled before any update) matches the training run's.
    first = json.loads(Path(template.format(rollout_id=0)).read_text())
    assert first == json.loads(Path(base["template"].format(rollout_id=0)).read_text())


def test_offload_adds_a_weight_move_to_update_weights_time() -> None:
    def offload_line(stdout: str) -> str:
        return next(m["msg"] for m in messages(stdout) if m["msg"].startswith("offload:"))

    colocated = ok(*SMALL, "--colocate")
    line = offload_line(colocated)
    assert line.startswith("offload: train=True rollout=True")
    move = float(re.search(r"simulated weight move: ([\d.]+)s", line)[1])  # type: ignore[index]
    trainer_perf = [p.metrics for p in payloads(colocated, "perf") if p.actor is None]
    # A sleep never ends early, so the simulated move is a lower bound of every update.
    assert all(m["perf/update_weights_time"] >= move for m in trainer_perf)
    assert "Resume memory occupation" in colocated
    assert offload_line(ok(*SMALL, "--num-rollout", "1")).startswith("offload: train=False rollout=False")
    negated = ok(*SMALL, "--num-rollout", "1", "--colocate", "--no-offload-train")
    assert offload_line(negated).startswith("offload: train=False rollout=True")


@pytest.mark.parametrize(
    "args",
    [
        ["--no-such-flag"],
        ["--num-rollout", "three"],
        ["--debug-train-only"],
        ["--debug-train-only", "--debug-rollout-only"],
        ["--save-debug-rollout-data", "out/{id}.json"],
        ["--save-debug-rollout-data", "out/rollout.json"],
        ["--load-debug-rollout-data", "{rollout_id}.json", "--debug-rollout-only"],
        ["--env-report", "[1]"],
    ],
)
def test_bad_usage_exits_2_before_starting(args: list[str], tmp_path: Path) -> None:
    done = run_toy(*args, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""  # no engine was started
    assert done.stderr.strip().splitlines()[-1].startswith("train.py: error: ")
    assert not (tmp_path / "out").exists()


def test_start_rollout_id_without_checkpoint_is_reset_to_zero(tmp_path: Path) -> None:
    stdout = ok(*SMALL, "--num-rollout", "1", "--start-rollout-id", "5", "--load", str(tmp_path))
    assert any("--start-rollout-id 5 ignored" in m["msg"] for m in messages(stdout))
    assert sorted(trained_hashes(stdout)) == [0]


def test_resuming_from_a_checkpoint_continues_the_run(base: dict[str, Any], tmp_path: Path) -> None:
    ckpt = str(tmp_path / "ckpt")
    ok(*SMALL, "--num-rollout", "2", "--save", ckpt)
    assert (tmp_path / "ckpt" / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    resumed = ok(*SMALL, "--load", ckpt)
    assert trained_hashes(resumed) == {2: trained_hashes(base["stdout"])[2]}
    assert losses(resumed) == losses(base["stdout"])[-2:]


def _launcher_env(tmp_path: Path) -> dict[str, str]:
    """PATH with `python3` pointing at this interpreter (it has numpy); a wandb key set."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "WANDB_API_KEY": "sekrit-key-1",
    }


def test_both_launchers_run_the_same_command(tmp_path: Path) -> None:
    env = _launcher_env(tmp_path)
    extra = [
        "--num-rollout",
        "1",
        "--rollout-batch-size",
        "2",
        "--n-samples-per-prompt",
        "2",
    ]
    sh = subprocess.run(
        ["bash", str(TOY / "run.sh"), *extra],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    py = subprocess.run(
        [sys.executable, str(TOY / "launch.py"), *extra],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert sh.returncode == 0 and py.returncode == 0, sh.stderr + py.stderr
    traced = [line for line in sh.stderr.splitlines() if line.startswith("+ python3 ")]
    execs = [line for line in py.stdout.splitlines() if line.startswith("EXEC: ")]
    assert len(traced) == 1 and len(execs) == 1
    command = shlex.split(traced[0][2:])
    assert command == shlex.split(execs[0][len("EXEC: ") :])
    assert command[:2] == ["python3", str(TOY / "train.py")] and command[-6:] == extra
    assert "sekrit-key-1" in command  # the leak the ledger has to redact
    assert trained_hashes(sh.stdout) == trained_hashes(py.stdout)


def test_launchers_pass_the_exit_code_through(tmp_path: Path) -> None:
    env = _launcher_env(tmp_path)
    sh = subprocess.run(
        ["bash", str(TOY / "run.sh"), "--bogus"],
        check=False,
        capture_output=True,
        env=env,
    )
    py = subprocess.run(
        [sys.executable, str(TOY / "launch.py"), "--bogus"],
        check=False,
        capture_output=True,
        env=env,
    )
    assert sh.returncode == py.returncode == 2
