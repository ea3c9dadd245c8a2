"""The default `ledger list` (no option), kept whole and printed again before the listing code is
imported (`ledger.storage.answers`): a repeated `ledger list` costs the start-up of click, two git
subprocesses and one small file, not pygit2, the index and the table (docs/performance.md).

What the default view prints depends on the ledger branch's tip (every run, tag, note and archive
mark is a file of it), on `origin/<branch>`'s tip (the "not pulled" note), on `.ledger.yaml` (the
branch's name), on the runs in progress in the staging folder, and on the code that made it. The
kept answer holds the first four as they were and is recalled only while they are the same: no
staged run, the same config bytes, each ref at the same commit (or absent as it was). The code's
version is in the entry's name (`ledger.cache`: the whole package's, since the listing code
imports, through the live runs and the CLI's verb table, nearly all of it).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from ledger.cache import LocalCache
from ledger.storage.answers import config_fingerprint, ref_tips, repository
from ledger.storage.staging import list_staged


@dataclass(frozen=True)
class KeptList:
    """What the default `ledger list` printed, and what it was computed from."""

    text: str  # the table, as printed on stdout
    broken: dict[str, str]  # runs skipped, and why (a warning each on stderr)
    unpulled: str | None  # the note that origin's branch holds runs this clone lacks
    refs: dict[str, str]  # each ref the listing read that existed, at its commit
    asked: tuple[str, ...]  # every ref it read (one absent then must be absent now)
    config_path: str
    config_sha: str | None  # None: there was no such file


def _cache(common_dir: Path) -> LocalCache:
    return LocalCache(common_dir, "answers")


def _key(root: Path, common_dir: Path) -> str:
    return "list-" + hashlib.sha256(json.dumps([str(root), str(common_dir)]).encode()).hexdigest()


def recall_list(start: Path) -> KeptList | None:
    """The default listing kept for this code and repository, while its branch, origin's branch,
    `.ledger.yaml` and the staging folder are as they were; None otherwise."""
    where = repository(start)
    if where is None:
        return None
    kept = _cache(where[1]).read_pickle(_key(*where), KeptList)
    if kept is None or _staged(where[0]) or config_fingerprint(Path(kept.config_path)) != kept.config_sha:
        return None
    return kept if ref_tips(where[0], list(kept.asked)) == kept.refs else None


def keep_list(root: Path, common_dir: Path, kept: KeptList) -> None:
    """Keep `kept` as this repository's default listing (a failure only costs time); the one an
    older ledger kept is removed (a table of 100,000 runs is ~8 MB)."""
    if _staged(root):
        return
    cache, key = _cache(common_dir), _key(root, common_dir)
    cache.write_pickle(key, kept)
    mine = cache.path(key, ".pickle")
    try:
        for old in cache.dir.glob(f"{key}-*.pickle"):
            if old != mine:
                old.unlink(missing_ok=True)
    except OSError:
        pass  # left: it is never read by this code


def _staged(root: Path) -> bool:
    """Whether a run is staged (in progress, or left by a ledger that died): the listing shows it."""
    try:
        return bool(list_staged(root))
    except OSError:
        return True  # cannot tell: the listing code reads it and says why
