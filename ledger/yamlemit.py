"""Block-style YAML for plain data, byte for byte what `ledger.yamlio`'s ruamel dumper writes.

Writing a manifest through ruamel.yaml costs its import (~30 ms) and its pure-Python emitter
(~5 ms) at the end of every `ledger run`. A manifest is dicts, lists, strings, numbers, booleans
and None, so this module writes that subset itself, following ruamel's rules for it (the 1.2
resolver, `Emitter.analyze_scalar` and `choose_scalar_style`, block style, sequences not indented
under their key), and refuses (`Unsupported`) whatever lies outside it: other types, a container
met twice (ruamel would write an anchor), keys that are not strings, characters outside printable
ASCII, long scalars (ruamel would fold them). `yamlio.dumps` then uses ruamel itself, so the text
is the same either way; tests compare the two on the manifests of real runs and on generated
documents.
"""

from __future__ import annotations

import functools
import re
from typing import Any

MAX_SCALAR = 1000  # far from ruamel's width (4096), so it never folds a line we write
MAX_KEY = 100  # under ruamel's simple-key limit (128, less the tag it counts)


class Unsupported(Exception):
    """The document holds something this emitter does not write the way ruamel does."""


# ruamel's YAML 1.2 implicit resolvers (ruamel/yaml/resolver.py, copied as they are, verbose
# mode: a space outside a class means nothing): a plain scalar matching one reads back as that
# type, so a string like it is quoted
_IMPLICIT_SOURCE = r"""^(?:
     (?:true|True|TRUE|false|False|FALSE)
    |(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
      |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
      |[-+]?\.[0-9_]+(?:[eE][-+][0-9]+)?
      |[-+]?\.(?:inf|Inf|INF)
      |\.(?:nan|NaN|NAN))
    |(?:[-+]?0b[0-1_]+
      |[-+]?0o?[0-7_]+
      |[-+]?[0-9_]+
      |[-+]?0x[0-9a-fA-F_]+)
    |<<
    |(?:~|null|Null|NULL|)
    |(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
      |[0-9][0-9][0-9][0-9] -[0-9][0-9]? -[0-9][0-9]?
       (?:[Tt]|[ \t]+)[0-9][0-9]?
       :[0-9][0-9] :[0-9][0-9] (?:\.[0-9]*)?
       (?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)
    |=
    |[!&*]
    )$"""
_IMPLICIT_FIRST = frozenset("tTfF-+0123456789.<~nN=!&*")
_PRINTABLE = re.compile(r"[\x20-\x7e]*")
_LEADING_INDICATORS = frozenset("#,[]{}&*!|>'\"%@`")


def _plain_allowed(text: str) -> bool:
    """`analyze_scalar`'s `allow_block_plain` for one line of printable ASCII (not empty)."""
    if text.startswith(("---", "...")) or text[0] == " " or text[-1] == " ":
        return False
    first = text[0]
    followed = len(text) == 1 or text[1] == " "
    if first in _LEADING_INDICATORS or (first in "?:-" and followed):
        return False
    # ": " or a final ":" and " #" inside the text are block indicators
    return not (": " in text or text.endswith(":") or " #" in text)


@functools.cache
def _implicit() -> re.Pattern[str]:
    return re.compile(_IMPLICIT_SOURCE, re.X)  # on first use: `ledger list` imports this module too


def _resolves_to_other(text: str) -> bool:
    return (not text or text[0] in _IMPLICIT_FIRST) and _implicit().match(text) is not None


def _string(text: str, limit: int) -> str:
    if len(text) > limit or not _PRINTABLE.fullmatch(text):
        raise Unsupported("string")
    if text and not _resolves_to_other(text) and _plain_allowed(text):
        return text
    if "'" in text:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return "'" + text + "'"


def _float(value: float) -> str:
    if value != value:
        return ".nan"
    if value in (float("inf"), float("-inf")):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value).lower()
    if not _implicit().match(text):  # ruamel would tag it; never for a float's repr
        raise Unsupported("float")
    return text


def _scalar(value: Any) -> str:
    kind = type(value)
    if kind is str:
        return _string(value, MAX_SCALAR)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        if abs(value) >= 10**MAX_SCALAR:
            raise Unsupported("int")
        return str(value)
    if kind is float:
        return _float(value)
    if kind is dict and not value:
        return "{}"
    if kind is list and not value:
        return "[]"
    raise Unsupported(kind.__name__)


class _Writer:
    def __init__(self) -> None:
        self.out: list[str] = []
        self.seen: set[int] = set()

    def _enter(self, container: Any) -> None:
        if id(container) in self.seen:  # ruamel writes an anchor and an alias
            raise Unsupported("a container met twice")
        self.seen.add(id(container))

    def scalar(self, value: Any) -> str:
        if type(value) in (dict, list):
            self._enter(value)  # an empty one too
        return _scalar(value)

    def mapping(self, data: dict[Any, Any], indent: int, inline: bool) -> None:
        self._enter(data)
        for i, (key, value) in enumerate(data.items()):
            if type(key) is not str or not key:
                raise Unsupported("key")
            if i or not inline:
                self.out.append(" " * indent)
            self.out.append(_string(key, MAX_KEY))
            self.out.append(":")
            if type(value) is dict and value:
                self.out.append("\n")
                self.mapping(value, indent + 2, False)
            elif type(value) is list and value:
                self.out.append("\n")
                self.sequence(value, indent, False)  # not indented under its key
            else:
                self.out.append(" " + self.scalar(value) + "\n")

    def sequence(self, data: list[Any], indent: int, inline: bool) -> None:
        self._enter(data)
        for i, item in enumerate(data):
            if i or not inline:
                self.out.append(" " * indent)
            self.out.append("- ")
            if type(item) is dict and item:
                self.mapping(item, indent + 2, True)
            elif type(item) is list and item:
                self.sequence(item, indent + 2, True)
            else:
                self.out.append(self.scalar(item) + "\n")


def dumps(data: Any) -> str:
    """`data` (a dict or list) as ruamel's block-style YAML; `Unsupported` when not sure."""
    writer = _Writer()
    if type(data) is dict and data:
        writer.mapping(data, 0, False)
    elif type(data) is list and data:
        writer.sequence(data, 0, False)
    elif type(data) in (dict, list):
        return _scalar(data) + "\n"
    else:
        raise Unsupported("a document that is not a mapping or a sequence")
    return "".join(writer.out)
