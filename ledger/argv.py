"""Reading a command line's options and the values parsed from it: the few steps that recording,
the heat guard, replay and comparison all take the same way."""

from __future__ import annotations

from collections.abc import Sequence


def mentions(value: object, needle: str) -> bool:
    """Whether a setting's value (a string, or a list of values at any depth) holds `needle`."""
    if isinstance(value, str):
        return needle in value
    if isinstance(value, list):
        return any(mentions(item, needle) for item in value)
    return False


def option_value(argv: Sequence[str], name: str) -> str | None:
    """The value of option `name` in a command line, given as `NAME VALUE` or `NAME=VALUE`:
    the first one given; None when absent or last with no value after it."""
    for index, token in enumerate(argv):
        if token.startswith(name + "="):
            return token.split("=", 1)[1]
        if token == name and index + 1 < len(argv):
            return argv[index + 1]
    return None
