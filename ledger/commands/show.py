"""`ledger show` and `ledger path`: one run, named as `ledger.runref` resolves names.

`show` prints the run's manifest (with a `meta` block first when tags, a note or the archived
flag were said about it since), or the manifest so far of a run still in progress; `path` prints
its folder inside the branch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ledger import yamlio
from ledger.manifest import ManifestError
from ledger.opening import open_branch
from ledger.runref import own_runs, resolve, runs_named, shared_name_note
from ledger.storage.listing import load_listing, parse_record
from ledger.storage.store import read_file_at
from ledger.textfmt import plural


def show_run(start: Path, name: str) -> tuple[dict[str, Any], str, str | None]:
    """One run's manifest, as data and as its YAML text, and a note when its name is shared.

    A run still in progress (`latest` names it when one runs, as in `ledger tail`) gives its
    manifest so far, from the staging area, with `status.state: running` and a note saying so."""
    repo, cfg, tip = open_branch(start)
    from ledger.record.live import find_running

    live = find_running(repo.root, name)
    if live is not None:
        so_far = {
            **live.manifest,
            "status": {"state": "running", "step": live.step, "last_step_at": live.last_step_at, "output_bytes": live.output_bytes},
        }
        running = (
            f"run {live.id} is still running: this is its manifest so far, not its record "
            "(settings, logs and metrics are added when it ends)"
        )
        return so_far, yamlio.dumps(so_far), running
    listing = load_listing(repo, tip) if tip is not None else None
    entry = resolve(repo, tip, name, listing)
    if listing is not None:
        listing.refuse_broken(entry.id)
    raw = read_file_at(repo, entry, "manifest.yaml")
    if raw is None:
        raise ManifestError(f"run {entry.id} has no manifest.yaml", "the record is damaged")
    record, manifest = parse_record(raw, entry.path)
    shown, text = with_meta_block(manifest, raw.decode("utf-8", "replace"), repo.read_blob(entry.meta_blob) if entry.meta_blob else None)
    note: str | None = None
    run_name = record.name
    if listing is not None and run_name:
        same = runs_named(listing, run_name, repo, tip)
        older = same.index(entry.id) if entry.id in same else 0
        if older:
            note = f"{plural(older, 'older run')} {'shares' if older == 1 else 'share'} the name '{run_name}': " + ", ".join(
                f"{run_name}~{k}" for k in range(len(same) - older, len(same))[:5]
            )
    if listing is not None and tip is not None:
        shared = shared_name_note(repo, tip, listing, entry, own_runs(repo, cfg.branch))
        note = f"{note}; {shared}" if note and shared else note or shared
    return shown, text, note


META_COMMENT = "# said about the run since it was recorded (ledger tag / note / archive); its record follows\n"


def with_meta_block(manifest: dict[str, Any], text: str, meta_raw: bytes | None) -> tuple[dict[str, Any], str]:
    """`ledger show`'s data and text: with a `meta` block first (tags, the note as it is now, the
    archived flag) when the run has a meta.json; the record itself unchanged after it."""
    if not meta_raw:
        return manifest, text
    from ledger.storage.runmeta import parse_meta

    meta = parse_meta(meta_raw)
    block = {"tags": list(meta.tags), "note": meta.note if meta.note is not None else manifest.get("note"), "archived": meta.archived}
    return {"meta": block, **manifest}, META_COMMENT + yamlio.dumps({"meta": block}) + text


def run_folder(start: Path, name: str) -> str:
    repo, _cfg, tip = open_branch(start)
    return resolve(repo, tip, name).path
