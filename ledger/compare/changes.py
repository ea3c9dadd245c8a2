"""Which settings changed between two runs, the baseline a refusal suggests, and the change log.

Settings are compared as `ledger.compare.settingsview.comparable` shows them, so every comparison
sees the same names; numbers compare by value (`1e-3` equals `0.001`), a setting one run lacks
is `ABSENT` on that side.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from ledger.compare.settingsview import comparable, replay_mechanics
from ledger.globs import matcher
from ledger.textfmt import ABSENT


class Change(msgspec.Struct, frozen=True):
    """One setting whose value differs; `a` or `b` is `ABSENT` when that run lacks it."""

    name: str
    a: Any
    b: Any


_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        return float(value)
    return None


_PLAIN = (str, int, float)


def same_value(a: Any, b: Any) -> bool:
    """Equal setting values: exact, but numbers compare by value whatever their spelling.

    `1e-06`, `1.0e-06` and the float 1e-06 are the same; `true` and `1` are not; lists compare
    element by element.
    """
    if type(a) is type(b) and type(a) in _PLAIN and a == b:  # most values of two runs: equal as written
        return True
    if a is ABSENT or b is ABSENT:
        return a is b
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if a == b:
        return True
    x, y = _as_number(a), _as_number(b)
    return x is not None and y is not None and x == y


# settings that manifests recorded before they existed lack: absent on one side is unknown, not a change
_ADDED_LATER = ("command.entry",)


_SCALARS = frozenset({str, int, float, bool, type(None)})


class Prepared(msgspec.Struct, frozen=True):
    """One run's settings made ready to be compared with many others (a replica or baseline
    search): its scalar values hashed once, as (name, type, value), the type keeping `True` and
    `1` apart, which compare and hash alike; `nested`: the names holding a list or a mapping."""

    settings: Mapping[str, Any]
    items: frozenset[tuple[str, type, Any]]
    nested: frozenset[str]


def prepare(settings: Mapping[str, Any] | Prepared) -> Prepared:
    """`settings` ready for `changed_settings` (already prepared: as it is)."""
    if isinstance(settings, Prepared):
        return settings
    items = frozenset((k, v.__class__, v) for k, v in settings.items() if v.__class__ in _SCALARS)
    return Prepared(settings, items, frozenset(k for k, v in settings.items() if v.__class__ not in _SCALARS))


def _maybe_changed(a: Prepared, b: Prepared) -> set[str]:
    """Every name but those holding the same scalar, of the same type, on both sides: what
    `same_value` calls equal without a look. A set operation at C speed, so a search comparing
    one run with thousands of others looks only at the few settings that differ."""
    return {k for k, _t, _v in a.items ^ b.items} | a.nested | b.nested


def changed_settings(a: Mapping[str, Any] | Prepared, b: Mapping[str, Any] | Prepared, ignore: Sequence[str] = ()) -> list[Change]:
    """Settings that differ between two runs, sorted by name; `ignore` holds fnmatch globs."""
    pa, pb = prepare(a), prepare(b)
    changes = []
    ignored = matcher(ignore)
    for name in sorted(_maybe_changed(pa, pb)):
        va, vb = pa.settings.get(name, ABSENT), pb.settings.get(name, ABSENT)
        # equal values first: most settings of two runs are equal, and matching a name against
        # every glob is what a search over thousands of runs (replicas, baselines) would pay
        if same_value(va, vb) or ignored(name):
            continue
        if name in _ADDED_LATER and (va is ABSENT or vb is ABSENT):
            continue
        changes.append(Change(name, va, vb))
    return changes


def _settings(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    return comparable(manifest)  # one view of the settings for diff, log, list and report


MAX_BASELINES = 5


def suggest_baseline(b_manifest: Mapping[str, Any], earlier: Iterable[Mapping[str, Any]], ignore: Sequence[str] = ()) -> str | None:
    """The id of the most recent run started before B that differs from B in exactly one setting."""
    found = suggest_baselines(b_manifest, earlier, ignore)
    return found[0] if found else None


def suggest_baselines(
    b_manifest: Mapping[str, Any],
    earlier: Iterable[Mapping[str, Any]],
    ignore: Sequence[str] = (),
    limit: int = MAX_BASELINES,
) -> list[str]:
    """The ids of the runs started before B that differ from B in exactly one setting, newest
    first, at most `limit`."""
    b_started = b_manifest.get("started") or ""
    candidates = [m for m in earlier if m.get("id") != b_manifest.get("id") and (not b_started or (m.get("started") or "") < b_started)]
    candidates.sort(key=lambda m: m.get("started") or "", reverse=True)
    found: list[str] = []
    for manifest in candidates:
        if len(changed_settings(_settings(manifest), _settings(b_manifest), ignore)) == 1:
            found.append(str(manifest.get("id")))
            if len(found) >= limit:
                break
    return found


def change_log(manifests_in_order: Sequence[Mapping[str, Any]], ignore: Sequence[str] = ()) -> list[tuple[str, list[Change]]]:
    """For `ledger log`: each run's setting changes against the run before it (none for the first).

    A replay is compared with its source run instead (its `--set`s are what changed), when the source is among the runs."""
    out: list[tuple[str, list[Change]]] = []
    previous: Mapping[str, Any] | None = None
    by_id = {str(m.get("id")): m for m in manifests_in_order}
    for manifest in manifests_in_order:
        base = by_id.get(str(manifest.get("replay_of"))) if manifest.get("replay_of") else None
        base = previous if base is None else base
        changes = (
            [] if base is None else changed_settings(_settings(base), _settings(manifest), [*ignore, *replay_mechanics(base, manifest)])
        )
        out.append((str(manifest.get("id")), changes))
        previous = manifest
    return out
