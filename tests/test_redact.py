"""Secret redaction in argv, environments, text and log lines."""

from __future__ import annotations

import pytest

from ledger.redact.apply import redact_argv, redact_env, redact_line, redact_text
from ledger.redact.names import Redactions, is_secret_name

HF = "hf_" + "a1B2c3D4e5" * 4
GHP = "ghp_" + "Z9y8X7w6V5" * 4


@pytest.mark.parametrize(
    "name",
    ["WANDB_API_KEY", "HF_TOKEN", "--wandb-key", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN",
     "--hub-token", "DB_PASSWORD", "--sglang-api-key", "apiKey", "client_secret_file", "DB_PASS"],
)  # fmt: skip
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["--max-tokens", "--tokenizer-path", "--kl-key-x", "--kl-coef", "--use-kl-loss", "--tokenizer",
     "--input-key", "--label-key", "--multimodal-keys", "--pad-token", "PWD", "PATH", "--keep-old"],
)  # fmt: skip
def test_ordinary_names(name: str) -> None:
    assert not is_secret_name(name)


def test_argv_flag_forms() -> None:
    argv = ["python3", "train.py", "--wandb-key", "abc123", "--hub-token=xyz", "--lr", "1e-6",
            "--max-tokens", "512", "--input-key", "prompt", "--kl-coef", "0.1"]  # fmt: skip
    out, names = redact_argv(argv)
    assert out == ["python3", "train.py", "--wandb-key", "***", "--hub-token=***", "--lr", "1e-6",
                   "--max-tokens", "512", "--input-key", "prompt", "--kl-coef", "0.1"]  # fmt: skip
    assert names == ["hub-token", "wandb-key"]


def test_argv_json_env_and_assignments() -> None:
    argv = ["ray", "job", "submit", '--runtime-env-json={"env_vars": {"HF_TOKEN": "s3cr3t"}}',
            "-e", "WANDB_API_KEY=k", "--", "python3", "train.py"]  # fmt: skip
    out, names = redact_argv(argv)
    assert out[3] == '--runtime-env-json={"env_vars": {"HF_TOKEN": "***"}}'
    assert out[5] == "WANDB_API_KEY=***"
    assert "s3cr3t" not in " ".join(out)
    assert names == ["HF_TOKEN", "WANDB_API_KEY"]


def test_numeric_token_counts_are_kept() -> None:
    out, names = redact_argv(["--max-new-token", "100", "--rollout-max-token", "4096"])
    assert out == ["--max-new-token", "100", "--rollout-max-token", "4096"]
    assert names == []


def test_env() -> None:
    env = {"HF_TOKEN": HF, "PATH": "/usr/bin", "REPO": "https://u:pw@example.com/x.git",
           "CUDA_DEVICE_MAX_CONNECTIONS": "1", "EMPTY_TOKEN": ""}  # fmt: skip
    out, names = redact_env(env)
    assert out == {"HF_TOKEN": "***", "PATH": "/usr/bin", "REPO": "https://u:***@example.com/x.git",
                   "CUDA_DEVICE_MAX_CONNECTIONS": "1", "EMPTY_TOKEN": ""}  # fmt: skip
    assert names == ["HF_TOKEN", "pattern:url-credentials"]


def test_text_launcher_script() -> None:
    script = (
        "set -ex\n"
        "export WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567\n"
        "HF_TOKEN=\"tok\" DB_PASSWORD='hunter2'\n"
        "ARGS=(--wandb-key $WANDB_API_KEY --kl-coef 0.1)\n"
        "python3 train.py --hub-token 'abc' --seed 1 \\\n  --sglang-api-key \\\n  zzz --lr 1\n"
    )
    out, names = redact_text(script)
    assert out == (
        "set -ex\n"
        "export WANDB_API_KEY=***\n"
        "HF_TOKEN=\"***\" DB_PASSWORD='***'\n"
        "ARGS=(--wandb-key *** --kl-coef 0.1)\n"
        "python3 train.py --hub-token '***' --seed 1 \\\n  --sglang-api-key \\\n  *** --lr 1\n"
    )
    assert names == ["DB_PASSWORD", "HF_TOKEN", "WANDB_API_KEY", "hub-token",
                     "sglang-api-key", "wandb-key"]  # fmt: skip


