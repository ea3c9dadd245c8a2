"""The on-disk staging area: a run's folder exists from its first second, so no crash loses it.

`<repo>/.ledger/` ignores itself (it holds a `.gitignore` of `*`), so nothing here ever shows in
`git status` and the user's `.gitignore` is never edited. Per run:
  .ledger/staging/<id>/owner.json   ledger's pid and start time, the job's process group
  .ledger/staging/<id>/code.json    the code snapshot taken before the job started
  .ledger/staging/<id>/manifest.json the manifest so far (JSON while staged)
  .ledger/staging/<id>/output.raw   the job's combined output while it runs (split at the end)
  .ledger/staging/<id>/run/         the run folder, committed as runs/<shard>/<id>/
  .ledger/staging/<id>/data/        bulky outputs, tracked with DVC, never committed
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.errors import LedgerError
from ledger.fsutil import write_atomic

if TYPE_CHECKING:  # pygit2 is not imported to list the staged runs (`storage/listanswer.py`)
    from ledger.storage.git import CodeSnapshot

LEDGER_DIR = ".ledger"
_CLAIMS: dict[Path, int] = {}  # finalising locks this process holds (path -> fd)
RAW_OUTPUT = "output.raw"


def ledger_dir(root: Path) -> Path:
    d = root / LEDGER_DIR
    if d.is_symlink():  # a pulled tree checked out here could plant it (docs/trust.md)
        raise LedgerError(f"{d} is a symbolic link", "ledger never writes through a link; remove it")
    d.mkdir(exist_ok=True)
    ignore = d / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# ledger's local state; never committed\n*\n")
    return d


def proc_start(pid: int) -> str | None:
    """When a process started, as the system says (seconds since the epoch, as text): with its
    pid it names one process, never a later one given the same pid. None when it is gone."""
    import psutil

    try:
        return repr(psutil.Process(pid).create_time())
    except (psutil.Error, OSError):
        return None


def _same_start(recorded: str, now: str) -> bool:
    """Whether two start times name the same start. A record written before December 2026 holds
    the kernel's clock ticks since boot (the start time field of the kernel's per-process stat), which psutil turns into its
    time the same way: ticks / CLK_TCK + boot time."""
    if "." in recorded:
        return recorded == now
    import psutil

    try:
        then = int(recorded) / os.sysconf("SC_CLK_TCK") + psutil.boot_time()
    except (ValueError, OSError):
        return False
    return bool(abs(then - float(now)) < 0.05)


def pid_alive(pid: int, start: str | None) -> bool:
    """Whether the process `pid` that started at `start` still runs (any process of that pid
    when `start` is None)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if start is None:
        return True
    now = proc_start(pid)
    return now is not None and _same_start(start, now)


@dataclass(frozen=True)
class Staged:
    """One staged run."""

    id: str
    dir: Path

    @property
    def run_dir(self) -> Path:
        return self.dir / "run"

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    @property
    def raw_output(self) -> Path:
        """The job's combined output as it arrives (split into the two logs when the job ended)."""
        return self.dir / RAW_OUTPUT

    def write_json(self, name: str, data: Mapping[str, object]) -> None:
        """A JSON file of the staged run (the record so far, the request), written atomically."""
        write_atomic(self.dir / name, json.dumps(data, indent=1, default=str))

    def read_json(self, name: str) -> dict[str, Any] | None:
        try:
            data = json.loads((self.dir / name).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def set_owner(self, job_pgid: int | None) -> None:
        """Name this ledger process the owner of the staged run (and the job's process group, once
        it has one). Before the job the pid alone (any process of that pid is taken for it, for the
        milliseconds until the job starts); with the job, its start time too: asking the system
        for it loads psutil (~20 ms), paid while the job runs rather than before it starts."""
        me = os.getpid()
        start = proc_start(me) if job_pgid is not None else None
        self.write_json("owner.json", {"ledger_pid": me, "ledger_start": start, "job_pgid": job_pgid})

    def owner_alive(self) -> bool:
        owner = self.read_json("owner.json")
        if owner is None:
            return False
        return pid_alive(int(owner["ledger_pid"]), owner.get("ledger_start"))

    def save_code(self, code: CodeSnapshot) -> None:
        from msgspec.structs import asdict  # msgspec is loaded by then: a run's record is made of its Structs

        self.write_json("code.json", asdict(code))

    def load_code(self) -> CodeSnapshot | None:
        data = self.read_json("code.json")
        from ledger.storage.git import CodeSnapshot

        return CodeSnapshot(**data) if data else None

    def claim(self) -> bool:
        """Take the right to finalise this run (one recoverer wins).

        A real lock (`flock` on `finalising`), held until this process removes the folder or
        dies: the kernel drops the lock of a `ledger recover` that died, so its marker never
        blocks the run forever.
        """
        path = self.dir / "finalising"
        if path in _CLAIMS:
            return True
        try:
            fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        except FileNotFoundError:
            return False  # another recoverer already committed and removed it
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        if not self.dir.is_dir():  # removed between our open and our lock
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        _CLAIMS[path] = fd
        return True

    def release_job(self) -> bool:
        """Resume and stop an orphaned job group (it may sit SIGSTOPped by a heat pause)."""
        owner = self.read_json("owner.json") or {}
        pgid = owner.get("job_pgid")
        if not pgid:
            return False
        try:
            os.killpg(int(pgid), signal.SIGCONT)
            os.killpg(int(pgid), signal.SIGTERM)
            os.killpg(int(pgid), signal.SIGCONT)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        fd = _CLAIMS.pop(self.dir / "finalising", None)
        if fd is not None:
            os.close(fd)


def create(root: Path, run_id: str) -> Staged:
    base = ledger_dir(root) / "staging"
    base.mkdir(exist_ok=True)
    staged = Staged(run_id, base / run_id)
    staged.run_dir.mkdir(parents=True)
    staged.data_dir.mkdir()
    return staged


def list_staged(root: Path) -> list[Staged]:
    base = root / LEDGER_DIR / "staging"
    if not base.is_dir():
        return []
    return [Staged(p.name, p) for p in sorted(base.iterdir()) if p.is_dir()]


def orphans(root: Path) -> list[Staged]:
    """Staged runs whose ledger process is gone."""
    return [s for s in list_staged(root) if not s.owner_alive()]
