"""A run's settings as `ledger diff`, `log`, `list --changed` and `report` compare them.

One view for every comparison, so the four never disagree:

- a manifest recorded before the `code` setting existed has `code.commit` + `code.patch` (or
  `code.tree`): they become one `code` value (`legacy:...`), so an old run differs from another
  old run where it did before, and from a new run in `code` alone, never in three names;
- a manifest recorded before `command.entry` existed lacks it: `diffcore.changed_settings` does
  not count a setting added later as a difference where one side lacks it;
- settings whose value holds the run's own id (`/ckpt/<id>`) are left out: they differ in every
  run by construction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CODE = "code"
LEGACY_CODE = ("code.commit", "code.patch", "code.tree")


def _holds(value: Any, needle: str) -> bool:
    if isinstance(value, str):
        return needle in value
    if isinstance(value, list):
        return any(_holds(item, needle) for item in value)
    return False


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
        settings = {k: v for k, v in settings.items() if not _holds(v, run_id)}
    return settings
