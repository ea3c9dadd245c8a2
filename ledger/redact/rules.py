"""The redaction rules, on bytes: each finds the SPANS of secret values in one line (or a text).

Working on bytes keeps offsets exact (a long line is redacted in windows, see
`ledger.redact.scanner`), never decodes a log, and lets invalid UTF-8 pass through untouched.
A rule reports `(start, end)` spans and records the name or kind it hid in a `Redactions`; the
caller merges the spans and replaces each by ``***`` (`ledger.redact.spans.mask_spans`).

Secret-named values (the name rule is `ledger.redact.names.is_secret_name`):
``"name": "value"`` (JSON, Python dict reprs, escaped JSON), ``['--name', 'value']`` (printed
argv lists), ``NAME=value`` / ``--name=value`` / ``Namespace(name='value')``, ``name: value``
(YAML, ``key = value`` INI), ``--name value`` (also across a ``\\`` continuation) and Megatron's
argument dump (``  wandb_key ........ value``). A quoted value may carry a Python string prefix
(``b'...'``); a pair whose name is not secret does not hide one that starts in its value
(``INFO: password: x``).

Shapes redacted whatever the name (public formats of each issuer): Hugging Face ``hf_``,
OpenAI/Anthropic ``sk-``/``sk-proj-``/``sk-ant-``, GitHub ``ghp_ gho_ ghs_ ghu_ ghr_`` and
``github_pat_``, GitLab ``glpat-``, Slack ``xox[abposr]-``, AWS key ids ``AKIA``/``ASIA`` (and a
40-character secret key on the same line), Google API keys ``AIza`` + 35, JWTs ``eyJ..``.``..``,
``Authorization: Bearer``/``Basic`` values (and the credential of any other scheme after an
``Authorization`` header name, Digest's parameters included), credentials in URLs, and PEM/OpenSSH private key blocks
(`ledger.redact.blocks`: a block spread over several lines is masked line by line, keeping the line count).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable

from ledger.redact.catalogue import rules_for
from ledger.redact.names import Redactions, is_secret_name, keeps_value
from ledger.redact.rx import Rx
from ledger.redact.spans import Span, line_span

_NAME = rb"[A-Za-z_][A-Za-z0-9_.-]*"
_DQ = rb'"(?:[^"\\\n]|\\.)*"'
_SQ = rb"'[^'\n]*'"
_BARE = rb"""[^\s'";|&,}\])]+"""
# a shell word glued from quoted parts: `set -x` prints --password "ab'cd" as 'ab'\''cd'
_SHWORD = rb"(?:" + _SQ + rb"(?:\\'" + _SQ + rb")+|" + _SQ + rb"\\'|\\'" + _SQ + rb")"
# a Python string prefix before a quoted value: b'...' (bytes reprs), u'...', r'...'
_PFX = rb"""(?:[bBuUrR]{1,2}(?=["']))?"""
# a quoted value, in any of the three ways above
_QUOTED = _SHWORD + rb"|" + _DQ + rb"|" + _SQ

# "NAME": "value" (JSON, Python reprs; also with escaped quotes inside JSON strings)
_PAIR = Rx(
    rb"""(?P<q>\\?["'])(?P<name>""" + _NAME + rb"""(?: [A-Za-z0-9_.-]+){0,3})(?P=q)\s*:\s*"""
    rb"""(?:""" + _PFX + rb"""(?P<vq>\\?["'])(?P<qval>.*?)(?P=vq)|(?P<bare>[^\s,}\]"'\\]+))""",
    b":",
)
# ['--wandb-key', 'value'] (printed argv lists)
_LISTED = Rx(rb"""(?P<q>["'])(?P<name>--?""" + _NAME + rb""")(?P=q)\s*,\s*(?P<v>""" + _DQ + rb"|" + _SQ + rb")", b",")
# NAME=value, --name=value, export NAME="value", ?token=value, Namespace(name='value')
_ASSIGN = Rx(
    rb"(?<![\w.-])(?P<name>(?:--?)?" + _NAME + rb")=" + _PFX + rb"(?P<v>" + _QUOTED + rb"|" + _BARE + rb")",
    b"=",
)
# name: value (YAML, logs), key = value (INI), name= value (`print("token=", v)`); a separate
# pattern so neither hides the other's match
# A value that opens a YAML flow mapping or list (`secrets: {names: [X]}`) is structure, not a
# secret: its inner `name: value` pairs are matched on their own.
_COLON = Rx(
    rb"(?<![\w.-])(?P<name>"
    + _NAME
    + rb")(?:[ \t]*:|[ \t]+=|=(?=[ \t]))[ \t]*(?!=)"
    + _PFX
    + rb"(?P<v>"
    + _DQ
    + rb"|"
    + _SQ
    + rb"|(?![{\[])"
    + _BARE
    + rb")"
)
# --name value (also across a shell line continuation)
_SPACED = Rx(rb"(?<![\w.-])(?P<name>--?[A-Za-z][A-Za-z0-9_.-]*)(?:[ \t]|\\\n)+" + _PFX + rb"(?P<v>" + _QUOTED + rb"|(?!-)" + _BARE + rb")")
# Megatron's argument dump: "  wandb_key ........................ value"
_DOTTED = Rx(rb"(?<![\w.-])(?P<name>[A-Za-z_][\w.-]*) \.{3,} (?P<v>[^\n]*[^\s])")

_URL = Rx(rb"\b[A-Za-z][A-Za-z0-9+.-]*://(?P<user>[^/\s:@'\"]*):(?P<v>[^/\s@'\"]+)@", b"://")
# https://TOKEN@host: a token alone as the user part (GitHub's documented form)
_URL_TOKEN = Rx(rb"\bhttps?://(?P<v>[A-Za-z0-9_.~-]{16,})@", b"http")
_BEARER = Rx(rb"(?i)\bbearer\s+(?P<v>(?=[A-Za-z0-9._~+/=-]*\d)[A-Za-z0-9._~+/=-]{8,})")
# after an Authorization header name any value is a credential (RFC 9110 11.6.2), whatever its
# scheme (`<scheme> <credential>`): a known token scheme (Bearer, GitHub's `token`, Okta's `SSWS`,
# Fly's `FlyV1`, ...) with whatever follows it; any other scheme with a token68 that looks like a
# credential (a digit or a symbol in it, or 20 characters), or with parameters (Digest, OAuth,
# AWS4-HMAC-SHA256: `name=value, ...`, hidden to the end of the value); no scheme, a
# token-looking value. Basic has its own form (`_BASIC`: base64 of `user:password`).
_AUTHZ = Rx(
    rb"""(?i)\b(?:proxy-)?authorization\\?["']?[ \t]*[:=][ \t]*\\?["']?(?!basic\s)"""
    rb"""(?:(?:bearer|token|bot|negotiate|apikey|api-key|key|ssws|flyv1|dpop)[ \t]+(?P<v>[A-Za-z0-9._~+/=,-]{6,})"""
    rb"""|[A-Za-z][A-Za-z0-9._~+-]*[ \t]+(?P<params>[A-Za-z][\w-]*[ \t]*=[^\r\n']*[^\s'])"""
    rb"""|[A-Za-z][A-Za-z0-9._~+-]*[ \t]+(?P<cred>(?=[A-Za-z0-9._~+/-]*[\d._~+/-])[A-Za-z0-9._~+/-]{8,}=*|[A-Za-z0-9._~+/-]{20,}=*)"""
    rb"""|(?P<raw>(?=[A-Za-z0-9._~+/=-]*\d)[A-Za-z0-9._~+/=-]{12,}|[A-Za-z0-9._~+/=-]{20,}))"""
)
_BASIC = Rx(rb"(?i)(?P<auth>authorization[\"']?\s*[:=]\s*[\"']?)?\bbasic\s+(?P<v>[A-Za-z0-9+/]{6,}={0,2})")
_AWS_ID = Rx(rb"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")
_AWS_SECRET = Rx(rb"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_AWS_ASSIGNED = Rx(rb"[=:][ \t]*[\"']?(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])")
SHAPES: tuple[tuple[str, Rx], ...] = (
    ("hf-token", Rx(rb"\bhf_[A-Za-z0-9]{30,}", b"hf_")),
    ("github-token", Rx(rb"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})")),
    ("gitlab-token", Rx(rb"\bglpat-[A-Za-z0-9_-]{20,}", b"glpat-")),
    ("sk-key", Rx(rb"\bsk-(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{20,}", b"sk-")),
    ("aws-access-key-id", _AWS_ID),
    ("slack-token", Rx(rb"\bxox[abposr]-[A-Za-z0-9-]{10,}", b"xox")),
    ("google-api-key", Rx(rb"\bAIza[A-Za-z0-9_-]{35}", b"AIza")),
    ("jwt", Rx(rb"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]*)?", b"eyJ")),
)

# Provider shapes the catalogue (`ledger.redact.catalogue`) lacks, from each issuer's public
# description of its token format. Each pattern is also its own trigger (`scanner`); a group `v`
# is the part hidden.
OWN_SHAPES: tuple[tuple[str, bytes], ...] = (
    ("stripe-key", rb"\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}"),
    ("npm-token", rb"\bnpm_[A-Za-z0-9]{36}"),
    ("azure-sas-signature", rb"[?&;]sig=(?P<v>[A-Za-z0-9%+/]{16,}(?:%3[Dd]|=){0,2})"),
    ("google-oauth-token", rb"\bya29\.[A-Za-z0-9_-]{20,}"),
    ("aws-session-token", rb"\b(?:F[wQ]oGZXIvYXdz|IQoJb3JpZ2lu)[A-Za-z0-9+/=]{40,}"),
    ("vault-token", rb"\bhv[sbr]\.[A-Za-z0-9_-]{20,}"),
    ("databricks-token", rb"\bdapi[a-f0-9]{32}(?:-[0-9]+)?"),
    ("age-secret-key", rb"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    ("slack-webhook", rb"\bhttps://hooks\.slack\.com/(?:workflows|triggers)/[A-Za-z0-9_/-]{20,}"),
    ("dockerhub-token", rb"\bdckr_(?:pat|oat)_[A-Za-z0-9_-]{20,}"),
    ("shopify-token", rb"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    ("digitalocean-token", rb"\bdo[por]_v1_[a-f0-9]{64}"),
    ("slack-app-token", rb"\bxapp-[0-9]+-[A-Za-z0-9-]{20,}"),
    ("grafana-token", rb"\b(?:glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/=_-]{32,})"),
    ("replicate-token", rb"\br8_[A-Za-z0-9]{37,}"),
    ("groq-key", rb"\bgsk_[A-Za-z0-9]{48,}"),
    ("supabase-token", rb"\b(?:sbp_[a-f0-9]{40}|sb_secret_[A-Za-z0-9_-]{20,})"),
    ("fly-token", rb"\bFlyV1[ \t]+(?P<v>fm[12][ar]?_[A-Za-z0-9+/=_,-]{20,})"),
    ("wandb-key", rb"(?i:\bwandb)[ \t]+login[ \t]+(?:-[\w-]+(?:[ \t]+|=)(?:https?://\S+[ \t]+)?)*(?P<v>(?:local-)?[A-Za-z0-9_-]{40,})"),
)
# a literal each match holds (`catalogue.required_literal` of each, which a test checks): a
# shape is only looked for where it is (cheap on long lines)
_OWN_NEEDS = {
    "stripe-key": b"k_",
    "npm-token": b"npm_",
    "azure-sas-signature": b"sig=",
    "google-oauth-token": b"ya29.",
    "vault-token": b"hv",
    "databricks-token": b"dapi",
    "age-secret-key": b"AGE-SECRET-KEY-1",
    "slack-webhook": b"https://hooks.slack.com/",
    "dockerhub-token": b"dckr_",
    "shopify-token": b"shp",
    "digitalocean-token": b"_v1_",
    "slack-app-token": b"xapp-",
    "grafana-token": b"gl",
    "wandb-key": b"login",
    "replicate-token": b"r8_",
    "groq-key": b"gsk_",
    "supabase-token": b"sb",
    "fly-token": b"FlyV1",
}
OWN = tuple((kind, Rx(p, _OWN_NEEDS.get(kind, b""))) for kind, p in OWN_SHAPES)

# XML elements: <password>value</password>, <api_key attr="x">value</api_key>
_XML = Rx(rb"<(?P<name>[A-Za-z_][\w.-]*)(?:\s[^<>\n]*)?>(?P<v>[^<\n]+)</(?P=name)>", b"</")
# name => value, name := value, name -> value (Ruby/PHP/Perl hashes, Go, Make, printed maps)
# a bare value that is not an expression: not followed by a call or an index (`x := f(y)`)
_WORD_VALUE = rb"(?=(?P<w>[^\s'\";|&,}\])(\[{]+))(?P=w)(?![(\[])"
_ARROW = Rx(
    rb"(?<![\w.-])\\?[\"']?(?P<name>"
    + _NAME
    + rb")\\?[\"']?[ \t]*(?:=>|:=|(?P<then>->))[ \t]*"
    + _PFX
    + rb"(?P<v>"
    + _QUOTED
    # after `->` (prose: "key -> value") a bare value only when it looks like a token: 8+ chars, a digit
    + rb"|(?(then)(?=[^\s'\";|&,}\])(\[{]*\d)[^\s'\";|&,}\])(\[{]{8,}(?![(\[])|"
    + _WORD_VALUE
    + rb"))"
)
# netrc: "machine h login u password p" (one line, or one entry a line)
_NETRC = Rx(rb"(?m)(?:^[ \t]*|\b(?:login|account)[ \t]+\S+[ \t]+)password[ \t]+(?P<v>[^\s:=>-][^\s]*)", b"password")
_SHELL_VALUE = rb"(?P<v>" + _SHWORD + rb"|" + _DQ + rb"|" + _SQ + rb"|[^\s'\";|&]+)"
# commands that take a password as a short option: docker login -p X, sshpass -p X, mysql -pX
_CMD_PASSWORD = (
    Rx(rb"\b(?:docker|podman|nerdctl)[ \t]+login\b[^\n;|&]*?[ \t]-p[ \t]*" + _SHELL_VALUE, b"login"),
    Rx(rb"\bsshpass\b[^\n;|&]*?[ \t]-p[ \t]*" + _SHELL_VALUE, b"sshpass"),
    Rx(
        rb"\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n;|&]*?[ \t]-p(?P<v>"
        + _SHWORD
        + rb"|"
        + _DQ
        + rb"|"
        + _SQ
        + rb"|[^\s'\";|&-][^\s'\";|&]*)"
    ),
    Rx(rb"\b(?:curl|wget)\b[^\n;|&]*?[ \t](?:-u|--user|--proxy-user)(?:[ \t]+|=)[\"']?[^\s:'\"]*:(?P<v>[^\s'\"]+)"),
)
# Cookie / Set-Cookie header values: every cookie is a credential
_COOKIE = Rx(rb"(?i)\b(?:set-)?cookie\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?(?P<v>[^\r\n\"'\\]{6,})")
# URL-encoded: password%3Dvalue (up to %26 = &), and https%3A%2F%2Fuser%3Apw%40host
_ENC_ASSIGN = Rx(
    rb"(?i)(?:(?<=%3F)|(?<=%26)|(?<=%2C)|(?<![\w.-]))(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)"
    rb"%3D(?P<v>(?:(?!%26)[^&\s\"'])+)"
)
_ENC_URL = Rx(rb"(?i)%3A%2F%2F[^%\s/@]*%3A(?P<v>(?:(?!%40)[^\s/@\"'])+)%40")
# YAML block scalar after a secret name: "password: |" / "api_key: >-", the value on the next lines
BLOCK_HEAD = Rx(rb"^(?P<ind>[ \t]*)(?:- )?(?P<name>" + _NAME + rb")[ \t]*:[ \t]*[|>][+-]?[0-9]?[ \t]*(?:#.*)?$", b":")

# PEM / OpenSSH private keys ("-----BEGIN OPENSSH PRIVATE KEY-----", "BEGIN RSA PRIVATE KEY", ...)
PEM_BEGIN = Rx(rb"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----", b"-----BEGIN ")
PEM_END = Rx(rb"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----", b"PRIVATE KEY")

NameTest = Callable[[str], bool]


def _inner(data: bytes, start: int, end: int) -> Span:
    """The span of a value without its quotes (plain or backslash-escaped)."""
    for q in (b'\\"', b"\\'", b'"', b"'"):
        n = len(q)
        if end - start >= 2 * n and data.startswith(q, start) and data.endswith(q, start, end):
            return start + n, end - n
    return start, end


def _named(
    pattern: Rx, data: bytes, acc: Redactions, out: list[Span], secret: NameTest, found: set[bytes] | None, group: str = "v"
) -> None:
    pos = 0
    while (m := pattern.search(data, pos)) is not None:
        name = m.group("name").decode("ascii")
        if group == "pair":
            quoted = m.group("vq") is not None
            start, end = m.span("qval" if quoted else "bare")
            value_at = m.start("vq") if quoted else start
        else:
            value_at = m.start(group)
            start, end = _inner(data, *m.span(group))
        value = data[start:end].decode("utf-8", "surrogateescape")
        if not secret(name) or keeps_value(name, value):
            # the value may start the next pair: "INFO: password: x" matches "INFO: password" first
            pos = value_at
            continue
        acc.add_name(name)
        out.append((start, end))
        if found is not None:
            found.add(data[start:end])
        pos = m.end()


def _kind(pattern: Rx, kind: str, data: bytes, acc: Redactions, out: list[Span], found: set[bytes] | None, group: str | int = "v") -> None:
    for m in pattern.finditer(data):
        acc.add_kind(kind)
        out.append(m.span(group))
        if found is not None:
            found.add(m.group(group))


def _authorization(data: bytes, acc: Redactions, out: list[Span], found: set[bytes] | None) -> None:
    """The value of an ``Authorization`` header (`_AUTHZ`), whatever its characters."""
    for m in _AUTHZ.finditer(data):
        group = next(g for g in ("v", "params", "cred", "raw") if m.group(g) is not None)
        if m.span(group) in out:
            continue  # `_BEARER` hid it already
        acc.add_kind("authorization-header")
        out.append(m.span(group))
        if found is not None:
            found.add(m.group(group))


def _basic(data: bytes, acc: Redactions, out: list[Span], found: set[bytes] | None) -> None:
    """``Basic <base64>``: after ``Authorization``, or when it decodes to ``user:password``."""
    for m in _BASIC.finditer(data):
        value = m.group("v")
        if m.group("auth") is None:
            try:
                plain = base64.b64decode(value + b"=" * (-len(value) % 4), validate=True)
            except (binascii.Error, ValueError):
                continue
            if b":" not in plain:
                continue
        acc.add_kind("basic-auth")
        out.append(m.span("v"))
        if found is not None:
            found.add(value)


def rule_spans(data: bytes, acc: Redactions, secret: NameTest = is_secret_name, found: set[bytes] | None = None) -> list[Span]:
    """Spans of secret values in `data` by every rule except PEM blocks and known values.

    `found` collects the values removed (kept in memory only, to find them again elsewhere).
    """
    out: list[Span] = []
    _named(_PAIR, data, acc, out, secret, found, "pair")
    _named(_LISTED, data, acc, out, secret, found)
    _named(_ASSIGN, data, acc, out, secret, found)
    _named(_COLON, data, acc, out, secret, found)
    _named(_SPACED, data, acc, out, secret, found)
    _named(_DOTTED, data, acc, out, secret, found)
    _round_two(data, acc, out, secret, found)
    return out + shape_spans(data, acc, found, out)


def shape_spans(data: bytes, acc: Redactions, found: set[bytes] | None = None, hidden: list[Span] | None = None) -> list[Span]:
    """Spans of the secrets that need no name: credentials in URLs and Authorization headers,
    token shapes (ours, the catalogue's), AWS secret keys beside their ids. What a data file is
    scanned for (`ledger.redact.filescan`); `hidden`: spans found already, whose kinds win."""
    out: list[Span] = list(hidden or [])
    _kind(_URL, "url-credentials", data, acc, out, found)
    _kind(_URL_TOKEN, "url-credentials", data, acc, out, found)
    _kind(_BEARER, "bearer-token", data, acc, out, found)
    _authorization(data, acc, out, found)
    _basic(data, acc, out, found)
    for kind, pattern in SHAPES:
        _kind(pattern, kind, data, acc, out, found, 0)
    for kind, pattern in OWN:
        _kind(pattern, kind, data, acc, out, found, "v" if b"(?P<v>" in pattern.source else 0)
    _catalogue_spans(data, acc, out, found)
    _aws_secrets(data, acc, out, found)
    return out[len(hidden or []) :]


def _round_two(data: bytes, acc: Redactions, out: list[Span], secret: NameTest, found: set[bytes] | None) -> None:
    """Round two's syntaxes, each behind a cheap test for the bytes it needs (long lines)."""
    if b"</" in data:
        _named(_XML, data, acc, out, secret, found)
    if _holds(data, b"=>", b":=", b"->"):
        _named(_ARROW, data, acc, out, secret, found)
    if b"%3" in data:
        _named(_ENC_ASSIGN, data, acc, out, secret, found)
        _kind(_ENC_URL, "url-credentials", data, acc, out, found)
    if b"password" in data:
        _kind(_NETRC, "netrc-password", data, acc, out, found)
    if _holds(data, b" -p", b"\t-p", b"-u"):
        for pattern in _CMD_PASSWORD:
            _kind(pattern, "command-password", data, acc, out, found)
    if _holds(data, b"ookie", b"OOKIE"):
        _kind(_COOKIE, "cookie", data, acc, out, found)


def _holds(data: bytes, *parts: bytes) -> bool:
    """Whether `data` holds any of `parts`."""
    return any(part in data for part in parts)


def _catalogue_spans(data: bytes, acc: Redactions, out: list[Span], found: set[bytes] | None) -> None:
    """The catalogue's shapes (detect-secrets', gitleaks'), outside what ledger's own rules hid
    (which keeps their kind)."""
    lower = data.lower()
    for rule in rules_for(data, lower):
        spans = [sp for sp in rule.spans(data, lower) if not any(a <= sp[0] and sp[1] <= b for a, b in out)]
        if spans:
            acc.add_kind(rule.kind)
            out.extend(spans)
            if found is not None:
                found.update(data[a:b] for a, b in spans)


def _aws_secrets(data: bytes, acc: Redactions, out: list[Span], found: set[bytes] | None) -> None:
    """A 40-character secret access key next to its key id: anywhere on the id's line, or as the
    value assigned on the line before or after it; never anywhere in a text (a git SHA is 40
    characters too)."""
    for m in _AWS_ID.finditer(data):
        start, end = line_span(data, m.start())
        spans = [s.span() for s in _AWS_SECRET.finditer(data, start, end)]
        for at in (start - 1, end + 1):
            if 0 <= at <= len(data) and (at < start or end < len(data)):
                a, b = line_span(data, at)
                spans += [s.span("v") for s in _AWS_ASSIGNED.finditer(data, a, b)]
        for span in spans:
            acc.add_kind("aws-secret-access-key")
            out.append(span)
            if found is not None:
                found.add(data[span[0] : span[1]])
