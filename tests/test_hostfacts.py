"""Host facts from real interpreters (this venv and a fresh one) and real git checkouts."""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest
from repos import git, head, make_repo

from ledger.capture.hostfacts import PACKAGES, basic_host, host_facts


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv without pip, holding one fake distribution: sglang 0.5.0rc1."""
    root = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    python = root / "bin" / "python"
    site = subprocess.run(
        [
            str(python),
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dist = Path(site) / "sglang-0.5.0rc1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.0rc1\n")
    return python


def _git(repo: Path, *args: str) -> str:
    return git(repo, *args).strip()


def _repo(path: Path) -> str:
    return head(make_repo(path, {"a.py": "x = 1\n"}))


def test_versions_from_a_fresh_venv(bare_venv: Path) -> None:
    facts = host_facts(str(bare_venv))
    assert facts.errors == []
    assert list(facts.packages) == list(PACKAGES)
    assert facts.packages["sglang"] == "0.5.0rc1"
    assert facts.packages["torch"] is None and facts.packages["megatron-core"] is None
    assert facts.python_version == platform.python_version()
    assert facts.executable is not None and facts.executable.startswith(str(bare_venv.parent))


def test_versions_from_this_interpreter() -> None:
    facts = host_facts(sys.executable, packages=("docker", "numpy", "no-such-dist"))
    assert facts.packages == {
        "docker": importlib.metadata.version("docker"),
        "numpy": importlib.metadata.version("numpy"),
        "no-such-dist": None,
    }


def test_checkouts_commit_and_dirty_flag(tmp_path: Path, bare_venv: Path) -> None:
    clean, dirty, untracked = (
        tmp_path / "clean",
        tmp_path / "dirty",
        tmp_path / "untracked",
    )
    commits = {name: _repo(tmp_path / name) for name in ("clean", "dirty", "untracked")}
    (dirty / "a.py").write_text("x = 2\n")
    (untracked / "run.log").write_text("log\n")
    facts = host_facts(
        str(bare_venv),
        {"clean": str(clean), "dirty": str(dirty), "untracked": str(untracked)},
    )
    assert facts.errors == []
    state = {name: (c.commit, c.dirty) for name, c in facts.checkouts.items()}
    assert state == {
        "clean": (commits["clean"], False),
        "dirty": (commits["dirty"], True),
        "untracked": (commits["untracked"], False),
    }
    section = facts.to_manifest()["checkouts"]
    assert section["dirty"] == {
        "path": str(dirty),
        "commit": commits["dirty"],
        "dirty": True,
    }


def test_problems_land_in_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    _git(empty, "init", "-q")
    facts = host_facts(
        str(tmp_path / "no-python"),
        {"plain": str(tmp_path), "fresh": str(empty)},
    )
    assert facts.packages == dict.fromkeys(PACKAGES)
    assert facts.errors[0] == f"python not found: {tmp_path / 'no-python'}"
    assert facts.errors[1].startswith(f"checkout plain ({tmp_path}): fatal: not a git repository")
    assert facts.errors[2] == f"checkout fresh ({empty}): no commit yet"
    assert facts.checkouts["plain"].commit is None and facts.checkouts["plain"].dirty is None


def test_failing_interpreter(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'boom: broken interpreter' >&2\nexit 2\n")
    fake.chmod(0o755)
    facts = host_facts(str(fake))
    assert facts.errors == [f"python {fake} failed: boom: broken interpreter"]


def test_basic_host() -> None:
    host = basic_host()
    assert set(host) == {"hostname", "user", "platform", "python"}
    assert host["python"] == platform.python_version()
    assert all(isinstance(v, str) and v for v in host.values())


def test_platform_text_is_the_stdlib_string_without_a_subprocess(monkeypatch: pytest.MonkeyPatch) -> None:
    """`host.platform` of every manifest stays what `platform.platform()` gives (which spawns
    `uname -p`; ours reads the same fields without a process)."""
    from ledger.capture.hostfacts import platform_text

    spawned: list[object] = []
    real_init = subprocess.Popen.__init__

    def watch(self: subprocess.Popen[bytes], *args: Any, **kwargs: Any) -> None:
        spawned.append(args[0] if args else kwargs.get("args"))
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", watch)
    ours = platform_text()
    assert spawned == []
    monkeypatch.undo()
    platform._platform_cache.clear()  # type: ignore[attr-defined]
    assert ours == platform.platform()


def test_cached_versions_follow_installs(tmp_path: Path, bare_venv: Path) -> None:
    from ledger.capture.hostfacts import cached_host_facts

    python = str(bare_venv)  # the fixture gives the venv's interpreter
    cache = tmp_path / "cache"
    first = cached_host_facts(cache, python)
    assert len(list(cache.iterdir())) == 1
    second = cached_host_facts(cache, python)
    assert second.packages == first.packages and second.executable == first.executable
    # read afresh or from the cache, the manifest lists them in one order: no reordered diff (issue 34, item 6)
    assert list(second.to_manifest()["packages"]) == list(first.to_manifest()["packages"]) == sorted(first.packages)
    # a package appears: the site-packages folder changes, so the cached answer is not used
    site = next(bare_venv.parent.parent.glob("lib/python3*/site-packages"))
    (site / "toypkg-9.9.dist-info").mkdir()
    (site / "toypkg-9.9.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: toypkg\nVersion: 9.9\n")
    third = cached_host_facts(cache, python)
    assert len(list(cache.iterdir())) == 2
    assert third.packages == first.packages  # toypkg is not a package ledger reports; the key still moved
    assert first.packages["sglang"] == "0.5.0rc1"
