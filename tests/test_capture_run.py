"""What `ledger run` captures from real launchers, and that no secret reaches the branch."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git, ledger

TRAIN_ARGS = [
    "--lr",
    "1e-6",
    "--colocate",
    "--no-offload-train",
    "--offload-rollout-level",
    "kv_cache",
    "weight",
    "--seed",
    "11",
    "--rollout-seed",
    "5",
    "--note-text",
    'it\'s a "quoted" value',
    "--sglang-mem-fraction-static",
    "0.7",
]
FAKE_TRAIN = "import sys, json\nprint('train argv', json.dumps(sys.argv[1:]), flush=True)\n"
FAKE_RAY = """#!/usr/bin/env bash
# a stand-in for `ray job submit ... -- CMD`: runs what follows --
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done
shift
exec "$@"
"""


def _bin(repo: Path) -> dict[str, str]:
    bindir = repo.parent / "bin"
    bindir.mkdir(exist_ok=True)
    ray = bindir / "ray"
    ray.write_text(FAKE_RAY)
    ray.chmod(ray.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}


def _quote(args: list[str]) -> str:
    import shlex

    return " ".join(shlex.quote(a) for a in args)


def _manifest(repo: Path) -> dict:
    return json.loads(ledger(repo, "show", "latest", "--json").stdout)


def _experiment_settings(m: dict) -> dict:
    """The training flags and seeds: the launcher itself is a setting of its own (`command.entry`),
    and the code setting leaves out each form's own launcher (so the three differ there)."""
    return {k: v for k, v in m["settings"].items() if not k.startswith(("env.", "code", "image.", "command."))}


def test_three_forms_give_the_same_settings(repo: Path) -> None:
    env = _bin(repo)
    (repo / "train.py").write_text(FAKE_TRAIN)
    (repo / "run.sh").write_text(
        "#!/bin/bash\nset -ex\nTRAIN_ARGS=(" + _quote(TRAIN_ARGS) + ")\n"
        "ray job submit --address=http://127.0.0.1:8265 "
        '--runtime-env-json=\'{"env_vars": {"NCCL_ALGO": "Ring", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}}\' '
        '-- python3 train.py "${TRAIN_ARGS[@]}"\n'
    )
    (repo / "launch.py").write_text(
        "import shlex, subprocess, sys\n"
        f"cmd = ['python3', 'train.py', *{TRAIN_ARGS!r}]\n"
        "print('EXEC: ' + shlex.join(cmd), flush=True)\n"
        "sys.exit(subprocess.call(cmd))\n"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "launchers")
    results = []
    for argv in (["bash", "run.sh"], ["python3", "launch.py"], ["python3", "train.py", *TRAIN_ARGS]):
        r = ledger(repo, "run", "--no-debug-data", "--", *argv, env=env)
        assert r.returncode == 0, r.stderr
        results.append(_manifest(repo))
    bash, py, direct = results
    # ledger's python3/ray wrappers on the job's PATH saw the exact argv in all three forms
    assert [r["command"]["training_source"] for r in results] == ["wrapper", "wrapper", "wrapper"]
    assert _experiment_settings(bash) == _experiment_settings(py) == _experiment_settings(direct)
    s = _experiment_settings(direct)
    assert s["lr"] == 1e-06 and s["colocate"] is True and s["offload-train"] is False
    assert s["offload-rollout-level"] == ["kv_cache", "weight"] and s["seed"] == 11
    assert direct["seeds"] == {"seed": 11, "rollout_seed": 5}
    assert bash["command"]["launcher"] == "run.sh" and py["command"]["launcher"] == "launch.py"
    assert direct["command"]["launcher"] is None
    entries = [r["settings"]["command.entry"] for r in results]
    assert entries == ["run.sh -> train.py", "launch.py -> train.py", "train.py"]
    assert bash["settings"]["env.NCCL_ALGO"] == "Ring"  # from the runtime env json
    folder = f"runs/{bash['id'][-4:-2]}/{bash['id']}"
    assert "ray job submit" in git(repo, "show", f"experiments:{folder}/launcher/run.sh")


