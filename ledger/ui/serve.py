"""`ledger ui`: serve the ledger on this machine (uvicorn; the only module that imports it).

The socket is bound here, before the server starts, so the printed URL names the port really
served (a free one when `--port` is left out) and a port in use is one error line, not a log.
Ctrl-C (or SIGTERM) stops the server after the requests in flight.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
import threading
import webbrowser
from collections.abc import Callable
from pathlib import Path

import uvicorn

from ledger.errors import LedgerError
from ledger.opening import open_branch
from ledger.ui.address import allowed_hosts, can_open_browser, exposure_warning, url_for
from ledger.ui.web import make_app

GRACEFUL_S = 3  # requests in flight get this long at a stop; the script's polls are short


def bind(host: str, port: int | None) -> socket.socket:
    """A listening socket on host:port (port 0 or None: a free one the kernel picks)."""
    try:
        infos = socket.getaddrinfo(host or None, port or 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise LedgerError(
            f"--host {host!r} is not an address of this machine ({exc.strerror})", "leave out --host to serve on 127.0.0.1"
        ) from exc
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise LedgerError(f"port {port} is in use", "pick another --port, or leave it out for a free one") from exc
        raise LedgerError(f"cannot listen on {host}:{port or 0}: {exc.strerror}", "pick another --host or --port") from exc
    return sock


def _open_later(url: str) -> None:
    """Open the page in the user's browser, off the main thread (a browser may take a while)."""
    threading.Thread(target=webbrowser.open, args=(url,), daemon=True, name="ledger-ui-browser").start()


def serve(start: Path, host: str, port: int | None, browser: bool, say: Callable[[str], None], show: Callable[[str], None]) -> int:
    """Serve the ledger of the repository `start` is in until stopped; 0 after Ctrl-C."""
    open_branch(start)  # not a repository, a foreign branch, a bad config: one error line, before listening
    sock = bind(host, port)
    bound = int(sock.getsockname()[1])
    url = url_for(host, bound)
    app = make_app(start, allowed_hosts(host))
    warning = exposure_warning(host, bound)
    if warning:
        say(warning)
    show(url)  # stdout is data: the address served, alone on its line
    say("ledger: serving the ledger read-only; Ctrl-C stops it")
    if browser:
        if can_open_browser(os.environ, sys.platform):
            _open_later(url)
        else:
            say("ledger: no display here: open the address above in a browser")
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=GRACEFUL_S)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn stops on Ctrl-C, then raises it again for the caller
        pass
    finally:
        sock.close()
    say("ledger: ui stopped")
    return 0
