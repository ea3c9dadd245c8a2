"""Pulled run folders of the wrong shape, and pulled text a spreadsheet would run (issue 31, items 2 and 5).

An attacker clone records one real run with the toy trainer, then commits crafted run folders with
git plumbing: the run's logs and metrics as gitlinks (tree entries of mode 160000), its record
files as a gitlink, a folder and a symbolic link, its `data` folder as a symbolic link, string
metric values, and names, notes, tags, settings and metric names a spreadsheet would take for
formulas. A victim clone pulls all of it and records its own run. Every verb keeps working on
the healthy runs; a bad run is refused or skipped in one line, never an internal error.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import git, module_home, toy_repo
from repos import git_env
from test_hostile_remote import TRAIN, _git_bytes, _one_line, run, run_path

GITLINK = "160000"
LINK = "120000"
SOME_COMMIT = "1234567890abcdef1234567890abcdef12345678"  # a gitlink names a commit the repo need not have
NEWLINE_NAME = "two\nlines"
SCRIPT_NAME = "<script>alert(1)<\\script>"  # a name no `ledger run --name` takes: pulled, it is text on a page
FORMULAS = ('=HYPERLINK("http://evil.example","y")', "@SUM(1)", "+cmd|' /C calc'!A0", "-2+3")


@dataclass
class World:
    root: Path
    attacker: Path
    victim: Path
    seed: str
    evil: dict[str, str] = field(default_factory=dict)  # case -> crafted run id
    own: str = ""
    first_pull: subprocess.CompletedProcess[str] | None = None


Entry = bytes | tuple[str, str] | None  # a file's bytes, (mode, oid) as it is, or None: left out


def plant(repo: Path, seed: str, rid: str, entries: dict[str, Entry]) -> None:
    """Commit run folder `rid` (`seed`'s with its id replaced, `entries` changed) as a ledger run
    commit on `experiments` with git plumbing: a temporary index, `update-index --cacheinfo` with
    any mode (a gitlink, a link), `commit-tree`. A path under a name makes that name a folder."""
    tip = git(repo, "rev-parse", "experiments").strip()
    code = git(repo, "rev-list", "--parents", "-n1", "experiments").split()[-1]
    src = run_path(seed)
    content: dict[str, Entry] = {}
    for rel in git(repo, "ls-tree", "-r", "--name-only", "experiments", src).split():
        content[rel[len(src) + 1 :]] = _git_bytes(repo, "show", f"experiments:{rel}").replace(seed.encode(), rid.encode())
    for rel, value in entries.items():  # a path set as a file replaces the folder of that name
        content = {k: v for k, v in content.items() if not k.startswith(rel + "/")} | {rel: value}
    env = {**git_env(), "GIT_INDEX_FILE": str(repo / ".git" / "plant-index")}
    _git_bytes(repo, "read-tree", tip, env=env)
    for rel, value in content.items():
        if value is None:
            continue
        mode, oid = value if isinstance(value, tuple) else ("100644", "")
        if isinstance(value, bytes):
            oid = _git_bytes(repo, "hash-object", "-w", "--stdin", data=value).decode().strip()
        _git_bytes(repo, "update-index", "--add", "--cacheinfo", f"{mode},{oid},{run_path(rid)}/{rel}", env=env)
    tree = _git_bytes(repo, "write-tree", env=env).decode().strip()
    msg = f"run {rid} (x): exit 0, 1.0s\n\nRun-Id: {rid}\nCode-Commit: {code}\n"
    commit = _git_bytes(repo, "commit-tree", tree, "-p", tip, "-p", code, "-m", msg).decode().strip()
    git(repo, "update-ref", "refs/heads/experiments", commit, tip)


def _link(repo: Path, target: str) -> tuple[str, str]:
    return LINK, _git_bytes(repo, "hash-object", "-w", "--stdin", data=target.encode()).decode().strip()


def _json_of(repo: Path, seed: str, rid: str, file: str, **changes: object) -> bytes:
    data = json.loads(_git_bytes(repo, "show", f"experiments:{run_path(seed)}/{file}").replace(seed.encode(), rid.encode()))
    return json.dumps({**data, **changes}).encode()


def _manifest(repo: Path, seed: str, rid: str, **changes: object) -> bytes:
    from ledger import yamlio

    m = yamlio.loads(_git_bytes(repo, "show", f"experiments:{run_path(seed)}/manifest.yaml").replace(seed.encode(), rid.encode()))
    for key, value in changes.items():
        if key == "settings":
            m["settings"].update(value)  # type: ignore[call-overload]
        else:
            m[key] = value
    return yamlio.dumps(m).encode()


def _metrics_jsonl(rows: list[dict[str, object]]) -> bytes:
    meta = {"meta": {"version": 1, "sources": ["trainer.log"], "malformed": 0, "malformed_examples": []}}
    return b"".join(json.dumps(r).encode() + b"\n" for r in [meta, *rows])


def _craft_all(w: World) -> None:
    ids = iter(f"20260201-0000{n:02d}-{n:02x}{n:02x}" for n in range(10, 40))
    summary = json.loads(_git_bytes(w.attacker, "show", f"experiments:{run_path(w.seed)}/summary.json"))
    _craft_kinds(w, ids)
    _craft_numbers(w, ids, summary)
    _craft_texts(w, ids, summary)


def _craft_kinds(w: World, ids: Iterator[str]) -> None:
    """Gitlinks, a folder and links where a run folder has files, a link where it has `data/`."""
    a, seed = w.attacker, w.seed
    # logs and metrics as gitlinks: the record itself reads, its files do not
    w.evil["gitlogs"] = rid = next(ids)
    logs: dict[str, Entry] = {n: (GITLINK, SOME_COMMIT) for n in ("trainer.log", "engine.log", "metrics.jsonl")}
    plant(
        a,
        seed,
        rid,
        {
            **logs,
            "manifest.yaml": _manifest(a, seed, rid, name="gitlogs"),
            "summary.json": _json_of(a, seed, rid, "summary.json", name="gitlogs"),
        },
    )
    # the record files themselves of the wrong kind: a gitlink, a folder, a link
    w.evil["gitrecord"] = rid = next(ids)
    plant(
        a,
        seed,
        rid,
        {"summary.json": (GITLINK, SOME_COMMIT), "settings.json": None, "settings.json/x": b"{}", "manifest.yaml": _link(a, "/etc/passwd")},
    )
    # `data` a symbolic link, and a run whose data/rollout.dvc is a gitlink
    w.evil["datalink"] = rid = next(ids)
    plant(a, seed, rid, {"data": _link(a, "../../../.dvc")})
    w.evil["dvclink"] = rid = next(ids)
    plant(a, seed, rid, {"data/rollout.dvc": (GITLINK, SOME_COMMIT)})


def _craft_numbers(w: World, ids: Iterator[str], summary: dict[str, Any]) -> None:
    """Metric values that are text, in summary.json and in metrics.jsonl."""
    a, seed = w.attacker, w.seed
    one_metric = next(iter(summary["metrics"]))
    w.evil["strmetric"] = rid = next(ids)
    metrics = {**summary["metrics"], one_metric: {"last": "abc", "last_step": "x", "min": "abc", "min_step": 0, "max": [1], "max_step": 0}}
    rows = [
        {"rollout_id": 0, "t_start": "then", "t_end": None, "metrics": {one_metric: "abc", "perf/step_time": 1.5}},
        {"rollout_id": "one", "metrics": {}},
    ]
    plant(a, seed, rid, {"summary.json": _json_of(a, seed, rid, "summary.json", name="strmetric", metrics=metrics)})
    w.evil["stepstr"] = rid = next(ids)
    plant(a, seed, rid, {"summary.json": _json_of(a, seed, rid, "summary.json", name="stepstr"), "metrics.jsonl": _metrics_jsonl(rows)})


def _craft_texts(w: World, ids: Iterator[str], summary: dict[str, Any]) -> None:
    """Text a spreadsheet runs (a name, note, tags, a setting value, metric names), markup, a newline."""
    a, seed = w.attacker, w.seed
    one_metric = next(iter(summary["metrics"]))
    w.evil["formula"] = rid = next(ids)
    name, note, tag, setting = FORMULAS[0], FORMULAS[1], FORMULAS[2], "=1+1"
    settings = json.loads(_git_bytes(a, "show", f"experiments:{run_path(seed)}/settings.json"))
    metrics = {**summary["metrics"], FORMULAS[3]: summary["metrics"][one_metric]}
    rows = [{"rollout_id": 0, "t_start": 1.0, "t_end": 2.0, "metrics": {FORMULAS[0]: 1.0, "x": "=2+2"}}]
    plant(
        a,
        seed,
        rid,
        {
            "manifest.yaml": _manifest(a, seed, rid, name=name, note=note, settings={"seed": setting}),
            "summary.json": _json_of(a, seed, rid, "summary.json", name=name, note=note, metrics=metrics),
            "settings.json": json.dumps({**settings, "seed": setting}).encode(),
            "meta.json": json.dumps({"tags": [tag, setting], "note": note}).encode(),
            "metrics.jsonl": _metrics_jsonl(rows),
        },
    )
    w.evil["script"] = rid = next(ids)
    plant(a, seed, rid, {"summary.json": _json_of(a, seed, rid, "summary.json", name=SCRIPT_NAME)})
    w.evil["newline"] = rid = next(ids)
    plant(
        a,
        seed,
        rid,
        {
            "summary.json": _json_of(a, seed, rid, "summary.json", name=NEWLINE_NAME),
            "manifest.yaml": _manifest(a, seed, rid, name=NEWLINE_NAME),
        },
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("tree")
    with module_home(tmp_path_factory, "home-tree"):
        storage = root / "dvc-storage"
        storage.mkdir()
        seed_repo = toy_repo(root / "seed", {"README.md": "seed\n"})
        subprocess.run(
            [sys.executable, "-m", "dvc", "remote", "add", "-d", "storage", str(storage)], cwd=seed_repo, check=True, capture_output=True
        )
        git(seed_repo, "commit", "-q", "-am", "the DVC remote")
        bare = root / "origin.git"
        git(root, "init", "-q", "--bare", str(bare))
        git(seed_repo, "push", "-q", str(bare), "HEAD:refs/heads/main")
        shutil.rmtree(seed_repo)
        attacker = root / "attacker"
        git(root, "clone", "-q", str(bare), str(attacker))
        r = run(attacker, "run", "--name", "seed", "--", *TRAIN)
        assert r.returncode == 0, r.stderr
        seed = json.loads(run(attacker, "show", "seed", "--json").stdout)["id"]
        assert run(attacker, "push").returncode == 0
        w = World(root, attacker, root / "victim", seed)
        _craft_all(w)
        git(attacker, "push", "-q", "origin", "experiments")
        git(root, "clone", "-q", str(bare), str(w.victim))
        w.first_pull = run(w.victim, "pull")
        if w.first_pull.returncode != 0:  # checked by its own test; the other cases still get the runs
            git(w.victim, "fetch", "-q", "origin", "experiments:experiments")
        r = run(w.victim, "run", "--name", "base", "--", *TRAIN)
        assert r.returncode == 0, r.stderr
        w.own = git(w.victim, "log", "-1", "--format=%(trailers:key=Run-Id,valueonly)", "experiments").strip()
        yield w


def _no_internal(r: subprocess.CompletedProcess[str]) -> bool:
    return "internal error" not in r.stderr and "Traceback" not in r.stderr


def _refused(r: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    """Refused with `code` in one line (`ledger: error: ...`) holding `words`, no internal error."""
    assert r.returncode == code and _one_line(r.stderr) and _no_internal(r), r.stderr
    for word in words:
        assert word in r.stderr, (word, r.stderr)


def _warned_once(stderr: str, rid: str, why: str) -> None:
    lines = [line for line in stderr.splitlines() if rid in line]
    assert len(lines) == 1 and "warning" in lines[0] and why in lines[0], stderr


BAD = {  # case -> what its one warning says
    "gitlogs": "trainer.log is a gitlink",
    "gitrecord": "manifest.yaml is a symbolic link",
    "strmetric": "has a 'last' that is not a number",
}


def test_pull_and_list_skip_each_bad_run_with_one_warning(world: World) -> None:
    assert world.first_pull is not None
    assert world.first_pull.returncode == 0 and _no_internal(world.first_pull), world.first_pull.stderr
    r = run(world.victim, "list", "--json")
    assert r.returncode == 0 and _no_internal(r), r.stderr
    listed = {row["id"] for row in json.loads(r.stdout)}
    good = {world.seed, world.own} | {world.evil[k] for k in ("datalink", "dvclink", "stepstr", "formula", "script", "newline")}
    assert good <= listed and not listed & {world.evil[k] for k in BAD}
    for case, why in BAD.items():
        _warned_once(r.stderr, world.evil[case], why)


@pytest.mark.parametrize("case", ["gitlogs", "gitrecord"])
def test_every_verb_refuses_a_run_of_files_that_are_not_files_in_one_line(world: World, case: str) -> None:
    rid, v = world.evil[case], world.victim
    why = BAD[case].split(" is ")[0]
    for args in (
        ["show", rid],
        ["tail", rid],
        ["diff", "seed", rid, "--force"],
        ["replay", rid, "--dry-run"],
        ["export", rid],
        ["heat", rid],
        ["compare", "seed", rid],
        ["tag", rid, "x"],
        ["show", rid[:-1]],  # by a prefix: the listing's entry, which names none of its files
    ):
        _refused(run(v, *args), 1, rid, why)


def test_healthy_runs_still_show_diff_and_report(world: World) -> None:
    v = world.victim
    r = run(v, "report", "--html", str(v / "report.html"))
    assert r.returncode == 0 and _no_internal(r) and (v / "report.html").is_file(), r.stderr
    for case, why in BAD.items():
        _warned_once(r.stderr, world.evil[case], why)
    page = v / "diff.html"
    r = run(v, "diff", "seed", "base", "--force", "--html", str(page))
    assert r.returncode == 0 and _no_internal(r) and page.is_file(), r.stderr
    for args in (
        ["show", "base"],
        ["tail", "seed"],
        ["log"],
        ["replay", "base", "--dry-run"],
        ["compare", "seed", "base", "--html", str(v / "compare.html")],
        ["export", "base"],
    ):
        r = run(v, *args)
        assert r.returncode == 0 and _no_internal(r), (args, r.stderr)


def test_a_data_folder_that_is_a_link_or_a_gitlink_is_refused_and_the_rest_fetched(world: World) -> None:
    v, link, gitlink = world.victim, world.evil["datalink"], world.evil["dvclink"]
    _refused(run(v, "pull", "origin", link), 5, f"{run_path(link)}/data is a symbolic link, not a folder")
    _refused(run(v, "pull", "origin", gitlink), 5, f"{run_path(gitlink)}: data/rollout.dvc is a gitlink")
    _refused(run(v, "replay", gitlink, "--dry-run", "--yes"), 5, "data/rollout.dvc is a gitlink")
    r = run(v, "pull", "--all-data")
    assert r.returncode == 5 and _no_internal(r), r.stderr
    _warned_once(r.stderr, link, "data is a symbolic link")
    _warned_once(r.stderr, gitlink, "is a gitlink")
    assert "fetched data of" in r.stderr, r.stderr
    r = run(v, "replay", world.seed, "--dry-run", "--yes")  # the healthy run's data came
    assert r.returncode == 0, r.stderr


def test_metric_values_that_are_text_never_reach_a_page(world: World) -> None:
    v = world.victim
    rid = world.evil["strmetric"]
    _refused(run(v, "compare", "seed", rid), 1, rid, "'last' that is not a number")
    page = v / "stepstr.html"
    r = run(v, "compare", "seed", "stepstr", "--html", str(page))
    assert r.returncode == 0 and _no_internal(r) and page.is_file(), r.stderr
    rows = list(csv.DictReader(io.StringIO(run(v, "export", "stepstr").stdout)))
    assert [row["step"] for row in rows] == ["0"], rows  # the row whose step is "one" is left out
    assert rows[0]["perf/step_time"] == "1.5" and "abc" not in json.dumps(rows)
    for args in (["list", "--metric", "*"], ["diff", "seed", "stepstr", "--force"]):
        r = run(v, *args)
        assert r.returncode == 0 and _no_internal(r), (args, r.stderr)


def _formula_cells(text: str, sep: str = ",") -> list[str]:
    """Cells a spreadsheet would run: they start a formula and are no number."""
    cells = [c for row in csv.reader(io.StringIO(text), delimiter=sep) for c in row]
    return [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r") and not _number(c)]


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_csv_cells_never_start_a_formula(world: World) -> None:
    v, rid = world.victim, world.evil["formula"]
    r = run(v, "list", "--csv")
    assert r.returncode == 0 and _formula_cells(r.stdout) == [], _formula_cells(r.stdout)
    (row,) = [row for row in csv.DictReader(io.StringIO(r.stdout)) if row["id"] == rid]
    assert row["name"] == "'" + FORMULAS[0] and row["note"] == "'" + FORMULAS[1]
    assert row["tags"].startswith("'" + FORMULAS[2]) and row["settings.seed"] == "'=1+1"
    assert row[f"metrics.{FORMULAS[3]}.last"] != ""  # a formula-like metric name is a column as it is
    for fmt, sep in (("csv", ","), ("tsv", "\t")):
        r = run(v, "export", rid, "--format", fmt)
        assert r.returncode == 0 and _formula_cells(r.stdout, sep) == [], r.stdout
        header = next(csv.reader(io.StringIO(r.stdout), delimiter=sep))
        assert "'" + FORMULAS[0] in header
    assert [m["name"] for m in json.loads(run(v, "list", "--json").stdout) if m["id"] == rid] == [FORMULAS[0]]  # JSON exact


def test_a_pulled_name_holding_markup_is_text_on_the_compare_page(world: World) -> None:
    page = world.victim / "script.html"
    r = run(world.victim, "compare", "seed", world.evil["script"], "--html", str(page))
    assert r.returncode == 0, r.stderr
    html = page.read_text()
    assert "<script" not in html and "&lt;script&gt;alert(1)" in html


def test_a_pulled_name_with_a_newline_stays_on_its_row(world: World) -> None:
    v, rid = world.victim, world.evil["newline"]
    for verb in ("list", "log"):
        r = run(v, verb)
        assert r.returncode == 0, r.stderr
        (line,) = [line for line in r.stdout.splitlines() if rid in line]
        assert "two\\x0alines" in line and not any(x.startswith("lines") for x in r.stdout.splitlines()), r.stdout
    r = run(v, "show", "no-such-run")  # the hint names the recent runs, this one among them
    assert r.returncode == 4 and len(r.stderr.splitlines()) == 1 and "two lines" in r.stderr, r.stderr


@pytest.mark.parametrize("name", ["=1+1", 'a"b', "a'b", "a<b>", "a b", "a\nb", "@SUM(1)", "a,b"])
def test_a_name_that_is_no_word_is_refused_before_the_job_starts(world: World, name: str) -> None:
    v = world.victim
    r = run(v, "run", "--name", name, "--", "python3", "-c", "open('job-ran', 'w')")
    _refused(r, 125, "--name", "letters, digits")
    assert not (v / "job-ran").exists()
    staging = v / ".ledger" / "staging"
    assert not staging.exists() or not any(staging.iterdir())


def test_replay_and_tag_check_names_and_tags_at_the_door(world: World) -> None:
    v, rid = world.victim, world.evil["formula"]
    _refused(run(v, "replay", "base", "--dry-run", "--name", "=x"), 125, "--name")
    for tag in ("=1+1", "<b>", 'a"b', "x'y"):
        _refused(run(v, "tag", "base", tag), 2, "not one short word")
    r = run(v, "tag", rid, "--rm", "=1+1")  # a pulled tag can always be taken away
    assert r.returncode == 0, r.stderr
    (m,) = [m for m in json.loads(run(v, "list", "--json").stdout) if m["id"] == rid]
    assert m["tags"] == [FORMULAS[2]]


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ('=HYPERLINK("http://x","y")', '\'=HYPERLINK("http://x","y")'),
        ("@SUM(1)", "'@SUM(1)"),
        ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
        ("-2+3", "'-2+3"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("-0.5", "-0.5"),
        ("+3", "+3"),
        ("-1e-05", "-1e-05"),
        (-3, -3),
        (2.5, 2.5),
        (None, ""),
        ("plain", "plain"),
        ("a=b", "a=b"),
    ],
)
def test_a_spreadsheet_cell_is_text_or_a_number(value: object, cell: object) -> None:
    from ledger.textfmt import spreadsheet_cell

    assert spreadsheet_cell(value) == cell


def test_csv_text_neutralises_the_header_and_every_row() -> None:
    from ledger.textfmt import csv_text

    text = csv_text(["step", "=x"], [[0, "@y"], [1, None]], "\t")
    assert list(csv.reader(io.StringIO(text), delimiter="\t")) == [["step", "'=x"], ["0", "'@y"], ["1", ""]]
