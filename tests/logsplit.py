"""The whole-file split the tests compare the streamed one with: a raw output file fed through one
`LineSplitter` (the splitter `ledger run` and `ledger recover` use) in one pass."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ledger.capture.stream import LineSplitter, split_file
from ledger.config import DEFAULT_ENGINE_PATTERNS
from ledger.redact.scanner import Redactor


def split_output(
    raw: Path,
    trainer_path: Path,
    engine_path: Path,
    engine_patterns: Sequence[str] = DEFAULT_ENGINE_PATTERNS,
    redactor: Redactor | None = None,
) -> LineSplitter:
    """Split a whole raw output file into the two logs."""
    return split_file(raw, LineSplitter(trainer_path, engine_path, engine_patterns, redactor=redactor))
