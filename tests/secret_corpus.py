"""Planted secrets for the redaction tests, built at run time (no live-looking token is committed).

Shapes follow the issuers' public descriptions: Hugging Face user access tokens (``hf_`` + 34
letters/digits), OpenAI keys (``sk-`` / ``sk-proj-``), Anthropic keys (``sk-ant-api03-``), GitHub
tokens (``ghp_``/``gho_``/``ghs_``/``ghu_``/``ghr_`` + 36, fine-grained ``github_pat_`` + 22 + ``_``
+ 59), GitLab personal access tokens (``glpat-`` + 20), Slack tokens (``xoxb-``/``xoxp-``/``xoxa-``/
``xoxr-``), AWS access key ids (``AKIA``/``ASIA`` + 16) with their 40-character secret keys, Google
API keys (``AIza`` + 35), JWTs (three base64url parts, the first a JSON header), RFC 7617 Basic
credentials, RFC 6750 bearer tokens, RFC 3986 userinfo in URLs, and PEM (RFC 7468) / OpenSSH
private key blocks. Each line below is (text, the secret that must not survive).
"""

from __future__ import annotations

import base64
import json
import random
import string
import urllib.parse

_RNG = random.Random(20261201)
ALNUM = string.ascii_letters + string.digits


def rand(n: int, alphabet: str = ALNUM) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(n))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def tokens() -> dict[str, str]:
    """One value per token shape (built from parts)."""
    jwt = ".".join(
        [
            b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()),
            b64url(json.dumps({"sub": rand(8), "iat": 1764547200}).encode()),
            b64url(rand(32).encode()),
        ]
    )
    return {
        "hf": "hf" + "_" + rand(34),
        "openai": "sk" + "-" + rand(20) + "T3Blbk" + "FJ" + rand(20),
        "openai-proj": "sk" + "-proj-" + rand(60, ALNUM + "_-") + "1",
        "anthropic": "sk" + "-ant-api03-" + rand(90, ALNUM + "_-") + "AA",
        "ghp": "gh" + "p_" + rand(36),
        "gho": "gh" + "o_" + rand(36),
        "ghs": "gh" + "s_" + rand(36),
        "ghu": "gh" + "u_" + rand(36),
        "ghr": "gh" + "r_" + rand(36),
        "github-pat": "github" + "_pat_" + rand(22) + "_" + rand(59),
        "gitlab": "gl" + "pat-" + rand(20),
        "slack-b": "xo" + "xb-" + rand(12, string.digits) + "-" + rand(13, string.digits) + "-" + rand(24),
        "slack-p": "xo" + "xp-" + rand(12, string.digits) + "-" + rand(24),
        "slack-a": "xo" + "xa-2-" + rand(12, string.digits) + "-" + rand(24),
        "slack-r": "xo" + "xr-" + rand(12, string.digits) + "-" + rand(24),
        "aws-id": "AK" + "IA" + rand(16, string.ascii_uppercase + string.digits),
        "aws-sts": "AS" + "IA" + rand(16, string.ascii_uppercase + string.digits),
        "google": "AI" + "za" + rand(35, ALNUM + "_-"),
        "jwt": jwt,
    }


def pem_block(kind: str = "RSA PRIVATE KEY", lines: int = 6) -> list[str]:
    body = [rand(64, ALNUM + "+/") for _ in range(lines)]
    return [f"-----BEGIN {kind}-----", *body, f"-----END {kind}-----"]


def shape_lines(tok: dict[str, str]) -> list[tuple[str, str]]:
    """Token shapes in ordinary log sentences (no secret-looking name next to them)."""
    aws_secret = rand(40, ALNUM + "/+")
    user, password = "trainer", rand(14)
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    bearer = rand(40, ALNUM + "._-")
    url_pw = rand(16)
    out = [(f"[2026-11-29 10:00:00] loaded {v} from cache", v) for v in tok.values()]
    out += [
        (f"aws configured with {tok['aws-id']} {aws_secret} in us-east-1", aws_secret),
        (f"requests: headers={{'Authorization': 'Basic {basic}'}}", basic),
        (f"curl -H 'Authorization: Bearer {bearer}' https://127.0.0.1/api", bearer),
        (f"HTTPError 401 for https://ci-bot:{url_pw}@git.example.invalid/r.git", url_pw),
        (f"cloning https://{tok['ghp']}@github.invalid/org/repo.git", tok["ghp"]),
        (f"pushing to git+https://oauth2:{url_pw}x@gitlab.invalid/x", url_pw + "x"),
    ]
    # an opaque bearer token needs no digit (RFC 6750 b64token); GitHub's REST API also takes
    # `Authorization: token X`: after an Authorization header name any value is a credential
    letters = [rand(32, string.ascii_letters) for _ in range(2)]
    out += [
        (f"requests: headers={{'Authorization': 'Bearer {letters[0]}', 'Accept': '*/*'}}", letters[0]),
        (f"> Authorization: token {letters[1]}", letters[1]),
    ]
    return out


