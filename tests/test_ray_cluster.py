"""`ledger run` against real local Ray clusters, one module so that a test worker never runs two
clusters side by side (`make test TEST_WORKERS=N` keeps a module on one worker): first a one-node
cluster for Ray Job API runs (issue 9, items 7 and 8; issue 21), then a two-node cluster for the
heat guard. Each cluster is a class's fixture, so the first is gone before the second starts.
The Ray paths that need no cluster are in test_ray_offline.py (this module is the suite's longest).

Every cluster is started by its fixture on 127.0.0.1 with free ports and torn down by it
(`Cluster.shutdown` ends exactly the processes it started; `ray stop` would end every Ray on the
machine). The driver tests/ray_shapes/train.py has actors named as Miles names them.

The heat guard's cluster: the job is a real `ray job submit` job whose actors run on both nodes
(custom resources `node1` on the head and `node2` on the second raylet pin them, as Miles pins
trainer and engine actors with placement groups). The scripted timeline heats GPU 0 of node 2
only; the whole job, on both nodes, must stop and then resume, and the record must name the node.
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
from typing import Any

import psutil
import pytest
from conftest import LEDGER, git, ledger, make_repo, nvml_works

from ledger.heat.cluster_target import ClusterTarget
from ledger.heat.heatlog import read_heat_log
from ledger.replay.raylaunch import CODE_FROM_CHECKOUT

ray = pytest.importorskip("ray", reason="Ray is the `ray` extra, installed by `make test` (test extra)")


DRIVER = Path(__file__).resolve().parent / "ray_shapes" / "train.py"


def proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, ...); None when gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _foreign_listeners(ports: dict[str, int]) -> list[str]:
    """The ports a cluster this process started was given on which a process not of this
    process's tree listens. A free port is picked by binding port 0 and closing it, and Ray binds
    it a moment later: another Ray cluster on the machine (another test run) can take it in
    between, and this cluster's raylet then talks to that cluster's agent (seen: a replayed job's
    working_dir package looked up in the other cluster's GCS, "Failed to download runtime_env file
    package ... prematurely deleted"). The fixtures start their cluster again on other ports."""
    mine = os.getpid()
    listening = {c.laddr.port: c.pid for c in psutil.net_connections("tcp") if c.status == psutil.CONN_LISTEN and c.pid}
    foreign = []
    for name, port in ports.items():
        pid = listening.get(port)
        if pid is None:
            continue
        try:
            ours = pid == mine or any(p.pid == mine for p in psutil.Process(pid).parents())
        except psutil.Error:  # gone meanwhile: not this cluster's
            ours = False
        if not ours:
            foreign.append(f"{name} {port} (pid {pid})")
    return foreign


@pytest.fixture
def ray_repo(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "proj", {"train.py": DRIVER.read_text()})
    ledger(repo, "init")
    return repo


def _failed(repo: Path, r: subprocess.CompletedProcess[str]) -> str:
    """What a failed run said, and the end of the job's own log (Ray's error is there, not in ours)."""
    tail = ledger(repo, "tail", "latest", "-n", "60")
    return f"{r.stderr}\n--- the job's log (ledger tail latest) ---\n{tail.stdout}{tail.stderr}"


def _show(repo: Path) -> dict:
    return json.loads(ledger(repo, "show", "latest", "--json").stdout)


def _logs(repo: Path, m: dict) -> tuple[str, str]:
    folder = repo / ".." / "logs"
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(folder), "experiments"], check=True)
    run = folder / f"runs/{m['id'][-4:-2]}/{m['id']}"
    return (run / "trainer.log").read_text(), (run / "engine.log").read_text()


def _check_split(trainer: str, engine: str) -> None:
    assert "driver RAY_DEDUP_LOGS=0" in trainer, "ledger's RAY_DEDUP_LOGS=0 did not reach the driver"
    # Ray coloured the actor prefixes even into ledger's pipe (miles-facts.md): the split read through them
    assert engine.startswith("\x1b[") and "\x1b[36m(MegatronTrainRayActor pid=" in trainer
    assert engine.count("Decode batch") == 3 and "Decode batch" not in trainer
    assert all("SGLangEngine" in line for line in engine.splitlines())
    for cell in (0, 1):  # no per-step line of either trainer cell lost to de-duplication
        for step in range(3):
            assert f"'train/loss': {0.5 + step + cell / 10}" in trainer
    assert "repeated" not in trainer


