"""`ledger tag`, `ledger note`, `ledger archive`, `ledger unarchive`: change what is said about a
recorded run without touching its record (one metadata commit each: `ledger.storage.runmeta`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import msgspec

from ledger.config import Config
from ledger.errors import UsageError
from ledger.opening import open_branch
from ledger.redact.scanner import Redactor, secret_kinds_in_name
from ledger.redact.values import known_secrets
from ledger.runref import resolve
from ledger.storage.git import Repo
from ledger.storage.listing import load_listing
from ledger.storage.runmeta import MAX_NOTE_LEN, MetaChange, RunMeta, change_meta, check_tag


def _change(
    start: Path, runs: list[str], what: str, edit: Callable[[RunMeta], RunMeta], opened: tuple[Repo, Config, str | None] | None = None
) -> list[MetaChange]:
    repo, cfg, tip = opened or open_branch(start)
    listing = load_listing(repo, tip) if tip is not None else None
    entries = [resolve(repo, tip, r, listing) for r in runs]  # every name checked before any commit
    names = {e.id: (listing.manifests.get(e.id) or {}).get("name") if listing else None for e in entries}
    return [change_meta(repo, cfg.branch, e.id, names[e.id], what, edit) for e in dict.fromkeys(entries)]


def tag_run(start: Path, run: str, tags: list[str], remove: bool) -> MetaChange:
    """Add (or with `remove`, take away) tags on one run."""
    if not tags:
        raise UsageError("no tag given", "ledger tag RUN TAG [TAG...]")

    for t in tags if not remove else ():  # what is added is checked; any tag can be taken away (a pulled one too)
        check_tag(t)
        if kinds := secret_kinds_in_name(t):  # a tag goes raw into meta.json and the commit message, as a name
            raise UsageError(f"a tag holds what looks like a secret ({', '.join(kinds)})", "tag the run without credentials, e.g. baseline")
    what = ("untag " if remove else "tag ") + " ".join(tags)

    def edit(m: RunMeta) -> RunMeta:
        now = set(m.tags) - set(tags) if remove else set(m.tags) | set(tags)
        return msgspec.structs.replace(m, tags=tuple(sorted(now)))

    return _change(start, [run], what, edit)[0]


def note_run(start: Path, run: str, text: str) -> MetaChange:
    """Set the run's note (what `ledger list` and `show` say about it); secrets in it are hidden."""
    if len(text) > MAX_NOTE_LEN:
        raise UsageError(f"the note is {len(text)} characters long", f"keep it under {MAX_NOTE_LEN}")

    opened = open_branch(start)
    cfg = opened[1]
    clean = Redactor(known_secrets([], dict(os.environ), [text], cfg.secret_env_names), cfg.secrets.names).redact_text(text)
    return _change(start, [run], "note", lambda m: msgspec.structs.replace(m, note=clean), opened)[0]


def archive_runs(start: Path, runs: list[str], archived: bool) -> list[MetaChange]:
    """Hide runs from `ledger list` (and from name resolution), or show them again."""
    if not runs:
        raise UsageError("no run given", f"ledger {'archive' if archived else 'unarchive'} RUN [RUN...]")
    return _change(start, runs, "archive" if archived else "unarchive", lambda m: msgspec.structs.replace(m, archived=archived))
