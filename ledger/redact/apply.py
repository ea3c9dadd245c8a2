"""Redact a text, a log line, an argument vector or an environment: the entry points for one value.

Each goes through one `ledger.redact.scanner.Redactor` (rules on bytes, the fast scan); argv and
environments are first redacted by name (`ledger.redact.names.is_secret_name`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ledger.redact.names import MASK, Redactions, is_secret_name, keeps_value
from ledger.redact.scanner import Redactor

# A flag as an argv spells one: dashes, then a name (`ledger.understand.settings.is_flag` reads
# settings the same way). A value that only starts with dashes (`-----BEGIN PGP PRIVATE KEY
# BLOCK-----`, given after `--signing-key`) is a value, and text before an `=` that is no flag
# name (a line of an armoured key) is no name.
_FLAG = re.compile(r"--?[A-Za-z0-9_][\w.:/+-]*")


def _redact_str(text: str, acc: Redactions) -> str:
    return Redactor().redact_text(text, acc)


def redact_text(text: str) -> tuple[str, list[str]]:
    """Redact a launcher script, command line or any text; returns (text, redacted names/kinds).

    Multi-line values stay line for line: a PEM block keeps its line count.
    """
    acc = Redactions()
    return _redact_str(text, acc), acc.as_list()


def redact_line(line: bytes, redactions: Redactions | None = None) -> bytes:
    """Redact one log line given as bytes; invalid UTF-8 passes through byte for byte."""
    return Redactor().redact_line(line, redactions if redactions is not None else Redactions())


def redact_argv(argv: Sequence[str], extra: frozenset[str] = frozenset()) -> tuple[list[str], list[str]]:
    """Redact an argument vector: ``--flag value``, ``--flag=value``, ``NAME=value``, patterns."""
    acc = Redactions()
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if _FLAG.fullmatch(arg) and is_secret_name(arg, extra) and i < len(argv) and not _FLAG.match(argv[i]):
            value = argv[i]  # --flag value
            i += 1
            out.append(arg)
            out.append(value if keeps_value(arg, value) else _masked(arg, acc))
            continue
        out.append(_joined_flag(arg, extra, acc) or _redact_str(arg, acc))
    return out, acc.as_list()


def _masked(name: str, acc: Redactions) -> str:
    """The mask for the value of secret-named `name`, recorded."""
    acc.add_name(name)
    return MASK


def _joined_flag(arg: str, extra: frozenset[str], acc: Redactions) -> str | None:
    """``--flag=value`` of a secret-named flag with its value masked (None: not one)."""
    if not arg.startswith("-") or "=" not in arg:
        return None
    name, value = arg.split("=", 1)
    if _FLAG.fullmatch(name) and is_secret_name(name, extra) and not keeps_value(name, value):
        return f"{name}={_masked(name, acc)}"
    return None


def redact_env(env: Mapping[str, str], extra: frozenset[str] = frozenset()) -> tuple[dict[str, str], list[str]]:
    """Redact an environment: secret-named variables, and patterns inside any value."""
    acc = Redactions()
    out: dict[str, str] = {}
    for name, value in env.items():
        if is_secret_name(name, extra) and not keeps_value(name, value):
            acc.add_name(name)
            out[name] = MASK
        else:
            out[name] = _redact_str(value, acc)
    return out, acc.as_list()
