"""Pytest fixtures for a REAL Docker engine, a local registry and a small Miles-like image.

Nothing is mocked. When `dockerd` is missing it is installed from Debian (`docker.io`); when that
fails, or the daemon cannot start, every test using these fixtures is skipped with the reason.
The daemon runs by hand without a bridge or firewall rules (see machine-notes), the registry is
Debian's `docker-registry` unpacked without installing it, and the image is a busybox rootfs with
git checkouts at the paths the Miles image uses, imported and pushed so it has a repo digest.

Use from a test module with `from docker_env import ...` (tests/ is on sys.path under pytest's
default import mode) and the `docker_host` fixture, which points DOCKER_HOST at the engine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from repos import git, head, make_repo

RUN_ENV = dict(os.environ)
SGLANG_STUB_VERSION = "0.5.9.post2"
IMAGE_INPUTS_LABEL = "ab12cd34ef56"
# Applets linked into the stub rootfs: enough for the probe fallbacks, no git, no python.
BUSYBOX_APPLETS = (
    "sh",
    "cat",
    "sed",
    "head",
    "echo",
    "ls",
    "true",
    "false",
    "sleep",
    "env",
)


@dataclass
class DockerEngine:
    """A running dockerd: its socket URL, the docker CLI to use, and set-up timings (s)."""

    host: str
    cli_path: str
    config_dir: Path
    timings: dict[str, float] = field(default_factory=dict)

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run the docker CLI against this engine."""
        env = {
            **os.environ,
            "DOCKER_HOST": self.host,
            "DOCKER_CONFIG": str(self.config_dir),
        }
        proc = subprocess.run(
            [self.cli_path, *args],
            env=env,
            check=False,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"docker {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc


@dataclass(frozen=True)
class StubImage:
    """The pushed stub image and what a probe of it must find."""

    ref: str  # 127.0.0.1:PORT/miles-stub:test
    id: str
    repo_digest: str  # 127.0.0.1:PORT/miles-stub@sha256:...
    local_ref: str  # the same rootfs imported again, never pushed: no repo digest
    miles_commit: str
    sglang_commit: str
    megatron_commit: str
    sglang_version: str
    labels: dict[str, str]


def _run(argv: list[str], cwd: Path | None = None, timeout: float = 600) -> None:
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env=RUN_ENV,
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}): {' | '.join(tail)}")


# Debian packages the set-up (`make system-deps`, run by `make test`) provides; tests never install
DEBS = Path(os.environ.get("LEDGER_TEST_DEBS", Path(__file__).resolve().parent.parent / ".venv" / "debs"))


def _deb(package: str) -> Path:
    """The .deb `make system-deps` downloaded for PACKAGE; skips the test when there is none."""
    found = sorted(DEBS.glob(f"{package}_*.deb"))
    if not found:
        pytest.skip(f"no {package} .deb in {DEBS} (`make system-deps` downloads it; it could not here)")
    return found[0]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes], grace: float = 20) -> None:
    """SIGTERM the process we started (by its pid), then SIGKILL after `grace` seconds."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _wait_until(check: Callable[[], bool], timeout: float, proc: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if check():
            return True
        time.sleep(0.2)
    return False


@pytest.fixture(scope="session")
def docker_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerEngine]:
    """Start a private dockerd (docker.io comes from `make system-deps`); skip when impossible."""
    if os.geteuid() != 0:
        pytest.skip("a private dockerd needs root")
    timings: dict[str, float] = {}
    start = time.monotonic()
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        pytest.skip("no dockerd on PATH (`make system-deps` installs docker.io; it could not here)")
    beside = Path(dockerd).with_name("docker")
    cli_path = str(beside) if beside.exists() else shutil.which("docker")
    if cli_path is None:
        pytest.skip("no docker CLI next to dockerd")
    data_root = tmp_path_factory.mktemp("docker-data")
    # containerd's sockets live under exec-root: keep it short (108-byte socket path limit).
    short = Path(tempfile.mkdtemp(prefix="ldk-", dir="/tmp"))
    sock = short / "docker.sock"
    log = (data_root.parent / "dockerd.log").open("wb")
    argv = [
        dockerd,
        "--data-root", str(data_root),
        "--exec-root", str(short / "exec"),
        "--pidfile", str(short / "dockerd.pid"),
        "-H", f"unix://{sock}",
        "--bridge=none", "--iptables=false", "--ip-forward=false",
    ]  # fmt: skip
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    config_dir = short / "cli-config"
    config_dir.mkdir()
    engine = DockerEngine(f"unix://{sock}", cli_path, config_dir, timings)
    try:
        up = _wait_until(lambda: engine.cli("version", check=False).returncode == 0, 60, proc)
        if not up:
            log.flush()
            text = (data_root.parent / "dockerd.log").read_text(errors="replace")
            pytest.skip(f"dockerd did not start: {' | '.join(text.splitlines()[-3:])}")
        timings["dockerd"] = time.monotonic() - start
        yield engine
    finally:
        _stop(proc)
        # Set-up costs, for the record (seconds): install, dockerd, registry, image.
        timings_file = data_root.parent / "docker-setup-timings.json"
        timings_file.write_text(json.dumps(timings, indent=1))
        log.close()
        shutil.rmtree(short, ignore_errors=True)


@pytest.fixture(scope="session")
def docker_registry(
    docker_engine: DockerEngine,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """Debian's docker-registry on 127.0.0.1:<free port>; yields `127.0.0.1:PORT`."""
    start = time.monotonic()
    deb = _deb("docker-registry")
    root = tmp_path_factory.mktemp("registry")
    _run(["dpkg", "-x", str(deb), str(root / "pkg")])
    port = _free_port()
    config = root / "config.yml"
    config.write_text(
        f"version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {root / 'data'}\nhttp:\n  addr: 127.0.0.1:{port}\n"
    )
    log = (root / "registry.log").open("wb")
    binary = root / "pkg" / "usr" / "bin" / "docker-registry"
    proc = subprocess.Popen([str(binary), "serve", str(config)], stdout=log, stderr=log)

    def listening() -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    try:
        if not _wait_until(listening, 30, proc):
            text = (root / "registry.log").read_text(errors="replace")
            pytest.skip(f"docker-registry did not start: {text.strip()[-300:]}")
        docker_engine.timings["registry"] = time.monotonic() - start
        yield f"127.0.0.1:{port}"
    finally:
        _stop(proc)
        log.close()


