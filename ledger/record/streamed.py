"""The record's log work done while the job runs: split, redaction, command lines, metrics.

While the job runs, ledger's capture thread only copies the job's output to the terminal and to
the staged raw file (`output.raw`), as `tee` does: nothing else stands between the job's pipe and
the terminal, so a slow consumer never throttles the job. A worker *process* (not a thread: the
split is CPU work, and a thread would take the interpreter lock from the copy) follows that raw
file from its own position: it splits it into trainer.log and engine.log with secrets redacted
(`LineSplitter`), and reads the command lines and the per-step metrics back from those two files
as they grow. When the job has ended, ledger writes the raw file's final size to `output.end`;
the worker catches up to it, finishes and leaves its result in `streamed.pickle`.

One code path, three ways to run it (`StreamedLogs`): in the worker; in ledger's own process
when the output stayed small (spawning a worker costs more than the split: under `WORKER_AFTER`
bytes none is started) or when the worker failed; and in `ledger recover`, from the raw file of a
run whose ledger died. Fed block by block it gives what one pass over the finished files gives,
byte for byte (tests/test_streamed.py), so where the worker had not caught up, or died, the
record is rebuilt from the raw file and is complete all the same.

    python -m ledger.record.streamed STAGING_DIR     # the worker (started by `Follower`)
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.capture.stream import CHUNK, LineSplitter
from ledger.fsutil import atomic_writer, write_atomic
from ledger.metrics.jsonl import write_run_metrics
from ledger.metrics.logparse import LogScan, parse_logs
from ledger.metrics.summarymetrics import summarize, summarize_file
from ledger.metrics.table import MetricsTable
from ledger.redact.runscrub import as_texts, load_secrets, save_secrets
from ledger.redact.scanner import Redactor
from ledger.understand import tracescan

if TYPE_CHECKING:
    from ledger.storage.staging import Staged

SPEC = "streamed.json"
RESULT = "streamed.pickle"
END = "output.end"
PID = "streamed.pid"
BLOCK = 4 * CHUNK
WORKER_AFTER = 4 << 20  # bytes of output before a worker process is worth its start-up
WORKER_NICE = 19  # the lowest priority: the job (and the copy) come first when the cores are busy;
# a job that leaves cores idle, as trainers do, leaves them to the worker
POLL_S = 0.1
PUNCHED = "output.punched"  # the raw file's start was freed on a full disk (`_make_room`)
_KEEP_SIZE, _PUNCH_HOLE = 0x01, 0x02  # linux/falloc.h
# on a full disk the logs keep the captured output less a quarter of it (at least this much), so
# that the record itself can still be written on that disk: its git objects, manifest and status
RECORD_ROOM = 1 << 20
FLOOD_RATE = 64 << 20  # bytes/s of output above which the worker waits (trainers write KB/s to MB/s)


@dataclass
class StreamResult:
    """What the log work gives the record: as the manifest and `finish` need it."""

    command_lines: list[str]
    redacted: list[str]
    found: set[bytes]  # values the rules removed, looked for again in other forms by the final scrub
    metrics: MetricsTable | None  # None once written to metrics.jsonl (by the worker)
    truncated: list[str] = field(default_factory=list)  # a log whose writing failed: where, why
    # each log's md5 as it was read back, with the (inode, mtime_ns, size) it had then: the DVC
    # offload of a big log uses it instead of reading the log again (`dvcops.remember_hashes`)
    md5: dict[str, tuple[str, tuple[int, int, int]]] = field(default_factory=dict)
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


class _Tail:
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

    def __init__(self, raw: Path, trainer: Path, engine: Path, engine_patterns: Sequence[str], redactor: Redactor):
        self.raw = raw
        self.splitter = LineSplitter(trainer, engine, engine_patterns, redactor=redactor)
        self.splitter.trainer.on_full = self.splitter.engine.on_full = self._make_room
        self.splitter.trainer.room = self.splitter.engine.room = self._room
        self._budget: int | None = None  # bytes the two logs may hold, once the disk was full
        self.tails = (_Tail(trainer), _Tail(engine))
        self.offset = 0
        self._read_to = 0  # how far the raw file has been read (what is past it is not split yet)
        self._punched = 0  # the raw file's start given back to the disk (see `_make_room`)

    def step(self, limit: int = 4 * BLOCK) -> int:
        """Split up to `limit` new bytes of the raw file; returns how many were read."""
        read = 0
        try:
            with open(self.raw, "rb") as f:
                f.seek(self.offset)
                while read < limit and (data := f.read(min(BLOCK, limit - read))):
                    self._read_to = self.offset + read + len(data)
                    self.splitter.feed(data)
                    read += len(data)
        except FileNotFoundError:
            return 0
        self.offset += read
        if read:
            for tail in self.tails:
                tail.poll()
        return read

    def _make_room(self) -> bool:
        """The disk is full while a log is written: give the raw file's blocks that are already
        read (split, or held in memory) back to the file system, so that the logs can hold what
        was captured (a disk filled by the raw copy left a 0-byte trainer.log). Marked
        by an empty `output.punched` (an empty file needs no block of a full disk), so that `ledger
        recover` never splits the emptied start again."""
        start, end = self._punched, self._read_to - self._read_to % 4096
        if end - start < 4096:
            return False
        if self._budget is None:  # the record (git objects, manifest) needs room on this disk too
            try:
                size = self.raw.stat().st_size
            except OSError:
                return False
            self._budget = size - max(size // 4, RECORD_ROOM)
        try:
            os.close(os.open(self.raw.parent / PUNCHED, os.O_WRONLY | os.O_CREAT, 0o600))
        except OSError:
            return False  # no room for even that: the logs stop here, and say so
        if not punch_hole(self.raw, start, end - start):
            return False
        self._punched = end
        return True

    def give_back_split(self) -> None:
        """The split is done: on a disk that filled, give the rest of the raw file back too (the
        copy may have refilled what `_make_room` freed while the job still wrote, and the
        worker's metrics and result need room: without it the worker failed and the run kept
        only the note that its logs were cut where the split stopped)."""
        if (
            self._budget is not None
            and self._read_to - self._punched >= 4096
            and punch_hole(self.raw, self._punched, self._read_to - self._punched)
        ):
            self._punched = self._read_to

    def _room(self) -> int | None:
        if self._budget is None:
            return None
        return self._budget - self.splitter.trainer.written - self.splitter.engine.written

    def finish(self) -> StreamResult:
        """The raw file is complete: split the rest, close the logs, read their last lines."""
        while self.step():
            pass
        self.splitter.finish()
        for tail in self.tails:
            tail.poll(final=True)
        trainer, engine = self.tails
        trainer.scan.absorb(engine.scan)  # as one scan over trainer.log, then engine.log
        md5 = {}
        for tail in self.tails:
            try:
                st = os.stat(tail.path)
            except OSError:
                continue
            if st.st_size == tail.offset:  # all of it was read, hence hashed
                md5[tail.path.name] = (tail.md5.hexdigest(), (st.st_ino, st.st_mtime_ns, st.st_size))
        return StreamResult(
            trainer.commands + engine.commands,
            self.splitter.redacted,
            self.splitter.redactor.found_values(),
            trainer.scan.finish(),
            self.splitter.truncation_notes(),
            md5=md5,
        )


def punch_hole(path: Path, offset: int, length: int) -> bool:
    """Free a range of a file's blocks, its size unchanged (Linux `fallocate` with
    FALLOC_FL_PUNCH_HOLE: ext4, xfs, btrfs, tmpfs). False where the system cannot."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fallocate = libc.fallocate
    except (OSError, AttributeError):
        return False
    fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return False
    try:
        return int(fallocate(fd, _PUNCH_HOLE | _KEEP_SIZE, offset, length)) == 0
    finally:
        os.close(fd)


