"""`ledger ui`: the ledger in a browser (the only verb that imports the web server)."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.output import echo_text
from ledger.termstyle import say
from ledger.ui.serve import serve


@click.command()
@click.option("--port", type=click.IntRange(0, 65535), default=None, help="Port to listen on (default: a free one).")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; any other than this machine's loopback makes the ledger readable from the network.",
)
@click.option("--no-browser", is_flag=True, help="Print the address only; do not open a browser.")
def ui(port: int | None, host: str, no_browser: bool) -> int:
    """Serve the ledger in a browser, live and read-only: runs table, run pages, compare, diff (Ctrl-C stops it)."""
    return serve(Path.cwd(), host, port, not no_browser, say=say, show=echo_text)
