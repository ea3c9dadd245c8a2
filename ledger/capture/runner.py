"""Running the job: its own process group, signals forwarded, never left stopped.

The job gets stdin from /dev/null and one pipe for stdout+stderr (read by `OutputCapture`).
SIGINT, SIGTERM and SIGHUP sent to ledger are forwarded to the job's whole process group, after
resuming it if the heat guard had paused it, so a Ctrl-C during a pause still stops the job. A job
that ignores the signal gets SIGKILL after `stop_grace_s` (`.ledger.yaml` `job.stop_grace_s`,
default 30 s); a second signal (the second Ctrl-C) sends SIGKILL at once. The record says so.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from queue import SimpleQueue
from typing import Any

import msgspec

from ledger.errors import EXIT_CANNOT_EXECUTE, EXIT_COMMAND_NOT_FOUND, LedgerError

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class JobResult(msgspec.Struct, frozen=True):
    """How the job ended."""

    exit_code: int  # the code ledger exits with: the job's, or 128+N for death by signal N
    returncode: int | None  # the job's own exit status, None when it died of a signal
    signal_name: str | None  # the signal that ended the job, if any
    forwarded: str | None  # the first signal ledger forwarded to it, if any
    duration_s: float
    escalated: str | None = None  # why ledger sent SIGKILL to the group, if it did

    @property
    def state(self) -> str:
        if self.forwarded is not None or (self.signal_name is not None and self.returncode is None):
            return "killed"
        return "finished" if self.exit_code == 0 else "failed"


class Job:
    """A started job: a process group whose output arrives on `output_fd`."""

    def __init__(self, argv: list[str], cwd: Path, env: Mapping[str, str], stop_grace_s: float):
        read_fd, write_fd = os.pipe()
        try:
            self.proc = subprocess.Popen(
                argv, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=write_fd, stderr=write_fd, start_new_session=True
            )
        except FileNotFoundError as exc:
            os.close(read_fd)
            raise LedgerError(
                f"command not found: {argv[0]}", "check the spelling and your PATH", exit_code=EXIT_COMMAND_NOT_FOUND
            ) from exc
        except PermissionError as exc:
            os.close(read_fd)
            raise LedgerError(
                f"command cannot be executed: {argv[0]} ({exc.strerror})",
                f"make it executable (`chmod +x {argv[0]}`) or run it through its interpreter",
                exit_code=EXIT_CANNOT_EXECUTE,
            ) from exc
        except OSError as exc:
            os.close(read_fd)
            raise LedgerError(
                f"command cannot be executed: {argv[0]} ({exc.strerror})",
                "check that it is a program or script with a #! line",
                exit_code=EXIT_CANNOT_EXECUTE,
            ) from exc
        finally:
            os.close(write_fd)
        self.output_fd = read_fd
        self.pgid = self.proc.pid  # start_new_session: the job leads its own group
        self.started = time.monotonic()
        self.forwarded: str | None = None
        self.escalated: str | None = None
        self.stop_grace_s = stop_grace_s
        self._timer: threading.Timer | None = None

    def signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def forward(self, signum: int, before_forward: Callable[[], None]) -> None:
        """Send a signal ledger received to the job's group (resuming it first if paused).

        The first one starts the grace timer; a second one escalates to SIGKILL at once.
        """
        if self.proc.returncode is not None:
            return  # the job is gone; ledger is only finishing its record
        before_forward()
        name = signal.Signals(signum).name
        if self.forwarded is not None:
            self.escalate(f"SIGKILL sent at once on a second signal ({name}) after {self.forwarded}")
            return
        self.forwarded = name
        self.signal_group(signum)
        self._timer = threading.Timer(
            self.stop_grace_s, self.escalate, (f"SIGKILL sent: the job was still running {self.stop_grace_s:g} s after {name}",)
        )
        self._timer.daemon = True
        self._timer.start()

    def escalate(self, why: str) -> None:
        """SIGKILL the job's whole group (it ignored the stop signal), and remember why."""
        if self.proc.returncode is not None or self.escalated is not None:
            return
        self.escalated = why
        self.signal_group(signal.SIGCONT)
        self.signal_group(signal.SIGKILL)

    def wait(self) -> JobResult:
        """Wait for the job to end (run inside `forwarding_signals`)."""
        returncode = self.proc.wait()
        duration = time.monotonic() - self.started
        if self._timer is not None:
            self._timer.cancel()
        if returncode < 0:
            sig = -returncode
            return JobResult(128 + sig, None, signal.Signals(sig).name, self.forwarded, duration, self.escalated)
        sig_name = None
        if returncode > 128 and self.forwarded is not None:
            try:
                sig_name = signal.Signals(returncode - 128).name
            except ValueError:
                sig_name = None
        return JobResult(returncode, returncode, sig_name, self.forwarded, duration, self.escalated)


