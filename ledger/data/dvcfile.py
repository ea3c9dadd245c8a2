"""The `.dvc` file: its `outs` read from a pulled record, checked, and written as `dvc add` writes
them. Plain text and data: nothing here imports DVC."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from ledger import yamlio
from ledger.data.dirpaths import OUT_MD5_RE
from ledger.errors import DataError

HASH_NAME = "md5"  # DVC 3's default; `hash: md5` in a .dvc file (older files meant md5-dos2unix)


class DvcOut(msgspec.Struct, frozen=True):
    """One entry of a .dvc file's `outs` list."""

    path: str  # relative to the .dvc file's folder
    md5: str
    size: int | None = None
    nfiles: int | None = None

    @property
    def isdir(self) -> bool:
        return self.md5.endswith(".dir")


def parse_dvc_text(text: str) -> list[DvcOut]:
    """Parse the `outs` of a .dvc file written by `dvc add` (or `track_outputs`)."""
    try:
        data = yamlio.loads(text, ".dvc file")
    except yamlio.YamlError as exc:
        raise DataError(exc.message) from exc
    outs = data.get("outs") if isinstance(data, dict) else None
    if not isinstance(outs, list) or not outs:
        raise DataError("the .dvc file has no `outs` list")
    return [_parsed_out(out) for out in outs]


def _parsed_out(out: object) -> DvcOut:
    """One entry of a .dvc file's `outs`, checked: a path, a DVC 3 md5 that is one (it names a
    cache path: `../..` would leave the cache)."""
    if not isinstance(out, dict) or not isinstance(out.get("path"), str):
        raise DataError("a .dvc file output lacks its `path`")
    md5 = out.get("md5")
    if not isinstance(md5, str) or not md5:
        raise DataError(f"the .dvc file output {out['path']!r} has no md5")
    if out.get("hash") != HASH_NAME:
        raise DataError(
            f"the .dvc file output {out['path']!r} uses a legacy hash",
            hint="re-add it with DVC 3 (`hash: md5`)",
        )
    if not OUT_MD5_RE.match(md5):
        raise DataError(f"the .dvc file output {out['path'][:80]!r} has an md5 that is not one", "the record is not trusted")
    return DvcOut(out["path"], md5, out.get("size"), out.get("nfiles"))


def render_dvc_text(outs: Sequence[DvcOut]) -> str:
    """The .dvc file text `dvc add` writes for these outputs (same keys, same order)."""
    entries = []
    for out in outs:
        entry: dict[str, str | int | None] = {"md5": out.md5, "size": out.size}
        if out.isdir:
            entry["nfiles"] = out.nfiles
        entry["hash"] = HASH_NAME
        entry["path"] = out.path
        entries.append(entry)
    return yamlio.dumps({"outs": entries})
