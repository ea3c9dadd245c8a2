"""Is this run a Ray cluster job, and where is the cluster? Pure parsing, no Ray import.

A run is watched on a cluster when its command submits to Ray (`ray job submit ...`, directly
or in the launcher script it runs) or when `RAY_ADDRESS` is set in its environment. The address
is `ray job submit`'s `--address` (the dashboard, e.g. `http://127.0.0.1:8265`), else
`RAY_ADDRESS`, else Ray's default dashboard address. `ledger.heat.cluster` turns it into the
cluster's GCS address to connect to.

Also here: the job's collective (NCCL / torch.distributed) timeout when the command or the
environment shows it, because a heat pause longer than that timeout makes the job abort.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from typing import Any

import msgspec
from msgspec.structs import replace

from ledger.argv import option_value
from ledger.config import DEFAULT_RAY_DASHBOARD

DEFAULT_DASHBOARD = DEFAULT_RAY_DASHBOARD
# environment variables that bound how long a collective may wait, in seconds
TIMEOUT_ENV = ("NCCL_TIMEOUT", "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "TORCH_DIST_TIMEOUT")
_SUBMIT = re.compile(r"\bray\s+job\s+submit\b")
_ADDRESS = re.compile(r"--address(?:=|\s+)[\"']?([^\s\"']+)")


class ClusterTarget(msgspec.Struct, frozen=True):
    """The cluster a run's job goes to, as far as the command shows it."""

    address: str  # as given (dashboard URL, GCS host:port or ray://)
    source: str  # where it came from: "argv", "launcher", "RAY_ADDRESS" or "default"
    submission_id: str | None = None
    entrypoint: str | None = None  # the command after `ray job submit ... --`
    env_vars: dict[str, str] = msgspec.field(default_factory=dict)  # from --runtime-env-json

    def to_dict(self) -> dict[str, Any]:
        """For the manifest."""
        return {"address": self.address, "source": self.source, "submission_id": self.submission_id}


class Submitted(msgspec.Struct, frozen=True):
    """A `ray job submit` the job made, as ledger's `ray` wrapper recorded it."""

    address: str
    submission_id: str | None = None


def submits_from_launcher(argv: list[str], launcher_text: str | None) -> bool:
    """Whether the cluster is known only from the launcher's text (`detect_cluster`): then the
    heat sensor waits for the job's own submission, never the address the text names."""
    return _submit_index(argv) is None and launcher_text is not None and _SUBMIT.search(launcher_text) is not None


def _submit_index(argv: list[str]) -> int | None:
    for i in range(len(argv) - 2):
        if argv[i].rsplit("/", 1)[-1] == "ray" and argv[i + 1] == "job" and argv[i + 2] == "submit":
            return i
    return None


def detect_cluster(argv: list[str], env: Mapping[str, str], launcher_text: str | None = None) -> ClusterTarget | None:
    """The cluster this command runs on, or None for a single machine."""
    start = _submit_index(argv)
    if start is not None:
        return _submitted_target(argv[start + 3 :], env)
    if launcher_text is not None and (submit := _SUBMIT.search(launcher_text)) is not None:
        found = _ADDRESS.search(launcher_text[submit.start() :])
        address = found.group(1) if found and "$" not in found.group(1) else None
        if address is not None:
            return ClusterTarget(address, "launcher")
        return _env_target(env) or ClusterTarget(DEFAULT_DASHBOARD, "default")
    return _env_target(env)


def _env_target(env: Mapping[str, str]) -> ClusterTarget | None:
    """The cluster RAY_ADDRESS names (None: it is unset or empty)."""
    return ClusterTarget(env["RAY_ADDRESS"], "RAY_ADDRESS") if env.get("RAY_ADDRESS") else None


def _submitted_target(rest: list[str], env: Mapping[str, str]) -> ClusterTarget:
    """The cluster of `ray job submit`, from its options (`rest`: what follows `submit`): its
    --address, else RAY_ADDRESS, else Ray's default; the entrypoint after `--`, the submission id
    and the runtime environment's variables."""
    split = rest.index("--") if "--" in rest else len(rest)
    options, entry = rest[:split], rest[split + 1 :]
    address = option_value(options, "--address")
    where = ClusterTarget(address, "argv") if address is not None else _env_target(env) or ClusterTarget(DEFAULT_DASHBOARD, "default")
    entrypoint = shlex.join(entry) if entry else None
    submission_id = option_value(options, "--submission-id")
    return replace(where, submission_id=submission_id, entrypoint=entrypoint, env_vars=_runtime_env_vars(options))


def _runtime_env_vars(options: list[str]) -> dict[str, str]:
    """The variables of `--runtime-env-json`'s `env_vars` (none where it is absent or not JSON)."""
    runtime = option_value(options, "--runtime-env-json")
    if not runtime:
        return {}
    try:
        return {str(k): str(v) for k, v in (json.loads(runtime).get("env_vars") or {}).items()}
    except (ValueError, AttributeError):
        return {}


class CollectiveTimeout(msgspec.Struct, frozen=True):
    """A collective timeout the job declares: seconds, and where it was seen."""

    seconds: float
    source: str

    def to_dict(self) -> dict[str, Any]:
        """For the manifest's `gpu.distributed_timeout`."""
        return {"seconds": self.seconds, "source": self.source}


def collective_timeout(argv: list[str], env: Mapping[str, str]) -> CollectiveTimeout | None:
    """The shortest collective timeout visible in the training argv or environment, if any.

    Megatron's `--distributed-timeout-minutes N` (torch.distributed's process-group timeout) and
    the variables in TIMEOUT_ENV, in seconds.
    """
    found: list[CollectiveTimeout] = []
    minutes = option_value(argv, "--distributed-timeout-minutes")
    if minutes is not None:
        try:
            found.append(CollectiveTimeout(float(minutes) * 60, f"--distributed-timeout-minutes {minutes}"))
        except ValueError:
            pass
    for name in TIMEOUT_ENV:
        value = env.get(name)
        if value:
            try:
                found.append(CollectiveTimeout(float(value), f"{name}={value}"))
            except ValueError:
                pass
    return min(found, key=lambda t: t.seconds) if found else None
