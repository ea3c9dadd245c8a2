"""What `ClusterSensor` (heat/cluster.py) reads from Ray's answers: where the cluster's GCS is,
what it keeps of each node (`NodeWatch`) and the names a node answers to, and which of the
cluster's jobs is this run's. Nothing here imports Ray.
"""

from __future__ import annotations

import os
import re
from typing import Any, TypedDict

import msgspec
import psutil

from ledger.heat.cluster_target import ClusterTarget
from ledger.heat.node_sampler import SamplerInfo
from ledger.heat.sensor import GpuInfo


class RayNode(TypedDict, total=False):
    """A node as `ray.nodes()` answers it: the keys read here (Ray's answer has more)."""

    NodeID: str
    Alive: bool
    NodeManagerAddress: str
    NodeManagerHostname: str
    Resources: dict[str, float]
    Labels: dict[str, str]


class RayJob(TypedDict):
    """A job of Ray's state API as `job_dict` keeps it: what `pick_job` reads, the record's `gpu.cluster.job`."""

    job_id: str | None
    submission_id: str | None
    type: str  # DRIVER or SUBMISSION
    status: str  # PENDING, RUNNING, ...
    entrypoint: str | None
    start_time: int | None  # unix milliseconds
    driver_pid: int | None
    driver_ip: str | None
    driver_node: str | None


class _NodeKeys(TypedDict):
    """One node in the manifest's `gpu.nodes` (`NodeWatch.to_dict`)."""

    node: str
    node_id: str
    ip: str
    hostname: str
    sensor: str | None
    watched: bool
    unwatched: str | None
    left: bool
    gpus: list[dict[str, object]]


class NodeFacts(_NodeKeys, total=False):
    """A node of `gpu.nodes`: its keys, and the peak temperature per GPU index the monitor adds at the end."""

    peak_temp_c: dict[int, float]


class ClusterPart(TypedDict):
    """A cluster's part of the manifest's `gpu` section (`ClusterSensor.cluster_manifest`)."""

    cluster: dict[str, object]  # the target, the GCS address, whether connected, the job
    nodes: list[NodeFacts]
    unwatched: dict[str, str]  # node label -> why it is not watched
    gpus: list[dict[str, object]]  # every GPU seen during the run, also on nodes that left


class NodeWatch(msgspec.Struct):
    """One node of the cluster as ledger sees it."""

    node_id: str
    label: str
    ip: str
    hostname: str
    names: list[str]
    handle: Any = None
    info_ref: Any = None
    info: SamplerInfo | None = None
    unwatched: str | None = "sampler starting"
    left_at: float | None = None
    gpus: list[GpuInfo] = msgspec.field(default_factory=list)

    def to_dict(self) -> NodeFacts:
        """For the manifest's `gpu.nodes` (a node that left keeps the GPUs it had)."""
        return {
            "node": self.label,
            "node_id": self.node_id,
            "ip": self.ip,
            "hostname": self.hostname,
            "sensor": None if self.info is None else self.info.get("sensor"),
            "watched": self.unwatched is None,
            "unwatched": self.unwatched,
            "left": self.left_at is not None,
            "gpus": [g.to_dict() for g in self.gpus],
        }


# resources every node has; any other resource name (e.g. `node2`) is a name the node answers to
_PLAIN_RESOURCES = re.compile(r"^(CPU|GPU|memory|object_store_memory|node:.*|accelerator_type:.*)$")


def node_names(node: RayNode, label: str) -> list[str]:
    """The names a node answers to in a heat timeline: label, IP, hostname, node id, custom resources, labels."""
    names = {label, str(node.get("NodeManagerAddress")), str(node.get("NodeManagerHostname")), str(node.get("NodeID"))}
    names.update(r for r in (node.get("Resources") or {}) if not _PLAIN_RESOURCES.match(r))
    names.update(str(v) for v in (node.get("Labels") or {}).values())
    return sorted(n for n in names if n and n != "None")


def _local_dashboards() -> dict[int, str]:
    """dashboard port -> GCS address, for every Ray dashboard process on this machine."""
    found: dict[int, str] = {}
    for proc in psutil.process_iter(["cmdline"]):
        args = proc.info.get("cmdline") or []  # None: another user's process, or gone meanwhile
        if not any(a.endswith("dashboard/dashboard.py") for a in args):
            continue
        opts = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
        if "port" in opts and "gcs-address" in opts and opts["port"].isdigit():
            found[int(opts["port"])] = opts["gcs-address"]
    return found


def resolve_gcs_address(address: str, env: dict[str, str] | None = None) -> str:
    """The address to `ray.init` for a `ray job submit --address` (a dashboard URL) or RAY_ADDRESS.

    `LEDGER_RAY_GCS_ADDRESS` wins; `ray://` and `auto` are kept; a dashboard on this machine is
    matched by its port to its GCS address (the Miles case: ledger runs on the head node); any
    other `host:port` without a scheme is taken as the GCS address itself.
    """
    env = env if env is not None else dict(os.environ)
    if env.get("LEDGER_RAY_GCS_ADDRESS"):
        return env["LEDGER_RAY_GCS_ADDRESS"]
    if address.startswith("ray://") or address == "auto":
        return address
    bare = re.sub(r"^https?://", "", address).rstrip("/")
    port_text = bare.rsplit(":", 1)[-1] if ":" in bare else ""
    if port_text.isdigit() and int(port_text) in (local := _local_dashboards()):
        return local[int(port_text)]
    if bare != address:
        raise ConnectionError(
            f"no Ray dashboard on port {port_text or '?'} of this machine to learn the cluster's GCS address "
            f"from {address}; set LEDGER_RAY_GCS_ADDRESS=HEAD_IP:6379"
        )
    return bare


def job_dict(job: Any) -> RayJob:
    """A job of Ray's state API (`list_jobs`) as the plain fields `pick_job` reads."""
    status = getattr(job.status, "value", job.status)
    kind = getattr(job.type, "value", job.type)
    driver = job.driver_info
    return {
        "job_id": job.job_id,
        "submission_id": job.submission_id,
        "type": str(kind),
        "status": str(status),
        "entrypoint": job.entrypoint,
        "start_time": job.start_time,
        "driver_pid": getattr(driver, "pid", None),
        "driver_ip": getattr(driver, "node_ip_address", None),
        "driver_node": getattr(job, "driver_node_id", None),
    }


def pick_job(jobs: list[RayJob], target: ClusterTarget, started_at: float, local_pids: set[int]) -> RayJob | None:
    """This run's job among the cluster's: by submission id, else a driver in our process tree,
    else a submitted job with our entrypoint, else the only job submitted since the run started."""
    alive = [j for j in jobs if j["status"] in ("PENDING", "RUNNING")]
    if target.submission_id:
        return next((j for j in alive if j["submission_id"] == target.submission_id), None)
    ours = [j for j in alive if j["type"] == "DRIVER" and j["driver_pid"] and int(j["driver_pid"]) in local_pids]
    if len(ours) == 1:
        return ours[0]
    recent = [j for j in alive if j["type"] == "SUBMISSION" and (j["start_time"] or 0) / 1000 >= started_at - 30]
    if target.entrypoint:
        want = " ".join(target.entrypoint.split())
        same = [j for j in recent if " ".join((j["entrypoint"] or "").split()) == want]
        if len(same) == 1:
            return same[0]
    return recent[0] if len(recent) == 1 else None
