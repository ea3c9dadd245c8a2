"""The Redactor on the planted-secret corpus: every shape and syntax hidden, ordinary lines kept,
the trigger scan a superset of the rules (both engines), PEM blocks line by line, long lines."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from secret_corpus import (
    ORDINARY,
    ORDINARY_ROUND_TWO,
    ansi_lines,
    catalogue_lines,
    escaped_forms,
    named_lines,
    pem_block,
    prefixed_lines,
    provider_lines,
    provider_tokens,
    rand,
    round_three_lines,
    round_three_tokens,
    shape_lines,
    syntax_lines,
    tokens,
    yaml_block,
)

from ledger.redact import rules, scanner
from ledger.redact.catalogue import required_literal
from ledger.redact.names import Redactions
from ledger.redact.scanner import OVERLAP, WINDOW, Redactor, _Engine, trigger_patterns

TOK = tokens()
CORPUS = shape_lines(TOK) + named_lines() + prefixed_lines() + provider_lines(provider_tokens()) + syntax_lines() + ansi_lines(TOK)
# round three: the shapes the issue found leaking, every Authorization scheme, and a generated value
# of every catalogue rule (detect-secrets' plugins and gitleaks' default rules)
ROUND_THREE = round_three_lines(round_three_tokens())
CORPUS += ROUND_THREE + catalogue_lines()


@pytest.mark.parametrize(("line", "secret"), CORPUS)
def test_every_shape_and_syntax_is_hidden(line: str, secret: str) -> None:
    r = Redactor()
    body = f"before\n{line}\nafter\n".encode()
    out = r.redact_lines(body)
    for part in secret.split(" "):
        assert part.encode() not in out, line
    assert out.count(b"\n") == 3 and out.startswith(b"before\n") and out.endswith(b"\nafter\n")


@pytest.mark.parametrize("engine", ["hyperscan", "re"])
def test_triggers_flag_every_line_the_rules_change(engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if engine == "re":  # the fallback where no hyperscan wheel exists
        monkeypatch.setattr(scanner, "_Engine", lambda patterns, persist=False: _forced_re(patterns))
    r = Redactor()
    for line, _ in CORPUS:
        data = line.encode()
        assert r.redact_line(data) != data
        assert r.flagged(data) == [(0, len(data))], line
    assert r.engine == engine


def _forced_re(patterns: list[tuple[bytes, bool]]) -> _Engine:
    import re

    eng = _Engine([])
    eng._re = re.compile(b"|".join((b"(?i:" if c else b"(?:") + p + b")" for p, c in patterns))
    eng.kind = "re"
    return eng


def test_ordinary_miles_lines_lose_no_character(tmp_path: Path) -> None:
    text = ("\n".join(ORDINARY + ORDINARY_ROUND_TWO) + "\n").encode() * 50
    r = Redactor(known=["not-in-the-log-value"])
    acc = Redactions()
    assert r.redact_lines(text, acc) == text
    assert not acc
    hot = ("\n".join(ORDINARY[:4]) + "\n").encode()  # decode and metric lines: most of a log
    assert r.flagged(hot) == []  # never reach the Python rules: the fast path holds
    path = tmp_path / "trainer.log"
    path.write_bytes(text)
    assert r.redact_file(path) is False and path.read_bytes() == text


def test_known_values_in_every_escaped_form() -> None:
    value = "line-one-" + rand(12) + '\n"quoted"/part&more=' + rand(8)
    user_pass = "trainer:" + rand(14)
    r = Redactor(known=[value, user_pass])
    forms = escaped_forms(value) + escaped_forms(user_pass)
    lines = [f"printed {f} here" for f in forms] + value.splitlines()
    out = r.redact_lines(("\n".join(lines) + "\n").encode())
    assert out.count(b"\n") == len(lines)
    for f in forms + value.splitlines():
        assert f.encode() not in out, f


@pytest.mark.parametrize("kind", ["RSA PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY"])
def test_pem_blocks_masked_line_by_line(kind: str) -> None:
    block = pem_block(kind)
    lines = ["before", *(f"(MegatronTrainRayActor pid=3) {b}" for b in block), "after"]
    data = ("\n".join(lines) + "\n").encode()
    r = Redactor()
    acc = Redactions()
    out = r.redact_lines(data, acc)
    got = out.decode().split("\n")
    assert len(got) == len(lines) + 1 and got[0] == "before" and got[-2] == "after"
    for secret in block[1:-1]:
        assert secret.encode() not in out
    assert "private-key" in acc.kinds and r.flush() is False
    # the same block arriving one line at a time (a streaming worker), and split over two blocks
    r2 = Redactor()
    assert b"".join(r2.redact_line(line + b"\n") for line in data.split(b"\n")[:-1]) == out
    r3 = Redactor()
    cut = data.rfind(b"\n", 0, data.index(block[3].encode())) + 1  # at a line start
    assert r3.redact_lines(data[:cut]) + r3.redact_lines(data[cut:]) == out


def test_pem_escaped_on_one_line_and_unterminated_block() -> None:
    block = pem_block("OPENSSH PRIVATE KEY", 3)
    line = ('{"ssh_key_material": "' + "\\n".join(block) + '\\n", "x": 1}').encode()
    out = Redactor().redact_line(line)
    assert all(b.encode() not in out for b in block[1:-1]) and out.endswith(b', "x": 1}')
    r = Redactor()
    data = ("\n".join(block[:-1]) + "\n").encode()  # the job died before the END line
    out = r.redact_lines(data)
    assert out == b"***\n" * len(block[:-1]) and r.flush() is True


def test_long_line_secret_across_a_window_boundary() -> None:
    secret = TOK["hf"]
    for offset in (WINDOW - 10, WINDOW + OVERLAP - 5, 2 * WINDOW - 3):
        line = b"a" * offset + b" " + secret.encode() + b" " + b"b" * (WINDOW // 2) + b"\n"
        r = Redactor()
        out = r.redact_line(line)
        assert secret.encode() not in out and out.endswith(b"b\n") and out.count(b"\n") == 1
        # fed in pieces, as the splitter does with a line longer than its chunk
        pieces = [line[i : i + 300_000] for i in range(0, len(line), 300_000)]
        r = Redactor()
        got = b"".join(r.redact_part(p, i == len(pieces) - 1) for i, p in enumerate(pieces))
        assert got == out


def test_trigger_set_is_valid_for_both_engines() -> None:
    patterns = trigger_patterns(["signature"], [b"a.b*c(d)"])
    import re

    for p, _ in patterns:
        re.compile(p)
    assert (
        Redactor(known=["a.b*c(d)-xyz"], extra_names=["signature"]).redact_line(b"request_signature=abcdef123 a.b*c(d)-xyz")
        == b"request_signature=*** ***"
    )


def test_ledgers_own_default_config_is_not_redacted() -> None:
    """`ledger init`'s .ledger.yaml, dirty in a run's code snapshot, lost `{names:` to the YAML
    rule (`secrets: ***`): a flow mapping after a secret-ish key is structure, not a value."""
    from ledger.config import default_text

    text = default_text()

    acc = Redactions()
    assert Redactor().redact_text(text, acc) == text and not acc
    assert Redactor().redact_text("secrets: {api_key: abcdef123456}\n") == "secrets: {api_key: ***}\n"


def test_catalogue_is_loaded_and_compiled_for_the_one_pass_scan() -> None:
    """detect-secrets' provider plugins and gitleaks' rules are the catalogue; each regex is a
    Hyperscan trigger (as it is, or with its lookarounds dropped, or gitleaks' keywords) and none runs
    in the slow per-block fallback; the whole set compiles as it was chosen (no rule checked alone)."""
    from ledger.redact.scanner import catalogue_triggers

    rules = catalogue_triggers()
    providers = {r.provider for r, _, _ in rules}
    assert {"Stripe Access Key", "SendGrid API Key", "PyPI Token", "Telegram Bot Token", "Slack Token"} <= providers
    assert "Public IP (ipv4)" not in providers  # an IP address is not a credential
    assert {path for _, _, path in rules} == {"as-is", "translated", "keywords"}
    assert {"linear-api-key", "doppler-api-token", "generic-api-key"} <= providers and len(rules) > 250
    assert Redactor().engine == "hyperscan" and not scanner._REFUSED


def test_ansi_codes_are_seen_through_and_kept_where_nothing_is_secret() -> None:
    r = Redactor()
    line = f"\x1b[36m(RolloutManager pid=1)\x1b[0m \x1b[33m{TOK['hf']}\x1b[0m ok".encode()
    out = r.redact_line(line)
    assert TOK["hf"].encode() not in out and out.startswith(b"\x1b[36m(RolloutManager pid=1)\x1b[0m ")
    assert out.endswith(b"\x1b[0m ok")


def test_utf16_output_is_scanned_and_stays_utf16() -> None:
    for codec in ("utf-16-le", "utf-16-be"):
        data = f"loaded {TOK['hf']} and api_key=plainvalue12345\n".encode(codec)
        r = Redactor()
        assert r.flagged(data) != []
        out = r.redact_lines(data)
        text = out.decode(codec)
        assert TOK["hf"] not in text and "plainvalue12345" not in text and text == "loaded *** and api_key=***\n"


@pytest.mark.parametrize("style", ["|", ">-", "|+"])
def test_yaml_block_scalar_in_a_text_and_in_a_log(style: str) -> None:
    text, lines = yaml_block("api_key", style)
    out = Redactor().redact_text(text)
    assert all(v not in out for v in lines) and out.endswith("  host: db.invalid\n")
    r = Redactor()
    logged = r.redact_lines(("step 1\n" + text + "step 2\n").encode())
    assert all(v.encode() not in logged for v in lines) and logged.endswith(b"  host: db.invalid\nstep 2\n")
    ordinary = "loss_mask: |\n  uses the response tokens only\n"
    assert Redactor().redact_text(ordinary) == ordinary


def test_aws_secret_key_only_next_to_its_key_id() -> None:
    """A key id anywhere in a text masked every 40-character token of it, git SHAs included."""
    sha = "3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39"
    secret = rand(40, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+")
    text = f"# pinned miles at {sha}\nexport AWS_ACCESS_KEY_ID={TOK['aws-id']}\nexport AWS_SECRET={secret}\n\n\necho built {sha}\n"
    out = Redactor().redact_text(text)
    assert secret not in out and TOK["aws-id"] not in out
    assert out.count(sha) == 2


def test_known_values_in_other_encodings_and_wrapped() -> None:
    import base64
    import json

    value = "kv-" + rand(29)
    r = Redactor(known=[value])
    forms = [value.encode().hex(), value.encode().hex().upper()]
    forms += [base64.b64encode((pad + json.dumps({"token": value})).encode()).decode() for pad in ("", "a", "ab")]
    out = r.redact_lines(("\n".join(f"printed {f} here" for f in forms) + "\n").encode())
    assert out.count(b"***") >= len(forms) and value.encode().hex().encode() not in out
    for pad in ("", "a", "ab"):  # the middle of each base64 form is gone
        b64 = base64.b64encode((pad + json.dumps({"token": value})).encode())
        assert b64[8:-8] not in out
    utf16 = f"echo {value}\n".encode("utf-16-le")
    assert value.encode("utf-16-le") not in r.redact_lines(utf16)
    wrapped = f"key begins {value[:15]}\n{value[15:]} and ends\n"
    clean = r.redact_text(wrapped)
    assert value[:15] not in clean and value[15:] not in clean and clean.count("\n") == 2


def test_suffixed_names_are_secret_names() -> None:
    from ledger.redact.names import is_secret_name

    for name in ("OPENAI_API_KEY_2", "STRIPE_KEY_LIVE", "API Key", "db_password_old", "HF_TOKEN_1"):
        assert is_secret_name(name), name
    for name in ("max_tokens_2", "reward_key_2", "PWD_1"):
        assert not is_secret_name(name), name


def test_dirty_file_encodings_and_binaries() -> None:
    from ledger.redact.runscrub import scrub_code_file, text_encoding

    r = Redactor()
    for codec in ("utf-16", "utf-16-le", "utf-32", "utf-32-be"):
        data = f"key: {TOK['hf']}\nlr: 1\n".encode(codec)
        acc = Redactions()
        clean = scrub_code_file(r, data, acc)
        assert clean is not None and text_encoding(data) is not None, codec
        assert TOK["hf"] not in clean.decode(text_encoding(data)[0]) and "lr: 1" in clean.decode(text_encoding(data)[0])
    binary = bytes(range(256)) * 8
    assert scrub_code_file(r, binary, Redactions()) == binary  # no secret shape: stored as it is
    assert scrub_code_file(r, binary + TOK["ghp"].encode() + b"\0", Redactions()) is None
    assert scrub_code_file(r, binary + TOK["ghp"].encode("utf-16-le"), Redactions()) is None


def test_secrets_doc_is_generated_from_what_the_code_covers() -> None:
    """docs/secrets.md is `tools/secrets_doc.py`'s `render()`: regenerate with `make docs`."""
    import secrets_doc as secretdoc

    assert secretdoc.syntax_examples_hidden() == []  # every syntax listed is really hidden
    page = secretdoc.render()
    assert "Stripe Access Key" in page and "`vault-token` (not in the catalogue)" in page
    assert secretdoc.PATH.read_text(encoding="utf-8") == page


def test_ray_runtime_env_values_with_round_two_shapes() -> None:
    """The runtime-env JSON's env_vars go through `redact_env`: provider shapes under any name."""
    from ledger.redact.apply import redact_env

    prov = provider_tokens()
    env = {
        "DATABRICKS_HOST": "https://dbc.invalid",
        "DB_CONN": f"token={prov['databricks']}",
        "HOOK": prov["slack-webhook"],
        "OPENAI_API_KEY_2": "plainvalue12345",
        "NCCL_ALGO": "Ring",
    }
    out, names = redact_env(env)
    assert out["DATABRICKS_HOST"] == "https://dbc.invalid" and out["NCCL_ALGO"] == "Ring"
    assert prov["databricks"] not in out["DB_CONN"] and prov["slack-webhook"] not in out["HOOK"]
    assert out["OPENAI_API_KEY_2"] == "***" and "OPENAI_API_KEY_2" in names


def _every_rule_pattern() -> list[tuple[str, rules.Rx]]:
    out: list[tuple[str, rules.Rx]] = []
    for name, value in vars(rules).items():
        if isinstance(value, rules.Rx):
            out.append((name, value))
        elif isinstance(value, tuple):
            out += [(name, v) for v in value if isinstance(v, rules.Rx)]
            out += [(f"{name} {v[0]}", v[1]) for v in value if isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], rules.Rx)]
    return out


