"""What a run commit's tree may hold beside its run folder: the code it saw, and nothing else.

A run commit's tree is its code commit's tree with the run's uncommitted changes to tracked files,
plus `runs/` (ledger/storage/store.py, `build_run_tree`). Two rules make that tree checkable by a
clone that pulls it (ledger/storage/incoming.py):

- the files that configure a checkout rather than being code are always recorded as committed,
  never with their uncommitted changes: git's (`.gitattributes` at any depth: filters and diff
  drivers; `.gitmodules`: submodule URLs; `.lfsconfig`: the LFS endpoint), DVC's (`.dvc/`: its
  remotes), ledger's (`.ledger.yaml`: the job's environment) and the records (`runs/`). A pulled run
  commit that changes one of them is refused: a checkout of the branch would run with them.
- `patch_id` is one id for the uncommitted changes, computed from exactly the paths whose entry
  differs from the code commit's tree, so the id a manifest records can be recomputed from the
  two trees.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

# top-level paths recorded as committed (a name ending in "/" is a folder and everything below it)
AS_COMMITTED_TOP: tuple[str, ...] = (".ledger.yaml", ".gitmodules", ".lfsconfig", ".dvc/", "runs/")
# file names recorded as committed at any depth
AS_COMMITTED_NAMES: tuple[str, ...] = (".gitattributes",)

Edit = tuple[str, int] | None  # a path's new (object id, file mode), or None: removed


def as_committed(path: str) -> bool:
    """Whether repository path `path` is configuration a run records only as committed."""
    if path.rsplit("/", 1)[-1] in AS_COMMITTED_NAMES:
        return True
    return any(path == top.rstrip("/") or (top.endswith("/") and path.startswith(top)) for top in AS_COMMITTED_TOP)


def patch_id(edits: Mapping[str, Edit]) -> str | None:
    """The sha256 of the uncommitted changes, `edits` being every path whose entry differs from the
    code commit's tree (None when there are none): path, octal mode and object id per line, sorted
    by path."""
    if not edits:
        return None
    text = "".join(f"{rel}\0{edit[1] if edit else 0:o}\0{edit[0] if edit else '-'}\n" for rel, edit in sorted(edits.items()))
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
