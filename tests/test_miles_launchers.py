"""`ledger run` on launchers in the shapes of radixark/miles' real ones (issue 9).

The fixture launchers in tests/miles_shapes/ are written here after reading the real
`examples/**/run-*.sh` and `scripts/run_*.py` of radixark/miles (see its README.md for the
shapes): multi-line `--runtime-env-json`, arrays, a sourced model file, repeated flags,
`$(seq ...)`, `$'...'`, no "$@" forwarding, `pkill`/`ray stop` preambles (stubbed).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from conftest import LEDGER, git, ledger, make_repo

from ledger.understand import launcher, tracescan

SHAPES = Path(__file__).resolve().parent / "miles_shapes"


@pytest.fixture
def miles_repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    files = {
        p.relative_to(SHAPES).as_posix(): p.read_text()
        for p in SHAPES.rglob("*")
        if p.is_file() and "bin" not in p.parts and "inproc" not in p.parts
    }
    repo = make_repo(tmp_path / "proj", {**files, ".gitignore": "seen-argv.json\n"})
    os.chmod(repo / "run-tiny.sh", 0o755)
    env = {"PATH": f"{SHAPES / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    for name in ("NCCL_ALGO", "RAY_DEDUP_LOGS", "RAY_ADDRESS"):
        env.pop(name, None)
    ledger(repo, "init")
    return repo, env


def _show(repo: Path, run: str = "latest") -> dict:
    r = ledger(repo, "show", run, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _seen(repo: Path) -> list[str]:
    return json.loads((repo / "seen-argv.json").read_text())["argv"]


def test_bash_launcher_records_exactly_what_the_trainer_received(miles_repo: tuple[Path, dict[str, str]]) -> None:
    repo, env = miles_repo
    r = ledger(repo, "run", "--", "bash", "run-tiny.sh", env=env)
    assert r.returncode == 0, r.stderr
    m = _show(repo)
    seen = _seen(repo)
    # token for token, as the trainer's sys.argv has it (after the interpreter)
    assert m["command"]["training_argv"][1:] == seen
    assert m["command"]["training_argv"][0] == "python3" and seen[0] == "miles_grpo.py"
    assert m["command"]["training_source"] == "wrapper"
    assert m["command"]["ray_argv"][:3] == ["ray", "job", "submit"]
    assert m["command"]["runtime_env"]["env_vars"]["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
    s = m["settings"]
    assert s["moe-token-dispatcher-type"] == "flex"  # model file said alltoall, MISC_ARGS overrode it
    assert s["sglang-cuda-graph-bs"] == [1, 2, 16, 24, 32]  # $(seq 16 8 32)
    assert s["eval-prompt-data"] == ["aime", "/data/aime.jsonl"]
    assert s["stop-text"] == "a\tb" and s["note-text"] == 'it\'s a "quoted" value'
    assert s["env.NCCL_ALGO"] == "Ring"  # exported inside the launcher
    assert s["env.PYTHONPATH"] == "/root/Megatron-LM/"
    # the debug flags reached the trainer through the wrappers: the comment did not count
    assert m["command"]["debug_data"] == {
        "via": "wrapper",
        "added": ["--save-debug-event-data", "--save-debug-rollout-data"],
        "framework": "declared",  # the stand-in names both flags
        "recognised_by": "miles_grpo.py names --save-debug-rollout-data, --save-debug-event-data in its code",
    }
    assert "--save-debug-rollout-data" in seen
    assert {d["role"] for d in m["data"]} == {"rollout", "events"} and all(d["tracked"] for d in m["data"])
    assert m["command"]["ledger_env"]["RAY_DEDUP_LOGS"] == "0"
    assert "RAY_DEDUP_LOGS" not in " ".join(s)  # something ledger set, not a setting of the run
    r = ledger(repo, "replay", m["id"], "--step", "1", "--dry-run", env=env)
    assert r.returncode == 0, r.stderr


def test_xtrace_of_a_multi_line_runtime_env_gives_the_same_argv(miles_repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """The fallback when no wrapper ran (issue 9, item 1): the trace alone, read from the log."""
    repo, env = miles_repo
    full_env = {**os.environ, **env}
    full_env.pop("NCCL_ALGO", None)
    log = tmp_path / "trainer.log"
    with open(log, "wb") as out:
        subprocess.run(["bash", "run-tiny.sh"], cwd=repo, env=full_env, stdout=out, stderr=subprocess.STDOUT, check=True)
    lines = tracescan.command_lines([log])
    assert any(line.startswith('  "env_vars"') for line in lines)  # continuation lines are kept
    found = launcher.find_training_command(lines)
    assert found is not None and found.argv[1:] == _seen(repo)
    assert found.runtime_env == {"env_vars": {"PYTHONPATH": "/root/Megatron-LM/", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}}
    assert tracescan.exported_env(lines) == {"NCCL_ALGO": "Ring"}


def test_python_launcher_with_exec_lines(miles_repo: tuple[Path, dict[str, str]]) -> None:
    repo, env = miles_repo
    r = ledger(repo, "run", "--", "python3", "run_tiny.py", env=env)
    assert r.returncode == 0, r.stderr
    m = _show(repo)
    assert m["command"]["training_argv"][1:] == _seen(repo)
    assert m["command"]["launcher"] == "run_tiny.py"
    assert m["settings"]["moe-token-dispatcher-type"] == "flex" and m["settings"]["env.NCCL_ALGO"] == "Ring"
    assert {d["role"] for d in m["data"]} == {"rollout", "events"}
    assert m["command"]["debug_data"]["via"] == "wrapper"


def test_direct_ray_job_submit_records_ray_argv_runtime_env_and_data(miles_repo: tuple[Path, dict[str, str]]) -> None:
    """Items 2 and 3: `ledger run -- ray job submit ... -- python3 X.py` (any script name)."""
    repo, env = miles_repo
    r = ledger(
        repo,
        "run",
        "--",
        "ray",
        "job",
        "submit",
        "--address",
        "http://127.0.0.1:1",
        "--runtime-env-json",
        '{"env_vars": {"NCCL_ALGO": "Tree"}}',
        "--",
        "python3",
        "miles_grpo.py",
        "--lr",
        "2e-6",
        env=env,
    )
    assert r.returncode == 0, r.stderr
    m = _show(repo)
    assert m["command"]["launcher"] is None
    assert m["command"]["ray_argv"] == [
        "ray",
        "job",
        "submit",
        "--address",
        "http://127.0.0.1:1",
        "--runtime-env-json",
        '{"env_vars": {"NCCL_ALGO": "Tree"}}',
    ]
    assert m["command"]["runtime_env"] == {"env_vars": {"NCCL_ALGO": "Tree"}}
    assert m["command"]["training_argv"][:4] == ["python3", "miles_grpo.py", "--lr", "2e-6"]
    assert m["settings"]["lr"] == 2e-6 and m["settings"]["env.NCCL_ALGO"] == "Tree"
    assert {d["role"] for d in m["data"]} == {"rollout", "events"}  # was: data [] and files deleted
    # a replay is submitted to Ray again, with the recorded runtime env (issue 21, item 4: a real
    # head in test_ray_cluster.py); nothing answers at the recorded address: a local head would be
    # used; this checkout is its working_dir, without git's objects and ledger's or DVC's folders (issue 33)
    dry = ledger(repo, "replay", m["id"], "--step", "0", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    runtime = {"env_vars": {"NCCL_ALGO": "Tree"}, "excludes": ["/.dvc", "/.git", "/.ledger", "/runs"], "working_dir": str(repo)}
    assert dry.stdout.startswith(
        "ray job submit --address '<a local head ledger starts on 127.0.0.1>' "
        f"--runtime-env-json '{json.dumps(runtime, sort_keys=True)}' -- python3 miles_grpo.py "
    ), dry.stdout


def test_a_launcher_edit_is_one_setting_change_in_diff(miles_repo: tuple[Path, dict[str, str]]) -> None:
    """Item 6: editing --lr in the launcher (uncommitted, then committed) is `lr`, not code."""
    repo, env = miles_repo
    assert ledger(repo, "run", "--name", "base", "--", "bash", "run-tiny.sh", env=env).returncode == 0
    script = repo / "run-tiny.sh"
    script.write_text(script.read_text().replace("--lr 1e-6", "--lr 3e-6"))
    assert ledger(repo, "run", "--name", "edited", "--", "bash", "run-tiny.sh", env=env).returncode == 0
    git(repo, "commit", "-qam", "lr 3e-6")
    assert ledger(repo, "run", "--name", "committed", "--", "bash", "run-tiny.sh", env=env).returncode == 0
    for other in ("edited", "committed"):
        r = ledger(repo, "diff", "base", other, "--json", "--no-git-diff")
        changed = json.loads(r.stdout)["changed"]
        assert [c["name"] for c in changed] == ["lr"], changed
    # any other code change still counts as code
    (repo / "miles_grpo.py").write_text((repo / "miles_grpo.py").read_text() + "# changed\n")
    git(repo, "commit", "-qam", "trainer change")
    assert ledger(repo, "run", "--name", "code", "--", "bash", "run-tiny.sh", env=env).returncode == 0
    changed = json.loads(ledger(repo, "diff", "committed", "code", "--json", "--no-git-diff").stdout)["changed"]
    assert [c["name"] for c in changed] == ["code"]


def _changed(repo: Path, a: str, b: str) -> list[str]:
    r = ledger(repo, "diff", a, b, "--json", "--no-git-diff")
    return [c["name"] for c in json.loads(r.stdout)["changed"]]


def test_editing_a_model_file_is_that_flag_alone(miles_repo: tuple[Path, dict[str, str]]) -> None:
    """Item 6 for the files a launcher takes its model flags from. Miles' bash launchers since
    August 2026 (run-tiny-pymodel.sh's shape) read them from scripts/models/<NAME>.py through
    `python3 .../model_args_utils.py "${MODEL_TYPE}"` and `read -ra`; older ones `source` a .sh
    (run-tiny.sh). Either way an edited model flag is that setting, not also `code.tree`."""
    repo, env = miles_repo
    assert ledger(repo, "run", "--name", "py-base", "--", "bash", "run-tiny-pymodel.sh", env=env).returncode == 0
    m = _show(repo)
    assert m["command"]["training_argv"][1:] == _seen(repo)  # the helper's python3 call is not the trainer
    assert m["command"]["runtime_env"] == {"env_vars": {"PYTHONPATH": "/root/Megatron-LM", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}}
    assert m["settings"]["hidden-size"] == 64 and m["settings"]["moe-token-dispatcher-type"] == "flex"
    model = repo / "scripts" / "models" / "tiny.py"
    model.write_text(model.read_text().replace("--hidden-size 64", "--hidden-size 128"))
    assert ledger(repo, "run", "--name", "py-wider", "--", "bash", "run-tiny-pymodel.sh", env=env).returncode == 0
    assert _changed(repo, "py-base", "py-wider") == ["hidden-size"]
    assert ledger(repo, "run", "--name", "sh-base", "--", "bash", "run-tiny.sh", env=env).returncode == 0
    sourced = repo / "scripts" / "models" / "tiny.sh"
    sourced.write_text(sourced.read_text().replace("--num-layers 2", "--num-layers 3"))
    assert ledger(repo, "run", "--name", "sh-deeper", "--", "bash", "run-tiny.sh", env=env).returncode == 0
    assert _changed(repo, "sh-base", "sh-deeper") == ["num-layers"]


def test_debug_data_into_a_container_is_refused_aloud(miles_repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """Item 4: where no wrapper can reach the trainer, say so on one line before the job starts."""
    repo, env = miles_repo
    (repo / "in-docker.sh").write_text("#!/bin/bash\ndocker run --rm img python3 train.py --lr 1 || true\n")
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "docker").write_text("#!/bin/sh\nexit 0\n")
    (fake / "docker").chmod(0o755)
    r = ledger(repo, "run", "--", "bash", "in-docker.sh", env={"PATH": f"{fake}{os.pathsep}{env['PATH']}"})
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if "debug data cannot reach" in line]
    assert len(lines) == 1 and "add --save-debug-rollout-data" in lines[0]
    assert shutil.which("bash")


def test_untracked_files_in_the_data_folder_are_kept_and_paths_are_portable(miles_repo: tuple[Path, dict[str, str]]) -> None:
    """Item 3: nothing a job wrote under the run's data folder is deleted untracked. Item 9: a
    PYTHONPATH naming this checkout is stored with `<repo>`, so another checkout agrees."""
    repo, env = miles_repo
    (repo / "stray.sh").write_text(
        '#!/bin/bash\nset -ex\nmkdir -p "$LEDGER_DATA_DIR/scratch"\n'
        'echo kept > "$LEDGER_DATA_DIR/scratch/notes.txt"\n'
        'ray job submit --runtime-env-json="{\\"env_vars\\": {\\"PYTHONPATH\\": \\"$PWD/src:/root/M\\"}}"'
        " -- python3 miles_grpo.py --num-rollout 1\n"
    )
    r = ledger(repo, "run", "--", "bash", "stray.sh", env={**env, "LEDGER_TEST": "1"})
    assert r.returncode == 0, r.stderr
    m = _show(repo)
    kept = repo / ".ledger" / "untracked" / m["id"] / "scratch" / "notes.txt"
    assert kept.read_text() == "kept\n"
    assert "kept at" in r.stderr
    assert m["command"]["training_argv"][1:] == _seen(repo)
    assert m["settings"]["env.PYTHONPATH"] == "<repo>/src:/root/M"
    assert m["command"]["runtime_env"]["env_vars"]["PYTHONPATH"] == f"{repo}/src:/root/M"  # the raw value kept


def test_env_report_behind_a_coloured_ray_prefix_is_read(tmp_path: Path) -> None:
    # shape: miles-facts.md (`--env-report` lines from actors, Ray 2.60 colours the prefix)
    log = tmp_path / "engine.log"
    report = {"role": "rollout", "rank": 0, "git_repos": [{"package_name": "sglang", "commit": "abc", "dirty": False}]}
    log.write_bytes(b"\x1b[36m(SGLangEngine pid=3, ip=10.0.0.2)\x1b[0m ENV_REPORT_JSON=" + json.dumps(report).encode() + b"\n")
    lines = tracescan.command_lines([log])
    assert launcher.env_report(lines) == [{"role": "rollout", "rank": 0, "packages": {"sglang": {"commit": "abc", "dirty": False}}}]


def test_no_wait_with_no_reachable_ray_is_said_and_recorded_as_unknown(miles_repo: tuple[Path, dict[str, str]]) -> None:
    """Item 8: a `--no-wait` job ledger cannot follow is `unknown`, never `finished, exit 0`."""
    repo, env = miles_repo
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = ledger(
        repo,
        "run",
        "--no-debug-data",
        "--",
        "ray",
        "job",
        "submit",
        "--no-wait",
        "--address",
        f"http://127.0.0.1:{port}",
        "--",
        "python3",
        "miles_grpo.py",
        env=env,
    )
    m = _show(repo)
    assert m["status"]["state"] == "unknown"
    assert m["status"]["ray_job"]["submission_id"].startswith("ledger-") and m["status"]["ray_job"]["status"] is None
    assert any(f"127.0.0.1:{port}" in w for w in m["warnings"])
    assert "recorded what is known" in r.stderr


def test_job_env_is_configurable_and_the_callers_value_wins(tmp_path: Path) -> None:
    """Item 7: RAY_DEDUP_LOGS=0 is set for the job by default, recorded as ledger's, never a
    setting; `capture: job_env:` changes or removes (null) it; a value the caller set is kept."""
    probe = (
        "import json, os\njson.dump({k: os.environ.get(k) for k in ('RAY_DEDUP_LOGS', 'RAY_COLOR_PREFIX')}, open('seen-env.json', 'w'))\n"
    )
    repo = make_repo(tmp_path / "proj", {"train.py": probe, ".gitignore": "seen-env.json\n"})
    ledger(repo, "init")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}

    def run(env: dict[str, str]) -> tuple[dict, dict]:
        r = subprocess.run(
            [*LEDGER, "run", "--no-debug-data", "--", "python3", "train.py"], cwd=repo, env=env, capture_output=True, text=True, timeout=120
        )
        assert r.returncode == 0, r.stderr
        return json.loads((repo / "seen-env.json").read_text()), _show(repo)

    seen, m = run(clean)
    assert seen == {"RAY_DEDUP_LOGS": "0", "RAY_COLOR_PREFIX": None} and m["command"]["ledger_env"]["RAY_DEDUP_LOGS"] == "0"
    assert not any(name.startswith("env.RAY_") for name in m["settings"])
    seen, m = run({**clean, "RAY_DEDUP_LOGS": "1"})
    assert seen["RAY_DEDUP_LOGS"] == "1" and "RAY_DEDUP_LOGS" not in m["command"]["ledger_env"]
    config = repo / ".ledger.yaml"
    config.write_text(config.read_text().replace("job_env: {}", 'job_env: {RAY_DEDUP_LOGS: null, RAY_COLOR_PREFIX: "0"}', 1))
    seen, m = run(clean)
    assert seen == {"RAY_DEDUP_LOGS": None, "RAY_COLOR_PREFIX": "0"}
    assert "RAY_DEDUP_LOGS" not in m["command"]["ledger_env"] and m["command"]["ledger_env"]["RAY_COLOR_PREFIX"] == "0"
