"""Real local Ray clusters for the tests, and what those tests read back from a Ray run.

Two modules start clusters: tests/test_ray_jobs.py (a one-node cluster for the Job API) and
tests/test_ray_heat_replay.py (a one-node cluster for replays, then a two-node one for the heat
guard, then a local head ledger starts). Each cluster is a class's fixture, so a module runs one
cluster at a time and `make test` (a module on one worker) at most two side by side, on two
workers: each in its own temp folder, on free ports, on 127.0.0.1 only. They never start at the
same moment (`starting_alone`): Ray gives a starting raylet 30 s to register with its GCS
(`raylet_start_wait_time_s` in ray/_private/node.py, not configurable), and two clusters starting
at once on a loaded 2-core machine went past it.

Every cluster is torn down by its fixture (`Cluster.shutdown` ends exactly the processes it
started; `ray stop` would end every Ray on the machine).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ledger, make_repo

SHAPES = Path(__file__).resolve().parent / "ray_shapes"
DRIVER = SHAPES / "train.py"  # a Ray driver whose actors are named as Miles names them
MILES_JOB = SHAPES / "miles_job.py"  # a Miles-shaped job: rollout files, training on them
LAUNCHER = SHAPES / "run-miles-job.sh"  # a Miles-shaped bash launcher: `ray job submit` WITHOUT --no-wait


def proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, ...); None when gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def agent_ports() -> dict[str, int]:
    """A node's agents on ports of their own: every node's agents default to 52365 and others, and
    whichever bound second lost its HTTP service ("No available agent to submit job" for 90 s when
    that was the head's, seen on a loaded machine)."""
    names = ("dashboard_agent_listen_port", "runtime_env_agent_port", "metrics_export_port", "metrics_agent_port")
    return {name: free_port() for name in names}


@contextlib.contextmanager
def starting_alone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """While no other worker of this test session starts a Ray node: a lock file in the folder the
    session's workers share (the session's own temp folder without xdist), held while a node starts.
    Waiting for it is waiting for the other start to end (bounded by Ray's own and the fixtures'
    deadlines), never a time."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    with open(shared / "ray-node-start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def miles_repo(path: Path) -> Path:
    """A repository with the Miles-shaped job as train.py and its launcher as run.sh, after `ledger init`."""
    repo = make_repo(path, {"train.py": MILES_JOB.read_text(), "run.sh": LAUNCHER.read_text()})
    ledger(repo, "init")
    return repo


@contextlib.contextmanager
def head_folder() -> Iterator[Path]:
    """Where a one-node cluster is started: a job without a working_dir runs there (a Miles
    launcher starts its head in the Miles checkout, so its `python3 train.py` is that one)."""
    temp = Path(tempfile.mkdtemp(prefix="lr", dir="/tmp"))  # short: Ray's socket paths have a length limit
    try:
        (temp / "cwd").mkdir()
        yield temp / "cwd"
    finally:
        shutil.rmtree(temp, ignore_errors=True)


@contextlib.contextmanager
def one_node_cluster(head_cwd: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A one-node cluster (1 CPU, the dashboard the Job API needs) started in `head_cwd`, its temp
    folder the one above it: (GCS address, dashboard URL), once the Job API answers."""
    from ray.cluster_utils import Cluster

    temp = str(head_cwd.parent)
    # Ray rewrites a 127.0.0.1 address to the machine's outward IP unless told it is a one-machine
    # cluster; drivers and the job supervisor inherit this from the cluster and from the tests
    saved = dict(os.environ)
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    # Ray notes the cluster's address in <RAY_TMPDIR>/ray/ray_current_cluster (default /tmp/ray,
    # shared with every other Ray on the machine): kept in this cluster's own folder
    os.environ["RAY_TMPDIR"] = temp
    os.makedirs(os.path.join(temp, "ray"), exist_ok=True)
    # a job's entrypoint runs with the cluster's PATH: this venv's python3 (it has ray) first
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    dash = free_port()
    url = f"http://127.0.0.1:{dash}"
    here = os.getcwd()
    c = None
    try:
        with starting_alone(tmp_path_factory):
            os.chdir(head_cwd)  # the head's processes (and every job without a working_dir) run there
            try:
                c = Cluster(
                    initialize_head=True,
                    head_node_args={
                        "num_cpus": 1,
                        "include_dashboard": True,
                        "dashboard_host": "127.0.0.1",
                        "dashboard_port": dash,
                        "node_ip_address": "127.0.0.1",
                        "gcs_server_port": free_port(),
                        "temp_dir": temp,
                        **agent_ports(),
                    },
                )
            finally:
                os.chdir(here)
            from ray.job_submission import JobSubmissionClient

            deadline = time.monotonic() + 60
            while True:  # the job API answers a little after the head is up
                try:
                    JobSubmissionClient(url).list_jobs()
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        yield c.address, url
    finally:
        if c is not None:
            c.shutdown()
        os.environ.clear()
        os.environ.update(saved)


def failed(repo: Path, r: subprocess.CompletedProcess[str]) -> str:
    """What a failed run said, and the end of the job's own log (Ray's error is there, not in ours)."""
    tail = ledger(repo, "tail", "latest", "-n", "60")
    return f"{r.stderr}\n--- the job's log (ledger tail latest) ---\n{tail.stdout}{tail.stderr}"


def show(repo: Path) -> dict:
    return json.loads(ledger(repo, "show", "latest", "--json").stdout)


def job_info(url: str, submission_id: str) -> object:
    from ray.job_submission import JobSubmissionClient

    return JobSubmissionClient(url).get_job_info(submission_id)


def trainer_log(repo: Path, m: dict) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "show", f"experiments:runs/{m['id'][-4:-2]}/{m['id']}/trainer.log"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def actor_env(log: str) -> dict:
    [line] = [x for x in log.splitlines() if "ACTOR_ENV " in x]
    return json.loads(line.split("ACTOR_ENV ", 1)[1])


def check_run_env(seen: dict, run_id: str) -> None:
    """The job's actor saw the run's LEDGER_RUN_ID and LEDGER_DATA_DIR (docs/recording.md): a Ray
    job gets the cluster's environment plus its runtime env, never the submitter's."""
    assert seen["LEDGER_RUN_ID"] == run_id, seen
    assert (seen["LEDGER_DATA_DIR"] or "").endswith(f"/.ledger/staging/{run_id}/data"), seen
