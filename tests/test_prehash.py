"""Data files hashed while the job runs (`ledger.data.prehash`): the record is always that of the
final contents, however often a file was rewritten after it was hashed. Real git + DVC repository;
the rollout file is random bytes in a `.pt` name, as Miles' `--save-debug-rollout-data` writes one
file per rollout id (shared/miles-facts.md)."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path

from conftest import ledger

from ledger.data.dvcops import track_outputs
from ledger.data.prehash import PreHasher


def _wait_for(what: str, check: Callable[[], bool], limit_s: float = 60) -> None:
    """Poll until `check()` (a guard against hanging, not a timing check)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


def _write(path: Path, data: bytes, age_s: float) -> None:
    """Rewrite in place (same inode, same size) and date it `age_s` seconds back."""
    with open(path, "r+b" if path.exists() else "wb") as f:
        f.write(data)
    t = time.time() - age_s
    os.utime(path, (t, t))


def _staged_run(repo: Path, role: str) -> tuple[Path, Path, Path]:
    """`ledger init` done; a staged run's folder, its run folder and its `data/<role>` folder."""
    assert ledger(repo, "init").returncode == 0
    staged = repo / ".ledger" / "staging" / "20261201-100000-abcd"
    (staged / "run").mkdir(parents=True)
    (staged / "data" / role).mkdir(parents=True)
    return staged, staged / "run", staged / "data" / role


def test_a_rollout_file_rewritten_after_it_was_hashed_is_hashed_again(repo: Path) -> None:
    staged, run_dir, rollout = _staged_run(repo, "rollout")
    target = rollout / "0.pt"
    contents = [os.urandom(64 << 10) for _ in range(3)]
    _write(target, contents[0], 30)

    hasher = PreHasher(repo, staged / "data", poll_s=0.05, quiet_s=1.0)
    hasher.start()
    try:
        _wait_for("the first hash", lambda: hasher.hashed >= 1)
        _write(target, contents[1], 20)  # rewritten while the job runs: noticed and hashed again
        _wait_for("the second hash", lambda: hasher.hashed >= 2)
    finally:
        hasher.stop()
    assert hasher.error is None
    _write(target, contents[2], 10)  # rewritten after the last hash, nobody watching

    [record] = track_outputs(repo, run_dir, [("rollout", rollout)], [staged])
    assert record.tracked, record.error
    tree = (repo / ".dvc" / "cache" / "files" / "md5" / record.hash[:2] / record.hash[2:]).read_text()
    assert hashlib.md5(contents[2]).hexdigest() in tree
    assert hashlib.md5(contents[1]).hexdigest() not in tree


def test_a_log_hash_from_the_log_worker_is_used_only_while_the_file_is_unchanged(repo: Path) -> None:
    """`track_outputs(known=...)` (the md5 the log worker computed as it read a big log back) is
    trusted for the file as it was then: the state is used (a planted wrong md5 proves it), and a
    file whose inode, mtime or size changed since is hashed anew."""
    staged, run_dir, logs = _staged_run(repo, "logs")
    log = logs / "engine.log"
    log.write_bytes(b"line\n" * 1000)
    st = log.stat()
    planted = "0" * 32  # not the file's md5: only the state can have given it
    known = {log: (planted, (st.st_ino, st.st_mtime_ns, st.st_size))}

    def cached_tree() -> str:
        [record] = track_outputs(repo, run_dir, [("logs", logs)], [staged], known=known)
        assert record.hash is not None, record.error
        return (repo / ".dvc" / "cache" / "files" / "md5" / record.hash[:2] / record.hash[2:]).read_text()

    assert planted in cached_tree()
    log.write_bytes(b"other\n" * 1000)  # changed after it was hashed: the signature no longer matches
    tree = cached_tree()
    assert hashlib.md5(b"other\n" * 1000).hexdigest() in tree and planted not in tree
