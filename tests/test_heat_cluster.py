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
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import git, ledger, nvml_works

from ledger.heat.cluster_target import ClusterTarget, collective_timeout, detect_cluster
from ledger.heat.heatlog import read_heat_log

cluster_utils = pytest.importorskip("ray.cluster_utils", reason="Ray is installed by `make install` (the test extra)")

# Each ticker writes "<unix time> <pid>" lines; it ends 2 s after it noticed it had been stopped
# (a gap over 1 s between two of its own ticks), or after 90 s.
JOB = """
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
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _agent_ports() -> dict[str, int]:
    """A node's agents on ports of their own: every node's agents default to 52365 and others, and
    whichever bound second lost its HTTP service ("No available agent to submit job" for 90 s when
    that was the head's, seen on a loaded machine)."""
    names = ("dashboard_agent_listen_port", "runtime_env_agent_port", "metrics_export_port", "metrics_agent_port")
    return {name: _free_port() for name in names}


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
def cluster() -> Iterator[tuple[str, str, Any]]:
    """A head (resource node1, with the dashboard the Job API needs) and a second raylet (node2).

    Everything listens on 127.0.0.1 only. Ray replaces a loopback address by the machine's own IP
    (`services.resolve_ip_for_localhost`) unless RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, which makes
    its idea of "this node's IP" the loopback one: set for the cluster, its jobs and ledger alike.
    This process read the variable when it imported Ray (at collection), so for the tests that
    connect from here the constant it set is switched too, for this module only.
    """
    from ray._private import ray_constants

    saved = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    patch = pytest.MonkeyPatch()
    patch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
    dash = _free_port()

    c = cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 2,
            "resources": {"node1": 1},
            "node_ip_address": "127.0.0.1",
            "include_dashboard": True,
            "dashboard_host": "127.0.0.1",
            "dashboard_port": dash,
            **_agent_ports(),
        },
    )
    try:
        c.add_node(num_cpus=2, resources={"node2": 1}, node_ip_address="127.0.0.1", **_agent_ports())
        c.wait_for_nodes()
        _wait_for_job_agent(f"http://127.0.0.1:{dash}")
        yield f"http://127.0.0.1:{dash}", c.address, c
    finally:
        c.shutdown()
        patch.undo()
        if saved is None:
            os.environ.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
        else:
            os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = saved


def _configure(repo: Path, timeline: str, interval: float = 0.5, resume_after: float = 1.5) -> None:
    (repo / "heat.timeline").write_text(timeline)
    (repo / ".ledger.yaml").write_text(
        f"heat_guard:\n  interval_s: {interval}\n  pause_at: 85\n  resume_at: 75\n"
        f"  resume_after: {resume_after}\n  max_pause: 600\n  sensor: {{timeline: heat.timeline}}\n"
    )
    (repo / "job.py").write_text(JOB)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "heat config")


def _ticks(path: Path) -> list[float]:
    return [float(line.split()[0]) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_hot_gpu_on_node2_pauses_the_job_on_both_nodes(cluster: tuple[str, str, Any], repo: Path, tmp_path: Path) -> None:
    dashboard, _gcs, _c = cluster
    # node 2's GPU 0 is hot from 12 s after its sampler starts to 14 s: time enough for the job's
    # actors to be up on both nodes first (ledger connects and ray job submit starts meanwhile)
    _configure(repo, "0 0 50\n0 1 48\n12 node2 0 95\n14 node2 0 50\n")
    out = tmp_path / "ticks"
    out.mkdir()
    r = ledger(
        repo,
        "run",
        "--name",
        "cluster",
        "--",
        "ray",
        "job",
        "submit",
        "--address",
        dashboard,
        "--",
        sys.executable,
        str(repo / "job.py"),
        str(out),
        timeout=170,
    )
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
    # node 2's timeline clock starts at its sampler's first reading (its first heat.log line, a
    # little later): GPU 0 turns hot at +12 s and cool at +14 s; the guard may resume at +14 s
    # plus resume_after (1.5 s). How soon each node stops and runs again (target: within two
    # intervals) is bench/bench_cluster_heat.py's figure: on a loaded machine (two test workers,
    # two Ray nodes, two cores) a test can say what happened, in what order, not how fast.
    interval, resume_after = 0.5, 1.5
    first = min(s.time for s in log.samples if s.sample.node == hot[0]["node"])
    hot_at, may_resume = first + 12, first + 14 + resume_after
    for name in ("node1", "node2"):
        ticks = _ticks(out / f"{name}.ticks")
        gaps = [(a, b) for a, b in zip(ticks, ticks[1:]) if b - a > 1.0]
        assert len(gaps) == 1, f"{name}: expected one stop, got {gaps}"
        stopped, resumed = gaps[0]  # its last tick before the stop, its first tick after it
        assert stopped <= pause_end and resumed >= pause_end - 0.1  # the gap is the pause
        # a tick is 0.05 s: its last tick came at most one interval before the GPU turned hot
        assert stopped >= hot_at - interval, f"{name}: stopped {hot_at - stopped:.2f} s before the GPU turned hot"
        assert resumed >= may_resume - 0.25, f"{name}: ran again {may_resume - resumed:.2f} s before resume_after passed"
        assert ticks[-1] > resumed  # it ran on afterwards


def _state(pid: int) -> str:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rfind(")") + 2]


