"""No planted secret reaches git (any object, reachable or not) or the DVC cache, from any source:
argv, environment, launcher, job stdout and stderr, engine output, a dirty tracked file, --name and
--note, an extra log, a DVC-tracked big log, the rollout data files ledger tracks with DVC (inside a
`.pt` zip too), a key given as a flag's value, and a run recovered after ledger was SIGKILLed."""

from __future__ import annotations

import json
import os
import signal
import string
import subprocess
import sys
import time
from pathlib import Path

from conftest import LEDGER, ledger
from repos import git
from secret_corpus import (
    ansi_lines,
    catalogue_lines,
    escaped_forms,
    named_lines,
    pem_block,
    prefixed_lines,
    provider_lines,
    provider_tokens,
    rand,
    round_three_lines,
    round_three_tokens,
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
print("hint:", os.environ.get("DEPLOY_HINT", ""), flush=True)  # a shape under a name that is no secret's
open("extra.log", "w").write("\n".join(lines) + "\n")
if os.environ.get("HANG"):
    print("READY", flush=True)
    time.sleep(600)
"""


def _round_three() -> list[tuple[str, str]]:
    """Round three's shapes and a value of every catalogue rule, plain and behind colour codes."""
    lines = round_three_lines(round_three_tokens()) + catalogue_lines()
    return lines + [(f"\x1b[1;33mWARN\x1b[0m \x1b[36m{line}\x1b[0m", s) for line, s in lines[:40]]


def _secrets() -> tuple[list[str], list[str], dict[str, str]]:
    """(lines to print, secrets that must not survive, environment)."""
    tok = tokens()
    corpus = shape_lines(tok) + named_lines() + prefixed_lines() + provider_lines(provider_tokens()) + syntax_lines() + ansi_lines(tok)
    corpus += _round_three()
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


def _ledger_folder(repo: Path) -> bytes:
    """Every file ledger keeps under `.ledger/` (staging, untracked outputs), but for the data files
    it held back: the user's own files, kept raw on this machine and never committed or pushed."""
    return b"".join(p.read_bytes() for p in sorted((repo / ".ledger").rglob("*")) if p.is_file() and "held-back" not in p.parts)


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
    r3 = round_three_tokens()  # round three's shapes under names that are no secret's, in every place
    note = f"retry with token {gh} after the outage, tracker {r3['linear']}"
    # round two: dirty UTF-16 text, a dirty binary holding a token, an index-new YAML block scalar,
    # a launcher heredoc (netrc, docker login) and a quoted value holding a quote under `set -x`
    prov = provider_tokens()
    utf16_secret, bin_secret = prov["stripe-live"], prov["npm"]
    (repo / "notes.txt").write_bytes(f"deploy key {utf16_secret}\nSENDGRID={prov['sendgrid']}\n".encode("utf-16"))
    (repo / "weights.bin").write_bytes(bytes(range(256)) * 4 + bin_secret.encode() + b"\0\1")
    with (repo / "config.yaml").open("a") as f:
        f.write(f"deploy: {r3['pulumi']}\nproxy_header: 'Authorization: SSWS 00{r3['fly'][4:]}'\n")
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
        "--deploy-with",
        r3["groq"],
        env=_run_env(env, PAD_LINES="300", DEPLOY_HINT=r3["perplexity"]),
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
        r3["linear"],
        r3["pulumi"],
        "00" + r3["fly"][4:],
        r3["groq"],
        r3["perplexity"],
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
    stored = _everything_stored(repo, shared, storage, users=users) + _ledger_folder(repo)
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
    engine = git(repo, "show", f"experiments:{folder}/engine.log")  # (over git_max_mb: a note tells where the rest is)
    assert len([ln for ln in engine.splitlines() if ln and not ln.startswith("[ledger: ")]) == len(lines)


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
    stored = _everything_stored(repo) + _ledger_folder(repo)
    leaked = [s for s in must_not if s.encode() in stored]
    assert leaked == []
    try:  # the job's process group, in case recover could not end it
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# A trainer ledger routes debug data for (slime, as tests/test_debug_framework.py), writing its
# rollouts in torch.save's zip layout (`archive/data.pkl`: the pickled object; `archive/data/<n>`:
# storages), stored or deflated, and a sample file under `--data`.
TRAINER = r"""
import argparse, json, os, pickle, zipfile
import slime  # noqa: F401
p = argparse.ArgumentParser()
p.add_argument("--save-debug-rollout-data")
p.add_argument("--signing-key")
args = p.parse_args()
planted = json.loads(os.environ["PLANTED"])
for rid, (text, storage, deflate) in enumerate(planted["rollouts"]):
    path = args.save_debug_rollout_data.format(rollout_id=rid)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        how = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
        z.writestr(zipfile.ZipInfo("archive/data.pkl"), pickle.dumps({"response": text, "reward": 0.5}), compress_type=how)
        z.writestr(zipfile.ZipInfo("archive/data/0"), bytes(range(256)) * 16 + storage.encode("utf-32-le"), compress_type=how)
os.makedirs("out", exist_ok=True)
open("out/samples.jsonl", "w").write(json.dumps({"text": planted["sample"]}) + "\n")
print("trained", len(args.signing_key or ""), flush=True)
"""


def pgp_key() -> str:
    """An armoured private key (RFC 4880): header, blank line, base64 lines, `=` checksum, tail."""
    body = "\n".join(rand(64, string.ascii_letters + string.digits + "+/") for _ in range(7))
    return f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{body}\n={rand(4)}\n-----END PGP PRIVATE KEY BLOCK-----"


def test_rollout_data_holding_secrets_never_reaches_dvc(repo: Path) -> None:
    """Each rollout but the first holds a secret somewhere in its zip: the run's known value (in a
    deflated pickle, base64'd, as UTF-32 in a storage), a round-three shape, a value of each catalogue rule; the
    `--data` file outside the staging folder one more. None reaches git, the DVC cache or remote, or
    a `.ledger` folder other than the held-back copies; the manifest names each file and rule. A PGP
    key given as a flag's value is no setting name and no `redacted` entry."""
    assert ledger(repo, "init").returncode == 0
    (repo / "slime").mkdir()
    (repo / "slime" / "__init__.py").write_text("")
    (repo / "train.py").write_text(TRAINER)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "trainer")
    known = "kv" + rand(30, "abcdef0123456789")
    r3 = round_three_tokens()
    import base64

    rollouts = [
        ("a clean response", "", False),
        (f"echo {known}", "", True),
        ("fine", base64.b64encode(f'{{"key": "{known}"}}'.encode()).decode(), True),
        ("fine", known, False),
        (f"deploy with {r3['postman']}", "", False),
    ]
    samples = catalogue_lines()  # a value of every catalogue rule, one rollout each
    rollouts += [(line, "", i % 2 == 0) for i, (line, _) in enumerate(samples)]
    key = pgp_key()
    env = {"WANDB_API_KEY": known, "PLANTED": json.dumps({"rollouts": rollouts, "sample": r3["supabase"]})}
    r = ledger(repo, "run", "--data", "out", "--", "python3", "train.py", "--signing-key", key, env=env)
    assert r.returncode == 0, r.stderr
    m = json.loads(ledger(repo, "show", "latest", "--json").stdout)
    rollout = next(d for d in m["data"] if d["role"] == "rollout")
    held = {(h["file"].split("!")[0], h["rule"]) for h in rollout["held_back"]}
    assert rollout["tracked"] and rollout["rollout_ids"] == [0] and {f for f, _ in held} == {f"{i}.pt" for i in range(1, len(rollouts))}
    assert {("1.pt", "known-value"), ("2.pt", "known-value"), ("3.pt", "known-value"), ("4.pt", "gitleaks:postman-api-token")} <= held
    other = next(d for d in m["data"] if d["role"] == "other")
    # (PLANTED's values are known ones too: a variable's value holding a shape is a known value)
    assert not other["tracked"] and {"file": "samples.jsonl", "rule": "supabase-token"} in other["held_back"]
    assert "held back" in r.stderr and known not in r.stderr
    kept = repo / ".ledger" / "untracked" / m["id"] / "held-back" / "rollout"
    assert sorted(p.name for p in kept.iterdir()) == sorted(f"{i}.pt" for i in range(1, len(rollouts)))  # the user's data is kept
    assert (repo / "out" / "samples.jsonl").is_file()
    assert set(m["settings"]) >= {"signing-key"} and all("PGP" not in k and "\n" not in k for k in m["settings"])
    shared, storage = repo.parent / "shared.git", repo.parent / "dvc-storage"
    git(repo.parent, "init", "-q", "--bare", str(shared))
    git(repo, "remote", "add", "origin", str(shared))
    subprocess.run(
        [sys.executable, "-m", "dvc", "remote", "add", "-d", "storage", str(storage)], cwd=repo, check=True, stdout=subprocess.DEVNULL
    )
    pushed = ledger(repo, "push")
    assert pushed.returncode == 0, pushed.stderr
    assert any(p.is_file() for p in storage.rglob("*"))  # rollout 0 went to the remote
    stored = _everything_stored(repo, shared, storage) + _ledger_folder(repo)
    stored_lower = stored.lower()
    must_not = [known, known.encode("utf-32-le").decode("latin-1"), r3["postman"], r3["supabase"], *(v for _, v in samples)]
    must_not += [ln for ln in key.splitlines() if len(ln) >= 6]
    leaked = [s for s in must_not if s.encode("latin-1") in stored or s.encode("latin-1").lower() in stored_lower]
    assert leaked == [], f"{len(leaked)} of {len(must_not)} planted values leaked"
