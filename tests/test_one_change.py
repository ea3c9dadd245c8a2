"""The one-change rule on real work (issue 22): code compared by content, launcher inputs, the
entry point, ledger's own variables, the refusal's help, settings that are not experiment settings.

The launchers are in the shapes of radixark/miles' own (tests/miles_shapes/inproc/README.md says
which real file each follows): a Python launcher whose model file is read in-process, a variant
model file delegating to a sibling, a bash launcher calling `model_args_utils.py NAME`.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import git, ledger, make_repo

from ledger.compare.changes import change_log, changed_settings
from ledger.compare.diffcore import build_report
from ledger.compare.render import render_text
from ledger.compare.settingsview import comparable
from ledger.config import DEFAULT_TRAINING_PATTERNS, CodeSection, Config
from ledger.record import facts
from ledger.record.codeset import counts, record_code, training_entries
from ledger.runrecord import Code, Command, RunRecord
from ledger.storage.git import Repo
from ledger.understand.launcher_inputs import launcher_inputs
from ledger.understand.settings import DEFAULT_IGNORE, entry_point


def _settings_section(
    m: dict[str, Any],
    cfg: Config,
    lines: list[str],
    argv: list[str],
    records: list[Any] | None = None,
    environ: dict[str, str] | None = None,
) -> None:
    """What `finish` writes of the training facts, into a manifest's dict."""
    record = RunRecord.partial(m)
    done = facts.training_facts(record, cfg, lines, argv, records, environ).applied(record)
    m.update(redacted=list(done.redacted), command=done.command.to_dict(), env_report=list(done.env_report))
    m.update(seeds=done.seeds.to_dict(), warnings=list(done.warnings), settings=dict(done.settings))


SHAPES = Path(__file__).resolve().parent / "miles_shapes"
INPROC = SHAPES / "inproc"


def _shaped_repo(path: Path) -> Path:
    files = {p.relative_to(INPROC).as_posix(): p.read_text() for p in INPROC.rglob("*") if p.is_file()}
    return make_repo(path, {**files, ".gitignore": "seen-argv.json\n__pycache__/\n"})


def _changed(repo: Path, a: str, b: str) -> dict[str, Any]:
    r = ledger(repo, "diff", a, b, "--json")
    assert r.returncode in (0, 3), r.stderr
    return json.loads(r.stdout)


def _names(data: dict[str, Any]) -> list[str]:
    return [c["name"] for c in data["changed"]]


# ---------------------------------------------------------------- item 1: code by content


def test_code_rule_leaves_out_documentation_bookkeeping_and_ignore_globs() -> None:
    for path in (
        "README.md",
        "examples/x/README.md",
        "docs/conf.py",
        "LICENSE",
        "LICENSE.txt",
        ".ledger.yaml",
        ".dvc/config",
        ".dvcignore",
        ".gitignore",
        "sub/.gitignore",
        "runs/ab/x/manifest.yaml",
        ".github/workflows/ci.yaml",
        "guide.rst",
    ):
        assert not counts(path), path
    for path in ("train.py", "scripts/models/tiny.py", "sub/docs.py", "notes/a.txt", "src/runs/x.py", "x.yaml"):
        assert counts(path), path
    assert not counts("notes/a.txt", ["notes/"]) and not counts("deep/a.log", ["*.log"])
    assert not counts("bench/out/x.json", ["bench/out/*"]) and counts("bench/x.py", ["bench/out/*"])


