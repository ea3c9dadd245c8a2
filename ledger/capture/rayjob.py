"""Follow a job submitted with `ray job submit --no-wait` to its real end, through Ray's Job API.

`ray job submit --no-wait` returns at once while the job runs on, so the launcher's exit says
nothing about the run. ledger's `ray` wrapper gives such a submission an id (`shim`); after the
launcher ended, `follow` streams the job's logs (`JobSubmissionClient.tail_job_logs`) into the
run's output, polls `get_job_status` until the job is SUCCEEDED, FAILED or STOPPED, and turns
Ctrl-C into `stop_job`. The only module that imports `ray` (imported lazily: an optional extra).

A job submitted WITHOUT `--no-wait` is tailed by the Ray CLI itself; on Ctrl-C that CLI prints
`Aborted!` and exits 1 while the job runs on. `settle` is called once the launcher ended: when
the run was stopped (a forwarded signal, `stop_grace_s`'s SIGKILL, any death by signal) it stops
the job with `stop_job` and waits, bounded, for STOPPED; otherwise it reads how the job ended
(its driver's exit code and Ray's message: the CLI's own exit code is 1 for every failure).

Exit codes: SUCCEEDED 0; FAILED the driver's exit code when Ray knows it, else 1; STOPPED 130 when
ledger stopped it on Ctrl-C (128 + the signal that stopped the run for `settle`), else 143
(stopped from elsewhere, like a SIGTERM).
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec

from ledger.config import DEFAULT_RAY_DASHBOARD
from ledger.installhint import RAY_PACKAGE, install_hint

# a Ray job's end, as the run's state
RUN_STATE = {"SUCCEEDED": "finished", "FAILED": "failed", "STOPPED": "killed"}
TERMINAL = tuple(RUN_STATE)
DEFAULT_ADDRESS = DEFAULT_RAY_DASHBOARD


class JobEnd(msgspec.Struct, frozen=True):
    """How a followed Ray job ended; `status` None when Ray could not be reached."""

    submission_id: str
    address: str
    status: str | None
    exit_code: int | None
    stopped_by_ledger: bool
    message: str | None
    error: str | None
    followed_s: float
    stop_signal: str | None = None  # the signal that stopped the run, when ledger stopped the job for it
    waiting: bool = False  # submitted without --no-wait: the Ray CLI tailed it, `settle` read its end


def _unread(submission_id: str, address: str, error: str) -> JobEnd:
    """The end of a waited-for submission whose state Ray could not tell: `error` says why."""
    return JobEnd(submission_id, address, None, None, False, None, error, 0.0, waiting=True)


class Missing(msgspec.Struct, frozen=True):
    """`settle` found no such job on the cluster (the launcher ended before it submitted)."""

    submission_id: str
    reason: str


def _not_found(text: str) -> bool:
    """Whether a Job API error says Ray has no job of that id (a 404)."""
    return "404" in text or "does not exist" in text or "not found" in text.lower()


def _client(address: str) -> Any:
    from ray.job_submission import JobSubmissionClient  # lazily: ray is the optional extra `ray`

    return JobSubmissionClient(address)


def _tail(client: Any, submission_id: str, write: Callable[[bytes], None], done: threading.Event) -> None:
    async def run() -> None:
        async for chunk in client.tail_job_logs(submission_id):
            write(chunk.encode("utf-8", "surrogateescape"))

    try:
        asyncio.run(run())
    except Exception:  # noqa: BLE001 - the final get_job_logs fills what the tail missed
        pass
    finally:
        done.set()


def follow(
    address: str | None,
    submission_id: str,
    write: Callable[[bytes], None],
    poll_s: float = 0.5,
    say: Callable[[str], None] = lambda _text: None,
) -> JobEnd:
    """Stream the job's logs to `write` until it ends; Ctrl-C (SIGINT) stops the job."""
    address = address or DEFAULT_ADDRESS
    started = time.monotonic()
    interrupted = threading.Event()  # set before importing ray (seconds): no Ctrl-C is lost meanwhile
    previous = signal.signal(signal.SIGINT, lambda *_: interrupted.set())
    try:
        return _follow(address, submission_id, write, poll_s, say, interrupted, started)
    finally:
        signal.signal(signal.SIGINT, previous)


