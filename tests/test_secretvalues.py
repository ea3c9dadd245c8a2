"""Known secret values are scrubbed from logs the job wrote in any format."""

from __future__ import annotations

import base64
import json
import urllib.parse
from pathlib import Path

from ledger.redact.scanner import BLOCK, Redactor
from ledger.redact.values import known_secrets, removed_values
from ledger.redact.variants import variants


def test_removed_values() -> None:
    assert removed_values("--wandb-key=abcdef123", "--wandb-key=***") == ["abcdef123"]
    assert removed_values("https://u:pw123456@h/x", "https://u:***@h/x") == ["pw123456"]
    assert removed_values("a", "a") == []


def test_known_secrets_from_argv_env_and_text() -> None:
    argv = ["python3", "train.py", "--wandb-key", "0123456789abcdef", "--lr", "1e-6", "--max-tokens", "4096"]
    env = {"HF_TOKEN": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "PATH": "/usr/bin", "SHORT_TOKEN": "abc"}
    found = known_secrets(argv, env, ["export GITHUB_TOKEN=ghp_ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210\n"])
    assert found == {"0123456789abcdef", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "ghp_ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210"}


def test_known_value_across_block_boundaries(tmp_path: Path) -> None:
    secret = "s3cr3t-value-0123456789"
    path = tmp_path / "trainer.log"
    # the secret straddles the first block boundary, and appears again at the very end
    filler = b"x" * (BLOCK - 5)
    path.write_bytes(filler + secret.encode() + b"\nargs: {'key': '" + secret.encode() + b"'}\n" + secret.encode())
    assert Redactor([secret], rules_on=False).redact_file(path) is True
    data = path.read_bytes()
    assert secret.encode() not in data and data.count(b"***") == 3 and data.startswith(filler[:1000])
    assert data.count(b"\n") == 2
    assert Redactor([secret], rules_on=False).redact_file(path) is False  # nothing left to find


def test_variants_cover_escaped_forms() -> None:
    value = 'pa$$ word/"q"\nsecond-line-xyz'
    forms = variants(value)
    assert json.dumps(value)[1:-1].encode() in forms
    assert repr(value)[1:-1].encode() in forms
    assert urllib.parse.quote(value, safe="").encode() in forms
    assert base64.b64encode(value.encode()).rstrip(b"=") in forms
    assert b"second-line-xyz" in forms  # each line of a multi-line value
    assert all(len(f) >= 6 for f in forms)


def test_url_credentials_give_user_password_pair() -> None:
    found = known_secrets([], {"REPO": "https://alice:wonderland99@127.0.0.1/x.git"})
    assert found == {"wonderland99", "alice:wonderland99"}
