"""The heat guard end to end through `ledger run`, driven by a scripted temperature timeline."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import LEDGER, git, ledger, nvml_works

from ledger.heat.heatlog import read_heat_log

COUNTER = "import time\nfor i in range({n}):\n    print(f'tick {{i}} {{time.time():.3f}}', flush=True)\n    time.sleep(0.05)\n"


def _configure(repo: Path, timeline: str, resume_after: float = 0.4) -> None:
    (repo / "heat.timeline").write_text(timeline)
    (repo / ".ledger.yaml").write_text(
        "heat_guard:\n  interval_s: 0.1\n  pause_at: 85\n  resume_at: 75\n"
        f"  resume_after: {resume_after}\n  max_pause: 600\n  sensor: {{timeline: heat.timeline}}\n"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "heat config")


def _show(repo: Path, run: str = "latest") -> dict:
    return json.loads(ledger(repo, "show", run, "--json").stdout)


def _ticks(repo: Path, m: dict) -> list[float]:
    log = git(repo, "show", f"experiments:runs/{m['id'][-4:-2]}/{m['id']}/trainer.log")
    return [float(line.split()[2]) for line in log.splitlines() if line.startswith("tick ")]


def test_job_is_paused_and_resumed_by_the_timeline(repo: Path) -> None:
    _configure(repo, "0 0 60\n0 1 55\n1.0 0 90\n2.4 0 70\n")
    (repo / "job.py").write_text(COUNTER.format(n=70))
    r = ledger(repo, "run", "--", sys.executable, "job.py")
    assert r.returncode == 0, r.stderr
    m = _show(repo)
    gpu = m["gpu"]
    assert gpu["sensor"].startswith("scripted") and gpu["pauses"] == 1
    assert 1.2 <= gpu["paused_s"] <= 3.5  # hot from 1.0 s to 2.4 s, then 0.4 s of cool-down
    assert gpu["peak_temp_c"] in ({"0": 90.0, "1": 55.0}, {0: 90.0, 1: 55.0})
    ticks = _ticks(repo, m)
    assert len(ticks) == 70
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert max(gaps) >= 1.0  # the job's output stalled while it was stopped
    assert sorted(gaps)[-2] < 0.5  # ... once
    heat = git(repo, "show", f"experiments:runs/{m['id'][-4:-2]}/{m['id']}/heat.log")
    assert heat.splitlines()[0].startswith("time\tnode\tgpu\ttemp_c")
    assert "\tpause" in heat and "\tresume" in heat
    listed = ledger(repo, "list").stdout
    assert "1 (" in listed.splitlines()[1]  # the PAUSED column
    report = ledger(repo, "heat", "latest")
    assert report.returncode == 0 and "pause" in report.stdout.lower()


def test_no_heat_guard_records_without_pausing(repo: Path) -> None:
    _configure(repo, "0 0 95\n")
    (repo / "job.py").write_text(COUNTER.format(n=10))
    r = ledger(repo, "run", "--no-heat-guard", "--", sys.executable, "job.py")
    assert r.returncode == 0, r.stderr
    gpu = _show(repo)["gpu"]
    assert gpu["pauses"] == 0 and gpu["guard"]["enabled"] is False
    assert list(gpu["peak_temp_c"].values()) == [95.0]


def _job_pids(repo: Path) -> list[str]:
    """Pids of this test's job (its path is unique to the test), ledger excluded."""
    out = subprocess.run(["pgrep", "-f", f"^{sys.executable} {repo / 'job.py'}"], stdout=subprocess.PIPE, text=True)
    return out.stdout.split()


def _start_paused_job(repo: Path) -> subprocess.Popen[str]:
    _configure(repo, "0 0 95\n", resume_after=100)
    (repo / "job.py").write_text(COUNTER.format(n=1000))
    proc = subprocess.Popen(
        [*LEDGER, "run", "--name", "hot", "--", sys.executable, str(repo / "job.py")],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 20
    while time.time() < deadline:  # wait until the guard has stopped the job (state T)
        pids = _job_pids(repo)
        states = [Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] for p in pids if Path(f"/proc/{p}").exists()]
        if "T" in states:
            time.sleep(0.5)  # let the guard write its pause event
            return proc
        time.sleep(0.1)
    proc.kill()
    pytest.fail("the heat guard never stopped the job")


