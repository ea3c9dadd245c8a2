"""A click group whose verbs are imported only when one is invoked.

Each verb's module imports its implementation (with its libraries: 100-250 ms for some), so the
group names each verb by "module:attribute" and imports that module in `get_command`: `ledger run`
loads the run verb's modules only. `ledger --help` lists every verb with its summary from the table
and imports none of them. This is click's documented lazy-loading pattern
(https://click.palletsprojects.com/en/stable/complex/#lazily-loading-subcommands).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import click


@dataclass(frozen=True)
class Verb:
    """Where a verb's click command is ("package.module:attribute"), and its one-line summary."""

    target: str
    summary: str


class LazyGroup(click.Group):
    """A group whose commands are the `verbs` table, each imported on first use."""

    def __init__(self, *args: Any, verbs: Mapping[str, Verb], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.verbs = verbs

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.verbs)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        verb = self.verbs.get(cmd_name)
        if verb is None:
            return None
        module, _, attribute = verb.target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{verb.target} is {type(command).__name__}, not a click command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The verbs and their summaries as click's own listing prints them, from the table: a bare
        command holding the summary shortens it as the verb's own command would."""
        limit = formatter.width - 6 - max(map(len, self.verbs))
        rows = [(name, click.Command(name, help=self.verbs[name].summary).get_short_help_str(limit)) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)
