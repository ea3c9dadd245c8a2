"""The secret VALUES a run was started with, and the forms they take when a job prints them.

Redaction by name and shape catches secrets where they are named; a job may still print a key it
was given in another form (a trainer echoing its config as JSON, a library logging a URL-encoded
query, an HTTP client logging ``Authorization: Basic base64(user:pass)``). Since ledger knows which
values it redacted from the argv, the launcher and the secret-named variables of the job's
environment, the `Redactor` removes those exact values, in every form `variants` lists, from
everything written. The values live in memory, and in the staged run's ``secrets.json`` (mode 0600,
never committed, removed with the staging folder) so that `ledger recover` scrubs exactly the same.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from ledger.redact.apply import redact_argv, redact_text
from ledger.redact.names import MASK, is_secret_name
from ledger.redact.variants import MIN_LENGTH

_URL_CREDS = re.compile(r"://([^/\s:@'\"]+):([^/\s@'\"]+)@")


def removed_values(original: str, redacted: str) -> list[str]:
    """The substrings of `original` that redaction replaced by the mask."""
    parts = redacted.split(MASK)
    if len(parts) == 1 or not original.startswith(parts[0]):
        return []
    out: list[str] = []
    pos = len(parts[0])
    for i, lit in enumerate(parts[1:], 1):
        last = i == len(parts) - 1
        if last and lit == "":
            end = len(original)
        elif last:
            end = original.rfind(lit)
        else:
            end = original.find(lit, pos + 1) if lit else -1
        if end < pos:
            return out
        out.append(original[pos:end])
        pos = end + len(lit)
    return out


def known_secrets(
    argv: Sequence[str], environ: Mapping[str, str], texts: Iterable[str] = (), extra: frozenset[str] = frozenset()
) -> set[str]:
    """Secret values found in argv (by redaction), secret-named variables, and free texts.

    Credentials in URLs also give ``user:password`` (its base64 is what Basic auth sends).
    """
    found: set[str] = set()
    redacted, _ = redact_argv(list(argv), extra)
    for orig, red in zip(argv, redacted):
        if orig != red:
            found.update(removed_values(orig, red))
    sources = list(argv) + _env_secrets(environ, extra, found)
    for text in texts:
        sources.append(text)
        for line in text.splitlines():
            found.update(_rule_hits(line))
    found.update(f"{user}:{password}" for source in sources for user, password in _URL_CREDS.findall(source))
    return {v for v in found if len(v) >= MIN_LENGTH and MASK not in v}


def _env_secrets(environ: Mapping[str, str], extra: frozenset[str], found: set[str]) -> list[str]:
    """Into `found`: the values of secret-named variables and what the rules remove from the
    others; returns those others (where a URL's credentials may still be)."""
    others: list[str] = []
    for name, value in environ.items():
        if value and is_secret_name(name, extra):
            found.add(value)
        elif value and MASK not in value:
            others.append(value)
            found.update(_rule_hits(value))
    return others


def _rule_hits(text: str) -> list[str]:
    """The values the rules remove from `text` (none where it comes out unchanged)."""
    clean, _ = redact_text(text)
    return removed_values(text, clean) if clean != text else []
