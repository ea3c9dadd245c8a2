"""What ledger writes about a secret (a setting's name, a manifest key, a `redacted` entry) never holds
the secret: issue 31 found a PGP private key of 400+ bytes, given as a flag's value, written as a
setting's name and in `redacted:` (the argv reader took `-----BEGIN` for a flag, and the text before
the armour's `=` checksum for a `--name=value` name)."""

from __future__ import annotations

from secret_corpus import rand, round_three_tokens

from ledger.redact.apply import redact_argv
from ledger.redact.names import HIDDEN_LABEL, Redactions
from ledger.redact.runscrub import scrub_record
from ledger.redact.scanner import Redactor
from ledger.runrecord import RunRecord
from ledger.understand.settings import is_flag, parse_settings


def pgp_key() -> str:
    """An ASCII-armoured private key as `gpg --armor --export-secret-keys` prints it (RFC 4880:
    armour header, blank line, base64 lines of 64, `=` + CRC-24 checksum, armour tail)."""
    body = "\n".join(rand(64, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") for _ in range(7))
    return f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{body}\n={rand(4)}\n-----END PGP PRIVATE KEY BLOCK-----"


def _lines(key: str) -> list[str]:
    return [line for line in key.splitlines() if len(line) >= 6]


def test_a_key_given_as_a_flag_value_is_a_value() -> None:
    key = pgp_key()
    argv = ["python3", "train.py", "--signing-key", key, "--lr", "1", f"--gpg={key}"]
    out, names = redact_argv(argv)
    assert out[:6] == ["python3", "train.py", "--signing-key", "***", "--lr", "1"]
    assert not any(line in " ".join(out + names) for line in _lines(key))
    assert "signing-key" in names
    assert not is_flag(key) and is_flag("--lr") and is_flag("-x") and not is_flag("-1e-5")
    assert set(parse_settings(["--signing-key", key, "--lr", "1"])) == {"signing-key", "lr"}


def test_no_name_recorded_holds_secret_text() -> None:
    key = pgp_key()
    acc = Redactions()
    acc.add_name(key.lstrip("-"))
    acc.add_name("--hub-token")
    assert acc.as_list() == [HIDDEN_LABEL, "hub-token"]


def test_manifest_keys_and_redacted_entries_are_labels() -> None:
    key, tok = pgp_key(), round_three_tokens()
    known = "kv-" + rand(20)
    m = {
        "settings": {key.lstrip("-"): True, f"env.{tok['linear']}": "1", "lr": 1, known: "x", "x" * 300: "long"},
        "command": {"argv": ["train.py", f"--{tok['groq']}=1"]},
        "redacted": [f"argv: {key.lstrip('-')}", f"code/{tok['doppler']}/config.yaml: api_key", "code/secrets.yaml: api_key"],
    }
    record = scrub_record(RunRecord.partial(m), [known], [])
    text = repr(record.to_dict())
    assert not any(line in text for line in _lines(key))
    assert not any(v in text for v in (tok["linear"], tok["groq"], tok["doppler"], known))
    assert record.settings["lr"] == 1 and len(record.settings) == 5  # hidden keys stay apart
    assert "code/secrets.yaml: api_key" in record.redacted  # a name that only reads as secret is kept
    assert "manifest: pattern:secret-in-a-name" in record.redacted
    assert f"argv: {HIDDEN_LABEL}" in record.redacted and "code/***/config.yaml: api_key" in record.redacted


def test_a_label_is_kept_when_it_is_a_name() -> None:
    r = Redactor(known=["some-known-value"])
    for name in ("lr", "env.WANDB_API_KEY", "API Key", "code/configs/secrets.yaml", "pattern:gitleaks:generic-api-key"):
        assert r.redact_label(name) == name
