"""The typed run record (`ledger.runrecord`): every manifest ledger writes, or ever wrote, reads into
a `RunRecord` and back to the same dict (keys, key order, values); newer schemas and wrong types are
the manifest error, never a traceback."""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import LEDGER, git, ledger

from ledger import yamlio
from ledger.manifest import ManifestError, check_manifest, new_manifest
from ledger.runrecord import UNSET, Code, Command, Image, RunRecord, Status, replace


def _shape(value: Any) -> Any:
    """The value with every mapping's key order made visible (dict equality ignores order)."""
    if isinstance(value, dict):
        return [[k, _shape(v)] for k, v in value.items()]
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return value


def _round_trips(m: dict[str, Any]) -> None:
    before = copy.deepcopy(m)
    back = RunRecord.from_dict(m).to_dict()
    assert _shape(back) == _shape(before)
    assert m == before  # reading never changes the dict it read


def _recorded(repo: Path) -> list[dict[str, Any]]:
    out = []
    log = git(repo, "log", "--first-parent", "--format=%(trailers:key=Run-Id,valueonly)", "experiments")
    for run_id in [line.strip() for line in log.splitlines() if line.strip()]:
        out.append(yamlio.loads(git(repo, "show", f"experiments:runs/{run_id[-4:-2]}/{run_id}/manifest.yaml")))
    return out


# the manifest a new run starts from, as `new_manifest` wrote it before the record was typed:
# the typed defaults must give exactly this (keys, order, values)
NEW_MANIFEST_SHAPE = {
    "schema": 1,
    "id": "20260101-000000-abcd",
    "name": None,
    "note": None,
    "started": "2026-01-01T00:00:00.000Z",
    "finished": None,
    "host": {"hostname": None, "user": None, "platform": None, "python": None},
    "command": {
        "argv": [],
        "cwd": None,
        "cwd_in_repo": None,
        "repo_root": None,
        "launcher": None,
        "launcher_sha256": None,
        "training_argv": None,
        "training_source": None,
        "ray_argv": None,
        "runtime_env": None,
        "added_args": [],
    },
    "code": {"commit": None, "branch": None, "dirty": False, "patch": None, "untracked_left_out": 0},
    "image": {
        "ref": None,
        "id": None,
        "digest": None,
        "miles_commit": None,
        "sglang_version": None,
        "sglang_commit": None,
        "megatron_commit": None,
        "labels": {},
        "source": None,
        "packages": {},
        "errors": [],
    },
    "seeds": {"seed": None, "rollout_seed": None},
    "settings": {},
    "logs": {"trainer": "trainer.log", "engine": "engine.log", "extra": [], "metrics": None, "heat": None},
    "gpu": None,
    "data": [],
    "status": {"state": "running", "exit_code": None, "signal": None, "duration_s": None},
    "replay_of": None,
    "replay": None,
    "trackers": None,
    "redacted": [],
    "env_report": [],
    "warnings": [],
}


def test_a_new_manifest_has_the_shape_it_always_had() -> None:
    m = new_manifest("20260101-000000-abcd", dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc))
    assert _shape(m) == _shape(NEW_MANIFEST_SHAPE)
    _round_trips(m)


