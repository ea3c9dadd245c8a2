"""Fault suite, issue 11 part 1: bad input is refused before the job starts (exit 125, one line,
nothing run, nothing staged), and odd but legal input is recorded truly."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import LEDGER, git, ledger

from ledger import yamlio
from ledger.config import default_text
from ledger.configload import load_config
from ledger.errors import EXIT_RUN_FAILED_TO_START

RAN = "ran.txt"  # the job writes this: its absence proves nothing ran


def _refused(repo: Path, *args: str) -> str:
    """Run `ledger run ARGS -- touch ran.txt`; assert the refusal contract; return its one line."""
    proc = ledger(repo, "run", "--no-heat-guard", *args, "--", "touch", RAN)
    assert proc.returncode == EXIT_RUN_FAILED_TO_START, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ledger: error: "), proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert not (repo / RAN).exists()
    staging = repo / ".ledger" / "staging"
    assert not staging.exists() or not any(staging.iterdir())
    return lines[0]


def _run_ids(repo: Path) -> list[str]:
    log = git(repo, "log", "--first-parent", "--format=%(trailers:key=Run-Id,valueonly)", "experiments")
    return [line.strip() for line in log.splitlines() if line.strip()]


def _manifest(repo: Path, run_id: str) -> dict:
    return yamlio.loads(git(repo, "show", f"experiments:runs/{run_id[-4:-2]}/{run_id}/manifest.yaml"))


# ---- .ledger.yaml is validated against the schema ----------------------------------------
@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("heat_gaurd:\n  enabled: false\n", "unknown key 'heat_gaurd'"),  # a typo
        ("host_checkouts: [/src/miles]\n", "host_checkouts"),  # was: internal error: AttributeError
        ('capture:\n  debug_data: "no"\n', "capture.debug_data"),  # was: True
        ('logs:\n  engine_patterns: ["(unclosed"]\n', "logs.engine_patterns.0"),  # was: broke the job's pipe
        ("heat_guard:\n  interval_s: 0\n", "heat_guard.interval_s"),
        ("heat_guard:\n  pause_at: 70\n  resume_at: 75\n", "pause_at (70) must be above resume_at (75)"),
        ("logs:\n  git_max_mb: -5\n", "logs.git_max_mb"),
        ('branch: "exp..bad"\n', "branch"),
    ],
)
def test_bad_config_is_refused_with_the_key_path(repo: Path, text: str, expect: str) -> None:
    (repo / ".ledger.yaml").write_text(text)
    line = _refused(repo)
    assert expect in line and ".ledger.yaml" in line


def test_default_and_repo_configs_validate(tmp_path: Path) -> None:
    """`ledger init`'s file and this repository's own .ledger.yaml both pass the schema."""
    (tmp_path / ".ledger.yaml").write_text(default_text())
    cfg = load_config(tmp_path)
    assert cfg.heat.pause_at > cfg.heat.resume_at and cfg.job.stop_grace_s == 30
    assert r"^slime\." in cfg.training_patterns  # the one list (the two copies had drifted apart)
    load_config(Path(__file__).resolve().parent.parent)


# ---- --name -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name",
    [
        "a\nRun-Id: 20260101-000000-abcd",  # a newline would inject a trailer into the commit message
        "a/b",
        "-x",
        "tab\there",
        "latest",
        "latest~2",
        "20261201-102332-94d6",
        "20261201-10",
        "",
        "a~1",
    ],
)
def test_bad_name_is_refused(repo: Path, name: str) -> None:
    assert "--name" in _refused(repo, "--name", name)


def test_reused_name_means_newest_and_name_tilde_reaches_older(repo: Path) -> None:
    for i in range(3):
        assert ledger(repo, "run", "--no-heat-guard", "--name", "sweep", "--", "echo", str(i)).returncode == 0
    ids = list(reversed(_run_ids(repo)))  # oldest first
    shown = ledger(repo, "show", "sweep", "--json")
    assert shown.returncode == 0, shown.stderr  # was: "ambiguous"
    import json

    assert json.loads(shown.stdout)["id"] == ids[2]
    assert "2 older runs share the name 'sweep'" in shown.stderr
    one_older = ledger(repo, "show", "sweep~1", "--json")
    assert json.loads(one_older.stdout)["id"] == ids[1] and "1 older run shares the name 'sweep'" in one_older.stderr
    assert json.loads(ledger(repo, "show", "sweep~2", "--json").stdout)["id"] == ids[0]
    assert ledger(repo, "show", "sweep~3").returncode == 4


# ---- non-UTF-8 bytes -----------------------------------------------------------------------
def test_non_utf8_bytes_are_stored_losslessly_and_read_back(repo: Path) -> None:
    env = {**os.environ, "CUDA_ODD": "v\xff".encode("latin-1").decode("utf-8", "surrogateescape")}
    argv = [os.fsencode(a) for a in LEDGER] + [
        b"run",
        b"--no-heat-guard",
        b"--name",
        b"n\xff",
        b"--note",
        b"x\xfe",
        b"--",
        b"echo",
        b"a\xffb",
    ]
    proc = subprocess.run(argv, cwd=repo, env={k.encode(): os.fsencode(v) for k, v in env.items()}, capture_output=True)
    assert proc.returncode == 0, proc.stderr  # was: internal error: UnicodeEncodeError
    (run_id,) = _run_ids(repo)
    m = _manifest(repo, run_id)
    raw = {k: base64.b64decode(v) for k, v in m["raw_bytes"].items()}
    assert raw["name"] == b"n\xff" and raw["note"] == b"x\xfe" and raw["command.argv.1"] == b"a\xffb"
    assert raw["settings.env.CUDA_ODD"] == b"v\xff"
    assert m["name"] == "n\ufffd"  # readable text, the exact bytes in raw_bytes
    from ledger.manifest import original

    assert original(m)["command"]["argv"][1].encode("utf-8", "surrogateescape") == b"a\xffb"


def test_non_utf8_staged_run_is_recovered(repo: Path) -> None:
    """A staged run with bad bytes is committed by `recover` (was: skipped forever)."""
    proc = subprocess.Popen(
        [os.fsencode(a) for a in LEDGER] + [b"run", b"--no-heat-guard", b"--name", b"n\xff", b"--", b"sleep", b"30"],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    staging = repo / ".ledger" / "staging"
    for _ in range(300):
        if staging.exists() and any((p / "owner.json").exists() and (p / "manifest.json").exists() for p in staging.iterdir()):
            break
        import time

        time.sleep(0.05)
    import json
    import signal

    owner = json.loads(next(staging.iterdir()).joinpath("owner.json").read_text())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if owner.get("job_pgid"):
        try:
            os.killpg(owner["job_pgid"], signal.SIGKILL)
        except ProcessLookupError:
            pass
    rec = ledger(repo, "recover")
    assert rec.returncode == 0 and "recovered 1 run" in rec.stderr, rec.stderr
    (run_id,) = _run_ids(repo)
    assert base64.b64decode(_manifest(repo, run_id)["raw_bytes"]["name"]) == b"n\xff"


# ---- the branch ---------------------------------------------------------------------------
def test_branch_checked_out_in_another_worktree_is_refused(repo: Path, tmp_path: Path) -> None:
    assert ledger(repo, "run", "--no-heat-guard", "--", "true").returncode == 0
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), "experiments")
    line = _refused(repo)
    assert "checked out" in line and str(tmp_path / "wt") in line


def test_locked_ref_is_refused_before_the_job(repo: Path) -> None:
    assert ledger(repo, "run", "--no-heat-guard", "--", "true").returncode == 0
    (repo / ".git" / "refs" / "heads" / "experiments.lock").write_text("")
    assert "locked" in _refused(repo)


def test_non_ledger_branch_is_refused_before_the_job(repo: Path) -> None:
    git(repo, "branch", "experiments")
    assert "not a ledger branch" in _refused(repo)


def test_ref_locked_at_the_end_keeps_the_true_exit_status_for_recover(repo: Path) -> None:
    assert ledger(repo, "run", "--no-heat-guard", "--", "true").returncode == 0
    lock = repo / ".git" / "refs" / "heads" / "experiments.lock"
    proc = ledger(repo, "run", "--no-heat-guard", "--", "sh", "-c", f"touch {lock}; exit 3")
    assert proc.returncode == 75 and "locked" in proc.stderr and "ledger recover" in proc.stderr  # not the job's 3
    lock.unlink()
    assert ledger(repo, "recover").returncode == 0
    run_id = _run_ids(repo)[0]
    status = _manifest(repo, run_id)["status"]
    assert (status["state"], status["exit_code"]) == ("failed", 3)  # was: lost, exit None


def test_stale_claim_of_a_dead_recover_is_reclaimed(repo: Path) -> None:
    """A `finalising` marker left by a recover that died no longer blocks the run forever."""
    staged = _staged_dead_run(repo)
    (staged / "finalising").write_text("99999999")  # what a recover that died left behind
    rec = ledger(repo, "recover")
    assert "recovered 1 run" in rec.stderr, rec.stderr
    assert len(_run_ids(repo)) == 1


def test_a_validated_config_is_remembered_and_an_edit_is_validated_again(repo: Path) -> None:
    """The YAML parser (ruamel, ~30 ms) runs once per distinct file: later commands decode what it
    validated to from .git/ledger/config (plain JSON, through the same msgspec types); any edit to
    the file is validated anew."""
    import subprocess
    import sys

    (repo / ".ledger.yaml").write_text("heat_guard: {pause_at: 90}\n")
    assert ledger(repo, "run", "--no-heat-guard", "--", "true").returncode == 0
    cached = list((repo / ".git" / "ledger" / "config").glob("*.json"))
    assert len(cached) == 1
    probe = (
        "import sys; from pathlib import Path; from ledger.configload import load_config; "
        f"cfg = load_config(Path({str(repo)!r}), Path({str(repo / '.git')!r})); "
        "print(cfg.heat.pause_at, 'ruamel' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["90.0", "False"]  # from the cache: the YAML parser was not even imported
    (repo / ".ledger.yaml").write_text("heat_guard: {pause_at: 70}\n")  # now below resume_at: refused
    assert "pause_at" in _refused(repo)
    assert len(list((repo / ".git" / "ledger" / "config").glob("*.json"))) == 1  # a refusal is never cached


def _staged_dead_run(repo: Path) -> Path:
    """The staging folder of a run whose ledger and job were SIGKILLed."""
    proc = subprocess.Popen(
        [*LEDGER, "run", "--no-heat-guard", "--", "sleep", "30"],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    staging = repo / ".ledger" / "staging"
    for _ in range(300):
        if staging.exists() and any((p / "manifest.json").exists() for p in staging.iterdir()):
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return next(staging.iterdir())
