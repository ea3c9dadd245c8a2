"""Load `.ledger.yaml`: read it, decode it into `ledger.config.Config` (msgspec), and say what is wrong in one line.

Nothing here names a key: msgspec checks the types and bounds declared on `Config`'s fields, and
the named checks of `key(check=..., above=...)` run over `ledger.config.declared()`.
"""

from __future__ import annotations

import hashlib
import json
import re
import typing
from pathlib import Path
from typing import Any

import msgspec

from ledger import yamlio
from ledger.cache import LocalCache
from ledger.config import CONFIG_NAME, Config, Declared, declared, sections
from ledger.errors import LedgerError
from ledger.storage.git import valid_branch_name

_HINT = f"`ledger init` in an empty repo writes an example {CONFIG_NAME}"


def load_config(root: Path, common_dir: Path | None = None) -> Config:
    """Read and validate `<root>/.ledger.yaml` (absent means all defaults).

    With the repository's `common_dir`, a file validated before is read from the cache there:
    what it validated to, as plain JSON named by the sha256 of the file's bytes and the version of
    the code this module runs (`ledger.cache`), and decoded through `Config` again (the YAML parser costs ~30 ms of
    start-up; msgspec decodes the entry in microseconds). An entry that does not validate is a miss.
    """
    path = root / CONFIG_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Config()
    except OSError as exc:  # a folder of that name, no permission
        raise LedgerError(
            f"cannot read {CONFIG_NAME}: {exc.strerror or exc}", f"make {path} a readable file, or remove it for the defaults"
        ) from exc
    cache, key = None, hashlib.sha256(raw).hexdigest()
    if common_dir is not None:
        cache = LocalCache(common_dir, "config", code=(__name__,))
        plain = cache.read_json(key)
        if plain is not None:
            try:
                return parse_config(plain)
            except LedgerError:
                pass  # damaged or foreign: read the file

    cfg = parse_config(yamlio.loads(raw, CONFIG_NAME))
    if cache is not None:
        plain = _as_json(cfg)
        if plain is not None:
            cache.write_json(key, plain)
    return cfg


def _as_json(cfg: Config) -> Any | None:
    """`cfg` as plain JSON data that decodes back to it, or None where JSON cannot hold it whole
    (a YAML date or a number as a key in a free mapping such as `image_probes`)."""
    plain = json.loads(msgspec.json.encode(cfg))
    try:
        return plain if msgspec.convert(plain, Config) == cfg else None
    except msgspec.ValidationError:
        return None


def parse_config(data: Any) -> Config:
    """Validate the parsed YAML of `.ledger.yaml` (None: an empty file) into a `Config`."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise LedgerError(f"{CONFIG_NAME} must be a mapping of keys", _HINT)
    data = _drop_nulls(data)
    try:
        cfg = msgspec.convert(data, Config)
    except msgspec.ValidationError as exc:
        raise _explain(str(exc), data) from None
    for d in declared():
        _check(d, cfg)
    return cfg


def _drop_nulls(data: dict[str, object]) -> dict[str, object]:
    """`key:` with nothing after it means "the default", at the top level and in sections (the
    file as parsed: any value, msgspec checks each one next)."""
    out: dict[str, object] = {}
    for name, value in data.items():
        if value is None:
            continue
        if isinstance(value, dict) and name in sections():
            value = {k: v for k, v in value.items() if v is not None}
        out[name] = value
    return out


def _check(d: Declared, cfg: Config) -> None:
    """The named checks of key `d` (`key(check=..., above=...)`) on its value in `cfg`."""
    value = d.value(cfg)
    check = d.extra("check")
    if check == "regex":
        for i, pattern in enumerate(value):
            try:
                # as the log splitter compiles them: on bytes, anchored at a line start
                re.compile(pattern.removeprefix("^").encode("utf-8", "surrogateescape"))
            except re.error as exc:
                raise _refusal(f"{d.path}.{i}", f"regex {pattern!r} does not compile ({exc})") from None
    elif check == "branch":
        if not valid_branch_name(value):
            raise _refusal(d.path, f"{value!r} is not a branch name git accepts")
    low = d.extra("above")
    if low is not None:
        floor = getattr(cfg if len(d.attr) == 1 else getattr(cfg, d.attr[0]), low)
        if value <= floor:
            raise _refusal(d.section or "(top level)", f"{d.name} ({value:g}) must be above {low} ({floor:g})")


def _refusal(path: str, problem: str) -> LedgerError:
    return LedgerError(f"{CONFIG_NAME}: {path}: {problem}", f"fix '{path}' in {CONFIG_NAME}; {_HINT}")


# msgspec's message: "<problem> - at `$.heat_guard.interval_s`" (or "- at `key` in `$.x`": a key
# of that mapping); the words of JSON's types are YAML's here.
_WHERE = re.compile(r" - at (`key` in )?`\$([^`]*)`$")
_PART = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[\.\.\.\]")
_WORDS = {"`object`": "`mapping`", "`array`": "`list`"}
_UNKNOWN = re.compile(r"^Object contains unknown field `(.*)`$")


def _explain(message: str, data: dict[str, object]) -> LedgerError:
    """msgspec's error as one line: the key path (`logs.engine_patterns.0`), what is wrong, the fix."""
    where = _WHERE.search(message)
    problem = message[: where.start()] if where else message
    parts = [m.group(1) or m.group(2) or "*" for m in _PART.finditer(where.group(2) if where else "")]  # "*": any value of a mapping
    unknown = _UNKNOWN.match(problem)
    if unknown:
        import difflib  # lazily: only an unknown key needs it

        name = ".".join([*parts, unknown.group(1)])
        known = [f.encode_name for f in msgspec.structs.fields(sections()[parts[0]][0] if parts else Config)]
        close = difflib.get_close_matches(unknown.group(1), known, n=1)
        fix = f"did you mean '{close[0]}'?" if close else f"known keys here: {', '.join(known)}"
        return LedgerError(f"{CONFIG_NAME}: unknown key '{name}'", f"{fix} Fix or remove it in {CONFIG_NAME}")
    path = ".".join(parts) or "(top level)"
    if len(parts) == 1 and parts[0] in sections() and problem.startswith("Expected `object`"):
        problem = "Expected a section: a mapping of keys"
    elif problem.startswith("Invalid enum value"):
        problem = f"Expected one of {', '.join(_choices(path))}"
    for word, ours in _WORDS.items():
        problem = problem.replace(word, ours)
    problem = problem[:1].lower() + problem[1:]
    if where and where.group(1):  # a key of the mapping at `path`
        return _refusal(path, f"its keys: {problem}")
    given = _at(data, parts)
    if isinstance(given, str | int | float | bool):  # a scalar: show it, not just its type
        problem = re.sub(r", got `[^`]*`$", "", problem) + f", got {given!r}"
    return _refusal(path, problem)


def _choices(path: str) -> list[str]:
    """The strings key `path` allows (its type: `Literal[...] | None`)."""
    (d,) = (d for d in declared() if d.path == path)
    return [c for member in typing.get_args(d.type) for c in typing.get_args(member)]


def _at(data: Any, parts: list[str]) -> Any:
    """The value at `parts` of the parsed file, or None where the path does not lead to one."""
    for part in parts:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return None
    return data