def test_each_rule_gate_is_a_literal_every_match_holds() -> None:
    """A rule runs only where its `needs` literal is: the literal must be part of the pattern's
    own top-level literal run, in a case-sensitive pattern, or the gate would skip a secret."""
    gated = [(name, rx) for name, rx in _every_rule_pattern() if rx.needs]
    assert len(gated) >= 25
    for name, rx in gated:
        assert re.compile(rx.source).flags & re.IGNORECASE == 0, name
        assert rx.needs in required_literal(rx.source, False), name


def test_lazy_rules_find_what_the_eagerly_compiled_patterns_find() -> None:
    """The lazily compiled, gated rules match exactly what each regex compiled and run on its own
    matches, over the whole corpus and ordinary Miles lines (so every redaction is the same)."""
    texts = [line.encode() for line, _ in CORPUS] + [line.encode() for line in ORDINARY + ORDINARY_ROUND_TWO]
    texts.append(b"\n".join(texts))
    for name, rx in _every_rule_pattern():
        eager = re.compile(rx.source)
        for text in texts:
            assert [m.span() for m in rx.finditer(text)] == [m.span() for m in eager.finditer(text)], name
            found, want = rx.search(text, 3), eager.search(text, 3)
            assert (found and found.span()) == (want and want.span()), name


def test_importing_the_rules_compiles_none_of_them() -> None:
    code = (
        "from ledger.redact import rules\n"
        "rxs = [v for v in vars(rules).values() if isinstance(v, rules.Rx)]\n"
        "rxs += [x for v in vars(rules).values() if isinstance(v, tuple) for x in v if isinstance(x, rules.Rx)]\n"
        "rxs += [x[1] for v in vars(rules).values() if isinstance(v, tuple) for x in v if isinstance(x, tuple) and isinstance(x[-1], rules.Rx)]\n"
        "print(len(rxs), sum(r._rx is not None for r in rxs))\n"
    )
    count, compiled = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert int(count) >= 45 and compiled == "0"
