"""The log work done while the job runs (issue 15): streamed split, command lines and metrics equal
the work done after the fact, byte for byte; the worker process; a run killed mid-way still yields
a complete record, rebuilt from the raw output."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import LEDGER, REPO_ROOT, git, ledger, make_repo
from logsplit import split_output

from ledger.config import DEFAULT_ENGINE_PATTERNS
from ledger.metrics.jsonl import read_metrics_jsonl
from ledger.metrics.logparse import parse_logs
from ledger.metrics.summarymetrics import summarize_file
from ledger.record.streamed import PID, Follower, StreamedLogs, process_raw
from ledger.redact.runscrub import save_secrets
from ledger.redact.scanner import Redactor
from ledger.storage.staging import Staged
from ledger.understand import tracescan

SECRET = "hf_" + "Q" * 34
GEN_LOG = REPO_ROOT / "bench" / "gen_log.py"


def miles_output(steps: int = 400) -> bytes:
    """Job output in the shapes a Miles launcher and its Ray actors print, with the awkward bits."""
    out = [
        b"+ export NCCL_ALGO=Ring\n",
        b"+ ray job submit --address=http://127.0.0.1:8265 '--runtime-env-json={\n",
        b'  "env_vars": {"PYTHONPATH": "/root/Megatron-LM/"}\n',
        b"}' -- python3 train.py --lr 1e-6 --seed 7 --hf-token " + SECRET.encode() + b"\n",
        b'\x1b[36m(MegatronTrainRayActor pid=311)\x1b[0m ENV_REPORT_JSON={"miles": "abc123"}\n',
    ]
    for step in range(steps):
        ts = b"2026-11-29 00:%02d:%02d" % (step // 60 % 60, step % 60)
        for i in range(3):
            out.append(b"\x1b[36m(SGLangEngine pid=42, ip=10.0.0.2)\x1b[0m [%s TP0] Decode batch. #token: %d\n" % (ts, i))
        out.append(
            b"(RolloutManager pid=1) [%s RolloutManager] rollout.py:1193 - perf %d: "
            b"{'perf/rollout_time': %d.5, 'rollout/response_len/mean': 100.0}\n" % (ts, step, step)
        )
        out.append(b"[%s main] train.py:88 - step %d: {'train/loss': %d.25, 'train/grad_norm': nan}\n" % (ts, step, step))
        if step == 17:
            out.append(b"[%s main] train.py:88 - step 17: {'train/loss': \n" % ts)  # malformed
            out.append(b"Namespace(lr=1e-06, wandb_key='" + b"w" * 40 + b"')\n")
        if step == 33:  # a command printed later, its quote closing three lines on
            out.append(b"+ python3 eval.py '--cfg={\n")
            out.append(b"  a: 1,\n")
            out.append(b"}'\n")
    out.append(b"[2026-11-29 01:00:00 main] train.py:88 - step 9999: {'train/loss': 1.0}")  # no newline at EOF
    return b"".join(out)


def _reference(raw: Path, out: Path) -> dict[str, object]:
    """The after-the-fact work: one split of the whole file, then a read of the two logs."""
    out.mkdir()
    split_output(raw, out / "trainer.log", out / "engine.log", DEFAULT_ENGINE_PATTERNS, Redactor({SECRET}))
    logs = [out / "trainer.log", out / "engine.log"]
    table = parse_logs(logs)
    for row in table.rows.values():  # nan != nan: compare the numbers as text
        row.metrics = {k: repr(v) for k, v in row.metrics.items()}  # type: ignore[misc]
    return {
        "trainer": logs[0].read_bytes(),
        "engine": logs[1].read_bytes(),
        "commands": tracescan.command_lines(logs),
        "rows": {k: (r.t_start, r.t_end, r.metrics) for k, r in table.rows.items()},
        "train": {k: {m: repr(v) for m, v in d.items()} for k, d in table.train_steps.items()},
        "malformed": (table.malformed, [e.replace(str(out), "") for e in table.malformed_examples]),
    }


def _streamed(result: object, out: Path) -> dict[str, object]:
    from ledger.record.streamed import StreamResult

    assert isinstance(result, StreamResult)
    table = result.metrics
    if table is None:  # the worker wrote metrics.jsonl itself
        assert result.metrics_written
        table = read_metrics_jsonl(out / "metrics.jsonl")
    return {
        "trainer": (out / "trainer.log").read_bytes(),
        "engine": (out / "engine.log").read_bytes(),
        "commands": result.command_lines,
        "rows": {k: (r.t_start, r.t_end, {m: repr(v) for m, v in r.metrics.items()}) for k, r in table.rows.items()},
        "train": {k: {m: repr(v) for m, v in d.items()} for k, d in table.train_steps.items()},
        "malformed": (table.malformed, [e.replace(str(out), "") for e in table.malformed_examples]),
    }


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_streamed_work_equals_the_work_done_after_the_fact(tmp_path: Path, seed: int) -> None:
    data = miles_output()
    ref = _reference(_write(tmp_path / "whole.raw", data), tmp_path / "ref")
    # the raw file grows in random pieces (cut anywhere, mid-line too), the worker steps between
    rng = random.Random(seed)
    raw, out = tmp_path / "growing.raw", tmp_path / "streamed"
    out.mkdir()
    logs = StreamedLogs(raw, out / "trainer.log", out / "engine.log", DEFAULT_ENGINE_PATTERNS, Redactor({SECRET}))
    pos = 0
    with open(raw, "wb") as f:
        while pos < len(data):
            n = rng.choice([1, 7, 100, 4096, 30000])
            f.write(data[pos : pos + n])
            f.flush()
            pos += n
            logs.step(limit=rng.choice([10, 5000, 1 << 20]))
    got = _streamed(logs.finish(), out)
    assert got == ref
    assert SECRET.encode() not in got["trainer"] and b"w" * 40 not in got["trainer"]  # type: ignore[operator]
    assert len(ref["rows"]) == 400 and ref["malformed"][0] == 1  # type: ignore[arg-type,index]
    assert any("eval.py" in line for line in ref["commands"])  # type: ignore[union-attr]


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_the_worker_process_follows_the_raw_file_and_hands_back_the_result(tmp_path: Path) -> None:
    staging = tmp_path / "staging"
    (staging / "run").mkdir(parents=True)
    raw = staging / "output.raw"
    data = miles_output(2000)
    copied = [0]
    follower = Follower(Staged(staging.name, staging), DEFAULT_ENGINE_PATTERNS, [], lambda: copied[0], worker_after=1)
    save_secrets(staging, [SECRET])
    follower.start()
    with open(raw, "wb") as f:
        for i in range(0, len(data), 50_000):
            f.write(data[i : i + 50_000])
            f.flush()
            copied[0] += 50_000
            time.sleep(0.02)
    deadline = time.monotonic() + 30
    while not (staging / PID).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (staging / PID).exists(), "no worker process started"
    result = follower.finish(Redactor({SECRET}))
    assert result.where == "while the job ran"
    ref = _reference(_write(tmp_path / "whole.raw", data), tmp_path / "ref")
    assert _streamed(result, staging / "run") == ref


def test_in_process_result_when_the_output_stays_small(tmp_path: Path) -> None:
    staging = tmp_path / "staging"
    (staging / "run").mkdir(parents=True)
    raw = _write(staging / "output.raw", miles_output(20))
    follower = Follower(Staged(staging.name, staging), DEFAULT_ENGINE_PATTERNS, [], lambda: raw.stat().st_size)
    follower.start()
    result = follower.finish(Redactor({SECRET}))
    assert result.where == "after the job" and not (staging / PID).exists()
    assert _streamed(result, staging / "run") == _reference(_write(tmp_path / "w.raw", raw.read_bytes()), tmp_path / "ref")


def _init(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "proj", {"README.md": "x\n"})
    assert ledger(repo, "init").returncode == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "ledger init")
    return repo


# The job's last step: wait (a deadline far above need) until ledger's log worker has started.
# ledger starts one for a job that prints more than WORKER_AFTER bytes and promises "split: while
# the job ran" for such a job; how soon the worker starts is the machine's business, not the test's.
WAIT_FOR_WORKER = 'n=0; while [ ! -e ".ledger/staging/$LEDGER_RUN_ID/streamed.pid" ] && [ $n -lt 6000 ]; do sleep 0.1; n=$((n+1)); done'


def _committed(repo: Path, run: str, name: str) -> bytes:
    path = ledger(repo, "path", run).stdout.strip()
    rel = os.path.relpath(path, repo) if os.path.isabs(path) else path
    return subprocess.run(["git", "cat-file", "-p", f"experiments:{rel}/{name}"], cwd=repo, check=True, capture_output=True).stdout


def test_a_big_run_is_split_while_it_runs_and_equals_the_split_after_the_fact(tmp_path: Path) -> None:
    repo = _init(tmp_path)
    # ~9 MiB in three bursts: a job that ends only once the worker has started to follow it
    gen = f"{sys.executable} {GEN_LOG} --steps 1000 --engine-lines 20"
    job = ["sh", "-c", f"for i in 1 2 3; do {gen}; done"]
    proc = ledger(repo, "run", "--no-heat-guard", "--no-debug-data", "--", "sh", "-c", f"{job[2]}; {WAIT_FOR_WORKER}")
    assert proc.returncode == 0, proc.stderr
    manifest = _committed(repo, "latest", "manifest.yaml").decode()
    assert "split: while the job ran" in manifest
    whole = _write(tmp_path / "job.out", subprocess.run(job, check=True, capture_output=True).stdout)
    ref = tmp_path / "ref"
    ref.mkdir()
    split_output(whole, ref / "trainer.log", ref / "engine.log")
    assert _committed(repo, "latest", "trainer.log") == (ref / "trainer.log").read_bytes()
    assert _committed(repo, "latest", "engine.log") == (ref / "engine.log").read_bytes()
    rows = [json.loads(line) for line in _committed(repo, "latest", "metrics.jsonl").splitlines()[1:]]
    assert len([r for r in rows if "rollout_id" in r]) == 1000  # the same 1000 steps, three times
    # the summary metrics the worker summed up are those of the metrics.jsonl committed
    committed = _write(tmp_path / "metrics.jsonl", _committed(repo, "latest", "metrics.jsonl"))
    assert json.loads(_committed(repo, "latest", "summary.json"))["metrics"] == summarize_file(committed)


def test_ledger_killed_while_the_worker_runs_leaves_a_complete_record(tmp_path: Path) -> None:
    repo = _init(tmp_path)
    # ~6 MiB at once (the worker starts), then the job goes on quietly until ledger is killed
    script = (
        f"import subprocess, sys, time; subprocess.run([sys.executable, {str(GEN_LOG)!r}, '--steps', '2000', "
        "'--engine-lines', '20']); sys.stdout.flush(); time.sleep(60)"
    )
    proc = subprocess.Popen(
        [*LEDGER, "run", "--no-heat-guard", "--no-debug-data", "--", sys.executable, "-c", script],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    staging = repo / ".ledger" / "staging"
    deadline = time.monotonic() + 60
    pid_files: list[Path] = []
    while time.monotonic() < deadline and not pid_files:
        pid_files = list(staging.glob(f"*/{PID}"))
        time.sleep(0.1)
    assert pid_files, "the worker never started"
    worker_pid = json.loads(pid_files[0].read_text())[0]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10  # the worker sees its parent gone and stops
    while time.monotonic() < deadline and Path(f"/proc/{worker_pid}").exists():
        time.sleep(0.1)
    assert not Path(f"/proc/{worker_pid}").exists() or "zombie" in Path(f"/proc/{worker_pid}/status").read_text()
    rec = ledger(repo, "recover")
    assert rec.returncode == 0, rec.stderr
    assert "split: by ledger recover" in _committed(repo, "latest", "manifest.yaml").decode()
    rows = [json.loads(line) for line in _committed(repo, "latest", "metrics.jsonl").splitlines()[1:]]
    assert len([r for r in rows if "rollout_id" in r]) == 2000
    whole = _write(
        tmp_path / "gen.out",
        subprocess.run([sys.executable, str(GEN_LOG), "--steps", "2000", "--engine-lines", "20"], check=True, capture_output=True).stdout,
    )
    ref = tmp_path / "ref"
    ref.mkdir()
    process_raw(whole, ref, DEFAULT_ENGINE_PATTERNS, Redactor())
    assert _committed(repo, "latest", "engine.log") == (ref / "engine.log").read_bytes()


def test_a_big_log_offloaded_to_dvc_with_the_workers_hash_is_stored_under_its_true_md5(tmp_path: Path) -> None:
    repo = _init(tmp_path)
    _set_git_max_mb(repo / ".ledger.yaml", 1)
    gen = f"{sys.executable} {GEN_LOG} --steps 1000 --engine-lines 20"
    proc = ledger(repo, "run", "--no-heat-guard", "--no-debug-data", "--", "sh", "-c", f"for i in 1 2 3; do {gen}; done; {WAIT_FOR_WORKER}")
    assert proc.returncode == 0, proc.stderr
    manifest = _committed(repo, "latest", "manifest.yaml").decode()
    assert "split: while the job ran" in manifest and "in_dvc:" in manifest
    objects = [p for p in (repo / ".dvc" / "cache" / "files" / "md5").glob("*/*") if not p.name.endswith(".dir")]
    assert objects
    for obj in objects:  # every object in the cache is stored under the md5 of its bytes
        assert hashlib.md5(obj.read_bytes()).hexdigest() == obj.parent.name + obj.name


def _set_git_max_mb(config: Path, mb: int) -> None:
    from ruamel.yaml import YAML

    yaml = YAML()
    data = yaml.load(config.read_text()) or {}
    data.setdefault("logs", {})["git_max_mb"] = mb
    with open(config, "w") as f:
        yaml.dump(data, f)


def test_lines_longer_than_a_block_are_hashed_and_skipped_and_the_rest_still_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger.record import streamed

    monkeypatch.setattr(streamed, "BLOCK", 4096)  # a "long line" is then anything over 4 KiB
    head = b"[2026-11-29 00:00:00 main] train.py:88 - step 1: {'train/loss': 1.5}\n"
    tail = b"[2026-11-29 00:00:09 main] train.py:88 - step 2: {'train/loss': 0.5}\n+ python3 train.py --lr 1\n"
    data = head + b"y" * 50_000 + b"\n" + tail + b"z" * 10_000  # and a long last line with no newline
    raw, out = _write(tmp_path / "raw", data), tmp_path / "out"
    out.mkdir()
    result = process_raw(raw, out, DEFAULT_ENGINE_PATTERNS, Redactor())
    assert (out / "trainer.log").read_bytes() == data
    assert result.metrics.train_steps == {1: {"train/loss": 1.5}, 2: {"train/loss": 0.5}}
    assert result.command_lines == ["+ python3 train.py --lr 1"]
    assert result.md5["trainer.log"][0] == hashlib.md5(data).hexdigest()


RSS_PROBE = """\
import resource, subprocess, sys
job = "head -c 209715200 /dev/zero | tr '\\\\0' x; echo; sleep 1; echo end"
proc = subprocess.run([*sys.argv[1:], "run", "--no-heat-guard", "--no-debug-data", "--", "sh", "-c", job],
                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
assert proc.returncode == 0, proc.stderr
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
"""


def test_one_200_mb_line_through_ledger_run_stays_in_bounded_memory(tmp_path: Path) -> None:
    """The whole CLI path (copy, the log worker, DVC offload): no process ledger starts holds the
    line; the largest (ledger itself, with git and DVC loaded) stays under 200 MB."""
    repo = _init(tmp_path)
    (tmp_path / "probe.py").write_text(RSS_PROBE)
    proc = subprocess.run([sys.executable, str(tmp_path / "probe.py"), *LEDGER], cwd=repo, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) < 160, proc.stdout  # MB: was ~296 when the worker read the log back whole
    manifest = _committed(repo, "latest", "manifest.yaml").decode()
    assert "split: while the job ran" in manifest and "- trainer.log" in manifest  # tracked with DVC


def test_a_worker_that_dies_is_redone_in_process_and_says_so(tmp_path: Path) -> None:
    staging = tmp_path / "staging"
    (staging / "run").mkdir(parents=True)
    data = miles_output(2000)
    raw = _write(staging / "output.raw", data[: len(data) // 2])
    save_secrets(staging, [SECRET])
    follower = Follower(Staged(staging.name, staging), DEFAULT_ENGINE_PATTERNS, [], lambda: raw.stat().st_size, worker_after=1)
    follower.start()
    deadline = time.monotonic() + 30
    while not (staging / PID).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(json.loads((staging / PID).read_text())[0], signal.SIGKILL)  # the worker dies mid-way
    with open(raw, "ab") as f:
        f.write(data[len(data) // 2 :])
    result = follower.finish(Redactor({SECRET}))
    assert result.where == "after the job (the worker failed: exit -9)"
    assert _streamed(result, staging / "run") == _reference(_write(tmp_path / "whole.raw", data), tmp_path / "ref")


def test_the_flood_watch_measures_the_growth_rate_over_half_seconds() -> None:
    from ledger.record.streamed import FLOOD_RATE, FloodWatch

    size, now = [0], [100.0]  # an injected clock: a loaded machine's late wake-up cannot change the rate
    watch = FloodWatch(lambda: size[0], clock=lambda: now[0])
    assert not watch.flooding()  # no window has passed yet
    now[0] += 0.4
    size[0] += 10 * FLOOD_RATE
    assert not watch.flooding()  # still inside the first half second: not measured yet
    now[0] += 0.1
    assert watch.flooding()  # 10x FLOOD_RATE over 0.5 s
    now[0] += 0.5
    size[0] += FLOOD_RATE // 4  # half of FLOOD_RATE: a fast trainer's pace
    assert not watch.flooding()
    now[0] += 0.5
    size[0] += FLOOD_RATE  # 2x FLOOD_RATE
    assert watch.flooding()


class _Jumps:
    """A clock that moves `step` seconds at every reading: minutes pass in a few real seconds."""

    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_a_worker_that_writes_is_waited_for_however_long_and_a_silent_one_is_killed(tmp_path: Path) -> None:
    from ledger.record.streamed import STALL_S, _wait_while_working

    staged = Staged("x", tmp_path / "staged")
    staged.run_dir.mkdir(parents=True)
    log = staged.run_dir / "trainer.log"
    # writes a line every 50 ms for 5 s (at least, however fast the machine), then exits 0: with
    # clock readings STALL_S/3 apart (one a second) that is past STALL_S in all, but never STALL_S
    # without progress (3 s gave 3 readings on an idle machine: exactly STALL_S, not past it)
    writer = f"import time\nfor i in range(100):\n    open({str(log)!r}, 'a').write('x\\n')\n    time.sleep(0.05)\n"
    proc = subprocess.Popen([sys.executable, "-c", writer])
    deadline = time.monotonic() + 60
    while not log.exists() and time.monotonic() < deadline:  # started (a busy machine starts it late)
        time.sleep(0.05)
    clock = _Jumps(STALL_S / 3)
    assert _wait_while_working(proc, staged, clock=clock) == 0
    assert clock.now > STALL_S
    silent = subprocess.Popen(["sleep", "600"])
    assert _wait_while_working(silent, staged, clock=_Jumps(STALL_S / 2)) == "timed out"
    assert silent.returncode == -signal.SIGKILL
