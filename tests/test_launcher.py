"""The training command and its settings, found the three ways a job can run it.

The launchers here are real scripts run by real bash and python; a fake `ray` on PATH executes
the part after `--`, and a fake `train.py` writes the argv it received, so every test compares
what ledger read from the output with what the trainer really got.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.understand.envvars import (
    DEFAULT_ENV_PATTERNS,
    capture_env,
    env_settings,
    runtime_env_from_ray_argv,
)
from ledger.understand.launcher import (
    env_report,
    find_training_command,
    is_launcher,
    shell_words,
    simple_commands,
    training_command_from_argv,
)
from ledger.understand.settings import parse_settings

ARGS = [
    "--lr", "1e-6",
    "--seed", "42",
    "--colocate",
    "--no-offload-train",
    "--offload-rollout-level", "kv_cache", "weight",
    "--name", "a b",
    "--quote", "it's",
    "--json", '{"a": [1, 2], "b": "x y"}',
    "--neg", "-1",
    "--tmpl", "/d/{rollout_id}.pt",
    "--dollar", "$HOME",
    "--star", "*",
    "--nl", "line1\nline2",
    "--ctl", "a\x01b\x1bc",
    "--tab", "a\tb",
    "--empty", "",
    "--uni", "é",
    "--eq=k=v",
    "--dq", 'say "hi"',
    "--bs", "a\\b",
    "--semi", "a;b && c | d > e",
    "--hash", "#x",
]  # fmt: skip

RUNTIME_ENV = {"env_vars": {"NCCL_ALGO": "Ring", "PYTHONPATH": "/root/Megatron-LM"}}

FAKE_RAY = """#!/bin/sh
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done
[ "$#" -gt 0 ] || exit 0
shift
exec "$@"
"""

FAKE_TRAIN = """import json, os, sys
with open(os.environ["ARGV_OUT"], "a") as out:
    out.write(json.dumps(sys.argv[1:]) + "\\n")
print("training done")
"""


@pytest.fixture
def job_dir(tmp_path: Path) -> Path:
    """A folder with the fake train.py and a bin/ holding fake `ray` and a `python3`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ray = bin_dir / "ray"
    ray.write_text(FAKE_RAY)
    ray.chmod(0o755)
    (bin_dir / "python3").symlink_to(sys.executable)
    (tmp_path / "train.py").write_text(FAKE_TRAIN)
    return tmp_path


