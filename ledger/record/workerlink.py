"""How ledger and its log worker process talk: files in the staging folder, priorities, the wait.

The worker (`ledger.record.logworker`) reads its spec from `streamed.json`, writes its pid to
`streamed.pid` and its result to `streamed.pickle`; ledger tells it the job has ended by writing
the raw output's final size to `output.end`. Ledger then waits for the worker as long as it makes
progress (`wait_while_working`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.fsutil import write_atomic
from ledger.storage.staging import pid_alive

if TYPE_CHECKING:
    from ledger.storage.staging import Staged

SPEC = "streamed.json"
RESULT = "streamed.pickle"
END = "output.end"
PID = "streamed.pid"
POLL_S = 0.1
# The lowest priority among the worker's own processes. Under Linux autogroup (CPU shared between
# sessions) it does not rank the worker below the job, which runs in another session: FLOOD_RATE
# is what keeps the worker off the cores while the job floods.
WORKER_NICE = 19
FLOOD_RATE = 64 << 20  # bytes/s of output above which the worker waits (trainers write KB/s to MB/s)
STALL_S = 120.0  # seconds a worker may go without writing anything before it counts as hung


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


def mark_end(staging_dir: Path, size: int) -> None:
    """Tell the worker the raw file is complete at `size` bytes. On a full disk the marker's one
    data block may not fit while the logs are using the room left: an empty file named by the size
    needs none (a worker killed there kept only part of what was captured)."""
    try:
        write_atomic(staging_dir / END, str(size))
    except OSError:
        os.close(os.open(staging_dir / f"{END}.{size}", os.O_WRONLY | os.O_CREAT, 0o600))


def read_end(staging_dir: Path) -> int | None:
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


def catch_up_priority(pid: int) -> None:
    """The job is ending, so the worker's catch-up is now what the run waits for: give it ledger's
    own priority back where the system allows (root, or RLIMIT_NICE), else it keeps the lowest.
    Called before `mark_end`: the worker hands its priority on to its readers once it sees the end."""
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


def wait_while_working(proc: subprocess.Popen[bytes], staged: Staged, clock: Callable[[], float] = time.monotonic) -> int | str:
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


def stop_worker(staging_dir: Path) -> None:
    """Kill a worker left by a ledger that died (`recover` then redoes its work from the raw file);
    its readers see it gone and stop."""
    try:
        pid, start = json.loads((staging_dir / PID).read_text())
    except (OSError, ValueError, TypeError):
        return
    if pid_alive(int(pid), start):
        try:
            os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass
