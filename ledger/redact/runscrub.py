"""The last scrub of a run folder before it is committed: the same for `ledger run` and `ledger recover`.

By then the logs were redacted line by line as they were split (`Redactor` with the run's known
values). What is left:
- values the rules removed while splitting (a ``--hub-token X`` in the trace) may appear elsewhere
  in a form no rule knows (``using X``): they are removed from every log in a second pass that
  looks for those literal values only (fast: one literal scan, rewrite only where found);
- small files written by ledger itself (``heat.log``, ``metrics.jsonl``) get the full scan;
- the manifest: every string and key, and every value under a secret-named key.
The manifest's ``redacted`` lists ``"<where>: <name or pattern:kind>"``, never a value: each of
its parts is a label, checked by the same rules before it is written (`clean_entry`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

from ledger.redact.names import Redactions
from ledger.redact.scanner import Redactor
from ledger.runrecord import RunRecord, replace

SECRETS_FILE = "secrets.json"  # in the staging folder, outside the run folder: never committed
LOGS = ("trainer.log", "engine.log")
SMALL = ("heat.log", "metrics.jsonl")


def save_secrets(staging_dir: Path, values: Iterable[str]) -> None:
    """Keep the run's known secret values for `ledger recover` (mode 0600, removed with staging)."""
    path = staging_dir / SECRETS_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
        json.dump(sorted(values), f)


def load_secrets(staging_dir: Path) -> set[str]:
    """The values `save_secrets` kept (empty when absent or unreadable)."""
    try:
        data = json.loads((staging_dir / SECRETS_FILE).read_text(encoding="utf-8", errors="surrogateescape"))
    except (OSError, ValueError):
        return set()
    return {v for v in data if isinstance(v, str)} if isinstance(data, list) else set()


LEFT_OUT = "left-out:binary-with-secret-shaped-bytes"
_BOMS = ((b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))
_PRINTABLE = re.compile(rb"[\t\x20-\x7e]{6,}")


def text_encoding(data: bytes) -> tuple[str, int] | None:
    """(codec, BOM length) of a UTF-16/32 text, by its BOM or its pattern of NUL bytes; None for
    anything else (UTF-8 text, or binary)."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return codec, len(bom)
    head = data[:8192]
    if len(head) < 4 or b"\0" not in head:
        return None
    n = len(head) // 4 * 4
    for width, codec in ((4, "utf-32-le"), (4, "utf-32-be"), (2, "utf-16-le"), (2, "utf-16-be")):
        zero_at = [i for i in range(width) if head[i:n:width].count(0) == n // width]
        want = list(range(1, width)) if codec.endswith("le") else list(range(width - 1))
        if zero_at == want:
            return codec, 0
    return None


def scrub_code_file(redactor: Redactor, data: bytes, acc: Redactions) -> bytes | None:
    """A dirty tracked file as it may be stored: text (UTF-8, or UTF-16/32 decoded and encoded back)
    with secrets hidden; a binary file as it is when no printable run of its bytes (read as
    ASCII, or with its NUL bytes removed) holds a secret shape or a known value; else None: the
    file is left out of the run's tree."""
    if b"\0" not in data:
        return redactor.redact_text(data.decode("utf-8", "surrogateescape"), acc).encode("utf-8", "surrogateescape")
    enc = text_encoding(data)
    if enc is not None:
        codec, bom = enc
        try:
            text = data[bom:].decode(codec)
        except UnicodeDecodeError:
            enc = None
        else:
            clean = redactor.redact_text(text, acc)
            return data if clean == text else data[:bom] + clean.encode(codec)
    for view in (data, data.replace(b"\0", b"")):
        strings = "\n".join(m.group().decode("ascii") for m in _PRINTABLE.finditer(view))
        probe = Redactions()
        if redactor.redact_text(strings, probe) != strings:
            acc.add_kind(LEFT_OUT)
            return None
    return data


def scrub_logs(run_dir: Path, secrets: Iterable[str], found: Iterable[bytes], extra_names: Iterable[str] = ()) -> list[str]:
    """The final scrub of a staged run folder's files (see the module docstring); returns the
    `redacted` entries of what it hid."""
    secrets = set(secrets)
    extra = tuple(extra_names)
    logs = [run_dir / n for n in LOGS] + sorted((run_dir / "extra-logs").glob("*"))
    new_values = set(found)
    hidden: list[str] = []
    if new_values:
        for path in logs:
            acc = Redactions()
            if path.is_file() and Redactor(new_values, rules_on=False).redact_file(path, acc=acc):
                hidden.extend(acc.at(_place(run_dir, path)))
    for name in SMALL:
        path = run_dir / name
        acc = Redactions()
        if path.is_file() and Redactor(secrets | as_texts(new_values), extra).redact_file(path, acc=acc):
            hidden.extend(acc.at(name))
    return hidden


def scrub_record(record: RunRecord, secrets: Iterable[str], found: Iterable[bytes], extra_names: Iterable[str] = ()) -> RunRecord:
    """Every string and key of the record's encoding, and every value under a secret-named key,
    hidden; then the `redacted` entries themselves (`clean_entry`), with the manifest's own added.
    The scrub sees exactly the keys and values that are written, and the result is read back: a
    hidden value stays text and a hidden key is kept as an unknown one."""
    acc = Redactions()
    redactor = Redactor(set(secrets) | as_texts(found), extra_names)
    clean = RunRecord.partial(redactor.redact_obj(record.to_dict(), acc, skip=frozenset({"redacted"})), "the scrubbed record")
    entries = {*clean.redacted, *acc.at("manifest")}
    return replace(clean, redacted=sorted({clean_entry(redactor, str(e)) for e in entries}))


def clean_entry(redactor: Redactor, entry: str) -> str:
    """A ``"<where>: <name or pattern:kind>"`` entry with each part a label (`Redactor.redact_label`):
    a file's place or a name holding secret text never reaches the record of what was hidden."""
    where, sep, item = entry.partition(": ")
    return redactor.redact_label(where) + sep + redactor.redact_label(item) if sep else redactor.redact_label(entry)


def as_texts(values: Iterable[bytes]) -> set[str]:
    """Byte values as the texts `Redactor` and `save_secrets` take (undecodable bytes kept)."""
    return {v.decode("utf-8", "surrogateescape") for v in values}


def _place(run_dir: Path, path: Path) -> str:
    return str(path.relative_to(run_dir))