def process_raw(raw: Path, run_dir: Path, engine_patterns: Sequence[str], redactor: Redactor) -> StreamResult:
    """All of the log work on a complete raw file, in this process (small output, `recover`)."""
    return StreamedLogs(raw, run_dir / "trainer.log", run_dir / "engine.log", engine_patterns, redactor).finish()


def logs_result(run_dir: Path) -> StreamResult:
    """The log work's result read back from split logs already in `run_dir` (their redaction was
    done when they were split)."""
    paths = [run_dir / "trainer.log", run_dir / "engine.log"]
    return StreamResult(tracescan.command_lines(paths), [], set(), parse_logs(paths), where="after the job, from the split logs")


def was_punched(staging_dir: Path) -> bool:
    """Whether the raw output's start was given back to a full disk (`StreamedLogs._make_room`)."""
    return (staging_dir / PUNCHED).exists()


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
    start (~0.8 s)."""

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
        self._ended = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._watch, name="ledger-follow", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _watch(self) -> None:
        spawned, preloaded = False, self._preload is None
        flood = FloodWatch(self._bytes_in)
        while not (spawned and preloaded) and not self._ended.wait(POLL_S):
            copied = self._bytes_in()
            if not spawned and copied >= self._worker_after:
                self._spawn()
                spawned = True
            # DVC's imports hold the interpreter lock ~0.8 s: never while the copy is busy
            if self._preload is not None and not preloaded and copied >= self._preload[1] and not flood.flooding():
                _preload_dvc(self._preload[0])
                preloaded = True

    def _spawn(self) -> None:
        try:
            write_atomic(
                self.staged.dir / SPEC,
                json.dumps({"engine_patterns": self.patterns, "secret_names": self.secret_names, "nice": WORKER_NICE}),
            )
            # its own session: a Ctrl-C at the terminal is ledger's to forward, never the worker's
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "ledger.record.streamed", str(self.staged.dir)],
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
        proc, why = self._proc, ""
        raw = self.staged.raw_output
        if proc is not None:
            size = raw.stat().st_size if raw.exists() else 0
            try:
                _mark_end(self.staged.dir, size)
                _catch_up_priority(proc.pid)
                rc: int | str = _wait_while_working(proc, self.staged)
            except OSError as exc:  # a full disk
                proc.kill()
                proc.wait()
                rc = f"{exc.strerror or exc}"
            result = _load_result(self.staged.dir / RESULT) if rc == 0 else None
            if result is not None:
                result.where = "while the job ran"
                return result
            why = f"after the job (the worker failed: {rc if isinstance(rc, str) else f'exit {rc}'})"
        if was_punched(self.staged.dir):  # the raw file's start is gone: keep what the worker split
            return from_split_logs(self.staged.run_dir, why or "after the job")
        result = process_raw(raw, self.staged.run_dir, self.patterns, redactor)
        if why:
            result.where = why
        return result

    def abandon(self) -> None:
        """Stop the worker without waiting for a result (ledger is failing; `recover` redoes it)."""
        self._ended.set()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


STALL_S = 120.0  # seconds a worker may go without writing anything before it counts as hung


def _catch_up_priority(pid: int) -> None:
    """The job has ended, so the worker's catch-up is now what the run waits for: give it ledger's
    own priority back where the system allows (root, or RLIMIT_NICE), else it keeps the lowest."""
    try:
        os.setpriority(os.PRIO_PROCESS, pid, os.getpriority(os.PRIO_PROCESS, 0))
    except OSError:
        pass


def _written(staged: Staged) -> int:
    """How much the worker has written so far (its split logs, metrics and result): its progress."""
    total = 0
    for folder in (staged.run_dir, staged.dir):
        try:
            with os.scandir(folder) as entries:
                total += sum(e.stat(follow_symlinks=False).st_size for e in entries if e.is_file(follow_symlinks=False))
        except OSError:
            continue
    return total


def _wait_while_working(proc: subprocess.Popen[bytes], staged: Staged, clock: Callable[[], float] = time.monotonic) -> int | str:
    """The worker's exit code, waiting as long as it makes progress; "timed out" once it has written
    nothing for STALL_S (a hung worker is killed). A busy machine only makes the wait longer."""
    seen, since = _written(staged), clock()
    while True:
        try:
            return proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass
        now_written = _written(staged)
        if now_written != seen:
            seen, since = now_written, clock()
        elif clock() - since > STALL_S:
            proc.kill()
            proc.wait()
            return "timed out"


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


def stop_worker(staging_dir: Path) -> None:
    """Kill a worker left by a ledger that died (`recover` then redoes its work from the raw file)."""
    from ledger.storage.staging import pid_alive

    try:
        pid, start = json.loads((staging_dir / PID).read_text())
    except (OSError, ValueError, TypeError):
        return
    if pid_alive(int(pid), start):
        try:
            os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass


def _mark_end(staging_dir: Path, size: int) -> None:
    """Tell the worker the raw file is complete at `size` bytes. On a full disk the marker's one
    data block may not fit while the logs are using the room left: an empty file named by the size
    needs none (a worker killed there kept only part of what was captured)."""
    try:
        write_atomic(staging_dir / END, str(size))
    except OSError:
        os.close(os.open(staging_dir / f"{END}.{size}", os.O_WRONLY | os.O_CREAT, 0o600))


def _end(staging_dir: Path) -> int | None:
    """The raw file's final size, once ledger has written it (the job has ended)."""
    try:
        return int((staging_dir / END).read_text())
    except (OSError, ValueError):
        pass
    for marker in staging_dir.glob(f"{END}.*"):
        try:
            return int(marker.name.rsplit(".", 1)[1])
        except ValueError:
            continue
    return None


