"""The vocabulary of redaction: which names hold secrets, the mask, and what was hidden where.

A value is replaced by ``***``; the name (or the kind of pattern) that caused it is recorded in a
`Redactions` so the manifest can say WHAT was hidden and WHERE, never the value. The rules
themselves work on bytes (`ledger.redact.rules`); every writer goes through one
`ledger.redact.scanner.Redactor`, which adds the run's known secret values and the fast scan.

Names and kinds are labels, and labels never hold secret text: a name that cannot be one (a PEM
block given where a flag was expected) is recorded as `HIDDEN_LABEL` (`plain_label`), and the
manifest's keys and `redacted` entries go through the rules before they are written
(`ledger.redact.scanner.Redactor.redact_label`).

The name rule (`is_secret_name`). A name (flag without dashes, variable, JSON key) is split into
parts at ``-``, ``_``, ``.`` and camelCase boundaries, upper-cased. It is secret when
- any part is a strong word: SECRET(S), PASSWORD(S), PASSWD, PASSPHRASE, CREDENTIAL(S), PRIVATE,
  APIKEY, or one of the configured extra words (``secrets: {names: [...]}`` in .ledger.yaml); or
- its LAST part is KEY, TOKEN, AUTH, PAT, PASS or PWD, or ends with TOKEN, APIKEY, SECRET or
  PASSWORD (``WANDB_API_KEY``, ``--wandb-key``, ``HF_TOKEN``, ``hftoken``, ``DB_PWD``, ``apiKey``),
except the known non-secret names in `_NOT_SECRET` (Miles' dataset-column flags such as
``--input-key``, tokenizer special tokens such as ``--pad-token``, the shell's ``PWD``). Plurals
(``--max-tokens``), longer words (``--tokenizer-path``) and non-final parts (``--kl-key-x``) are
not secret. A qualifier after the secret word does not hide it: trailing digits and the words in
`_QUALIFIERS` are dropped first, from a name of three parts or more (``OPENAI_API_KEY_2``, ``STRIPE_KEY_LIVE``, ``"API Key"``).
Values that are never secrets are kept: empty, None/null, true/false, for KEY/TOKEN names a
number of up to 9 digits (a token COUNT, not a credential), and code a launcher's text holds in
the value's place (`_is_code`): a variable a comprehension or call reads (``{key: value for key,
value in os.environ.items()}``), an attribute named like the secret (``token=args.token``), a
call or subscript (``key = os.environ.get(``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import msgspec

MASK = "***"
MASK_BYTES = MASK.encode()  # the same mask, for the rules that work on bytes
PATTERN_PREFIX = "pattern:"
KNOWN_VALUE = "known-value"

_STRONG = frozenset(
    {"SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASSPHRASE", "CREDENTIAL"} | {"CREDENTIALS", "APIKEY", "PRIVATE"}
)
_TAIL = frozenset({"KEY", "TOKEN", "AUTH", "PAT", "PASS", "PWD"})
_TAIL_ENDS = ("TOKEN", "APIKEY", "SECRET", "PASSWORD")
# Names ending in KEY/TOKEN that hold ordinary settings (normalized: upper case, "_"-joined).
_NOT_SECRET = frozenset(
    {
        "INPUT_KEY", "LABEL_KEY", "METADATA_KEY", "TOOL_KEY", "REWARD_KEY", "SORT_KEY",
        "EVAL_INPUT_KEY", "EVAL_LABEL_KEY", "EVAL_METADATA_KEY", "EVAL_TOOL_KEY",
        "EVAL_REWARD_KEY", "RM_KEY", "PAD_TOKEN", "EOS_TOKEN", "BOS_TOKEN", "UNK_TOKEN",
        "SEP_TOKEN", "CLS_TOKEN", "MASK_TOKEN", "STOP_TOKEN", "IMAGE_TOKEN", "VIDEO_TOKEN",
        "PWD", "OLDPWD",
    }
)  # fmt: skip
# words that only qualify a secret name (which one, where it is used): dropped from its end
_QUALIFIERS = frozenset(
    {"LIVE", "TEST", "PROD", "PRODUCTION", "DEV", "STAGING", "OLD", "NEW", "BACKUP", "PRIMARY"} | {"SECONDARY", "ALT", "B64", "BASE64"}
)
_TRIVIAL = frozenset({"", "none", "null", "nil", "true", "false", MASK, f"'{MASK}'", f'"{MASK}"'})

# A label ledger writes (a setting's name, a manifest key, a `redacted` entry) is a name as code
# spells one: one printable line, short. Anything else (a 400-byte PGP key block read as a flag) is
# not written; `HIDDEN_LABEL` stands in its place.
MAX_LABEL = 256  # a path is a label too (`code/...` in `redacted`, a launcher input)
HIDDEN_LABEL = "<not a name: hidden>"
SECRET_IN_NAME = "secret-in-a-name"


# code in a value's place, not a secret: the variables of Python code and its type
# annotations; also (`_is_code`) an attribute named like the secret, a name called or subscripted
# (the value is cut at the quote that follows)
_CODE_VARIABLES = frozenset(
    {"value", "values", "val", "item", "items", "key", "keys", "name", "arg", "args", "kwargs"}
    | {"str", "bytes", "int", "float", "bool", "dict", "list", "tuple"}  # annotations: `wandb_key: str = ...`
)
_CODE_PATH = re.compile(r"[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*[(\[]?")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_PARTS = re.compile(r"[-_.\s]+")


def _parts(name: str) -> list[str]:
    bare = name.lstrip("-$").strip("'\"")
    return [p.upper() for p in _PARTS.split(_CAMEL.sub("_", bare)) if p]


def is_secret_name(name: str, extra: frozenset[str] = frozenset()) -> bool:
    """Whether a flag, variable or JSON key name holds a secret (see the module docstring).

    `extra`: configured words (upper case) that make any name holding them as a part secret.
    """
    parts = _parts(name)
    if not parts or "_".join(parts) in _NOT_SECRET:
        return False
    # a qualifier is dropped only from a name of two parts or more (`token_0` in code is no secret)
    while len(parts) > 2 and (parts[-1].isdigit() or parts[-1] in _QUALIFIERS):
        parts.pop()
    if "_".join(parts) in _NOT_SECRET:
        return False
    last = parts[-1]
    return last in _TAIL or last.endswith(_TAIL_ENDS) or any(p in _STRONG or p in extra for p in parts)


def plain_label(text: str) -> str:
    """`text` when it can be a name (one printable line of at most `MAX_LABEL` characters), else
    `HIDDEN_LABEL`. Secret shapes inside a plain label are the rules' (`Redactor.redact_label`)."""
    return text if len(text) <= MAX_LABEL and text.isprintable() else HIDDEN_LABEL


