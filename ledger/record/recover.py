"""`ledger recover`: commit every staged run whose ledger process is gone, with state `lost`."""

from __future__ import annotations

from pathlib import Path

from ledger.config import Config
from ledger.configload import load_config
from ledger.errors import LedgerError
from ledger.record.run import Say, finish, note_truncation
from ledger.record.streamed import StreamResult, from_split_logs, process_raw, retire_raw, stop_worker, was_punched
from ledger.redact.runscrub import load_secrets
from ledger.redact.scanner import Redactor
from ledger.storage import staging
from ledger.storage.git import Repo
from ledger.timefmt import iso, parse_iso


def recover(start: Path, say: Say) -> list[str]:
    """Commit every staged run whose ledger process is gone, with state `lost`."""
    repo = Repo(start)
    cfg = load_config(repo.root, repo.common_dir)
    done: list[str] = []
    for staged in staging.orphans(repo.root):
        try:
            _recover_one(repo, cfg, staged, say, done)
        except OSError as exc:  # a full disk, a read-only folder: the run stays staged, whole
            raise LedgerError(
                f"could not recover run {staged.id}: {exc.strerror or exc}"
                f"{' (' + exc.filename + ')' if isinstance(exc.filename, str) else ''}",
                "the run stays staged; free space (or make the repository writable) and run `ledger recover` again",
            ) from exc
    return done


def _recover_one(repo: Repo, cfg: Config, staged: staging.Staged, say: Say, done: list[str]) -> None:
    """Commit one staged run whose ledger is gone (appended to `done`), unless another recover has it."""
    if not staged.claim():
        return
    if staged.release_job():
        say(f"ledger: run {staged.id}: its job was still there (maybe paused); resumed and sent SIGTERM")
    code = staged.load_code()
    m = staged.read_json("manifest.json")
    manifest_path = staged.dir / "manifest.json"
    if code is None or m is None:
        say(f"ledger: run {staged.id}: staged before its record was written; nothing to recover, removed")
        staged.remove()
        return
    # the job's output is the best clock of when it last did anything; read it before the
    # split below rewrites the logs (and their mtimes)
    raw = staged.raw_output
    stamps = [manifest_path.stat().st_mtime] + [p.stat().st_mtime for p in (raw, staged.run_dir / "heat.log") if p.exists()]
    last = max(stamps)
    secrets = load_secrets(staged.dir)  # exactly the values a normal finish scrubs
    stop_worker(staged.dir)  # a log worker the dead ledger left; its work is redone from the raw file
    logs: StreamResult | None = None  # None: the logs were split before ledger died
    if raw.exists() and was_punched(staged.dir):  # a split on a full disk had freed its start
        logs = from_split_logs(staged.run_dir, "by ledger recover, from the logs split so far")
        retire_raw(staged, secrets, logs)
    elif raw.exists():
        logs = process_raw(raw, staged.run_dir, list(cfg.engine_patterns), Redactor(secrets, cfg.secret_names))
        logs.where = "by ledger recover, from the raw output"
        retire_raw(staged, secrets, logs)
    started = parse_iso(m.get("started")) or last
    ended = (m.get("status") or {}).get("state") not in (None, "running")
    if ended:  # the job ended and its status was saved; only the commit failed
        m["warnings"].append("ledger could not commit the record when the job ended; committed by `ledger recover`")
    else:
        m["finished"] = iso(last)
        m["status"] = {"state": "lost", "exit_code": None, "signal": None, "duration_s": round(max(0.0, last - started), 3)}
        m["warnings"].append("ledger exited before the job ended; recovered by `ledger recover`")
    if logs is not None:  # after the status above: a truncation is said in it too, as for a run
        note_truncation(staged.run_dir, m, logs.truncated, say)
    if m.get("gpu") is None and (staged.run_dir / "heat.log").exists():
        from ledger.heat.setup import summary_from_log

        m["gpu"] = summary_from_log(staged.run_dir / "heat.log")
    done.append(finish(repo, cfg, staged, m, code, logs, say, secrets=secrets))