def _make_repo(path: Path, files: dict[str, str]) -> str:
    """A git repo at `path` with one commit holding `files`; returns the commit id."""
    return head(make_repo(path, files))


@pytest.fixture(scope="session")
def miles_stub_image(
    docker_engine: DockerEngine,
    docker_registry: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> StubImage:
    """Build, import and push a busybox image laid out like the Miles image (no git, no python).

    /root/miles holds a git repo (branch ref as a loose file), /root/Megatron-LM one whose refs
    are packed, /sgl-workspace/sglang one with a detached HEAD and a version.py.
    """
    start = time.monotonic()
    deb = _deb("busybox-static")
    work = tmp_path_factory.mktemp("miles-stub")
    rootfs = work / "rootfs"
    _run(["dpkg", "-x", str(deb), str(rootfs)])
    for applet in BUSYBOX_APPLETS:
        link = rootfs / "bin" / applet
        if not link.exists():
            link.symlink_to("busybox")
    (rootfs / "tmp").mkdir(mode=0o1777)

    host_repos = work / "host-repos"
    miles = _make_repo(host_repos / "miles", {"README.md": "miles stub\n"})
    megatron = _make_repo(host_repos / "Megatron-LM", {"setup.py": "# megatron stub\n"})
    git(host_repos / "Megatron-LM", "pack-refs", "--all")
    version_py = f'__version__ = "{SGLANG_STUB_VERSION}"\n'
    sglang = _make_repo(host_repos / "sglang", {"python/sglang/version.py": version_py})
    git(host_repos / "sglang", "checkout", "-q", "--detach")
    # The image holds the .git folders made on the host, plus sglang's sources.
    for name, dest in (
        ("miles", "root/miles"),
        ("Megatron-LM", "root/Megatron-LM"),
        ("sglang", "sgl-workspace/sglang"),
    ):
        shutil.copytree(host_repos / name / ".git", rootfs / dest / ".git", symlinks=True)
    shutil.copytree(host_repos / "sglang" / "python", rootfs / "sgl-workspace/sglang/python")

    tarball = work / "rootfs.tar"
    with tarfile.open(tarball, "w") as tar:
        tar.add(rootfs, arcname=".")
    ref = f"{docker_registry}/miles-stub:test"
    labels = {
        "miles.image-inputs": IMAGE_INPUTS_LABEL,
        "org.opencontainers.image.source": "https://example.com/miles-stub",
    }
    changes = [f"--change=LABEL {key}={value}" for key, value in labels.items()]
    image_id = docker_engine.cli("import", *changes, str(tarball), ref).stdout.strip()
    docker_engine.cli("push", ref)
    repo_digests = docker_engine.cli(
        "image",
        "inspect",
        "--format",
        "{{range .RepoDigests}}{{println .}}{{end}}",
        ref,
    ).stdout.split()
    local_ref = "miles-local-only:test"
    docker_engine.cli("import", *changes, str(tarball), local_ref)
    docker_engine.timings["image"] = time.monotonic() - start
    return StubImage(
        ref=ref,
        id=image_id,
        repo_digest=repo_digests[0],
        local_ref=local_ref,
        miles_commit=miles,
        sglang_commit=sglang,
        megatron_commit=megatron,
        sglang_version=SGLANG_STUB_VERSION,
        labels=labels,
    )


@pytest.fixture
def docker_host(docker_engine: DockerEngine, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point DOCKER_HOST (read by `docker.from_env`) at the private engine."""
    monkeypatch.setenv("DOCKER_HOST", docker_engine.host)
    monkeypatch.delenv("DOCKER_CONTEXT", raising=False)
    monkeypatch.delenv("DOCKER_TLS_VERIFY", raising=False)
    return docker_engine.host
