"""Capture a job's combined stdout+stderr from a pipe: live to the terminal, split into two logs.

A dedicated thread (`OutputCapture`) reads the pipe in large chunks and writes every chunk raw to
the terminal and to a raw file; a `LineSplitter` (run by `ledger.record.streamed`) splits the
bytes line by line into ``engine.log`` (lines from SGLang engines, recognised by a
line-start regex) and ``trainer.log`` (everything else). Bytes are never decoded; order is kept
within each file. Lines that may hold secrets are redacted before they reach the files (the
terminal gets the raw bytes): every line a `ledger.redact.scanner.Redactor` flags (token shapes,
secret-named values, URL credentials, private-key blocks, the run's known secret values), found by
one fast scan per block; launcher command lines are kept for the settings.

Speed (the job must never wait on us): per chunk, one C-level regex pass finds the runs of
consecutive engine lines (`ledger.redact.lines.engine_runs`); each run, and the lines between two
runs, is one slice of the chunk, so Python works per run, not per line, and touches single lines
only where a chunk holds a command or suspect line (rare); the slices go to the files with
``os.writev``, uncopied. A line
longer than `MAX_LINE` bytes is written in pieces to the file its start belongs to, redacted in
overlapping windows (`Redactor.redact_part`), so memory stays bounded. `bench/bench_capture.py` measures it against ``tee``.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import os
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from ledger.config import DEFAULT_ENGINE_PATTERNS
from ledger.redact.lines import (
    COMMAND,
    COMMAND_START,
    engine_alternatives,
    engine_runs,
    line_local,
    suspect_spans,
)
from ledger.redact.names import Redactions
from ledger.redact.scanner import Redactor

__all__ = ["DEFAULT_ENGINE_PATTERNS", "LineSplitter", "OutputCapture"]

# Ray colours actor prefixes even into pipes and files (`ESC[36m(SGLangEngine pid=1)ESC[0m ...`,
# miles-facts.md): lines are classified as if these codes were not there; the bytes are kept.
ANSI_CODES = rb"(?:\x1b\[[0-9;]*m)*"


def colour_tolerant(patterns: Sequence[str]) -> list[str]:
    """The engine patterns, each allowing colour codes before it (and inside the prefix)."""
    return [ANSI_CODES.decode() + p.removeprefix("^") for p in patterns]


@functools.lru_cache(maxsize=16)
def _classifier(patterns: tuple[str, ...]) -> re.Pattern[bytes]:
    return re.compile(engine_alternatives(colour_tolerant(patterns)))


CHUNK = 1 << 20
MAX_LINE = 8 << 20
MAX_COMMAND_LINES = 2000
MAX_COMMAND_BYTES = 4 << 20
# Linux fcntl F_SETPIPE_SZ; a 1 MiB pipe buffer lets one read return a whole chunk.
_F_SETPIPE_SZ = 1031
_IOV_MAX = 1024  # Linux's limit on buffers per writev


Buffers = list[bytes | memoryview]


class _Sink:
    """One output file; a write error stops writing it but never stops the capture."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.error: OSError | None = None
        self.written = 0
        # called when the disk is full: True when it freed room, and the write is tried again
        self.on_full: Callable[[], bool] | None = None
        # how many more bytes this file may take (None: no bound); set once the disk was full,
        # so that the logs leave room for the record
        self.room: Callable[[], int | None] | None = None

    def write(self, buffers: Buffers) -> None:
        """Write the buffers in order with ``writev`` (no copy into one block)."""
        if self.fd is None:
            return
        fd = self.fd
        room = self.room() if self.room is not None else None
        if room is not None and sum(map(len, buffers)) > room:
            whole = b"".join(buffers)
            buffers = [whole[: max(room, 0)]]
            self.error = OSError(errno.ENOSPC, "No space left on device (the rest of the disk is left for the record)")
        try:
            for i in range(0, len(buffers), _IOV_MAX):
                batch = buffers[i : i + _IOV_MAX]
                done = self._retrying(functools.partial(os.writev, fd, batch))
                self.written += done
                view = memoryview(b"".join(batch))[done:] if done < sum(map(len, batch)) else None
                while view:  # after a short write (a signal, a full disk)
                    done = self._retrying(functools.partial(os.write, fd, view))
                    self.written += done
                    view = view[done:]
        except OSError as exc:
            self.error = exc
        if self.error is not None:
            self.close()

    def _retrying(self, write: Callable[[], int]) -> int:
        while True:
            try:
                return write()
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or self.on_full is None or not self.on_full():
                    raise

    def close(self) -> None:
        """Close the file (no fsync: the page cache writes it back, as for git's own objects)."""
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None


