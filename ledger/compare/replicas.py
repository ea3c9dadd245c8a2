"""Replicas: recorded runs whose settings are equal except their seeds.

A replica of run X is a finished run R (not X) such that

- every setting is equal in X and R, after `ignore` (the globs `ledger diff` leaves out), except
  the seed settings: `seed`, `rollout-seed`, and the globs of `diff: replica_keys:` in `.ledger.yaml`;
- the image (`image.digest`, `image.miles_commit`, `image.sglang_version`) and the code setting
  (`code`, `command.entry`; `code.tree`, `code.commit`, `code.patch` in older runs) are equal even where `ignore` would leave them out;
- both replay the same recorded samples the same way, or neither is a replay (`replay_of` and the
  replay's step mapping are equal: a replay's data path is not a setting);
- R started within `max_age_hours` of X, unless `any_age`.

`session_notes` says which of them ran on another day, host, GPU model or driver than A: the
practice note behind ledger keeps a baseline from the same session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ledger.compare.changes import Prepared, changed_settings, prepare
from ledger.globs import matches_any
from ledger.timefmt import parse_iso

SEED_KEYS = ("seed", "rollout-seed")
# `code` and `command.entry`; `code.tree`/`code.commit`/`code.patch` in older runs
IDENTITY_KEYS = (
    "image.digest",
    "image.miles_commit",
    "image.sglang_version",
    "code",
    "command.entry",
    "code.tree",
    "code.commit",
    "code.patch",
)

Manifest = Mapping[str, Any]


def replica_globs(extra: Iterable[str] = ()) -> list[str]:
    """The settings replicas may differ in: the seeds and `diff: replica_keys:`."""
    return [*SEED_KEYS, *extra]


def _same(a: Any, b: Any) -> bool:
    return a == b or (a in (None, "") and b in (None, ""))


def _replay_key(m: Manifest) -> tuple[Any, Any, Any]:
    replay = m.get("replay") or {}
    return m.get("replay_of"), replay.get("mode"), replay.get("mapping")


def is_replica(
    target: Manifest,
    other: Manifest,
    ignore: Sequence[str],
    keys: Sequence[str],
    replay_of: Callable[[Manifest], tuple[Any, Any, Any]] = _replay_key,
    prepared: tuple[Prepared, Prepared] | None = None,
) -> bool:
    """Whether `other` is a replica of `target` (module docstring), age aside. `prepared`: the two
    runs' settings as `changes.prepare` gives them, for a caller comparing one run with many."""
    sa, sb = target.get("settings") or {}, other.get("settings") or {}
    if not all(_same(sa.get(k), sb.get(k)) for k in IDENTITY_KEYS):
        return False
    pa, pb = prepared or (sa, sb)
    if any(not matches_any(c.name, keys) for c in changed_settings(pa, pb, ignore)):
        return False
    if bool(target.get("replay_of")) != bool(other.get("replay_of")):
        return False
    return not target.get("replay_of") or replay_of(target) == replay_of(other)


def _hours_apart(a: Manifest, b: Manifest) -> float | None:
    ta, tb = parse_iso(a.get("started")), parse_iso(b.get("started"))
    return None if ta is None or tb is None else abs(ta - tb) / 3600


def within_age(target: Manifest, other: Manifest, max_age_hours: float) -> bool:
    """Whether the two runs started at most `max_age_hours` apart (unknown times: no)."""
    hours = _hours_apart(target, other)
    return hours is not None and hours <= max_age_hours


class Candidate(NamedTuple):
    """A run compared with one target or more: its manifest (or listing fields with its settings),
    its settings prepared once (`changes.prepare`), and its own settings to leave out (paths
    holding its id)."""

    manifest: Manifest
    settings: Prepared
    own: tuple[str, ...] = ()


def candidate(m: Manifest, own: Iterable[str] = ()) -> Candidate:
    """`m` ready to be compared with many targets."""
    return Candidate(m, prepare(m.get("settings") or {}), tuple(sorted(own)))


def find_replicas(
    target: Manifest,
    candidates: Iterable[Manifest | Candidate],
    ignore: Sequence[str],
    keys: Sequence[str],
    max_age_hours: float,
    any_age: bool = False,
    exclude: Iterable[str] = (),
    replay_of: Callable[[Manifest], tuple[Any, Any, Any]] = _replay_key,
) -> list[Manifest]:
    """The finished replicas of `target` among `candidates`, oldest first (`exclude`: ids left out).

    `replay_of` gives a replay's (source, mode, step mapping); the default reads the manifest, a
    caller holding only summaries passes one that reads the full manifest of those few runs.
    """
    skip = {target.get("id"), *exclude}
    settings = prepare(target.get("settings") or {})
    found = []
    for c in candidates:
        c = c if isinstance(c, Candidate) else candidate(c)
        m = c.manifest
        if m.get("id") in skip or (m.get("status") or {}).get("state") != "finished":
            continue
        if not any_age and not within_age(target, m, max_age_hours):
            continue
        if is_replica(target, m, [*ignore, *c.own], keys, replay_of, (settings, c.settings)):
            found.append(m)
    return sorted(found, key=lambda m: (m.get("started") or "", str(m.get("id"))))


# ---------------------------------------------------------------------------- same session


def _gpus(m: Manifest) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    gpu = m.get("gpu") or {}
    gpus = gpu.get("gpus") if isinstance(gpu, Mapping) else None
    if not gpus:
        return None
    names = tuple(sorted({str(g.get("name")) for g in gpus if isinstance(g, Mapping)}))
    drivers = tuple(sorted({str(g.get("driver_version")) for g in gpus if isinstance(g, Mapping)}))
    return names, drivers


def _day(m: Manifest) -> str | None:
    started = m.get("started")
    return started[:10] if isinstance(started, str) and len(started) >= 10 else None


def _host(m: Manifest) -> str | None:
    host = m.get("host") or {}
    return host.get("hostname") if isinstance(host, Mapping) else None


def session_facts(m: Manifest) -> dict[str, str | None]:
    """What makes a session: UTC day, host, GPU models, GPU drivers (None where not recorded)."""
    gpus = _gpus(m)
    return {"day": _day(m), "host": _host(m), "GPU": ", ".join(gpus[0]) if gpus else None, "driver": ", ".join(gpus[1]) if gpus else None}


def session_notes(a: Manifest, others: Sequence[tuple[str, Manifest]], label_a: str = "A") -> list[str]:
    """One line per fact in which some of `others` (label, manifest) differ from A's session.

    E.g. `different day than A (2026-12-02): B's replica 20261130-... (2026-11-30)`. Facts a run
    did not record (no GPU facts on a machine without NVML) are not compared.
    """
    mine = session_facts(a)
    notes = []
    for fact, value in mine.items():
        if value is None:
            continue
        odd = [(label, theirs[fact]) for label, m in others if (theirs := session_facts(m))[fact] is not None and theirs[fact] != value]
        if odd:
            shown = ", ".join(f"{label} ({v})" for label, v in odd)
            notes.append(f"different {fact} than {label_a} ({value}): {shown}")
    return notes
