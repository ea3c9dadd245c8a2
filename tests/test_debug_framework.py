"""Debug-data flags for the trainer that runs (issue 21, item 5): Miles gets both, slime the
rollout flag only, an unknown trainer none; replay passes only flags the framework has."""

from __future__ import annotations

import json
import os
from pathlib import Path

from conftest import ledger, make_repo

SHAPES_BIN = Path(__file__).resolve().parent / "miles_shapes" / "bin"  # stand-in `ray` and `pkill`

SLIME_TRAIN = """\
import argparse
import os
import time

import slime  # noqa: F401 - the framework, as slime's own train.py imports it

p = argparse.ArgumentParser()
p.add_argument("--num-rollout", type=int, default=2)
p.add_argument("--lr", type=float, default=0.1)
p.add_argument("--save-debug-rollout-data")
p.add_argument("--load-debug-rollout-data")
p.add_argument("--debug-train-only", action="store_true")
args = p.parse_args()  # slime's own parser is partly lenient; this one refuses what slime lacks
stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
for rid in range(args.num_rollout):
    if args.save_debug_rollout_data:
        path = args.save_debug_rollout_data.format(rollout_id=rid)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "w").write(str(rid))
    if args.load_debug_rollout_data:
        assert open(args.load_debug_rollout_data.format(rollout_id=rid)).read() == str(rid)
    print(f"[{stamp}] model.py:1 - step {rid}: {{'train/loss': {0.5 + rid * args.lr}}}", flush=True)
"""

PLAIN_TRAIN = """\
import argparse

p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, default=0.1)
print("trained with lr", p.parse_args().lr)
"""


def _show(repo: Path) -> dict:
    return json.loads(ledger(repo, "show", "latest", "--json").stdout)


def test_slime_run_gets_the_rollout_flag_only_and_its_replay_no_miles_flag(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "proj", {"train.py": SLIME_TRAIN, "slime/__init__.py": ""})
    ledger(repo, "init")
    r = ledger(repo, "run", "--", "python3", "train.py", "--lr", "0.5")
    assert r.returncode == 0, r.stderr  # a Miles-only flag would fail it: unrecognized arguments
    m = _show(repo)
    debug = m["command"]["debug_data"]
    assert debug["framework"] == "slime" and debug["added"] == ["--save-debug-rollout-data"]
    assert "train.py imports slime" in debug["recognised_by"]
    rollout = next(d for d in m["data"] if d["role"] == "rollout")
    assert rollout["rollout_ids"] == [0, 1]  # `ledger show` lists what a replay can pick
    r = ledger(repo, "replay", m["id"], "--step", "5", "--dry-run")
    assert r.returncode != 0 and "rollout 5 is not in the recorded data" in r.stderr and "0, 1" in r.stderr
    assert r.stdout == ""
    r = ledger(repo, "replay", m["id"], "--yes")
    assert r.returncode == 0, r.stderr
    replay = _show(repo)
    argv = replay["command"]["training_argv"]
    assert "--load-debug-rollout-data" in argv and "--debug-train-only" in argv
    assert not any(a.startswith("--save-debug-event-data") for a in argv)
    assert replay["replay"]["fidelity"]["verdict"] == "bitwise"


# in the shape of THUDM/slime's scripts/run-qwen3-4B.sh (624b824a): the kill preamble before `set -ex`,
# argument arrays, a multi-line runtime env, `ray start --head`, `ray job submit ... -- python3
# train.py ${ARRAYS[@]}`, no "$@"
SLIME_LAUNCHER = """\
#!/bin/bash
pkill -9 sglang
sleep 0
ray stop --force
pkill -9 ray

set -ex
ROLLOUT_ARGS=(
   --num-rollout 2
)
OPTIMIZER_ARGS=(
   --lr 0.5
)
ray start --head --node-ip-address 127.0.0.1 --num-gpus 0 --disable-usage-stats
RUNTIME_ENV_JSON="{
  \\"env_vars\\": {
    \\"PYTHONPATH\\": \\"/root/Megatron-LM/\\"
  }
}"
ray job submit --address="http://127.0.0.1:8265" \\
   --runtime-env-json="${RUNTIME_ENV_JSON}" \\
   -- python3 train.py \\
   ${ROLLOUT_ARGS[@]} \\
   ${OPTIMIZER_ARGS[@]}
"""


def test_slime_behind_a_launcher_gets_the_rollout_flag_through_the_wrapper(tmp_path: Path) -> None:
    """Issue 33: the wrapper added slime's one debug flag, and the record said `via: null` (it
    wanted Miles' two); the flags of the trainer's framework are what must reach it."""
    repo = make_repo(tmp_path / "proj", {"train.py": SLIME_TRAIN, "slime/__init__.py": "", "run.sh": SLIME_LAUNCHER})
    ledger(repo, "init")
    env = {"PATH": f"{SHAPES_BIN}{os.pathsep}{os.environ['PATH']}"}
    r = ledger(repo, "run", "--", "bash", "run.sh", env=env)
    assert r.returncode == 0, r.stderr
    m = _show(repo)
    debug = m["command"]["debug_data"]
    assert (debug["via"], debug["framework"], debug["added"]) == ("wrapper", "slime", ["--save-debug-rollout-data"]), debug
    assert "cannot be replayed" not in " ".join(m["warnings"])
    assert next(d for d in m["data"] if d["role"] == "rollout")["rollout_ids"] == [0, 1]


def test_unknown_trainer_gets_no_flag_and_a_refused_flag_says_how_to_turn_it_off(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "proj", {"train.py": PLAIN_TRAIN})
    ledger(repo, "init")
    r = ledger(repo, "run", "--", "python3", "train.py")
    assert r.returncode == 0, r.stderr  # a first run of one's own trainer is not broken by ledger
    m = _show(repo)
    assert m["command"]["debug_data"]["framework"] == "unknown" and m["command"]["debug_data"]["added"] == []
    assert "capture.debug_framework" in r.stderr
    # told it is Miles, ledger adds both flags; the trainer refuses them: one line says the way out
    (repo / ".ledger.yaml").write_text("capture:\n  debug_framework: miles\n")
    r = ledger(repo, "run", "--", "python3", "train.py")
    assert r.returncode == 2
    hint = [line for line in r.stderr.splitlines() if "does not accept --save-debug-" in line]
    assert len(hint) == 1 and "--no-debug-data" in hint[0], r.stderr
    assert _show(repo)["command"]["debug_data"]["framework"] == "miles"