class LineSplitter:
    """Splits a byte stream into the trainer and engine files, redacting suspect lines.

    Feed chunks of any size with `feed`, then call `finish` once. Engine patterns match at a
    line start (a leading ``^`` is implied) and never match across a newline: where a pattern
    did (the count of engine line starts differs from the lines of the runs), that block is split
    one line at a time.
    """

    def __init__(
        self,
        trainer_path: Path,
        engine_path: Path,
        engine_patterns: Sequence[str] = DEFAULT_ENGINE_PATTERNS,
        redactor: Redactor | None = None,
        max_line: int = MAX_LINE,
    ):
        tolerant = colour_tolerant(engine_patterns)
        self._engine = re.compile(engine_alternatives(tolerant))
        self._plain = engine_runs(engine_alternatives(engine_patterns))  # a body without colour codes
        self._tolerant = engine_runs(engine_alternatives(tolerant))
        # patterns that can never match a newline (the default) need no count of engine line starts
        self._verify_all = not all(line_local(p) for p in engine_patterns)
        self.trainer = _Sink(trainer_path)
        self.engine = _Sink(engine_path)
        self.redactor = redactor if redactor is not None else Redactor()
        self.trainer_redactions = Redactions()
        self.engine_redactions = Redactions()
        self.command_lines: list[str] = []
        self._command_bytes = 0
        self._max_line = max_line
        self._pending: list[bytes] = []
        self._pending_len = 0
        self._long_target: _Sink | None = None  # where the rest of an over-long line goes

    def feed(self, data: bytes) -> None:
        """Process one chunk; a trailing partial line is kept until its newline arrives."""
        first = data.find(b"\n")
        if first < 0:
            self._pending.append(data)
            self._pending_len += len(data)
            if self._pending_len >= self._max_line:
                self._flush_long(final=False)
            return
        start = 0
        if self._long_target is not None:
            self._pending.append(data[: first + 1])
            self._flush_long(final=True)
            start = first + 1
        last = data.rfind(b"\n") + 1
        if last > start:
            whole = start == 0 and last == len(data)
            self._block([*self._pending, data if whole else memoryview(data)[start:last]])
        self._pending = [data[last:]] if last < len(data) else []
        self._pending_len = len(data) - last

    def finish(self) -> None:
        """Write a final line that has no newline, then flush and close both files."""
        try:
            if self._long_target is not None:
                self._flush_long(final=True)
            elif self._pending:
                self._last_line(b"".join(self._pending))
            self._pending = []
            self.redactor.flush()
        finally:
            self.trainer.close()
            self.engine.close()

    def _flush_long(self, final: bool) -> None:
        piece = b"".join(self._pending)
        self._pending = []
        self._pending_len = 0
        if self._long_target is None:
            is_engine = self._engine.match(piece) is not None
            self._long_target = self.engine if is_engine else self.trainer
        acc = self.engine_redactions if self._long_target is self.engine else self.trainer_redactions
        self._long_target.write([self.redactor.redact_part(piece, final, acc)])
        if final:
            self._long_target = None

    def _last_line(self, line: bytes) -> None:
        """A final line without a newline (at EOF)."""
        trainer: Buffers = []
        engine: Buffers = []
        body = b"\n" + line + b"\n"
        if suspect_spans(body[:-1], self.redactor):
            self._redacted_into(line, trainer, engine)
        else:
            self._split_lines(body, 0, len(body) - 1, trainer, engine)
        sink, out = (self.engine, engine) if engine else (self.trainer, trainer)
        sink.write([b"".join(out)[:-1]])

    def _block(self, pieces: Buffers) -> None:
        """Split whole lines (the concatenation of `pieces` ends with a newline)."""
        body = b"".join([b"\n", *pieces])  # every line is "\n" + its content
        trainer: Buffers = []  # the trainer lines, each content + "\n"
        engine: Buffers = []  # the engine lines, likewise
        pos = 0
        for start, end in suspect_spans(body, self.redactor):  # rare; cut around them
            self._split_lines(body, pos, start - 1, trainer, engine)
            self._redacted_into(body[start:end], trainer, engine)
            pos = end
        self._split_lines(body, pos, len(body) - 1, trainer, engine)
        if engine:
            self.engine.write(engine)
        self.trainer.write(trainer)

    def _split_lines(self, body: bytes, lo: int, hi: int, trainer: Buffers, engine: Buffers) -> None:
        """Sort the lines of ``body[lo:hi]`` ("\\n" + content, repeated; ``body[hi]`` is the next
        newline) into `trainer` and `engine`, as slices of `body` (content + "\\n" each): a run of
        engine lines and the lines between two runs are one slice each."""
        if hi <= lo:
            return
        runs = self._tolerant if body.find(b"\x1b", lo, hi) >= 0 else self._plain
        view = memoryview(body)
        to_trainer: Buffers = []
        to_engine: Buffers = []
        prev, lines, verify = lo, 0, self._verify_all
        for m in runs.run.finditer(body, lo, hi):
            start, end = m.span()
            if start > prev:
                to_trainer.append(view[prev + 1 : start + 1])
            to_engine.append(view[start + 1 : end + 1])
            if verify:  # the lines of the run, checked against the engine line starts below
                lines += body.count(b"\n", start, end)
            prev = end
        if not to_engine:
            trainer.append(view[lo + 1 : hi + 1])
            return
        if self._verify_all and len(runs.starts.findall(body, lo, hi)) != lines:  # a pattern matched across a line end
            self._split_by_line(body[lo:hi], trainer, engine)
            return
        if prev < hi:
            to_trainer.append(view[prev + 1 : hi + 1])
        trainer.extend(to_trainer)
        engine.extend(to_engine)

    def _split_by_line(self, seg: bytes, trainer: Buffers, engine: Buffers) -> None:
        """The slow path: one line at a time (`seg` is "\\n" + content, repeated)."""
        for line in seg.split(b"\n")[1:]:
            (engine if self._engine.match(line) is not None else trainer).append(line + b"\n")

    def _redacted_into(self, line: bytes, trainer: Buffers, engine: Buffers) -> None:
        """Redact a suspect line into `trainer` or `engine`; keep it if it is a command line."""
        to_engine = COMMAND_START.match(line) is None and self._engine.match(line) is not None
        new = self.redactor.redact_line(line, self.engine_redactions if to_engine else self.trainer_redactions)
        if COMMAND.match(line) is not None:
            self._keep_command(new)
        (engine if to_engine else trainer).append(new + b"\n")

    def truncation_notes(self) -> list[str]:
        """One line per log whose writing failed (a full disk): where it stops, and why."""
        return [
            f"{sink.path.name} truncated at byte {sink.written}: {sink.error.strerror or sink.error}"
            for sink in (self.trainer, self.engine)
            if sink.error is not None
        ]

    @property
    def redacted(self) -> list[str]:
        """What was redacted where (``trainer.log: <name>``, ``engine.log: pattern:<kind>``)."""
        return self.trainer_redactions.at(self.trainer.path.name) + self.engine_redactions.at(self.engine.path.name)

    def _keep_command(self, line: bytes) -> None:
        if len(self.command_lines) < MAX_COMMAND_LINES and self._command_bytes + len(line) <= MAX_COMMAND_BYTES:
            self._command_bytes += len(line)
            self.command_lines.append(line.rstrip(b"\r\n").decode("utf-8", "replace"))


