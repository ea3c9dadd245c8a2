"""Fault suite, issue 11 part 2: while and after the job. A stubborn job, a full disk and a huge
line still end in a true record with the job's own exit code."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import LEDGER, git

from ledger import yamlio

# a job that ignores SIGTERM and SIGINT (the `trap ''` disposition is inherited by `sleep`)
STUBBORN = ["sh", "-c", "trap '' TERM INT; echo started; sleep 60"]


def _latest_manifest(repo: Path) -> dict:
    run_id = git(repo, "log", "-1", "--format=%(trailers:key=Run-Id,valueonly)", "experiments").strip()
    return yamlio.loads(git(repo, "show", f"experiments:runs/{run_id[-4:-2]}/{run_id}/manifest.yaml"))


def _start(repo: Path, *argv: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([*LEDGER, "run", "--no-heat-guard", "--", *argv], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"started\n"  # the job runs and has set its trap
    return proc


def test_job_ignoring_sigterm_is_killed_after_the_grace(repo: Path) -> None:
    (repo / ".ledger.yaml").write_text("job:\n  stop_grace_s: 1\n")
    proc = _start(repo, *STUBBORN)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)  # was: waited for `sleep 60` to end by itself
    assert proc.returncode == 128 + signal.SIGKILL, err
    status = _latest_manifest(repo)["status"]
    assert status["state"] == "killed" and status["signal"] == "SIGKILL"
    assert "1 s after SIGTERM" in status["escalated"]


def test_second_ctrl_c_escalates_at_once(repo: Path) -> None:
    (repo / ".ledger.yaml").write_text("job:\n  stop_grace_s: 600\n")
    proc = _start(repo, *STUBBORN)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)  # a 600 s grace: only the second Ctrl-C ends it
    assert proc.returncode == 128 + signal.SIGKILL, err
    m = _latest_manifest(repo)
    assert "second signal (SIGINT)" in m["status"]["escalated"]
    assert any("second signal" in w for w in m["warnings"])


PROBE = """\
import os, resource, subprocess, sys
from pathlib import Path
from ledger.capture.stream import LineSplitter, OutputCapture, split_file
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
r, w = os.pipe()
out = Path(sys.argv[1])
cap = OutputCapture(r, None, out / "raw")
cap.start()
job = subprocess.Popen(["sh", "-c", "head -c 209715200 /dev/zero | tr '\\\\0' x; echo; echo end"], stdout=w)
os.close(w)
job.wait()
cap.join()
split_file(out / "raw", LineSplitter(out / "t.log", out / "e.log"))
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) // 1024)
"""


def test_one_huge_line_is_captured_in_bounded_memory(tmp_path: Path) -> None:
    """A 200 MB line is copied and split in chunks: ledger's memory grows far less than the line."""
    (tmp_path / "probe.py").write_text(PROBE)
    proc = subprocess.run([sys.executable, str(tmp_path / "probe.py"), str(tmp_path)], capture_output=True, text=True, timeout=170)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) < 64, proc.stdout  # MB of growth, for 200 MB of output in one line
    assert (tmp_path / "t.log").stat().st_size == 200 * 2**20 + len("\nend\n")
    with open(tmp_path / "t.log", "rb") as f:
        f.seek(200 * 2**20 - 2)
        assert f.read() == b"xx\nend\n"
    assert os.path.getsize(tmp_path / "e.log") == 0
