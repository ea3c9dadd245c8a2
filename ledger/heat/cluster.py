"""Heat sampling on every node of a Ray cluster. The only module under `ledger.heat` that imports Ray;
`heat/setup.py` imports this module only for a job that runs on a cluster, so a single-machine run
never imports Ray.

`ClusterSensor` is a `Sensor` for `HeatMonitor`: ledger's process connects to the cluster as a Ray
driver (namespace `ledger`), pins one `NodeSampler` actor to each alive node (node-affinity
scheduling, `num_cpus=0`, no GPUs: nothing is taken from the job), and on each tick asks every
node for a fresh reading (`sample.remote()`, all nodes at once). Nodes that join later get a
sampler at the next refresh. `pause()`/`resume()` are the monitor's callbacks: the job's
processes are found through Ray's state API (its driver, its alive actors and running tasks, by
job id), grouped by node, and each node's sampler stops them (SIGSTOP, with their children) or
resumes them (SIGCONT), all nodes at once.

Nothing here may stop a run: a cluster that cannot be reached is retried, a node whose sampler
cannot start stays unwatched, and `cluster_manifest()` says which and why.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from ledger.heat.cluster_target import ClusterTarget, Submitted
from ledger.heat.node_sampler import NodeSampler
from ledger.heat.rayjobs import ClusterPart, NodeWatch, RayJob, RayNode, job_dict, node_names, pick_job, resolve_gcs_address
from ledger.heat.sensor import GpuInfo, Sample, SensorSpec
from ledger.installhint import RAY_PACKAGE, install_hint

try:  # the `ray` extra: without it this module still imports, and `ClusterSensor` says how to add it
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    _NO_RAY: ImportError | None = None
except ImportError as exc:
    _NO_RAY = exc

REFRESH_S = 5.0  # how often the node list is read again (new nodes get a sampler)
RETRY_S = 5.0  # how often an unreachable cluster is tried again
SIGNAL_TIMEOUT_S = 10.0


class ClusterUnavailable(Exception):
    """The cluster cannot be watched at all (no Ray here, no address); `reason` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def require_ray() -> None:
    """Raise ClusterUnavailable when Ray is not installed here."""
    if _NO_RAY is not None:
        raise ClusterUnavailable(f"Ray is not installed where ledger runs ({_NO_RAY}); {install_hint('ray', RAY_PACKAGE)}") from _NO_RAY


def _state_api() -> Any:
    """Ray's state API (the job's driver, actors and tasks), imported on the first pause, not at
    start: it costs a few tenths of a second on top of Ray itself."""
    import ray.util.state

    return ray.util.state