def _follow(
    address: str,
    submission_id: str,
    write: Callable[[bytes], None],
    poll_s: float,
    say: Callable[[str], None],
    interrupted: threading.Event,
    started: float,
) -> JobEnd:
    try:
        client = _client(address)
    except ImportError:
        return JobEnd(
            submission_id, address, None, None, False, None, f"ray is not installed here ({install_hint('ray', RAY_PACKAGE)})", 0.0
        )
    except Exception as exc:  # ConnectionError and friends, translated here
        return JobEnd(submission_id, address, None, None, False, None, f"Ray not reachable at {address}: {exc}", 0.0)
    written = bytearray()

    def keep(data: bytes) -> None:
        written.extend(data)
        write(data)

    tail_done = threading.Event()
    tail = threading.Thread(target=_tail, args=(client, submission_id, keep, tail_done), daemon=True, name="ledger-ray-tail")
    tail.start()
    stopped = False
    status: str | None = None
    error: str | None = None
    info: Any = None
    while True:
        if interrupted.is_set() and not stopped:
            say(f"ledger: stopping Ray job {submission_id}")
            client.stop_job(submission_id)
            stopped = True
        try:
            status = str(client.get_job_status(submission_id).value)
        except Exception as exc:  # the cluster went away while we followed it
            error = f"lost the Ray job {submission_id} at {address}: {exc}"
            break
        if status in TERMINAL:
            break
        time.sleep(poll_s)
    tail_done.wait(5)
    try:
        info = client.get_job_info(submission_id)
        logs = client.get_job_logs(submission_id).encode("utf-8", "surrogateescape")
        if not tail_done.is_set() or len(logs) > len(written):
            if logs.startswith(bytes(written)):
                write(logs[len(written) :])  # what the tail had not delivered
    except Exception:  # noqa: BLE001 - the logs are a best effort once the status is known
        pass
    message = getattr(info, "message", None) if info is not None else None
    exit_code = _exit_code(status, info, 130 if stopped else None)
    return JobEnd(submission_id, address, status, exit_code, stopped, message, error, time.monotonic() - started)


def _exit_code(status: str | None, info: Any, stopped_code: int | None) -> int | None:
    if status == "SUCCEEDED":
        return 0
    if status == "STOPPED":
        return stopped_code if stopped_code is not None else 143
    if status == "FAILED":
        driver_code = getattr(info, "driver_exit_code", None) if info is not None else None
        return driver_code if isinstance(driver_code, int) and driver_code > 0 else 1
    return None


def settle(
    address: str | None,
    submission_id: str,
    stop_signal: int | None,
    wait_s: float,
    say: Callable[[str], None] = lambda _text: None,
    poll_s: float = 0.25,
) -> JobEnd | Missing:
    """How a job submitted without `--no-wait` ended, once its launcher ended.

    `stop_signal` (the run was stopped by that signal): a job still PENDING or RUNNING is stopped
    through the Job API and waited for up to `wait_s` seconds; if it is not STOPPED by then, the
    end says what Ray reports. Without it a job still running is left alone (the caller follows
    it); its status is returned as Ray reports it.
    """
    address = address or DEFAULT_ADDRESS
    started = time.monotonic()
    try:
        client = _client(address)
    except ImportError:
        return _unread(submission_id, address, f"ray is not installed here ({install_hint('ray', RAY_PACKAGE)})")
    except Exception as exc:  # ConnectionError and friends, translated here
        return _unread(submission_id, address, f"Ray not reachable at {address}: {exc}")
    try:
        info = client.get_job_info(submission_id)
    except Exception as exc:  # Ray answers 404 for an id it never saw
        text = str(exc)
        if _not_found(text):
            return Missing(submission_id, text.splitlines()[0] if text else "no such job")
        return _unread(submission_id, address, f"lost the Ray job {submission_id} at {address}: {text.splitlines()[0] if text else exc}")
    status = str(info.status.value) if getattr(info, "status", None) is not None else None
    stopped, error = False, None
    if stop_signal is not None and status not in TERMINAL:
        stop = _stop(client, address, submission_id, info, status, wait_s, poll_s, say)
        info, status, stopped, error = stop.info, stop.status, stop.asked, stop.error
    code = _exit_code(status, info, 128 + stop_signal if stopped and stop_signal is not None else None)
    name = signal.Signals(stop_signal).name if stopped and stop_signal is not None else None
    return JobEnd(
        submission_id, address, status, code, stopped, getattr(info, "message", None), error, time.monotonic() - started, name, True
    )


class _Stopped(msgspec.Struct, frozen=True):
    """What `_stop` saw: Ray's last answer, whether the stop was asked, what went wrong."""

    info: Any
    status: str | None
    asked: bool
    error: str | None


