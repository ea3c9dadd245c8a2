"""Where and how a replay of a `ray job submit` run is launched: submitted to Ray again.

A run whose training command went through `ray job submit` had its runtime env (`env_vars`,
`working_dir`, `py_modules`, ...) on the driver AND on every actor it started; variables on the
driver's command line reach the driver only (miles-facts.md). So such a replay is submitted to
Ray too, with the recorded runtime env and the replay's argv as the entrypoint, to:

1. `--address URL` when given;
2. else the recorded address (the Job API the run was submitted to) when it answers;
3. else a head ledger starts for the replay on 127.0.0.1 (`ray start --head --block`, free
   ports, its own temp folder; `ray` must be installed) and stops after it by its PID (SIGTERM;
   `--block` makes Ray's reaper end the head's processes with it), then its process group.

The submission goes through ledger's `ray` wrapper like any run's, so the replay's settings are
read from what was really submitted, and Ctrl-C stops the replayed job through the Job API.
Nothing here reads a value from the source record but the runtime env and the address.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

import msgspec
import psutil

from ledger.argv import option_value
from ledger.errors import LedgerError
from ledger.installhint import RAY_PACKAGE, install_hint
from ledger.runrecord import RunRecord
from ledger.termstyle import printable

HEAD_START_S = 90.0
HEAD_STOP_S = 30.0


# Ray's runtime_env: a JSON object handed to Ray as it is (Ray owns its keys; ledger reads and
# rebases `working_dir`, `py_modules`, `excludes` and sets `env_vars`)
RuntimeEnv = dict[str, Any]


class RayRecord(TypedDict, total=False):
    """`replay.ray`: where a replay ran, and the code it ran."""

    address: str
    how: str
    local_head: bool
    working_dir: str  # its runtime env's, when it has one
    code_from: str


class RayTarget(msgspec.Struct):
    """Where a replay is submitted: the Job API URL, why there, and the head ledger started."""

    address: str
    how: str  # "--address", "recorded address", "local head started by ledger"
    runtime_env: RuntimeEnv = msgspec.field(default_factory=dict)
    head: LocalHead | None = None
    code_from: str | None = None  # where the job's code comes from (`runtime_env`'s second value)

    def to_record(self) -> RayRecord:
        """`replay.ray`: where the replay ran, and the code it ran (its runtime env's working_dir)."""
        out = RayRecord(address=self.address, how=self.how, local_head=self.head is not None)
        if isinstance(self.runtime_env.get("working_dir"), str):
            out["working_dir"] = self.runtime_env["working_dir"]
        if self.code_from is not None:
            out["code_from"] = self.code_from
        return out


def was_submitted(record: RunRecord) -> bool:
    """Whether the run's training command was submitted with `ray job submit`."""
    return bool(record.command.ray_argv)


def recorded_address(record: RunRecord) -> str | None:
    """The Job API the run was submitted to (its followed job's, or the `--address` it gave)."""
    ray_job = record.status.ray_job or {}
    if isinstance(ray_job.get("address"), str):
        return str(ray_job["address"])
    argv = [str(a) for a in record.command.ray_argv or []]
    address = option_value(argv, "--address")
    if address and not address.startswith(("http://", "https://")) and ":" not in address:
        return None
    return address


def reachable(url: str, timeout_s: float = 3.0) -> bool:
    """Whether a Ray Job API answers at `url` (GET /api/version)."""
    if not url.startswith(("http://", "https://")):
        return False
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/api/version", timeout=timeout_s) as reply:  # noqa: S310
            return bool(reply.status == 200)
    except (OSError, ValueError):
        return False


CODE_FROM_CHECKOUT = "this checkout (the replay's runtime env working_dir, uploaded by Ray)"
CODE_FROM_RECORDED = "the recorded runtime env's working_dir"


def runtime_env(
    record: RunRecord, env_vars: Mapping[str, str], rebase: Callable[[str], str], checkout: Path, excludes: Sequence[str] = ()
) -> tuple[RuntimeEnv, str]:
    """The recorded runtime env with `env_vars` (the replay's, already filtered by the caller) and
    its paths (`working_dir`, `py_modules`) pointed into this checkout; and where the job's code
    comes from.

    A job without a working_dir runs in the cluster's own working directory: on a cluster started
    from another clone (a Miles launcher's `ray start --head`), that clone's `train.py` would run
    while the record describes this one. So a run recorded without one (neither in
    its runtime env nor as `--working-dir`) is replayed with `checkout`, the recorded working
    directory in this checkout, as its working_dir, `excludes` (what Ray must not upload of it:
    pulled data, git's objects; `.gitignore`d files it leaves out itself) added."""
    out = _recorded_runtime_env(record)
    code_from = _with_working_dir(out, rebase, checkout, excludes)
    if isinstance(out.get("py_modules"), list):
        out["py_modules"] = [rebase(p) if isinstance(p, str) else p for p in out["py_modules"]]
    if env_vars:
        out["env_vars"] = dict(env_vars)
    return out, code_from


def _recorded_runtime_env(record: RunRecord) -> RuntimeEnv:
    """The recorded runtime env less its variables, with the `--working-dir` the submission gave."""
    out: RuntimeEnv = {k: v for k, v in (record.command.runtime_env or {}).items() if k != "env_vars"}
    given = option_value([str(a) for a in record.command.ray_argv or []], "--working-dir")
    if given is not None and "working_dir" not in out:
        out["working_dir"] = given
    return out


def _with_working_dir(out: RuntimeEnv, rebase: Callable[[str], str], checkout: Path, excludes: Sequence[str]) -> str:
    """`out`'s `working_dir` pointed into this checkout, or `checkout` (with `excludes`) when the
    run had none; returns where the job's code comes from."""
    if isinstance(out.get("working_dir"), str):
        rebased = rebase(out["working_dir"])
        moved = rebased != out["working_dir"]
        out["working_dir"] = rebased
        return CODE_FROM_RECORDED + (", pointed into this checkout" if moved else "")
    if "working_dir" in out:
        return CODE_FROM_RECORDED
    out["working_dir"] = str(checkout)
    if excludes:
        out["excludes"] = [*(out.get("excludes") or []), *excludes]
    return CODE_FROM_CHECKOUT


def submit_argv(target: RayTarget, argv: list[str]) -> list[str]:
    """`ray job submit` of the replay's argv (waiting: the wrapper names it, ledger settles it)."""
    words = ["ray", "job", "submit", "--address", target.address]
    if target.runtime_env:
        words += ["--runtime-env-json", json.dumps(target.runtime_env, sort_keys=True)]
    return [*words, "--", *argv]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:`port`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2.0):
            return True
    except OSError:
        return False


