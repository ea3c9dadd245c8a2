"""The Redactor on the planted-secret corpus: every shape and syntax hidden, ordinary lines kept,
the trigger scan a superset of the rules (both engines), PEM blocks line by line, long lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from secret_corpus import ORDINARY, escaped_forms, named_lines, pem_block, prefixed_lines, rand, shape_lines, tokens

from ledger.redact import scanner
from ledger.redact.names import Redactions
from ledger.redact.scanner import OVERLAP, WINDOW, Redactor, _Engine, trigger_patterns

TOK = tokens()
CORPUS = shape_lines(TOK) + named_lines() + prefixed_lines()


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
        monkeypatch.setattr(scanner, "_Engine", lambda patterns: _forced_re(patterns))
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
    text = ("\n".join(ORDINARY) + "\n").encode() * 50
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
    from ledger.config import DEFAULT_TEXT as text

    acc = Redactions()
    assert Redactor().redact_text(text, acc) == text and not acc
    assert Redactor().redact_text("secrets: {api_key: abcdef123456}\n") == "secrets: {api_key: ***}\n"