class FloodWatch:
    """Whether the output grows faster than `FLOOD_RATE` (measured over half-second windows): no
    trainer logs that fast, and following such a job only slows it (1 GiB as fast as a writer
    can: the job at 0.53x of tee with the worker following, 0.80x without; the work is the same
    either way)."""

    def __init__(self, size: Callable[[], int], clock: Callable[[], float] = time.monotonic):
        self._size_now, self._clock = size, clock
        self._size, self._at, self._flooding = 0, clock(), False

    def flooding(self) -> bool:
        now = self._clock()
        if now - self._at >= 0.5:
            size = self._size_now()
            self._flooding = (size - self._size) / (now - self._at) > FLOOD_RATE
            self._size, self._at = size, now
        return self._flooding


def _file_size(path: Path) -> Callable[[], int]:
    def size() -> int:
        try:
            return path.stat().st_size
        except OSError:
            return 0

    return size


def _worker(staging_dir: Path) -> int:
    from ledger.storage.staging import Staged, proc_start

    staged = Staged(staging_dir.name, staging_dir)
    spec = json.loads((staging_dir / SPEC).read_text())
    write_atomic(staging_dir / PID, json.dumps([os.getpid(), proc_start(os.getpid())]))
    try:
        os.nice(int(spec.get("nice", 0)))
    except OSError:
        pass
    parent = os.getppid()
    run_dir = staged.run_dir
    logs = StreamedLogs(
        staged.raw_output,
        run_dir / "trainer.log",
        run_dir / "engine.log",
        spec["engine_patterns"],
        Redactor(load_secrets(staging_dir), spec["secret_names"]),
    )
    flood = FloodWatch(_file_size(staged.raw_output))
    while True:
        if os.getppid() != parent:
            return 3  # ledger died: `ledger recover` redoes the work from the raw file
        end = _end(staging_dir)
        if end is None and flood.flooding():
            time.sleep(POLL_S)  # the job writes faster than we could follow: leave it the cores and the disk
            continue
        if logs.step():
            continue
        if end is not None and logs.offset >= end:
            break
        time.sleep(POLL_S)
    result = logs.finish()
    logs.give_back_split()
    if result.metrics is not None:  # the events are complete too: the job has ended
        result.metrics_written, result.malformed, table = write_run_metrics(run_dir, staged.data_dir, result.metrics)
        if result.metrics_written:  # summed up here, where the table is, not read back after the job
            st = os.stat(run_dir / "metrics.jsonl")
            result.summary, result.summary_of = summarize(table), (st.st_ino, st.st_mtime_ns, st.st_size)
        result.metrics = None  # written: not carried back (unpickling 300,000 rows costs ~1 s)
    with atomic_writer(staging_dir / RESULT, mode=0o600) as f:  # it holds the values the rules found
        pickle.dump(result, f, protocol=pickle.HIGHEST_PROTOCOL)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from ledger.record import streamed  # the module itself, not __main__: its result pickles by its real name

    sys.exit(streamed._worker(Path(sys.argv[1])))
