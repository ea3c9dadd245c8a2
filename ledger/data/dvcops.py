"""DVC-tracked run data: track outputs, check them out, verify them, report cache status.

With `dvcremote.py`, the only module that imports dvc, dvc_data and dvc_objects. Every caller
imports this module where data is recorded, hashed, checked out or pushed, never at its own top,
so `ledger --help` and a run without data never import DVC (~0.8 s).

Why not `dvc add`: a run is staged under the git-ignored `.ledger/staging/<id>/`, and DVC refuses
to add ignored paths; it would also copy the data again. Instead the output is hashed with dvc-data
exactly as `dvc add` hashes it (md5 per file, one `.dir` object listing a folder), the objects go
into the repository's DVC cache by hard link where the filesystem allows (so a 10 GB folder is not
copied), and the `.dvc` file is written in the format `dvc add` writes. Any checkout of the run
commit can then restore the data with DVC's own CLI: `dvc pull -R runs/<shard>/<id>`.

Hard links share the inode: DVC marks cache files read-only (0444), so the staged files become
read-only too, as with DVC's own `cache.type hardlink`. Nothing writes to them after the run.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import msgspec
from dvc.exceptions import NotDvcRepoError
from dvc.repo import Repo
from dvc_data.hashfile.build import build
from dvc_data.hashfile.hash_info import HashInfo
from dvc_data.hashfile.meta import Meta
from dvc_data.hashfile.transfer import transfer
from dvc_data.hashfile.tree import Tree
from dvc_objects.fs.local import LocalFileSystem

from ledger.data.dirpaths import OUT_MD5_RE, check_listing, materialise
from ledger.data.dvcfile import HASH_NAME, DvcOut, parse_dvc_text, render_dvc_text
from ledger.errors import DataError
from ledger.fsutil import write_atomic

CacheStatus = Literal["cached", "missing", "partial"]

_ROLE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_CHUNK = 1 << 20


class DataRecord(msgspec.Struct, frozen=True):
    """One tracked output of a run. `error` is set (and `tracked` false) when tracking failed."""

    role: str
    path: str  # relative to the run folder, e.g. "data/rollout"
    dvc_file: str  # relative to the run folder, e.g. "data/rollout.dvc"
    source: str  # absolute path the data was hashed from
    hash: str | None = None  # md5, with ".dir" for a folder
    nfiles: int | None = None
    size: int | None = None
    tracked: bool = False
    error: str | None = None
    dvc_text: str | None = None  # the .dvc file as written


@contextmanager
def open_dvc_repo(repo_root: Path) -> Iterator[Any]:
    """Open the DVC repository at `repo_root` once (~0.1 s plus imports), closing it afterwards."""
    try:
        repo = Repo(os.fspath(repo_root))
    except NotDvcRepoError as exc:
        raise DataError(
            f"{repo_root} is not a DVC repository",
            hint="run `dvc init` there and commit .dvc/",
        ) from exc
    except Exception as exc:  # DVC raises config and SCM errors of many types
        raise DataError(f"cannot open the DVC repository at {repo_root}: {exc}") from exc
    try:
        yield repo
    finally:
        repo.close()


def track_outputs(
    repo_root: Path,
    staged_run_dir: Path,
    outputs: Sequence[tuple[str, Path]],
    private: Sequence[Path] = (),
    known: dict[Path, tuple[str, tuple[int, int, int]]] | None = None,
) -> list[DataRecord]:
    """Track each (role, source) output as `data/<role>` of the staged run folder.

    Writes `data/<role>.dvc` and `data/.gitignore` in `staged_run_dir` and saves the data into
    the repository's DVC cache. A source at `staged_run_dir/data/<role>` is tracked in place; one
    elsewhere is hashed and cached from where it is (`dvc pull` restores it at `data/<role>`).
    Files inside `staged_run_dir` are hard-linked into the cache (no second copy; they become
    read-only); so are files inside the `private` folders (the run's own staging area, which
    nothing rewrites after the run); files elsewhere are copied. Never raises: a failure lands in
    the record's `error`. `known`: md5s computed as the files were written, trusted only for a
    file whose (inode, mtime_ns, size) is still the one given (`_remember`).
    """
    data_dir = staged_run_dir / "data"
    roles = [role for role, _ in outputs]
    try:
        with open_dvc_repo(repo_root) as repo:
            if known:
                _remember(repo, known)
            cache = repo.cache.local
            records = [
                _track_one(cache, staged_run_dir, role, Path(src), role in roles[:i], private) for i, (role, src) in enumerate(outputs)
            ]
    except DataError as exc:
        return [_failed(role, Path(src), exc.message) for role, src in outputs]
    return _ignored(data_dir, records)


def _ignored(data_dir: Path, records: list[DataRecord]) -> list[DataRecord]:
    """The tracked outputs listed in `data/.gitignore`; where it cannot be written, they fail."""
    tracked = [r.role for r in records if r.tracked]
    if tracked:
        try:
            _add_gitignore_entries(data_dir / ".gitignore", [f"/{role}" for role in tracked])
        except OSError as exc:
            why = f"cannot write data/.gitignore: {exc}"
            return [_failed(r.role, Path(r.source), why) if r.tracked else r for r in records]
    return records


def _failed(role: str, source: Path, error: str) -> DataRecord:
    return DataRecord(role, f"data/{role}", f"data/{role}.dvc", str(source), error=error)


def _track_one(
    cache: Any,
    staged_run_dir: Path,
    role: str,
    source: Path,
    repeated: bool,
    private: Sequence[Path] = (),
) -> DataRecord:
    data_dir = staged_run_dir / "data"
    refused = _role_refusal(role, repeated)
    if refused is not None:
        return _failed(role, source, refused)
    source = source.absolute()
    refused = _source_refusal(source, data_dir / role)
    if refused is not None:
        return _failed(role, source, refused)
    # Hard links only inside the staged run folder, which nothing rewrites after the run. A job
    # often reuses an output path outside it run after run: rewriting a file that shares its
    # inode with the cache would corrupt the cached object of the earlier run, so copy those.
    link = any(source == root.absolute() or root.absolute() in source.parents for root in (staged_run_dir, *private))
    try:
        out = _save_to_cache(cache, source, role, link)
        text = render_dvc_text([out])
        data_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(data_dir / f"{role}.dvc", text)
    except Exception as exc:  # noqa: BLE001 - DVC and the OS raise many types; never raise
        return _failed(role, source, f"cannot track {source}: {error_text(exc)}")
    return DataRecord(
        role, f"data/{role}", f"data/{role}.dvc", str(source), out.md5,
        out.nfiles if out.isdir else 1, out.size, tracked=True, dvc_text=text,
    )  # fmt: skip


def _role_refusal(role: str, repeated: bool) -> str | None:
    """Why an output's role cannot name its place under `data/` (None: it can)."""
    if not _ROLE.fullmatch(role) or role.endswith(".dvc"):
        return f"role {role!r} is not a plain name (letters, digits, _.-)"
    return f"role {role!r} is given twice" if repeated else None