# -- issue 21: a Miles-shaped job submitted WITHOUT --no-wait ---------------------------------
MILES_JOB = Path(__file__).resolve().parent / "ray_shapes" / "miles_job.py"


LAUNCHER = Path(__file__).resolve().parent / "ray_shapes" / "run-miles-job.sh"


@pytest.fixture
def miles_repo(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "proj", {"train.py": MILES_JOB.read_text(), "run.sh": LAUNCHER.read_text()})
    ledger(repo, "init")
    return repo


def _job_info(url: str, submission_id: str) -> object:
    from ray.job_submission import JobSubmissionClient

    return JobSubmissionClient(url).get_job_info(submission_id)


def _trainer_log(repo: Path, m: dict) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "show", f"experiments:runs/{m['id'][-4:-2]}/{m['id']}/trainer.log"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _actor_env(log: str) -> dict:
    [line] = [x for x in log.splitlines() if "ACTOR_ENV " in x]
    return json.loads(line.split("ACTOR_ENV ", 1)[1])


def _check_run_env(seen: dict, run_id: str) -> None:
    """The job's actor saw the run's LEDGER_RUN_ID and LEDGER_DATA_DIR (docs/recording.md): a Ray
    job gets the cluster's environment plus its runtime env, never the submitter's (issue 33)."""
    assert seen["LEDGER_RUN_ID"] == run_id, seen
    assert (seen["LEDGER_DATA_DIR"] or "").endswith(f"/.ledger/staging/{run_id}/data"), seen