def named_lines() -> list[tuple[str, str]]:
    """Secret-named values in every syntax the issue lists (values with no token shape)."""
    v = [rand(24, string.ascii_lowercase + string.digits) for _ in range(16)]
    return [
        (f"export WANDB_API_KEY={v[0]}", v[0]),
        (f"python3 train.py --hub-token {v[1]} --lr 1e-6", v[1]),
        (f"python3 train.py --wandb-key={v[2]} --seed 1", v[2]),
        (f'config {{"hf_token": "{v[3]}", "lr": 1e-06}}', v[3]),
        (f"  db_password: {v[4]}", v[4]),
        (f"Namespace(lr=1e-06, wandb_key='{v[5]}', password='{v[6]}', seed=1)", v[5] + " " + v[6]),
        (f"  wandb_key ....................................... {v[7]}", v[7]),
        (f"args: {{'api_key': '{v[8]}', 'kl_coef': 0.1}}", v[8]),
        (f"MYSQL_PWD={v[9]} CLIENT_SECRET_FILE={v[10]}", v[9] + " " + v[10]),
        (f'settings={{\\"GITHUB_TOKEN\\": \\"{v[11]}\\"}}', v[11]),
        (f"['--openai-api-key', '{v[12]}', '--lr', '1']", v[12]),
        (f"aws_secret_access_key = {v[13]}", v[13]),
        (f'private_key_passphrase: "{v[14]}"', v[14]),
        (f"AUTH_TOKEN='{v[15]}'", v[15]),
    ]


def prefixed_lines() -> list[tuple[str, str]]:
    """Secret-named values behind what a real log puts before them or around them: a logger prefix
    (`logging`'s ``INFO:``, wandb's ``wandb:``) that itself reads as ``name: value``, Python bytes
    values in reprs (``b'...'``), and ``print("token=", value)`` (a space after the ``=``)."""
    v = [rand(24, string.ascii_lowercase + string.digits) for _ in range(6)]
    return [
        (f"INFO: password: {v[0]}", v[0]),
        (f"wandb: api_key: {v[1]}", v[1]),
        (f"config {{'api_key': b'{v[2]}', 'lr': 1e-06}}", v[2]),
        (f"Namespace(hub_token=b'{v[3]}', seed=1)", v[3]),
        (f"token= {v[4]}", v[4]),
        (f"[rank0]: db: password = {v[5]}", v[5]),
    ]


def escaped_forms(value: str) -> list[str]:
    """How a job prints a value it was given: repr, JSON, URL-encoded, base64."""
    return [repr(value)[1:-1], json.dumps(value)[1:-1], urllib.parse.quote(value, safe=""), base64.b64encode(value.encode()).decode()]


# Ordinary Miles-shaped lines that must pass untouched (shapes from /work/shared/miles-facts.md and
# Miles' own logging: Ray actor prefixes, SGLang decode lines, metric dicts, Megatron's arg dump).
ORDINARY = [
    "(SGLangEngine pid=4242) [2026-11-29 00:00:00 TP0] Decode batch. #running-req: 32, #token: 01234, "
    "token usage: 0.05, gen throughput (token/s): 1234.5, #queue-req: 0",
    "(SGLangEngine pid=4242, ip=10.0.0.2) [2026-11-29 00:00:00 TP0] Prefill batch. #new-seq: 4, #new-token: 2048, "
    "#cached-token: 512, token usage: 0.10, #running-req: 28, #queue-req: 0",
    "(RolloutManager pid=1) [2026-11-29 00:00:01 RolloutManager] rollout.py:1193 - perf 3: "
    "{'perf/rollout_time': 12.5, 'rollout/response_len/mean': 1843.2, 'rollout/reward': 0.41}",
    "[2026-11-29 00:00:02 main] train.py:310 - step 3: {'train/loss': -0.0123, 'train/grad_norm': 0.87, "
    "'train/kl_loss': 0.0012, 'perf/train_time': 3.0}",
    " [2026-11-29 00:00:02] iteration        3/     100 | consumed samples:          384 | "
    "elapsed time per iteration (ms): 3012.4 | learning rate: 1.000000E-06 | lm loss: 1.234567E+00 |",
    "  tokenizer_type .................................. HuggingFaceTokenizer",
    "  max_tokens_to_oom ............................... 12000",
    "  use_flash_attn .................................. True",
    "  kv_channels ..................................... 128",
    "loading checkpoint from /root/models/Qwen3-4B/model-00001-of-00003.safetensors",
    "code commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39 (dirty), megatron 0123456789abcdef0123456789abcdef01234567",
    "request 7c9e6679-7425-40de-944b-e07fc1f90ae7 finished; trace id 4bf92f3577b34da6a3ce929d0e0e4736",
    "sample id ZXhhbXBsZS1zYW1wbGUtaWQtMDAwMQ rollout_id 12, data /tmp/rollout/12.pt",
    "--input-key prompt --label-key label --rm-type deepscaler --max-tokens 4096 --rollout-max-response-len 8192",
    "python3 train.py --use-kl-loss --kl-coef 0.00 --pad-token '<|endoftext|>' --tokenizer-path /root/Qwen3-4B",
    "Started a local Ray instance. View the dashboard at http://127.0.0.1:8265",
    'ray job submit --address=http://127.0.0.1:8265 --runtime-env-json=\'{"env_vars": {"NCCL_ALGO": "Ring"}}\'',
    "sglang ServerArgs(model_path='/root/Qwen3-4B', tp_size=2, mem_fraction_static=0.7, api_key=None, max_tokens=12)",
    "wandb: Syncing run grpo-qwen3-4b; view at https://wandb.invalid/team/proj/runs/a1b2c3d4",
    "PWD=/root/miles OLDPWD=/root HOME=/root PATH=/usr/local/bin:/usr/bin",
    "task-abcdefghij0123456789xyz skipped; cache_hit_tokens: 384; num_tokens=4096; max_new_tokens: 1024",
    "use_auth=True num_keys: 12 key_count=3 reward_key: score",
    "Basic block allocator initialised; bearer of bad news: none",
    "wandb: Currently logged in as: team-bot (use `wandb login --relogin` to force relogin)",
    "INFO: Authorization: granted for user trainer; token usage: 0.05",
]
