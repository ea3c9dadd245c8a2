"""YAML in and out. The only module that imports ruamel.yaml (lazily: ~30 ms).

Reading is always safe-mode (C loader when available); writing keeps key order as given so
manifests diff cleanly. `.ledger.yaml` edits go through round-trip mode to keep user comments.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.errors import LedgerError
from ledger.fsutil import write_atomic

if TYPE_CHECKING:
    from ruamel.yaml import YAML


@functools.cache
def _loader() -> YAML:
    from ruamel.yaml import YAML

    try:
        return YAML(typ="safe", pure=False)
    except Exception:  # pragma: no cover - C extension missing
        return YAML(typ="safe", pure=True)


@functools.cache
def _dumper() -> YAML:
    """The dumper of every YAML document ledger writes: block style, keys in the order given."""
    from ruamel.yaml import YAML

    y = YAML(typ="safe", pure=True)
    y.default_flow_style = False  # type: ignore[assignment]
    y.sort_base_mapping_type_on_output = False  # type: ignore[assignment]  # keep our key order
    y.width = 4096
    y.allow_unicode = True
    return y


class YamlError(LedgerError):
    """Text that is not valid YAML."""


# What a YAML text read by ledger may hold. Ledger never writes anchors or aliases, and its
# deepest document (a manifest) nests about 6 levels; a pulled record is someone else's input, so
# an alias (the billion-laughs expansion) or a deep nest is refused before anything is built.
MAX_DEPTH = 64
MAX_BYTES = 16 << 20


def loads(text: str | bytes, what: str = "YAML", max_entries: Mapping[str, int] | None = None) -> Any:
    """Parse YAML text in safe mode; raise YamlError naming `what` on bad input.

    Refused before any object is built: more than MAX_BYTES, an anchor or alias, nesting deeper
    than MAX_DEPTH (checked on the parser's events, which libyaml yields without recursion), a
    top-level key of `max_entries` whose mapping or list holds more entries than its limit there
    (a manifest's `settings`: the events are read no further than that).
    """
    from ruamel.yaml.error import YAMLError

    if len(text) > MAX_BYTES:
        raise YamlError(f"{what} is {len(text)} bytes, more than ledger reads ({MAX_BYTES})", "the record is not one ledger wrote")
    try:
        _check_events(text, what, max_entries or {})
        return _loader().load(text)
    except YAMLError as exc:
        raise YamlError(f"{what} is not valid YAML: {_problem(exc)}") from exc
    except RecursionError as exc:  # pragma: no cover - the event check refuses deep nests first
        raise YamlError(f"{what} nests too deep") from exc


def _check_events(text: str | bytes, what: str, max_entries: Mapping[str, int]) -> None:
    from ruamel.yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, MappingStartEvent, NodeEvent

    depth = 0
    key: Any = None  # the top-level key whose value is being read
    top_mapping, next_is_key = False, False  # the document is a mapping; in it, the next node is a key
    limit, per_entry, nodes = 0, 1, 0  # the value counted: its limit, its nodes per entry, nodes so far
    for event in _events(text):
        if isinstance(event, AliasEvent) or (isinstance(event, NodeEvent) and event.anchor):
            raise YamlError(
                f"{what} uses a YAML anchor or alias, which ledger never writes", "the record is not one ledger wrote; it is skipped"
            )
        if isinstance(event, NodeEvent) and depth == 1 and top_mapping:
            if next_is_key:
                key = getattr(event, "value", None)
            elif isinstance(event, CollectionStartEvent) and key in max_entries:
                limit, per_entry, nodes = max_entries[key], 2 if isinstance(event, MappingStartEvent) else 1, 0
            next_is_key = not next_is_key
        elif isinstance(event, NodeEvent) and depth == 2 and limit:
            nodes += 1
            if nodes > limit * per_entry:
                raise YamlError(f"{what} holds more than {limit:,} {key} (the most ledger reads)", "the record is not one ledger wrote")
        if isinstance(event, CollectionStartEvent):
            if depth == 0:
                top_mapping = next_is_key = isinstance(event, MappingStartEvent)
            depth += 1
            if depth > MAX_DEPTH:
                raise YamlError(f"{what} nests deeper than {MAX_DEPTH} levels", "the record is not one ledger wrote; it is skipped")
        elif isinstance(event, CollectionEndEvent):
            depth -= 1
            if depth == 1:
                limit = 0


def _events(text: str | bytes) -> Iterator[Any]:
    """The parser's events: libyaml's own (C, ~2x faster than going through YAML.parse)."""
    try:
        from _ruamel_yaml import CParser  # type: ignore[import-not-found]
    except ImportError:  # pragma: no cover - C extension missing
        yield from _loader().parse(text)
        return
    parser = CParser(text)
    while (event := parser.get_event()) is not None:
        yield event
        if type(event).__name__ == "StreamEndEvent":
            return


def _problem(exc: Exception) -> str:
    """What is wrong and where, in one line: the problem and its line, not the context line
    before it ("while constructing a mapping" alone names neither the key nor the place)."""
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if problem:
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return " ".join(str(problem).split()) + where
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def dumps(data: Any) -> str:
    """Serialise plain data (dicts, lists, scalars) to block-style YAML, keys in given order."""
    buf = io.StringIO()
    _dumper().dump(data, buf)
    return buf.getvalue()


def warm_dumper() -> None:
    """Load ruamel.yaml and its writing code now, by writing a small document of every kind of
    value a manifest holds (`ledger run` does it on a thread while the job runs: the manifest's
    dump after the job then costs only itself)."""
    dumps({"a": {"b": [1, 2.5, True, None, "text", "two\nlines"]}, "c": []})


def dump_file(path: Path, data: Any) -> None:
    """Write YAML atomically (temp file then rename)."""
    write_atomic(path, dumps(data))
