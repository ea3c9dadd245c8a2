"""What the verbs print: text for a person, reports in colour on a terminal, JSON for machines,
and the one warning per run a listing skipped."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ledger.termstyle import colour_enabled, paint_lines, printable, say


def echo_text(text: str, nl: bool = True) -> None:
    """Text for a person on stdout, control characters shown escaped (`\\x1b`)."""
    click.echo(printable(text), nl=nl)


def echo_report(text: str) -> None:
    """A report to stdout, coloured only on a terminal without NO_COLOR."""
    text = printable(text)
    click.echo(paint_lines(text) if colour_enabled(sys.stdout) else text, nl=False, color=True)


def emit_json(data: Any, compact: bool = False) -> None:
    if compact:  # one run a line: fast for 10,000 runs, and easy for `jq -c`/`grep`
        rows = data if isinstance(data, list) else [data]
        click.echo("[\n" + ",\n".join(json.dumps(r, default=str) for r in rows) + "\n]")
    else:
        click.echo(json.dumps(data, indent=2, default=str))


def say_skipped(broken: dict[str, str]) -> None:
    """One warning per run a listing skipped (docs/trust.md): what it holds, and every other run works."""
    for run_id, reason in broken.items():
        say(f"ledger: warning: run {run_id} skipped: {reason}")
