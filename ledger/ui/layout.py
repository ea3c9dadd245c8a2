"""The frame of every `ledger ui` page: the pages' own style, a nav bar, the live part, one script.

A page's live part is `<main id="live" data-version="...">`: the script (`static/ui.js`, the only
script any page loads; the Content-Security-Policy forbids inline ones) asks `/api/version` every
few seconds and, when the ledger changed, fetches the page's live part again and swaps it in.
The pages that `ledger diff --html` and `ledger compare --html` write are served as they are,
with the nav bar put in (`framed`): they are static and stay script-free.
"""

from __future__ import annotations

from html import escape
from urllib.parse import quote

from ledger.pages.svg import STYLE

ICON = '<link rel="icon" href="data:,">'  # no /favicon.ico request (it would be a 404 in the console)
NAV = '<nav class="ui"><a href="/">runs</a> <span id="conn" class="conn" data-state="static"></span></nav>'


def run_href(run: str) -> str:
    """The link to a run's page (an id or a name; quoted, never a path)."""
    return "/runs/" + quote(run, safe="")


def warning_html(text: str) -> str:
    """One warning line (escaped)."""
    return f'<p class="warning" data-kind="warning">{escape(text)}</p>'


def info_html(text: str) -> str:
    """One line saying how to read what follows (escaped)."""
    return f'<p class="info" data-kind="info">{escape(text)}</p>'


def ui_page(title: str, head: str, live: str, at: str) -> str:
    """A whole page: `head` (static: headings, forms) above the live part made at version `at`."""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<style>{STYLE}</style><link rel="stylesheet" href="/static/ui.css">{ICON}</head><body>\n'
        f'{NAV}\n{head}\n<main id="live" data-version="{escape(at)}">{live}</main>\n'
        '<script src="/static/ui.js" defer></script>\n</body></html>\n'
    )


def framed(page: str) -> str:
    """A page one of ledger's page writers made, with the nav bar and the style sheet put in."""
    page = page.replace("</head>", f'<link rel="stylesheet" href="/static/ui.css">{ICON}</head>', 1)
    return page.replace("<body>", f"<body>\n{NAV}", 1)


def error_page(title: str, message: str) -> str:
    """A page that says one thing went wrong (the rest of the ui still works)."""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<style>{STYLE}</style><link rel="stylesheet" href="/static/ui.css">{ICON}</head><body>\n'
        f"{NAV}\n<h1>{escape(title)}</h1>\n{warning_html(message)}\n</body></html>\n"
    )
