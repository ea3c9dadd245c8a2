"""`ledger run` against a real local Ray cluster (issue 9, items 7 and 8).

One cluster for the module, started by the test on 127.0.0.1 with free ports and torn down by it
(`Cluster.shutdown` ends exactly the processes it started; `ray stop` would end every Ray on the
machine). The driver tests/ray_shapes/train.py has actors named as Miles names them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import LEDGER, ledger, make_repo

ray = pytest.importorskip("ray", reason="Ray is the `ray` extra, installed by `make test` (test extra)")

DRIVER = Path(__file__).resolve().parent / "ray_shapes" / "train.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[str, str]]:
    from ray.cluster_utils import Cluster

    temp = tempfile.mkdtemp(prefix="lr", dir="/tmp")  # short: Ray's socket paths have a length limit
    # Ray rewrites a 127.0.0.1 address to the machine's outward IP unless told it is a one-machine
    # cluster; drivers and the job supervisor inherit this from the cluster and from the tests
    saved = dict(os.environ)
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    # a job's entrypoint runs with the cluster's PATH: this venv's python3 (it has ray) first
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    dash = _free_port()
    c = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "include_dashboard": True,
            "dashboard_host": "127.0.0.1",
            "dashboard_port": dash,
            "node_ip_address": "127.0.0.1",
            "gcs_server_port": _free_port(),
            "temp_dir": temp,
            "dashboard_agent_listen_port": _free_port(),
            "runtime_env_agent_port": _free_port(),
            "metrics_export_port": _free_port(),
            "metrics_agent_port": _free_port(),
        },
    )
    try:
        url = f"http://127.0.0.1:{dash}"
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
        c.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def ray_repo(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "proj", {"train.py": DRIVER.read_text()})
    ledger(repo, "init")
    return repo


def _show(repo: Path) -> dict:
    return json.loads(ledger(repo, "show", "latest", "--json").stdout)


def _logs(repo: Path, m: dict) -> tuple[str, str]:
    folder = repo / ".." / "logs"
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(folder), "experiments"], check=True)
    run = folder / f"runs/{m['id'][-4:-2]}/{m['id']}"
    return (run / "trainer.log").read_text(), (run / "engine.log").read_text()


def _check_split(trainer: str, engine: str) -> None:
    # Ray coloured the actor prefixes even into ledger's pipe (miles-facts.md): the split read through them
    assert engine.startswith("\x1b[") and "\x1b[36m(MegatronTrainRayActor pid=" in trainer
    assert engine.count("Decode batch") == 3 and "Decode batch" not in trainer
    assert all("SGLangEngine" in line for line in engine.splitlines())
    for cell in (0, 1):  # no per-step line of either trainer cell lost to de-duplication
        for step in range(3):
            assert f"'train/loss': {0.5 + step + cell / 10}" in trainer
    assert "repeated" not in trainer


def test_driver_run_directly_splits_coloured_actor_lines(cluster: tuple[str, str], ray_repo: Path) -> None:
    address, _ = cluster
    r = ledger(ray_repo, "run", "--no-debug-data", "--", "python3", "train.py", env={"RAY_ADDRESS": address}, timeout=100)
    assert r.returncode == 0, r.stderr
    m = _show(ray_repo)
    assert m["command"]["ledger_env"]["RAY_DEDUP_LOGS"] == "0"
    _check_split(*_logs(ray_repo, m))


def test_ray_job_submit_waits_and_no_wait_is_followed(cluster: tuple[str, str], ray_repo: Path) -> None:
    _, url = cluster
    script = str(ray_repo / "train.py")  # a job runs in the cluster's working directory
    r = ledger(ray_repo, "run", "--no-debug-data", "--", "ray", "job", "submit", "--address", url, "--", "python3", script, timeout=100)
    assert r.returncode == 0, r.stderr
    m = _show(ray_repo)
    assert m["command"]["ray_argv"][:3] == ["ray", "job", "submit"]
    assert m["command"]["training_argv"] == ["python3", script]
    _check_split(*_logs(ray_repo, m))
    # --no-wait: the launcher returns at once; ledger follows the job to its real end and state
    r = ledger(
        ray_repo,
        "run",
        "--no-debug-data",
        "--",
        "ray",
        "job",
        "submit",
        "--no-wait",
        "--address",
        url,
        "--",
        "python3",
        script,
        "--exit",
        "3",
        timeout=100,
    )
    assert r.returncode == 3, r.stderr
    m = _show(ray_repo)
    assert m["status"]["state"] == "failed" and m["status"]["exit_code"] == 3
    assert m["status"]["ray_job"]["status"] == "FAILED"
    trainer = subprocess.run(
        ["git", "-C", str(ray_repo), "show", f"experiments:runs/{m['id'][-4:-2]}/{m['id']}/trainer.log"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "driver done" in trainer  # the followed job's logs are in the record


def test_ctrl_c_stops_a_followed_job(cluster: tuple[str, str], ray_repo: Path) -> None:
    _, url = cluster
    (ray_repo / "slow.py").write_text("import time\nprint('slow start', flush=True)\ntime.sleep(120)\n")
    proc = subprocess.Popen(
        [
            *LEDGER,
            "run",
            "--no-debug-data",
            "--",
            "ray",
            "job",
            "submit",
            "--no-wait",
            "--address",
            url,
            "--",
            "python3",
            str(ray_repo / "slow.py"),
        ],
        cwd=ray_repo,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=dict(os.environ),
    )
    out = ""
    assert proc.stdout is not None
    while "slow start" not in out:  # the followed job's own output reached ledger's terminal copy
        line = proc.stdout.readline()
        assert line, out
        out += line
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"ledger did not end after Ctrl-C: {out}{proc.communicate()[0]}") from None
    m = _show(ray_repo)
    assert m["status"]["ray_job"]["status"] == "STOPPED"
    assert m["status"]["state"] == "killed" and proc.returncode == 130


def test_ray_own_driver_variables_are_not_settings(cluster: tuple[str, str], tmp_path: Path) -> None:
    """Ray gives every job's driver variables of its own: the job's config with its random
    submission id and the cluster's GCS address (`_get_driver_env_vars` in Ray's
    dashboard/modules/job/job_supervisor.py). Miles launchers start their own head under ledger's
    PATH wrappers, so the python3 wrapper reads the trainer's environment inside the job; seen
    there, two identical jobs must give the same `env.*` settings."""
    from ray.job_submission import JobStatus, JobSubmissionClient

    from ledger.understand import envvars

    _, url = cluster
    client = JobSubmissionClient(url)
    (tmp_path / "dump_env.py").write_text("import json, os, sys\njson.dump(dict(os.environ), open(sys.argv[1], 'w'))\n")
    runtime_env = {"env_vars": {"NCCL_ALGO": "Ring"}}
    seen = []
    for n in range(2):
        out = tmp_path / f"env{n}.json"
        job = client.submit_job(entrypoint=f"python3 {tmp_path / 'dump_env.py'} {out}", runtime_env=runtime_env)
        deadline = time.monotonic() + 60
        while client.get_job_status(job) not in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED):
            assert time.monotonic() < deadline, client.get_job_logs(job)
            time.sleep(0.2)
        assert client.get_job_status(job) == JobStatus.SUCCEEDED, client.get_job_logs(job)
        seen.append(json.loads(out.read_text()))
    assert seen[0]["RAY_JOB_CONFIG_JSON_ENV_VAR"] != seen[1]["RAY_JOB_CONFIG_JSON_ENV_VAR"]  # what Ray really sets
    first, second = (envvars.env_settings(envvars.capture_env(env), runtime_env) for env in seen)
    assert first == second
    assert first["env.NCCL_ALGO"] == "Ring" and "env.RAY_ADDRESS" not in first