class TestJobApi:
    """Runs through the Ray Job API and the Ray driver on a one-node cluster."""

    @pytest.fixture(scope="class")
    @classmethod
    def head_cwd(cls) -> Iterator[Path]:
        """Where the class's cluster was started: a job without a working_dir runs there (a Miles
        launcher starts its head in the Miles checkout, so its `python3 train.py` is that one)."""
        temp = Path(tempfile.mkdtemp(prefix="lr", dir="/tmp"))  # short: Ray's socket paths have a length limit
        try:
            (temp / "cwd").mkdir()
            yield temp / "cwd"
        finally:
            shutil.rmtree(temp, ignore_errors=True)

    @pytest.fixture(scope="class")
    @classmethod
    def cluster(cls, head_cwd: Path) -> Iterator[tuple[str, str]]:
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
        from ray.job_submission import JobSubmissionClient

        try:
            for attempt in range(3):  # again on other ports when another cluster took one of them
                ports = {"dashboard_port": _free_port(), "gcs_server_port": _free_port(), **_agent_ports()}
                here = os.getcwd()
                os.chdir(head_cwd)  # the head's processes (and every job without a working_dir) run there
                try:
                    c = Cluster(
                        initialize_head=True,
                        head_node_args={
                            "num_cpus": 1,
                            "include_dashboard": True,
                            "dashboard_host": "127.0.0.1",
                            "node_ip_address": "127.0.0.1",
                            "temp_dir": temp,
                            **ports,
                        },
                    )
                finally:
                    os.chdir(here)
                url = f"http://127.0.0.1:{ports['dashboard_port']}"
                deadline = time.monotonic() + 60
                while True:  # the job API answers a little after the head is up
                    try:
                        JobSubmissionClient(url).list_jobs()
                        break
                    except Exception:
                        if time.monotonic() > deadline:
                            c.shutdown()
                            raise
                        time.sleep(0.5)
                foreign = _foreign_listeners(ports)
                if not foreign:
                    break
                c.shutdown()
                assert attempt < 2, f"another cluster listens on this cluster's ports: {foreign}"
            try:
                yield c.address, url
            finally:
                c.shutdown()
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def test_driver_run_directly_splits_coloured_actor_lines(self, cluster: tuple[str, str], ray_repo: Path) -> None:
        address, _ = cluster
        r = ledger(ray_repo, "run", "--no-debug-data", "--", "python3", "train.py", env={"RAY_ADDRESS": address}, timeout=100)
        assert r.returncode == 0, _failed(ray_repo, r)
        m = _show(ray_repo)
        assert m["command"]["ledger_env"]["RAY_DEDUP_LOGS"] == "0"
        _check_split(*_logs(ray_repo, m))

    def test_ray_job_submit_waits_and_no_wait_is_followed(self, cluster: tuple[str, str], ray_repo: Path) -> None:
        _, url = cluster
        script = str(ray_repo / "train.py")  # a job runs in the cluster's working directory
        r = ledger(ray_repo, "run", "--no-debug-data", "--", "ray", "job", "submit", "--address", url, "--", "python3", script, timeout=100)
        assert r.returncode == 0, _failed(ray_repo, r)
        m = _show(ray_repo)
        assert m["command"]["ray_argv"][:3] == ["ray", "job", "submit"]
        assert m["command"]["training_argv"] == ["python3", script]
        trainer, engine = _logs(ray_repo, m)
        _check_split(trainer, engine)
        # the run's id reached the job's actors (through the runtime env ledger's wrapper extended)
        assert f"actor LEDGER_RUN_ID={m['id']}" in trainer, "LEDGER_RUN_ID did not reach the job's actors"
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
        assert f"actor LEDGER_RUN_ID={m['id']}" in trainer  # a --no-wait job's actors see it too

    def test_ctrl_c_stops_a_followed_job(self, cluster: tuple[str, str], ray_repo: Path) -> None:
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

    def test_ray_own_driver_variables_are_not_settings(self, cluster: tuple[str, str], tmp_path: Path) -> None:
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

    def test_ctrl_c_stops_a_waiting_submission_and_keeps_every_file(self, cluster: tuple[str, str], miles_repo: Path) -> None:
        """The Ray CLI answers Ctrl-C with `Aborted!` and exit 1 while the job runs on: ledger stops
        the job through the Job API, records the truth, and every rollout file the job wrote is in
        the record (nothing is written into a committed run's folder afterwards)."""
        _, url = cluster
        env = {**os.environ, "RAY_DASHBOARD_ADDR": url, "STEPS": "40", "STEP_SLEEP": "0.5"}
        proc = subprocess.Popen(
            [*LEDGER, "run", "--", "bash", "run.sh"], cwd=miles_repo, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
        )
        out = ""
        assert proc.stdout is not None
        while "step 2:" not in out:  # the job is training, its rollout files are being written
            line = proc.stdout.readline()
            assert line, out
            out += line
        proc.send_signal(signal.SIGINT)
        try:
            out += proc.communicate(timeout=90)[0]
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError(f"ledger did not end after Ctrl-C: {out}{proc.communicate()[0]}") from None
        m = _show(miles_repo)
        ray_job = m["status"]["ray_job"]
        info = _job_info(url, ray_job["submission_id"])
        assert str(info.status.value) == "STOPPED", out  # type: ignore[attr-defined]
        assert ray_job["status"] == "STOPPED" and ray_job["stopped_by_ledger"] is True
        assert m["status"]["state"] == "killed" and m["status"]["signal"] == "SIGINT" and proc.returncode == 130
        job_s = (info.end_time - info.start_time) / 1000  # type: ignore[attr-defined]
        assert m["status"]["duration_s"] >= job_s  # the record lasts until the job really stopped
        trainer = subprocess.run(
            ["git", "-C", str(miles_repo), "show", f"experiments:runs/{m['id'][-4:-2]}/{m['id']}/trainer.log"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        written = {line.split("perf ", 1)[1].split(":")[0] for line in trainer.splitlines() if "- perf " in line}
        rollout = next(d for d in m["data"] if d["role"] == "rollout")
        assert rollout["nfiles"] == len(written) >= 3 and len(written) < 40
        assert not (miles_repo / ".ledger" / "staging" / m["id"]).exists()  # nothing wrote after the commit
        r = ledger(miles_repo, "recover")
        assert r.returncode == 0 and "removed" not in r.stderr

    def test_a_sigkilled_ledgers_ray_job_is_recorded_as_it_ended_with_every_file(
        self, cluster: tuple[str, str], miles_repo: Path, tmp_path: Path
    ) -> None:
        """ledger dies (SIGKILL) while its waiting Ray job runs (issue 33, item 2). `ledger recover`
        asks Ray: while the job runs on, the run stays staged and is listed as running on Ray; once
        it ended (`--follow`), the run is recorded with Ray's state, the driver's exit code, the
        job's true duration, what it printed after ledger died and every rollout file it wrote."""
        _, url = cluster
        gate = tmp_path / "gate"  # the job holds before step 2 until it exists: ended on a condition
        env = {**os.environ, "RAY_DASHBOARD_ADDR": url, "STEPS": "4", "HOLD": str(gate)}
        proc = subprocess.Popen(
            [*LEDGER, "run", "--", "bash", "run.sh"], cwd=miles_repo, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
        )
        out = ""
        assert proc.stdout is not None
        while "step 1:" not in out:  # the job is training and holds before step 2
            line = proc.stdout.readline()
            assert line, out
            out += line
        proc.kill()  # ledger alone: the launcher runs in its own process group, the job on the cluster
        proc.wait()
        try:
            [staged] = list((miles_repo / ".ledger" / "staging").iterdir())
            r = ledger(miles_repo, "recover", timeout=120)
            assert r.returncode == 0, r.stderr
            assert f"ledger: run {staged.name}: Ray job ledger-{staged.name}-0 is still RUNNING at {url}; the run stays staged" in r.stderr
            assert staged.is_dir() and "recovered 0 runs" in r.stderr
            row = next(line for line in ledger(miles_repo, "list").stdout.splitlines() if line.startswith(staged.name))
            assert "running on Ray" in row and "ledger recover --follow" in row, row
        finally:
            gate.touch()  # never leave the job holding on the class's cluster
        r = ledger(miles_repo, "recover", "--follow", timeout=150)
        assert r.returncode == 0, r.stderr
        m = _show(miles_repo)
        assert m["id"] == staged.name and not staged.exists()
        ray_job = m["status"]["ray_job"]
        assert (m["status"]["state"], m["status"]["exit_code"], ray_job["status"]) == ("finished", 0, "SUCCEEDED"), m["status"]
        info = _job_info(url, ray_job["submission_id"])
        assert m["status"]["duration_s"] >= (info.end_time - info.start_time) / 1000  # type: ignore[attr-defined]
        trainer = _trainer_log(miles_repo, m)
        assert "step 3:" in trainer and "driver done" in trainer  # printed after ledger died, read from Ray
        rollout = next(d for d in m["data"] if d["role"] == "rollout")
        assert rollout["nfiles"] == 4 and rollout["rollout_ids"] == [0, 1, 2, 3]
        assert not (miles_repo / ".ledger" / "untracked" / m["id"]).exists()

    def test_waiting_submission_records_the_drivers_exit_code(self, cluster: tuple[str, str], miles_repo: Path) -> None:
        _, url = cluster
        r = ledger(
            miles_repo,
            "run",
            "--no-debug-data",
            "--",
            "bash",
            "run.sh",
            env={"RAY_DASHBOARD_ADDR": url, "STEPS": "1", "DRIVER_EXIT": "3"},
            timeout=100,
        )
        assert r.returncode == 3, r.stderr  # not the Ray CLI's 1
        m = _show(miles_repo)
        assert m["status"]["state"] == "failed" and m["status"]["exit_code"] == 3
        assert m["status"]["ray_job"]["status"] == "FAILED"
        assert "exit code 3" in (m["status"]["ray_job"]["message"] or ""), m["status"]["ray_job"]
        assert m["status"]["ray_job"]["submission_id"].startswith(f"ledger-{m['id']}-")
        # the launcher names its cluster through a variable: the heat sensor took the cluster the
        # job was submitted to (the ray wrapper's record), never Ray's default address (issue 33)
        watched = m["gpu"]["cluster"]
        assert (watched["address"], watched["source"]) == (url, "submitted"), watched
        assert watched["submission_id"] == m["status"]["ray_job"]["submission_id"]

    def test_the_heat_sensor_attaches_only_to_a_cluster_the_job_submitted_to(self, cluster: tuple[str, str], ray_repo: Path) -> None:
        """A launcher names the class's live cluster but never submits to it: the heat sensor never
        connects there as a driver (it did, to whatever Ray listened at the address) (issue 33)."""
        from ray.job_submission import JobSubmissionClient

        _, url = cluster
        launcher = f'#!/bin/bash\nset -ex\nsubmit() {{\n  ray job submit --address="{url}" -- python3 train.py\n}}\necho trained here\n'
        (ray_repo / "run.sh").write_text(launcher)
        r = ledger(ray_repo, "run", "--no-debug-data", "--", "bash", "run.sh", timeout=100)
        assert r.returncode == 0, _failed(ray_repo, r)
        m = _show(ray_repo)
        watched = m["gpu"]["cluster"]
        assert watched["connected"] is False and watched["address"] == url, watched
        assert watched["unavailable"] == f"the job submitted to no Ray cluster while it ran (its launcher names {url})"
        heat_drivers = [j for j in JobSubmissionClient(url).list_jobs() if m["id"] in str((j.metadata or {}).get("ledger"))]
        assert heat_drivers == []

    def test_replay_of_a_submitted_run_goes_to_ray_with_its_runtime_env_runs_this_checkout_and_is_bitwise(
        self, cluster: tuple[str, str], head_cwd: Path, miles_repo: Path
    ) -> None:
        """The replay is submitted to the recorded (reachable) cluster with the recorded runtime env:
        its MegatronTrainRayActor sees NCCL_ALGO and friends, as the original's did; its settings are
        what was submitted; trained on the recorded rollouts, its losses are the original's, bit for bit.

        The launcher submits `python3 train.py` without a working_dir, as Miles' do: the job runs
        the cluster's working directory's train.py (a Miles launcher starts its head in its own
        checkout). A replay from a checkout whose train.py changed since, on that cluster (still
        up), must run this checkout's train.py, as its record says (issue 33, item 3)."""
        _, url = cluster
        (head_cwd / "train.py").write_text(MILES_JOB.read_text())  # the original checkout's, where the head started
        try:
            r = ledger(miles_repo, "run", "--", "bash", "run.sh", env={"RAY_DASHBOARD_ADDR": url, "SCRIPT": "train.py"}, timeout=150)
            assert r.returncode == 0, _failed(miles_repo, r)
            source = _show(miles_repo)
            assert source["command"]["training_argv"][:2] == ["python3", "train.py"]
            assert "working_dir" not in (source["command"]["runtime_env"] or {})
            expected = {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "NCCL_ALGO": "Ring", "PYTHONPATH": "/root/Megatron-LM/"}
            assert {k: _actor_env(_trainer_log(miles_repo, source))[k] for k in expected} == expected
            _check_run_env(_actor_env(_trainer_log(miles_repo, source)), source["id"])
            r = ledger(miles_repo, "replay", source["id"], "--yes", timeout=150)
            assert r.returncode == 0, _failed(miles_repo, r)
            m = _show(miles_repo)
            assert m["replay_of"] == source["id"]
            assert m["status"]["ray_job"]["status"] == "SUCCEEDED"
            # the replay and its source, at the same commit, differ in no training setting: not in
            # `code` (the source's launcher run.sh left it, and leaves the replay's too), nor in what
            # makes it a replay (train-only, its entry without the launcher) (issue 33, item 3)
            d = ledger(miles_repo, "diff", source["id"], m["id"], "--json")
            assert d.returncode == 0, d.stdout + d.stderr
            assert json.loads(d.stdout)["changed"] == []
            assert m["settings"]["code"] == source["settings"]["code"] and m["replay"]["code_left_out"] == ["run.sh"]
            seen = _actor_env(_trainer_log(miles_repo, m))
            # the actors, not only the driver; Ray puts the uploaded working_dir (this checkout) first
            # on their PYTHONPATH, so this checkout's packages are the ones imported
            first, _, rest = seen["PYTHONPATH"].partition(":")
            assert "working_dir_files" in first and {**seen, "PYTHONPATH": rest}.items() >= expected.items(), seen
            _check_run_env(seen, m["id"])  # the replay's own id, not its source's
            assert m["settings"]["env.NCCL_ALGO"] == "Ring" and "--debug-train-only" in m["command"]["training_argv"]
            assert m["command"]["ray_argv"][:3] == ["ray", "job", "submit"]
            assert m["replay"]["fidelity"]["verdict"] == "bitwise", m["replay"]["fidelity"]
            assert m["replay"]["fidelity"]["steps"] == 3
            assert "(bitwise)" in ledger(miles_repo, "list").stdout
            assert m["replay"]["ray"] == {
                "address": url,
                "how": "recorded address",
                "local_head": False,
                "working_dir": str(miles_repo),  # this checkout's code, never the cluster's working directory
                "code_from": CODE_FROM_CHECKOUT,
            }
            # this checkout's train.py changes (a marker): a replay runs it, not the cluster's
            marked = MILES_JOB.read_text().replace(
                "    ray.init()\n", "    ray.init()\n    print('REPLAYED CHECKOUT MARK', flush=True)\n", 1
            )
            assert marked != MILES_JOB.read_text()
            (miles_repo / "train.py").write_text(marked)
            git(miles_repo, "commit", "-q", "-am", "a marker in this checkout's train.py")
            r = ledger(miles_repo, "replay", source["id"], "--yes", timeout=150)
            assert r.returncode == 0, _failed(miles_repo, r)
        finally:
            (head_cwd / "train.py").unlink()
        m = _show(miles_repo)
        assert m["replay_of"] == source["id"] and m["replay"]["ray"]["how"] == "recorded address"
        assert "REPLAYED CHECKOUT MARK" in _trainer_log(miles_repo, m), "the replay ran the cluster's train.py, not this checkout's"
        assert m["code"]["commit"] == git(miles_repo, "rev-parse", "HEAD").strip()


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


def _agent_ports() -> dict[str, int]:
    """A node's agents on ports of their own: every node's agents default to 52365 and others, and
    whichever bound second lost its HTTP service ("No available agent to submit job" for 90 s when
    that was the head's, seen on a loaded machine)."""
    names = ("dashboard_agent_listen_port", "runtime_env_agent_port", "metrics_export_port", "metrics_agent_port")
    return {name: _free_port() for name in names}


def _wait_for_job_agent(dashboard: str, agent_port: int) -> None:
    """A fresh cluster answers 'No available agent to submit job' until the head's dashboard
    agent, which runs submissions, listens on its own port: waited for (as ledger's local head
    does, ledger/replay/raylaunch.py), then for the Job API itself."""
    from ray.job_submission import JobSubmissionClient

    deadline = time.monotonic() + 90
    while True:
        try:
            with socket.create_connection(("127.0.0.1", agent_port), timeout=2.0):
                pass
            JobSubmissionClient(dashboard).list_jobs()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


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


def _state(pid: int) -> str:
    fields = proc_stat(pid)
    assert fields is not None, f"process {pid} is gone"
    return fields[0]


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


class TestHeatOnTwoNodes:
    """The heat guard on a head and a second raylet (Ray's own test harness)."""

    @pytest.fixture(scope="class")
    @classmethod
    def cluster(cls) -> Iterator[tuple[str, str, Any]]:
        """A head (resource node1, with the dashboard the Job API needs) and a second raylet (node2).

        Everything listens on 127.0.0.1 only. Ray replaces a loopback address by the machine's own IP
        (`services.resolve_ip_for_localhost`) unless RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, which makes
        its idea of "this node's IP" the loopback one: set for the cluster, its jobs and ledger alike.
        This process read the variable when it imported Ray (at collection), so for the tests that
        connect from here the constant it set is switched too, for this module only.
        """
        from ray._private import ray_constants

        saved = dict(os.environ)
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        # the cluster's own folder, as TestJobApi's (not /tmp/ray, shared with every other Ray on
        # the machine: its address file and session_latest); short: Ray's socket paths have a
        # length limit. The second raylet takes the head's folder.
        temp = tempfile.mkdtemp(prefix="lh", dir="/tmp")
        os.environ["RAY_TMPDIR"] = temp
        os.makedirs(os.path.join(temp, "ray"), exist_ok=True)
        patch = pytest.MonkeyPatch()
        patch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
        try:
            for attempt in range(3):  # again on other ports when another cluster took one of them
                head_ports = {"dashboard_port": _free_port(), **_agent_ports()}
                node_ports = _agent_ports()
                c = cluster_utils.Cluster(
                    initialize_head=True,
                    head_node_args={
                        "num_cpus": 2,
                        "resources": {"node1": 1},
                        "node_ip_address": "127.0.0.1",
                        "include_dashboard": True,
                        "dashboard_host": "127.0.0.1",
                        "temp_dir": temp,
                        **head_ports,
                    },
                )
                dashboard = f"http://127.0.0.1:{head_ports['dashboard_port']}"
                try:
                    c.add_node(num_cpus=2, resources={"node2": 1}, node_ip_address="127.0.0.1", **node_ports)
                    c.wait_for_nodes()
                    _wait_for_job_agent(dashboard, head_ports["dashboard_agent_listen_port"])
                except BaseException:
                    c.shutdown()
                    raise
                foreign = _foreign_listeners({**head_ports, **{f"node 2 {k}": v for k, v in node_ports.items()}})
                if not foreign:
                    break
                c.shutdown()
                assert attempt < 2, f"another cluster listens on this cluster's ports: {foreign}"
            try:
                yield dashboard, c.address, c
            finally:
                c.shutdown()
        finally:
            patch.undo()
            os.environ.clear()
            os.environ.update(saved)
            shutil.rmtree(temp, ignore_errors=True)

    @pytest.mark.slow
    def test_hot_gpu_on_node2_pauses_the_job_on_both_nodes(self, cluster: tuple[str, str, Any], repo: Path, tmp_path: Path) -> None:
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

    def test_a_pause_that_fails_on_one_node_leaves_no_node_stopped(self, cluster: tuple[str, str, Any]) -> None:
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
            # the signal is sent when pause() returns; the process is stopped once it next runs
            _wait("node 1's process to stop", lambda: _state(procs[0].pid) == "T", sensor, sample=False, seconds=10)
            sensor.resume()
            assert _state(procs[0].pid) != "T"
        finally:
            sensor.close()
            for proc in procs:
                proc.kill()
                proc.wait()

    def test_a_process_the_job_starts_during_a_pause_is_stopped_and_resumed_with_it(self, cluster: tuple[str, str, Any]) -> None:
        """The driver asked for an actor just before it was stopped; the actor's worker comes up
        during the pause: the next hold stops it too, and the resume continues it with the rest."""
        dashboard, _gcs, _c = cluster
        warnings: list[str] = []
        sensor = _sensor(dashboard, [(0, 0, 50, None)], warnings)
        first = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        late: subprocess.Popen[bytes] | None = None
        try:
            _wait("both samplers", lambda: len(sensor.gpus()) == 2, sensor)
            one = next(w for w in sensor._nodes.values() if "node1" in w.names)  # noqa: SLF001
            pids = [first.pid]
            sensor.find_job = lambda: {"job_id": "test", "submission_id": "test"}
            sensor.job_processes = lambda job: {one.node_id: list(pids)}
            sensor.hold()  # not paused: nothing is stopped
            assert _state(first.pid) != "T"
            sensor.pause()
            _wait("the first process to stop", lambda: _state(first.pid) == "T", sensor, sample=False, seconds=10)
            late = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
            sensor.hold()  # the job has nothing new yet: the late process runs
            assert _state(late.pid) != "T"
            pids.append(late.pid)
            sensor.hold()
            _wait("the late process to stop", lambda: _state(late.pid) == "T", sensor, sample=False, seconds=10)
            sensor.hold()  # again: nothing new; both stay stopped
            assert _state(first.pid) == "T" and _state(late.pid) == "T"
            sensor.resume()
            assert _state(first.pid) != "T" and _state(late.pid) != "T"
            assert warnings == []
        finally:
            sensor.close()
            for proc in (first, late):
                if proc is not None:
                    proc.kill()
                    proc.wait()

    @pytest.mark.slow
    def test_nodes_that_join_later_are_watched_and_leaving_keeps_their_gpus(
        self, cluster: tuple[str, str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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
        assert sorted((g["node"], g["index"]) for g in gpu["gpus"]) == sorted(
            [(second["node"], 0), (joined["node"], 0), (joined["node"], 1)]
        )
        assert any("not watched" in w and head["node"] in w for w in warnings), warnings

    @pytest.mark.skipif(nvml_works(), reason="NVML works here (a GPU machine): the no-NVML path cannot be shown")
    def test_nodes_without_nvml_are_recorded_as_not_watched(self, cluster: tuple[str, str, Any]) -> None:
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


# -- after both classes: no other cluster is up on this worker --------------------------------
def test_a_replay_with_no_cluster_to_go_to_starts_a_local_head_and_stops_it_by_pid(tmp_path: Path) -> None:
    """A submitted run replayed where its recorded cluster is gone (another machine, after `dvc
    pull`) and no --address is given: ledger starts a Ray head on 127.0.0.1 of its own (ports,
    folder), a job runs on it, and ledger stops it after, by its own PID, folder removed."""
    from ray.job_submission import JobStatus, JobSubmissionClient

    from ledger.replay.raylaunch import choose_target, reachable
    from ledger.runrecord import Command, RunRecord

    gone = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    m = RunRecord(command=Command(ray_argv=["ray", "job", "submit", "--address", gone, "--", "python3", "train.py"]))
    said: list[str] = []
    dry = choose_target(m, None, tmp_path, said.append, dry_run=True)
    assert dry.head is None and dry.how == "local head started by ledger" and said == []  # a dry run starts nothing
    target = choose_target(m, None, tmp_path, said.append)
    head = target.head
    assert head is not None
    try:
        assert target.to_record() == {"address": target.address, "how": "local head started by ledger", "local_head": True}
        assert target.address != gone and reachable(target.address)
        # one line, or three when the first head ended at once and was tried again (the test below)
        assert said[-1] == f"ledger: no Ray cluster to replay on; starting a local head for the replay at {target.address}"
        assert len(said) == 1 or (len(said) == 3 and "trying once more on other ports" in said[1])
        client = JobSubmissionClient(target.address)
        job = client.submit_job(entrypoint="python3 -c 'print(41 + 1)'")
        deadline = time.monotonic() + 90
        while not client.get_job_status(job).is_terminal():
            assert time.monotonic() < deadline, client.get_job_logs(job)
            time.sleep(0.5)
        assert client.get_job_status(job) == JobStatus.SUCCEEDED and "42" in client.get_job_logs(job)
    finally:
        head.stop()
    assert head.proc.poll() is not None and not Path(head.temp).exists()
    assert not reachable(target.address, 1.0)

    # nothing of the head still runs in its process group (a zombie its parent has not reaped yet is dead)
    def runs_in_its_group(pid: int) -> bool:
        fields = proc_stat(pid)  # None: gone meanwhile
        return fields is not None and int(fields[2]) == head.proc.pid and fields[0] != "Z"

    live = [p for p in Path("/proc").iterdir() if p.name.isdigit() and runs_in_its_group(int(p.name))]
    assert live == [], [(p.name, (p / "cmdline").read_bytes()[:80]) for p in live]


def test_a_port_another_process_tree_listens_on_is_foreign_and_ours_is_not() -> None:
    """`_foreign_listeners`, by which the cluster fixtures notice another cluster on their ports:
    a listener of this process is ours; one of a process outside this process's tree (its parent
    exited, so it was reparented) is foreign; a port nobody listens on is neither."""
    mine = socket.socket()
    mine.bind(("127.0.0.1", 0))
    mine.listen()
    # the child starts the listener in a grandchild and exits: the grandchild is not of this tree
    code = (
        "import os, socket, sys, time\n"
        "if os.fork():\n    os._exit(0)\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
        "print(s.getsockname()[1], os.getpid(), flush=True)\n"
        "sys.stdin.read()\n"
    )
    other = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert other.stdout is not None and other.stdin is not None
    port, pid = (int(x) for x in other.stdout.readline().split())
    try:
        other.wait(timeout=30)
        free = _free_port()
        assert _foreign_listeners({"mine": mine.getsockname()[1], "free": free}) == []
        assert _foreign_listeners({"theirs": port}) == [f"theirs {port} (pid {pid})"]
    finally:
        other.stdin.close()  # the grandchild reads stdin to its end, then exits
        mine.close()
