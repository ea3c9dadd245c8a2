"""Bounded cost per pulled run (issue 31, item 4): a run that holds too much is skipped or refused.

One pulled run with 400,000 settings (under the byte limit) made every `ledger diff` of any pair
take ~20 s, `ledger log` ~27 s and a diff with it ~2 minutes: the replica search read and compared
the settings of every run near in age, and `log` compared every run with the one before it. A clone
here pulls runs crafted with git plumbing (a temporary index, `update-index --index-info`,
`commit-tree`, `update-ref`), each holding more of one thing than ledger reads (docs/trust.md):
settings, summary metric names, files, steps, metric names per run. The listings skip the first
three with one warning each; a diff leaves out the two others where they are replicas; a verb that
names one refuses it in one line. Cost is shown by counting, never by timing:
`ledger.storage.limits.counting()` says how many entries of each record file were decoded.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import git, ledger, module_home, toy_repo, toy_train
from repos import git_env

from ledger import yamlio
from ledger.storage.limits import MAX_FILES, MAX_METRICS, MAX_SETTINGS, MAX_STEPS, counting, load_settings

TRAIN = toy_train(rollout_batch_size=4, n_samples_per_prompt=2, seed=3, num_rollout=2)
SKIPPED = ("settings", "metrics", "files")  # listings skip these runs
LEFT_OUT = ("steps", "names")  # replicas of `seed` whose metrics.jsonl is over a limit


def run_path(rid: str) -> str:
    return f"runs/{rid[-4:-2]}/{rid}"


@dataclass
class World:
    victim: Path
    seed: str  # a real run
    other: str  # a real run, one setting (lr) away from seed
    bad: dict[str, str] = field(default_factory=dict)  # case -> crafted run id


def _git(repo: Path, *args: str, data: bytes | None = None, env: dict[str, str] | None = None) -> bytes:
    proc = subprocess.run(["git", *args], cwd=repo, input=data, capture_output=True, env=env or git_env())
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def craft(repo: Path, seed: str, rid: str, files: dict[str, bytes]) -> None:
    """Commit run folder `rid`, the seed's with its id replaced and `files` laid over it, as a
    ledger run commit on `experiments`: every path of the folder in one `update-index --index-info`."""
    tip = git(repo, "rev-parse", "experiments").strip()
    code = git(repo, "rev-list", "--parents", "-n1", "experiments").split()[-1]
    src = run_path(seed)
    content = {}
    for rel in git(repo, "ls-tree", "-r", "--name-only", "experiments", src).split():
        content[rel[len(src) + 1 :]] = _git(repo, "show", f"experiments:{rel}").replace(seed.encode(), rid.encode())
    content.update({rel: data.replace(seed.encode(), rid.encode()) for rel, data in files.items()})
    blobs: dict[bytes, str] = {}
    lines = []
    for rel, data in content.items():
        if data not in blobs:
            blobs[data] = _git(repo, "hash-object", "-w", "--stdin", data=data).decode().strip()
        lines.append(f"100644 {blobs[data]}\t{run_path(rid)}/{rel}\n")
    env = {**git_env(), "GIT_INDEX_FILE": str(repo / ".git" / "craft-index")}
    _git(repo, "read-tree", tip, env=env)
    _git(repo, "update-index", "--index-info", data="".join(lines).encode(), env=env)
    tree = _git(repo, "write-tree", env=env).decode().strip()
    msg = f"run {rid} (x): exit 0, 1.0s\n\nRun-Id: {rid}\nCode-Commit: {code}\n"
    commit = _git(repo, "commit-tree", tree, "-p", tip, "-p", code, "-m", msg).decode().strip()
    git(repo, "update-ref", "refs/heads/experiments", commit, tip)


def _shown(repo: Path, rid: str, name: str) -> bytes:
    return _git(repo, "show", f"experiments:{run_path(rid)}/{name}")


def _crafted(repo: Path, seed: str) -> dict[str, dict[str, bytes]]:
    """Each case's files: one more of something than ledger reads, twice for settings."""
    settings = json.loads(_shown(repo, seed, "settings.json"))
    many = {f"flag-{i}": i for i in range(2 * MAX_SETTINGS)}
    manifest = _shown(repo, seed, "manifest.yaml")
    extra = "".join(f"  {k}: {v}\n" for k, v in many.items()).encode()
    summary = json.loads(_shown(repo, seed, "summary.json"))
    summary["metrics"] = {f"m/{i}": {"last": 1.0, "last_step": 0} for i in range(MAX_METRICS + 1)}
    names = {f"m/{i}": 1.0 for i in range(MAX_METRICS + 1)}
    return {
        "settings": {
            "settings.json": json.dumps({**settings, **many}).encode(),
            "manifest.yaml": manifest.replace(b"\nsettings:\n", b"\nsettings:\n" + extra, 1),
        },
        "metrics": {"summary.json": json.dumps(summary).encode()},
        "files": {f"extra-logs/{i}.log": b"" for i in range(MAX_FILES + 1)},
        "steps": {"metrics.jsonl": b'{"rollout_id": 0, "metrics": {}}\n' * (MAX_STEPS + 1)},
        "names": {"metrics.jsonl": json.dumps({"rollout_id": 0, "metrics": names}).encode() + b"\n"},
    }


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("limits")
    with module_home(tmp_path_factory, "home-limits"):
        seed_repo = toy_repo(root / "seed")
        bare = root / "origin.git"
        git(root, "init", "-q", "--bare", str(bare))
        git(seed_repo, "push", "-q", str(bare), "HEAD:refs/heads/main")
        shutil.rmtree(seed_repo)
        attacker = root / "attacker"
        git(root, "clone", "-q", str(bare), str(attacker))
        ids = []
        for lr in ("0.1", "0.2"):
            r = ledger(attacker, "run", "--", *TRAIN, "--lr", lr)
            assert r.returncode == 0, r.stderr
            ids.append(json.loads(ledger(attacker, "show", "latest", "--json").stdout)["id"])
        w = World(root / "victim", *ids)
        for n, (case, files) in enumerate(_crafted(attacker, w.seed).items()):
            w.bad[case] = rid = f"20260101-0000{n:02d}-{n:02x}{n:02x}"
            craft(attacker, w.seed, rid, files)
        git(attacker, "push", "-q", "origin", "experiments")
        git(root, "clone", "-q", str(bare), str(w.victim))
        r = ledger(w.victim, "pull")
        assert r.returncode == 0, r.stderr
        yield w


