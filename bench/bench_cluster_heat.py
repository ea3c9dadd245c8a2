"""Heat sampling on a Ray cluster: what it costs each node, and how fast a pause reaches every node.

A real two-node cluster on this machine (two raylets, Ray's own harness, loopback only).

1. Cost. The same job (one actor per node doing a fixed amount of arithmetic) is run without
   ledger, then while ledger's samplers sample every node at `--interval` (1 s, the issue's figure):
   job time ratio (target: no measurable difference), and each sampler's own CPU time over the
   sampling window as % of one core (target < 1 %). The ledger side (the driver in ledger's own
   process, not on a job node) is reported too.
2. Latency. A job with a ticking actor on each node; the scripted timeline heats node 2's GPU 0 at
   `T` s and cools it at `T+2` s; a 20 ms poller reads each actor process's state from /proc.
   Reported per node in sampling intervals: from the moment the GPU turned hot to the moment its
   process is stopped (T state), and from the moment the guard may resume (cool for `resume_after`)
   to the moment it runs again. Target: within 2 intervals.

The sensor is the scripted one (no GPU here); NVML's own reads cost a few milliseconds per GPU more.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, report

sys.path.insert(0, str(ROOT))
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # keep every Ray address on 127.0.0.1

WORK_JOB = r"""
import json, sys, time, ray
ray.init()
@ray.remote(num_cpus=0)
class Work:
    def run(self, n):
        t = time.perf_counter(); x = 0
        for i in range(n):
            x += i * i % 7
        return time.perf_counter() - t
actors = [Work.options(resources={name: 0.5}).remote() for name in ("node1", "node2")]
print("WORK", json.dumps(ray.get([a.run.remote(int(sys.argv[1])) for a in actors])))
"""

TICK_JOB = r"""
import os, sys, time, ray
ray.init()
@ray.remote(num_cpus=0)
class Tick:
    def pid(self):
        return os.getpid()
    def run(self, seconds):
        end = time.time() + seconds
        while time.time() < end:
            time.sleep(0.01)
actors = [Tick.options(resources={name: 0.5}).remote() for name in ("node1", "node2")]
pids = ray.get([a.pid.remote() for a in actors])
open(sys.argv[1], "w").write(" ".join(map(str, pids)))
ray.get([a.run.remote(float(sys.argv[2])) for a in actors])
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def submit(client, script: Path, *args: str) -> str:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 90
    while True:
        try:
            return str(client.submit_job(entrypoint=f"{sys.executable} {script} {' '.join(args)}"))
        except RuntimeError:  # "No available agent" on a fresh cluster
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def wait_job(client, job: str) -> str:  # type: ignore[no-untyped-def]
    while not client.get_job_status(job).is_terminal():
        time.sleep(0.2)
    return str(client.get_job_logs(job))


