"""Shared by the trainer and the launcher's helpers (shape of miles/utils/misc.py)."""


def node_label() -> str:
    return "node-0"