def test_a_commit_that_touches_no_code_is_not_a_difference(tmp_path: Path) -> None:
    """The issue's first case: without a launcher, an unrelated commit (a README line, `.dvc/config`,
    a `.ledger.yaml` tweak, a file under a `code: ignore:` glob) made `code.commit` a second
    difference; only the flag differs now. A code edit is `code`, naming the file; a different
    script is `command.entry`; `ledger log` and `list --changed` say the same."""
    repo = make_repo(
        tmp_path / "proj", {"README.md": "hello\n", "train.py": "print('hi')\n", "train_async.py": "print('hi')\n", "notes/n.txt": "1\n"}
    )
    assert ledger(repo, "init").returncode == 0
    config = (repo / ".ledger.yaml").read_text()
    assert "code:\n  ignore: []" in config  # `ledger init` writes the key
    (repo / ".ledger.yaml").write_text(config.replace("code:\n  ignore: []", "code:\n  ignore: [notes/]"))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "ledger init")
    run = ["run", "--no-debug-data", "--name"]
    assert ledger(repo, *run, "one", "--", "python3", "train.py", "--lr", "1").returncode == 0
    (repo / "README.md").write_text("hello, more\n")
    (repo / ".dvc").mkdir(exist_ok=True)
    (repo / ".dvc" / "config").write_text("[core]\n    remote = store\n")
    (repo / "notes" / "n.txt").write_text("2\n")
    (repo / ".ledger.yaml").write_text((repo / ".ledger.yaml").read_text().replace("pause_at: 85", "pause_at: 86"))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "docs, dvc remote, heat tweak")
    assert ledger(repo, *run, "two", "--", "python3", "train.py", "--lr", "2").returncode == 0
    assert _names(_changed(repo, "one", "two")) == ["lr"]
    assert ledger(repo, *run, "three", "--", "python3", "train_async.py", "--lr", "2").returncode == 0
    assert _names(_changed(repo, "two", "three")) == ["command.entry"]
    (repo / "train_async.py").write_text("print('changed')\n")
    git(repo, "commit", "-qam", "a real code change")
    assert ledger(repo, *run, "four", "--", "python3", "train_async.py", "--lr", "2").returncode == 0
    data = _changed(repo, "three", "four")
    assert _names(data) == ["code"] and data["code_files"] == ["train_async.py"]
    text = ledger(repo, "diff", "three", "four").stdout
    assert "code files changed: train_async.py" in text and "+print('changed')" in text
    assert "README.md" not in text.split("code diff:")[1]
    log = ledger(repo, "log").stdout
    assert "two: lr: 1 -> 2" in log and "three: command.entry: train.py -> train_async.py" in log
    listed = ledger(repo, "list", "--changed").stdout
    assert "code.commit" not in listed and "lr: 1 -> 2" in listed
    # only ignored files differ between two and its rerun: one line says so, code is no difference
    (repo / "notes" / "n.txt").write_text("3\n")
    (repo / "README.md").write_text("again\n")
    assert ledger(repo, *run, "five", "--", "python3", "train_async.py", "--lr", "2").returncode == 0
    data = _changed(repo, "four", "five")
    assert data["changed"] == [] and data["code_note"] == ("only files that are not code differ (README.md, notes/n.txt): not a difference")


def test_old_manifests_compare_in_one_code_setting() -> None:
    """A run recorded before `code` existed has code.commit + code.patch (or code.tree): one `code`."""
    old = {"id": "r1", "settings": {"code.commit": "a" * 40, "code.patch": None, "lr": 1}}
    old2 = {"id": "r2", "settings": {"code.commit": "a" * 40, "code.patch": None, "lr": 2}}
    new = {"id": "r3", "settings": {"code": "b" * 40, "command.entry": "train.py", "lr": 2}}
    assert [c.name for c in changed_settings(comparable(old), comparable(old2))] == ["lr"]
    assert [c.name for c in changed_settings(comparable(old2), comparable(new))] == ["code"]
    tree = {"id": "r4", "settings": {"code.tree": "c" * 40, "lr": 2}}
    assert comparable(tree)["code"] == "legacy:" + "c" * 40


# ---------------------------------------------------------------- item 2: launcher inputs


