"""A run's `summary.json`: what `ledger list` reads of it without the manifest. Written by `ledger
run` (a module of its own: the listing's index and sqlite stay off the run's start-up)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict, Union

from ledger.manifest import NOT_LEDGERS, ManifestError

SUMMARY_KEYS = ("schema", "id", "name", "note", "started", "finished", "status", "replay_of", "trackers")
# per summary metric (`ledger.metrics.summarymetrics`): its last, min and max value, the step of each
MetricKey = Literal["last", "last_step", "min", "min_step", "max", "max_step"]
METRIC_KEYS: tuple[MetricKey, ...] = ("last", "last_step", "min", "min_step", "max", "max_step")

# A setting's value as settings.json holds it: any JSON value (a flag's text, a number, a list of
# them, a nested config mapping).
SettingValue = Union[str, int, float, bool, None, list["SettingValue"], dict[str, "SettingValue"]]
Settings = dict[str, SettingValue]  # a run's settings by name


class MetricSummary(TypedDict, total=False):
    """One summary metric as summary.json holds it (`ledger.metrics.summarymetrics`): a number
    per `METRIC_KEYS` present (`check_metrics` makes sure). A typed dict, not a class of its
    own: the listing reads it as the JSON decoder gives it, and `list --json` writes it back
    byte for byte, keys it does not name included."""

    last: int | float
    last_step: int | float
    min: int | float
    min_step: int | float
    max: int | float
    max_step: int | float


Metrics = dict[str, MetricSummary]  # a run's summary metrics by name


def summary_of(manifest: dict[str, Any], metrics: Mapping[str, Mapping[str, int | float]] | None = None) -> dict[str, Any]:
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


def check_metrics(metrics: Any, where: str) -> Metrics:
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
