"""A run's settings as `ledger diff`, `log`, `list --changed` and `report` compare them.

One view for every comparison, so the four never disagree:

- a manifest recorded before the `code` setting existed has `code.commit` + `code.patch` (or
  `code.tree`): they become one `code` value (`legacy:...`), so an old run differs from another
  old run where it did before, and from a new run in `code` alone, never in three names;
- a manifest recorded before `command.entry` existed lacks it: `diffcore.changed_settings` does
  not count a setting added later as a difference where one side lacks it;
- settings whose value holds the run's own id (`/ckpt/<id>`) are left out: they differ in every
  run by construction;
- a replay compared with its own source run leaves out what makes it a replay (`replay_mechanics`):
  only the training settings it changed remain.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger.argv import mentions

CODE = "code"
LEGACY_CODE = ("code.commit", "code.patch", "code.tree")


def comparable(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of `manifest` in the form every comparison uses (see the module doc)."""
    settings = dict(manifest.get("settings") or {})
    legacy = {k: settings.pop(k) for k in LEGACY_CODE if k in settings}
    if CODE not in settings and legacy:
        if legacy.get("code.tree"):
            settings[CODE] = f"legacy:{legacy['code.tree']}"
        else:
            patch = legacy.get("code.patch")
            settings[CODE] = f"legacy:{legacy.get('code.commit')}" + (f"+{patch}" if patch else "")
    run_id = str(manifest.get("id") or "")
    if run_id:
        settings = {k: v for k, v in settings.items() if not mentions(v, run_id)}
    return settings


ENTRY = "command.entry"
# what a replay changes to be one (replay/command.py): train-only (or rollout-only) on the recorded
# rollouts, the chosen steps as `--num-rollout` from 0; never what it tests, unless it `--set`s them
REPLAY_MECHANICS = ("debug-train-only", "debug-rollout-only", "num-rollout", "start-rollout-id")


def _source_and_replay(ma: Mapping[str, Any], mb: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]] | None:
    for source, replay in ((ma, mb), (mb, ma)):
        if replay.get("replay_of") and replay.get("replay_of") == source.get("id"):
            return source, replay
    return None


def replay_mechanics(ma: Mapping[str, Any], mb: Mapping[str, Any]) -> list[str]:
    """The settings a comparison of a replay with its own source leaves out: those the
    replay changes to be a replay (`REPLAY_MECHANICS`) unless its `--set`s name them, and its
    `command.entry` when it is the source's training script without the source's launcher
    (`run.sh -> train.py` against `train.py`). Empty for any other pair of runs."""
    pair = _source_and_replay(ma, mb)
    if pair is None:
        return []
    source, replay = pair
    sets = (replay.get("replay") or {}).get("sets") or []
    named = {str(s).split("=", 1)[0].strip().lstrip("-") for s in sets if isinstance(s, str)}
    names = [n for n in REPLAY_MECHANICS if n not in named and f"no-{n}" not in named]
    entry_a, entry_b = (str((m.get("settings") or {}).get(ENTRY)) for m in (source, replay))
    if entry_a.rsplit(" -> ", 1)[-1] == entry_b:
        names.append(ENTRY)
    return names
