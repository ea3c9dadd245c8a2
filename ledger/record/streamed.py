"""The record's log work done while the job runs: split, redaction, command lines, metrics.

While the job runs, ledger's capture thread only copies the job's output to the terminal and to
the staged raw file (`output.raw`), as `tee` does: nothing else stands between the job's pipe and
the terminal, so a slow consumer never throttles the job. A worker *process* (not a thread: the
split is CPU work, and a thread would take the interpreter lock from the copy;
`ledger.record.logworker`) follows that raw file from its own position: it splits it into
trainer.log and engine.log with secrets redacted (`LineSplitter`), and reads the command lines
and the per-step metrics back from those two files as they grow. When the job has ended, ledger
writes the raw file's final size to `output.end`; the worker catches up to it, finishes and
leaves its result in `streamed.pickle` (`ledger.record.workerlink`: the files between the two).

One code path, three ways to run it (`StreamedLogs`): in the worker; in ledger's own process
when the output stayed small (spawning a worker costs more than the split: under `WORKER_AFTER`
bytes none is started) or when the worker failed; and in `ledger recover`, from the raw file of a
run whose ledger died. Fed block by block it gives what one pass over the finished files gives,
byte for byte (tests/test_streamed.py), so where the worker had not caught up, or died, the
record is rebuilt from the raw file and is complete all the same.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from ledger.capture.stream import CHUNK, LineSplitter
from ledger.fsutil import write_atomic
from ledger.metrics.logparse import LogScan, parse_logs
from ledger.metrics.summarymetrics import summarize_file
from ledger.metrics.table import MetricsTable
from ledger.record import workerlink
from ledger.record.rawroom import RawRoom
from ledger.record.rawroom import was_punched as was_punched
from ledger.redact.runscrub import as_texts, save_secrets
from ledger.redact.scanner import Redactor
from ledger.understand import tracescan

if TYPE_CHECKING:
    from ledger.storage.staging import Staged

# the link's names, read here too (by `recover` and the tests) as before the worker had its own module
END, PID, FLOOD_RATE, STALL_S = workerlink.END, workerlink.PID, workerlink.FLOOD_RATE, workerlink.STALL_S
FloodWatch, stop_worker = workerlink.FloodWatch, workerlink.stop_worker
_mark_end, _end, _wait_while_working = workerlink.mark_end, workerlink.read_end, workerlink.wait_while_working
BLOCK = 4 * CHUNK
WORKER_AFTER = 4 << 20  # bytes of output before a worker process is worth its start-up


class StreamResult(msgspec.Struct):
    """What the log work gives the record: as the manifest and `finish` need it."""

    command_lines: list[str]
    redacted: list[str]
    found: set[bytes]  # values the rules removed, looked for again in other forms by the final scrub
    metrics: MetricsTable | None  # None once written to metrics.jsonl (by the worker)
    truncated: list[str] = msgspec.field(default_factory=list)  # a log whose writing failed: where, why
    # each log's md5 as it was read back, with the (inode, mtime_ns, size) it had then: the DVC
    # offload of a big log uses it instead of reading the log again (`dvcops.remember_hashes`)
    md5: dict[str, tuple[str, tuple[int, int, int]]] = msgspec.field(default_factory=dict)
    metrics_written: bool = False  # the worker wrote metrics.jsonl (then `metrics` is None)
    malformed: int = 0
    where: str = "after the job"  # when the work was done (the manifest's `logs.split`)
    # the summary metrics of the metrics.jsonl the worker wrote, with the (inode, mtime_ns, size)
    # that file had: summary.json takes them while the file is unchanged (`summary_for`)
    summary: dict[str, dict[str, float | int]] | None = None
    summary_of: tuple[int, int, int] | None = None

    def summary_for(self, path: Path) -> dict[str, dict[str, float | int]]:
        """The summary metrics of `path` (the run's metrics.jsonl): the worker's while the file is
        the one it wrote, else read from the file (another source rewrote it, or no worker ran)."""
        try:
            st = os.stat(path)
        except OSError:
            return {}
        if self.summary is not None and self.summary_of == (st.st_ino, st.st_mtime_ns, st.st_size):
            return self.summary
        return summarize_file(path)


class LogTail:
    """One split log read back as it grows: whole lines to the metric and command scans.

    Read in blocks of at most `BLOCK` bytes, so memory stays bounded whatever the output. A line
    longer than a block (a 200 MB line) is hashed but not scanned: no metric or command line is
    that long, and holding it whole is what the bound is for.
    """

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.lines = 0
        self.scan = LogScan()
        self.commands: list[str] = []
        self._carry = b""  # a command line whose quote was still open at the end of what was read
        self._in_long_line = False  # skipping the rest of a line longer than a block
        self.md5 = hashlib.md5(usedforsecurity=False)

    def poll(self, final: bool = False) -> None:
        try:
            with open(self.path, "rb") as f:
                while True:
                    f.seek(self.offset)
                    data = f.read(BLOCK)
                    if not data or not self._take(data, last=final and len(data) < BLOCK):
                        break
        except FileNotFoundError:
            pass
        if final and self._carry:
            self._commands(b"", final=True)

    def _take(self, data: bytes, last: bool) -> int:
        """Take what `data` (read at `offset`) completes; returns how much (0: wait for more).
        `last`: `data` is all that is left of the finished file."""
        if self._in_long_line:
            end = data.find(b"\n") + 1
            self._consume(data[:end] if end else data)
            if end or last:
                self._in_long_line = False
                self.lines += 1 if end else 0
            return end or len(data)
        whole = data if last else data[: data.rfind(b"\n") + 1]
        if not whole:
            if len(data) < BLOCK:
                return 0  # a partial last line: wait for its newline
            self._consume(data)  # a line longer than a block
            self._in_long_line = True
            return len(data)
        self._consume(whole)
        self.scan.scan_bytes(whole, self.path, self.lines)
        self.lines += whole.count(b"\n")
        self._commands(whole, final=last)
        return len(whole)

    def _consume(self, data: bytes) -> None:
        self.offset += len(data)
        self.md5.update(data)

    def _commands(self, data: bytes, final: bool) -> None:
        block = self._carry + data if self._carry else data
        lines, done = tracescan.command_lines_in(block, final)
        self.commands.extend(lines)
        self._carry = bytes(block[done:])


class StreamedLogs:
    """Follows a raw output file: splits it into the two logs and reads them back as they grow."""

    def __init__(self, raw: Path, trainer: Path, engine: Path, engine_patterns: Sequence[str], redactor: Redactor, read_back: bool = True):
        """`read_back`: read the two logs back here as they grow; without it (the worker) other
        processes read them (`ledger.record.logworker`), and `finish_split` and `result` are used."""
        self.raw = raw
        self.splitter = LineSplitter(trainer, engine, engine_patterns, redactor=redactor)
        self.disk = RawRoom(raw, lambda: self.splitter.trainer.written + self.splitter.engine.written)
        self.splitter.trainer.on_full = self.splitter.engine.on_full = self.disk.make_room
        self.splitter.trainer.room = self.splitter.engine.room = self.disk.room
        self.tails: tuple[LogTail, ...] = (LogTail(trainer), LogTail(engine)) if read_back else ()
        self.offset = 0

    def step(self, limit: int = 4 * BLOCK) -> int:
        """Split up to `limit` new bytes of the raw file; returns how many were read."""
        read = 0
        try:
            with open(self.raw, "rb") as f:
                f.seek(self.offset)
                while read < limit and (data := f.read(min(BLOCK, limit - read))):
                    self.disk.read_to = self.offset + read + len(data)
                    self.splitter.feed(data)
                    read += len(data)
        except FileNotFoundError:
            return 0
        self.offset += read
        if read:
            for tail in self.tails:
                tail.poll()
        return read

    def give_back_split(self) -> None:
        """The split is done: on a disk that filled, give the rest of the raw file back too."""
        self.disk.give_back_split()

    def finish_split(self) -> None:
        """The raw file is complete: split the rest and close the logs."""
        while self.step():
            pass
        self.splitter.finish()

    def finish(self) -> StreamResult:
        """The raw file is complete: split the rest, close the logs, read their last lines."""
        self.finish_split()
        for tail in self.tails:
            tail.poll(final=True)
        trainer, engine = self.tails
        trainer.scan.absorb(engine.scan)  # as one scan over trainer.log, then engine.log
        reads = [ReadBack(t.path, t.commands, t.offset, t.md5.hexdigest()) for t in self.tails]
        return self.result(reads, trainer.scan.finish())

    def result(self, reads: Sequence[ReadBack], metrics: MetricsTable | None) -> StreamResult:
        """The work's result, from the split done here and the two logs' reads (trainer.log first)."""
        md5 = {}
        for read in reads:
            try:
                st = os.stat(read.path)
            except OSError:
                continue
            if st.st_size == read.offset:  # all of it was read, hence hashed
                md5[read.path.name] = (read.md5, (st.st_ino, st.st_mtime_ns, st.st_size))
        return StreamResult(
            [line for read in reads for line in read.commands],
            self.splitter.redacted,
            self.splitter.redactor.found_values(),
            metrics,
            self.splitter.truncation_notes(),
            md5=md5,
        )


class ReadBack(msgspec.Struct, frozen=True):
    """What reading one split log back to its end gave, besides its metrics: its command lines,
    and the md5 of its first `offset` bytes."""

    path: Path
    commands: list[str]
    offset: int
    md5: str


def process_raw(raw: Path, run_dir: Path, engine_patterns: Sequence[str], redactor: Redactor) -> StreamResult:
    """All of the log work on a complete raw file, in this process (small output, `recover`)."""
    return StreamedLogs(raw, run_dir / "trainer.log", run_dir / "engine.log", engine_patterns, redactor).finish()


def logs_result(run_dir: Path) -> StreamResult:
    """The log work's result read back from split logs already in `run_dir` (their redaction was
    done when they were split)."""
    paths = [run_dir / "trainer.log", run_dir / "engine.log"]
    return StreamResult(tracescan.command_lines(paths), [], set(), parse_logs(paths), where="after the job, from the split logs")


def from_split_logs(run_dir: Path, where: str) -> StreamResult:
    """The result of a split that stopped part way on a full disk whose raw output can no longer be
    split again: the logs as far as they were written, and a note of where they stop."""
    result = logs_result(run_dir)
    result.where = where
    sizes = ", ".join(f"{p.name} at byte {p.stat().st_size}" for p in (run_dir / "trainer.log", run_dir / "engine.log") if p.exists())
    result.truncated = [
        f"logs cut where their split stopped on a full disk ({sizes or 'nothing split'}): the raw "
        "output's start had been given back to the disk, so it could not be split again"
    ]
    return result


class Follower:
    """Ledger's side: starts the worker once the output is big enough, and collects its result.

    With `preload` (the repository root, and the output size from which a log will be tracked
    with DVC), DVC is opened once while the job runs, so that the offload at the end skips its
    start (~0.8 s); after a job that flooded its output to the end, while the worker catches up."""

    def __init__(
        self,
        staged: Staged,
        engine_patterns: Sequence[str],
        secret_names: Sequence[str],
        bytes_in: Callable[[], int],
        worker_after: int = WORKER_AFTER,
        preload: tuple[Path, int] | None = None,
    ):
        self.staged = staged
        self.patterns = list(engine_patterns)
        self.secret_names = list(secret_names)
        self._bytes_in = bytes_in  # the output copied so far
        self._worker_after = worker_after
        self._preload = preload
        self._preloaded = preload is None
        self._ended = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._watch, name="ledger-follow", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _watch(self) -> None:
        spawned = False
        flood = workerlink.FloodWatch(self._bytes_in)
        while not (spawned and self._preloaded) and not self._ended.wait(workerlink.POLL_S):
            copied = self._bytes_in()
            if not spawned and copied >= self._worker_after:
                self._spawn()
                spawned = True
            # DVC's imports hold the interpreter lock ~0.8 s: never while the copy is busy
            if not flood.flooding():
                self._preload_now()

    def _preload_now(self) -> None:
        """Open DVC once the output is big enough for a log to be tracked with it (once)."""
        if not self._preloaded and self._preload is not None and self._bytes_in() >= self._preload[1]:
            _preload_dvc(self._preload[0])
            self._preloaded = True

    def _spawn(self) -> None:
        try:
            write_atomic(
                self.staged.dir / workerlink.SPEC,
                json.dumps({"engine_patterns": self.patterns, "secret_names": self.secret_names, "nice": workerlink.WORKER_NICE}),
            )
            # its own session: a Ctrl-C at the terminal is ledger's to forward, never the worker's
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "ledger.record.logworker", str(self.staged.dir)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            self._proc = None  # the work is then done in-process at the end

    def finish(self, redactor: Redactor) -> StreamResult:
        """The raw file is complete (the job ended, a followed Ray job too): the log work's result."""
        self._ended.set()
        self._thread.join()
        why = ""
        if self._proc is not None:
            result, why = self._worker_result(self._proc)
            if result is not None:
                return result
        if was_punched(self.staged.dir):  # the raw file's start is gone: keep what the worker split
            return from_split_logs(self.staged.run_dir, why or "after the job")
        result = process_raw(self.staged.raw_output, self.staged.run_dir, self.patterns, redactor)
        if why:
            result.where = why
        return result

    def _worker_result(self, proc: subprocess.Popen[bytes]) -> tuple[StreamResult | None, str]:
        """Tell the worker the output is complete and wait for its result; None and why without one."""
        raw = self.staged.raw_output
        size = raw.stat().st_size if raw.exists() else 0
        # the copy has ended: DVC's start, left while the output flooded, is done while we wait
        preloading = threading.Thread(target=self._preload_now, name="ledger-preload", daemon=True)
        preloading.start()
        try:
            workerlink.catch_up_priority(proc.pid)
            workerlink.mark_end(self.staged.dir, size)
            rc: int | str = workerlink.wait_while_working(proc, self.staged)
        except OSError as exc:  # a full disk
            proc.kill()
            proc.wait()
            rc = f"{exc.strerror or exc}"
        preloading.join()
        result = _load_result(self.staged.dir / workerlink.RESULT) if rc == 0 else None
        if result is None:
            return None, f"after the job (the worker failed: {rc if isinstance(rc, str) else f'exit {rc}'})"
        result.where = "while the job ran"
        return result, ""

    def abandon(self) -> None:
        """Stop the worker without waiting for a result (ledger is failing; `recover` redoes it)."""
        self._ended.set()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


def _preload_dvc(repo_root: Path) -> None:
    if not (repo_root / ".dvc").is_dir():
        return
    try:
        from ledger.data.dvcops import preload

        preload(repo_root)
    except Exception:  # noqa: BLE001 - the import is retried, and reported, where it is used
        pass


def _load_result(path: Path) -> StreamResult | None:
    try:
        with open(path, "rb") as f:
            result = pickle.load(f)  # our own worker's file, in our own 0700 staging folder
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError):
        return None
    return result if isinstance(result, StreamResult) else None


def retire_raw(staged: Staged, secrets: Iterable[str], result: StreamResult) -> None:
    """The log work is done: remove the raw output, first keeping the values the rules found in
    it with the run's known values, so that a `recover` from here on scrubs what `finish` does."""
    save_secrets(staged.dir, set(secrets) | as_texts(result.found))
    staged.raw_output.unlink(missing_ok=True)
