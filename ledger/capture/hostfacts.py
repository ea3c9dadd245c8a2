"""Host facts: what a job runs on when no Docker image is named.

Package versions come from the job's own interpreter (one `python -c` with importlib.metadata),
commits and dirty flags from configured source checkouts (one `git status` each). Everything is
plain subprocesses without shared state, so `host_facts` may run in a background thread.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import platform
import shutil
import socket
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from ledger.cache import LocalCache

# Distribution names as pip knows them.
PACKAGES: tuple[str, ...] = (
    "miles",
    "sglang",
    "torch",
    "megatron-core",
    "vllm",
    "transformers",
)

# Runs inside the job's interpreter; prints one JSON object. Python 3.8+ (importlib.metadata).
_VERSIONS_SCRIPT = """
import importlib.metadata as md, json, platform, sys
found = {}
for name in json.loads(sys.argv[1]):
    try:
        found[name] = md.version(name)
    except md.PackageNotFoundError:
        found[name] = None
print(json.dumps({"python_version": platform.python_version(),
                  "executable": sys.executable, "packages": found}))
"""
_TIMEOUT_S = 60


class CheckoutFacts(msgspec.Struct):
    """The state of one source checkout: its HEAD commit and whether tracked files changed."""

    path: str
    commit: str | None = None
    dirty: bool | None = None


class HostFacts(msgspec.Struct):
    """Versions seen by the job's interpreter, source checkout states, and what went wrong."""

    python: str
    python_version: str | None = None
    executable: str | None = None
    packages: dict[str, str | None] = msgspec.field(default_factory=dict)
    checkouts: dict[str, CheckoutFacts] = msgspec.field(default_factory=dict)
    errors: list[str] = msgspec.field(default_factory=list)

    def to_manifest(self) -> dict[str, Any]:
        """The manifest `software` section as a plain dict."""
        return {
            "python": self.python,
            "python_version": self.python_version,
            "executable": self.executable,
            # by name: the cache (sorted JSON) and a fresh read (PACKAGES order) must write the same YAML
            "packages": dict(sorted(self.packages.items())),
            "checkouts": {name: {"path": c.path, "commit": c.commit, "dirty": c.dirty} for name, c in sorted(self.checkouts.items())},
            "errors": list(self.errors),
        }


def host_facts(
    python: str = "python3",
    checkouts: Mapping[str, str] | None = None,
    packages: Sequence[str] = PACKAGES,
) -> HostFacts:
    """Read package versions from interpreter `python` and the state of each checkout.

    Missing packages are None; an interpreter that cannot run, or a path that is not a git
    checkout, is reported in `errors` and never raises.
    """
    facts = HostFacts(python=python, packages=dict.fromkeys(packages))
    _read_versions(facts, python, packages)
    for name, path in (checkouts or {}).items():
        facts.checkouts[name] = _read_checkout(name, path, facts.errors)
    return facts


