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
import functools
import importlib
import json
import random
import string
import sys
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


BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
HEX = "0123456789abcdef"


def provider_tokens() -> dict[str, str]:
    """The provider shapes of round two, from each issuer's public description of its format
    (Stripe secret/restricted keys, npm granular tokens, PyPI macaroons, Azure SAS signatures,
    SendGrid keys, Google OAuth access tokens, AWS STS session tokens, Vault service tokens,
    Databricks PATs, age identities, Slack webhooks and app tokens, Docker Hub PATs, Shopify and
    DigitalOcean tokens, Telegram bot tokens, Grafana service-account tokens, W&B keys)."""
    b64 = ALNUM + "+/"
    return {
        "stripe-live": "sk" + "_live_" + rand(24),
        "stripe-live-long": "sk" + "_live_" + rand(99),
        "stripe-restricted": "rk" + "_live_" + rand(24),
        "npm": "np" + "m_" + rand(36),
        "pypi": "pypi-" + "AgEIcHlwaS5vcmc" + rand(120, ALNUM + "-_"),
        "azure-sas": "https://acct.blob.core.windows.net/c/f?sv=2022-11-02&ss=b&sp=r&se=2026-12-01&sig="
        + urllib.parse.quote(base64.b64encode(bytes(_RNG.randrange(256) for _ in range(32))).decode(), safe=""),
        "sendgrid": "SG" + "." + rand(22, ALNUM + "_-") + "." + rand(43, ALNUM + "_-"),
        "google-oauth": "ya" + "29." + rand(150, ALNUM + "_-"),
        "aws-session": "IQoJb3JpZ2lu" + "X2Vj" + rand(300, b64),
        "aws-session-old": "FwoGZXIvYXdz" + "E" + rand(250, b64),
        "vault": "hv" + "s." + rand(90, ALNUM + "_-"),
        "databricks": "da" + "pi" + rand(32, HEX),
        "age": "AGE-SECRET-KEY-" + "1" + rand(58, BECH32),
        "slack-webhook": "https://hooks.slack.com/services/T"
        + rand(10, string.ascii_uppercase + string.digits)
        + "/B"
        + rand(10, string.ascii_uppercase + string.digits)
        + "/"
        + rand(24),
        "dockerhub": "dckr" + "_pat_" + rand(27, ALNUM + "_-"),
        "shopify": "sh" + "pat_" + rand(32, HEX),
        "digitalocean": "do" + "p_v1_" + rand(64, HEX),
        "slack-app": "xa"
        + "pp-1-A"
        + rand(10, string.ascii_uppercase + string.digits)
        + "-"
        + rand(13, string.digits)
        + "-"
        + rand(64, HEX),
        "telegram": rand(10, string.digits) + ":AA" + rand(33, ALNUM + "_-"),
        "grafana": "gl" + "sa_" + rand(32) + "_" + rand(8, HEX),
    }


def provider_lines(tok: dict[str, str]) -> list[tuple[str, str]]:
    """Provider shapes in ordinary sentences, and a W&B key as `wandb login` is traced."""
    wandb_key = rand(40, HEX)
    out = [(f"[2026-11-29 10:00:00] using {v} for upload", v) for v in tok.values()]
    out += [(f"+ wandb login --relogin {wandb_key}", wandb_key)]
    sas_sig = tok["azure-sas"].split("sig=", 1)[1]
    return [(line, sas_sig if "sig=" in line else s) for line, s in out]