def _source_refusal(source: Path, target: Path) -> str | None:
    """Why an output cannot be tracked at `target` (None: it can): it does not exist, or
    something else is there already."""
    if not source.exists():
        return f"output {source} does not exist"
    if (target.exists() or target.is_symlink()) and not _same(target, source):
        return f"{target} exists and is not the output {source}"
    return None


def _same(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def _save_to_cache(cache: Any, source: Path, name: str, link: bool) -> DvcOut:
    """Hash `source` like `dvc add` and save its objects into `cache` (hard links if `link`
    and the filesystem allows, else copies)."""
    fs = LocalFileSystem()  # type: ignore[no-untyped-call]
    staging, meta, obj = build(cache, os.fspath(source), fs, HASH_NAME)
    result = transfer(staging, cache, {obj.hash_info}, shallow=False, hardlink=link)
    if result.failed:
        raise DataError(f"{len(result.failed)} object(s) could not be saved into the DVC cache")
    return DvcOut(name, str(obj.hash_info.value), meta.size, meta.nfiles)


def prehash_files(repo_root: Path, paths: Sequence[str], stop: Callable[[], bool]) -> int:
    """Hash files into the repository's DVC state (keyed by inode, mtime and size), as `dvc add`
    would; `track_outputs` then finds them there instead of reading them again. The file's
    signature is taken before it is read, so a file changed meanwhile misses the state later and
    is hashed anew. Returns how many files were hashed; stops early when `stop()` is true."""
    fs = LocalFileSystem()  # type: ignore[no-untyped-call]
    done = 0
    with open_dvc_repo(repo_root) as repo:
        state = repo.cache.local.state
        for path in paths:
            if stop():
                break
            info = fs.info(path)
            md5 = hashlib.md5(usedforsecurity=False)
            with open(path, "rb") as f:
                while block := f.read(1 << 22):
                    md5.update(block)
            state.save(path, fs, HashInfo(HASH_NAME, md5.hexdigest()), info=info)
            done += 1
    return done


def preload(repo_root: Path) -> None:
    """Open and close the DVC repository once on a thread while the job runs, changing nothing:
    importing this module and what DVC loads on its first open take ~0.8 s, paid before the end."""
    with open_dvc_repo(repo_root):
        pass


def _remember(repo: Any, known: dict[Path, tuple[str, tuple[int, int, int]]]) -> int:
    """Put md5s computed while the files were written (the log worker's) into the DVC state, so
    that they are not read again. Each comes with the (inode, mtime_ns, size) the file had when
    it was hashed; a file that has changed since is left out (it is hashed anew)."""
    fs = LocalFileSystem()  # type: ignore[no-untyped-call]
    done = 0
    state = repo.cache.local.state
    for path, (md5, signature) in known.items():
        st = os.stat(path)
        if (st.st_ino, st.st_mtime_ns, st.st_size) != signature:
            continue
        state.save(str(path), fs, HashInfo(HASH_NAME, md5), info=fs.info(str(path)))
        done += 1
    return done


def _add_gitignore_entries(path: Path, entries: Sequence[str]) -> None:
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    new = [e for e in entries if e not in lines]
    if new:
        write_atomic(path, "".join(f"{line}\n" for line in [*lines, *new]))


def error_text(exc: BaseException) -> str:
    """`Type: message` of an exception on one line (all of it: DVC's advice is often on line 2)."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def load_tree(cache: Any, out: DvcOut) -> Any | None:
    """The `.dir` listing of a folder output from `cache` (a dvc-data Tree), or None if absent.

    The listing came from whoever pushed the run: every path in it is checked to stay inside the
    folder (`dirpaths.check_listing`), and the listing must hash to the md5 the record names;
    DataError otherwise, before anything uses it."""
    if not OUT_MD5_RE.match(out.md5):
        raise DataError(f"the .dvc file output {out.path[:80]!r} has an md5 that is not one", "the record is not trusted")
    try:
        with open(cache.oid_to_path(out.md5), "rb") as f:
            raw = f.read(64 << 20 | 1)
    except (FileNotFoundError, NotADirectoryError):
        return None
    entries = check_listing(raw, out.path)
    if _dir_md5(dict(entries)) != out.md5:
        raise DataError(
            f"the folder listing of {out.path!r} does not match its recorded hash {out.md5}",
            "the run's data is not trusted; it was not written",
        )
    return Tree.from_list([{"md5": md5, "relpath": rel} for rel, md5 in entries], hash_name=HASH_NAME)


def file_entries(tree: Any) -> list[tuple[str, str]]:
    """(relative posix path, md5) for every file of a dvc-data Tree."""
    return [("/".join(key), hi.value) for key, _, hi in tree]


def in_cache(cache: Any, oid: str) -> bool:
    """Whether object `oid` is present in the (local) cache ODB (its content is not checked)."""
    return os.path.exists(cache.oid_to_path(oid))


def status_data(repo_root: Path, dvc_text: str) -> CacheStatus:
    """Whether the data a .dvc file names is all in the local DVC cache, none of it, or part."""
    outs = parse_dvc_text(dvc_text)
    with open_dvc_repo(repo_root) as repo:
        found = {status_of(repo.cache.local, out) for out in outs}
    return found.pop() if len(found) == 1 else "partial"


def checkout_data(repo_root: Path, dvc_text: str, dest: Path, root: Path | None = None) -> None:
    """Materialise the single output of `dvc_text` at `dest` from the local DVC cache.

    `dest` is the output's own path (e.g. `<folder>/data/rollout`). Files are copied from the
    cache, each checked against its md5, below `dest` only: every listed path is checked first
    (`dirpaths`), and the folders from `root` (default: `dest`'s parent) down are created without
    following a symbolic link. Raises DataError when objects are missing from the cache (fetch
    them first), a path or hash is not what the record says, or `dest` exists already.
    """
    outs = parse_dvc_text(dvc_text)
    if len(outs) != 1:
        raise DataError(f"expected one output in the .dvc file, found {len(outs)}")
    out = outs[0]
    with open_dvc_repo(repo_root) as repo:
        cache = repo.cache.local
        if status_of(cache, out) != "cached":
            raise DataError(
                f"the data of {out.path!r} is not all in the local DVC cache",
                hint="fetch it from the remote first",
            )
        if out.isdir:
            tree = load_tree(cache, out)
            files: list[tuple[str | None, str, str]] = [(rel, cache.oid_to_path(oid), oid) for rel, oid in file_entries(tree)]
        else:
            files = [(None, cache.oid_to_path(out.md5), out.md5)]
    if dest.exists() or dest.is_symlink():
        raise DataError(
            f"{dest} holds files that are not in the DVC cache",
            hint="move them away or choose another destination",
        )
    # Not dvc-data's checkout: it would write each listed path as given. `materialise` writes
    # below `dest` only, through no symbolic link, checking every file's md5 as it copies it.
    if root is None:
        root = dest.parent
        root.mkdir(parents=True, exist_ok=True)
    try:
        parts = dest.relative_to(root).parts
    except ValueError as exc:
        raise DataError(f"cannot check out {out.path!r} at {dest}: not inside {root}") from exc
    try:
        materialise(root, parts, files)
    except OSError as exc:
        raise DataError(f"cannot check out {out.path!r} at {dest}: {error_text(exc)}") from exc


def status_of(cache: Any, out: DvcOut) -> CacheStatus:
    """Cache status of one output given an open cache (see `status_data`)."""
    if not in_cache(cache, out.md5):
        return "missing"
    if not out.isdir:
        return "cached"
    tree = load_tree(cache, out)
    if tree is None:
        return "missing"
    if all(in_cache(cache, oid) for _, oid in file_entries(tree)):
        return "cached"
    return "partial"  # the listing itself is present


def verify_data(dest: Path, dvc_text: str, repo_root: Path | None = None) -> list[str]:
    """Problems with the single output of `dvc_text` materialised at `dest`; empty when intact.

    Every file is hashed. With `repo_root` (whose DVC cache holds the `.dir` listing) each
    missing, altered or unexpected file is named; without it, or when the listing is not cached,
    a folder is checked as a whole against its recorded hash.
    """
    outs = parse_dvc_text(dvc_text)
    if len(outs) != 1:
        raise DataError(f"expected one output in the .dvc file, found {len(outs)}")
    out = outs[0]
    if not out.isdir:
        return _file_problems(dest, out)
    if not dest.is_dir():
        return [f"missing: {out.path}"]
    actual = {p.relative_to(dest).as_posix(): p for p in sorted(dest.rglob("*")) if p.is_file()}
    hashes = dict(zip(actual, _md5_files(list(actual.values()))))
    expected = _cached_listing(repo_root, out) if repo_root is not None else None
    if expected is None:
        found = _dir_md5(hashes)
        return [] if found == out.md5 else [_mismatch(out.path, out.md5, found)]
    return _folder_problems(out.path, expected, hashes)


def _file_problems(dest: Path, out: DvcOut) -> list[str]:
    """A single-file output missing at `dest`, or with another md5 than recorded."""
    if not dest.is_file():
        return [f"missing: {out.path}"]
    found = _md5_files([dest])[0]
    return [] if found == out.md5 else [_mismatch(out.path, out.md5, found)]


def _cached_listing(repo_root: Path, out: DvcOut) -> dict[str, str] | None:
    """A folder output's files and their md5s, from the `.dir` listing in the DVC cache (None:
    not cached)."""
    with open_dvc_repo(repo_root) as repo:
        tree = load_tree(repo.cache.local, out)
    return dict(file_entries(tree)) if tree is not None else None


def _folder_problems(path: str, expected: dict[str, str], hashes: dict[str, str]) -> list[str]:
    """Each file of a folder missing, altered or unexpected, against its recorded listing."""
    problems = [f"missing: {path}/{rel}" for rel in sorted(set(expected) - set(hashes))]
    for rel in sorted(set(expected) & set(hashes)):
        if expected[rel] != hashes[rel]:
            problems.append(_mismatch(f"{path}/{rel}", expected[rel], hashes[rel]))
    problems += [f"unexpected file: {path}/{rel}" for rel in sorted(set(hashes) - set(expected))]
    return problems


def _mismatch(what: str, expected: str, found: str) -> str:
    return f"hash mismatch: {what} (recorded md5 {expected}, found {found})"


def _md5_files(paths: Sequence[Path]) -> list[str]:
    def one(path: Path) -> str:
        digest = hashlib.md5()
        with path.open("rb") as f:
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
        return digest.hexdigest()

    with ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 1) + 1)) as pool:
        return list(pool.map(one, paths))


def _dir_md5(hashes: dict[str, str]) -> str:
    """The `.dir` hash DVC would give a folder whose files have these md5s."""
    tree = Tree()  # type: ignore[no-untyped-call]
    for rel, md5 in hashes.items():
        tree.add(tuple(rel.split("/")), Meta(), HashInfo(HASH_NAME, md5))
    tree.digest()
    return str(tree.hash_info.value)
