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


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=str))


def emit_json_lines(lines: list[str], chunk: int = 1000) -> None:
    """A JSON array of objects given as their compact text, one a line (easy for `jq -c`, `grep`),
    written as it is joined, `chunk` lines at a time (a listing of 100,000 runs is ~500 MB)."""
    out = sys.stdout
    out.write("[\n")
    for i in range(0, len(lines), chunk):
        out.write((",\n" if i else "") + ",\n".join(lines[i : i + chunk]))
    out.write("\n]\n")
    out.flush()


def say_skipped(broken: dict[str, str]) -> None:
    """One warning per run a listing skipped (docs/trust.md): what it holds, and every other run works."""
    for run_id, reason in broken.items():
        say(f"ledger: warning: run {run_id} skipped: {reason}")