def _stop(
    client: Any, address: str, submission_id: str, info: Any, status: str | None, wait_s: float, poll_s: float, say: Callable[[str], None]
) -> _Stopped:
    """Stop a job still PENDING or RUNNING through the Job API; wait up to `wait_s` for Ray to say
    it ended (said, with the command to do it by hand, when it did not)."""
    say(f"ledger: the run was stopped; stopping Ray job {submission_id} (it runs on after the Ray CLI exits)")
    asked, error = False, None
    try:
        client.stop_job(submission_id)
        asked = True
    except Exception as exc:  # noqa: BLE001 - said below with what Ray reports
        error = f"could not stop Ray job {submission_id}: {exc}"
    deadline = time.monotonic() + wait_s
    while status not in TERMINAL and time.monotonic() < deadline:
        time.sleep(poll_s)
        try:
            info = client.get_job_info(submission_id)
            status = str(info.status.value)
        except Exception as exc:  # noqa: BLE001 - the cluster went away while we waited
            error = f"lost the Ray job {submission_id} at {address} while stopping it: {exc}"
            break
    if status not in TERMINAL:
        error = error or (
            f"Ray job {submission_id} was still {status} {wait_s:g} s after ledger asked Ray to stop it (`ray job stop {submission_id}`)"
        )
        say(f"ledger: {error}")
    return _Stopped(info, status, asked, error)


def missing_logs(address: str | None, submission_id: str, seen: bytes) -> bytes:
    """The part of a job's logs the Ray CLI had not tailed when it exited (Ctrl-C): everything
    after the last line of `seen` (the end of the run's output) found in the job's logs; the
    whole log when none is found. Empty when the logs cannot be read."""
    try:
        logs: bytes = str(_client(address or DEFAULT_ADDRESS).get_job_logs(submission_id)).encode("utf-8", "surrogateescape")
    except Exception:  # noqa: BLE001 - a best effort: the record says the job's end anyway
        return b""
    for line in reversed(seen.splitlines()[-200:]):
        line = line.strip(b"\r")
        if len(line) < 12:
            continue
        at = logs.rfind(line)
        if at >= 0:
            rest = logs[at + len(line) :]
            return rest[1:] if rest.startswith(b"\n") else rest
    return logs


class JobState(msgspec.Struct, frozen=True):
    """What Ray says of one job now (`job_state`); `error` set when Ray could not be asked."""

    submission_id: str
    address: str
    status: str | None = None
    exit_code: int | None = None  # as `settle` gives it, once the job ended
    message: str | None = None
    start_s: float | None = None  # unix seconds, from Ray's job info
    end_s: float | None = None
    error: str | None = None

    @property
    def ended(self) -> bool:
        return self.status in TERMINAL


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def job_state(address: str | None, submission_id: str) -> JobState | Missing:
    """Ask the Job API at `address` how job `submission_id` stands (`ledger recover`)."""
    address = address or DEFAULT_ADDRESS
    try:
        client = _client(address)
    except ImportError:
        return JobState(submission_id, address, error=f"ray is not installed here ({install_hint('ray', RAY_PACKAGE)})")
    except Exception as exc:  # ConnectionError and friends, translated here
        return JobState(submission_id, address, error=f"Ray not reachable at {address}: {_first_line(exc)}")
    try:
        info = client.get_job_info(submission_id)
    except Exception as exc:  # Ray answers 404 for an id it never saw
        if _not_found(str(exc)):
            return Missing(submission_id, _first_line(exc))
        return JobState(submission_id, address, error=f"Ray at {address} did not say how job {submission_id} stands: {_first_line(exc)}")
    status = str(info.status.value) if getattr(info, "status", None) is not None else None

    def seconds(name: str) -> float | None:
        value = getattr(info, name, None)  # milliseconds since the epoch, 0 or None until known
        return value / 1000.0 if isinstance(value, (int, float)) and value > 0 else None

    return JobState(
        submission_id,
        address,
        status,
        _exit_code(status, info, None),
        getattr(info, "message", None),
        seconds("start_time"),
        seconds("end_time"),
    )


def wait_ended(address: str | None, submission_id: str, poll_s: float = 1.0) -> JobState | Missing:
    """`job_state` once the job has ended (or Ray can no longer be asked); Ctrl-C stops the wait
    (KeyboardInterrupt), never the job."""
    while True:
        state = job_state(address, submission_id)
        if isinstance(state, Missing) or state.error is not None or state.ended:
            return state
        time.sleep(poll_s)
