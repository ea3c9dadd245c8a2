"""How to add one of ledger's optional dependencies where this ledger runs (one source for the hint).

Installed as a tool (`pipx install`), ledger lives in a venv of its own: `pip install
'ledger[plot]'` in the user's shell would install into another environment and change nothing.
pipx marks its venvs with `pipx_metadata.json`; there the hint is `pipx inject ledger PACKAGE`.
"""

from __future__ import annotations

import sys
from pathlib import Path

RAY_PACKAGE = "'ray[default]'"  # the `ray` extra as pipx injects it (the job API needs [default])


def in_pipx_venv(prefix: str | None = None) -> bool:
    """Whether the interpreter running ledger is a pipx venv's (`prefix`: sys.prefix by default)."""
    return (Path(prefix if prefix is not None else sys.prefix) / "pipx_metadata.json").is_file()


def install_hint(extra: str, package: str, prefix: str | None = None) -> str:
    """`pipx inject ledger PACKAGE` in a pipx venv, else `pip install 'ledger[EXTRA]'`."""
    if in_pipx_venv(prefix):
        return f"pipx inject ledger {package}"
    return f"pip install 'ledger[{extra}]'"
