"""`ledger recover`: commit every staged run whose ledger process died, with state `lost`."""

from __future__ import annotations

from pathlib import Path

import msgspec

from ledger.record.recover import recover
from ledger.record.run import Say


class RecoverResult(msgspec.Struct):
    """The ids of the runs committed."""

    runs: list[str]


def recover_runs(start: Path, say: Say, follow: bool = False, ask_ray: bool = True) -> RecoverResult:
    """Commit every staged run of a dead ledger found under `start`'s repository (`follow`: wait
    for a Ray job still running; not `ask_ray`: record a Ray run as lost without asking Ray)."""
    return RecoverResult(recover(start, say, follow, ask_ray))
