"""Options that several verbs declare alike: a repeatable value, and a page written with `--html`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

Decorator = Callable[[Any], Any]


def repeatable(flag: str, dest: str, help: str, metavar: str | None = None) -> Decorator:
    """An option given any number of times; the command gets a tuple (empty when never given)."""
    return click.option(flag, dest, multiple=True, metavar=metavar, help=help)


def html_page(help: str, required: bool = False) -> Decorator:
    """`--html FILE`: also write a self-contained page there (a folder is refused)."""
    return click.option("--html", "html", type=click.Path(dir_okay=False, path_type=Path), required=required, help=help)
