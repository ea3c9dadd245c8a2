"""Provider token shapes taken from a maintained catalogue at run time: Yelp's `detect-secrets`.

A list of shapes typed in by hand trails the providers, so the shapes of provider tokens come from
the plugin classes of the installed `detect-secrets` package: every `RegexBasedDetector` subclass
it ships, found by walking `detect_secrets.plugins` (a new release's new plugins are picked up with
no change here). Its regexes are used as data: each becomes

- a RULE, run by Python's `re` on the lines the trigger scan flags (the span hidden is the
  pattern's first group when it has one, else the match widened over adjacent token characters,
  so a longer real token than the pattern describes is hidden whole); and
- a TRIGGER in the one-pass Hyperscan scan (`ledger.redact.scanner.catalogue_triggers`): the regex as it is when
  Hyperscan compiles it (bounded repeats left open, `relax`: cheaper to compile), else
  TRANSLATED (lookaround assertions, which Hyperscan lacks, dropped: the result matches a
  superset, which is all a trigger needs), else scanned per block by
  Python's `re` (FALLBACK). docs/secrets.md lists which pattern took which path.

Plugins left out, and why (`SKIPPED`): the public IPv4 detector (an address is no credential and
every Ray log holds some), and the private-key marker (our PEM rule masks the whole block, not
only its first line). The keyword and high-entropy detectors are not regex catalogues (they are not
`RegexBasedDetector`s) and are not used either: entropy fires on every checkpoint hash.

Without the package (a broken install), the catalogue is empty and our own rules still run.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import re
from dataclasses import dataclass
from typing import Any

SKIPPED = {
    "IPPublicDetector": "an IP address is not a credential; Ray and SGLang logs print many",
    "PrivateKeyDetector": "ledger's PEM rule masks the whole key block, line by line",
}
TOKEN_BYTES = b"A-Za-z0-9_\\-"
_TOKEN = re.compile(rb"[A-Za-z0-9_\-]")
# one lookaround group (no nested parentheses inside, which is all the catalogue uses)
_LOOKAROUND = re.compile(r"\(\?<?[=!](?:[^()\\]|\\.|\([^()]*\))*\)")


@dataclass(frozen=True)
class CatalogueRule:
    """One catalogue regex: its provider, the rule, and how the trigger scan finds it."""

    provider: str  # the plugin's secret_type, e.g. "Stripe Access Key"
    plugin: str  # the plugin class name
    pattern: re.Pattern[bytes]
    caseless: bool
    # the trigger forms to try in Hyperscan, in order: ("as-is", ...), ("translated", ...); none
    # for a verbose pattern (scanned by `pattern` itself: "fallback"); the scanner picks
    candidates: tuple[tuple[str, bytes], ...]

    @property
    def kind(self) -> str:
        """The kind recorded in `redacted` (``catalogue:stripe-access-key``)."""
        return "catalogue:" + re.sub(r"[^a-z0-9]+", "-", self.provider.lower()).strip("-")

    @functools.cached_property
    def needs(self) -> bytes:
        """A literal every match holds (lower case when caseless; empty: none known)."""
        return required_literal(self.pattern.pattern, self.caseless)

    def spans(self, data: bytes, lower: bytes | None = None) -> list[tuple[int, int]]:
        """Spans this rule hides in `data` (`lower`: `data.lower()`, for caseless rules' test)."""
        out: list[tuple[int, int]] = []
        if self.needs and self.needs not in (data if not self.caseless else lower if lower is not None else data.lower()):
            return out
        for m in self.pattern.finditer(data):
            if self.pattern.groups and m.group(1):
                out.append(m.span(1))
                continue
            start, end = m.span()
            while start < end and data[start : start + 1] in b" \t=:\"'":  # delimiters the regex ate
                start += 1
            while end > start and data[end - 1 : end] in b" \t\"'\r\n":
                end -= 1
            while start > 0 and _TOKEN.match(data, start - 1):
                start -= 1
            while end < len(data) and _TOKEN.match(data, end):
                end += 1
            if end > start:
                out.append((start, end))
        return out


def required_literal(pattern: bytes, caseless: bool) -> bytes:
    """The longest run of literal bytes at the top level of `pattern` (every match holds it), so a
    rule is only run where its literal is (a cheap `in` test on a long line)."""
    try:
        parser: Any = importlib.import_module("re._parser")
        consts: Any = importlib.import_module("re._constants")
    except ImportError:  # Python 3.10
        parser, consts = importlib.import_module("sre_parse"), importlib.import_module("sre_constants")
    try:
        parsed = parser.parse(pattern.decode("latin-1"), re.IGNORECASE if caseless else 0)
    except Exception:
        return b""
    best: list[int] = []
    run: list[int] = []
    for op, arg in list(parsed) + [(None, None)]:
        if op is consts.LITERAL:
            run.append(arg)
            continue
        if len(run) > len(best):
            best = run
        run = []
    lit = bytes(best)
    return lit.lower() if caseless else lit


def translate(pattern: str) -> str:
    """`pattern` without lookaround assertions: a superset, which Hyperscan can compile."""
    prev = None
    while prev != pattern:
        prev, pattern = pattern, _LOOKAROUND.sub("", pattern)
    return pattern


def relax(pattern: str) -> str:
    """A trigger for `pattern` that is cheaper to compile: bounded repeats with an upper bound
    (``{20,50}``, ``.{0,20}?``) left open (a superset: the rule itself checks the bound)."""
    return re.sub(r"\{(\d+),\d+\}\??", r"{\1,}", pattern)


def _plugins() -> list[tuple[str, str, list[re.Pattern[str]]]]:
    try:
        plugins = importlib.import_module("detect_secrets.plugins")
        base = importlib.import_module("detect_secrets.plugins.base")
    except ImportError:
        return []
    out = []
    for info in sorted(pkgutil.iter_modules(plugins.__path__), key=lambda i: i.name):
        try:
            mod = importlib.import_module(f"detect_secrets.plugins.{info.name}")
        except Exception:  # a plugin needing an optional extra: the others still count
            continue
        for name, cls in inspect.getmembers(mod, inspect.isclass):
            if (
                cls.__module__ != mod.__name__
                or not issubclass(cls, base.RegexBasedDetector)
                or cls is base.RegexBasedDetector
                or name in SKIPPED
            ):
                continue
            try:
                plugin: Any = cls
                out.append((name, str(plugin.secret_type), list(plugin().denylist)))
            except Exception:
                continue
    return out


@functools.lru_cache(maxsize=1)
def catalogue() -> tuple[CatalogueRule, ...]:
    """Every catalogue rule (loaded once per process)."""
    rules: list[CatalogueRule] = []
    for plugin, provider, patterns in _plugins():
        for p in patterns:
            caseless = bool(p.flags & re.IGNORECASE)
            flags = re.IGNORECASE if caseless else 0
            try:
                compiled = re.compile(p.pattern.encode(), flags | (p.flags & re.VERBOSE))
            except re.error:
                continue
            if p.flags & re.VERBOSE and re.search(r"[\s#]", p.pattern):  # verbose for real
                candidates: tuple[tuple[str, bytes], ...] = ()
            else:
                candidates = (("as-is", relax(p.pattern).encode()), ("translated", relax(translate(p.pattern)).encode()))
            rules.append(CatalogueRule(provider, plugin, compiled, caseless, candidates))
    return tuple(rules)


def catalogue_version() -> str:
    """The installed detect-secrets version, or ``absent``."""
    try:
        from importlib.metadata import version

        return version("detect-secrets")
    except Exception:
        return "absent"
