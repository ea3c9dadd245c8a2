"""Provider token shapes taken from maintained catalogues: Yelp's `detect-secrets` (at run time) and
gitleaks' default rules (carried as data: `ledger.redact.gitleaks`).

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

gitleaks' rules join them as the same `CatalogueRule`s (keywords, entropy and allowlists as
gitleaks reads them, see `ledger.redact.gitleaks`); their trigger is the rule's keywords where
each is distinctive (a literal scan), else the rule's regex. Both are derived once per user and
cached (`_cached_entries`).

Without the package (a broken install), the catalogue is gitleaks' rules alone, and our own rules still run.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from ledger.cache import code_version, user_cache_dir
from ledger.fsutil import write_atomic
from ledger.redact import gitleaks, re2
from ledger.redact.entry import CatalogueEntry
from ledger.redact.gitleaks import Allowlist, entropy

SKIPPED = {
    "IPPublicDetector": "an IP address is not a credential; Ray and SGLang logs print many",
    "PrivateKeyDetector": "ledger's PEM rule masks the whole key block, line by line",
}
_TOKEN = re.compile(rb"[A-Za-z0-9_\-]")
# A group this short is structure, not the credential: the whole match is hidden instead (in
# detect-secrets' rules a short group opening the match, a prefix such as ``(ghp|gho)_``; in
# gitleaks' a short secret, such as one repeat of ``([a-z0-9]{4}-){3}`` in a webhook URL)
SHORT_GROUP = 8
_LEAD_CHAR = re.compile(rb"[\w.-]")
# a match with none of these inside is one token, hidden whole whatever its group (a group inside it
# names a piece of the token, not the credential; in `name = value` the group is the value)
_ONE_TOKEN = re.compile(rb"[^\s'\"`=:,;<>|(){}\[\]]+")
# one lookaround group (no nested parentheses inside, which is all the catalogue uses)
_LOOKAROUND = re.compile(r"\(\?<?[=!](?:[^()\\]|\\.|\([^()]*\))*\)")


class CatalogueRule(msgspec.Struct, frozen=True, dict=True):
    """One catalogue regex: its provider, the rule, and how the trigger scan finds it."""

    provider: str  # detect-secrets: the plugin's secret_type ("Stripe Access Key"); gitleaks: the rule id
    plugin: str  # the plugin class name, or "gitleaks"
    source: bytes  # the regex, compiled on first use (`pattern`): most texts lack its literal
    flags: int  # re flags of `source`
    caseless: bool
    # the trigger forms to try in Hyperscan, in order (the scanner picks): ("as-is", ...),
    # ("translated", ...), ("keywords", ...); none for a verbose pattern (scanned by `pattern`
    # itself: "fallback")
    candidates: tuple[tuple[str, bytes], ...]
    needs: bytes  # a literal every match holds (lower case when caseless; empty: none known)
    # gitleaks' rules (`ledger.redact.gitleaks`): a text must hold one of the keywords (lower case);
    # the secret is group `group` (0: the first group that matched), of entropy above `entropy`,
    # and no allowlist drops it
    keywords: tuple[bytes, ...] = ()
    entropy: float = 0.0
    group: int = 0
    allow: tuple[Allowlist, ...] = ()
    lead: int = 0  # word characters the match may take before the regex's own start (`gitleaks.without_lead`)

    @property
    def kind(self) -> str:
        """The kind recorded in `redacted` (``catalogue:stripe-access-key``, ``gitleaks:linear-api-key``)."""
        if self.plugin == "gitleaks":
            return "gitleaks:" + self.provider
        return "catalogue:" + re.sub(r"[^a-z0-9]+", "-", self.provider.lower()).strip("-")

    @functools.cached_property
    def pattern(self) -> re.Pattern[bytes]:
        """The compiled rule (compiling all ~260 costs ~1 s, so each is compiled when first needed)."""
        return re.compile(self.source, self.flags)

    def applies(self, data: bytes, lower: bytes | None = None) -> bool:
        """Whether `data` holds what every match needs: the literal, or one of the keywords."""
        if self.keywords:
            low = lower if lower is not None else data.lower()
            return any(k in low for k in self.keywords)
        return not self.needs or self.needs in (data if not self.caseless else lower if lower is not None else data.lower())

    def spans(self, data: bytes, lower: bytes | None = None) -> list[tuple[int, int]]:
        """Spans this rule hides in `data` (`lower`: `data.lower()`, for the keyword test)."""
        if not self.applies(data, lower):
            return []
        span = self._gitleaks_span if self.plugin == "gitleaks" else self._plugin_span
        return [sp for m in self.pattern.finditer(data) if (sp := span(data, m)) is not None]

    def _plugin_span(self, data: bytes, m: re.Match[bytes]) -> tuple[int, int] | None:
        """The secret of one match of a detect-secrets pattern: its first group where that is
        the secret (it starts after the match's start, or is long enough), else the match widened."""
        if self.pattern.groups and m.group(1) and (m.start(1) > m.start() or len(m.group(1)) >= SHORT_GROUP):
            return m.span(1)
        return _widened(data, *m.span())

    def _gitleaks_span(self, data: bytes, m: re.Match[bytes]) -> tuple[int, int] | None:
        """The secret of one match as gitleaks reads it, None when it is no finding."""
        span = self._secret_span(data, m)
        if span is None:
            return None
        secret = data[span[0] : span[1]]
        if self.entropy and entropy(secret) <= self.entropy:
            return None
        if self._allowed(data, m, secret):
            return None
        whole = _widened(data, *m.span())
        if whole is not None and (span[1] - span[0] < SHORT_GROUP or _ONE_TOKEN.fullmatch(data, *whole)):
            return whole  # the group is a piece of one token (jwt-base64's `(?P<alg>...)`): all of it goes
        return span

    def _secret_span(self, data: bytes, m: re.Match[bytes]) -> tuple[int, int] | None:
        """Where the secret of a match is: the rule's secret group, else the first group that
        matched, else the whole match widened (None: the secret group did not match)."""
        if self.group and self.pattern.groups >= self.group:
            span: tuple[int, int] | None = m.span(self.group) if m.group(self.group) else None
        else:
            span = next((m.span(g) for g in range(1, self.pattern.groups + 1) if m.group(g)), None)
        if span is None and not (self.pattern.groups and self.group):
            return _widened(data, *m.span())
        return span

    def _allowed(self, data: bytes, m: re.Match[bytes], secret: bytes) -> bool:
        """Whether an allowlist (gitleaks' global ones, the rule's own) lets the match be: it
        sees the secret, the match with up to `lead` characters before it, and its lines."""
        start = data.rfind(b"\n", 0, m.start()) + 1
        end = data.find(b"\n", m.end())
        line = data[start : len(data) if end < 0 else end]
        at = m.start()
        while self.lead and at > start and m.start() - at < self.lead and _LEAD_CHAR.match(data, at - 1):
            at -= 1
        return any(a.allows(secret, data[at : m.end()], line) for a in (*global_allowlists(), *self.allow))


def _widened(data: bytes, start: int, end: int) -> tuple[int, int] | None:
    """A whole match without the delimiters the regex ate, widened over adjacent token characters
    (a longer real token than the pattern describes is hidden whole); None when nothing is left."""
    while start < end and data[start : start + 1] in b" \t=:\"'":
        start += 1
    while end > start and data[end - 1 : end] in b" \t\"'\r\n":
        end -= 1
    while start > 0 and _TOKEN.match(data, start - 1):
        start -= 1
    while end < len(data) and _TOKEN.match(data, end):
        end += 1
    return (start, end) if end > start else None


@functools.lru_cache(maxsize=1)
def global_allowlists() -> tuple[Allowlist, ...]:
    """gitleaks' global allowlist, read when a gitleaks rule first finds something."""
    return (Allowlist.from_entry(gitleaks.global_allowlist()),)


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


def _plugins() -> list[tuple[str, str, list[re.Pattern[str]]]]:
    import pkgutil

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


def _entries() -> list[CatalogueEntry]:
    """The catalogue as plain data: detect-secrets' plugins, then gitleaks' rules (importing the
    plugins and compiling their regexes costs ~0.5 s, translating gitleaks' ~10 ms, so the result is
    cached per user by `_cached_entries`)."""
    return _detect_secrets_entries() + gitleaks.entries()


def _detect_secrets_entries() -> list[CatalogueEntry]:
    entries: list[CatalogueEntry] = []
    for plugin, provider, patterns in _plugins():
        for p in patterns:
            caseless = bool(p.flags & re.IGNORECASE)
            flags = (re.IGNORECASE if caseless else 0) | (p.flags & re.VERBOSE)
            try:
                re.compile(p.pattern.encode(), flags)
            except re.error:
                continue
            if p.flags & re.VERBOSE and re.search(r"[\s#]", p.pattern):  # verbose for real
                candidates: list[list[str]] = []
            elif translate(p.pattern) == p.pattern:
                candidates = [["as-is", re2.relax(p.pattern)]]
            else:  # Hyperscan has no lookarounds: the pattern without them, a superset
                candidates = [["translated", re2.relax(translate(p.pattern))]]
            needs = required_literal(p.pattern.encode(), caseless)
            entries.append(
                {
                    "plugin": plugin,
                    "provider": provider,
                    "source": p.pattern,
                    "flags": flags,
                    "caseless": caseless,
                    "candidates": candidates,
                    "needs": needs.decode("latin-1"),
                }
            )
    return entries


def _installed_key() -> str:
    """What identifies the installed plugins without importing anything (`importlib.metadata`
    alone costs ~50-90 ms): each plugin file's name, size and mtime, hashed."""
    spec = importlib.util.find_spec("detect_secrets")
    if spec is None or not spec.submodule_search_locations:
        return "absent"
    h = hashlib.sha256()
    for folder in spec.submodule_search_locations:
        for f in sorted((Path(folder) / "plugins").glob("*.py")):
            st = f.stat()
            h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()[:16]


def _cache_file() -> Path:
    """Per user, named by the installed plugins and by the version of the code this module runs
    (`cache.code_version`), so an entry made by other code, plugins or rules is never read."""
    return user_cache_dir("catalogue") / f"{_installed_key()}-{code_version(__name__)}.json"


def _cached_entries() -> list[CatalogueEntry]:
    """`_entries()`, read from the per-user cache when this version was loaded before (a damaged
    or unwritable cache is only a miss)."""
    path: Path | None = None
    try:
        path = _cache_file()
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, list):
            return data
    except (OSError, ValueError, RuntimeError):  # RuntimeError: no home folder to find
        pass
    entries = _entries()
    if path is not None and entries:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, json.dumps(entries).encode())
        except OSError:
            pass
    return entries


