"""Keep secrets out of git: hide secret values in argv, environments, launcher text and log lines.

A value is replaced by ``***``; the name (or the kind of pattern) that caused it is recorded in a
`Redactions` so the manifest can say WHAT was hidden, never the value.

The name rule (`is_secret_name`). A name (flag without dashes, variable, JSON key) is split into
parts at ``-``, ``_``, ``.`` and camelCase boundaries, upper-cased. It is secret when
- any part is a strong word: SECRET(S), PASSWORD(S), PASSWD, PASSPHRASE, CREDENTIAL(S), APIKEY; or
- its LAST part is KEY, TOKEN, AUTH, PAT or PASS (``WANDB_API_KEY``, ``--wandb-key``, ``HF_TOKEN``,
  ``--hub-token``, ``AWS_SECRET_ACCESS_KEY``, ``GITHUB_TOKEN``, ``DB_PASSWORD``, ``apiKey``),
except the known non-secret names in `_NOT_SECRET` (Miles' dataset-column flags such as
``--input-key``, tokenizer special tokens such as ``--pad-token``). Plurals (``--max-tokens``,
``--multimodal-keys``), longer words (``--tokenizer-path``) and non-final parts (``--kl-key-x``)
are not secret. For last-part KEY/TOKEN names a purely numeric value of up to 9 digits is kept
(a token COUNT, not a credential). Empty values and None/null are never counted as redactions.

Forms understood: ``--flag value`` (also across a ``\\`` line continuation), ``--flag=value``,
``NAME=value`` (``export``, quotes), ``"NAME": "value"`` (JSON, Python reprs, escaped JSON), printed
argv lists ``['--flag', 'value']`` and Megatron's argument dump ``name ....... value``.

Patterns redacted anywhere, whatever the name: credentials in URLs (``scheme://user:***@host``),
``Bearer`` tokens, and well-known token shapes (Hugging Face ``hf_``, GitHub ``ghp_``/``gho_``/
``ghs_``/``ghu_``/``ghr_``/``github_pat_``, OpenAI/Anthropic ``sk-``, AWS ``AKIA``/``ASIA`` key ids,
Slack ``xox?-``, JWTs ``eyJ...``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

MASK = "***"
PATTERN_PREFIX = "pattern:"

_STRONG = frozenset(
    {"SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASSPHRASE", "CREDENTIAL"}
    | {"CREDENTIALS", "APIKEY"}
)
_TAIL = frozenset({"KEY", "TOKEN", "AUTH", "PAT", "PASS"})
# Names ending in KEY/TOKEN that hold ordinary settings (normalized: upper case, "_"-joined).
_NOT_SECRET = frozenset(
    {
        "INPUT_KEY", "LABEL_KEY", "METADATA_KEY", "TOOL_KEY", "REWARD_KEY", "SORT_KEY",
        "EVAL_INPUT_KEY", "EVAL_LABEL_KEY", "EVAL_METADATA_KEY", "EVAL_TOOL_KEY",
        "EVAL_REWARD_KEY", "RM_KEY", "PAD_TOKEN", "EOS_TOKEN", "BOS_TOKEN", "UNK_TOKEN",
        "SEP_TOKEN", "CLS_TOKEN", "MASK_TOKEN", "STOP_TOKEN", "IMAGE_TOKEN", "VIDEO_TOKEN",
    }
)  # fmt: skip
_TRIVIAL = frozenset({"", "none", "null", "nil", MASK, f"'{MASK}'", f'"{MASK}"'})

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_PARTS = re.compile(r"[-_.\s]+")


def _parts(name: str) -> list[str]:
    bare = name.lstrip("-$").strip("'\"")
    return [p.upper() for p in _PARTS.split(_CAMEL.sub("_", bare)) if p]


def is_secret_name(name: str) -> bool:
    """Whether a flag, variable or JSON key name holds a secret (see the module docstring)."""
    parts = _parts(name)
    if not parts or "_".join(parts) in _NOT_SECRET:
        return False
    return parts[-1] in _TAIL or any(p in _STRONG for p in parts)


def _keeps_value(name: str, value: str) -> bool:
    """True when `value` is not a secret although `name` looks secret (counts, empty, None)."""
    bare = value.strip().strip("'\"").strip()
    if bare.lower() in _TRIVIAL:
        return True
    parts = _parts(name)
    return parts[-1] in {"KEY", "TOKEN"} and bare.isdigit() and len(bare) <= 9


@dataclass
class Redactions:
    """Which names and pattern kinds were redacted (never the values)."""

    names: set[str] = field(default_factory=set)
    kinds: set[str] = field(default_factory=set)

    def add_name(self, name: str) -> None:
        """Record a flag/variable/key name whose value was hidden."""
        self.names.add(name.lstrip("-"))

    def add_kind(self, kind: str) -> None:
        """Record a pattern kind (``hf-token``, ``url-credentials``, ...) that was hidden."""
        self.kinds.add(kind)

    def update(self, items: Iterable[str]) -> None:
        """Merge items in the `as_list` form (names, and kinds prefixed ``pattern:``)."""
        for item in items:
            if item.startswith(PATTERN_PREFIX):
                self.kinds.add(item[len(PATTERN_PREFIX) :])
            else:
                self.names.add(item)

    def as_list(self) -> list[str]:
        """Sorted names, then sorted kinds as ``pattern:<kind>``."""
        return sorted(self.names) + [PATTERN_PREFIX + k for k in sorted(self.kinds)]

    def to_dict(self) -> dict[str, list[str]]:
        """The manifest form: ``{"names": [...], "patterns": [...]}``."""
        return {"names": sorted(self.names), "patterns": sorted(self.kinds)}

    def __bool__(self) -> bool:
        return bool(self.names or self.kinds)


# --- text patterns ---------------------------------------------------------------------------
_NAME = r"[A-Za-z_][A-Za-z0-9_.-]*"
_DQ = r'"(?:[^"\\\n]|\\.)*"'
_SQ = r"'[^'\n]*'"
_BARE = r"""[^\s'";|&,}\])]+"""

# "NAME": "value" (JSON, Python reprs; also with escaped quotes inside JSON strings)
_PAIR = re.compile(
    rf"""(?P<q>\\?["'])(?P<name>{_NAME})(?P=q)\s*:\s*"""
    rf"""(?:(?P<vq>\\?["'])(?P<qval>.*?)(?P=vq)|(?P<bare>[^\s,}}\]"'\\]+))"""
)
# ['--wandb-key', 'value'] (printed argv lists)
_LISTED = re.compile(
    rf"""(?P<q>["'])(?P<name>--?{_NAME})(?P=q)\s*,\s*(?P<v>{_DQ}|{_SQ})"""
)
# NAME=value, --name=value, export NAME="value", ?token=value
_ASSIGN = re.compile(
    rf"(?<![\w.-])(?P<name>(?:--?)?{_NAME})=(?P<v>{_DQ}|{_SQ}|{_BARE})"
)
# --name value (also across a shell line continuation)
_SPACED = re.compile(
    rf"(?<![\w.-])(?P<name>--?[A-Za-z][A-Za-z0-9_.-]*)(?:[ \t]|\\\n)+(?P<v>{_DQ}|{_SQ}|(?!-){_BARE})"
)
# Megatron's argument dump: "  wandb_key ........................ value"
_DOTTED = re.compile(r"(?<![\w.-])(?P<name>[A-Za-z_][\w.-]*) \.{3,} (?P<v>[^\n]*[^\s])")
_URL = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@'\"]+:)(?P<v>[^/\s@'\"]+)(?=@)"
)
_BEARER = re.compile(r"(?P<head>\b[Bb]earer\s+)(?P<v>[A-Za-z0-9._~+/=-]{8,})")
_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("hf-token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    (
        "github-token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    ),
    ("sk-key", re.compile(r"\bsk-(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{20,}")),
    ("aws-access-key-id", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    ("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    (
        "jwt",
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]*)?"),
    ),
)


