"""Run a shell command, printing it first (shape of Miles' exec_command.py)."""

import subprocess

from miles.utils.misc import node_label


def exec_command_cpu(cmd: str) -> None:
    print(f"EXEC: {cmd}", flush=True)
    subprocess.run(["bash", "-c", cmd], check=True)


__all__ = ["exec_command_cpu", "node_label"]
