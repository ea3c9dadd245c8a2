"""gitleaks' default rules, carried as data (`gitleaks_rules.json`, MIT, written by tools/gitleaks_rules.py).

gitleaks (https://github.com/gitleaks/gitleaks) keeps the broadest maintained catalogue of
credential shapes: one regex per provider, the keywords a text must hold before the regex is tried,
an entropy floor for the looser shapes and allowlists of known non-secrets. The data file holds
them as gitleaks writes them (Go RE2 syntax); this module reads it and gives the catalogue
(`ledger.redact.catalogue`) plain entries, with each regex translated for Python's `re` and
Hyperscan (`ledger.redact.re2`). What a rule hides follows gitleaks' own reading:

- the rule runs only on a text holding one of its keywords (any case);
- the secret is the rule's `secretGroup`, else the first capture group that matched something,
  else the whole match;
- a secret of Shannon entropy at or under the rule's `entropy` is no finding;
- an allowlist (the global one, then the rule's) drops a finding when its regexes match the secret
  (or the whole match, or the line: `regexTarget`) or the secret holds one of its stopwords; with
  ``condition = "AND"`` every check it has must hold. Path checks never hold: ledger's texts are
  logs and arguments, not files of a repository, so a rule limited to some paths (``*.tf``,
  ``*.yaml``) runs on every text, and a path-only rule (``pkcs12-file``) names files only
  (`file_name_rules`, used for the data files ledger tracks).
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import msgspec

from ledger.redact.entry import AllowEntry, CatalogueEntry
from ledger.redact.re2 import relax, to_python

DATA = Path(__file__).with_name("gitleaks_rules.json")
# Keywords too common in training logs (or inside common words) to be a rule's trigger (the rule's
# regex is its trigger instead, see `trigger_of`): SGLang's decode lines print "token" on every line,
# "compat." holds "pat.", Megatron's argument dump "linear".
COMMON_KEYWORDS = frozenset(
    {"token", "access", "secret", "passwd", "password", "credential", "creds", "test_", "live_", "intra", "linear"}
    | {"api-", "pat.", "sat.", "_pub"}
)
MIN_KEYWORD_TRIGGER = 4


class Allowlist(msgspec.Struct, frozen=True, dict=True):
    """One gitleaks allowlist: what it checks (``secret``, ``match`` or ``line``), and how."""

    target: str
    all_of: bool  # condition AND: every check it has must hold
    regexes: tuple[bytes, ...]  # translated for Python's re
    stopwords: tuple[bytes, ...]  # lower case
    paths: bool  # it has path checks (never met, see the module docstring)

    @functools.cached_property
    def compiled(self) -> tuple[re.Pattern[bytes], ...]:
        """The regexes, compiled when first needed (most findings never reach an allowlist)."""
        return tuple(re.compile(r) for r in self.regexes)

    def allows(self, secret: bytes, match: bytes, line: bytes) -> bool:
        """Whether this allowlist drops the finding."""
        target = {"match": match, "line": line}.get(self.target, secret)
        by_regex = any(r.search(target) for r in self.compiled)
        lower = secret.lower()
        by_word = any(w in lower for w in self.stopwords)
        if not self.all_of:
            return by_regex or by_word
        checks = ([False] if self.paths else []) + ([by_regex] if self.regexes else []) + ([by_word] if self.stopwords else [])
        return bool(checks) and all(checks)

    def to_entry(self) -> AllowEntry:
        """The allowlist as plain data (the catalogue's per-user cache)."""
        return {
            "target": self.target,
            "all_of": self.all_of,
            "regexes": [r.decode("latin-1") for r in self.regexes],
            "stopwords": [w.decode("latin-1") for w in self.stopwords],
            "paths": self.paths,
        }

    @classmethod
    def from_entry(cls, e: AllowEntry) -> Allowlist:
        """Back from `to_entry`."""
        return cls(
            str(e["target"]),
            bool(e["all_of"]),
            tuple(str(r).encode("latin-1") for r in e["regexes"]),
            tuple(str(w).encode("latin-1") for w in e["stopwords"]),
            bool(e["paths"]),
        )


def entropy(data: bytes) -> float:
    """Shannon entropy of `data` in bits per byte (gitleaks' measure of how random a secret is)."""
    if not data:
        return 0.0
    n = len(data)
    return -sum(c / n * math.log2(c / n) for c in Counter(data).values())


class RawAllowlist(msgspec.Struct, frozen=True, rename={"target": "regexTarget"}):
    """An allowlist as the data file holds it (gitleaks' TOML keys); other keys are not read."""

    target: str | None = None
    condition: str | None = None  # "AND", or OR when absent
    regexes: list[str] | None = None
    stopwords: list[str] | None = None
    paths: list[str] | None = None


class RawRule(msgspec.Struct, frozen=True, rename={"secret_group": "secretGroup"}):
    """A rule as the data file holds it (gitleaks' TOML keys); other keys are not read."""

    id: str
    regex: str | None = None  # none: a rule naming files only (`path`)
    path: str | None = None
    keywords: list[str] | None = None
    entropy: float | None = None
    secret_group: int | None = None
    allowlists: list[RawAllowlist] | None = None


class RulesFile(msgspec.Struct, frozen=True):
    """`gitleaks_rules.json`: the commit read, the global allowlist and the rules."""

    commit: str | None = None
    allowlist: RawAllowlist | None = None
    rules: list[RawRule] | None = None


def _allowlist(raw: RawAllowlist) -> Allowlist:
    return Allowlist(
        raw.target or "secret",
        (raw.condition or "OR").upper() == "AND",
        tuple(to_python(r).encode() for r in raw.regexes or []),
        tuple(w.lower().encode() for w in raw.stopwords or []),
        bool(raw.paths),
    )


def trigger_of(regex: str, keywords: Sequence[str]) -> tuple[str, str]:
    """How the one-pass scan finds a rule's lines: ``("keywords", alternation)`` when every
    keyword is distinctive (a literal scan: cheap to compile, and a line without one skips the
    rule anyway), else ``("as-is", regex)`` with its bounded repeats left open and a leading flag
    group scoped (so that it can stand in an alternation of triggers)."""
    if keywords and all(len(k) >= MIN_KEYWORD_TRIGGER and k.lower() not in COMMON_KEYWORDS for k in keywords):
        return "keywords", "(?i:" + "|".join(re.escape(k) for k in sorted(keywords)) + ")"
    pattern = relax(regex)
    m = re.match(r"\(\?([a-z]+)\)", pattern)
    if m:
        pattern = f"(?{m.group(1)}:{pattern[m.end() :]})"
    return "as-is", pattern


# The lazy lead of gitleaks' keyword-assignment rules, `[\w.-]{0,50}?` before the keyword (twice
# in some: `[\w.-]{0,50}?(?i)[\w.-]{0,50}?okta...`). It only moves where the match starts, yet costs
# Python's re 50 (or 2,500) tries at every position of a text holding the keyword: the regex is run
# without it and the match's start moved back over as many of those characters (`lead`).
_LEAD = re.compile(r"^(\(\?i\))?\[\\w\.-\]\{0,(\d+)\}\?(\(\?i:\[\\w\.-\]\{0,(\d+)\}\?)?")


def without_lead(regex: str) -> tuple[str, int]:
    """`regex` without its lazy lead, and how many characters the lead may take."""
    m = _LEAD.match(regex)
    if m is None:
        return regex, 0
    return (m.group(1) or "") + ("(?i:" if m.group(3) else "") + regex[m.end() :], int(m.group(2)) + int(m.group(4) or 0)


def _entry(rule: RawRule, source: str) -> CatalogueEntry:
    regex, lead = without_lead(to_python(source))
    keywords = [k.lower() for k in rule.keywords or []]
    path, trigger = trigger_of(regex, keywords)
    return {
        "plugin": "gitleaks",
        "provider": rule.id,
        "source": regex,
        "flags": 0,
        "caseless": False,  # inline flags, as gitleaks writes them
        "candidates": [[path, trigger]],
        "needs": "",
        "keywords": keywords,
        "entropy": float(rule.entropy or 0.0),
        "group": rule.secret_group or 0,
        "lead": lead,
        "allow": [_allowlist(a).to_entry() for a in rule.allowlists or []],
    }


@functools.lru_cache(maxsize=1)
def _data() -> RulesFile:
    """The data file, every value read checked by its type; none when it cannot be read or a
    value is of the wrong type (a broken install: the other rules still run)."""
    try:
        return msgspec.json.decode(DATA.read_bytes(), type=RulesFile)
    except (OSError, msgspec.DecodeError):  # unreadable, not JSON, or a value of the wrong type
        return RulesFile()


def entries() -> list[CatalogueEntry]:
    """Every rule with a regex, as the catalogue's plain entries (regexes translated)."""
    return [_entry(r, r.regex) for r in _data().rules or [] if r.regex]


def global_allowlist() -> AllowEntry:
    """gitleaks' global allowlist (its regexes and stopwords), as plain data."""
    return _allowlist(_data().allowlist or RawAllowlist()).to_entry()


@functools.cache
def file_name_rules() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """(rule id, path regex) of the rules that name files only (``pkcs12-file``: ``*.p12``, ``*.pfx``);
    compiled once per process (every data file is checked against them)."""
    return tuple((r.id, re.compile(to_python(r.path))) for r in _data().rules or [] if not r.regex and r.path)


def data_commit() -> str:
    """The gitleaks commit the data file was read from."""
    return _data().commit or "unknown"