def _masked(value: str) -> str:
    """`value` replaced by the mask, keeping its quotes (and escaped quotes)."""
    for q in ('\\"', "\\'", '"', "'"):
        if len(value) >= 2 * len(q) and value.startswith(q) and value.endswith(q):
            return q + MASK + q
    return MASK


def _by_name(pattern: re.Pattern[str], text: str, acc: Redactions) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group("name")
        value = m.group("v")
        if not is_secret_name(name) or _keeps_value(name, value):
            return m.group(0)
        acc.add_name(name)
        start, end = m.span("v")
        base = m.start()
        return m.group(0)[: start - base] + _masked(value) + m.group(0)[end - base :]

    return pattern.sub(sub, text)


def _pairs(text: str, acc: Redactions) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group("name")
        group = "qval" if m.group("vq") is not None else "bare"
        value = m.group(group)
        if not is_secret_name(name) or _keeps_value(name, value):
            return m.group(0)
        acc.add_name(name)
        start, end = m.span(group)
        base = m.start()
        return m.group(0)[: start - base] + MASK + m.group(0)[end - base :]

    return _PAIR.sub(sub, text)


def _with_kind(pattern: re.Pattern[str], kind: str, text: str, acc: Redactions) -> str:
    def sub(m: re.Match[str]) -> str:
        acc.add_kind(kind)
        return m.group("head") + MASK

    return pattern.sub(sub, text)


