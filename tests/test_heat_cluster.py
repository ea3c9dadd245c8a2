"""The heat guard on a real two-node Ray cluster (two raylets on this machine, Ray's own test harness).

The job is a real `ray job submit` job whose actors run on both nodes (custom resources `node1` on
the head and `node2` on the second raylet pin them, as Miles pins trainer and engine actors with
placement groups). The scripted timeline heats GPU 0 of node 2 only; the whole job, on both nodes,
must stop and then resume, and the record must name the node.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import git, ledger

from ledger.heat.cluster_target import ClusterTarget, collective_timeout, detect_cluster
from ledger.heat.heatlog import read_heat_log

cluster_utils = pytest.importorskip("ray.cluster_utils", reason="Ray is installed by `make install` (the test extra)")

# Each ticker writes "<unix time> <pid>" lines; it ends 2 s after it noticed it had been stopped
# (a gap over 1 s between two of its own ticks), or after 90 s.
JOB = '''
import os, sys, time, ray
ray.init()

@ray.remote(num_cpus=0)
class Ticker:
    def run(self, path):
        start = last = time.time(); paused_at = None
        with open(path, "w") as out:
            while time.time() - start < 90:
                now = time.time()
                out.write(f"{now:.3f} {os.getpid()}\\n"); out.flush()
                if now - last > 1.0 and paused_at is None:
                    paused_at = now
                if paused_at is not None and now - paused_at > 2:
                    return os.getpid()
                last = now
                time.sleep(0.05)
        return os.getpid()

out = sys.argv[1]
tickers = [Ticker.options(resources={name: 0.5}).remote() for name in ("node1", "node2")]
print("pids", ray.get([t.run.remote(f"{out}/{name}.ticks") for t, name in zip(tickers, ("node1", "node2"))]))
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_job_agent(dashboard: str) -> None:
    """A fresh cluster answers 'No available agent to submit job' for a few seconds: wait it out."""
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(dashboard)
    deadline = time.monotonic() + 90
    while True:
        try:
            job = client.submit_job(entrypoint="true")
            break
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    while not client.get_job_status(job).is_terminal() and time.monotonic() < deadline:
        time.sleep(0.5)


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[str, str]]:
    """A head (resource node1, with the dashboard the Job API needs) and a second raylet (node2).

    Everything listens on 127.0.0.1 only. Ray replaces a loopback address by the machine's own IP
    (`services.resolve_ip_for_localhost`) unless RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, which makes
    its idea of "this node's IP" the loopback one: set for the cluster, its jobs and ledger alike.
    """
    saved = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    dash = _free_port()
    c = cluster_utils.Cluster(initialize_head=True, head_node_args={
        "num_cpus": 2, "resources": {"node1": 1}, "node_ip_address": "127.0.0.1", "include_dashboard": True,
        "dashboard_host": "127.0.0.1", "dashboard_port": dash})
    try:
        c.add_node(num_cpus=2, resources={"node2": 1}, node_ip_address="127.0.0.1")
        c.wait_for_nodes()
        _wait_for_job_agent(f"http://127.0.0.1:{dash}")
        yield f"http://127.0.0.1:{dash}", c.address
    finally:
        c.shutdown()
        if saved is None:
            os.environ.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
        else:
            os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = saved


def _configure(repo: Path, timeline: str, interval: float = 0.5, resume_after: float = 1.5) -> None:
    (repo / "heat.timeline").write_text(timeline)
    (repo / ".ledger.yaml").write_text(
        f"heat_guard:\n  interval_s: {interval}\n  pause_at: 85\n  resume_at: 75\n"
        f"  resume_after: {resume_after}\n  max_pause: 600\n  sensor: {{timeline: heat.timeline}}\n")
    (repo / "job.py").write_text(JOB)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "heat config")


def _ticks(path: Path) -> list[float]:
    return [float(line.split()[0]) for line in path.read_text().splitlines() if line.strip()]


def test_hot_gpu_on_node2_pauses_the_job_on_both_nodes(cluster: tuple[str, str], repo: Path, tmp_path: Path) -> None:
    dashboard, _gcs = cluster
    # node 2's GPU 0 is hot from 12 s after its sampler starts to 14 s: time enough for the job's
    # actors to be up on both nodes first (ledger connects and ray job submit starts meanwhile)
    _configure(repo, "0 0 50\n0 1 48\n12 node2 0 95\n14 node2 0 50\n")
    out = tmp_path / "ticks"
    out.mkdir()
    r = ledger(repo, "run", "--name", "cluster", "--", "ray", "job", "submit", "--address", dashboard, "--",
               sys.executable, str(repo / "job.py"), str(out), timeout=170)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    m = json.loads(ledger(repo, "show", "cluster", "--json").stdout)
    gpu = m["gpu"]
    assert gpu["sensor"] == "ray-cluster"
    assert gpu["cluster"]["connected"] is True and gpu["unwatched"] == {}
    labels = {n["node"] for n in gpu["nodes"]}
    assert len(gpu["nodes"]) == 2 and all(n["watched"] for n in gpu["nodes"])
    # per node: its GPUs and peaks; node 2 (the one hot) is the only one that saw 95
    hot = [n for n in gpu["nodes"] if n["peak_temp_c"].get(0) == 95.0 or n["peak_temp_c"].get("0") == 95.0]
    assert len(hot) == 1 and [g["index"] for g in hot[0]["gpus"]] == [0, 1]
    # one pause, triggered by GPU 0 of node 2
    assert gpu["pauses"] == 1, r.stderr[-3000:]
    window = gpu["pause_windows"][0]
    assert window["node"] == hot[0]["node"] and window["gpu"] == 0 and window["temp_c"] == 95.0
    # heat.log has both nodes
    folder = f"runs/{m['id'][-4:-2]}/{m['id']}"
    heat_text = git(repo, "show", f"experiments:{folder}/heat.log")
    (tmp_path / "heat.log").write_text(heat_text)
    log = read_heat_log(tmp_path / "heat.log")
    assert set(log.nodes) == labels
    assert [(e.kind, e.node, e.gpu) for e in log.events] == [("pause", hot[0]["node"], 0), ("resume", None, None)]
    # the job's actors on BOTH nodes stopped during the pause and ran again after it
    pause_start, pause_end = log.pauses[0]
    assert pause_end is not None
    for name in ("node1", "node2"):
        ticks = _ticks(out / f"{name}.ticks")
        gaps = [(a, b) for a, b in zip(ticks, ticks[1:]) if b - a > 1.0]
        assert len(gaps) == 1, f"{name}: expected one stop, got {gaps}"
        stopped, resumed = gaps[0]
        assert stopped <= pause_end and resumed >= pause_end - 0.1  # the gap is the pause
        assert ticks[-1] > resumed  # it ran on afterwards


def test_unreachable_cluster_runs_unwatched(repo: Path) -> None:
    """No dashboard at the address: the job still runs, the record says the cluster was not watched."""
    _configure(repo, "0 0 50\n")
    port = _free_port()
    fake = repo / "ray"  # a stand-in `ray` that runs what follows `--`, as `ray job submit` would
    fake.write_text("#!/bin/sh\nwhile [ \"$1\" != \"--\" ]; do shift; done\nshift\nexec \"$@\"\n")
    fake.chmod(0o755)
    r = ledger(repo, "run", "--", str(fake), "job", "submit", "--address", f"http://127.0.0.1:{port}", "--",
               sys.executable, "-c", "import time; time.sleep(1.5)")
    assert r.returncode == 0, r.stderr
    gpu = json.loads(ledger(repo, "show", "latest", "--json").stdout)["gpu"]
    assert gpu["cluster"]["connected"] is False
    assert f"127.0.0.1:{port}" in gpu["cluster"]["unavailable"]
    assert "not watched" in r.stderr or "cannot connect" in r.stderr


def test_cluster_target_and_collective_timeout() -> None:
    """What `ledger run` reads from a command (shapes as in Miles' bash launchers, see miles-facts.md)."""
    argv = ["ray", "job", "submit", "--address=http://127.0.0.1:8265", "--submission-id", "s1",
            "--runtime-env-json", '{"env_vars": {"NCCL_TIMEOUT": "120"}}', "--",
            "python3", "train.py", "--distributed-timeout-minutes", "5"]
    target = detect_cluster(argv, {})
    assert target == ClusterTarget("http://127.0.0.1:8265", "argv", "s1",
                                   "python3 train.py --distributed-timeout-minutes 5", {"NCCL_TIMEOUT": "120"})
    assert detect_cluster(["python3", "train.py"], {}) is None
    assert detect_cluster(["python3", "train.py"], {"RAY_ADDRESS": "10.0.0.1:6379"}) == ClusterTarget("10.0.0.1:6379", "RAY_ADDRESS")
    launcher = 'ray start --head\nray job submit --address="http://127.0.0.1:8265" \\\n  -- python3 train.py\n'
    assert detect_cluster(["bash", "run.sh"], {}, launcher) == ClusterTarget("http://127.0.0.1:8265", "launcher")
    timeout = collective_timeout(["train.py", "--distributed-timeout-minutes", "5"], {"NCCL_TIMEOUT": "120"})
    assert timeout is not None and (timeout.seconds, timeout.source) == (120.0, "NCCL_TIMEOUT=120")
    assert collective_timeout(["train.py"], dict(os.environ, NCCL_TIMEOUT="")) is None
