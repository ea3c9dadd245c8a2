"""What the verbs print: text for a person, reports in colour on a terminal, JSON for machines,
and the one warning per run a listing skipped."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
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


def emit_json_lines(lines: Iterable[bytes], batch: int = 256) -> None:
    """A JSON array of objects given as their compact UTF-8 text, one a line (easy for `jq -c`,
    `grep`), written `batch` lines at a time as they come (a listing of 100,000 runs is ~500 MB:
    never held whole)."""
    sys.stdout.flush()
    out = sys.stdout.buffer
    out.write(b"[\n")
    pending: list[bytes] = []
    wrote = False
    for line in lines:
        pending.append(line)
        if len(pending) == batch:
            out.write(_joined(pending, wrote))
            pending, wrote = [], True
    if pending:
        out.write(_joined(pending, wrote))
    out.write(b"\n]\n")
    out.flush()


def _joined(lines: list[bytes], after: bool) -> bytes:
    """Objects of a JSON array as written: a comma and a newline between two of them, also
    before the first of a batch `after` another."""
    return (b",\n" if after else b"") + b",\n".join(lines)


def say_skipped(broken: dict[str, str]) -> None:
    """One warning per run a listing skipped (docs/trust.md): what it holds, and every other run works."""
    for run_id, reason in broken.items():
        say(f"ledger: warning: run {run_id} skipped: {reason}")
