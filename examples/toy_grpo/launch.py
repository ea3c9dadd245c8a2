"""Launch the toy GRPO trainer the way Miles' Python launchers (scripts/run_*.py) do.

Builds the same command as run.sh, prints it as one line `EXEC: <command>`, runs it, and exits
with its exit code. Extra arguments are appended last, so they override the defaults.

    python3 examples/toy_grpo/launch.py --num-rollout 16
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

SCRIPT_DIR = Path(__file__).resolve().parent

ROLLOUT_ARGS = [
    "--rollout-batch-size",
    "8",
    "--n-samples-per-prompt",
    "8",
    "--rollout-max-response-len",
    "24",
    "--rollout-temperature",
    "1.0",
    "--num-rollout",
    "8",
]
TRAIN_ARGS = ["--lr", "0.2", "--clip-grad", "1.0", "--global-batch-size", "64"]
PERF_ARGS = ["--colocate"]
SGLANG_ARGS = ["--sglang-mem-fraction-static", "0.7"]
MISC_ARGS = ["--seed", "1234", "--rollout-seed", "42"]


def build_command(extra: list[str], env: dict[str, str]) -> list[str]:
    """The full training command: defaults, the wandb key when set, then `extra`."""
    wandb = []
    if env.get("WANDB_API_KEY"):
        # As in Miles' launchers, the key goes on the command line (and into the EXEC line).
        wandb = [
            "--use-wandb",
            "--wandb-project",
            "toy-grpo",
            "--wandb-key",
            env["WANDB_API_KEY"],
        ]
    return [
        "python3",
        str(SCRIPT_DIR / "train.py"),
        *ROLLOUT_ARGS,
        *TRAIN_ARGS,
        *PERF_ARGS,
        *SGLANG_ARGS,
        *MISC_ARGS,
        *wandb,
        *extra,
    ]


def main(argv: list[str] | None = None) -> int:
    """Print `EXEC: <command>`, run it, and return its exit code."""
    cmd = build_command(sys.argv[1:] if argv is None else argv, dict(os.environ))
    print("EXEC: " + shlex.join(cmd), flush=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    code = subprocess.run(cmd, check=False, env=env).returncode
    # Killed by a signal: report it as a shell would (128 + signal number).
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