def _redact_into(text: str, acc: Redactions) -> str:
    """Apply every rule to `text`, recording what was hidden in `acc`."""
    text = _pairs(text, acc)
    text = _by_name(_LISTED, text, acc)
    text = _by_name(_ASSIGN, text, acc)
    text = _by_name(_SPACED, text, acc)
    text = _by_name(_DOTTED, text, acc)
    text = _with_kind(_URL, "url-credentials", text, acc)
    text = _with_kind(_BEARER, "bearer-token", text, acc)
    for kind, pattern in _SHAPES:
        if pattern.search(text):
            acc.add_kind(kind)
            text = pattern.sub(MASK, text)
    return text


def redact_text(text: str) -> tuple[str, list[str]]:
    """Redact a launcher script, command line or any text; returns (text, redacted names/kinds)."""
    acc = Redactions()
    return _redact_into(text, acc), acc.as_list()


def redact_line(line: bytes, redactions: Redactions | None = None) -> bytes:
    """Redact one log line given as bytes; invalid UTF-8 passes through byte for byte."""
    text = line.decode("utf-8", "surrogateescape")
    acc = redactions if redactions is not None else Redactions()
    out = _redact_into(text, acc)
    return line if out == text else out.encode("utf-8", "surrogateescape")


def redact_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Redact an argument vector: ``--flag value``, ``--flag=value``, ``NAME=value``, patterns."""
    acc = Redactions()
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if (
            arg.startswith("-")
            and "=" not in arg
            and is_secret_name(arg)
            and i < len(argv)
        ):
            value = argv[i]
            if not value.startswith("--"):
                i += 1
                out.append(arg)
                if _keeps_value(arg, value):
                    out.append(value)
                else:
                    acc.add_name(arg)
                    out.append(MASK)
                continue
        if arg.startswith("-") and "=" in arg:
            name, value = arg.split("=", 1)
            if is_secret_name(name) and not _keeps_value(name, value):
                acc.add_name(name)
                out.append(f"{name}={MASK}")
                continue
        out.append(_redact_into(arg, acc))
    return out, acc.as_list()


def redact_env(env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Redact an environment: secret-named variables, and patterns inside any value."""
    acc = Redactions()
    out: dict[str, str] = {}
    for name, value in env.items():
        if is_secret_name(name) and not _keeps_value(name, value):
            acc.add_name(name)
            out[name] = MASK
        else:
            out[name] = _redact_into(value, acc)
    return out, acc.as_list()