def syntax_lines() -> list[tuple[str, str]]:
    """Round two's syntaxes (values with no token shape)."""
    v = [rand(20, string.ascii_lowercase + string.digits) for _ in range(20)]
    return [
        (f"<password>{v[0]}</password>", v[0]),
        (f'"api_key" => "{v[1]}"', v[1]),
        (f'dbPassword := "{v[2]}"', v[2]),
        (f"secret -> {v[3]}", v[3]),
        (f"machine api.wandb.invalid login user password {v[4]}", v[4]),
        (f"+ docker login -u bot -p {v[5]} registry.invalid", v[5]),
        (f"+ mysql -h db -uroot -p{v[6]} miles", v[6]),
        (f"+ curl -s -u trainer:{v[7]} https://127.0.0.1/api", v[7]),
        (f"+ sshpass -p {v[8]} ssh node1", v[8]),
        (f"> Cookie: session={v[9]}; csrftoken={v[10]}", v[9] + " " + v[10]),
        (f"GET /cb?next=%2Fhome%3Fpassword%3D{v[11]}%26x%3D1", v[11]),
        (f"redirect=https%3A%2F%2Fbot%3A{v[12]}%40git.invalid%2Fr", v[12]),
        (f"OPENAI_API_KEY_2={v[13]}", v[13]),
        (f"STRIPE_KEY_LIVE={v[14]}", v[14]),
        (f'{{"API Key": "{v[15]}"}}', v[15]),
        (f"+ python3 train.py --password 'ab'\\''{v[16]}'", v[16]),
        (f"\x1b[36mapi_key\x1b[0m={v[17]}", v[17]),
        (f"Authorization: \x1b[33mBearer {v[18]}x1\x1b[0m", v[18] + "x1"),
        (f"  password = {v[19]}", v[19]),
    ]


def ansi_lines(tok: dict[str, str]) -> list[tuple[str, str]]:
    """Token shapes behind colour codes (the rules anchor on word boundaries; SGR ends in `m`)."""
    hf = tok["hf"]
    return [(f"\x1b[33m{hf}\x1b[0m loaded", hf), (f"\x1b[1;31mERROR\x1b[0m key \x1b[33m{tok['ghp']}\x1b[0m", tok["ghp"])]


def yaml_block(name: str = "password", style: str = "|") -> tuple[str, list[str]]:
    """A YAML block scalar under a secret name, and its value's lines."""
    lines = [rand(24) for _ in range(2)]
    return f"db:\n  {name}: {style}\n" + "".join(f"    {ln}\n" for ln in lines) + "  host: db.invalid\n", lines


# Ordinary lines close to the new rule families, which must pass untouched.
ORDINARY_ROUND_TWO = [
    "\x1b[36m(SGLangEngine pid=4242)\x1b[0m [2026-11-29 00:00:00 TP0] Decode batch. #running-req: 32, #token: 01234",
    "\x1b[32mINFO\x1b[0m rollout 3 done; \x1b[1mreward\x1b[0m 0.41",
    "+ docker login registry.invalid",
    "+ mysql -h db -P 3306 --protocol tcp miles < schema.sql",
    "+ curl -s http://127.0.0.1:8265/api/jobs/",
    "<reward>0.5</reward> <token_count>1024</token_count>",
    "rollout -> train -> eval; step := 3",
    "commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39 0123456789abcdef0123456789abcdef01234567",
    "loss_mask: |",
    "  uses the response tokens only",
    "sample 7c9e6679-7425-40de-944b-e07fc1f90ae7 reward_key=score num_keys_2: 3",
    "wandb: Appending key for api.wandb.invalid to your netrc file: /root/.netrc",
    # code shapes seen in Miles' own sources (written here): walrus reads, counts, mapping comments
    'if (hub_token := os.environ.get("HF_TOKEN")) is not None:',
    "kl_token_value = masked_mean(ratio, mask) - 1.0",
    "cache = {}  # key -> stacked tensor, token -> start row",
    "token_1 = (ids[0] + 1, ids[1] + 1)",
    "saved /root/ckpt/iter_0000100/mp_rank_00/model_optim_rng.pt (sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08)",
]