def test_recorded_manifests_round_trip_exactly(repo: Path) -> None:
    """Real records: a launcher that forwards "$@" (launcher, its inputs, debug data through argv),
    a failed job with a --data output tracked by DVC, and non-UTF-8 bytes (`raw_bytes`)."""
    (repo / "config.yaml").write_text("lr: 1\n")
    (repo / "run.sh").write_text('#!/bin/sh\nexec python3 train.py --lr 1e-6 --seed 3 --config config.yaml "$@"\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "launcher")
    r = ledger(repo, "run", "--no-heat-guard", "--name", "one", "--note", "a note", "--", "sh", "run.sh")
    assert r.returncode == 0, r.stderr
    r = ledger(repo, "run", "--no-heat-guard", "--data", "out", "--", "sh", "-c", "mkdir -p out; echo x > out/f; exit 3")
    assert r.returncode == 3, r.stderr
    argv = [os.fsencode(a) for a in LEDGER] + [b"run", b"--no-heat-guard", b"--name", b"n\xff", b"--", b"echo", b"a\xffb"]
    proc = subprocess.run(argv, cwd=repo, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    manifests = _recorded(repo)
    assert len(manifests) == 3
    for m in manifests:
        _round_trips(m)
    utf8, failed, launched = manifests  # newest first
    assert "raw_bytes" in utf8 and RunRecord.from_dict(utf8).raw_bytes == utf8["raw_bytes"]
    rec = RunRecord.from_dict(failed)
    assert (rec.status.state, rec.status.exit_code) == ("failed", 3)
    assert [d.role for d in rec.data] == ["other"] and rec.data[0].template == "out"
    rec = RunRecord.from_dict(launched)
    assert rec.command.launcher == "run.sh" and rec.command.has("launcher_inputs") and rec.settings["lr"] == 1e-6
    assert rec.name == "one" and rec.note == "a note" and rec.seeds.seed == 3


def test_a_staged_manifest_round_trips(repo: Path) -> None:
    """The JSON a running run keeps in its staging folder (what `ledger recover` reads)."""
    proc = subprocess.Popen([*LEDGER, "run", "--no-heat-guard", "--", sys.executable, "-c", "import time; time.sleep(60)"], cwd=repo)
    try:
        staging = repo / ".ledger" / "staging"
        for _ in range(600):
            found = list(staging.glob("*/manifest.json")) if staging.is_dir() else []
            if found:
                break
            subprocess.run(["sleep", "0.05"])
        [path] = found
        m = json.loads(path.read_text())
    finally:
        proc.terminate()
        proc.wait(30)
    _round_trips(m)
    assert RunRecord.from_dict(m).status.state == "running"


def _old(**changes: Any) -> dict[str, Any]:
    m = copy.deepcopy(NEW_MANIFEST_SHAPE)
    m.update(id="20250101-000000-0a0b", started="2025-01-01T00:00:00.000Z", settings={"lr": 1e-6, "code.commit": "c" * 40})
    m.update(changes)
    return m


def test_older_manifests_read_with_defaults() -> None:
    """Shapes written before later keys existed: no `trackers` (before tracker links), a `code`
    without `content`/`ignore` (before the code setting), a `command` without `ledger_env`, no
    `logs.split`; a status without its optional keys. Each missing key reads as its default; the
    record written back has today's keys in today's order (nothing rewrites a committed manifest:
    `ledger show` prints the one stored)."""
    m = _old()
    del m["trackers"]
    m["code"] = {"commit": "c" * 40, "branch": "main", "dirty": True, "patch": "p" * 64}  # no untracked_left_out
    m["status"] = {"state": "finished", "exit_code": 0, "signal": None, "duration_s": 1.5}
    before = copy.deepcopy(m)
    rec = RunRecord.from_dict(m)
    assert m == before  # reading never changes the dict it read
    assert rec.trackers is None and rec.has("trackers")
    assert rec.code.content is UNSET and not rec.code.has("content") and not rec.code.ignore and rec.code.untracked_left_out == 0
    assert not rec.command.ledger_env and not rec.logs.split and not rec.status.ray_job
    assert not rec.command.has("ledger_env") and not rec.status.has("ray_job")
    full = copy.deepcopy(NEW_MANIFEST_SHAPE)
    full.update(id=m["id"], started=m["started"], settings=m["settings"])
    full["code"].update(m["code"])
    full["status"].update(m["status"])
    assert _shape(rec.to_dict()) == _shape(full)
    _round_trips(rec.to_dict())


def test_unknown_keys_are_kept_after_the_known_ones() -> None:
    """A key this version does not know (an image probe named in .ledger.yaml, a cluster run's
    per-node heat keys, a newer optional key) is kept, with its value, and written after the
    section's known keys."""
    m = _old()
    m["image"] = {"ref": "img:1", "cuda_version": "12.4", **{k: v for k, v in m["image"].items() if k != "ref"}}
    m["gpu"] = {"sensor": "nvml", "unavailable": None, "gpus": [], "nodes": {"n1": {"peak": 70}}, "pauses": 0}
    m["status"]["ray_job"] = {"submission_id": "raysubmit_1", "status": "SUCCEEDED"}
    m = {**{k: v for k, v in m.items() if k != "warnings"}, "future_key": {"a": [1, {"b": 2}]}, "warnings": ["w"]}
    rec = RunRecord.from_dict(m)
    assert rec.image.ref == "img:1" and rec.image.get("cuda_version") == "12.4"
    assert rec.gpu is not None and rec.gpu.get("nodes") == {"n1": {"peak": 70}} and rec.get("future_key") == {"a": [1, {"b": 2}]}
    back = rec.to_dict()
    assert list(back["image"])[-1] == "cuda_version" and back["image"]["cuda_version"] == "12.4"
    assert list(back["gpu"])[-1] == "nodes" and back["gpu"]["pauses"] == 0
    assert list(back)[-2:] == ["warnings", "future_key"] and back["future_key"] == {"a": [1, {"b": 2}]}
    assert back["status"]["ray_job"] == m["status"]["ray_job"]
    _round_trips(back)
    # a section built by ledger with data for keys (an image's probes) keeps them the same way
    image = Image().merged({"ref": "img:2", "cuda_version": "12.4"})
    assert image.ref == "img:2" and list(image.to_dict())[-1] == "cuda_version"


def test_a_key_set_when_it_applies_goes_in_its_place() -> None:
    """The order of a section's keys is its fields' order: a key set only when it applies is
    absent until set, and then in the place docs/manifest.md gives it."""
    command = replace(Command(), argv=["python3", "train.py"], cwd="/x")
    command = replace(replace(command, debug_data={"via": None}), launcher_inputs=["a.yaml"])
    d = command.to_dict()
    assert list(d)[:2] == ["argv", "cwd"] and list(d)[-2:] == ["launcher_inputs", "debug_data"]
    assert d["argv"] == ["python3", "train.py"] and "launcher_path" not in d
    code = replace(Code(), content="t" * 40, submodules={"sub": {"dirty": True}})
    assert list(code.to_dict())[-2:] == ["submodules", "content"]
    status = replace(Status(state="finished", exit_code=0, duration_s=1.0), escalated="SIGKILL after 30 s")
    assert list(status.to_dict()) == ["state", "exit_code", "signal", "duration_s", "escalated"]


def test_a_newer_schema_is_refused_as_check_manifest_refuses_it() -> None:
    m = _old(schema=2)
    with pytest.raises(ManifestError) as typed:
        RunRecord.from_dict(m, "runs/0a/x")
    with pytest.raises(ManifestError) as plain:
        check_manifest(m, "runs/0a/x")
    assert typed.value.message == plain.value.message == "runs/0a/x: manifest schema 2 is newer than this ledger understands (1)"
    assert typed.value.hint == plain.value.hint
    with pytest.raises(ManifestError, match="no schema version"):
        RunRecord.from_dict({k: v for k, v in _old().items() if k != "schema"})
    with pytest.raises(ManifestError, match="is not a mapping"):
        RunRecord.from_dict(["not", "a", "manifest"])


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("status", "exit_code"), "zero", "manifest 'status.exit_code' is not an integer"),
        (("status", "duration_s"), [1], "manifest 'status.duration_s' is not a number"),
        (("command",), None, "manifest 'command' is not a mapping"),
        (("command", "argv"), "python3 train.py", "manifest 'command.argv' is not a list"),
        (("code", "dirty"), "yes", "manifest 'code.dirty' is not true or false"),
        (("data",), {"role": "rollout"}, "manifest 'data' is not a list"),
        (("data",), ["rollout"], "manifest 'data.0' is not a mapping"),
        (("gpu",), [], "manifest 'gpu' is not a mapping"),
        (("name",), 7, "manifest 'name' is not text"),
    ],
)
def test_a_wrong_type_is_the_manifest_error_naming_the_key(path: tuple[str, ...], value: Any, message: str) -> None:
    m = _old()
    node = m
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ManifestError) as exc:
        RunRecord.from_dict(m, "runs/0a/20250101-000000-0a0b")
    assert exc.value.message == f"runs/0a/20250101-000000-0a0b: {message}"
    assert "corrupt" in (exc.value.hint or "")


