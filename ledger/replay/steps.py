"""Presenting chosen rollouts to a replayed job under new ids starting at 0.

Miles resets `--start-rollout-id` to 0 without a checkpoint and treats `--num-rollout` as an
exclusive end (../shared/miles-facts.md), so replaying rollouts 2..4 alone means a folder where
`0.pt` is rollout 2, `1.pt` rollout 3, ... and `--num-rollout 3`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ledger.errors import DataError, UsageError

ID_FIELD = "{rollout_id}"


def parse_steps(step: int | None, steps: str | None) -> list[int] | None:
    """`--step N` or `--steps A:B` (B exclusive, like Python) as a list of rollout ids."""
    if step is not None and steps is not None:
        raise UsageError("--step and --steps are exclusive", "give one of them")
    if step is not None:
        if step < 0:
            raise UsageError(f"--step {step} is negative", "rollout ids start at 0")
        return [step]
    if steps is None:
        return None
    m = re.fullmatch(r"(\d+):(\d+)", steps.strip())
    if not m or int(m.group(1)) >= int(m.group(2)):
        raise UsageError(f"--steps {steps!r} is not a range A:B with A < B", "e.g. --steps 2:5 replays 2, 3 and 4")
    return list(range(int(m.group(1)), int(m.group(2))))


def file_name_template(template: str) -> str:
    """The file-name part of a rollout template (`/x/rollout/{rollout_id}.pt` -> `{rollout_id}.pt`)."""
    name = os.path.basename(template)
    if ID_FIELD not in name:
        raise DataError(
            f"the recorded rollout template {template!r} has no {ID_FIELD} in its file name",
            "replay supports templates like DIR/{rollout_id}.pt",
        )
    return name


def link_steps(data_dir: Path, name_template: str, chosen: list[int], dest: Path) -> dict[int, int]:
    """Link rollouts `chosen` from `data_dir` into `dest` as ids 0..n-1; returns {new id: old id}."""
    dest.mkdir(parents=True, exist_ok=True)
    mapping: dict[int, int] = {}
    for new, old in enumerate(chosen):
        src = data_dir / name_template.format(rollout_id=old)
        if not src.is_file():
            raise DataError(
                f"rollout {old} is not in the recorded data ({src.name} missing)",
                "`ledger show RUN` lists the recorded rollouts; pick steps that exist",
            )
        target = dest / name_template.format(rollout_id=new)
        if target.exists() or target.is_symlink():
            target.unlink()
        try:
            os.link(src, target)
        except OSError:
            target.symlink_to(src.resolve())
        mapping[new] = old
    return mapping
