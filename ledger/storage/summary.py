"""A run's `summary.json`: what `ledger list` reads of it without the manifest. Written by `ledger
run` (a module of its own: the listing's index and sqlite stay off the run's start-up)."""

from __future__ import annotations

from typing import Any

SUMMARY_KEYS = ("schema", "id", "name", "note", "started", "finished", "status", "replay_of", "trackers")


def summary_of(manifest: dict[str, Any], metrics: dict[str, Any] | None = None) -> dict[str, Any]:
    """What `ledger list` shows; `settings.json` holds the settings, `manifest.yaml` everything.
    `metrics`: the summary metrics (`ledger.compare.summarymetrics`), kept under `metrics`."""
    out = {k: manifest.get(k) for k in SUMMARY_KEYS}
    gpu = manifest.get("gpu") or {}
    out["gpu"] = {k: gpu.get(k) for k in ("pauses", "paused_s", "unavailable")}
    replay = manifest.get("replay") or {}
    fidelity = replay.get("fidelity") if isinstance(replay, dict) else None
    if isinstance(fidelity, dict) and fidelity.get("verdict"):
        out["fidelity"] = fidelity["verdict"]  # a replay's: bitwise / close / diverged / unknown
    if metrics is not None:
        out["metrics"] = metrics
    return out