def test_sigterm_during_a_pause_stops_the_job_cleanly(repo: Path) -> None:
    proc = _start_paused_job(repo)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, err
    m = _show(repo, "hot")
    assert m["status"]["state"] == "killed" and m["gpu"]["pauses"] == 1
    assert m["gpu"]["pause_windows"][0]["end"] is not None
    assert _job_pids(repo) == []


def test_ledger_killed_during_a_pause_then_recover(repo: Path) -> None:
    proc = _start_paused_job(repo)
    proc.kill()  # SIGKILL: ledger cannot resume anything
    proc.wait()
    pids = _job_pids(repo)
    assert pids  # the job is still there, stopped
    r = ledger(repo, "recover")
    assert r.returncode == 0, r.stderr
    assert "resumed and sent SIGTERM" in r.stderr
    deadline = time.time() + 10
    while time.time() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
        time.sleep(0.1)
    assert not any(Path(f"/proc/{p}").exists() and "Z" not in Path(f"/proc/{p}/stat").read_text() for p in pids)
    m = _show(repo, "hot")
    assert m["status"]["state"] == "lost" and m["gpu"]["pauses"] == 1


@pytest.mark.skipif(nvml_works(), reason="NVML works here (a GPU machine): the no-GPU path cannot be shown")
def test_without_nvml_the_run_goes_ahead(repo: Path) -> None:
    r = ledger(repo, "run", "--", sys.executable, "-c", "print(1)")
    assert r.returncode == 0
    assert r.stderr.count("GPU sampling unavailable") == 1
    m = _show(repo)
    assert m["gpu"]["sensor"] == "unavailable" and "NVML" in m["gpu"]["unavailable"]
    assert m["logs"]["heat"] is None
    r = ledger(repo, "heat", "latest")
    assert r.returncode == 1 and "no heat log" in r.stderr


def test_a_collective_timeout_under_max_pause_is_recorded_and_warned(repo: Path) -> None:
    """Megatron's `--distributed-timeout-minutes` (a Miles launcher flag) below `max_pause` (600 s)."""
    r = ledger(repo, "run", "--", sys.executable, "-c", "print(1)", "--distributed-timeout-minutes", "1")
    assert r.returncode == 0, r.stderr
    assert "longer than the job's collective timeout 60 s (--distributed-timeout-minutes 1)" in r.stderr
    assert _show(repo)["gpu"]["distributed_timeout"] == {"seconds": 60.0, "source": "--distributed-timeout-minutes 1"}
    (repo / ".ledger.yaml").write_text("heat_guard:\n  max_pause: 30\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "short pauses")
    r = ledger(repo, "run", "--", sys.executable, "-c", "print(1)", "--distributed-timeout-minutes", "1")
    assert r.returncode == 0 and "collective timeout" not in r.stderr, r.stderr
    assert _show(repo)["gpu"]["distributed_timeout"]["seconds"] == 60.0


def test_a_cluster_job_without_ray_here_samples_this_machine_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger.config import HeatConfig
    from ledger.heat.setup import start_monitor

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as where Ray is not installed
    # imported afresh, as in a process without Ray (another test in this worker may have loaded it with Ray)
    monkeypatch.delitem(sys.modules, "ledger.heat.cluster", raising=False)
    (tmp_path / "heat.timeline").write_text("0 0 60\n")
    said: list[str] = []
    cfg = HeatConfig(interval_s=0.05, sensor={"timeline": str(tmp_path / "heat.timeline")})
    argv = ["ray", "job", "submit", "--address", "http://10.0.0.1:8265", "--", "python3", "train.py"]
    monitor = start_monitor(cfg, True, tmp_path / "heat.log", lambda _sig: None, said.append, job_argv=argv, env={})
    deadline = time.monotonic() + 60  # until a sample is in the log (flushed every tick), however slow
    while not read_heat_log(tmp_path / "heat.log").samples and time.monotonic() < deadline:
        time.sleep(0.05)
    gpu = monitor.stop_summary()
    assert gpu["sensor"].startswith("scripted:") and gpu["peak_temp_c"] == {0: 60.0}
    assert gpu["cluster"]["address"] == "http://10.0.0.1:8265" and gpu["cluster"]["connected"] is False
    assert gpu["cluster"]["unavailable"].startswith("Ray is not installed where ledger runs")
    assert any("nodes are not watched" in line and "sampling this machine only" in line for line in said), said
