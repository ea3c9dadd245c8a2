"""gitleaks' default rules as ledger carries and reads them (ledger/redact/gitleaks.py, re2.py): the
data file names its source and licence, RE2 is translated to what Python means by the same text,
and a rule keeps gitleaks' reading (keywords, secret group, entropy, allowlists). That every rule
compiles and finds a value generated from its own regex is tests/test_secret_corpus.py's corpus."""

from __future__ import annotations

import json
import re

import pytest

from ledger.redact import gitleaks
from ledger.redact.catalogue import catalogue
from ledger.redact.re2 import to_python


def test_the_data_file_names_its_source_licence_and_each_rule() -> None:
    data = json.loads(gitleaks.DATA.read_text(encoding="utf-8"))
    assert "gitleaks" in data["source"] and data["licence"].startswith("MIT") and len(data["commit"]) == 40
    assert len(data["rules"]) >= 220
    assert all(r["source"] == f"gitleaks default config, rule id {r['id']}" for r in data["rules"])
    ids = {r.provider for r in catalogue() if r.plugin == "gitleaks"}
    assert ids == {r["id"] for r in data["rules"] if r.get("regex")}  # every rule with a regex is loaded


def test_re2_flags_in_the_middle_hold_to_the_end_of_their_group() -> None:
    p = re.compile(to_python(r"(x(?i)ab|cd)z"))
    assert p.fullmatch("xABz") and p.fullmatch("CDz") and not p.fullmatch("xABZ")
    assert re.fullmatch(to_python(r"lin_api_(?i)[a-z0-9]{4}"), "lin_api_AbC1") and not re.fullmatch(
        to_python(r"lin_api_(?i)[a-z]{2}"), "LIN_api_ab"
    )
    assert re.search(to_python(r"tok[[:alnum:]]{3}\z"), "tokA1b") and not re.search(to_python(r"ab\z"), "ab\n")
    assert re.fullmatch(to_python(r"[^]]+"), "abc") and re.fullmatch(to_python(r"[a-z\-_]+"), "a-_b")


def test_keyword_assignment_rules_run_without_their_lazy_lead() -> None:
    assert gitleaks.without_lead(r"(?i)[\w.-]{0,50}?(?:linear)(?:x)") == ("(?i)(?:linear)(?:x)", 50)
    assert gitleaks.without_lead(r"[\w.-]{0,50}?(?i:[\w.-]{0,50}?(?:okta))=") == ("(?i:(?:okta))=", 100)
    assert gitleaks.without_lead(r"\bPMAK-[a-f0-9]{24}") == (r"\bPMAK-[a-f0-9]{24}", 0)


def _rule(rid: str):  # type: ignore[no-untyped-def]
    return next(r for r in catalogue() if r.provider == rid)


def test_entropy_keywords_and_allowlists_are_gitleaks_reading() -> None:
    generic = _rule("generic-api-key")
    assert generic.spans(b"client_token = 9fJ2kQ7xLm3Pz8Rt") and not generic.spans(b"client_token = aaaaaaaaaaaaaaaa")  # entropy
    assert not generic.spans(b"client_token = 9fJ2kQ7xLm3Pzexample")  # a stopword of the rule ("example")
    assert not generic.spans(b"random_access_id = 9fJ2kQ7xLm3Pz8Rt")  # the rule's allowlist of the whole match
    assert not generic.spans(b"client_secret = ${SECRET_FROM_ENV}")  # the global allowlist: a variable, no value
    linear = _rule("linear-api-key")
    token = b"lin_api_" + b"Ab3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7d"
    assert linear.spans(b"use " + token) == [(4, 4 + len(token))] and not linear.spans(b"use lin_api_short")


def test_a_trigger_hyperscan_refuses_costs_only_its_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trigger set is compiled as chosen, once; when Hyperscan refuses it (here a rule whose
    only form has a lookbehind), each form is tried alone: that rule scans in `re`, the rest stays
    in the one-pass scan, and what the rule finds is still hidden."""
    from ledger.redact import catalogue as cat
    from ledger.redact import scanner

    odd = cat.CatalogueRule("odd-token", "test", rb"(?<=odd=)[a-z]{12}", 0, False, (("as-is", rb"(?<=odd=)[a-z]{12}"),), b"odd=")
    rules = (*cat.catalogue(), odd)
    monkeypatch.setattr(cat, "catalogue", lambda: rules)
    monkeypatch.setattr(scanner, "catalogue", lambda: rules)
    monkeypatch.setattr(scanner, "_REFUSED", [])
    scanner.catalogue_triggers.cache_clear()
    cat._gates.cache_clear()
    try:
        r = scanner.Redactor()
        assert r.redact_lines(b"x odd=abcdefghijkl y\n") == b"x odd=*** y\n"
        assert r.engine == "hyperscan" and scanner._REFUSED == [True]
        paths = {t[0].provider: t[2] for t in scanner.catalogue_triggers(checked=True)}
        assert paths["odd-token"] == "fallback" and paths["linear-api-key"] == "keywords"
    finally:
        scanner.catalogue_triggers.cache_clear()
        cat._gates.cache_clear()
