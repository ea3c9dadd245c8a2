"""Follow a job submitted with `ray job submit --no-wait` to its real end, through Ray's Job API.

`ray job submit --no-wait` returns at once while the job runs on, so the launcher's exit says
nothing about the run. ledger's `ray` wrapper gives such a submission an id (`shim`); after the
launcher ended, `follow` streams the job's logs (`JobSubmissionClient.tail_job_logs`) into the
run's output, polls `get_job_status` until the job is SUCCEEDED, FAILED or STOPPED, and turns
Ctrl-C into `stop_job`. The only module that imports `ray` (imported lazily: an optional extra).

Exit codes: SUCCEEDED 0; FAILED the driver's exit code when Ray knows it, else 1; STOPPED 130 when
ledger stopped it on Ctrl-C, else 143 (stopped from elsewhere, like a SIGTERM).
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
DEFAULT_ADDRESS = "http://127.0.0.1:8265"


@dataclass(frozen=True)
class JobEnd:
    """How a followed Ray job ended; `status` None when Ray could not be reached."""

    submission_id: str
    address: str
    status: str | None
    exit_code: int | None
    stopped_by_ledger: bool
    message: str | None
    error: str | None
    followed_s: float


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
        return JobEnd(submission_id, address, None, None, False, None, "ray is not installed here (pip install 'ledger[ray]')", 0.0)
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
    driver_code = getattr(info, "driver_exit_code", None) if info is not None else None
    exit_code = {"SUCCEEDED": 0, "STOPPED": 130 if stopped else 143}.get(status or "")
    if status == "FAILED":
        exit_code = driver_code if isinstance(driver_code, int) and driver_code > 0 else 1
    return JobEnd(submission_id, address, status, exit_code, stopped, message, error, time.monotonic() - started)