def round_three_tokens() -> dict[str, str]:
    """Round three's provider shapes, from each issuer's public description of its format: Linear
    API keys (``lin_api_`` + 40), Doppler personal tokens (``dp.pt.`` + 43), Sentry user and
    organisation tokens (``sntryu_`` + 64 hex; ``sntrys_`` + base64 JSON with a region URL + ``_``
    + 43), Pulumi (``pul-`` + 40 hex), Heroku (``HRKU-AA`` + 58), Atlassian API tokens (``ATATT3`` +
    186), Terraform Cloud (14 + ``.atlasv1.`` + 67), Replicate (``r8_`` + 37), Groq (``gsk_`` + 52),
    Perplexity (``pplx-`` + 48), Postman (``PMAK-`` + 24 hex ``-`` 34 hex), PlanetScale
    (``pscale_tkn_``/``pscale_pw_`` + 43), Fly.io (``fo1_`` + 43; macaroons ``fm2_`` + base64),
    Supabase (``sbp_`` + 40 hex)."""
    b64 = ALNUM + "+/"
    org = base64.b64encode(
        json.dumps({"iat": 1764547200.5, "url": "https://sentry.io", "region_url": "https://us.sentry.io", "org": "acme"}).encode()
    )
    return {
        "linear": "lin" + "_api_" + rand(40),
        "doppler": "dp" + ".pt." + rand(43),
        "sentry-user": "sntr" + "yu_" + rand(64, HEX),
        "sentry-org": "sntr" + "ys_" + org.decode().rstrip("=") + "_" + rand(43, b64),
        "pulumi": "pu" + "l-" + rand(40, HEX),
        "heroku": "HR" + "KU-AA" + rand(58, ALNUM + "_-"),
        "atlassian": "ATA" + "TT3" + rand(186, ALNUM + "_-"),
        "terraform": rand(14, string.ascii_lowercase + string.digits)
        + ".atlas"
        + "v1."
        + rand(67, string.ascii_lowercase + string.digits + "_-"),
        "replicate": "r8" + "_" + rand(37),
        "groq": "gs" + "k_" + rand(52),
        "perplexity": "pp" + "lx-" + rand(48),
        "postman": "PM" + "AK-" + rand(24, HEX) + "-" + rand(34, HEX),
        "planetscale": "pscale" + "_tkn_" + rand(43, ALNUM + "_"),
        "planetscale-pw": "pscale" + "_pw_" + rand(43, ALNUM + "_"),
        "fly": "fo" + "1_" + rand(43, ALNUM + "_-"),
        "fly-macaroon": "fm" + "2_" + rand(120, b64),
        "supabase": "sb" + "p_" + rand(40, HEX),
    }


def round_three_lines(tok: dict[str, str]) -> list[tuple[str, str]]:
    """Round three's shapes in ordinary sentences, and credentials after every Authorization
    scheme: Okta's ``SSWS`` (a token of no catalogue shape), Fly's ``FlyV1``, Digest's parameters
    (RFC 7616), AWS SigV4 and an unknown vendor scheme."""
    out = [(f"[2026-11-29 10:00:00] deploy with {v} done", v) for v in tok.values()]
    okta = "00" + rand(40, ALNUM + "_-")
    digest = rand(32, HEX)
    sig = rand(64, HEX)
    vendor = "1000." + rand(32, HEX) + "." + rand(32, HEX)
    out += [
        (f"> Authorization: SSWS {okta}", okta),
        (f"requests: headers={{'Authorization': 'SSWS {okta}x', 'Accept': '*/*'}}", okta + "x"),
        (f"> Authorization: FlyV1 {tok['fly-macaroon']}", tok["fly-macaroon"]),
        (f'> Authorization: Digest username="trainer", realm="api", nonce="{rand(24, HEX)}", uri="/v1", response="{digest}"', digest),
        (f"Authorization: AWS4-HMAC-SHA256 Credential=AKID/20261129/us-east-1/s3/aws4_request, Signature={sig}", sig),
        (f"> Authorization: Zoho-oauthtoken {vendor}", vendor),
    ]
    return out


# --- a value of every catalogue rule, generated from the rule's own regex ------------------------
# The catalogue's ~260 regexes (detect-secrets' plugins, gitleaks' default rules) are facts we carry,
# not shapes we designed; a sample is generated from each regex (sre's parse tree, printable
# characters, shortest repeats a little longer) and kept only when the rule itself finds it there,
# so a rule that cannot match anything it describes (a bad RE2 translation) fails its test.
_PRINTABLE = [chr(c) for c in range(0x21, 0x7F)] + [" "]
_SRE = importlib.import_module("re._parser" if sys.version_info >= (3, 11) else "sre_parse")
_C = importlib.import_module("re._constants" if sys.version_info >= (3, 11) else "sre_constants")
_CATEGORY = {
    "CATEGORY_DIGIT": str.isdigit,
    "CATEGORY_NOT_DIGIT": lambda c: not c.isdigit(),
    "CATEGORY_WORD": lambda c: c.isalnum() or c == "_",
    "CATEGORY_NOT_WORD": lambda c: not (c.isalnum() or c == "_"),
    "CATEGORY_SPACE": str.isspace,
    "CATEGORY_NOT_SPACE": lambda c: not c.isspace(),
}


