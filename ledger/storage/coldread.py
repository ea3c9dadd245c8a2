"""Reading the run folders the listing index lacks: in this process, or shared with forked readers.

A cold index (a fresh clone, a new ledger version) reads every run folder from git: at 100,000
runs that is 100,000 tree reads and 200,000 blob reads and JSON decodes, and nearly all of it is
independent per folder. When there are many folders to read and more than one CPU, the folders are
read by forked processes (each opens the repository again; the parent's SQLite connection and
manifest cache are never touched in them), and the parent writes their rows as they come, in the
order it asked for them. A reader does exactly what the parent would (`listrow.folder_entry`,
`listrow.read_run`: the same limits, the same broken rows); a folder whose record is an old
manifest.yaml, read through the manifest cache, is left to the parent.

What a reader sends back is plain data: a `Prepared` row per folder, the setting and metric name
sets of a batch sent once each and named by position.
"""

from __future__ import annotations

import marshal
import multiprocessing
import os
import signal
from collections.abc import Generator
from pathlib import Path
from typing import Any

import msgspec

from ledger.storage.git import Repo
from ledger.storage.listrow import RunReader, RunRow, folder_entry, read_run, reads_manifest, table_flags
from ledger.storage.listtables import Damaged, entry_tuple, pack, text_key
from ledger.storage.store import RunEntry

PARALLEL_AT = 2000  # folders to read before forked readers share the work
MAX_READERS = 4
TEXT_BATCH = 500  # records a reader is given at a time for their texts

Folder = tuple[str, str, str]  # (run id, its path in the branch, its tree id)
# a run's `xr` row without its key, its key sets as the names themselves:
# (id, tree, entry, broken, started, name, archived, setting names, metric names, fields, cells, shown, flags)
Prepared = tuple[Any, ...]


def prepare(row: RunRow) -> Prepared:
    """The `xr` row of a folder as read (`RunReader`), but for the key and key-set ids."""
    e, m = row.entry, row.fields
    entry = marshal.dumps(entry_tuple(e))
    if m is None:
        return (e.id, e.tree, entry, row.broken or f"{e.path}: unreadable", b"", None, 0, None, None, None, None, None, None)
    name = text_key(m["name"]) if isinstance(m.get("name"), str) else None
    started = text_key(m.get("started") or "")
    archived = 1 if m.get("archived") else 0
    shown = marshal.dumps(msgspec.structs.astuple(row.shown)) if row.shown is not None else None
    flags = table_flags(row.shown) if row.shown is not None else 0
    settings, metrics = tuple(sorted(row.settings)), tuple(sorted(row.metrics))
    return (e.id, e.tree, entry, None, started, name, archived, settings, metrics, marshal.dumps(m), marshal.dumps(row.cells), shown, flags)


def read_batches(reader: RunReader, batches: list[list[Folder]], parallel: bool = True) -> Generator[list[Prepared], None, None]:
    """Each batch's folders read from git, as `Prepared` rows in the batch's order."""
    readers = _readers(sum(map(len, batches))) if parallel else 1
    if readers < 2:
        for batch in batches:
            yield [prepare(reader.folder(*f)) for f in batch]
        return
    try:
        pool = multiprocessing.get_context("fork").Pool(readers, initializer=_open, initargs=(str(reader.repo.root),))
    except OSError:  # no process to be had: read them here
        yield from read_batches(reader, batches, parallel=False)
        return
    with pool:
        for batch, (names, rows) in zip(batches, pool.imap(_read, batches)):
            yield [_expanded(got, names) if got is not None else prepare(reader.folder(*f)) for f, got in zip(batch, rows)]


def read_texts(reader: RunReader, todo: list[tuple[int, RunEntry]]) -> list[tuple[int, bytes, bytes]]:
    """(k, settings text, metrics text) of each (k, entry) of `todo`, read again from git through
    the same limits (`RunReader.full`); Damaged where a folder that read before reads broken now."""
    readers = _readers(len(todo))
    if readers < 2:
        return [_texts(k, reader.full(e)) for k, e in todo]
    batches = [todo[i : i + TEXT_BATCH] for i in range(0, len(todo), TEXT_BATCH)]
    try:
        pool = multiprocessing.get_context("fork").Pool(readers, initializer=_open, initargs=(str(reader.repo.root),))
    except OSError:
        return [_texts(k, reader.full(e)) for k, e in todo]
    out: list[tuple[int, bytes, bytes]] = []
    with pool:
        for batch, got in zip(batches, pool.imap(_read_texts, batches)):
            out += [texts if texts is not None else _texts(k, reader.full(e)) for (k, e), texts in zip(batch, got)]
    return out


def _texts(k: int, row: RunRow) -> tuple[int, bytes, bytes]:
    if row.fields is None:  # the same folder read before: read the same way again
        raise Damaged
    return k, pack(row.settings), pack(row.metrics)


def _readers(folders: int) -> int:
    if folders < PARALLEL_AT or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return min(cpus(), MAX_READERS)


def cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _expanded(got: Prepared, names: list[tuple[str, ...]]) -> Prepared:
    if got[3] is not None:  # broken: no key sets
        return got
    return (*got[:7], names[got[7]], names[got[8]], *got[9:])


_REPO: Repo | None = None  # a reader's own repository, opened when it starts


def _open(root: str) -> None:
    """A reader starts: the signals its parent set aside are its own again (a handler or an
    ignored SIGTERM inherited through fork would leave the pool's terminate waiting on a reader
    that never ends; Ctrl-C is the parent's to act on), then its own repository."""
    global _REPO
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _REPO = Repo(Path(root))


def _read(batch: list[Folder]) -> tuple[list[tuple[str, ...]], list[Prepared | None]]:
    """In a reader: the batch's rows (None: the parent reads that folder), each name set once."""
    assert _REPO is not None
    names: dict[tuple[str, ...], int] = {}
    rows: list[Prepared | None] = []
    for rid, path, tree in batch:
        found = folder_entry(_REPO, rid, path, tree)
        if not isinstance(found, RunRow):
            if reads_manifest(found):
                rows.append(None)
                continue
            found = read_run(_REPO, found, None)
        p = prepare(found)
        if p[3] is None:
            p = (*p[:7], names.setdefault(p[7], len(names)), names.setdefault(p[8], len(names)), *p[9:])
        rows.append(p)
    return list(names), rows


def _read_texts(batch: list[tuple[int, RunEntry]]) -> list[tuple[int, bytes, bytes] | None]:
    """In a reader: the batch's texts (None: the parent reads that record)."""
    assert _REPO is not None
    return [None if reads_manifest(e) else _texts(k, read_run(_REPO, e, None)) for k, e in batch]