@pytest.mark.parametrize(
    ("secret", "kind"),
    [
        (HF, "hf-token"),
        (GHP, "github-token"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github-token"),
        ("sk-proj-abcDEF0123456789ghijklmnop", "sk-key"),
        ("sk-ant-api03-abcdefghijklmnop0123456789", "sk-key"),
        ("AKIAIOSFODNN7EXAMPLE", "aws-access-key-id"),
        ("ASIAIOSFODNN7EXAMPLE", "aws-access-key-id"),
        ("xoxb-123456789012-abcdefghijkl", "slack-token"),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig_nature-x", "jwt"),
    ],
)
def test_token_shapes_anywhere(secret: str, kind: str) -> None:
    out, names = redact_text(f"loaded credential-free value {secret} at startup")
    assert out == "loaded credential-free value *** at startup"
    assert names == [f"pattern:{kind}"]


def test_url_credentials_and_bearer() -> None:
    out, names = redact_text("git clone https://oauth2:abc@host/r.git; curl -H 'Authorization: Bearer abcdef123456'")
    assert out == "git clone https://oauth2:***@host/r.git; curl -H 'Authorization: Bearer ***'"
    assert names == ["pattern:bearer-token", "pattern:url-credentials"]


def test_printed_argv_list_and_escaped_json() -> None:
    out, _ = redact_text("args=['--wandb-key', 'k1', '--lr', '1'] env={\\\"HF_TOKEN\\\": \\\"t\\\"}")
    assert out == "args=['--wandb-key', '***', '--lr', '1'] env={\\\"HF_TOKEN\\\": \\\"***\\\"}"


@pytest.mark.parametrize(
    "text",
    [
        "python3 train.py --kl-coef 0.1 --use-kl-loss --max-tokens 512 --tokenizer-path /m/tok",
        "--tokenizer-type HF --input-key prompt --label-key label --pad-token '<pad>' --kl-key-a 3",
        (
            "(SGLangEngine pid=12, ip=10.0.0.2) Decode batch. #running-req: 1, #token: 1234, "
            "token usage: 0.01, gen throughput (token/s): 12.3"
        ),
        "ServerArgs(api_key=None, tokenizer_path='x', max_tokens=12) PWD=/root",
        "git commit 0123456789abcdef0123456789abcdef01234567 task-abcdefghij0123456789xyz",
        "(RolloutManager pid=1) [2026-04-15 07:57:53] rollout.py:1193 - perf 0: {'perf/rollout_time': 3.1}",
    ],
)
def test_no_false_positives(text: str) -> None:
    assert redact_text(text) == (text, [])


def test_redact_line_bytes_keep_invalid_utf8() -> None:
    acc = Redactions()
    line = b"\xff\xfe junk HF_TOKEN=abc " + HF.encode() + b"\n"
    assert redact_line(line, acc) == b"\xff\xfe junk HF_TOKEN=*** ***\n"
    assert acc.as_list() == ["HF_TOKEN", "pattern:hf-token"]
    assert acc.to_dict() == {"names": ["HF_TOKEN"], "patterns": ["hf-token"]}
    clean = b"\xff plain line\n"
    assert redact_line(clean) is clean


def test_redactions_merge() -> None:
    acc = Redactions()
    acc.update(["wandb-key", "pattern:jwt"])
    acc.add_name("--hub-token")
    assert acc.as_list() == ["hub-token", "wandb-key", "pattern:jwt"]
    assert bool(acc) and not Redactions()


def test_megatron_argument_dump() -> None:
    text = "  wandb_key ....................... 0123abc\n  kl_coef ......................... 0.1\n"
    out, names = redact_text(text)
    assert out == "  wandb_key ....................... ***\n  kl_coef ......................... 0.1\n"
    assert names == ["wandb_key"]
