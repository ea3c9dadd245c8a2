"""A Python launcher in the shape of radixark/miles scripts/run_*.py (EXEC: lines, shell commands)."""

import subprocess
import sys


def exec_command(cmd: str) -> None:
    print(f"EXEC: {cmd}", flush=True)
    subprocess.run(cmd, shell=True, check=True)


model_args = "--num-layers 2 --moe-token-dispatcher-type alltoall "
misc_args = "--moe-token-dispatcher-type flex --lr 1e-6 --sglang-cuda-graph-bs 1 2 16 "
exec_command("pkill -9 sglang ; ray stop --force")
exec_command("ray start --head --disable-usage-stats")
exec_command(
    'ray job submit --address=http://127.0.0.1:8265 --runtime-env-json=\'{"env_vars": {"NCCL_ALGO": "Ring"}}\' '
    f"-- python3 miles_grpo.py {model_args}{misc_args}"
)
sys.exit(0)