def interpreter_key(python: str = "python3") -> str | None:
    """What the package versions of `python` depend on: the interpreter and its site-packages.

    Installing or removing a package changes its site-packages folder's mtime, so a cached answer
    under this key stays right without starting the interpreter. None when `python` is not found.
    """
    found = shutil.which(python)
    if found is None:
        return None
    real = Path(found).resolve()
    parts = [str(real), str(real.stat().st_mtime_ns)]
    for prefix in {Path(found).parent.parent, real.parent.parent}:
        for site in sorted(prefix.glob("lib/python3*/site-packages")):
            parts += [str(site), str(site.stat().st_mtime_ns)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def cached_host_facts(cache_dir: Path, python: str = "python3", checkouts: Mapping[str, str] | None = None) -> HostFacts:
    """`host_facts`, with the package versions cached by `interpreter_key` (checkouts are always read)."""
    key = interpreter_key(python)
    cache = LocalCache.at(cache_dir, code=(__name__,))
    data = cache.read_json(f"host-{key}") if key else None
    if isinstance(data, dict):
        facts = HostFacts(
            python=python,
            python_version=data.get("python_version"),
            executable=data.get("executable"),
            packages=dict(data.get("packages") or {}),
        )
        for name, where in (checkouts or {}).items():
            facts.checkouts[name] = _read_checkout(name, where, facts.errors)
        return facts
    facts = host_facts(python, checkouts)
    if key and not facts.errors:
        cache.write_json(
            f"host-{key}", {"python_version": facts.python_version, "executable": facts.executable, "packages": facts.packages}
        )
    return facts


def basic_host() -> dict[str, str]:
    """The manifest `host` section: hostname, user, platform and ledger's own Python version."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no USER/LOGNAME: a bare container
        user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    return {
        "hostname": socket.gethostname(),
        "user": user,
        "platform": platform_text(),
        "python": platform.python_version(),
    }


def platform_text() -> str:
    """`platform.platform()` without the `uname -p` it spawns (~3 ms of `ledger run`'s start).

    On Linux the stdlib builds ``system-release-machine-processor-with-libc`` and drops the
    processor when it equals the machine or is ``unknown``, which is what `uname -p` prints on
    Linux (coreutils, or the machine itself where a distribution patches it); the libc is
    `platform.libc_ver()`'s (no process either). Elsewhere: the stdlib's own.
    """
    u = os.uname()
    if u.sysname != "Linux":
        return platform.platform()
    libc, version = platform.libc_ver()
    text = "-".join(x.strip() for x in (u.sysname, u.release, u.machine, "with", libc + version) if x)
    for ch in ' /\\:;"()':
        text = text.replace(ch, "_" if ch == " " else "-")
    text = text.replace("unknown", "")  # the stdlib's clean-up, step for step
    while "--" in text:
        text = text.replace("--", "-")
    return text.rstrip("-")


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """One bounded, non-interactive helper command; OSError and TimeoutExpired are the caller's."""
    return subprocess.run(argv, check=False, capture_output=True, text=True, timeout=_TIMEOUT_S, stdin=subprocess.DEVNULL)


def _read_versions(facts: HostFacts, python: str, packages: Sequence[str]) -> None:
    argv = [python, "-c", _VERSIONS_SCRIPT, json.dumps(list(packages))]
    try:
        proc = _run(argv)
    except FileNotFoundError:
        facts.errors.append(f"python not found: {python}")
        return
    except (OSError, subprocess.TimeoutExpired) as exc:
        facts.errors.append(f"python {python} failed: {_first_line(str(exc))}")
        return
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        facts.errors.append(f"python {python} failed: {last[0]}")
        return
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
        facts.python_version = data["python_version"]
        facts.executable = data["executable"]
        facts.packages.update(data["packages"])
    except (ValueError, KeyError, IndexError, TypeError):
        facts.errors.append(f"python {python} failed: unreadable output {proc.stdout[:200]!r}")


def _read_checkout(name: str, path: str, errors: list[str]) -> CheckoutFacts:
    """One `git status --porcelain=v2 --branch` gives both the commit and the dirty flag.

    Dirty means tracked files differ from HEAD; untracked files (logs, outputs) do not count.
    """
    facts = CheckoutFacts(path=path)
    argv = [
        "git",
        "-C",
        path,
        "status",
        "--porcelain=v2",
        "--branch",
        "--untracked-files=no",
    ]
    try:
        proc = _run(argv)
    except (OSError, subprocess.TimeoutExpired) as exc:
        errors.append(f"checkout {name} ({path}): {_first_line(str(exc))}")
        return facts
    if proc.returncode != 0:
        errors.append(f"checkout {name} ({path}): {_first_line(proc.stderr) or 'git failed'}")
        return facts
    dirty = False
    for line in proc.stdout.splitlines():
        if line.startswith("# branch.oid "):
            oid = line.split()[2]
            facts.commit = None if oid == "(initial)" else oid
        elif line and not line.startswith("#"):
            dirty = True
    facts.dirty = dirty
    if facts.commit is None:
        errors.append(f"checkout {name} ({path}): no commit yet")
    return facts


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else ""
