"""`ledger run --image` against a real Docker engine and registry (skips with the reason when
no engine can start on this machine)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from conftest import ledger
from docker_env import DockerEngine, StubImage, docker_engine, docker_host, docker_registry, miles_stub_image  # noqa: F401


@pytest.mark.docker
def test_run_records_the_image_facts_and_caches_them(
    repo: Path,
    docker_engine: DockerEngine,  # noqa: F811
    miles_stub_image: StubImage,  # noqa: F811
    docker_host: str,  # noqa: F811
) -> None:
    stub = miles_stub_image
    started = str(int(time.time()) - 1)
    r = ledger(repo, "run", "--image", stub.ref, "--", sys.executable, "-c", "print('on the host')")
    assert r.returncode == 0, r.stderr
    m = json.loads(ledger(repo, "show", "latest", "--json").stdout)
    image = m["image"]
    assert image["ref"] == stub.ref and image["id"] == stub.id and image["digest"] == stub.repo_digest
    assert image["miles_commit"] == stub.miles_commit and image["sglang_version"] == stub.sglang_version
    assert image["sglang_commit"] == stub.sglang_commit and image["megatron_commit"] == stub.megatron_commit
    assert image["labels"]["miles.image-inputs"] == stub.labels["miles.image-inputs"]
    assert image["errors"] == []
    assert m["settings"]["image.digest"] == stub.repo_digest
    assert m["settings"]["image.miles_commit"] == stub.miles_commit
    # a second run on the same image reads the cache: no probe container is created (probe
    # containers are removed at once, so count their `create` events, not the containers left)
    between = str(int(time.time()) + 1)
    time.sleep(1.1)  # docker events have 1 s resolution
    r = ledger(repo, "run", "--", "docker", "run", "--rm", "--network", "none", stub.ref, "true")
    assert r.returncode == 0, r.stderr
    m2 = json.loads(ledger(repo, "show", "latest", "--json").stdout)
    assert m2["image"]["ref"] == stub.ref and m2["image"]["digest"] == stub.repo_digest  # detected from `docker run`
    until = str(int(time.time()) + 1)

    def probe_creates(since: str, end: str) -> list[str]:
        out = docker_engine.cli(
            "events",
            "--since",
            since,
            "--until",
            end,
            "--filter",
            "type=container",
            "--filter",
            "event=create",
            "--filter",
            "label=ledger.probe",
            "--format",
            "{{.ID}}",
        ).stdout
        return out.split()

    assert len(probe_creates(started, between)) == 1  # the first run probed the image once
    assert probe_creates(between, until) == []


def test_unknown_image_or_no_engine_never_stops_the_run(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    r = ledger(repo, "run", "--image", "radixark/miles:latest", "--", sys.executable, "-c", "print(1)")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("image facts incomplete") == 1 and "Traceback" not in r.stderr
    m = json.loads(ledger(repo, "show", "latest", "--json").stdout)
    assert m["image"]["ref"] == "radixark/miles:latest" and m["image"]["digest"] is None
    assert any("docker engine unreachable" in e for e in m["image"]["errors"])
