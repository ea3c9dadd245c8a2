"""Go RE2 regexes (gitleaks' rule syntax) as Python `re` regexes with the same meaning.

RE2 and Python agree on almost everything the gitleaks catalogue uses; where they differ:

- a flag group in the middle of a pattern (``lin_api_(?i)[a-z0-9]{40}``) sets the flag for the rest
  of the enclosing group in RE2 (and for the alternatives after it); Python only takes flags at
  the start. It becomes a scoped group, closed where the enclosing group or alternative ends and
  opened again after each ``|`` (``lin_api_(?i:[a-z0-9]{40})``);
- ``\\z`` (end of text) is Python's ``\\Z``;
- POSIX classes inside brackets (``[[:alnum:]]``) are spelled out (Python reads ``[[`` as a
  nested set, with a FutureWarning);
- a literal ``[`` inside a bracket class, and the doubled ``&&``, ``||``, ``--``, ``~~`` that
  Python reserves for set operations, are escaped.

Everything else is copied as it is. `tests/test_gitleaks_rules.py` compiles every rule of the data
file and matches a sample of each.
"""

from __future__ import annotations

import re

POSIX = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "ascii": "\\x00-\\x7f",
    "blank": " \\t",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "\\w",
    "xdigit": "0-9A-Fa-f",
}
_FLAGS = re.compile(r"\(\?([a-zA-Z]*(?:-[a-zA-Z]+)?)\)")
_POSIX = re.compile(r"\[:(\^?)([a-z]+):\]")


class _Group:
    """One open group of the pattern: the scoped flag groups opened inside it, to close at its
    end (and at each ``|``, opened again after it)."""

    def __init__(self) -> None:
        self.flags: list[str] = []


def to_python(pattern: str) -> str:
    """`pattern` (RE2) as a Python regex (see the module docstring)."""
    out: list[str] = []
    stack = [_Group()]
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            pair = pattern[i : i + 2]
            out.append("\\Z" if pair == "\\z" else pair)
            i += 2
        elif c == "[":
            text, i = _bracket(pattern, i)
            out.append(text)
        elif c == "(" and (m := _FLAGS.match(pattern, i)):
            if i == 0:  # a leading flag group is Python's too
                out.append(m.group())
            else:
                out.append(f"(?{m.group(1)}:")
                stack[-1].flags.append(m.group(1))
            i = m.end()
        elif c == "(":
            stack.append(_Group())
            out.append(c)
            i += 1
        elif c == "|":
            flags = stack[-1].flags
            out.append(")" * len(flags) + "|" + "".join(f"(?{f}:" for f in flags))
            i += 1
        elif c == ")":
            out.append(")" * len(stack.pop().flags) + ")")
            if not stack:  # an unbalanced `)`: left for `re` to refuse
                stack.append(_Group())
            i += 1
        else:
            out.append(c)
            i += 1
    out.append(")" * len(stack[-1].flags))
    return "".join(out)


def _bracket(pattern: str, start: int) -> tuple[str, int]:
    """The bracket class starting at `start`, in Python's spelling, and the index after it."""
    i = start + 1
    out = ["["]
    if pattern[i : i + 1] == "^":
        out.append("^")
        i += 1
    if pattern[i : i + 1] == "]":  # a leading `]` is a literal
        out.append("\\]")
        i += 1
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "]":
            return "".join(out) + "]", i + 1
        m = _POSIX.match(pattern, i)
        if m is not None and m.group(2) in POSIX:
            if m.group(1):  # a negated POSIX class inside a class: no Python spelling
                raise ValueError(f"negated POSIX class {m.group()!r} is not supported")
            out.append(POSIX[m.group(2)])
            i = m.end()
            continue
        if c == "[" or (c in "&|-~" and pattern[i + 1 : i + 2] == c):
            out.append("\\" + c)
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out), i  # unterminated: left for `re` to refuse


def relax(pattern: str) -> str:
    """A trigger for `pattern` that is cheaper to compile: bounded repeats with an upper bound
    (``{20,50}``, ``.{0,20}?``) left open (a superset: the rule itself checks the bound)."""
    return re.sub(r"\{(\d+),\d+\}\??", r"{\1,}", pattern)
