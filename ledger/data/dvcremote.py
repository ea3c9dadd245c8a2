"""Move DVC-tracked run data between the local DVC cache and a DVC remote (push, fetch).

The .dvc files of runs live in commits on the experiments branch, not in the working tree, so
callers pass their texts (read from git) or the `DataRecord`s `track_outputs` returned. The
remote is the repository's default (`core.remote`) or one named in `.dvc/config`. Failures never
raise: they come back per object with the reason DVC gave.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
from dvc_data.hashfile.hash_info import HashInfo
from dvc_data.hashfile.transfer import transfer
from fsspec.callbacks import DEFAULT_CALLBACK, Callback

from ledger.data.dvcfile import DvcOut, parse_dvc_text
from ledger.data.dvcops import DataRecord, error_text, file_entries, in_cache, load_tree, open_dvc_repo
from ledger.errors import DataError

Progress = Callable[[int, int], None]  # (objects done, objects to do)

# dvc-data logs each object it failed to transfer here, with the exception attached.
_TRANSFER_LOGGER = "dvc_data.hashfile.transfer"


class TransferFailure(msgspec.Struct, frozen=True):
    """One object (or the whole operation, `what="remote"`) that did not move, and why."""

    what: str  # e.g. "data/rollout/3.pt", "data/rollout (folder listing)", "remote"
    reason: str


class _Transfer(msgspec.Struct, frozen=True):
    """What could not be moved; `ok` when nothing failed."""

    failed: list[TransferFailure] = msgspec.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed


class PushResult(_Transfer, frozen=True):
    """Objects uploaded (those already on the remote are not counted) and failures."""

    pushed: int = 0


class FetchResult(_Transfer, frozen=True):
    """Objects downloaded into the local cache (those already there are not counted), failures."""

    fetched: int = 0


def _outs(
    items: Iterable[DataRecord | str],
) -> tuple[list[DvcOut], list[TransferFailure]]:
    outs: list[DvcOut] = []
    bad: list[TransferFailure] = []
    for item in items:
        if isinstance(item, DataRecord):
            if not item.tracked or item.dvc_text is None:
                bad.append(TransferFailure(item.path, item.error or "not tracked"))
                continue
            text = item.dvc_text
        else:
            text = item
        try:
            outs.extend(parse_dvc_text(text))
        except DataError as exc:
            bad.append(TransferFailure(".dvc file", exc.message))
    return outs, bad


def _remote_odb(repo: Any, remote: str | None, command: str) -> Any:
    return repo.cloud.get_remote_odb(remote, command)


def push_data(
    repo_root: Path, items: Iterable[DataRecord | str], remote: str | None = None, progress: Progress | None = None
) -> PushResult:
    """Upload the cached objects the given .dvc texts (or tracked records) name to a DVC remote.

    `remote` names a remote of the DVC config; None means the default one (`core.remote`).
    """
    outs, failed = _outs(items)
    try:
        with open_dvc_repo(repo_root) as repo:
            cache = repo.cache.local
            ids, labels, members, unlisted = _wanted(cache, outs, "not in the local DVC cache")
            absent = {hi.value for hi in ids if not in_cache(cache, hi.value)}
            failed += unlisted + _failures(absent, labels, "not in the local DVC cache")
            # Like `dvc push`: a folder listing goes up only with all of its files.
            skip = absent | {d for d, files in members.items() if files & absent}
            ids = {hi for hi in ids if hi.value not in skip}
            if not ids:
                return PushResult(pushed=0, failed=failed)
            try:
                odb = _remote_odb(repo, remote, "push")
            except Exception as exc:  # noqa: BLE001 - NoRemoteError, config, filesystem
                return PushResult(pushed=0, failed=[*failed, TransferFailure("remote", error_text(exc))])
            done, errors = _transfer(cache, odb, ids, labels, progress)
    except DataError as exc:
        return PushResult(pushed=0, failed=[*failed, TransferFailure("remote", exc.message)])
    return PushResult(pushed=done, failed=failed + errors)


def fetch_data(
    repo_root: Path, texts: Iterable[DataRecord | str], remote: str | None = None, progress: Progress | None = None
) -> FetchResult:
    """Download the objects the given .dvc texts name from a DVC remote into the local cache.

    `remote` as for `push_data`. Objects already in the cache are not downloaded again.
    """
    outs, failed = _outs(texts)
    try:
        with open_dvc_repo(repo_root) as repo:
            cache = repo.cache.local
            try:
                odb = _remote_odb(repo, remote, "fetch")
            except Exception as exc:  # noqa: BLE001 - NoRemoteError, config, filesystem
                return FetchResult(fetched=0, failed=[*failed, TransferFailure("remote", error_text(exc))])
            return _fetch_outs(cache, odb, outs, failed, progress)
    except DataError as exc:
        return FetchResult(fetched=0, failed=[*failed, TransferFailure("remote", exc.message)])


def _listings(outs: list[DvcOut]) -> tuple[set[HashInfo], dict[str, str]]:
    """The folder listings of the outputs, and how each is named in a failure."""
    folders = [o for o in outs if o.isdir]
    return {HashInfo("md5", o.md5) for o in folders}, {o.md5: f"{o.path} (folder listing)" for o in folders}


def _fetch_outs(cache: Any, odb: Any, outs: list[DvcOut], failed: list[TransferFailure], progress: Progress | None) -> FetchResult:
    """Fetch the outputs' objects from the remote `odb` into `cache`: folder listings first
    (which files to fetch is only known once they are local), then every file."""
    done, errors = _transfer(odb, cache, *_listings(outs), None)
    if any(f.what == "remote" for f in errors):
        return FetchResult(fetched=done, failed=failed + errors)
    ids, labels, _, unlisted = _wanted(cache, outs, "not on the remote")
    more, more_errors = _transfer(odb, cache, ids, labels, progress)
    errors += more_errors
    absent = {hi.value for hi in ids if not in_cache(cache, hi.value)}
    reported = {f.what for f in errors}
    absent_failures = _failures(absent, labels, "not on the remote")
    failed = failed + errors + [f for f in unlisted + absent_failures if f.what not in reported]
    return FetchResult(fetched=done + more, failed=failed)


def _wanted(
    cache: Any, outs: list[DvcOut], unlisted_error: str
) -> tuple[set[Any], dict[str, str], dict[str, set[str]], list[TransferFailure]]:
    """The objects of `outs` (folder listings and their files), labels by md5, the files of
    each listing, and the folders whose listing is not in `cache` (their files are unknown)."""
    ids: set[Any] = set()
    labels: dict[str, str] = {}
    members: dict[str, set[str]] = {}
    unlisted: list[TransferFailure] = []
    for out in outs:
        labels[out.md5] = f"{out.path} (folder listing)" if out.isdir else out.path
        if out.isdir:
            try:
                tree = load_tree(cache, out)
            except DataError as exc:  # a listing naming paths outside its folder: none of it moves
                unlisted.append(TransferFailure(labels[out.md5], exc.one_line()))
                continue
            if tree is None:
                unlisted.append(TransferFailure(labels[out.md5], unlisted_error))
                continue
            members[out.md5] = set()
            for rel, oid in file_entries(tree):
                labels[oid] = f"{out.path}/{rel}"
                members[out.md5].add(oid)
                ids.add(HashInfo("md5", oid))
        ids.add(HashInfo("md5", out.md5))
    return ids, labels, members, unlisted


def _failures(oids: set[str], labels: dict[str, str], reason: str) -> list[TransferFailure]:
    return sorted((TransferFailure(labels[oid], reason) for oid in oids), key=lambda f: f.what)


def _transfer(
    src: Any,
    dest: Any,
    ids: set[Any],
    labels: dict[str, str],
    progress: Progress | None,
) -> tuple[int, list[TransferFailure]]:
    """Copy `ids` (listings and their files, all named) from `src` to `dest` ODBs."""
    if not ids:
        return 0, []
    with _capture_failures() as reasons:
        try:
            result = transfer(src, dest, ids, shallow=True, callback=_callback(progress))
        except Exception as exc:  # noqa: BLE001 - an unreachable remote fails as a whole
            return 0, [TransferFailure("remote", error_text(exc))]
    oids = sorted(str(hi.value) for hi in result.failed)
    failed = [TransferFailure(labels.get(oid, oid), reasons.get(oid, "transfer failed")) for oid in oids]
    return len(result.transferred), failed


class _FailureLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.reasons: dict[str, str] = {}

    def emit(self, record: logging.LogRecord) -> None:
        if record.args and isinstance(record.args, tuple) and record.exc_info:
            exc = record.exc_info[1]
            self.reasons[str(record.args[0])] = error_text(exc) if exc else record.getMessage()


@contextmanager
def _capture_failures() -> Iterator[dict[str, str]]:
    """Collect dvc-data's per-object failure reasons instead of letting them reach stderr."""
    logger = logging.getLogger(_TRANSFER_LOGGER)
    handler = _FailureLog()
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield handler.reasons
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def _callback(progress: Progress | None) -> Any:
    if progress is None:
        return DEFAULT_CALLBACK
    report: Progress = progress

    class _Report(Callback):  # type: ignore[misc]
        # dvc-data first sets the number of objects to move, then re-sets it per batch of
        # files; the first total is the one the caller wants.
        def set_size(self, size: int) -> None:
            if self.size is None:
                super().set_size(size)

        def call(self, *args: Any, **kwargs: Any) -> None:
            report(int(self.value), int(self.size or 0))

    return _Report()