def run_job(job_dir: Path, argv: list[str], locale: str = "C.UTF-8") -> tuple[list[str], list[str]]:
    """Run a job; return (its output lines, the argv train.py received last)."""
    env = {
        "PATH": f"{job_dir / 'bin'}:{os.environ['PATH']}",
        "ARGV_OUT": str(job_dir / "argv.jsonl"),
        "LC_ALL": locale,
        "HOME": str(job_dir),
    }
    proc = subprocess.run(
        argv,
        check=False,
        cwd=job_dir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout
    output = proc.stdout.decode("utf-8", "surrogateescape")
    received = (job_dir / "argv.jsonl").read_text().splitlines()
    return output.splitlines(keepends=True), json.loads(received[-1])


def bash_launcher(job_dir: Path) -> Path:
    array = " ".join(shlex.quote(arg) for arg in ARGS)
    script = job_dir / "run.sh"
    script.write_text(
        "#!/bin/bash\nset -ex\n"
        "ray start --head --port 6379\n"
        "python3 -c 'print(1)'\n"
        "python3 train.py --lr 5 --warmup-run\n"  # an earlier training command: the last wins
        f"ARGS=({array})\n"
        "ray job submit --address=http://127.0.0.1:8265 "
        # multi-line JSON, as Miles launchers write it: xtrace spreads it over several lines
        f"--runtime-env-json={shlex.quote(json.dumps(RUNTIME_ENV, indent=2))} -- "
        'python3 train.py "${ARGS[@]}"\n'
        "echo finished\n"
    )
    return script


def python_launcher(job_dir: Path) -> Path:
    script = job_dir / "launch.py"
    script.write_text(
        "import json, shlex, subprocess\n"
        f"ARGS = {ARGS!r}\n"
        f"RUNTIME = {RUNTIME_ENV!r}\n"
        "def exec_command(cmd):\n"  # logged with a Miles log prefix, run by bash -c
        "    print(f'[2026-08-01 10:00:00.123 main] exec_command.py:22 - EXEC: {cmd}', flush=True)\n"
        "    subprocess.run(['bash', '-c', cmd], check=True)\n"
        "exec_command('ray start --head && sleep 0')\n"
        "exec_command('cd . && ray job submit --address=http://127.0.0.1:8265 '\n"
        "    + '--runtime-env-json=' + shlex.quote(json.dumps(RUNTIME)) + ' -- python3 train.py '\n"
        "    + ' '.join(shlex.quote(a) for a in ARGS) + ' 2>&1 | cat')\n"
    )
    return script


@pytest.mark.parametrize("locale", ["C.UTF-8", "C"])
def test_bash_launcher_xtrace_gives_the_argv_the_trainer_received(job_dir: Path, locale: str) -> None:
    lines, received = run_job(job_dir, ["bash", str(bash_launcher(job_dir))], locale)
    assert received == ARGS  # the fakes pass arguments through untouched

    found = find_training_command(lines, [r"(^|/)train\.py$"])

    assert found is not None
    assert found.source == "xtrace"
    assert found.args == ARGS
    assert found.argv[:2] == ["python3", "train.py"]
    assert found.ray_argv is not None and found.ray_argv[:3] == ["ray", "job", "submit"]
    assert found.runtime_env == RUNTIME_ENV


def test_python_launcher_exec_lines_give_the_argv_the_trainer_received(
    job_dir: Path,
) -> None:
    lines, received = run_job(job_dir, [sys.executable, str(python_launcher(job_dir))])
    assert received == ARGS

    found = find_training_command(lines)

    assert found is not None
    assert found.source == "exec"
    assert found.args == ARGS  # `2>&1 | cat` after the command is not an argument
    assert found.runtime_env == RUNTIME_ENV


def test_the_three_forms_yield_the_same_settings(job_dir: Path) -> None:
    bash_lines, _ = run_job(job_dir, ["bash", str(bash_launcher(job_dir))])
    py_lines, _ = run_job(job_dir, [sys.executable, str(python_launcher(job_dir))])
    direct = training_command_from_argv(["python3", "train.py", *ARGS])
    from_bash = find_training_command(bash_lines)
    from_python = find_training_command(py_lines)

    assert direct is not None and from_bash is not None and from_python is not None
    settings = parse_settings(direct.args)
    assert parse_settings(from_bash.args) == settings
    assert parse_settings(from_python.args) == settings
    assert settings["json"] == '{"a": [1, 2], "b": "x y"}'
    assert settings["offload-rollout-level"] == ["kv_cache", "weight"]
    assert settings["nl"] == "line1\nline2"
    assert settings["eq"] == "k=v"


def test_a_direct_command_is_found_with_its_source() -> None:
    found = training_command_from_argv(["env", "A=1", "python3", "-u", "train.py", "--lr", "1"])
    assert found is not None
    assert (found.argv, found.script, found.args, found.source) == (
        ["python3", "-u", "train.py", "--lr", "1"],
        "train.py",
        ["--lr", "1"],
        "argv",
    )
    assert found.ray_argv is None and found.runtime_env is None


def test_modules_and_torchrun_match_the_patterns() -> None:
    module = training_command_from_argv(["python3", "-m", "miles.train", "--lr", "1"])
    torchrun = training_command_from_argv(
        [
            "torchrun",
            "--nproc_per_node",
            "8",
            "--standalone",
            "train_async.py",
            "--lr",
            "1",
        ]
    )
    assert module is not None and module.script == "miles.train"
    assert torchrun is not None and torchrun.script == "train_async.py"
    assert torchrun.args == ["--lr", "1"]
    assert training_command_from_argv(["python3", "tools/convert.py", "--lr", "1"]) is None


def test_ray_submit_without_separator_still_finds_the_entrypoint() -> None:
    found = training_command_from_argv(
        [
            "ray",
            "job",
            "submit",
            "--address",
            "http://x:8265",
            "python3",
            "train.py",
            "--lr",
            "2",
        ]
    )
    assert found is not None
    assert found.ray_argv == ["ray", "job", "submit", "--address", "http://x:8265"]
    assert found.args == ["--lr", "2"]


def test_no_training_command_in_output_gives_none() -> None:
    lines = [
        "+ ray start --head\n",
        "EXEC: pkill -9 sglang\n",
        "+ python3 tools/x.py --a 1\n",
    ]
    assert find_training_command(lines) is None


def test_an_unterminated_quote_does_not_swallow_the_rest_forever() -> None:
    lines = ["+ python3 train.py --a 'open\n"] + ["noise\n"] * 300 + ["+ python3 train.py --b 2\n"]
    found = find_training_command(lines)
    assert found is not None and found.args == ["--b", "2"]


def test_shell_words_handles_bash_quoting_forms() -> None:
    words = shell_words("""a 'it'\\''s' $'x\\ty\\303\\251\\u00e9' "d \\"q\\" $v" b\\ c 2>&1 >out # c""")
    commands = simple_commands(words)
    assert commands == [["a", "it's", "x\tyéé", 'd "q" $v', "b c"]]
    assert simple_commands(shell_words("cd /x && ray stop; echo 'a && b'")) == [
        ["cd", "/x"],
        ["ray", "stop"],
        ["echo", "a && b"],
    ]


def test_is_launcher_names_the_script_file(tmp_path: Path) -> None:
    run_sh = tmp_path / "run.sh"
    run_sh.write_text("#!/bin/bash\n")
    launch = tmp_path / "scripts" / "launch.py"
    launch.parent.mkdir()
    launch.write_text("print(1)\n")
    (tmp_path / "train.py").write_text("")

    assert is_launcher(["bash", "run.sh"], tmp_path) == run_sh
    assert is_launcher(["bash", "-ex", "run.sh", "--x"], tmp_path) == run_sh
    assert is_launcher(["env", "A=1", "sh", str(run_sh)], tmp_path) == run_sh
    assert is_launcher(["./run.sh"], tmp_path) == tmp_path / "./run.sh"
    assert is_launcher(["python3", "scripts/launch.py"], tmp_path) == launch
    assert is_launcher(["python3", "-m", "scripts.launch"], tmp_path) == launch


def test_is_launcher_is_none_for_training_and_inline_commands(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    assert is_launcher(["python3", "train.py", "--lr", "1"], tmp_path) is None
    assert is_launcher(["./train.py", "--lr", "1"], tmp_path) is None
    assert is_launcher(["ray", "job", "submit", "--", "python3", "train.py"], tmp_path) is None
    assert is_launcher(["bash", "-c", "python3 train.py"], tmp_path) is None
    assert is_launcher([sys.executable, "-c", "print(1)"], tmp_path) is None
    assert is_launcher(["bash", "missing.sh"], tmp_path) is None


def test_env_report_lines_are_parsed_tolerantly() -> None:
    payload = {
        "role": "training",
        "rank": 0,
        "git_repos": [
            {"package_name": "miles", "commit": "abc", "dirty": False, "diff_stat": ""},
            {
                "package_name": "sglang",
                "commit": "def",
                "dirty": True,
                "diff_stat": "1 file",
            },
        ],
    }
    lines = [
        f"(MegatronTrainRayActor pid=12) ENV_REPORT_JSON={json.dumps(payload)} trailing\n",
        "ENV_REPORT_JSON={not json\n",
        "unrelated\n",
    ]
    assert env_report(lines) == [
        {
            "role": "training",
            "rank": 0,
            "packages": {
                "miles": {"commit": "abc", "dirty": False},
                "sglang": {"commit": "def", "dirty": True},
            },
        }
    ]


def test_capture_env_keeps_matching_names_sorted_and_secrets_too() -> None:
    environ = {
        "NCCL_ALGO": "Ring",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "HOME": "/root",
        "PYTHONHASHSEED": "0",
        "RAY_TOKEN": "secret",
        "nccl_lower": "x",
    }
    captured = capture_env(environ, DEFAULT_ENV_PATTERNS)
    assert list(captured) == [
        "CUDA_VISIBLE_DEVICES",
        "NCCL_ALGO",
        "PYTHONHASHSEED",
        "RAY_TOKEN",
    ]
    assert captured["RAY_TOKEN"] == "secret"


def test_runtime_env_vars_override_the_process_env() -> None:
    settings = env_settings(
        {"NCCL_ALGO": "Tree", "CUDA_DEVICE_MAX_CONNECTIONS": "1"},
        {"env_vars": {"NCCL_ALGO": "Ring", "PYTHONPATH": "/root/Megatron-LM", "N": 3}},
    )
    assert settings == {
        "env.CUDA_DEVICE_MAX_CONNECTIONS": "1",
        "env.N": "3",
        "env.NCCL_ALGO": "Ring",
        "env.PYTHONPATH": "/root/Megatron-LM",
    }
    assert env_settings({"A": "1"}, None) == {"env.A": "1"}
    assert env_settings({"A": "1"}, {"env_vars": "bad"}) == {"env.A": "1"}


def test_runtime_env_json_in_both_forms_and_bad_json() -> None:
    ray = ["ray", "job", "submit"]
    assert runtime_env_from_ray_argv([*ray, "--runtime-env-json", '{"env_vars": {}}']) == {"env_vars": {}}
    assert runtime_env_from_ray_argv([*ray, "--runtime-env-json={bad"]) is None
    assert runtime_env_from_ray_argv([*ray, "--runtime-env-json=[1]"]) is None
    assert runtime_env_from_ray_argv(ray) is None


def test_the_files_a_launcher_takes_flags_from(tmp_path: Path) -> None:
    """Shapes of radixark/miles launchers (issue 9, item 6): a sourced model file named through a
    variable set in the script (`examples/**/run-*-profile.sh` before August 2026), and the
    model-args helper with an environment prefix and a variable name (since August 2026)."""
    from ledger.understand.launcher_inputs import bash_inputs

    root = tmp_path / "repo"
    for rel in (
        "scripts/models/glm-air.sh",
        "scripts/models/qwen-big.py",
        "scripts/models/old-model.py",
        "scripts/models/commented-out.sh",
        "miles/utils/external_utils/model_args_utils.py",
        "examples/p2p/run-x.sh",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("\n")
    launcher = root / "examples/p2p/run-x.sh"
    text = (
        'MODEL_TYPE="glm-air"\nMODEL_ARGS_FILE=qwen-big\n'
        'MILES_ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." &>/dev/null && pwd)"\n'
        'source "${MILES_ROOT}/scripts/models/${MODEL_TYPE}.sh"\n'
        'MODEL_ARGS_LINE="$(MODEL_ARGS_ROTARY_BASE=5000000 python3 '
        '"${MILES_ROOT}/miles/utils/external_utils/model_args_utils.py" "${MODEL_ARGS_FILE}")" || exit 1\n'
        '# source "${MILES_ROOT}/scripts/models/commented-out.sh"\n'
        '# was: python3 "${MILES_ROOT}/miles/utils/external_utils/model_args_utils.py" "old-model"\n'
    )
    found = bash_inputs(launcher, text, root / "examples", root)
    assert found == [
        (root / "scripts/models/glm-air.sh").resolve(),
        (root / "miles/utils/external_utils/model_args_utils.py").resolve(),
        (root / "scripts/models/qwen-big.py").resolve(),
    ]