def _in_class(items: list[tuple[object, object]], c: str) -> bool:
    negate = False
    hit = False
    for op, arg in items:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            hit |= ord(c) == arg
        elif name == "RANGE":
            lo, hi = arg  # type: ignore[misc]
            hit |= lo <= ord(c) <= hi
        elif name == "CATEGORY":
            hit |= _CATEGORY[str(arg)](c)
    return hit != negate


def _pick(chars: list[str], rng: random.Random) -> str:
    alnum = [c for c in chars if c.isalnum()]
    return rng.choice(alnum if alnum and rng.random() < 0.85 else chars)


def _generate(parsed: object, rng: random.Random, plain: bool) -> str:
    out: list[str] = []
    for op, arg in parsed:  # type: ignore[attr-defined]
        name = str(op)
        if name == "LITERAL":
            out.append(chr(arg))
        elif name == "NOT_LITERAL":
            out.append(_pick([c for c in _PRINTABLE if ord(c) != arg], rng))
        elif name == "ANY":
            out.append(_pick(_PRINTABLE[:-1], rng))
        elif name == "IN":
            out.append(_pick([c for c in _PRINTABLE if _in_class(arg, c)] or [" "], rng))
        elif name == "CATEGORY":
            out.append(_pick([c for c in _PRINTABLE if _CATEGORY[str(arg)](c)] or [" "], rng))
        elif name == "BRANCH":
            branches = arg[1]
            out.append(_generate(branches[0] if plain else rng.choice(branches), rng, plain))
        elif name in ("SUBPATTERN", "ATOMIC_GROUP"):
            out.append(_generate(arg[-1] if name == "SUBPATTERN" else arg, rng, plain))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            lo, hi, sub = arg
            hi = min(hi, lo + 40)
            n = lo if lo == hi or (lo == 0 and plain) else (min(hi, lo + 8) if plain else rng.randint(lo, hi))
            out.append("".join(_generate(sub, rng, plain) for _ in range(n)))
        # AT (anchors, boundaries), ASSERT, ASSERT_NOT, GROUPREF: nothing of their own
    return "".join(out)


def rule_sample(rule: object, tries: int = 400) -> tuple[str, str]:
    """(a log line holding a value of `rule`, the value) for a catalogue rule (`CatalogueRule`),
    found by the rule itself on that line; AssertionError when no try gives one."""
    source: bytes = rule.source  # type: ignore[attr-defined]
    parsed = _SRE.parse(source.decode("latin-1"), rule.flags)  # type: ignore[attr-defined]
    rng = random.Random("sample:" + rule.provider + source.decode("latin-1"))  # type: ignore[attr-defined]
    keywords = [k.decode() for k in getattr(rule, "keywords", ())]
    for attempt in range(tries):
        value = _generate(parsed, rng, plain=attempt < 2)
        # a rule runs where one of its keywords is (gitleaks reads them from the whole file)
        said = "" if not keywords or any(k in value.lower() for k in keywords) else f"({keywords[0]}) "
        # the value inside a sentence, or ending the line (a rule may take all that follows it)
        line = f"[2026-11-29 10:00:00] {said}using {value}" + ("" if attempt % 2 else " for upload")
        spans = rule.spans(line.encode())  # type: ignore[attr-defined]
        # the value that must not survive: the longest word of what the rule hides (a YAML rule
        # hides `name: value`)
        secret = max((w for a, b in spans for w in line[a:b].split()), key=len, default="")
        if len(secret) >= 6:
            return line, secret
    raise AssertionError(f"no sample found for {rule.provider}: {source[:120]!r}")  # type: ignore[attr-defined]


def catalogue_lines() -> list[tuple[str, str]]:
    """A generated value of every catalogue rule, each in a log line (see `rule_sample`)."""
    return list(_catalogue_lines())


@functools.lru_cache(maxsize=1)
def _catalogue_lines() -> tuple[tuple[str, str], ...]:
    from ledger.redact.catalogue import catalogue

    return tuple(rule_sample(rule) for rule in catalogue())
