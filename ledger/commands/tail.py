"""`ledger tail RUN [-f] [--engine]`: the end of a run's trainer (or engine) log.

A recorded run: the log committed with it (for a log offloaded to DVC, its committed excerpt,
which says how to pull the whole file). A running run (`ledger.record.live`): its output so far,
read from the staging area and split as the record will be (engine lines by the configured
line-start patterns, everything else trainer), each line redacted like a log line. With `follow`,
new lines keep coming until the `ledger run` that owns the run has ended; the reader keeps its
file open, so it reads to the end even after the output file was split and removed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import msgspec

from ledger.opening import open_branch
from ledger.record.live import LiveRun, LogSplitter, find_running
from ledger.runref import resolve
from ledger.storage.listing import parse_manifest
from ledger.storage.store import read_file_at

POLL_S = 0.2
BLOCK = 1 << 20


class TailResult(msgspec.Struct):
    """The last lines of one log of one run, and, when following a running run, the lines to come."""

    run_id: str
    state: str  # "running", or the recorded run's state
    log: str  # "trainer.log" or "engine.log"
    lines: list[bytes]  # each with its newline
    follow: Iterator[bytes] | None = None  # more lines as they arrive (running run, `follow=True`)


def _follow(live: LiveRun, f: BinaryIO, splitter: LogSplitter) -> Iterator[bytes]:
    """Lines as they arrive in `f` (positioned where the shown lines ended) until the run's end."""
    while True:
        data = f.read(BLOCK)
        if data:
            yield from splitter.feed(data)
            continue
        if not live.staged.owner_alive():
            yield from splitter.feed(f.read())  # the last bytes written before the end
            yield from splitter.finish()
            f.close()
            return
        time.sleep(POLL_S)


def _tail_running(live: LiveRun, patterns: tuple[str, ...], engine: bool, count: int, follow: bool) -> TailResult:
    splitter = LogSplitter(patterns, engine)
    log = "engine.log" if engine else "trainer.log"
    try:
        f = open(live.staged.raw_output, "rb")  # noqa: SIM115 - handed to the follower, which closes it
    except FileNotFoundError:  # the job has ended and its output was split: see the record
        return TailResult(live.id, "running", log, [], None)
    lines: list[bytes] = []
    while data := f.read(BLOCK):
        lines = (lines + splitter.feed(data))[-count:] if count else []
    if not follow:
        lines = (lines + splitter.finish())[-count:] if count else []
        f.close()
        return TailResult(live.id, "running", log, lines, None)
    return TailResult(live.id, "running", log, lines, _follow(live, f, splitter))


def tail_run(start: Path, name: str, engine: bool = False, count: int = 10, follow: bool = False) -> TailResult:
    """The last `count` lines of RUN's trainer log (engine log with `engine`); see the module doc.

    `latest` names the newest running run when one runs, else the newest recorded run.
    """
    repo, cfg, tip = open_branch(start)
    live = find_running(repo.root, name)
    if live is not None:
        return _tail_running(live, cfg.engine_patterns, engine, count, follow)
    entry = resolve(repo, tip, name)
    log = "engine.log" if engine else "trainer.log"
    data = read_file_at(repo, entry, log) or b""
    lines = data.splitlines(keepends=True)[-count:] if count else []
    if lines and not lines[-1].endswith(b"\n"):
        lines[-1] += b"\n"

    raw = read_file_at(repo, entry, "manifest.yaml")
    state = ((parse_manifest(raw, entry.path).get("status") or {}).get("state") if raw else None) or "unknown"
    return TailResult(entry.id, str(state), log, lines, None)
