"""`ledger init`: make a git repository ready to record runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec

from ledger.config import CONFIG_NAME, default_text
from ledger.errors import LedgerError
from ledger.storage import staging
from ledger.storage.git import Repo

RUNS_README = """\
# runs/

Run records do not live on this branch. Each `ledger run` is one commit on the `experiments`
branch (see `.ledger.yaml`), holding `runs/<shard>/<run id>/`: the manifest, the logs, the
launcher copy, metrics and `.dvc` files for bulky data. Look at them with:

    ledger list
    ledger show latest
    git log --first-parent experiments
"""


class InitResult(msgspec.Struct, frozen=True):
    """What `ledger init` did, a line each, and the command that commits the set-up."""

    done: list[str]
    next_step: str


def init_repo(start: Path) -> InitResult:
    """Create .ledger.yaml, runs/README.md and DVC (if absent)."""
    repo = Repo(start)
    root = repo.root
    done: list[str] = []
    cfg = root / CONFIG_NAME
    if cfg.exists():
        done.append(f"{CONFIG_NAME} already present, kept")
    else:
        cfg.write_text(default_text())
        done.append(f"wrote {CONFIG_NAME}")
    runs = root / "runs"
    runs.mkdir(exist_ok=True)
    readme = runs / "README.md"
    if not readme.exists():
        readme.write_text(RUNS_README)
        done.append("wrote runs/README.md")
    if (root / ".dvc").is_dir():
        done.append("DVC already initialised, kept")
    else:
        proc = subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip().splitlines()
            raise LedgerError(
                f"`dvc init` failed: {err[-1] if err else proc.returncode}", "run `dvc init` yourself, then `ledger init` again"
            )
        done.append("initialised DVC (.dvc/)")
    staging.ledger_dir(root)
    return InitResult(done, f"git add {CONFIG_NAME} runs/README.md .dvc .dvcignore && git commit -m 'ledger init'")