class OutputCapture:
    """Reads a job's output pipe on a dedicated thread: raw to the terminal and to `raw_path`.

    The capture owns `fd` and closes it when the thread ends (EOF, or a read error). It copies
    the output as `tee` does; the split into the two logs (a `LineSplitter`) runs elsewhere:
    `ledger.record.streamed` follows the raw file while the job runs, so a job flooding its
    output is never throttled by the split (CPython splits at roughly half of tee's speed on 2
    cores).
    """

    def __init__(self, fd: int, terminal_fd: int | None, raw_path: Path):
        self._fd = fd
        self._terminal_fd = terminal_fd
        self._raw_path = raw_path
        self._raw_fd: int | None = None
        self._thread = threading.Thread(target=self._run, name="ledger-capture", daemon=True)
        self.bytes_in = 0
        self.error: BaseException | None = None
        self.raw_error: OSError | None = None  # writing the raw file failed (a full disk)
        self.raw_kept = 0  # bytes of output in the raw file when that happened

    def start(self) -> None:
        """Start the reader thread."""
        try:
            fcntl.fcntl(self._fd, _F_SETPIPE_SZ, CHUNK)
        except OSError:
            pass  # not a pipe, or above the kernel's pipe-max-size: smaller reads still work
        self._raw_fd = os.open(self._raw_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self._thread.start()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for EOF and the raw file to be closed; returns whether the thread has ended."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _to_terminal(self, data: bytes) -> None:
        if self._terminal_fd is None:
            return
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._terminal_fd, view) :]
        except OSError:
            self._terminal_fd = None  # EPIPE, closed terminal: keep capturing silently

    def _run(self) -> None:
        try:
            while True:
                try:
                    data = os.read(self._fd, CHUNK)
                except OSError:
                    break  # EIO from a closed pty behaves like EOF
                if not data:
                    break
                self.bytes_in += len(data)
                self._to_terminal(data)
                if self._raw_fd is not None:
                    try:
                        _write_all(self._raw_fd, data)
                    except OSError as exc:  # keep draining to the terminal; the record says where it stopped
                        self._raw_failed(exc)
        except BaseException as exc:  # noqa: BLE001 - reported through .error, never lost
            self.error = exc
            self._drain()
        finally:
            if self._raw_fd is not None:
                os.close(self._raw_fd)
            os.close(self._fd)

    def _raw_failed(self, exc: OSError) -> None:
        fd, self._raw_fd = self._raw_fd, None
        if fd is not None:
            try:
                self.raw_kept = os.lseek(fd, 0, os.SEEK_CUR)
                os.close(fd)
            except OSError:
                pass
        self.raw_error = exc

    def truncation_notes(self) -> list[str]:
        """One line when the raw file is shorter than the job's output, saying where and why."""
        if self.raw_error is None:
            return []
        return [
            f"logs truncated: saving the job's output failed after {self.raw_kept} of "
            f"{self.bytes_in} bytes ({self.raw_error.strerror or self.raw_error}); "
            "the rest reached the terminal only"
        ]

    def _drain(self) -> None:
        """After an internal error keep the pipe flowing so the job never blocks on it."""
        try:
            while data := os.read(self._fd, CHUNK):
                self.bytes_in += len(data)
                self._to_terminal(data)
        except OSError:
            pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def split_file(raw: Path, splitter: LineSplitter, block: int = 4 * CHUNK) -> LineSplitter:
    """Feed a raw output file through a splitter in large blocks, then finish it."""
    with open(raw, "rb") as f:
        while data := f.read(block):
            splitter.feed(data)
    splitter.finish()
    return splitter