class LocalHead:
    """A Ray head on 127.0.0.1 that ledger started for one replay and stops after it by PID."""

    def __init__(self, cwd: Path, say: Callable[[str], None]):
        ray = shutil.which("ray")
        if ray is None:
            raise LedgerError(
                "the run was submitted to Ray and no Ray cluster answers, but `ray` is not installed here",
                f"{install_hint('ray', RAY_PACKAGE)}, or give --address URL of a running cluster",
            )
        # once more on other ports when the first head ends at once: a free port ledger picked may
        # have been taken by another program before Ray bound it
        for attempt in (1, 2):
            failed = self._start(ray, cwd, say)
            if failed is None:
                return
            said, ended = failed
            if attempt == 1 and ended is not None:
                say(f"ledger: the local Ray head did not start ({said}); trying once more on other ports")
                continue
            how = f"exit {ended}" if ended is not None else f"no Job API after {HEAD_START_S:g} s"
            raise LedgerError(
                f"the local Ray head for the replay did not start (`ray start --head`, {how}: {said})",
                "give --address URL of a running cluster",
            )

    def _start(self, ray: str, cwd: Path, say: Callable[[str], None]) -> tuple[str, int | None] | None:
        """Start `ray start --head --block` and wait for its Job API and its job agent; None once
        both answer, else the last line it wrote and its exit code (None: still starting at the
        deadline), once it is stopped and its folder removed. The Job API answers before the
        agent that runs submissions is up (a submission then fails with "No available agent to
        submit job"): on a busy machine that gap lasts seconds, so the agent's own port is waited for."""
        self.temp = tempfile.mkdtemp(prefix="lrh", dir="/tmp")  # short: Ray's socket paths have a length limit
        self.dashboard_port = _free_port()
        self.url = f"http://127.0.0.1:{self.dashboard_port}"
        agent_port = _free_port()
        env = dict(os.environ)
        env["RAY_TMPDIR"] = self.temp  # its address file stays in its own folder, not /tmp/ray
        os.makedirs(os.path.join(self.temp, "ray"), exist_ok=True)
        env.pop("RAY_ADDRESS", None)
        argv = [
            ray,
            "start",
            "--head",
            "--block",
            "--disable-usage-stats",
            "--node-ip-address",
            "127.0.0.1",
            "--port",
            str(_free_port()),
            "--include-dashboard",
            "true",
            "--dashboard-host",
            "127.0.0.1",
            "--dashboard-port",
            str(self.dashboard_port),
            "--dashboard-agent-listen-port",
            str(agent_port),
            "--dashboard-agent-grpc-port",
            str(_free_port()),
            "--runtime-env-agent-port",
            str(_free_port()),
            "--metrics-export-port",
            str(_free_port()),
            "--temp-dir",
            self.temp,
        ]
        say(f"ledger: no Ray cluster to replay on; starting a local head for the replay at {self.url}")
        self.log = open(os.path.join(self.temp, "head.log"), "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + HEAD_START_S
        while not (reachable(self.url, 2.0) and _listening(agent_port)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                failed = self._last_line(), self.proc.returncode  # read before stop() removes the log
                self.stop()
                return failed
            time.sleep(0.5)
        return None

    def _last_line(self) -> str:
        """The last line `ray start` wrote (its reason, when it failed), printable and short."""
        try:
            with open(self.log.name, "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
                lines = [x.strip() for x in f.read().decode("utf-8", "replace").splitlines() if x.strip()]
        except OSError:
            lines = []
        return printable(lines[-1][:300]) if lines else "it printed nothing"

    def stop(self) -> None:
        """SIGTERM to the head's own PID, then its process group; its folder removed."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=HEAD_STOP_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # a process of the head left in its group: asked to end, then waited for (a Ray worker
        # may still hold the ports or a GPU), then killed
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            deadline = time.monotonic() + HEAD_STOP_S
            while (running := _group_runs(self.proc.pid)) and time.monotonic() < deadline:
                time.sleep(0.2)
            if not running:
                break
        self.log.close()
        shutil.rmtree(self.temp, ignore_errors=True)


def _group_runs(pgid: int) -> bool:
    """Whether a process of group `pgid` still runs (a zombie, dead but not yet reaped, does not)."""
    for proc in psutil.process_iter(["status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) == pgid:
                return True
        except (psutil.Error, OSError):
            continue
    return False


def choose_target(record: RunRecord, address: str | None, cwd: Path, say: Callable[[str], None], dry_run: bool = False) -> RayTarget:
    """Where the replay goes (module docstring); a dry run starts nothing."""
    if address:
        if not dry_run and not reachable(address):
            raise LedgerError(
                f"no Ray Job API answers at --address {address}", "give the dashboard URL of a running cluster (http://HOST:8265)"
            )
        return RayTarget(address, "--address")
    recorded = recorded_address(record)
    if recorded and reachable(recorded):
        return RayTarget(recorded, "recorded address")
    if dry_run:
        return RayTarget("<a local head ledger starts on 127.0.0.1>", "local head started by ledger")
    head = LocalHead(cwd, say)
    return RayTarget(head.url, "local head started by ledger", head=head)