def _sensor(dashboard: str, entries: list[tuple[float, int, float, str | None]] | None, warnings: list[str]) -> Any:
    """A ClusterSensor in this process; `entries` None: each node samples NVML."""
    from ledger.heat.cluster import ClusterSensor

    spec = {"kind": "nvml"} if entries is None else {"kind": "scripted", "path": "test", "entries": entries}
    sensor = ClusterSensor(ClusterTarget(dashboard, "argv"), spec, 0.5, time.time(), warn=warnings.append)
    assert sensor.wait_connected(60), warnings
    return sensor


def _wait(what: str, ok: Any, sensor: Any, sample: bool = True, seconds: float = 60) -> None:
    """Until `ok()`; `sample`: take readings meanwhile (no monitor is running to do it)."""
    deadline = time.monotonic() + seconds
    while not ok():
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {sensor.cluster_manifest()}"
        if sample:
            sensor.sample()
        time.sleep(0.2)


def test_a_pause_that_fails_on_one_node_leaves_no_node_stopped(cluster: tuple[str, str, Any]) -> None:
    """One node's sampler is gone when the guard pauses: the pause fails, and the processes the
    other node had already stopped run again (else nothing would ever resume them)."""
    import ray

    dashboard, _gcs, _c = cluster
    warnings: list[str] = []
    sensor = _sensor(dashboard, [(0, 0, 50, None)], warnings)
    # both raylets run on this machine, so a local process can stand for each node's part of the job
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]) for _ in range(2)]
    try:
        _wait("both samplers", lambda: len(sensor.gpus()) == 2, sensor)
        one, two = sorted(sensor._nodes.values(), key=lambda w: "node1" not in w.names)  # noqa: SLF001
        sensor.find_job = lambda: {"job_id": "test", "submission_id": "test"}
        sensor.job_processes = lambda job: {one.node_id: [procs[0].pid], two.node_id: [procs[1].pid]}
        ray.kill(two.handle)  # node 2's sampler dies (its node lost, OOM-killed)

        def dead() -> bool:
            try:
                ray.get(two.handle.info.remote(), timeout=5)
            except Exception:  # noqa: BLE001 - the actor-died error
                return True
            return False

        _wait("node 2's sampler to die", dead, sensor, sample=False)
        with pytest.raises(Exception):  # noqa: B017 - Ray's actor-died error, whatever its class
            sensor.pause()
        # an actor runs one caller's calls in order: once this answers, node 1 has handled the stop
        ray.get(one.handle.info.remote(), timeout=30)
        assert _state(procs[0].pid) != "T", "node 1 stopped its part of the job and nobody resumed it"
        # nothing left half paused: a second pause/resume on node 1 alone works
        sensor.job_processes = lambda job: {one.node_id: [procs[0].pid]}
        sensor.pause()
        assert _state(procs[0].pid) == "T"
        sensor.resume()
        assert _state(procs[0].pid) != "T"
    finally:
        sensor.close()
        for proc in procs:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_nodes_that_join_later_are_watched_and_leaving_keeps_their_gpus(
    cluster: tuple[str, str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A third node joins during the run and gets a sampler; a node the timeline names no GPU of is
    recorded as not watched, with the reason; a node that leaves keeps its GPUs in the record."""
    from ledger.heat import cluster as heat_cluster
    from ledger.heat.guard import HeatGuard
    from ledger.heat.monitor import HeatMonitor

    dashboard, _gcs, c = cluster
    monkeypatch.setattr(heat_cluster, "REFRESH_S", 0.5)
    warnings: list[str] = []
    sensor = _sensor(dashboard, [(0, 0, 50, "node2"), (0, 0, 55, "node3"), (0, 1, 56, "node3")], warnings)
    heat_log = tmp_path / "heat.log"
    monitor = HeatMonitor(sensor, HeatGuard(), 0.5, heat_log, sensor.pause, sensor.resume, warn=warnings.append)
    monitor.start()
    third = None
    try:
        _wait("node 2's sampler", lambda: len(sensor.gpus()) == 1, sensor, sample=False)
        third = c.add_node(num_cpus=1, resources={"node3": 1}, node_ip_address="127.0.0.1", **_agent_ports())
        c.wait_for_nodes()
        _wait("readings from the new node", lambda: len(read_heat_log(heat_log).keys) == 3, sensor, sample=False)
        c.remove_node(third)
        third = None
        _wait("the node's leaving", lambda: len(sensor.gpus()) == 1, sensor, sample=False)
    finally:
        if third is not None:
            c.remove_node(third)
        gpu = monitor.stop().to_manifest()
    nodes = {n["node"]: n for n in gpu["nodes"]}
    assert len(nodes) == 3
    label = {
        name: next(w.label for w in sensor._nodes.values() if name in w.names)  # noqa: SLF001
        for name in ("node1", "node2", "node3")
    }
    head, second, joined = (nodes[label[name]] for name in ("node1", "node2", "node3"))
    assert not head["watched"] and gpu["unwatched"][head["node"]] == "no GPU sensor: the heat timeline names no GPU of this node"
    assert second["watched"] and [g["index"] for g in second["gpus"]] == [0]
    assert joined["left"] and gpu["unwatched"][joined["node"]] == "the node left the cluster"
    assert [g["index"] for g in joined["gpus"]] == [0, 1] and joined["peak_temp_c"] == {0: 55.0, 1: 56.0}
    assert sorted((g["node"], g["index"]) for g in gpu["gpus"]) == sorted([(second["node"], 0), (joined["node"], 0), (joined["node"], 1)])
    assert any("not watched" in w and head["node"] in w for w in warnings), warnings


@pytest.mark.skipif(nvml_works(), reason="NVML works here (a GPU machine): the no-NVML path cannot be shown")
def test_nodes_without_nvml_are_recorded_as_not_watched(cluster: tuple[str, str, Any]) -> None:
    """The real NVML sensor on each node, on a machine without a GPU driver: both nodes unwatched, with NVML's reason."""
    dashboard, _gcs, _c = cluster
    warnings: list[str] = []
    sensor = _sensor(dashboard, None, warnings)
    try:
        _wait(
            "both samplers' answers",
            lambda: len(sensor.cluster_manifest()["nodes"]) == 2 and all(w.info is not None for w in sensor._nodes.values()),
            sensor,
        )  # noqa: SLF001
        facts = sensor.cluster_manifest()
    finally:
        sensor.close()
    assert sensor.gpus() == [] and len(facts["unwatched"]) == 2
    assert all(why.startswith("no GPU sensor: ") and len(why) > len("no GPU sensor: ") for why in facts["unwatched"].values())
    assert sum("is not watched" in w for w in warnings) == 2, warnings


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
    assert r.returncode == 0, r.stderr
    gpu = json.loads(ledger(repo, "show", "latest", "--json").stdout)["gpu"]
    assert gpu["cluster"]["connected"] is False
    # whether the connection attempt failed before the 1.5 s job ended (it did not, under load: was
    # "not connected yet") or not, the record and the terminal name the address not watched
    assert f"127.0.0.1:{port}" in gpu["cluster"]["unavailable"]
    assert "nodes were not watched" in r.stderr and f"127.0.0.1:{port}" in r.stderr


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
