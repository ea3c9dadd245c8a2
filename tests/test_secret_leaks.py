"""No planted secret reaches git (any object, reachable or not) or the DVC cache, from any source:
argv, environment, launcher, job stdout and stderr, engine output, a dirty tracked file, --name and
--note, an extra log, a DVC-tracked big log, and a run recovered after ledger was SIGKILLed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import LEDGER, ledger
from repos import git
from secret_corpus import escaped_forms, named_lines, pem_block, prefixed_lines, rand, shape_lines, tokens

# The job prints every corpus line on stdout, stderr and as an engine line, and the values of the
# secret-named variables it was given in escaped forms no rule knows (only known values catch them).
JOB = r"""
import json, os, sys, time
lines = json.loads(os.environ["CORPUS_JSON"])
for i, line in enumerate(lines):
    out = sys.stdout if i % 2 else sys.stderr
    print(line, file=out, flush=True)
    print("(SGLangEngine pid=77) " + line, flush=True)
key = os.environ["WANDB_API_KEY"]
multi = os.environ["SERVICE_PASSWORD"]
print("repr:", repr(multi), "json:", json.dumps({"v": multi}), flush=True)
import base64, urllib.parse
print("q=" + urllib.parse.quote(key, safe=""), "b64", base64.b64encode(key.encode()).decode(), flush=True)
for part in multi.splitlines():
    print("line of value:", part, flush=True)
config = open("config.yaml").read() if os.path.exists("config.yaml") else ""
if "db_password: " in config:  # a value from a dirty tracked file, printed bare: a known value too
    print("loading key", config.split("db_password: ", 1)[1].split()[0], flush=True)
for i in range(int(os.environ.get("PAD_LINES", "0"))):
    print(f"[2026-11-29 10:00:00] train.py:1 - step {i}: {{'train/loss': 0.5}}", flush=True)
open("extra.log", "w").write("\n".join(lines) + "\n")
if os.environ.get("HANG"):
    print("READY", flush=True)
    time.sleep(600)