def test_launcher_inputs_of_miles_python_and_bash_launchers(tmp_path: Path) -> None:
    """Python: the imports resolved in the checkout (transitively) and every model file the
    in-process helper may read; bash: the helper and the NAME it is given; both: the sibling a
    variant delegates to. What train.py imports (miles/utils/misc.py) stays code."""
    root = _shaped_repo(tmp_path / "proj")
    entries = training_entries(root, root, DEFAULT_TRAINING_PATTERNS)
    assert entries == [(root / "train.py").resolve()]

    def inputs(rel: str) -> list[str]:
        path = root / rel
        return sorted(p.relative_to(root.resolve()).as_posix() for p in launcher_inputs(path, path.read_text(), root, root, entries))

    assert inputs("scripts/run_tiny.py") == [
        "miles/utils/external_utils/__init__.py",
        "miles/utils/external_utils/command_utils.py",
        "miles/utils/external_utils/exec_command.py",
        "miles/utils/external_utils/model_args_utils.py",
        "scripts/models/other.py",
        "scripts/models/tiny-instruct.py",
        "scripts/models/tiny.py",
    ]
    assert inputs("examples/tiny_bench/run_tiny_bench.sh") == [
        "miles/utils/external_utils/model_args_utils.py",
        "scripts/models/tiny-instruct.py",
        "scripts/models/tiny.py",
    ]


