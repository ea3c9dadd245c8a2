"""The log worker process: follows the job's raw output while the job runs (`ledger.record.streamed`).

Three processes share the work, so that both cores do it once the job has ended: the worker
splits the raw output into trainer.log and engine.log (redaction included), and two readers it
forks read those logs back as they grow (each one's command lines, metrics and md5). The trainer
log's reader also writes `metrics.jsonl` and sums up its summary metrics, where the table is
(carrying 300,000 rows to another process costs more than writing them). The readers are forked
before the worker loads anything large, and stop when it goes: a pipe each, and its pid.

    python -m ledger.record.logworker STAGING_DIR     # started by `streamed.Follower`
"""

from __future__ import annotations

import ctypes
import json
import multiprocessing
import os
import pickle
import signal
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

import msgspec

from ledger.fsutil import atomic_writer, write_atomic
from ledger.metrics.jsonl import write_run_metrics
from ledger.metrics.logparse import LogScan
from ledger.metrics.summarymetrics import summarize
from ledger.record import workerlink
from ledger.record.streamed import LogTail, ReadBack, StreamedLogs
from ledger.redact.runscrub import load_secrets
from ledger.redact.scanner import Redactor
from ledger.storage.staging import Staged, proc_start

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class MetricsWritten(msgspec.Struct):
    """What the trainer log's reader did with the metrics: as `StreamResult` carries it."""

    written: bool = False
    malformed: int = 0
    summary: dict[str, dict[str, float | int]] | None = None
    summary_of: tuple[int, int, int] | None = None


def _read_back(path: Path, conn: Connection, inherited: list[Connection], worker: int, metrics_to: Staged | None) -> None:
    """A reader's life: follow `path` until the worker says the split is complete, then send back
    what the log gave (for the trainer log, once it has the engine log's scan to add)."""
    for other in inherited:  # the worker's ends of the pipes forked before this one
        other.close()
    # a session of its own, as the worker has: Linux shares the CPU between sessions (autogroups),
    # so a reader in the worker's session would take its time from the split instead of adding to it
    os.setsid()
    if not _dies_with(worker):
        return  # the worker died before the reader could follow it: `ledger recover` redoes the work
    tail = LogTail(path)
    try:
        while True:
            tail.poll()
            if conn.poll(workerlink.POLL_S):
                break
            if os.getppid() != worker:
                return  # the worker is gone: `ledger recover` redoes the work
        later: LogScan | None = conn.recv()  # the engine log's scan (trainer log), else None
    except EOFError:
        return
    tail.poll(final=True)
    read = ReadBack(tail.path, tail.commands, tail.offset, tail.md5.hexdigest())
    if metrics_to is None:
        conn.send((read, tail.scan))
        return
    if later is not None:
        tail.scan.absorb(later)  # as one scan over trainer.log, then engine.log
    done = MetricsWritten()
    done.written, done.malformed, table = write_run_metrics(metrics_to.run_dir, metrics_to.data_dir, tail.scan.finish())
    if done.written:  # summed up here, where the table is, not read back after the job
        st = os.stat(metrics_to.run_dir / "metrics.jsonl")
        done.summary, done.summary_of = summarize(table), (st.st_ino, st.st_mtime_ns, st.st_size)
    conn.send((read, done))


def _dies_with(worker: int) -> bool:
    """Be killed when the worker dies, however it dies (Linux's PR_SET_PDEATHSIG), even in the
    middle of a long read; where that is not available, the reader's own checks stop it. False
    when the worker is already gone."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    return os.getppid() == worker


class _Reader:
    """One forked reader of a split log, and the worker's end of its pipe. It is started at the
    worker's priority, and given its catch-up priority when the worker has it."""

    def __init__(self, path: Path, inherited: list[Connection], metrics_to: Staged | None = None):
        context = multiprocessing.get_context("fork")  # the worker's imports, without a second start-up
        self.conn, theirs = context.Pipe()
        self.proc = context.Process(target=_read_back, args=(path, theirs, inherited, os.getpid(), metrics_to), daemon=True)
        self.proc.start()
        theirs.close()

    def finish(self, later: LogScan | None) -> tuple[ReadBack, object]:
        """The split is complete: the reader's result (EOFError: the reader died)."""
        self.conn.send(later)
        result: tuple[ReadBack, object] = self.conn.recv()
        return result

    def same_priority(self) -> None:
        """Give the reader the worker's priority (raised by ledger once the job has ended)."""
        try:
            os.setpriority(os.PRIO_PROCESS, self.proc.pid or 0, os.getpriority(os.PRIO_PROCESS, 0))
        except OSError:
            pass

    def stop(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()


def _file_size(path: Path) -> Callable[[], int]:
    def size() -> int:
        try:
            return path.stat().st_size
        except OSError:
            return 0

    return size


def _follow(logs: StreamedLogs, staged: Staged, parent: int) -> bool:
    """Split the raw output as it grows, until the job has ended and all of it is split; False
    when ledger died first."""
    flood = workerlink.FloodWatch(_file_size(staged.raw_output))
    while True:
        if os.getppid() != parent:
            return False
        end = workerlink.read_end(staged.dir)
        if end is None and flood.flooding():
            time.sleep(workerlink.POLL_S)  # the job writes faster than we could follow: leave it the cores and the disk
            continue
        if logs.step():
            continue
        if end is not None and logs.offset >= end:
            return True
        time.sleep(workerlink.POLL_S)


def run(staging_dir: Path) -> int:
    """The worker: its exit code (0: the result is in `streamed.pickle`)."""
    staged = Staged(staging_dir.name, staging_dir)
    spec = json.loads((staging_dir / workerlink.SPEC).read_text())
    write_atomic(staging_dir / workerlink.PID, json.dumps([os.getpid(), proc_start(os.getpid())]))
    try:
        os.nice(int(spec.get("nice", 0)))
    except OSError:
        pass
    parent = os.getppid()
    run_dir = staged.run_dir
    redactor = Redactor(load_secrets(staging_dir), spec["secret_names"])
    trainer, engine = run_dir / "trainer.log", run_dir / "engine.log"
    logs = StreamedLogs(staged.raw_output, trainer, engine, spec["engine_patterns"], redactor, read_back=False)
    engine_reader = _Reader(engine, [])
    trainer_reader = _Reader(trainer, [engine_reader.conn], metrics_to=staged)
    try:
        if not _follow(logs, staged, parent):
            return 3  # ledger died: `ledger recover` redoes the work from the raw file
        for reader in (engine_reader, trainer_reader):
            reader.same_priority()
        logs.finish_split()
        logs.give_back_split()
        try:
            engine_read, engine_scan = engine_reader.finish(None)
            trainer_read, done = trainer_reader.finish(engine_scan if isinstance(engine_scan, LogScan) else None)
        except (EOFError, OSError):
            return 4  # a reader died: ledger redoes the work from the raw file
    finally:
        engine_reader.stop()
        trainer_reader.stop()
    if not isinstance(done, MetricsWritten):
        return 4
    result = logs.result([trainer_read, engine_read], None)
    result.metrics_written, result.malformed = done.written, done.malformed
    result.summary, result.summary_of = done.summary, done.summary_of
    with atomic_writer(staging_dir / workerlink.RESULT, mode=0o600) as f:  # it holds the values the rules found
        pickle.dump(result, f, protocol=pickle.HIGHEST_PROTOCOL)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(run(Path(sys.argv[1])))