class SignalGuard:
    """Installed before anything starts, removed after the record is committed.

    Before the job exists a signal aborts the start (nothing is recorded: nothing ran). While the
    job runs, SIGINT/SIGTERM/SIGHUP go to its process group (resumed first if the heat guard
    paused it). After it ended they are held off so ledger can finish writing the record: a run
    is never lost to an impatient second Ctrl-C.

    The handler itself only hands the signal to a thread (`SimpleQueue.put` is safe in a signal
    handler): Python runs a handler in the main thread between any two bytecodes, also while that
    thread waits for a module another thread is importing, and an import made by the handler
    there (a lazily imported module of `say`) broke CPython 3.11's import bookkeeping: the run
    ended in `internal error: KeyError: <thread id>` instead of a record. The thread forwards,
    takes the heat guard's lock and says what happened.
    """

    def __init__(self, say: Callable[[str], None]):
        self.job: Job | None = None
        self.before_forward: Callable[[], None] = lambda: None
        self._say = say
        self._previous: dict[int, Any] = {}
        self._pending: SimpleQueue[int] = SimpleQueue()
        self._worker = threading.Thread(target=self._serve, name="ledger-signals", daemon=True)

    def attach(self, job: Job, before_forward: Callable[[], None]) -> None:
        self.before_forward = before_forward
        self.job = job

    def _handle(self, signum: int, _frame: object) -> None:
        # no import, no lock, no I/O here (see the class docstring)
        if self.job is None:
            name = signal.Signals(signum).name
            raise LedgerError(f"interrupted by {name} before the job started", "nothing ran; nothing was recorded", exit_code=128 + signum)
        self._pending.put(signum)

    def _serve(self) -> None:
        while (signum := self._pending.get()) != 0:
            try:
                self._act(signum)
            except Exception as exc:  # noqa: BLE001 - the thread must keep serving the next signal
                self._say(f"ledger: could not forward {signal.Signals(signum).name}: {exc}")

    def _act(self, signum: int) -> None:
        job = self.job
        assert job is not None
        name = signal.Signals(signum).name
        if job.proc.returncode is None and job.proc.poll() is None:
            first = job.forwarded is None
            job.forward(signum, self.before_forward)
            self._say(
                f"ledger: forwarded {name} to the job; SIGKILL in {job.stop_grace_s:g} s; Ctrl-C again to kill now"
                if first
                else f"ledger: {name} again: sent SIGKILL to the job"
            )
        else:
            self._say(f"ledger: got {name} while writing the record; finishing first")

    def __enter__(self) -> SignalGuard:
        self._worker.start()
        self._previous = {s: signal.signal(s, self._handle) for s in FORWARDED}
        return self

    def __exit__(self, *exc: object) -> None:
        for s, old in self._previous.items():
            signal.signal(s, old)
        self._pending.put(0)  # the signals that arrived are acted on and said before ledger exits
        self._worker.join(timeout=5)
