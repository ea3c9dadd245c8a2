"""Links to the trackers the job already uses, read from what it printed (its redacted trainer.log).

Shapes as the trackers print them (facts from their output, seen in public logs):
- W&B: `wandb: 🚀 View run at https://wandb.ai/<entity>/<project>/runs/<id>` (older versions
  without the rocket, newer `wandb: 🚀 View run <name> at: <url>`); the run id is the URL's last part.
- MLflow: `🏃 View run <name> at: <tracking uri>/#/experiments/<n>/runs/<run id>`.
- TensorBoard: the log directory from the trainer's flags (`--tensorboard-dir`, `--tb-dir`,
  `--logdir`) or a printed `TensorBoard logdir: <dir>` / `tensorboard --logdir <dir>`.

Only the first `HEAD_BYTES` of the log are read (trackers print their links as they start), so a
long log costs nothing. A link must be http(s); anything else is dropped, never followed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

HEAD_BYTES = 8 << 20
_WANDB = re.compile(rb"wandb:\s+(?:\S+\s+)?View run (?:.{0,200}? )?at:? (https?://\S+?/runs/([A-Za-z0-9_-]+))/?\s")
_MLFLOW = re.compile(rb"View run (?:.{0,200}? )?at:? (https?://\S+?/#/experiments/(\d+)/runs/([0-9a-f]{8,64}))/?\s")
_TB_PRINTED = re.compile(rb"(?:TensorBoard logdir:|tensorboard --logdir[= ])\s*(\S+)")
TB_FLAGS = ("tensorboard-dir", "tb-dir", "logdir", "tensorboard_dir")


class WandbRun(TypedDict):
    url: str
    run_id: str


class MlflowRun(TypedDict):
    url: str
    experiment_id: str
    run_id: str


class TensorBoardDir(TypedDict):
    logdir: str


class Trackers(TypedDict, total=False):
    """The record's `trackers`: a key per tracker found in what the job printed."""

    wandb: WandbRun
    mlflow: MlflowRun
    tensorboard: TensorBoardDir


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def find_trackers(log: Path, settings: Mapping[str, object] | None = None) -> Trackers | None:
    """`{wandb: {url, run_id}, mlflow: {url, experiment_id, run_id}, tensorboard: {logdir}}` for
    the trackers found; None when none."""
    out: Trackers = {}
    try:
        with open(log, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        head = b""
    head += b"\n"
    m = _WANDB.search(head)
    if m:
        out["wandb"] = {"url": _text(m.group(1)), "run_id": _text(m.group(2))}
    m = _MLFLOW.search(head)
    if m:
        out["mlflow"] = {"url": _text(m.group(1)), "experiment_id": _text(m.group(2)), "run_id": _text(m.group(3))}
    logdir = next((str(settings[k]) for k in TB_FLAGS if settings and isinstance(settings.get(k), str)), None)
    if logdir is None:
        m = _TB_PRINTED.search(head)
        logdir = _text(m.group(1)) if m else None
    if logdir:
        out["tensorboard"] = {"logdir": logdir}
    return out or None


def tracker_links(trackers: Any) -> list[tuple[str, str, str | None]]:
    """(tracker, text, http(s) url or None) for showing; a damaged value gives nothing."""
    if not isinstance(trackers, dict):
        return []
    out: list[tuple[str, str, str | None]] = []
    for name in ("wandb", "mlflow"):
        item = trackers.get(name)
        if isinstance(item, dict) and isinstance(item.get("url"), str):
            url = item["url"]
            out.append((name, f"{name} run {item.get('run_id') or ''}".strip(), url if re.match(r"^https?://[^\s\"'<>]+$", url) else None))
    tb = trackers.get("tensorboard")
    if isinstance(tb, dict) and isinstance(tb.get("logdir"), str):
        out.append(("tensorboard", f"tensorboard --logdir {tb['logdir']}", None))
    return out