def _fresh_diff(repo: Path) -> None:
    """Forget the cached comparisons and replica searches: the next diff compares anew."""
    for kind in ("diffs", "replicas"):
        shutil.rmtree(repo / ".git" / "ledger" / kind, ignore_errors=True)


def _lines(text: str, rid: str) -> int:
    return sum(rid in line for line in text.splitlines())


def _one_error(err: str, rid: str) -> bool:
    lines = [line for line in err.splitlines() if line.startswith("ledger: error:")]
    return len(lines) == 1 and rid in lines[0] and "Traceback" not in err


REASONS = {
    "settings": f"settings.json holds more than {MAX_SETTINGS:,} settings",
    "metrics": f"summary.json holds more than {MAX_METRICS:,} metric names",
    "files": f"holds more than {MAX_FILES:,} files and folders",
    "steps": f"metrics.jsonl holds more than {MAX_STEPS:,} steps",
    "names": f"metrics.jsonl holds more than {MAX_METRICS:,} metric names",
}


@pytest.mark.parametrize("args", [["list"], ["list", "--json"], ["log"], ["list", "--changed"]])
def test_listings_skip_each_run_over_a_limit_with_one_warning(world: World, args: list[str]) -> None:
    r = ledger(world.victim, *args)
    assert r.returncode == 0, r.stderr
    assert world.seed in r.stdout and world.other in r.stdout
    for case in SKIPPED:
        rid = world.bad[case]
        assert rid not in r.stdout
        assert _lines(r.stderr, rid) == 1, r.stderr
        assert f"ledger: warning: run {rid} skipped: {run_path(rid)}" in r.stderr and REASONS[case] in r.stderr
    for case in LEFT_OUT:  # their listing fields are within the limits: listed, metrics never read
        assert world.bad[case] in r.stdout and world.bad[case] not in r.stderr


