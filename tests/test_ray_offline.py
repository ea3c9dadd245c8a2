"""Ray paths that need no cluster: a cluster that does not answer (the job runs unwatched, a dead
ledger's run stays staged), what `ledger run` reads from a command to find its cluster, and a local
head that ends at once. Apart from tests/test_ray_cluster.py, so they run on another worker than
that module's clusters and add nothing to its length (the suite's longest).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import LEDGER, ledger
from test_ray_cluster import _configure, _failed, _free_port

from ledger.heat.cluster_target import ClusterTarget, collective_timeout, detect_cluster

pytest.importorskip("ray", reason="Ray is the `ray` extra, installed by `make test` (test extra)")


def test_unreachable_cluster_runs_unwatched(repo: Path) -> None:
    """No dashboard at the address: the job still runs, the record says the cluster was not watched."""
    _configure(repo, "0 0 50\n")
    port = _free_port()
    fake = repo / "ray"  # a stand-in `ray` that runs what follows `--`, as `ray job submit` would
    fake.write_text('#!/bin/sh\nwhile [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n')
    fake.chmod(0o755)
    r = ledger(
        repo,
        "run",
        "--",
        str(fake),
        "job",
        "submit",
        "--address",
        f"http://127.0.0.1:{port}",
        "--",
        sys.executable,
        "-c",
        "import time; time.sleep(1.5)",
    )
    assert r.returncode == 0, _failed(repo, r)
    gpu = json.loads(ledger(repo, "show", "latest", "--json").stdout)["gpu"]
    assert gpu["cluster"]["connected"] is False
    # whether the connection attempt failed before the 1.5 s job ended (it did not, under load: was
    # "not connected yet") or not, the record and the terminal name the address not watched
    assert f"127.0.0.1:{port}" in gpu["cluster"]["unavailable"]
    assert "nodes were not watched" in r.stderr and f"127.0.0.1:{port}" in r.stderr


def test_recover_with_ray_unreachable_keeps_the_run_staged(repo: Path, tmp_path: Path) -> None:
    """A dead ledger's run submitted to a Ray that no longer answers: `ledger recover` says so in
    one line and keeps the run staged; `--no-ray` records it as lost without asking (issue 33)."""
    port = _free_port()  # nothing listens there
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    started = tmp_path / "started"
    # a stand-in `ray` (the real one is behind ledger's wrapper, which records the submission first)
    (bin_dir / "ray").write_text(f"#!/bin/sh\ntouch {started}\nexec sleep 300\n")
    (bin_dir / "ray").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    submit = f"ray job submit --address http://127.0.0.1:{port} -- python3 train.py"
    proc = subprocess.Popen([*LEDGER, "run", "--no-debug-data", "--", "bash", "-c", submit], cwd=repo, env=env)
    try:
        deadline = time.monotonic() + 120
        while not started.exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the job never started"
            time.sleep(0.2)
    finally:
        proc.kill()
        proc.wait()
    [staged] = list((repo / ".ledger" / "staging").iterdir())
    r = ledger(repo, "recover", timeout=120)
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if "Ray not reachable" in line]
    assert len(said) == 1 and said[0].startswith(f"ledger: run {staged.name}: Ray not reachable at http://127.0.0.1:{port}")
    assert "the run stays staged" in said[0] and staged.is_dir()
    r = ledger(repo, "recover", "--no-ray", timeout=120)
    assert r.returncode == 0 and not staged.exists(), r.stderr
    assert json.loads(ledger(repo, "show", staged.name, "--json").stdout)["status"]["state"] == "lost"


def test_cluster_target_and_collective_timeout() -> None:
    """What `ledger run` reads from a command (shapes as in Miles' bash launchers, see miles-facts.md)."""
    argv = [
        "ray",
        "job",
        "submit",
        "--address=http://127.0.0.1:8265",
        "--submission-id",
        "s1",
        "--runtime-env-json",
        '{"env_vars": {"NCCL_TIMEOUT": "120"}}',
        "--",
        "python3",
        "train.py",
        "--distributed-timeout-minutes",
        "5",
    ]
    target = detect_cluster(argv, {})
    assert target == ClusterTarget(
        "http://127.0.0.1:8265", "argv", "s1", "python3 train.py --distributed-timeout-minutes 5", {"NCCL_TIMEOUT": "120"}
    )
    assert detect_cluster(["python3", "train.py"], {}) is None
    assert detect_cluster(["python3", "train.py"], {"RAY_ADDRESS": "10.0.0.1:6379"}) == ClusterTarget("10.0.0.1:6379", "RAY_ADDRESS")
    launcher = 'ray start --head\nray job submit --address="http://127.0.0.1:8265" \\\n  -- python3 train.py\n'
    assert detect_cluster(["bash", "run.sh"], {}, launcher) == ClusterTarget("http://127.0.0.1:8265", "launcher")
    timeout = collective_timeout(["train.py", "--distributed-timeout-minutes", "5"], {"NCCL_TIMEOUT": "120"})
    assert timeout is not None and (timeout.seconds, timeout.source) == (120.0, "NCCL_TIMEOUT=120")
    assert collective_timeout(["train.py"], dict(os.environ, NCCL_TIMEOUT="")) is None


def test_a_local_head_that_ends_at_once_is_tried_once_more_then_said_with_ray_s_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ray start` ending before its Job API answers (a port taken meanwhile): one more try on
    other ports, then one error with the last line Ray wrote; no folder of either try is left."""
    from ledger.errors import LedgerError
    from ledger.replay import raylaunch

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "ray"
    fake.write_text(
        '#!/bin/sh\necho "$@" >> "$(dirname "$0")/calls"\necho \'Usage stats collection is disabled.\'\necho \'ConnectionError: port 6379 is already in use\' >&2\nexit 1\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    made: list[str] = []
    real_mkdtemp = raylaunch.tempfile.mkdtemp

    def mkdtemp(**kw: Any) -> str:
        made.append(real_mkdtemp(**kw))
        return made[-1]

    monkeypatch.setattr(raylaunch.tempfile, "mkdtemp", mkdtemp)
    said: list[str] = []
    with pytest.raises(LedgerError) as caught:
        raylaunch.LocalHead(tmp_path, said.append)
    assert caught.value.message == (
        "the local Ray head for the replay did not start (`ray start --head`, exit 1: ConnectionError: port 6379 is already in use)"
    )
    assert (
        said[1]
        == "ledger: the local Ray head did not start (ConnectionError: port 6379 is already in use); trying once more on other ports"
    )
    assert len(said) == 3 and said[0].startswith("ledger: no Ray cluster to replay on") and said[2].startswith("ledger: no Ray cluster")
    calls = (bin_dir / "calls").read_text().splitlines()
    assert len(calls) == 2 and calls[0] != calls[1]  # other ports the second time
    assert len(made) == 2 and not any(Path(p).exists() for p in made)
