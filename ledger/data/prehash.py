"""Hash a run's data files while the job runs, so the end of the run has little data work left.

A thread walks the run's data folder every `POLL_S` seconds. A file that has not changed
(size, mtime, inode) for `QUIET_S` seconds is taken as closed and hashed with DVC's own hashing
into the repository's DVC state (the hash store keyed by inode, mtime and size that `dvc add`
uses). When the run ends, `track_outputs` hashes through the same state: a file hashed here is not
read again, and a file rewritten after it was hashed no longer matches its state entry and is
hashed anew, so the record is always that of the final contents. A repository without DVC, or any
error, only means the end does the hashing, as it always did.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

POLL_S = 2.0
QUIET_S = 2.0


class PreHasher:
    """The hashing thread of one run's data folder (`start`, then `stop` before tracking)."""

    def __init__(self, repo_root: Path, data_dir: Path, poll_s: float = POLL_S, quiet_s: float = QUIET_S):
        self._root = repo_root
        self._dir = data_dir
        self._poll_s = poll_s
        self._quiet_s = quiet_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ledger-prehash", daemon=True)
        self._seen: dict[str, tuple[int, int, int]] = {}
        self._done: dict[str, tuple[int, int, int]] = {}
        self.hashed = 0  # files hashed so far (a rewritten file counts again)
        self.error: str | None = None

    def start(self) -> None:
        if (self._root / ".dvc").is_dir():
            self._thread.start()

    def stop(self) -> None:
        """Stop and wait: the DVC state is closed before the record's own tracking opens it."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _closed_files(self) -> list[str]:
        now = time.time_ns()
        ready = []
        for folder, _dirs, files in os.walk(self._dir):
            for name in files:
                path = os.path.join(folder, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                sig = (st.st_size, st.st_mtime_ns, st.st_ino)
                previous, self._seen[path] = self._seen.get(path), sig
                quiet = now - st.st_mtime_ns >= self._quiet_s * 1e9
                if previous == sig and quiet and self._done.get(path) != sig:
                    ready.append(path)
        return ready

    def _run(self) -> None:
        while not self._stop.wait(self._poll_s):
            try:
                ready = self._closed_files()
                if ready:
                    self._hash(ready)
            except Exception as exc:  # noqa: BLE001 - the end of the run hashes instead
                self.error = f"{type(exc).__name__}: {exc}"
                return

    def _hash(self, paths: list[str]) -> None:
        from ledger.data.dvcops import prehash_files

        signatures = {path: self._seen[path] for path in paths}
        count = prehash_files(self._root, paths, self._stop.is_set)
        for path in paths[:count]:
            self._done[path] = signatures[path]
        self.hashed += count
