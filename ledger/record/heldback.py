"""Data files holding secret text are held back from DVC: found before `track_data` tracks a run's outputs.

Every file of every output is scanned (`ledger.redact.filescan`: bytes, streamed, zip members
inside, the run's known values and the shapes that need no name). A file with a hit never reaches
the DVC cache or remote:

- under the run's staging folder (the debug data ledger routes there), it is moved to the data
  folder's `held-back/<role>/`, which the end of the run keeps at `.ledger/untracked/<id>/held-back/`
  (`record.commit._keep_untracked_data`), and the rest of the output is tracked as usual;
- anywhere else (a path of the user's), nothing of the output is tracked and nothing is moved.

The output's `data` entry lists `held_back`: each file (relative to the output) and the rule that
found it, never the value.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import msgspec

from ledger.redact.filescan import Hit, scan_output
from ledger.redact.scanner import Redactor
from ledger.storage import staging

Say = Callable[[str], None]
HELD_DIR = "held-back"


class Screened(msgspec.Struct, frozen=True):
    """One output after the scan: whether what is left of it is tracked, and what was held back."""

    role: str
    path: Path
    template: str
    held: list[dict[str, str]] = msgspec.field(default_factory=list)  # {"file": ..., "rule": ...}
    track: bool = True
    error: str | None = None  # why nothing of it is tracked


def screen_outputs(redactor: Redactor, staged: staging.Staged, outputs: list[tuple[str, Path, str]], say: Say) -> list[Screened]:
    """Each (role, path, template) output scanned, its files with a hit held back (module docstring)."""
    return [_screen(redactor, staged, role, path, template, say) for role, path, template in outputs]


def _screen(redactor: Redactor, staged: staging.Staged, role: str, path: Path, template: str, say: Say) -> Screened:
    hits = scan_output(redactor, path)
    if not hits:
        return Screened(role, path, template)
    held = [{"file": h.file, "rule": h.rule} for h in hits]
    files = sorted({h.file.split("!", 1)[0] for h in hits})
    rules = ", ".join(sorted({h.rule for h in hits}))
    if not _inside(path, staged.dir):
        say(
            f"ledger: data '{role}' not tracked with DVC: {len(files)} file(s) hold secret text ({rules}); "
            "they stay where they are (the manifest's held_back names them)"
        )
        return Screened(role, path, template, held, False, f"held back: {len(files)} file(s) hold secret text (see held_back)")
    _move_held(staged, role, path, hits)
    say(
        f"ledger: data '{role}': {len(files)} file(s) held back, holding secret text ({rules}); not tracked with DVC, "
        f"kept under .ledger/untracked/{staged.id}/{HELD_DIR}/{role}/"
    )
    left = path.is_dir() and any(p.is_file() for p in path.rglob("*"))
    return Screened(role, path, template, held, left, None if left else "held back: every file holds secret text (see held_back)")


def _inside(path: Path, folder: Path) -> bool:
    path, folder = path.absolute(), folder.absolute()
    return path == folder or folder in path.parents


def _move_held(staged: staging.Staged, role: str, path: Path, hits: list[Hit]) -> None:
    """Move the files with a hit to the data folder's `held-back/<role>/` (same relative paths)."""
    dest_root = staged.data_dir / HELD_DIR / role
    for rel in sorted({h.file.split("!", 1)[0] for h in hits}):
        source = path if path.is_file() else path / rel
        dest = dest_root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(source), dest)