def test_logs_are_split_and_engine_lines_kept_apart(repo: Path) -> None:
    job = (
        "import sys\n"
        "print('(SGLangEngine pid=12) [2026-11-29 10:00:00 TP0] Decode batch. #running-req: 3')\n"
        "print('[2026-11-29 10:00:00.001 main] train.py:1 - trainer line')\n"
        "print('(SGLangEngine pid=12, ip=10.0.0.2) second engine line')\n"
        "sys.stdout.write('last trainer line without newline')\n"
    )
    r = ledger(repo, "run", "--no-debug-data", "--", sys.executable, "-c", job)
    assert r.returncode == 0, r.stderr
    m = _manifest(repo)
    folder = f"runs/{m['id'][-4:-2]}/{m['id']}"
    engine = git(repo, "show", f"experiments:{folder}/engine.log")
    trainer = git(repo, "show", f"experiments:{folder}/trainer.log")
    assert engine.splitlines() == [
        "(SGLangEngine pid=12) [2026-11-29 10:00:00 TP0] Decode batch. #running-req: 3",
        "(SGLangEngine pid=12, ip=10.0.0.2) second engine line",
    ]
    assert trainer == "[2026-11-29 10:00:00.001 main] train.py:1 - trainer line\nlast trainer line without newline"


SECRETS = {
    "wandb": "0123456789abcdef0123456789abcdef01234567",
    "hf": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "gh": "ghp_ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210",
    "openai": "sk-proj-QWERTYUIOPASDFGHJKLZXCVBNM1234567890ab",
    "aws_id": "AKIAABCDEFGHIJKLMNOP",
    "aws_secret": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "url_pw": "s3cr3tUrlPassw0rd",
    "nccl": "nccl-secret-value-123456",
}


def test_no_secret_reaches_any_object_on_the_branch(repo: Path) -> None:
    env = _bin(repo)
    env.update(
        {
            "WANDB_API_KEY": SECRETS["wandb"],
            "HF_TOKEN": SECRETS["hf"],
            "NCCL_IB_SECRET": SECRETS["nccl"],
            "AWS_SECRET_ACCESS_KEY": SECRETS["aws_secret"],
        }
    )
    (repo / "train.py").write_text(FAKE_TRAIN)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "train")
    launcher = (
        "#!/bin/bash\nset -ex\n"
        f"export GITHUB_TOKEN={SECRETS['gh']}\n"
        f"AWS_ACCESS_KEY_ID={SECRETS['aws_id']}\n"
        f"git ls-remote https://user:{SECRETS['url_pw']}@127.0.0.1:9/none.git 2>/dev/null || true\n"
        f"echo 'EXEC: python3 train.py --hub-token {SECRETS['hf']}'\n"
        "ray job submit --address=http://127.0.0.1:8265 "
        '--runtime-env-json=\'{"env_vars": {"HF_TOKEN": "\'$HF_TOKEN\'", "NCCL_ALGO": "Ring"}}\' '
        '-- python3 train.py --lr 1e-6 --wandb-key "$WANDB_API_KEY" '
        f"--openai-api-key {SECRETS['openai']}\n"
    )
    (repo / "run.sh").write_text(launcher)
    # the launcher is tracked and dirty: its secrets must not reach the run commit's code tree either
    git(repo, "add", "run.sh")
    git(repo, "commit", "-q", "-m", "launcher")
    (repo / "run.sh").write_text(launcher + "# edited\n")
    r = ledger(repo, "run", "--name", "leaky", "--", "bash", "run.sh", "--token", SECRETS["gh"], env=env)
    assert r.returncode == 0, r.stderr
    objects = subprocess.run(
        ["git", "rev-list", "--objects", "experiments"], cwd=repo, stdout=subprocess.PIPE, text=True, check=True
    ).stdout.split("\n")
    head_objects = set(
        subprocess.run(["git", "rev-list", "--objects", "HEAD"], cwd=repo, stdout=subprocess.PIPE, text=True, check=True).stdout.split("\n")
    )
    ids = "\n".join(line.split(" ")[0] for line in objects if line and line not in head_objects) + "\n"
    blob = subprocess.run(["git", "cat-file", "--batch"], cwd=repo, input=ids.encode(), stdout=subprocess.PIPE, check=True).stdout
    assert len(blob) > 1000  # the run's objects were really read
    for kind, secret in SECRETS.items():
        assert secret.encode() not in blob, f"{kind} secret leaked into the experiments branch"
    m = _manifest(repo)
    assert m["redacted"]  # the manifest says what was redacted (names, never values)
    assert "code/run.sh: GITHUB_TOKEN" in m["redacted"]  # where and what kind, never the value
    assert m["settings"]["wandb-key"] == "***" and m["settings"]["lr"] == 1e-06


