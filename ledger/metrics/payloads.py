"""The numbers of one Miles metric payload, the dict literal after `step N: `.

Payloads go through `ast.literal_eval` only (pulled logs are data, never code); `nan`, `inf` and
numpy-2 reprs such as `np.float64(1.5)` are accepted. Nearly every payload is a flat dict of
quoted keys and numbers, read by regexes (`payload_numbers`) or, a block's worth at a time, by
one `json.loads` (`json_payloads`).
"""

from __future__ import annotations

import ast
import json
import math
import re
from typing import Any

ANSI_TEXT = re.compile(r"\x1b\[[0-9;]*m")
# Ray's log deduplication appends this to a repeated line.
RAY_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")
_NON_LITERAL = re.compile(r"\bnp\.\w+\(([^()]*)\)|(?<![\w'\"])-?(?:nan|inf)(?![\w'\"])")


def numbers(payload: Any) -> dict[str, float] | None:
    """The numeric entries of a parsed payload, or None when it is not a dict."""
    if not isinstance(payload, dict):
        return None
    out: dict[str, float] = {}
    for key, value in payload.items():
        if isinstance(value, bool) or not isinstance(key, str):
            continue
        if isinstance(value, (int, float)):
            out[key] = float(value)
        elif value is None:  # stands for nan after _literal's rewrite, or a real None
            out[key] = math.nan
    return out


# The shape of nearly every Miles payload, `{'perf/rollout_time': 371.18, 'train/loss': nan}`: a
# flat dict of quoted keys and plain numbers, read by two regexes ~10x faster than `ast` (the
# parse of a big log's metric lines is most of its cost). Anything else goes to `_literal`.
_NUMBER = r"-?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)"
_PAIR = r"'[^'\\\n]*': " + _NUMBER
_FLAT_DICT = re.compile(r"\{(?:" + _PAIR + r"(?:, " + _PAIR + r")*)?\}")
_FLAT_PAIRS = re.compile(r"'([^'\\\n]*)': (" + _NUMBER + ")")


def payload_numbers(text: str) -> dict[str, float] | None:
    """The numbers of a payload: the flat-dict fast path, else `_literal` and `numbers`."""
    if _FLAT_DICT.fullmatch(text):
        return {key: float(value) for key, value in _FLAT_PAIRS.findall(text)}
    return numbers(_literal(text))


# A flat dict that reads the same as JSON once its quotes are swapped: printable ASCII keys
# without quotes or backslashes, JSON's own numbers. Such payloads of a block are parsed by one
# `json.loads` call (`json_payloads`), with `parse_int=float`: each number is `float` of its
# text, as `payload_numbers` gives it. Any other payload takes `payload_numbers`.
_JSON_KEY = rb"'[ !#-&(-\[\]-~]*'"
_JSON_NUMBER = rb"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?"
_JSON_PAIR = _JSON_KEY + rb": " + _JSON_NUMBER
JSON_DICT = re.compile(rb"\{(?:" + _JSON_PAIR + rb"(?:, " + _JSON_PAIR + rb")*)?\}")


def json_payloads(payloads: list[bytes]) -> list[dict[str, float]]:
    """The numbers of payloads that all match `JSON_DICT`, in one C-level parse (none where
    that parse fails: each then takes `payload_numbers`)."""
    if not payloads:
        return []
    text = b"".join([b"[", b",".join(payloads).replace(b"'", b'"'), b"]"])
    try:
        parsed: list[dict[str, float]] = json.loads(text, parse_int=float)
    except (ValueError, RecursionError):
        return []
    return parsed


def slow_payload(payload: bytes) -> dict[str, float] | None:
    """The numbers of one payload as it was printed (colour codes and Ray's repeat note removed),
    or None when it is not a dict literal."""
    text = payload.decode("utf-8", "replace")
    text = RAY_REPEATED.sub("", ANSI_TEXT.sub("", text)).strip()
    try:
        return payload_numbers(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _literal(text: str) -> Any:
    """`ast.literal_eval`, retried with `nan`/`inf`/`np.float64(x)` rewritten to literals."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass

    def fix(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            return m.group(1)
        word = m.group(0)
        return "None" if word.endswith("nan") else word.replace("inf", "1e999")

    return ast.literal_eval(_NON_LITERAL.sub(fix, text))
