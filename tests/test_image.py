"""Image identity: argv detection, the probe script under a real sh, and a real Docker engine."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from repos import git

from ledger.capture.image import (
    DEFAULT_PROBES,
    ImageFacts,
    build_probe_script,
    detect_image_in_argv,
    normalize_probes,
    parse_probe_output,
    probe_image,
)

if TYPE_CHECKING:
    from docker_env import DockerEngine, StubImage

# The real-engine fixtures (docker_engine, miles_stub_image, docker_host, ...).
pytest_plugins = ["docker_env"]

# ---------------------------------------------------------------------------------------------
# detect_image_in_argv


@pytest.mark.parametrize(
    ("command", "image"),
    [
        ("docker run radixark/miles:latest python3 train.py", "radixark/miles:latest"),
        ("sudo docker run --rm -it radixark/miles:dev bash", "radixark/miles:dev"),
        ("sudo -u alice docker run img:1", "img:1"),
        ("docker container run --gpus all --shm-size 16g img cmd", "img"),
        ("nvidia-docker run -v /data:/data --name job1 img:cu12", "img:cu12"),
        ("/usr/bin/docker run -e K=V --env X=1 -w /root img", "img"),
        ("docker run --ipc=host --network host --ulimit memlock=-1 img", "img"),
        ("docker run --entrypoint /bin/bash -p 8000:8000 img -c 'x'", "img"),
        ("docker run -itv /a:/b img", "img"),
        ("docker run -eK=V img", "img"),
        ("docker run --privileged --init -d --ulimit stack=67108864 img", "img"),
        ("docker --context remote run img", "img"),
        ("env CUDA_VISIBLE_DEVICES=0 docker run img", "img"),
        ("docker run --rm -- img", "img"),
        (
            "docker run reg:5000/ns/img@sha256:" + "a" * 64,
            "reg:5000/ns/img@sha256:" + "a" * 64,
        ),
        ("docker create --name x img", "img"),
    ],
)
def test_detect_image_in_argv(command: str, image: str) -> None:
    import shlex

    assert detect_image_in_argv(shlex.split(command)) == image


@pytest.mark.parametrize(
    "command",
    [
        "python3 train.py --lr 1e-6",
        "docker ps",
        "docker image ls",
        "docker run --rm -v /a:/b",
        "",
        "ray job submit -- python3 train.py",
    ],
)
def test_detect_image_in_argv_none(command: str) -> None:
    assert detect_image_in_argv(command.split()) is None


# ---------------------------------------------------------------------------------------------
# The probe script, run by a real sh on this machine


def _run_script(probes: dict[str, object]) -> tuple[dict[str, str | None], list[str]]:
    specs, errors = normalize_probes(probes)
    assert errors == []
    script = build_probe_script(specs)
    proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
    return parse_probe_output(list(specs), proc.stdout, proc.stderr)


def test_probe_script_answers_and_failures() -> None:
    answers, errors = _run_script(
        {
            "plain": "echo hello",
            "argv": ["printf", "%s\\n", "two words", "second line"],
            "broken": "echo 'first problem' >&2; echo more >&2; exit 3",
            "silent": "exit 4",
            "empty": "true",
            "exits": "exit 0; echo never",
        }
    )
    assert answers["plain"] == "hello"
    assert answers["argv"] == "two words"  # first line only
    assert answers["broken"] is None and answers["silent"] is None
    assert errors == [
        "probe broken failed: first problem",
        "probe silent failed: exit status 4, no message",
        "probe empty failed: printed nothing",
        "probe exits failed: printed nothing",
    ]


def test_normalize_probes_rejects_bad_entries() -> None:
    specs, errors = normalize_probes({"ok": "echo", "Bad-Name": "echo", "id": "x", "n": 3})
    assert list(specs) == ["ok"]
    assert len(errors) == 3
    assert normalize_probes(None)[0].keys() == DEFAULT_PROBES.keys()


def _git(repo: Path, *args: str) -> str:
    return git(repo, *args).strip()


@pytest.mark.parametrize("layout", ["loose", "packed", "detached"])
def test_git_head_fallback_without_git(tmp_path: Path, layout: str) -> None:
    """The default commit probe reads .git with sh builtins when the image has no git."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "f").write_text("x")
    _git(repo, "add", "f")
    _git(repo, "commit", "-q", "-m", "m")
    commit = _git(repo, "rev-parse", "HEAD")
    if layout == "packed":
        _git(repo, "pack-refs", "--all")
        assert not (repo / ".git/refs/heads/main").exists()
    elif layout == "detached":
        _git(repo, "checkout", "-q", "--detach")
    # /bin/sh by its path: PATH holds an empty folder, so neither git nor cat can be found.
    sh_argv = ["/bin/sh", *DEFAULT_PROBES["miles_commit"][1:-1], str(repo)]
    no_git_path = tmp_path / "bin"
    no_git_path.mkdir()
    proc = subprocess.run(
        sh_argv,
        env={"PATH": str(no_git_path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert (proc.returncode, proc.stdout.strip()) == (0, commit)
    missing = subprocess.run(
        [*sh_argv[:-1], str(tmp_path / "nope")],
        env={"PATH": str(no_git_path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert missing.returncode == 1
    assert "not a git checkout" in missing.stderr


# ---------------------------------------------------------------------------------------------
# Without an engine


def test_no_engine_lands_in_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/dead.sock")
    facts = probe_image("radixark/miles:latest", None, tmp_path / "cache")
    assert facts.id is None and facts.probes == {}
    assert len(facts.errors) == 1
    assert facts.errors[0].startswith("docker engine unreachable: ")
    assert facts.to_manifest()["errors"] == facts.errors


# ---------------------------------------------------------------------------------------------
# A real engine


def _probe_containers_created(engine: DockerEngine, since: float, until: float) -> int:
    out = engine.cli(
        "events", "--since", f"{since:.3f}", "--until", f"{until:.3f}",
        "--filter", "type=container", "--filter", "event=create",
        "--format", "{{.ID}}",
    ).stdout  # fmt: skip
    return len(out.split())


@pytest.mark.docker
def test_real_image_facts(
    docker_engine: DockerEngine,
    miles_stub_image: StubImage,
    docker_host: str,
    tmp_path: Path,
) -> None:
    stub = miles_stub_image
    facts = probe_image(stub.ref, None, tmp_path / "cache")
    assert facts.errors == []
    assert facts.id == stub.id and facts.id.startswith("sha256:")
    assert facts.digest == stub.repo_digest
    assert facts.digest.startswith(stub.ref.rsplit(":", 1)[0] + "@sha256:")
    assert facts.labels == stub.labels
    assert facts.probes == {
        "miles_commit": stub.miles_commit,
        "sglang_version": stub.sglang_version,
        "sglang_commit": stub.sglang_commit,
        "megatron_commit": stub.megatron_commit,
    }
    assert facts.cached is False
    manifest = facts.to_manifest()
    assert manifest["miles_commit"] == stub.miles_commit and manifest["digest"] == facts.digest
    leftovers = docker_engine.cli("ps", "-aq", "--filter", "label=ledger.probe").stdout
    assert leftovers.strip() == ""


@pytest.mark.docker
def test_second_probe_uses_cache_and_starts_no_container(
    docker_engine: DockerEngine,
    miles_stub_image: StubImage,
    docker_host: str,
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    before = time.time()
    first = probe_image(miles_stub_image.ref, None, cache)
    between = time.time()
    second = probe_image(miles_stub_image.ref, None, cache)
    after = time.time() + 1
    assert (first.cached, second.cached) == (False, True)
    assert second.probes == first.probes and second.errors == first.errors == []
    assert second.digest == first.digest and second.labels == first.labels
    assert [json.loads(p.read_text())["image_id"] for p in cache.iterdir()] == [first.id]
    assert _probe_containers_created(docker_engine, before, between) == 1
    assert _probe_containers_created(docker_engine, between, after) == 0


@pytest.mark.docker
def test_local_only_image_has_no_digest(miles_stub_image: StubImage, docker_host: str, tmp_path: Path) -> None:
    facts = probe_image(miles_stub_image.local_ref, {}, tmp_path)
    assert facts.errors == []
    assert facts.id is not None and facts.digest is None
    assert facts.labels["miles.image-inputs"] == miles_stub_image.labels["miles.image-inputs"]


@pytest.mark.docker
def test_unknown_image(docker_host: str, tmp_path: Path) -> None:
    facts = probe_image("no-such-image:nope", None, tmp_path)
    assert facts.id is None and facts.probes == {}
    assert facts.errors == ["image not found: no-such-image:nope (pull it first: docker pull no-such-image:nope)"]


@pytest.mark.docker
def test_failing_probes_land_in_errors(miles_stub_image: StubImage, docker_host: str, tmp_path: Path) -> None:
    probes = {
        "ok": "echo fine",
        "argv_probe": ["echo", "two words"],
        "broken": "cat /nope",
        "no_python": "python3 -c 'print(1)'",
    }
    facts = probe_image(miles_stub_image.ref, probes, tmp_path)
    assert facts.probes == {
        "ok": "fine",
        "argv_probe": "two words",
        "broken": None,
        "no_python": None,
    }
    assert facts.errors[0].startswith("probe broken failed: cat: can't open '/nope'")
    assert facts.errors[1].startswith("probe no_python failed: ")
    assert "python3" in facts.errors[1] and "not found" in facts.errors[1]
    assert facts.id == miles_stub_image.id and isinstance(facts, ImageFacts)