"""


def _secrets() -> tuple[list[str], list[str], dict[str, str]]:
    """(lines to print, secrets that must not survive, environment)."""
    tok = tokens()
    corpus = shape_lines(tok) + named_lines() + prefixed_lines()
    pem = pem_block("OPENSSH PRIVATE KEY", 5)
    lines = [line for line, _ in corpus] + pem
    must_not = [p for _, s in corpus for p in s.split(" ")] + pem[1:-1]
    env = {
        "WANDB_API_KEY": rand(32, "abcdef0123456789"),
        "SERVICE_PASSWORD": "first-" + rand(10) + "\nsecond-" + rand(10) + '/"+&',
        "CORPUS_JSON": json.dumps(lines),
    }
    must_not += [env["WANDB_API_KEY"], *env["SERVICE_PASSWORD"].splitlines()]
    must_not += escaped_forms(env["WANDB_API_KEY"]) + escaped_forms(env["SERVICE_PASSWORD"])
    return lines, [s for s in must_not if len(s) >= 6], env


def _everything_stored(repo: Path) -> bytes:
    """Every git object (loose and packed, reachable or not) and every file of the DVC cache."""
    blobs = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"], cwd=repo, stdout=subprocess.PIPE, check=True).stdout
    reachable = subprocess.run(["git", "log", "--all", "-p", "--format=%B"], cwd=repo, stdout=subprocess.PIPE, check=True).stdout
    cache = b"".join(p.read_bytes() for p in sorted((repo / ".dvc" / "cache").rglob("*")) if p.is_file())
    return blobs + reachable + cache


def _prepare(repo: Path) -> dict[str, str]:
    assert ledger(repo, "init").returncode == 0
    (repo / ".ledger.yaml").write_text("logs:\n  git_max_mb: 0.02\n  extra: ['extra.log']\n")
    (repo / "config.yaml").write_text("lr: 1.0e-06\napi_key: null\n")
    (repo / "job.py").write_text(JOB)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "clean config and job")
    return {}


def _run_env(env: dict[str, str], **more: str) -> dict[str, str]:
    return {**env, **more}


def test_no_planted_secret_reaches_git_or_dvc(repo: Path) -> None:
    _prepare(repo)
    lines, must_not, env = _secrets()
    tok = tokens()
    gh = next(s for s in must_not if s.startswith("gh" + "p_"))
    dirty_key = "sk" + "-" + rand(40) + "9"
    plain = "plain" + rand(16)  # no token shape: only known as the value of a secret-named key
    (repo / "config.yaml").write_text(f"lr: 1.0e-06\napi_key: {dirty_key}\ndb_password: {plain}\n")  # dirty tracked file
    launch_pw = rand(18)
    (repo / "launch.sh").write_text(  # an untracked launcher with secrets written in
        f'#!/bin/bash\nset -x\nexport DB_PASSWORD={launch_pw}\npython3 job.py --hub-token {tok["hf"]} "$@"\n'
    )
    note = f"retry with token {gh} after the outage"
    r = ledger(
        repo,
        "run",
        "--no-debug-data",
        "--name",
        f"leaky-{tok['gitlab']}",
        "--note",
        note,
        "--",
        "bash",
        "launch.sh",
        "--wandb-key",
        env["WANDB_API_KEY"],
        env=_run_env(env, PAD_LINES="300"),
    )
    assert r.returncode == 0, r.stderr
    must_not += [dirty_key, plain, launch_pw, tok["hf"], tok["gitlab"]]
    m = json.loads(ledger(repo, "show", "latest", "--json").stdout)
    assert m["logs"].get("in_dvc"), "the big-log path must be exercised"
    assert any(e.startswith("code/config.yaml: ") for e in m["redacted"])
    assert any(e.startswith("trainer.log: ") for e in m["redacted"])
    assert any(e.startswith("engine.log: ") for e in m["redacted"])
    assert any(e.startswith("note: ") for e in m["redacted"]) and any(e.startswith("name: ") for e in m["redacted"])
    stored = _everything_stored(repo)
    assert b"line of value: ***" in stored and b"step 299:" in stored  # the logs are really searched
    leaked = [s for s in must_not if s.encode() in stored]
    assert leaked == []
    for entry in m["redacted"]:  # kinds and places, never a value
        assert not any(s in entry for s in must_not)
    # the line count of the job's output is kept (masking replaces content only)
    folder = f"runs/{m['id'][-4:-2]}/{m['id']}"
    engine = git(repo, "show", f"experiments:{folder}/engine.log")
    assert len(engine.splitlines()) == len(lines)


def test_recovered_run_gets_the_same_scrub(repo: Path) -> None:
    _prepare(repo)
    lines, must_not, env = _secrets()
    full_env = {**os.environ, **env, "HANG": "1"}
    proc = subprocess.Popen(
        [*LEDGER, "run", "--no-debug-data", "--", sys.executable, "job.py"],
        cwd=repo,
        env=full_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stderr is not None
    deadline = time.time() + 60
    staging = repo / ".ledger" / "staging"
    while time.time() < deadline:
        raws = list(staging.glob("*/output.raw"))
        if raws and b"READY" in raws[0].read_bytes():
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the job never got ready")
    os.kill(proc.pid, signal.SIGKILL)  # ledger itself dies; its job is left behind
    proc.wait()
    r = ledger(repo, "recover")
    assert r.returncode == 0, r.stderr
    m = json.loads(ledger(repo, "show", "latest", "--json").stdout)
    assert m["status"]["state"] == "lost"
    assert any("known-value" in e for e in m["redacted"])  # the known-value scrub ran
    stored = _everything_stored(repo)
    leaked = [s for s in must_not if s.encode() in stored]
    assert leaked == []
    try:  # the job's process group, in case recover could not end it
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
