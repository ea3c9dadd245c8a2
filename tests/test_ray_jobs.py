"""`ledger run` against a real local one-node Ray cluster, through the Ray Job API and the Ray
driver: the driver run directly, `ray job submit` waiting and with --no-wait, Ctrl-C and SIGKILL of
ledger while a job runs, the exit code of a waiting submission, and which cluster the heat sensor
attaches to. Replays through Ray and the heat guard on two nodes are in test_ray_heat_replay.py,
on clusters of their own (tests/ray_clusters.py says why no module runs two clusters at once).

The driver tests/ray_shapes/train.py has actors named as Miles names them; ray_shapes/miles_job.py
is a Miles-shaped job submitted by the Miles-shaped launcher ray_shapes/run-miles-job.sh.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import LEDGER, ledger, make_repo
from ray_clusters import DRIVER, failed, free_port, head_folder, job_info, miles_repo, one_node_cluster, show, trainer_log

ray = pytest.importorskip("ray", reason="Ray is the `ray` extra, installed by `make test` (test extra)")


@pytest.fixture
def ray_repo(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "proj", {"train.py": DRIVER.read_text()})
    ledger(repo, "init")
    return repo


@pytest.fixture(name="miles_repo")
def miles_repo_fixture(tmp_path: Path) -> Path:
    return miles_repo(tmp_path / "proj")


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


class TestJobApi:
    """Runs through the Ray Job API and the Ray driver on a one-node cluster."""

    @pytest.fixture(scope="class")
    @classmethod
    def head_cwd(cls) -> Iterator[Path]:
        """Where the class's cluster was started (a job without a working_dir runs there)."""
        with head_folder() as cwd:
            yield cwd

    @pytest.fixture(scope="class")
    @classmethod
    def cluster(cls, head_cwd: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
        with one_node_cluster(head_cwd, tmp_path_factory) as addresses:
            yield addresses

    def test_driver_run_directly_splits_coloured_actor_lines(self, cluster: tuple[str, str], ray_repo: Path) -> None:
        address, _ = cluster
        r = ledger(ray_repo, "run", "--no-debug-data", "--", "python3", "train.py", env={"RAY_ADDRESS": address}, timeout=100)
        assert r.returncode == 0, failed(ray_repo, r)
        m = show(ray_repo)
        assert m["command"]["ledger_env"]["RAY_DEDUP_LOGS"] == "0"
        _check_split(*_logs(ray_repo, m))

    def test_ray_job_submit_waits_and_no_wait_is_followed(self, cluster: tuple[str, str], ray_repo: Path) -> None:
        _, url = cluster
        script = str(ray_repo / "train.py")  # a job runs in the cluster's working directory
        r = ledger(ray_repo, "run", "--no-debug-data", "--", "ray", "job", "submit", "--address", url, "--", "python3", script, timeout=100)
        assert r.returncode == 0, failed(ray_repo, r)
        m = show(ray_repo)
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
        m = show(ray_repo)
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
        m = show(ray_repo)
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
        m = show(miles_repo)
        ray_job = m["status"]["ray_job"]
        info = job_info(url, ray_job["submission_id"])
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
        m = show(miles_repo)
        assert m["id"] == staged.name and not staged.exists()
        ray_job = m["status"]["ray_job"]
        assert (m["status"]["state"], m["status"]["exit_code"], ray_job["status"]) == ("finished", 0, "SUCCEEDED"), m["status"]
        info = job_info(url, ray_job["submission_id"])
        assert m["status"]["duration_s"] >= (info.end_time - info.start_time) / 1000  # type: ignore[attr-defined]
        trainer = trainer_log(miles_repo, m)
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
        m = show(miles_repo)
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
        assert r.returncode == 0, failed(ray_repo, r)
        m = show(ray_repo)
        watched = m["gpu"]["cluster"]
        assert watched["connected"] is False and watched["address"] == url, watched
        assert watched["unavailable"] == f"the job submitted to no Ray cluster while it ran (its launcher names {url})"
        heat_drivers = [j for j in JobSubmissionClient(url).list_jobs() if m["id"] in str((j.metadata or {}).get("ledger"))]
        assert heat_drivers == []


def test_recover_with_ray_unreachable_keeps_the_run_staged(repo: Path, tmp_path: Path) -> None:
    """A dead ledger's run submitted to a Ray that no longer answers: `ledger recover` says so in
    one line and keeps the run staged; `--no-ray` records it as lost without asking (issue 33)."""
    port = free_port()  # nothing listens there
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    started = tmp_path / "started"
    # a stand-in `ray` (the real one is behind ledger's wrapper, which records the submission first)
    (bin_dir / "ray").write_text(f"#!/bin/sh\ntouch {started}\nexec sleep 300\n")
    (bin_dir / "ray").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    submit = f"ray job submit --address http://127.0.0.1:{port} -- python3 train.py"
    proc = subprocess.Popen([*LEDGER, "run", "--no-debug-data", "--", "bash", "-c", submit], cwd=repo, env=env)
    try:
        deadline = time.monotonic() + 120
        while not started.exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the job never started"
            time.sleep(0.2)
    finally:
        proc.kill()
        proc.wait()
    [staged] = list((repo / ".ledger" / "staging").iterdir())
    r = ledger(repo, "recover", timeout=120)
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if "Ray not reachable" in line]
    assert len(said) == 1 and said[0].startswith(f"ledger: run {staged.name}: Ray not reachable at http://127.0.0.1:{port}")
    assert "the run stays staged" in said[0] and staged.is_dir()
    r = ledger(repo, "recover", "--no-ray", timeout=120)
    assert r.returncode == 0 and not staged.exists(), r.stderr
    assert json.loads(ledger(repo, "show", staged.name, "--json").stdout)["status"]["state"] == "lost"