def _is_code(name: str, bare: str) -> bool:
    """A value that is code, not a secret: a loop variable, an attribute named like the secret
    (`args.api_key` for `api_key`), a call or subscript (`os.environ.get(`)."""
    if not _CODE_PATH.fullmatch(bare):
        return False
    if bare.endswith(("(", "[")) or bare in _CODE_VARIABLES:
        return True
    return "." in bare and bare.rsplit(".", 1)[1] == "_".join(_parts(name)).lower()


def keeps_value(name: str, value: str) -> bool:
    """True when `value` is not a secret although `name` looks secret (counts, empty, None, code)."""
    bare = value.strip().strip("'\"\\").strip()
    if bare.lower() in _TRIVIAL or _is_code(name, bare):
        return True
    parts = _parts(name)
    return bool(parts) and parts[-1] in {"KEY", "TOKEN"} and bare.isdigit() and len(bare) <= 9


class Redactions(msgspec.Struct):
    """Which names and pattern kinds were redacted (never the values)."""

    names: set[str] = msgspec.field(default_factory=set)
    kinds: set[str] = msgspec.field(default_factory=set)

    def add_name(self, name: str) -> None:
        """Record a flag/variable/key name whose value was hidden (a text that cannot be a name is
        recorded as `HIDDEN_LABEL`: the record of what was hidden never holds what was)."""
        self.names.add(plain_label(name.lstrip("-")))

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

    def merge(self, other: Redactions) -> None:
        """Add everything `other` holds."""
        self.names |= other.names
        self.kinds |= other.kinds

    def as_list(self) -> list[str]:
        """Sorted names, then sorted kinds as ``pattern:<kind>``."""
        return sorted(self.names) + [PATTERN_PREFIX + k for k in sorted(self.kinds)]

    def at(self, place: str) -> list[str]:
        """The manifest's `redacted` entries for one place: ``"<place>: <name or pattern:kind>"``."""
        return [f"{place}: {item}" for item in self.as_list()]

    def to_dict(self) -> dict[str, list[str]]:
        """The form ``{"names": [...], "patterns": [...]}``."""
        return {"names": sorted(self.names), "patterns": sorted(self.kinds)}

    def __bool__(self) -> bool:
        return bool(self.names or self.kinds)
