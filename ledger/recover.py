"""`ledger recover`: commit every staged run whose ledger process is gone, with state `lost`."""

from __future__ import annotations

import mmap
import re
from pathlib import Path

from ledger.capture.stream import split_output
from ledger.config import load_config
from ledger.manifest import iso, parse_iso
from ledger.recording import RAW_OUTPUT, Say, finish
from ledger.storage import staging
from ledger.storage.git import Repo


def recover(start: Path, say: Say) -> list[str]:
    """Commit every staged run whose ledger process is gone, with state `lost`."""
    repo = Repo(start)
    cfg = load_config(repo.root)
    done = []
    for staged in staging.orphans(repo.root):
        if not staged.claim():
            continue
        if staged.release_job():
            say(f"ledger: run {staged.id}: its job was still there (maybe paused); resumed and sent SIGTERM")
        code = staged.load_code()
        m = staged.read_json("manifest.json")
        manifest_path = staged.dir / "manifest.json"
        if code is None or m is None:
            say(f"ledger: run {staged.id}: staged before its record was written; nothing to recover, removed")
            staged.remove()
            continue
        raw = staged.dir / RAW_OUTPUT
        last_output = raw.stat().st_mtime if raw.exists() else None
        if raw.exists():
            split = split_output(raw, staged.run_dir / "trainer.log", staged.run_dir / "engine.log",
                                 list(cfg.engine_patterns))
            stream_redacted = split.redactions.as_list()
            raw.unlink()
        else:
            stream_redacted = []
        logs = [staged.run_dir / n for n in ("trainer.log", "engine.log") if (staged.run_dir / n).exists()]
        last = max([p.stat().st_mtime for p in logs] + [manifest_path.stat().st_mtime]
                   + ([last_output] if last_output else []))
        started = parse_iso(m.get("started")) or last
        m["finished"] = iso(last)
        m["status"] = {"state": "lost", "exit_code": None, "signal": None, "duration_s": round(max(0.0, last - started), 3)}
        m["warnings"].append("ledger exited before the job ended; recovered by `ledger recover`")
        lines = command_lines_from_log(staged.run_dir / "trainer.log") if logs else []
        if m.get("gpu") is None and (staged.run_dir / "heat.log").exists():
            from ledger.heat.setup import summary_from_log

            m["gpu"] = summary_from_log(staged.run_dir / "heat.log")
        done.append(finish(repo, cfg, staged, m, code, lines, stream_redacted, say))
    return done


COMMAND_LINE_RE = re.compile(rb"^(?:\++ |EXEC: |ENV_REPORT_JSON=|\([^)]*\) ENV_REPORT_JSON=).*$", re.M)


def command_lines_from_log(path: Path, limit: int = 2000) -> list[str]:
    """The launcher's command lines (`+ ...`, `EXEC: ...`) found in an already written log."""
    if not path.exists() or path.stat().st_size == 0:
        return []
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        found = COMMAND_LINE_RE.finditer(mm)
        return [m.group(0).decode("utf-8", "replace") for _, m in zip(range(limit), found)]
