"""A run's metadata: tags, a note and the archived flag, in `runs/<shard>/<id>/meta.json`.

The run's own record (manifest, summary, logs) never changes once committed. What people change
about a run afterwards lives in this one small file, and each change is a new commit on the
branch that touches only it, marked with a `Ledger-Meta: <run id>` trailer (run commits carry
`Run-Id:`). Two clones that edit the same run's metadata concurrently merge on push/pull: each
local metadata commit is replayed as a three-way merge of its own change onto the other side's
file (`merge3`): tags are sets (both additions kept, a removal removes), the note and the
archived flag take the side that changed them (ours when both did).
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

import msgspec

from ledger.errors import LedgerError, UsageError
from ledger.manifest import run_path
from ledger.storage.git import MODE_BLOB, Repo
from ledger.storage.gitcmd import RefMoved
from ledger.storage.store import META_TRAILER, branch_ref, check_ledger_branch, file_oid, find_run

META_FILE = "meta.json"
MAX_TAG_LEN = 64
MAX_NOTE_LEN = 4000
MAX_CAS_ATTEMPTS = 100
MAX_META_BYTES = 64 * 1024  # a pulled meta.json larger than this is refused (storage/sync.py)


class RunMeta(msgspec.Struct, frozen=True):
    """What can change about a recorded run."""

    tags: tuple[str, ...] = ()
    note: str | None = None
    archived: bool = False
    extra: dict[str, object] = msgspec.field(default_factory=dict)  # keys a newer ledger wrote: kept as they are

    @classmethod
    def from_json(cls, data: Any) -> RunMeta:
        """Read a meta.json value leniently: a damaged file is no metadata, never fatal."""
        if not isinstance(data, dict):
            return cls()
        tags = data.get("tags")
        note = data.get("note")
        return cls(
            tuple(sorted({t for t in tags if isinstance(t, str)})) if isinstance(tags, list) else (),
            note if isinstance(note, str) else None,
            data.get("archived") is True,
            {k: v for k, v in data.items() if k not in ("tags", "note", "archived")},
        )

    def to_json(self) -> dict[str, object]:
        """The meta.json object: the unknown keys first, as read, then tags, note, archived."""
        return {**self.extra, "tags": sorted(set(self.tags)), "note": self.note, "archived": self.archived}


def read_meta(repo: Repo, commit_or_tree: str, run_id: str) -> RunMeta:
    """The run's metadata at a commit (empty when it has none; ManifestError when its meta.json is no file)."""
    oid = file_oid(run_path(run_id), META_FILE, repo.tree_entry(commit_or_tree, f"{run_path(run_id)}/{META_FILE}"))
    return parse_meta(repo.read_blob(oid)) if oid is not None else RunMeta()


def parse_meta(raw: bytes) -> RunMeta:
    try:
        return RunMeta.from_json(json.loads(raw))
    except ValueError:
        return RunMeta()


TAG_PUNCTUATION = "-_./:"  # besides letters and digits, what a tag may hold (the hint below says so)


def check_tag(tag: str) -> None:
    """A tag is one short word: letters, digits and `TAG_PUNCTUATION`, at most `MAX_TAG_LEN`
    characters (no space, comma, quote, `<`, `=` or control character)."""
    if not tag or len(tag) > MAX_TAG_LEN or not all(c.isalnum() or c in TAG_PUNCTUATION for c in tag):
        raise UsageError(
            f"tag {tag!r} is not one short word", f"use letters, digits and - _ . / : (at most {MAX_TAG_LEN} characters), e.g. baseline"
        )


def merge3(base: RunMeta, ours: RunMeta, theirs: RunMeta) -> RunMeta:
    """Our change from `base` applied on `theirs` (see the module docstring)."""
    added = set(ours.tags) - set(base.tags)
    removed = set(base.tags) - set(ours.tags)
    tags = tuple(sorted((set(theirs.tags) - removed) | added))
    note = ours.note if ours.note != base.note else theirs.note
    archived = ours.archived if ours.archived != base.archived else theirs.archived
    return RunMeta(tags, note, archived, {**theirs.extra, **ours.extra})


def meta_message(run_id: str, name: str | None, what: str) -> str:
    return f"meta {run_id} ({name or '-'}): {what}\n\n{META_TRAILER}: {run_id}\n"


def meta_tree(repo: Repo, commit: str, run_id: str, meta: RunMeta) -> str:
    """The tree of `commit` with only the run's meta.json replaced."""
    blob = repo.blob((json.dumps(meta.to_json(), sort_keys=True, indent=1) + "\n").encode())
    tree = repo.commit_info(commit)[2]
    return repo.tree_with_edits(tree, {f"{run_path(run_id)}/{META_FILE}": (blob, MODE_BLOB)})


class MetaChange(msgspec.Struct, frozen=True):
    """What a metadata command did."""

    run_id: str
    before: RunMeta
    after: RunMeta
    commit: str | None  # None: nothing changed, no commit written


def change_meta(repo: Repo, branch: str, run_id: str, name: str | None, what: str, edit: Any) -> MetaChange:
    """Commit `edit(meta) -> meta` for one run on the branch (compare-and-swap, retried when a run
    lands meanwhile). No commit when the edit changes nothing."""
    ref = branch_ref(branch)
    for _attempt in range(MAX_CAS_ATTEMPTS):
        tip = check_ledger_branch(repo, branch)
        if tip is None or find_run(repo, tip, run_id) is None:
            raise LedgerError(f"run {run_id} is not on branch '{branch}'", "`ledger list` shows the runs")
        before = read_meta(repo, tip, run_id)
        after: RunMeta = edit(before)
        if after.to_json() == before.to_json():
            return MetaChange(run_id, before, after, None)
        commit = repo.commit(meta_tree(repo, tip, run_id, after), [tip], meta_message(run_id, name, what))
        try:
            repo.update_ref(ref, commit, tip, f"ledger: {what} {run_id}")
            return MetaChange(run_id, before, after, commit)
        except RefMoved:
            time.sleep(random.uniform(0.001, 0.02))
    raise LedgerError(f"could not change run {run_id}: branch '{branch}' kept moving", "try again")


def rebuild_meta_commit(repo: Repo, tip: str, run_id: str, commit: str) -> str | None:
    """Replay a local metadata commit onto `tip` as a three-way merge; None when the run is not there."""
    if find_run(repo, tip, run_id) is None:
        return None
    message, parents, _tree = repo.commit_info(commit)
    base = read_meta(repo, parents[0], run_id) if parents else RunMeta()
    merged = merge3(base, read_meta(repo, commit, run_id), read_meta(repo, tip, run_id))
    return repo.commit(meta_tree(repo, tip, run_id, merged), [tip], message)
