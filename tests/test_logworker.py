"""The log worker's readers (ledger/record/logworker.py): two forked processes read the split logs
back while the worker splits. A reader that dies costs the worker's result, never the record (it is
redone from the raw output, and says so); a worker that dies leaves no reader behind."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import psutil
from test_streamed import SECRET, _reference, _streamed, _write, miles_output

from ledger.config import DEFAULT_ENGINE_PATTERNS
from ledger.record.streamed import PID, Follower
from ledger.redact.runscrub import save_secrets
from ledger.redact.scanner import Redactor
from ledger.storage.staging import Staged


def _started(staging: Path, data: bytes) -> tuple[Follower, Path, int, list[psutil.Process]]:
    """A follower whose worker runs on the first half of `data`, and the worker's two readers."""
    (staging / "run").mkdir(parents=True)
    raw = _write(staging / "output.raw", data[: len(data) // 2])
    save_secrets(staging, [SECRET])
    follower = Follower(Staged(staging.name, staging), DEFAULT_ENGINE_PATTERNS, [], lambda: raw.stat().st_size, worker_after=1)
    follower.start()
    deadline = time.monotonic() + 60  # a deadline far above need: how soon is the machine's business
    readers: list[psutil.Process] = []
    while time.monotonic() < deadline and len(readers) < 2:
        if (staging / PID).exists():
            readers = psutil.Process(json.loads((staging / PID).read_text())[0]).children()
        time.sleep(0.05)
    assert len(readers) == 2, "the worker did not fork its two readers"
    return follower, raw, json.loads((staging / PID).read_text())[0], readers


def test_a_reader_that_dies_is_redone_in_process_and_says_so(tmp_path: Path) -> None:
    data = miles_output(2000)
    follower, raw, _, readers = _started(tmp_path / "staging", data)
    readers[0].kill()
    with open(raw, "ab") as f:
        f.write(data[len(data) // 2 :])
    result = follower.finish(Redactor({SECRET}))
    assert result.where == "after the job (the worker failed: exit 4)"
    assert _streamed(result, tmp_path / "staging" / "run") == _reference(_write(tmp_path / "whole.raw", data), tmp_path / "ref")


def test_the_readers_of_a_worker_that_dies_stop(tmp_path: Path) -> None:
    follower, _, worker, readers = _started(tmp_path / "staging", miles_output(2000))
    # each in a session of its own, once it has started: a reader makes its session first thing,
    # and how soon after the fork that is is the machine's business
    deadline = time.monotonic() + 60
    while {os.getsid(r.pid) for r in readers} != {r.pid for r in readers} and time.monotonic() < deadline:
        time.sleep(0.05)
    assert {os.getsid(r.pid) for r in readers} == {r.pid for r in readers}
    os.kill(worker, signal.SIGKILL)
    gone, alive = psutil.wait_procs(readers, timeout=60)
    assert not alive and len(gone) == 2
    follower.abandon()
