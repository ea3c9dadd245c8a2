"""A catalogue rule as plain data: what `ledger.redact.catalogue` keeps in its per-user cache (one
JSON list of these) and builds its `CatalogueRule`s from. detect-secrets' rules give the keys of
`CatalogueEntry`'s base; gitleaks' (`ledger.redact.gitleaks`) also the optional ones."""

from __future__ import annotations

from typing import TypedDict


class AllowEntry(TypedDict):
    """A gitleaks allowlist (`gitleaks.Allowlist`) as plain data, its bytes as latin-1 text."""

    target: str  # what the regexes check: "secret", "match" or "line"
    all_of: bool  # condition AND: every check it has must hold
    regexes: list[str]
    stopwords: list[str]
    paths: bool  # it has path checks


class _EntryKeys(TypedDict):
    plugin: str  # the detect-secrets plugin, or "gitleaks"
    provider: str
    source: str  # the regex
    flags: int  # Python's `re` flags
    caseless: bool
    candidates: list[list[str]]  # [how, pattern] pairs the one-pass scan may use (`triggers`)
    needs: str  # a literal every match holds ("" when none), latin-1


class CatalogueEntry(_EntryKeys, total=False):
    """One rule of the catalogue as plain data; the optional keys are gitleaks'."""

    keywords: list[str]  # a text must hold one of these (any case) before the regex is tried
    entropy: float  # a secret at or under this Shannon entropy is no finding
    group: int  # the capture group that is the secret (0: the first that matched)
    lead: int  # word characters the match may take before the regex's own start
    allow: list[AllowEntry]