def test_a_diff_of_healthy_runs_warns_once_per_bad_run_and_reads_none_of_them(world: World) -> None:
    ledger(world.victim, "list")  # the listing index is made (a cold one is counted below)
    _fresh_diff(world.victim)
    with counting() as decoded:
        r = ledger(world.victim, "diff", world.seed, world.other, "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["refused"] is False and [c["name"] for c in report["changed"]] == ["lr"]
    for case in SKIPPED:
        assert _lines(r.stderr, world.bad[case]) == 1 and REASONS[case] in r.stderr, r.stderr
    for case in LEFT_OUT:  # replicas of seed (equal settings): left out, named once
        rid = world.bad[case]
        left_out = [w for w in report["warnings"] if rid in w]
        assert left_out == [f"replica {rid} left out: {run_path(rid)}/{REASONS[case]} (the most ledger reads)"]
        assert rid not in report["noise"]["replicas_a"] + report["noise"]["replicas_b"]
    assert not [f for f in decoded if any(world.bad[c] in f for c in SKIPPED)], decoded  # never read at all
    assert decoded[f"{run_path(world.bad['steps'])}/metrics.jsonl"] == 0  # its lines counted, none parsed
    assert decoded[f"{run_path(world.bad['names'])}/metrics.jsonl"] == 1  # its one step


def test_a_cold_listing_decodes_no_more_settings_than_the_limit(world: World) -> None:
    shutil.rmtree(world.victim / ".git" / "ledger")
    with counting() as decoded:
        r = ledger(world.victim, "log")
    assert r.returncode == 0, r.stderr
    rid = world.bad["settings"]
    assert decoded[f"{run_path(rid)}/settings.json"] == MAX_SETTINGS + 1  # of 2 x MAX_SETTINGS + ~10
    assert decoded[f"{run_path(world.seed)}/settings.json"] < 50  # the real run's, all of them
    with counting() as decoded:
        assert ledger(world.victim, "log").returncode == 0
    assert not [f for f in decoded if rid in f]  # the index keeps why it was skipped: never read again


@pytest.mark.parametrize("case", [*SKIPPED, *LEFT_OUT])
def test_show_and_diff_of_a_run_over_a_limit_refuse_in_one_line(world: World, case: str) -> None:
    rid = world.bad[case]
    _fresh_diff(world.victim)
    with counting() as decoded:
        r = ledger(world.victim, "diff", world.other, rid, "--force")
    assert r.returncode == 1 and _one_error(r.stderr, rid) and REASONS[case] in r.stderr, r.stderr
    if case in SKIPPED:  # refused from the listing index: nothing of it read
        assert not [f for f in decoded if rid in f], decoded
    else:  # its manifest (within the limits), and at most the one step of `names`
        assert decoded[f"{run_path(rid)}/metrics.jsonl"] <= 1, decoded
    r = ledger(world.victim, "show", rid)
    if case in SKIPPED:
        assert r.returncode == 1 and _one_error(r.stderr, rid) and REASONS[case] in r.stderr, r.stderr
    else:  # the manifest is what `show` prints, and it is within the limits
        assert r.returncode == 0 and rid in r.stdout, r.stderr


def test_a_manifest_over_the_settings_limit_is_refused_before_anything_is_built(world: World) -> None:
    raw = _git(world.victim, "show", f"experiments:{run_path(world.bad['settings'])}/manifest.yaml")
    with pytest.raises(yamlio.YamlError, match=f"holds more than {MAX_SETTINGS:,} settings"):
        yamlio.loads(raw, "manifest.yaml", max_entries={"settings": MAX_SETTINGS})
    assert yamlio.loads(raw, "manifest.yaml")["settings"]["flag-0"] == 0  # without the limit: all of it


@pytest.mark.parametrize(
    "text",
    [
        "{}",
        ' { "a" : 1 , "b:c" : [1, {"d": ":"}], "e": "f\\"g" } ',
        json.dumps({f"k{i}": i for i in range(MAX_SETTINGS)}),
        json.dumps({"x": ":" * (2 * MAX_SETTINGS)}),  # many colons, one setting
    ],
)
def test_settings_within_the_limit_read_as_json_reads_them(text: str) -> None:
    assert load_settings(text.encode(), "settings.json") == json.loads(text)


@pytest.mark.parametrize(
    "text, why",
    [
        (json.dumps({f"k{i}": i for i in range(MAX_SETTINGS + 1)}), f"more than {MAX_SETTINGS:,} settings"),
        ("[" + ",".join(":" for _ in range(MAX_SETTINGS + 1)) + "]", "not valid JSON"),
        ("[" + ",".join('":"' for _ in range(MAX_SETTINGS + 1)) + "]", "not a JSON object"),
        ('{"a": ' + "[" * 100 + "]" * 100 + ', "b": "' + ":" * (2 * MAX_SETTINGS) + '"}', "nests deeper"),
    ],
)
def test_settings_over_a_limit_or_not_an_object_are_refused(text: str, why: str) -> None:
    from ledger.manifest import ManifestError

    with pytest.raises(ManifestError, match=why):
        load_settings(text.encode(), "settings.json")
