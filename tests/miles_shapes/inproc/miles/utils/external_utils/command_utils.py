"""Stand-in for Miles' command_utils: builds and submits the training command."""

import json
import os
import random
import shlex
from dataclasses import dataclass
from pathlib import Path

from miles.utils.external_utils.exec_command import exec_command_cpu
from miles.utils.external_utils.model_args_utils import load_model_args

repo_base_dir = Path(os.path.abspath(__file__)).resolve().parents[3]


@dataclass
class ExecuteTrainConfig:
    num_nodes: int = 1
    output_dir: str = "/tmp/miles-output"


def create_run_id() -> str:
    return f"run-{random.Random().randint(0, 10**9):09d}"


def execute_train(train_args: str, model_type: str, train_script: str = "train.py") -> None:
    master_addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
    exec_command_cpu("pkill -9 sglang; ray stop --force; true")
    exec_command_cpu(f"ray start --head --node-ip-address {master_addr} --disable-usage-stats")
    runtime_env = {"env_vars": {"PYTHONUNBUFFERED": "1", "MASTER_ADDR": master_addr, "no_proxy": f"127.0.0.1,{master_addr}"}}
    exec_command_cpu(
        f"ray job submit --address=http://127.0.0.1:8265 --runtime-env-json={shlex.quote(json.dumps(runtime_env))} "
        f"-- python3 {repo_base_dir}/{train_script} {load_model_args(model_type)} {train_args}"
    )
