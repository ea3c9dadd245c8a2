"""`ledger ui`'s web application (Starlette; the only module that imports it).

Routes map addresses onto `ledger.ui.views`; every page is kept in a `PageMemo` by the ledger's
`version`, so a browser that polls costs one ref read and a few `stat`s until something changes.
`Guard`, outermost, makes the server read-only (anything but GET and HEAD is 405), refuses a Host
header that names another site (400), and sets the security headers on every answer: a
Content-Security-Policy that runs no inline script (only `/static/ui.js`), no framing, no sniffing.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ledger.errors import LedgerError
from ledger.ui import views
from ledger.ui.address import host_of
from ledger.ui.layout import error_page
from ledger.ui.state import Made, PageMemo, version

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
READ_METHODS = ("GET", "HEAD")
PART_HEADER = "x-ledger-part"  # the script asks for a page's live part only
STATIC = {"ui.js": "text/javascript; charset=utf-8", "ui.css": "text/css; charset=utf-8"}
HTML = "text/html; charset=utf-8"


class Guard:
    """Read-only, this address only, security headers on every answer (pure ASGI middleware)."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str] | None) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused: Response | None = None
        if scope["method"] not in READ_METHODS:
            refused = PlainTextResponse("ledger ui is read-only: GET and HEAD only\n", 405, headers={"Allow": ", ".join(READ_METHODS)})
        elif self.hosts is not None and host_of(_header(scope, b"host")) not in self.hosts:
            refused = PlainTextResponse("this server answers only requests for its own address\n", 400)

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for key, value in SECURITY_HEADERS.items():
                    headers[key] = value
            await send(message)

        await (refused or self.app)(scope, receive, secured)


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers") or []:
        if key == name:
            return bytes(value).decode("latin-1")
    return ""


class Pages:
    """The routes' endpoints over one ledger (the repository `start` is in)."""

    def __init__(self, start: Path) -> None:
        self.start = start
        self.memo = PageMemo()
        folder = Path(__file__).parent / "static"
        self.static = {name: (folder / name).read_bytes() for name in STATIC}

    def _made(self, request: Request, make: Callable[[str], Made], as_json: bool) -> tuple[str, Made]:
        """The page for the ledger as it is now: from the memo, else made (and kept)."""
        try:
            at = version(self.start, time.time())
        except LedgerError as exc:  # the repository or its branch went bad: say so on every page
            return "", views.refusal(exc, "ledger", as_json)
        live_only = request.headers.get(PART_HEADER) == "live"
        key = views.query_key(request.url.path, request.query_params.multi_items(), live_only)
        return at, self.memo.get(at, key, lambda: _guarded(lambda: make(at), as_json))

    def _page(self, request: Request, make: Callable[[str, bool], Made]) -> Response:
        live_only = request.headers.get(PART_HEADER) == "live"
        at, made = self._made(request, lambda at: make(at, live_only), as_json=False)
        return Response(made.body, made.status, headers={"X-Ledger-Version": at}, media_type=HTML)

    def _json(self, request: Request, make: Callable[[], Made]) -> Response:
        at, made = self._made(request, lambda _at: make(), as_json=True)
        return Response(made.body, made.status, headers={"X-Ledger-Version": at}, media_type="application/json")

    def table(self, request: Request) -> Response:
        pairs = request.query_params.multi_items()
        return self._page(request, lambda at, live: views.table_view(self.start, pairs, at, live))

    def run(self, request: Request) -> Response:
        name = str(request.path_params["run"])
        return self._page(request, lambda at, live: views.run_page_view(self.start, name, at, live))

    def compare(self, request: Request) -> Response:
        pairs = request.query_params.multi_items()
        return self._page(request, lambda _at, _live: views.compare_view(self.start, pairs))

    def diff(self, request: Request) -> Response:
        pairs = request.query_params.multi_items()
        return self._page(request, lambda _at, _live: views.diff_view(self.start, pairs))

    def api_runs(self, request: Request) -> Response:
        pairs = request.query_params.multi_items()
        return self._json(request, lambda: views.api_runs_view(self.start, pairs))

    def api_run(self, request: Request) -> Response:
        name = str(request.path_params["run"])
        return self._json(request, lambda: views.api_run_view(self.start, name))

    def api_version(self, request: Request) -> Response:
        try:
            return JSONResponse({"version": version(self.start, time.time())})
        except LedgerError as exc:
            return JSONResponse({"version": "", "error": exc.one_line()}, status_code=views.status_of(exc))

    def static_file(self, request: Request) -> Response:
        name = str(request.path_params["name"])
        if name not in self.static:  # a fixed set of files, never a path
            raise HTTPException(404)
        return Response(self.static[name], media_type=STATIC[name])


def _guarded(make: Callable[[], Made], as_json: bool = False) -> Made:
    """A bug in a view is one line on stderr and a 500 page, never a dead server."""
    try:
        return make()
    except Exception as exc:
        if os.environ.get("LEDGER_DEBUG"):
            raise
        line = f"internal error: {type(exc).__name__}: {exc} (set LEDGER_DEBUG=1 for the traceback)"
        print(f"ledger: {line}", file=sys.stderr)
        return Made(500, json.dumps({"error": line}) if as_json else error_page("ledger: internal error", line))


async def _not_found(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 404
    text = "no such page: the runs table is at /" if status == 404 else f"HTTP {status}"
    return Response(error_page(f"ledger: {status}", text), status, media_type=HTML)


def make_app(start: Path, hosts: frozenset[str] | None) -> Starlette:
    """The application for the ledger of the repository `start` is in."""
    pages = Pages(start)
    routes = [
        Route("/", pages.table, methods=["GET"]),
        Route("/runs/{run}", pages.run, methods=["GET"]),
        Route("/compare", pages.compare, methods=["GET"]),
        Route("/diff", pages.diff, methods=["GET"]),
        Route("/api/version", pages.api_version, methods=["GET"]),
        Route("/api/runs", pages.api_runs, methods=["GET"]),
        Route("/api/runs/{run}", pages.api_run, methods=["GET"]),
        Route("/static/{name}", pages.static_file, methods=["GET"]),
    ]
    return Starlette(routes=routes, middleware=[Middleware(Guard, hosts=hosts)], exception_handlers={404: _not_found})