def test_extra_logs_env_report_and_environment(repo: Path) -> None:
    (repo / ".ledger.yaml").write_text("logs:\n  extra: ['ray-logs/*.log']\ncapture:\n  env_patterns: ['MY_*']\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "config")
    job = (
        "import os, json\n"
        "os.makedirs('ray-logs', exist_ok=True)\n"
        "open('ray-logs/worker-1.log', 'w').write('worker says hi\\n')\n"
        "rep = {'role': 'actor', 'rank': 0, 'git_repos': [{'package_name': 'miles', 'commit': 'abc123', 'dirty': True}]}\n"
        "print('(MegatronTrainRayActor pid=5) ENV_REPORT_JSON=' + json.dumps(rep))\n"
    )
    env = {"NCCL_ALGO": "Ring", "MY_KNOB": "7", "UNRELATED": "x"}
    r = ledger(repo, "run", "--no-debug-data", "--", sys.executable, "-c", job, env=env)
    assert r.returncode == 0, r.stderr
    m = _manifest(repo)
    folder = f"runs/{m['id'][-4:-2]}/{m['id']}"
    assert m["logs"]["extra"] == ["extra-logs/worker-1.log"]
    assert git(repo, "show", f"experiments:{folder}/extra-logs/worker-1.log") == "worker says hi\n"
    assert m["env_report"] == [{"role": "actor", "rank": 0, "packages": {"miles": {"commit": "abc123", "dirty": True}}}]
    assert m["settings"]["env.NCCL_ALGO"] == "Ring" and m["settings"]["env.MY_KNOB"] == "7"
    assert "env.UNRELATED" not in m["settings"]


@pytest.mark.slow
def test_big_logs_are_tracked_with_dvc_and_git_keeps_head_and_tail(repo: Path, tmp_path: Path) -> None:
    assert ledger(repo, "init").returncode == 0
    (repo / ".ledger.yaml").write_text("logs:\n  git_max_mb: 0.05\n")  # 50 kB
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    job = "for i in range(40000):\n    print(f'[2026-11-29 10:00:00.000 main] train.py:1 - perf {i}: {{\"perf/step_time\": 1.5}}')\n"
    expected = "".join(f'[2026-11-29 10:00:00.000 main] train.py:1 - perf {i}: {{"perf/step_time": 1.5}}\n' for i in range(40000)).encode()
    r = ledger(repo, "run", "--no-debug-data", "--", sys.executable, "-c", job)
    assert r.returncode == 0, r.stderr
    m = _manifest(repo)
    folder = f"runs/{m['id'][-4:-2]}/{m['id']}"
    assert m["logs"]["in_dvc"] == ["trainer.log"] and m["logs"]["metrics"] == "metrics.jsonl"
    excerpt = subprocess.run(["git", "show", f"experiments:{folder}/trainer.log"], cwd=repo, capture_output=True, check=True).stdout
    assert len(excerpt) < len(expected) and b"bytes elided" in excerpt and excerpt.startswith(expected[:1000])
    assert excerpt.endswith(expected[-1000:])
    [logs] = [d for d in m["data"] if d["role"] == "logs"]
    assert logs["tracked"] is True and logs["nfiles"] == 1
    from ledger.data.dvcops import checkout_data, status_data

    dvc_text = git(repo, "show", f"experiments:{folder}/data/logs.dvc")
    assert status_data(repo, dvc_text) == "cached"
    checkout_data(repo, dvc_text, tmp_path / "logs")
    assert (tmp_path / "logs" / "trainer.log").read_bytes() == expected
