"""A run's per-step metrics in memory: `StepRow`, `MetricsTable`, and the formats they come from.

Rows are keyed by rollout id (another trainer's step); Megatron's train steps are kept apart in
`train_steps`. Every reader in `ledger.metrics` fills a `MetricsTable`; `metrics.jsonl`
(`ledger.metrics.jsonl`) stores one.
"""

from __future__ import annotations

import msgspec

from ledger.metrics.lineformats import JSON_LINES, KEY_VALUE

MAX_EXAMPLES = 5
MILES_LINES, METRIC_EVENTS = "miles", "metric events"
# every format ledger reads per-step metrics from, as `MetricsTable.formats` names them
FORMATS = (MILES_LINES, KEY_VALUE, JSON_LINES, METRIC_EVENTS, "jsonl file", "tensorboard")
# what a run without per-step metrics is told, naming what ledger reads (docs/recording.md lists them)
READS = (
    "Miles' `step N: {...}` lines, `step N: key=value` or `key: value` lines, JSON lines with a step "
    "(printed, or in a file a --metrics-* flag names), Miles' metric events and TensorBoard event files"
)
NO_METRICS = f'no per-step metrics found; ledger reads {READS} (docs/recording.md, "Per-step metrics")'


class StepRow(msgspec.Struct):
    """Metrics of one rollout id, with the wall-clock span it covers (unix seconds, UTC)."""

    step: int
    t_start: float | None
    t_end: float | None
    metrics: dict[str, float]


class MetricsTable(msgspec.Struct):
    """Per-step metrics of one run: rows by rollout id, train-step metrics apart."""

    rows: dict[int, StepRow] = msgspec.field(default_factory=dict)
    train_steps: dict[int, dict[str, float]] = msgspec.field(default_factory=dict)
    malformed: int = 0
    malformed_examples: list[str] = msgspec.field(default_factory=list)
    sources: list[str] = msgspec.field(default_factory=list)
    formats: list[str] = msgspec.field(default_factory=list)  # of FORMATS, in the order first seen

    def has_metrics(self) -> bool:
        """Whether any step logged anything."""
        return bool(self.rows or self.train_steps)

    def add_format(self, fmt: str) -> None:
        if fmt not in self.formats:
            self.formats.append(fmt)

    def note_malformed(self, where: str) -> None:
        self.malformed += 1
        if len(self.malformed_examples) < MAX_EXAMPLES:
            self.malformed_examples.append(where)
