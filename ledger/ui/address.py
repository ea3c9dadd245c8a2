"""Where `ledger ui` listens and who may ask: this machine's loopback unless `--host` names another.

The Host header of every request must name the address served (`allowed_hosts`): a web page of
another site that points its own host name at 127.0.0.1 (DNS rebinding) is refused, so only a
browser that asked for this address reads the ledger.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

DEFAULT_HOST = "127.0.0.1"
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
WILDCARDS = frozenset({"0.0.0.0", "::", ""})


def is_loopback(host: str) -> bool:
    """Whether `host` is this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_warning(host: str, port: int) -> str | None:
    """The one-line warning for an address other machines can reach (None for loopback)."""
    if is_loopback(host):
        return None
    where = "every network this machine is on" if host in WILDCARDS else host
    return (
        f"ledger: warning: serving on {where} (port {port}): anyone who can reach it can read this ledger "
        "(runs, settings, logs); leave out --host to serve this machine only"
    )


def allowed_hosts(host: str) -> frozenset[str] | None:
    """The names a request's Host header may give (None: any, for a wildcard address)."""
    if host in WILDCARDS:
        return None
    names = {host.strip("[]").lower()}
    if is_loopback(host):
        names |= {"127.0.0.1", "::1", *LOOPBACK_NAMES}
    return frozenset(names)


def host_of(header: str) -> str:
    """The host name of a Host header, without its port (`[::1]:8080` -> `::1`)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def url_for(host: str, port: int) -> str:
    """The address a browser opens (a wildcard host is reached through the loopback)."""
    shown = DEFAULT_HOST if host in WILDCARDS else host
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/"


def can_open_browser(environ: Mapping[str, str], platform: str) -> bool:
    """Whether opening a browser shows a window: on Linux only with a display. Without one,
    Python's `webbrowser` falls back to a text browser that would take over this terminal."""
    if not platform.startswith("linux"):
        return True
    return bool(environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"))
