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
from secret_corpus import (
    ansi_lines,
    escaped_forms,
    named_lines,
    pem_block,
    prefixed_lines,
    provider_lines,
    provider_tokens,
    rand,
    shape_lines,
    syntax_lines,
    tokens,
    yaml_block,
)

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
print("wrapped key:", key[:12], flush=True)  # a known value wrapped over two lines
print(key[12:], "(end of key)", flush=True)
sys.stdout.buffer.write(("utf16 " + lines[0] + "\n").encode("utf-16-le"))  # UTF-16 output
sys.stdout.flush()
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
    corpus = shape_lines(tok) + named_lines() + prefixed_lines() + provider_lines(provider_tokens()) + syntax_lines() + ansi_lines(tok)
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
    must_not += [env["WANDB_API_KEY"][:12], env["WANDB_API_KEY"][12:]]
    first = next(s for line, s in corpus if line == lines[0])
    must_not += [first.encode("utf-16-le").decode("latin-1")]
    return lines, [s for s in must_not if len(s) >= 6], env


def _object_ids(repo: Path) -> set[str]:
    out = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch-check=%(objectname)"], cwd=repo, stdout=subprocess.PIPE, text=True, check=True
    ).stdout
    return set(out.split())


def _everything_stored(repo: Path, *more: Path, users: set[str] = frozenset()) -> bytes:  # type: ignore[assignment]
    """Every git object (loose and packed, reachable or not), every commit message and reflog entry,
    and every file of the DVC cache; and every file below `more` (remotes: a bare git repo, packs
    unpacked through git, and a DVC folder remote)."""
    out = []
    for where in (repo, *(m for m in more if (m / "HEAD").is_file())):
        ids = sorted(_object_ids(where) - (users if where == repo else set()))  # not what the user wrote
        out.append(
            subprocess.run(
                ["git", "cat-file", "--batch"], cwd=where, input="\n".join(ids).encode(), stdout=subprocess.PIPE, check=True
            ).stdout
        )
        out.append(
            subprocess.run(["git", "log", "--all", "--reflog", "-p", "--format=%B"], cwd=where, stdout=subprocess.PIPE, check=True).stdout
        )
        out.append(subprocess.run(["git", "reflog", "--all", "--format=%gs %s"], cwd=where, stdout=subprocess.PIPE, check=False).stdout)
    for folder in (repo / ".dvc" / "cache", *more):
        out += [p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()]
    return b"".join(out)


def _prepare(repo: Path) -> dict[str, str]:
    assert ledger(repo, "init").returncode == 0
    (repo / ".ledger.yaml").write_text("logs:\n  git_max_mb: 0.02\n  extra: ['extra.log']\n")
    (repo / "config.yaml").write_text("lr: 1.0e-06\napi_key: null\n")
    (repo / "notes.txt").write_bytes("clean notes\n".encode("utf-16"))
    (repo / "weights.bin").write_bytes(bytes(range(256)) * 4)
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
    # round two: dirty UTF-16 text, a dirty binary holding a token, an index-new YAML block scalar,
    # a launcher heredoc (netrc, docker login) and a quoted value holding a quote under `set -x`
    prov = provider_tokens()
    utf16_secret, bin_secret = prov["stripe-live"], prov["npm"]
    (repo / "notes.txt").write_bytes(f"deploy key {utf16_secret}\nSENDGRID={prov['sendgrid']}\n".encode("utf-16"))
    (repo / "weights.bin").write_bytes(bytes(range(256)) * 4 + bin_secret.encode() + b"\0\1")
    block, block_lines = yaml_block("api_key", ">-")
    (repo / "new.yaml").write_text(block)
    git(repo, "add", "new.yaml")
    netrc_pw, docker_pw, quoted = rand(20), rand(20), rand(20)
    (repo / "launch.sh").write_text(
        f"#!/bin/bash\nset -x\nexport DB_PASSWORD={launch_pw}\n"
        f"cat > /dev/null <<EOF\nmachine api.wandb.invalid\n  login user\n  password {netrc_pw}\nEOF\n"
        f": docker login -u bot -p {docker_pw} registry.invalid\n"
        f': --password "ab\'{quoted}"\n'
        f'python3 job.py --hub-token {tok["hf"]} "$@"\n'
    )
    users = _object_ids(repo)  # the user's own `git add` wrote new.yaml's blob: theirs, not ledger's
    refused = ledger(repo, "run", "--name", f"leaky-{tok['gitlab']}", "--", "true")
    assert refused.returncode == 125 and "--name holds what looks like a secret" in refused.stderr
    assert tok["gitlab"] not in refused.stderr
    r = ledger(
        repo,
        "run",
        "--no-debug-data",
        "--name",
        "leaky-run",
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
    assert "weights.bin is a changed binary file holding secret-shaped bytes" in r.stderr
    must_not += [
        dirty_key,
        plain,
        launch_pw,
        tok["hf"],
        tok["gitlab"],
        utf16_secret,
        prov["sendgrid"],
        bin_secret,
        *block_lines,
        netrc_pw,
        docker_pw,
        quoted,
    ]
    must_not += [utf16_secret.encode("utf-16-le").decode("latin-1")]
    m = json.loads(ledger(repo, "show", "latest", "--json").stdout)
    assert m["logs"].get("in_dvc"), "the big-log path must be exercised"
    assert any(e.startswith("code/config.yaml: ") for e in m["redacted"])
    assert any(e.startswith("trainer.log: ") for e in m["redacted"])
    assert any(e.startswith("engine.log: ") for e in m["redacted"])
    assert any(e.startswith("note: ") for e in m["redacted"])
    assert any(e.startswith("code/notes.txt: ") for e in m["redacted"])
    folder = f"runs/{m['id'][-4:-2]}/{m['id']}"
    shared, storage = repo.parent / "shared.git", repo.parent / "dvc-storage"
    git(repo.parent, "init", "-q", "--bare", str(shared))
    git(repo, "remote", "add", "origin", str(shared))
    subprocess.run(
        [sys.executable, "-m", "dvc", "remote", "add", "-d", "storage", str(storage)], cwd=repo, check=True, stdout=subprocess.DEVNULL
    )
    pushed = ledger(repo, "push")
    assert pushed.returncode == 0, pushed.stderr
    assert storage.is_dir() and any(p.is_file() for p in storage.rglob("*"))  # the big log went to the DVC remote
    stored = _everything_stored(repo, shared, storage, users=users)
    assert b"line of value: ***" in stored and b"step 299:" in stored  # the logs are really searched
    leaked = [s for s in must_not if s.encode("utf-8", "surrogateescape") in stored or s.encode("latin-1", "ignore") in stored]
    for s in leaked:
        i = stored.find(s.encode("utf-8", "surrogateescape"))
        print("LEAK", s, stored[max(0, i - 200) : i + 60])
    assert leaked == [], f"{len(leaked)} of {len(must_not)} planted values leaked"
    for entry in m["redacted"]:  # kinds and places, never a value
        assert not any(s in entry for s in must_not)
    tree = git(repo, "ls-tree", "-r", "--name-only", f"experiments:{folder}")
    assert "weights.bin" not in tree or "code/weights.bin" not in tree
    # the line count of the job's output is kept (masking replaces content only)
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
