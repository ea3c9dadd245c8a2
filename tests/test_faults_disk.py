"""Fault suite, issue 24 part 3: the disk. A read-only object store, ref folder or `.ledger/` is
refused before the job (exit 125, one line), and a disk that fills keeps the captured output in
the logs up to where it filled, with where they are cut; `ledger recover` on a full disk is one
line too."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import LEDGER, git, ledger, make_repo
from test_faults_input import _refused

from ledger import yamlio


@contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """`folder` bind-mounted read-only onto itself (tests run as root here, and chmod does not stop
    root); skips where mounting is not permitted."""
    mount = shutil.which("mount")
    if mount is None:
        pytest.skip("no mount command: cannot make a folder read-only for root")
    bind = subprocess.run([mount, "--bind", str(folder), str(folder)], capture_output=True, text=True)
    if bind.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {bind.stderr.strip()}")
    try:
        ro = subprocess.run([mount, "-o", "remount,ro,bind", str(folder)], capture_output=True, text=True)
        if ro.returncode != 0:
            pytest.skip(f"cannot remount read-only here: {ro.stderr.strip()}")
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.mark.parametrize(
    ("folder", "said"),
    [
        (".git/objects", "the object store"),
        (".git/refs/heads", "branch 'experiments's ref"),
        (".ledger", ".ledger/"),
    ],
)
def test_read_only_repository_is_refused_before_the_job(repo: Path, folder: str, said: str) -> None:
    """Was: the job ran, then `internal error: OSError … Read-only file system`, exit 1."""
    (repo / folder).mkdir(exist_ok=True)  # `.ledger/` exists once a run was made
    with read_only(repo / folder):
        line = _refused(repo)
    assert said in line and "not writable" in line and "Read-only file system" in line


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 24 MB tmpfs mounted for this test (skips where mounting is not permitted)."""
    where = tmp_path / "small"
    where.mkdir()
    mount = shutil.which("mount")
    proc = (
        subprocess.run([mount or "mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(where)], capture_output=True, text=True)
        if mount
        else None
    )
    if proc is None or proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip() if proc else 'no mount command'}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _latest_manifest(repo: Path) -> dict:
    run_id = git(repo, "log", "-1", "--format=%(trailers:key=Run-Id,valueonly)", "experiments").strip()
    return yamlio.loads(git(repo, "show", f"experiments:runs/{run_id[-4:-2]}/{run_id}/manifest.yaml"))


FLOOD = "import sys\nfor i in range(500000): sys.stdout.write(f'line {i:09d} ' + 'y' * 80 + '\\n')\nsys.exit(7)\n"


def test_full_disk_keeps_the_captured_output_in_the_log(small_fs: Path) -> None:
    """Was: "finished, exit 0" with an empty log and no warning; then, the committed trainer.log was
    0 bytes although ~20 MB had been captured (the raw copy filled the disk, and the split had no
    room left to write the log)."""
    repo = make_repo(small_fs / "proj", {"README.md": "x\n"})
    proc = subprocess.run(
        [*LEDGER, "run", "--no-heat-guard", "--", sys.executable, "-c", FLOOD],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        timeout=120,
    )
    assert proc.returncode == 7, proc.stderr  # the job's code, not ledger's
    assert len(proc.stdout) == 48_000_000  # all of it still reached the terminal
    m = _latest_manifest(repo)
    warnings = m["status"]["warnings"]
    assert (m["status"]["state"], m["status"]["exit_code"]) == ("failed", 7)
    assert "truncated" in warnings[0] and "of 48000000 bytes" in warnings[0] and "No space left on device" in warnings[0]
    kept = int(warnings[0].split(" after ")[1].split(" of ")[0])
    assert kept > 10_000_000  # most of the small disk held output before it filled
    # the split cuts trainer.log where the disk is full; where the worker split (and freed) the raw
    # file while the job ran, which depends on the machine's load, all of it fits and nothing is cut
    cuts = [w for w in warnings if w.startswith("trainer.log truncated at byte ")]
    assert len(cuts) <= 1, warnings
    at = int(cuts[0].split()[4].rstrip(":")) if cuts else kept
    assert kept // 2 < at <= kept  # the log keeps most of what was captured (room is left for the record)
    log = git(repo, "show", f"experiments:runs/{m['id'][-4:-2]}/{m['id']}/trainer.log").encode()
    body, _sep, note = log.rstrip(b"\n").rpartition(b"\n")
    assert note.startswith(b"[ledger] logs truncated") and f"after {kept} of 48000000 bytes".encode() in note
    assert (f"trainer.log truncated at byte {at}".encode() in note) == bool(cuts)
    assert (
        len(body) == at
        and body
        == b"".join(  # the first `at` bytes of the output, exactly
            f"line {i:09d} {'y' * 80}\n".encode() for i in range(at // 96 + 1)
        )[:at]
    )


def test_recover_on_a_full_disk_is_one_line(small_fs: Path) -> None:
    """Was: `internal error: OSError …` with no word of what to do."""
    from test_faults_input import _staged_dead_run

    repo = make_repo(small_fs / "proj", {"README.md": "x\n"})
    staged = _staged_dead_run(repo)
    filler = small_fs / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M", "count=64"], capture_output=True)
    proc = ledger(repo, "recover")
    lines = [line for line in proc.stderr.splitlines() if line.startswith("ledger:")]
    assert proc.returncode == 1 and "internal error" not in proc.stderr, proc.stderr
    assert lines[-1].startswith("ledger: error: ") and "No space left on device" in lines[-1]
    assert "ledger recover" in lines[-1] and staged.is_dir()  # still staged: a later recover commits it
    filler.unlink()
    assert "recovered 1 run" in ledger(repo, "recover").stderr


def test_the_end_marker_reaches_the_log_worker_on_a_full_disk(small_fs: Path) -> None:
    """Was: on a disk the logs had filled, ledger could not write the worker's end marker (one data
    block), killed the worker and kept only the part of the logs it had split (4 of 25 MB, about
    one run in three of the full-disk test)."""
    from ledger.record import streamed

    staging = small_fs / "staging"
    staging.mkdir()
    with open(small_fs / "filler", "wb") as f, pytest.raises(OSError):
        while True:  # fill the disk to its last block
            f.write(b"x" * 65536)
            f.flush()
    assert streamed._end(staging) is None
    streamed._mark_end(staging, 123456)
    assert streamed._end(staging) == 123456


def test_the_split_gives_the_raw_output_back_on_a_disk_that_filled(small_fs: Path) -> None:
    """Was: once the disk had filled, the raw output the copy wrote into the holes the split had
    punched (the job still wrote) stayed on the disk after it was split, and the worker's result
    found no room (exit 1): the run kept only 'logs cut where their split stopped', without where
    the trainer log was truncated (two runs of the full suite on two workers)."""
    from ledger.record import streamed
    from ledger.redact.scanner import Redactor

    staging = small_fs / "staging"
    (staging / "run").mkdir(parents=True)
    raw = staging / "output.raw"
    line = b"y" * 95 + b"\n"

    def fill(f: Any, data: bytes) -> None:
        with pytest.raises(OSError):
            while True:
                f.write(data)
                f.flush()

    raw.write_bytes(line * (12_000_000 // len(line)))  # half the disk
    with open(small_fs / "filler", "wb", buffering=0) as f:
        fill(f, b"x" * 65536)  # what is left fills up: the logs must make room to be written
    logs = streamed.StreamedLogs(raw, staging / "run" / "trainer.log", staging / "run" / "engine.log", [], Redactor(set(), []))
    while logs.step():  # the worker follows, punching what it has read to write the logs
        pass
    assert streamed.was_punched(staging)
    with open(raw, "ab", buffering=0) as f:  # the copy goes on into the room given back, until the disk is full again
        fill(f, line * 64)
    logs.finish()
    logs.give_back_split()
    free = os.statvfs(small_fs)
    assert free.f_bavail * free.f_frsize >= 1 << 20  # room for the worker's metrics and result
    assert raw.stat().st_blocks * 512 <= 4096  # every split byte given back, its size unchanged