def state(pid: int) -> str:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "?"
    return text[text.rfind(")") + 2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--work", type=int, default=20_000_000, help="loop iterations of the cost job per node")
    ap.add_argument("--hot-at", type=float, default=35.0, help="seconds after sampling starts; after the cost phase")
    args = ap.parse_args()

    from ray.cluster_utils import Cluster
    from ray.job_submission import JobSubmissionClient

    from ledger.heat.cluster import ClusterSensor
    from ledger.heat.cluster_target import ClusterTarget
    from ledger.heat.guard import HeatGuard
    from ledger.heat.monitor import HeatMonitor

    tmp = Path(tempfile.mkdtemp(prefix="ledger-bench-cluster-"))
    dash = free_port()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 2,
            "resources": {"node1": 1},
            "node_ip_address": "127.0.0.1",
            "include_dashboard": True,
            "dashboard_host": "127.0.0.1",
            "dashboard_port": dash,
        },
    )
    try:
        cluster.add_node(num_cpus=2, resources={"node2": 1}, node_ip_address="127.0.0.1")
        cluster.wait_for_nodes()
        client = JobSubmissionClient(f"http://127.0.0.1:{dash}")
        work, tick = tmp / "work.py", tmp / "tick.py"
        work.write_text(WORK_JOB)
        tick.write_text(TICK_JOB)

        def work_times() -> list[float]:
            logs = wait_job(client, submit(client, work, str(args.work)))
            # the job's own line (Ray's log lines around it may hold "WORK" too, e.g. WORKER)
            found = re.search(r"^WORK (\[[^\n]*\])$", logs, re.M)
            if found is None:
                raise SystemExit(f"the cost job printed no WORK line: {logs[-2000:]}")
            return [float(x) for x in json.loads(found.group(1))]

        work_times()  # warm-up: worker processes, imports
        base = work_times()

        T = args.hot_at
        spec = {"kind": "scripted", "path": "bench", "entries": [(0, 0, 50, None), (T, 0, 95, "node2"), (T + 2, 0, 50, "node2")]}
        target = ClusterTarget(f"http://127.0.0.1:{dash}", "argv")
        sensor = ClusterSensor(target, spec, args.interval, time.time(), warn=lambda t: print("ledger:", t))
        assert sensor.wait_connected(60), "could not connect"
        resume_after = 2.0
        guard = HeatGuard(pause_at=85, resume_at=75, resume_after=resume_after)
        monitor = HeatMonitor(sensor, guard, args.interval, tmp / "heat.log", sensor.pause, sensor.resume)
        monitor.start()
        while len(sensor.gpus()) < 2:  # both samplers up (GPU 0 on each node)
            time.sleep(0.1)
        t_sampling = time.time()
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from ledger.heat.node_sampler import NodeSampler

        handles = [w.handle for w in sensor._nodes.values()]  # noqa: SLF001 - the bench reads its own samplers
        # control: the same actor on each node, never asked to sample (what any idle Ray actor costs)
        idle = [
            ray.remote(NodeSampler)
            .options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(w.node_id, soft=False))
            .remote("idle", [], {"kind": "scripted", "entries": []})
            for w in sensor._nodes.values()
        ]  # noqa: SLF001
        ray.get([h.info.remote() for h in idle], timeout=60)
        handles += idle
        cpu0 = ray.get([h.cpu_seconds.remote() for h in handles], timeout=30)
        own0 = os.times()
        loaded = work_times()
        time.sleep(max(0.0, 20 - (time.time() - t_sampling)))  # at least 20 s of sampling
        cpu1 = ray.get([h.cpu_seconds.remote() for h in handles], timeout=30)
        own1 = os.times()
        window = time.time() - t_sampling
        pct = [100 * (b - a) / window for a, b in zip(cpu0, cpu1)]
        sampler_pct, idle_pct = pct[: len(pct) // 2], pct[len(pct) // 2 :]
        driver_pct = 100 * ((own1.user + own1.system) - (own0.user + own0.system)) / window

        # latency: the timeline's clock started at each sampler's first reading
        first = {}
        from ledger.heat.heatlog import read_heat_log

        for ts in read_heat_log(tmp / "heat.log").samples:
            first.setdefault(ts.sample.node, ts.time)
        hot_node = next(w.label for w in sensor._nodes.values() if "node2" in w.names)  # noqa: SLF001
        t_hot = first[hot_node] + T
        if time.time() > t_hot - 10:
            raise SystemExit(f"--hot-at {T} s is too early: sampling already ran {time.time() - first[hot_node]:.0f} s")
        pidfile = tmp / "pids"
        job = submit(client, tick, str(pidfile), str(T + 15))
        waited = time.monotonic()
        while not pidfile.exists() or not pidfile.read_text():
            if time.monotonic() - waited > 30:
                raise SystemExit(f"the tick job did not start: {client.get_job_status(job)} {client.get_job_logs(job)[-2000:]}")
            time.sleep(0.05)
        pids = [int(p) for p in pidfile.read_text().split()]
        stopped: dict[int, float] = {}
        resumed: dict[int, float] = {}
        deadline = t_hot + 2 + resume_after + 6 * args.interval
        while time.time() < deadline and len(resumed) < len(pids):
            now = time.time()
            for pid in pids:
                s = state(pid)
                if s == "T" and pid not in stopped:
                    stopped[pid] = now
                elif s != "T" and pid in stopped and pid not in resumed:
                    resumed[pid] = now
            time.sleep(0.02)
        t_may_resume = t_hot + 2 + resume_after
        monitor.stop()
        wait_job(client, job)
        summary_rows = [
            ("cost job per node, no ledger (s)", " ".join(f"{t:.2f}" for t in base)),
            ("cost job per node, ledger sampling (s)", " ".join(f"{t:.2f}" for t in loaded)),
            ("job time ratio ledger / none", " ".join(f"{b / a:.3f}x" for a, b in zip(base, loaded))),
            (f"sampler CPU per node at {args.interval:g} s (% of a core)", " ".join(f"{p:.2f}%" for p in sampler_pct)),
            ("same actor idle, never sampling (control)", " ".join(f"{p:.2f}%" for p in idle_pct)),
            ("ledger-side driver CPU (% of a core)", f"{driver_pct:.2f}%"),
        ]
        for n, pid in enumerate(pids, start=1):
            stop = f"{(stopped[pid] - t_hot) / args.interval:.2f}" if pid in stopped else "never"
            cont = f"{(resumed[pid] - t_may_resume) / args.interval:.2f}" if pid in resumed else "never"
            summary_rows.append((f"node{n}: hot -> stopped (intervals)", stop))
            summary_rows.append((f"node{n}: may resume -> running (intervals)", cont))
        report(f"heat sampling on a 2-node Ray cluster, interval {args.interval:g} s (scripted sensor)", summary_rows)
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