@functools.lru_cache(maxsize=1)
def catalogue() -> tuple[CatalogueRule, ...]:
    """Every catalogue rule (loaded once per process; from the per-user cache after the first)."""
    rules: list[CatalogueRule] = []
    for e in _cached_entries():
        try:
            rules.append(
                CatalogueRule(
                    str(e["provider"]),
                    str(e["plugin"]),
                    str(e["source"]).encode(),
                    int(e["flags"]),
                    bool(e["caseless"]),
                    tuple((str(k), str(v).encode()) for k, v in e["candidates"]),
                    str(e["needs"]).encode("latin-1"),
                    tuple(str(k).encode() for k in e.get("keywords") or ()),
                    float(e.get("entropy") or 0.0),
                    int(e.get("group") or 0),
                    tuple(Allowlist.from_entry(a) for a in e.get("allow") or ()),
                    int(e.get("lead") or 0),
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    return tuple(rules)


Gate = tuple[bytes, bool, tuple[int, ...]]  # a literal, whether caseless, the rules needing it


@functools.lru_cache(maxsize=1)
def _gates() -> tuple[tuple[int, ...], tuple[Gate, ...], dict[bytes, tuple[Gate, ...]]]:
    """The catalogue indexed by what each rule needs (a literal, a keyword): the rules needing
    nothing, every gate, and the gates by their first two bytes in lower case (a short text is
    tested only against the gates its own byte pairs can start; one-byte gates under ``b""``)."""
    always: list[int] = []
    by_gate: dict[tuple[bytes, bool], list[int]] = {}
    for i, rule in enumerate(catalogue()):
        needs = [(k, True) for k in rule.keywords] or ([(rule.needs, rule.caseless)] if rule.needs else [])
        for need in needs:
            by_gate.setdefault(need, []).append(i)
        if not needs:
            always.append(i)
    every = tuple((lit, caseless, tuple(idx)) for (lit, caseless), idx in by_gate.items())
    by_pair: dict[bytes, list[Gate]] = {}
    for gate in every:
        by_pair.setdefault(gate[0][:2].lower() if len(gate[0]) >= 2 else b"", []).append(gate)
    return tuple(always), every, {k: tuple(v) for k, v in by_pair.items()}


def rules_for(data: bytes, lower: bytes) -> list[CatalogueRule]:
    """The catalogue rules that may match `data` (`lower`: `data.lower()`), in catalogue order:
    a rule is tried only where what it needs is (~280 gates; one `in` test each on a long text,
    a dictionary look-up per byte pair on a short one, such as a manifest's strings)."""
    always, every, by_pair = _gates()
    if len(lower) > 256:
        gates: Iterable[Gate] = every
    else:
        pairs = {lower[i : i + 2] for i in range(len(lower) - 1)}
        gates = [g for pair in pairs for g in by_pair.get(pair, ())] + list(by_pair.get(b"", ()))
    hit = set(always)
    for lit, caseless, idx in gates:
        if lit in (lower if caseless else data):
            hit.update(idx)
    rules = catalogue()
    return [rules[i] for i in sorted(hit)]


def catalogue_version() -> str:
    """The installed detect-secrets version, or ``absent``."""
    try:
        from importlib.metadata import version

        return version("detect-secrets")
    except Exception:
        return "absent"
