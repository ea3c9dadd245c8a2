"""A run's `summary.json`: what `ledger list` reads of it without the manifest. Written by `ledger
run` (a module of its own: the listing's index and sqlite stay off the run's start-up)."""

from __future__ import annotations

from typing import Any

from ledger.manifest import NOT_LEDGERS, ManifestError

SUMMARY_KEYS = ("schema", "id", "name", "note", "started", "finished", "status", "replay_of", "trackers")
# per summary metric (`ledger.metrics.summarymetrics`): its last, min and max value, the step of each
METRIC_KEYS = ("last", "last_step", "min", "min_step", "max", "max_step")


def summary_of(manifest: dict[str, Any], metrics: dict[str, Any] | None = None) -> dict[str, Any]:
    """What `ledger list` shows; `settings.json` holds the settings, `manifest.yaml` everything.
    `metrics`: the summary metrics (`ledger.metrics.summarymetrics`), kept under `metrics`."""
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


def check_metrics(metrics: Any, where: str) -> dict[str, Any]:
    """A record's summary metrics, checked: a mapping of metric name to a mapping whose
    `METRIC_KEYS` are numbers. A pulled `"last": "abc"` is a ManifestError naming the metric, so
    no page or table ever meets text where it computes with a number."""
    if metrics is None:
        return {}
    if not isinstance(metrics, dict):
        raise ManifestError(f"{where}: its 'metrics' is not a mapping", NOT_LEDGERS)
    for name, values in metrics.items():
        shown = repr(str(name)[:80])
        if not isinstance(name, str) or not isinstance(values, dict):
            raise ManifestError(f"{where}: metric {shown} is not a name with a mapping", NOT_LEDGERS)
        for key in METRIC_KEYS:
            value = values.get(key)
            if key in values and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ManifestError(f"{where}: metric {shown} has a {key!r} that is not a number", NOT_LEDGERS)
    return metrics
