"""Benchmark: track + push 1 GiB of rollout files with DVC vs `md5sum` + `cp` of the same files.

    .venv/bin/python bench/bench_data.py [--files 64] [--mib 16] [--repeat 1] [--dir /tmp]

Builds a throwaway git + DVC repository with a local folder remote, writes FILES x MIB random
rollout files into a staged run folder, then times, in the same run and on the same files:
  baseline: `md5sum` of every file, then `cp -r` of the folder to a fresh folder;
  ledger:   `track_outputs` (hash + hard-link into the DVC cache, write the .dvc file) and
            `push_data` to the local remote (one copy of the data).
`sync` runs between timings so one side's dirty pages do not slow the other. Prints both times
and the ratio ledger / baseline (target: within 1.5x).

Then the same on fresh files hashed first the way `ledger run` hashes them while the job runs
(`ledger.data.prehash`, through `prehash_files`): what is left after the job exits, against the
same baseline (issue 15's target: <= 0.2x).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_repo(root: Path, remote: Path) -> None:
    from dvc.repo import Repo

    root.mkdir()
    _git(root, "init", "-q")
    (root / ".gitignore").write_text(".ledger/\n")
    with Repo.init(str(root)) as repo, repo.config.edit("repo") as conf:
        conf["remote"]["local"] = {"url": str(remote)}
        conf["core"]["remote"] = "local"


def write_rollout(folder: Path, files: int, size: int) -> None:
    folder.mkdir(parents=True)
    block = os.urandom(size)
    for i in range(files):
        # distinct contents per file (so DVC cannot deduplicate), cheap to produce
        (folder / f"{i}.pt").write_bytes(i.to_bytes(8, "little") + block[8:])


def sync() -> None:
    subprocess.run(["sync"], check=True)


def baseline(folder: Path, dest: Path) -> tuple[float, float, float]:
    files = sorted(str(p) for p in folder.iterdir())
    start = time.perf_counter()
    subprocess.run(["md5sum", *files], check=True, stdout=subprocess.DEVNULL)
    hashed = time.perf_counter()
    subprocess.run(["cp", "-r", str(folder), str(dest)], check=True)
    done = time.perf_counter()
    return done - start, hashed - start, done - hashed


def ledger_side(root: Path, staging: Path, prehashed: bool = False) -> tuple[float, float, float]:
    from ledger.data.dvcops import prehash_files, track_outputs
    from ledger.data.dvcremote import push_data

    if prehashed:  # what the hashing thread did while the job ran
        files = sorted(str(p) for p in (staging / "data" / "rollout").iterdir())
        prehash_files(root, files, lambda: False)
    start = time.perf_counter()
    records = track_outputs(root, staging, [("rollout", staging / "data" / "rollout")])
    tracked = time.perf_counter()
    result = push_data(root, records)
    done = time.perf_counter()
    if records[0].error or not result.ok:
        raise SystemExit(f"failed: {records[0].error} {result.failed}")
    return done - start, tracked - start, done - tracked


def check_copies(root: Path, remote: Path, rollout: Path) -> None:
    """The cache shares the staged files' inodes; the remote holds real, separate copies."""
    pushed = [p for p in (remote / "files" / "md5").rglob("*") if p.is_file()]
    staged = {p.stat().st_ino for p in rollout.iterdir()}
    cached = {p.stat().st_ino for p in (root / ".dvc" / "cache").rglob("*") if p.is_file()}
    assert staged <= cached, "the cache does not hard-link the staged files"
    assert len(pushed) == len(staged) + 1, "the remote lacks objects"
    assert not {p.stat().st_ino for p in pushed} & cached, "the remote shares inodes"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--mib", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=None, help="scratch folder (default: tmp)")
    args = parser.parse_args()
    os.environ.setdefault("DVC_NO_ANALYTICS", "1")

    t0 = time.perf_counter()
    import dvc.repo  # noqa: F401 - paid once per `ledger` process; reported separately
    import dvc_data.hashfile.build  # noqa: F401

    import_s = time.perf_counter() - t0
    total_mib = args.files * args.mib
    print(f"data: {args.files} files x {args.mib} MiB = {total_mib} MiB; dvc import {import_s:.2f} s")
    for run in range(args.repeat):
        for prehashed in (False, True):
            with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-data-") as tmp:
                base = Path(tmp)
                root, remote = base / "repo", base / "remote"
                # DVC's site cache (hash state, indexes) stays in the scratch folder, not /var/tmp
                os.environ["DVC_SITE_CACHE_DIR"] = str(base / "dvc-site")
                make_repo(root, remote)
                staging = root / ".ledger" / "staging" / "20261129-111354-a3f9"
                rollout = staging / "data" / "rollout"
                write_rollout(rollout, args.files, args.mib << 20)
                sync()
                base_s, md5_s, cp_s = baseline(rollout, base / "copy")
                shutil.rmtree(base / "copy")
                sync()
                ours_s, track_s, push_s = ledger_side(root, staging, prehashed)
                sync()
                check_copies(root, remote, rollout)
            ratio = ours_s / base_s
            what = "left after the job (hashed while it ran)" if prehashed else "all at the end"
            print(
                f"run {run + 1}, {what}: md5sum+cp {base_s:.2f} s (md5sum {md5_s:.2f} + cp {cp_s:.2f}) | "
                f"track+push {ours_s:.2f} s (track {track_s:.2f} + push {push_s:.2f}) | "
                f"ratio {ratio:.2f}x"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