class ClusterSensor:
    """A `Sensor` over every node of a Ray cluster, with the job's pause/resume (module docstring)."""

    name = "ray-cluster"

    def __init__(
        self,
        target: ClusterTarget,
        spec: SensorSpec,
        interval_s: float,
        started_at: float,
        local_pids: Callable[[], set[int]] = set,
        warn: Callable[[str], None] = lambda _t: None,
        env: dict[str, str] | None = None,
        submitted: Callable[[], Submitted | None] | None = None,
    ):
        require_ray()
        self.target = target
        # a target read from the launcher's text: not connected to until the job submitted
        # (`submitted` gives the address and id ledger's `ray` wrapper recorded), then the cluster
        # it submitted to, whatever the text named
        self._submitted = submitted
        self._spec = spec
        self._interval = interval_s
        self._started_at = started_at
        self._local_pids = local_pids
        self._warn = warn
        self._env = env
        self._lock = threading.RLock()
        self._connected = False
        self._gcs: str | None = None
        # what the record says until a connection succeeds: names the address however early the run ends
        self._unreachable: str | None = f"not connected yet to the Ray cluster at {target.address}"
        if submitted is not None:
            self._unreachable = f"the job submitted to no Ray cluster while it ran (its launcher names {target.address})"
        self._last_try = float("-inf")
        self._last_refresh = float("-inf")
        self._nodes: dict[str, NodeWatch] = {}
        self._paused_nodes: list[NodeWatch] = []
        self._job: RayJob | None = None
        self._held: dict[str, set[int]] = {}  # node id -> the job's pids stopped there in this pause
        self._closed = False
        self._connecting: threading.Thread | None = None

    # -- connection and nodes --------------------------------------------------------------
    def connect(self) -> bool:
        """True when connected; else start a connection attempt in the background (at most one
        every RETRY_S), so that an unreachable cluster never holds up sampling or the run's end."""
        with self._lock:
            if self._connected or self._closed or not self._attach():
                return self._connected
            now = time.monotonic()
            if (self._connecting is not None and self._connecting.is_alive()) or now - self._last_try < RETRY_S:
                return False
            self._last_try = now
            self._connecting = threading.Thread(target=self._try_connect, name="ledger-ray-connect", daemon=True)
            self._connecting.start()
            return False

    def _attach(self) -> bool:
        """Whether the cluster to connect to is known: always, unless the target waits for the
        job's submission; once that is recorded, the target is the cluster it went to."""
        if self._submitted is None:
            return True
        found = self._submitted()
        if found is None:
            return False
        self._submitted = None
        self.target = msgspec.structs.replace(self.target, address=found.address, source="submitted", submission_id=found.submission_id)
        self._unreachable = f"not connected yet to the Ray cluster at {found.address}"
        return True

    def wait_connected(self, timeout: float) -> bool:
        """Connect, waiting up to `timeout` seconds (tests, the benchmark)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.connect():
                return True
            time.sleep(0.1)
        return self._connected

    def _try_connect(self) -> None:
        try:
            gcs = resolve_gcs_address(self.target.address, self._env)
            # a node may lack ledger: ship the package with this driver's actors (job-level py_modules)
            ledger_dir = str(Path(__file__).resolve().parents[1])
            # named after the run in the user's job list (a driver's entry cannot be removed)
            run_id = (self._env or {}).get("LEDGER_RUN_ID") or "?"
            config = ray.job_config.JobConfig(metadata={"ledger": f"heat sensor of ledger run {run_id}"})

            # Ray warns "SIGTERM handler is not set because current thread is not the main thread":
            # ledger connects from a background thread on purpose and handles its own signals
            def quiet(record: logging.LogRecord) -> bool:
                return "SIGTERM handler is not set" not in str(record.msg)

            worker_log = logging.getLogger("ray._private.worker")
            worker_log.addFilter(quiet)
            try:
                ray.init(
                    address=gcs,
                    namespace="ledger",
                    log_to_driver=False,
                    configure_logging=False,
                    logging_level=logging.ERROR,
                    runtime_env={"py_modules": [ledger_dir]},
                    job_config=config,
                )
            finally:
                worker_log.removeFilter(quiet)
        except Exception as exc:  # noqa: BLE001 - any failure: say it, try again later
            text = f"cannot connect to the Ray cluster at {self.target.address}: {type(exc).__name__}: {exc}"
            text = text.splitlines()[0]
            if text != self._unreachable:
                self._warn(f"{text}; will keep trying")
            self._unreachable = text
            return
        with self._lock:
            self._gcs = gcs
            self._connected, self._unreachable = True, None
            if self._closed:  # the run ended while we connected
                ray.shutdown()
                self._connected = False

    def refresh_nodes(self) -> None:
        """Give every alive node without one a sampler; mark nodes that left."""
        self._last_refresh = time.monotonic()
        nodes: list[RayNode] = ray.nodes()  # type: ignore[no-untyped-call]
        alive = {n["NodeID"]: n for n in nodes if n.get("Alive")}
        for node_id, watch in self._nodes.items():
            if node_id not in alive and watch.left_at is None:
                watch.left_at, watch.unwatched = time.time(), "the node left the cluster"
        used = {w.label for w in self._nodes.values()}
        remote_cls = ray.remote(NodeSampler)
        for node_id, node in alive.items():
            if node_id in self._nodes:
                continue
            ip = str(node.get("NodeManagerAddress"))
            label = ip if ip not in used else f"{ip}#{node_id[:6]}"
            used.add(label)
            watch = NodeWatch(node_id, label, ip, str(node.get("NodeManagerHostname")), node_names(node, label))
            self._nodes[node_id] = watch
            try:
                watch.handle = remote_cls.options(  # type: ignore[attr-defined]
                    num_cpus=0,
                    num_gpus=0,
                    max_restarts=0,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                ).remote(label, watch.names, self._spec)
                watch.info_ref = watch.handle.info.remote()
            except Exception as exc:  # noqa: BLE001
                watch.unwatched = f"sampler could not start: {type(exc).__name__}: {exc}"

    def _collect_infos(self, timeout: float) -> None:
        pending = [w for w in self._nodes.values() if w.info_ref is not None]
        if not pending:
            return
        ready, _ = ray.wait([w.info_ref for w in pending], num_returns=len(pending), timeout=timeout)
        for watch in pending:
            if watch.info_ref not in ready:
                continue
            ref, watch.info_ref = watch.info_ref, None
            try:
                watch.info = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - e.g. the runtime env or actor failed
                watch.unwatched = f"sampler could not start: {type(exc).__name__}: {str(exc).splitlines()[0]}"
                self._warn(f"node {watch.label} is not watched: {watch.unwatched}")
                continue
            reason = watch.info.get("unavailable")
            watch.unwatched = None if reason is None else f"no GPU sensor: {reason}"
            watch.gpus = [GpuInfo(**g) for g in watch.info.get("gpus") or []]
            if reason is not None:
                self._warn(f"node {watch.label} is not watched: {watch.unwatched}")

    # -- the Sensor protocol ---------------------------------------------------------------
    def gpus(self) -> list[GpuInfo]:
        """Every GPU of every watched node (grows as nodes join)."""
        with self._lock:
            return [g for w in self._nodes.values() if w.left_at is None for g in w.gpus]

    def sample(self) -> list[Sample]:
        """A fresh reading from every watched node at once (a node that does not answer in time is skipped)."""
        with self._lock:
            if not self.connect():
                return []
            if time.monotonic() - self._last_refresh >= max(REFRESH_S, self._interval):
                self.refresh_nodes()
            self._collect_infos(timeout=0 if any(w.info for w in self._nodes.values()) else min(self._interval, 30))
            live = [w for w in self._nodes.values() if w.unwatched is None and w.left_at is None and w.handle]
        refs = [w.handle.sample.remote() for w in live]
        if not refs:
            return []
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=max(self._interval * 0.8, 0.2))
        samples: list[Sample] = []
        for ref in ready:
            try:
                reading = ray.get(ref)
            except Exception:  # noqa: BLE001 - a node that died: refresh_nodes will say so
                continue
            samples.extend(Sample(**s) for s in reading["samples"])
        return samples

    def close(self) -> None:
        """Resume anything still stopped, end the samplers, disconnect; safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._attach()  # the record names the cluster the job submitted to, however early it ended
            if not self._connected:
                self._warn(f"the Ray cluster's nodes were not watched: {self._unreachable}")
                return
            if self._paused_nodes:
                try:
                    self.resume()
                except Exception as exc:  # noqa: BLE001 - say it; disconnecting must still happen
                    self._warn(str(exc))
            for watch in self._nodes.values():
                if watch.handle is not None:
                    try:
                        ray.kill(watch.handle)
                    except Exception:  # noqa: BLE001 - the node may be gone
                        pass
            ray.shutdown()

    # -- the job, pause and resume ---------------------------------------------------------
    def find_job(self) -> RayJob:
        """The Ray job of this run (see `pick_job`), as {job_id, submission_id, driver_pid, driver_node}."""
        own = ray.get_runtime_context().get_job_id()
        jobs = [
            job_dict(j)
            for j in _state_api().list_jobs(address=self._gcs, limit=1000, detail=True, raise_on_missing_output=False)
            if j.job_id != own
        ]
        job = pick_job(jobs, self.target, self._started_at, self._local_pids())
        if job is None:
            alive = [j.get("submission_id") or j.get("job_id") for j in jobs if j["status"] in ("PENDING", "RUNNING")]
            raise RuntimeError(
                f"cannot tell which Ray job is this run's among the running ones {alive} (give `ray job submit --submission-id ID`)"
            )
        return job

    def job_processes(self, job: RayJob) -> dict[str, list[int]]:
        """node id -> pids of the job there: its driver, alive actors and running tasks."""
        state = _state_api()
        by_node: dict[str, list[int]] = {}
        driver_pid = job.get("driver_pid")
        if driver_pid:
            node = job.get("driver_node") or self._node_by_ip(job.get("driver_ip"))
            if node:
                by_node.setdefault(node, []).append(int(driver_pid))
        if job.get("job_id"):
            jid = job["job_id"]
            for actor in state.list_actors(
                address=self._gcs, filters=[("job_id", "=", jid), ("state", "=", "ALIVE")], limit=10000, raise_on_missing_output=False
            ):
                if actor.pid and actor.node_id:
                    by_node.setdefault(actor.node_id, []).append(int(actor.pid))
            for task in state.list_tasks(
                address=self._gcs, filters=[("job_id", "=", jid), ("state", "=", "RUNNING")], limit=10000, raise_on_missing_output=False
            ):
                pid = getattr(task, "worker_pid", None)
                if pid and task.node_id:
                    by_node.setdefault(task.node_id, []).append(int(pid))
        return by_node

    def _node_by_ip(self, ip: str | None) -> str | None:
        return next((w.node_id for w in self._nodes.values() if w.ip == ip and w.handle and w.left_at is None), None)

    def pause(self) -> None:
        """Stop the job's processes on every node (the monitor's pause callback)."""
        with self._lock:
            job = self.find_job()
            self._job = job
            by_node = self.job_processes(job)
            targets, missing = self._with_sampler(by_node)
            refs = [w.handle.signal.remote(pids, "stop") for w, pids in targets]
            # every node asked to stop counts as paused before the answers come: when one node
            # fails or is late, the others may already have stopped their part of the job, and
            # a pause that raises is never resumed by the monitor
            self._paused_nodes = [w for w, _ in targets]
            self._held = {w.node_id: set(pids) for w, pids in targets}
            try:
                ray.get(refs, timeout=SIGNAL_TIMEOUT_S)
            except Exception:
                self._resume_quietly()
                raise
            if missing:
                self._warn(f"job processes on {len(missing)} node(s) without a sampler were not stopped")

    def hold(self) -> None:
        """While paused (the monitor's hold callback, each tick): stop the job's processes that
        came up since the pause, e.g. an actor the driver asked for before it was stopped whose
        worker started after, so that no part of the job runs on while the GPUs cool."""
        with self._lock:
            if self._job is None or not self._paused_nodes:
                return
            by_node = self.job_processes(self._job)
            new = {n: [p for p in pids if p not in self._held.get(n, set())] for n, pids in by_node.items()}
            targets, _ = self._with_sampler({n: pids for n, pids in new.items() if pids})
            if not targets:
                return
            refs = [w.handle.signal.remote(pids, "stop") for w, pids in targets]
            self._paused_nodes += [w for w, _ in targets if all(w is not p for p in self._paused_nodes)]
            ray.get(refs, timeout=SIGNAL_TIMEOUT_S)  # a failure: asked again next tick
            for w, pids in targets:
                self._held.setdefault(w.node_id, set()).update(pids)

    def _with_sampler(self, by_node: dict[str, list[int]]) -> tuple[list[tuple[NodeWatch, list[int]]], list[str]]:
        """The nodes of `by_node` whose sampler can be asked, each with its pids; the ids of the others."""
        missing = [n for n in by_node if n not in self._nodes or self._nodes[n].handle is None]
        return [(self._nodes[n], pids) for n, pids in by_node.items() if n not in missing], missing

    def resume(self) -> None:
        """Continue every process stopped on every node (the monitor's resume callback)."""
        with self._lock:
            asked = [(w, w.handle.signal.remote([], "resume")) for w in self._paused_nodes]
            ready, _ = ray.wait([ref for _, ref in asked], num_returns=len(asked), timeout=SIGNAL_TIMEOUT_S)
            failed: list[tuple[NodeWatch, str]] = []
            for watch, ref in asked:
                try:
                    if ref not in ready:
                        raise TimeoutError(f"no answer in {SIGNAL_TIMEOUT_S:g} s")
                    ray.get(ref)  # raises what the node's sampler raised
                except Exception as exc:  # noqa: BLE001 - said below; close() tries that node again
                    failed.append((watch, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"))
            # a node that did not confirm stays listed, so that close() asks it again
            self._paused_nodes = [w for w, _ in failed]
            self._held = {}
            if failed:
                raise RuntimeError("job processes may still be stopped on node(s) " + ", ".join(f"{w.label} ({why})" for w, why in failed))

    def _resume_quietly(self) -> None:
        """Resume after a failed pause; a failure here is already part of the pause's error."""
        try:
            self.resume()
        except Exception:  # noqa: BLE001
            pass

    def cluster_manifest(self) -> ClusterPart:
        """The cluster's part of the manifest's `gpu` section."""
        with self._lock:
            self._attach()
            nodes = [w.to_dict() for w in self._nodes.values()]
            unwatched = {w.label: w.unwatched for w in self._nodes.values() if w.unwatched}
            return {
                "cluster": {
                    **self.target.to_dict(),
                    "gcs_address": self._gcs,
                    "connected": self._connected,
                    "unavailable": self._unreachable,
                    "job": self._job,
                },
                "nodes": nodes,
                "unwatched": unwatched,
                # every GPU seen during the run, also on nodes that left (gpus() drops those)
                "gpus": [g for node in nodes for g in node["gpus"]],
            }
