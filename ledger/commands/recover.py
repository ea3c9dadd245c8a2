"""`ledger recover`: commit every staged run whose ledger process died, with state `lost`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ledger.record.recover import recover
from ledger.record.run import Say


@dataclass
class RecoverResult:
    """The ids of the runs committed."""

    runs: list[str]


def recover_runs(start: Path, say: Say) -> RecoverResult:
    """Commit every staged run of a dead ledger found under `start`'s repository."""
    return RecoverResult(recover(start, say))