def test_a_python_launcher_model_file_edit_is_the_flag_alone(tmp_path: Path) -> None:
    """Miles' Python launcher reads its (variant) model file in-process: editing the value there
    was `code` plus the flag; it is the flag alone. Code the trainer imports is still code."""
    repo = _shaped_repo(tmp_path / "proj")
    assert ledger(repo, "init").returncode == 0
    env = {"PATH": f"{SHAPES / 'bin'}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(repo)}
    for name in ("RAY_ADDRESS", "MASTER_ADDR"):
        env.pop(name, None)
    run = ["run", "--no-debug-data", "--name"]
    assert ledger(repo, *run, "base", "--", "python3", "scripts/run_tiny.py", env=env).returncode == 0
    m = json.loads(ledger(repo, "show", "base", "--json").stdout)
    assert m["settings"]["rotary-base"] == 500000 and m["settings"]["lr"] == 1e-6
    assert "scripts/models/tiny-instruct.py" in m["command"]["launcher_inputs"]
    assert "miles/utils/misc.py" not in m["command"]["launcher_inputs"]
    assert m["settings"]["command.entry"] == "scripts/run_tiny.py -> train.py"
    # like every Miles launcher, it passes no seed: the trainer runs with Miles' defaults, recorded
    # as such (this shape's miles package has no arguments.py: ledger's table) (issue 33, item 4)
    assert (m["seeds"]["seed"], m["seeds"]["rollout_seed"]) == (1234, 42), m["seeds"]
    assert set(m["seeds"]["defaults"]) == {"seed", "rollout_seed"} and "seed" not in m["settings"]
    variant = repo / "scripts/models/tiny-instruct.py"
    variant.write_text(variant.read_text().replace("500000", "1000000"))
    assert ledger(repo, *run, "rope", "--", "python3", "scripts/run_tiny.py", env=env).returncode == 0
    # the run id in --save/--dump-details/--wandb-group, the router port: not compared
    assert _names(_changed(repo, "base", "rope")) == ["rotary-base"]
    text = ledger(repo, "diff", "base", "rope", "--code-diff").stdout
    assert '+    return load_sibling_model_args(__file__, "tiny", rotary_base=1000000)' in text
    misc = repo / "miles/utils/misc.py"
    misc.write_text(misc.read_text().replace("node-0", "node-1"))
    assert ledger(repo, *run, "misc", "--", "python3", "scripts/run_tiny.py", env=env).returncode == 0
    data = _changed(repo, "rope", "misc")
    assert _names(data) == ["code"] and data["code_files"] == ["miles/utils/misc.py"]


# ---------------------------------------------------------------- item 3: the entry point


def test_the_entry_point_is_a_setting() -> None:
    base = {"repo_root": "/r", "cwd_in_repo": "."}
    assert entry_point({**base, "training_argv": ["python3", "train.py", "--lr", "1"]}) == "train.py"
    assert entry_point({**base, "training_argv": ["python3", "-m", "miles.train", "--lr", "1"]}) == "-m miles.train"
    assert entry_point({**base, "training_argv": ["python3", "/r/sub/../train_async.py"]}) == "train_async.py"
    assert entry_point({**base, "cwd_in_repo": "sub", "training_argv": ["python3", "./t.py"]}) == "sub/t.py"
    assert (
        entry_point({**base, "launcher_path": "scripts/run_x.py", "training_argv": ["python3", "/r/train.py"]})
        == "scripts/run_x.py -> train.py"
    )
    assert entry_point({**base, "launcher_path": "run.sh"}) == "run.sh"
    # a manifest recorded before the setting existed lacks it: unknown, never a difference
    assert changed_settings({"lr": 1}, {"lr": 1, "command.entry": "train.py"}) == []
    assert [c.name for c in changed_settings({"command.entry": "a.py"}, {"command.entry": "b.py"})] == ["command.entry"]


# ---------------------------------------------------------------- item 4: ledger's own variables


def _manifest(run_id: str = "20260101-000000-abcd") -> dict[str, Any]:
    return {
        "id": run_id,
        "command": {"runtime_env": None, "repo_root": "/r", "cwd_in_repo": "."},
        "image": {},
        "code": {"commit": "c" * 40, "patch": None, "content": "d" * 40},
        "warnings": [],
    }


def test_ledger_set_variables_are_never_settings_even_after_recover() -> None:
    """`ledger recover` reads the manifest staged before `command.ledger_env` was written: the
    runtime env the ray wrapper extended with RAY_DEDUP_LOGS=0 made it a setting no other run had."""
    from ledger.understand.shim import ShimRecord

    ray_argv = ["ray", "job", "submit", "--runtime-env-json", json.dumps({"env_vars": {"RAY_DEDUP_LOGS": "0", "NCCL_ALGO": "Ring"}}), "--"]
    records = [ShimRecord(via="ray", argv=ray_argv, entrypoint=["python3", "train.py", "--lr", "1"])]
    recovered = _manifest()
    _settings_section(recovered, Config(), [], ["bash", "run.sh"], records, {"LEDGER_RUN_ID": recovered["id"]})
    assert "env.RAY_DEDUP_LOGS" not in recovered["settings"] and "env.LEDGER_RUN_ID" not in recovered["settings"]
    assert recovered["settings"]["env.NCCL_ALGO"] == "Ring" and recovered["settings"]["lr"] == 1
    # a normal finish knows what ledger set; a value the user chose themselves stays a setting
    normal = _manifest()
    normal["command"]["ledger_env"] = {"LEDGER_RUN_ID": normal["id"]}  # the user's env had RAY_DEDUP_LOGS=1
    user_ray = [*ray_argv[:3], "--runtime-env-json", json.dumps({"env_vars": {"RAY_DEDUP_LOGS": "1"}}), "--"]
    _settings_section(
        normal, Config(), [], ["bash", "run.sh"], [ShimRecord(via="ray", argv=user_ray, entrypoint=["python3", "train.py"])], {}
    )
    assert normal["settings"]["env.RAY_DEDUP_LOGS"] == "1"


# ---------------------------------------------------------------- item 5: the refusal's help


def _run(run_id: str, started: str, **settings: Any) -> dict[str, Any]:
    return {"id": run_id, "started": started, "settings": {"code": "t", **settings}, "status": {"state": "finished"}}


def test_refusal_lists_every_one_setting_baseline_newest_first_or_says_none() -> None:
    b = _run("b", "2026-01-01T10:00:00Z", lr=2, bs=8)
    earlier = [_run(f"e{i}", f"2026-01-01T0{i}:00:00Z", lr=10 + i, bs=8) for i in range(8)]
    earlier.append(_run("two-away", "2026-01-01T09:00:00Z", lr=3, bs=3))
    a = _run("a", "2026-01-01T00:30:00Z", lr=5, bs=5)
    report = build_report(a, b, None, None, earlier_runs=earlier)
    assert report.refused and report.suggested_baselines == ["e7", "e6", "e5", "e4", "e3"]
    assert report.suggested_baseline == "e7"
    text = render_text(report)
    assert "5 earlier runs differ from B in one setting (newest first):" in text and "  ledger diff e3 b" in text
    lonely = build_report(a, b, None, None, earlier_runs=[_run("x", "2026-01-01T01:00:00Z", lr=9, bs=9)])
    assert lonely.suggested_baselines == []
    assert "hint: no earlier run differs from B in exactly one setting" in render_text(lonely)


def test_a_replay_is_compared_with_its_source_and_its_sets() -> None:
    source = _run("src", "2026-01-01T01:00:00Z", lr=1)
    other = _run("other", "2026-01-01T02:00:00Z", lr=7, bs=3)
    replay = {**_run("rep", "2026-01-01T03:00:00Z", lr=2), "replay_of": "src", "replay": {"sets": ["lr=2"]}}
    changes = dict(change_log([source, other, replay]))
    assert [(c.name, c.a, c.b) for c in changes["rep"]] == [("lr", 1, 2)]  # was: lr 7 -> 2 and bs 3 -> absent


def test_a_replay_and_its_source_differ_only_in_the_training_settings_it_set() -> None:
    """Issue 33: what makes a run a replay (train-only on the recorded rollouts, the chosen steps'
    `--num-rollout`, its entry without the source's launcher) is not the one setting that differs
    from its own source; a `--set` of one of them is, and against any other run they all count."""
    source = _run("src", "2026-01-01T01:00:00Z", lr=1, **{"num-rollout": 3, "command.entry": "run.sh -> train.py"})
    mechanics = {"num-rollout": 2, "debug-train-only": True, "command.entry": "train.py"}
    replay = {**_run("rep", "2026-01-01T03:00:00Z", lr=2, **mechanics), "replay_of": "src", "replay": {"sets": ["lr=2"], "steps": [1, 2]}}
    report = build_report(source, replay, None, None)
    assert [c.name for c in report.changed] == ["lr"] and not report.refused
    assert [c.name for c in build_report(replay, source, None, None).changed] == ["lr"]  # either order
    assert [c.name for c in dict(change_log([source, replay]))["rep"]] == ["lr"]  # `ledger log` agrees
    replay["replay"]["sets"] = ["lr=2", "--num-rollout=2"]
    assert [c.name for c in build_report(source, replay, None, None).changed] == ["lr", "num-rollout"]
    other = {**source, "id": "other"}  # the same settings, but not the replay's source
    assert [c.name for c in build_report(other, replay, None, None).changed] == ["command.entry", "debug-train-only", "lr", "num-rollout"]
    elsewhere = {**replay, "settings": {**replay["settings"], "command.entry": "train_async.py"}}
    assert "command.entry" in [c.name for c in build_report(source, elsewhere, None, None).changed]


# ---------------------------------------------------------------- item 6: not experiment settings


# training flags of radixark/miles launchers (fetched 31f1ca96) that name a port, an address, a host,
# an output folder or a label: scripts/run_*.py, examples/**/run_*.py (mooncake, router, session
# server, prometheus, wandb, dump-details, save folders)
_NOT_SETTINGS = {
    "sglang-router-port": [30000, 30001],
    "session-server-port": [18000, 18001],
    "prometheus-port": [9090, 9091],
    "session-server-ip": ["10.0.0.1", "10.0.0.2"],
    "miles-host-ip": ["10.0.0.1", "10.0.0.3"],
    "router-external-host": ["node-a", "node-b"],
    "master-addr": ["10.0.0.1", "10.0.0.9"],
    "prometheus-run-name": ["r1", "r2"],
    "wandb-run-name": ["a", "b"],
    "wandb-group": ["g1", "g2"],
    "wandb-host": ["https://w1", "https://w2"],
    "save": ["/out/1", "/out/2"],
    "save-dir": ["/o/1", "/o/2"],
    "output-dir": ["/o/1", "/o/2"],
    "save-traces-dir": ["/t/1", "/t/2"],
    "dump-details": ["/d/1", "/d/2"],
    "env.MASTER_ADDR": ["10.0.0.1", "10.0.0.2"],
    "env.MASTER_PORT": ["1", "2"],
    "env.no_proxy": ["127.0.0.1,a", "b"],
}


def test_ports_addresses_hosts_outputs_and_labels_are_recorded_not_compared() -> None:
    a = {"id": "ra", "settings": {"lr": 1, **{k: v[0] for k, v in _NOT_SETTINGS.items()}, "tag": "ra-x"}}
    b = {"id": "rb", "settings": {"lr": 2, **{k: v[1] for k, v in _NOT_SETTINGS.items()}, "tag": "rb-x"}}
    report = build_report(a, b, None, None, ignore=DEFAULT_IGNORE)
    assert [c.name for c in report.changed] == ["lr"]  # `tag` holds each run's own id
    # `ignore:` in .ledger.yaml extends the one list
    assert [c.name for c in changed_settings(comparable(a), comparable(b), [*DEFAULT_IGNORE, "lr"])] == []


# ---------------------------------------------------------------- property: one change, one name


def _recorded(
    repo: Repo, root: Path, argv: list[str], env: dict[str, str], launcher: Path | None, run_id: str, cfg: Config
) -> dict[str, Any]:
    """A manifest as `ledger run` derives it (snapshot, code content, settings), without the job."""
    m: dict[str, Any] = {
        "id": run_id,
        "command": {
            "argv": argv,
            "cwd": str(root),
            "repo_root": str(root),
            "cwd_in_repo": ".",
            "runtime_env": None,
            "ledger_env": {"LEDGER_RUN_ID": run_id},
        },
        "image": {},
        "code": {},
        "warnings": [],
        "started": run_id,
    }
    code = repo.code_snapshot()
    m["code"].update(commit=code.commit, patch=code.patch_sha256)
    text = launcher.read_text() if launcher else None
    content = record_code(repo, code, cfg.code.ignore, launcher, text, root, cfg.training_patterns)
    m["code"] = content.code(Code.from_dict(m["code"])).to_dict()
    m["command"] = content.command(Command.from_dict(m["command"])).to_dict()
    m["warnings"] += [content.warning] if content.warning else []
    if launcher is not None:
        m["command"]["launcher_path"] = launcher.relative_to(root).as_posix()
    _settings_section(m, cfg, [], argv, [], env)
    return m


def test_one_change_gives_one_name(tmp_path: Path) -> None:
    """Random pairs of runs built from one base by changing exactly one flag, one env variable or
    one file that counts as code (plus any number of files that do not): `ledger diff`'s core
    names exactly that one thing. Seeded, 12 pairs, at the library level (no job runs)."""
    import random

    rng = random.Random(22)
    cfg = Config(code=CodeSection(ignore=("notes/",)))
    relevant = ["train.py", "miles/utils/misc.py", "miles/rollout.py"]
    not_code = ["README.md", "docs/index.md", "notes/a.txt", ".gitignore", "LICENSE", "examples/x/README.md"]
    inputs = ["scripts/models/tiny.py", "scripts/models/tiny-instruct.py"]
    for case in range(12):
        root = _shaped_repo(tmp_path / f"p{case}")
        (root / "miles" / "rollout.py").write_text("X = 1\n")
        (root / "notes").mkdir()
        (root / "notes" / "a.txt").write_text("a\n")
        (root / "LICENSE").write_text("MIT\n")
        git(root, "add", "-A")
        git(root, "commit", "-qm", "base")
        repo = Repo(root)
        flags = {"--lr": "1e-6", "--num-rollout": "8", "--eps-clip": "0.2"}
        env = {"NCCL_ALGO": "Ring", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
        launcher = rng.choice([None, root / "scripts/run_tiny.py"])

        def argv(f: dict[str, str]) -> list[str]:
            return ["python3", "train.py", *[t for kv in f.items() for t in kv]]

        a = _recorded(repo, root, argv(flags), env, launcher, f"2026-01-01T00:00:{case:02d}-a", cfg)
        kind = rng.choice(["flag", "env", "code"])
        expected: str
        if kind == "flag":
            name = rng.choice(sorted(flags))
            flags = {**flags, name: "7"}
            expected = name.lstrip("-")
        elif kind == "env":
            name = rng.choice(sorted(env))
            env = {**env, name: "changed"}
            expected = f"env.{name}"
        else:
            path = root / rng.choice(relevant)
            path.write_text(path.read_text() + "# edited\n")
            expected = "code"
        for rel in rng.sample(not_code, rng.randint(0, len(not_code))):
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(f"noise {case}\n")
        if launcher is not None and rng.random() < 0.5:  # a launcher input: its effect is in the flags
            path = root / rng.choice(inputs)
            path.write_text(path.read_text() + "# tuned\n")
        if rng.random() < 0.5:
            git(root, "add", "-A")
            git(root, "commit", "-q", "--allow-empty", "-m", "one change")
        b = _recorded(repo, root, argv(flags), env, launcher, f"2026-01-01T00:00:{case:02d}-b", cfg)
        report = build_report(a, b, None, None, ignore=DEFAULT_IGNORE)
        assert [c.name for c in report.changed] == [expected], (case, kind, launcher)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_bash_launcher_variant_sibling_edit_leaves_code_alone(tmp_path: Path) -> None:
    """tau-bench's shape: `model_args_utils.py "tiny-instruct"`, which delegates to tiny.py; an edit
    to tiny.py changes the training command (a flag), so it leaves the `code` setting."""
    root = _shaped_repo(tmp_path / "proj")
    repo = Repo(root)
    launcher = root / "examples/tiny_bench/run_tiny_bench.sh"
    cfg = Config()
    argv = [sys.executable, "train.py", "--hidden-size", "64"]
    a = _recorded(repo, root, argv, {}, launcher, "2026-01-01T00:00:00-a", cfg)
    (root / "scripts/models/tiny.py").write_text((root / "scripts/models/tiny.py").read_text().replace("64", "128"))
    b = _recorded(repo, root, [*argv[:3], "128"], {}, launcher, "2026-01-01T00:00:01-b", cfg)
    assert a["settings"]["code"] == b["settings"]["code"]
    assert [c.name for c in changed_settings(comparable(a), comparable(b), DEFAULT_IGNORE)] == ["hidden-size"]
    assert b["command"]["launcher_inputs"] == [
        "miles/utils/external_utils/model_args_utils.py",
        "scripts/models/tiny-instruct.py",
        "scripts/models/tiny.py",
    ]


def test_two_inline_python_programs_are_different_entry_points() -> None:
    """Was: `python3 -c A` and `python3 -c B` compared as "every setting is the same"."""
    from ledger.understand.settings import entry_point

    a = entry_point({"argv": ["python3", "-c", "print(1)"], "training_argv": None})
    b = entry_point({"argv": ["python3", "-c", "print(2)"], "training_argv": None})
    assert a and b and a != b and a.startswith("-c sha256:")
    assert entry_point({"argv": ["python3", "-c", "print(1)"], "training_argv": None}) == a
    assert entry_point({"argv": ["bash", "-c", "true"], "training_argv": None}) is None