def _replace_on_branch(repo: Path, run_id: str, path: str, data: bytes) -> None:
    """Commit `data` as `path` on the experiments branch (a hand-edited or damaged record)."""
    blob = (
        subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=data, capture_output=True, check=True)
        .stdout.decode()
        .strip()
    )
    env = {**os.environ, "GIT_INDEX_FILE": str(repo / ".git" / "ledger-test-index")}
    tip = git(repo, "rev-parse", "experiments").strip()
    subprocess.run(["git", "read-tree", tip], cwd=repo, env=env, check=True)
    subprocess.run(["git", "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}"], cwd=repo, env=env, check=True)
    tree = subprocess.run(["git", "write-tree"], cwd=repo, env=env, capture_output=True, check=True).stdout.decode().strip()
    commit = subprocess.run(
        ["git", "commit-tree", tree, "-p", tip, "-m", f"hand edit\n\nRun-Id: {run_id}"], cwd=repo, capture_output=True, check=True
    ).stdout.decode()
    git(repo, "update-ref", "refs/heads/experiments", commit.strip(), tip)


def test_show_and_diff_of_a_wrong_typed_record_say_which_key_without_a_traceback(repo: Path) -> None:
    """A record whose `status.exit_code` is text (hand-edited): `ledger show` and `ledger diff`
    answer with the one-line manifest error naming the run and the key, exit 1."""
    for lr in ("1", "2"):
        r = ledger(repo, "run", "--no-heat-guard", "--", "python3", "train.py", "--lr", lr)
        assert r.returncode == 0, r.stderr
    newer, older = (m["id"] for m in _recorded(repo))
    folder = f"runs/{older[-4:-2]}/{older}"
    m = yamlio.loads(git(repo, "show", f"experiments:{folder}/manifest.yaml"))
    m["status"]["exit_code"] = "zero"
    _replace_on_branch(repo, older, f"{folder}/manifest.yaml", yamlio.dumps(m).encode())
    for args in (("show", older), ("diff", older, newer)):
        r = ledger(repo, *args)
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        assert f"{folder}: manifest 'status.exit_code' is not an integer" in r.stderr
        assert "Traceback" not in r.stderr
