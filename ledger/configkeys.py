"""The declaration of `.ledger.yaml` (`ledger.config`), read: every key with its spec, type and default.

`ledger.config` declares each key once, as a `Config`/`HeatConfig` field with `metadata=key(...)`;
this module walks those fields (`declared()`) for everything derived from them: the schema
(`ledger/configschema.py`), `ledger init`'s file (`default_text()`) and docs/config.md
(`tools/gen_docs.py`). Apart from `ledger.config` so that a run's start-up, which imports that,
never builds these classes nor resolves the annotations.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import dataclass
from typing import Any

from ledger.config import DEFAULTS, Config

if typing.TYPE_CHECKING:
    from ledger.config import Check, Merge


@dataclass(frozen=True)
class KeySpec:
    """How one key of `.ledger.yaml` is written: everything about it but its type and default."""

    path: str  # the YAML path, "heat_guard.pause_at"
    doc: str  # one line: what it means
    gt: float | None = None  # a number above this
    ge: float | None = None  # a number at least this
    above: str | None = None  # a number above this sibling key ("resume_at")
    each: Check | None = None  # a check of the value (a list: of each item)
    choices: tuple[str, ...] = ()  # the only strings allowed
    values: Any = None  # the type of a mapping's values as written, when wider than the field's
    merge: Merge = "replace"  # extend: added to the field's default; overlay: merged over it, null removes
    example: str | None = None  # `ledger init` writes the key commented out, with this value

    @property
    def section(self) -> str:
        """The section the key is in ("heat_guard"), or "" at the top level."""
        return self.path.rpartition(".")[0]

    @property
    def name(self) -> str:
        """The key's name inside its section ("pause_at")."""
        return self.path.rpartition(".")[2]


@dataclass(frozen=True)
class Declared:
    """One declared key: its spec, where `Config` keeps it, its type there and its default."""

    spec: KeySpec
    attr: tuple[str, ...]  # ("heat", "pause_at"): the attribute path in `Config`
    type: Any  # the field's annotation, resolved
    default: Any  # the `Config` default (for extend/overlay keys: the built-ins the file adds to)

    @property
    def path(self) -> str:
        return self.spec.path

    @property
    def file_default(self) -> Any:
        """The default as the file writes it: nothing added to the built-ins for extend/overlay keys."""
        if self.spec.merge == "extend":
            return []
        if self.spec.merge == "overlay":
            return {}
        return list(self.default) if isinstance(self.default, tuple) else self.default


@functools.cache
def declared() -> tuple[Declared, ...]:
    """Every key of `.ledger.yaml`, in the order `ledger init` writes them (the declaration, walked).

    A field whose type is a dataclass (`Config.heat`) holds a section's keys in its own fields."""
    out: list[Declared] = []

    def walk(cls: type, prefix: tuple[str, ...], defaults: Any) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            value = getattr(defaults, f.name)
            if dataclasses.is_dataclass(hints[f.name]):
                walk(hints[f.name], (*prefix, f.name), value)
            else:
                out.append(Declared(KeySpec(**f.metadata), (*prefix, f.name), hints[f.name], value))

    walk(Config, (), DEFAULTS)
    return tuple(out)


def builtins(d: Declared) -> str:
    """What an extend/overlay key's value is added to (its `Config` default), as a clause; else ""."""
    if d.spec.merge == "extend":
        return "built in: " + ", ".join(f"`{p}`" for p in d.default)
    if d.spec.merge == "overlay":
        return "built in: " + yaml_value(d.default)
    return ""


def yaml_value(value: Any) -> str:
    """`value` as a YAML flow scalar, list or mapping (the defaults and examples are plain words)."""
    if isinstance(value, str) and (value in ("", "true", "false", "null", "~") or value.replace(".", "", 1).isdigit()):
        return f'"{value}"'  # read back as a string, not a number or a boolean
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(yaml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {yaml_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def layout() -> list[tuple[str, tuple[Declared, ...]]]:
    """The file's shape, in order: ("", (key,)) for a top-level key, (section, its keys) for a section."""
    keys = declared()
    out: list[tuple[str, tuple[Declared, ...]]] = []
    for d in keys:
        section = d.spec.section
        if not section:
            out.append(("", (d,)))
        elif all(name != section for name, _ in out):  # a section's keys together, where its first is declared
            out.append((section, tuple(m for m in keys if m.spec.section == section)))
    return out


def default_text() -> str:
    """What `ledger init` writes: every key with its default (or commented, with an example) and meaning."""
    lines = ["# ledger configuration (see docs/config.md). Every key is optional."]
    for section, members in layout():
        if not section:
            lines.append(_line(members[0], "", ""))
            continue
        hidden = "# " if all(m.spec.example is not None for m in members) else ""  # nothing to show
        lines.append(f"{hidden}{section}:")
        lines += [_line(m, "  ", hidden) for m in members]
    return "\n".join(lines) + "\n"


def _line(d: Declared, indent: str, hidden: str) -> str:
    if d.spec.example is None:
        text = f"{indent}{d.spec.name}: {yaml_value(d.file_default)}"
    else:  # commented out, with an example: its default is "none" or an empty mapping
        text = f"{hidden + indent if hidden else indent + '# '}{d.spec.name}: {d.spec.example}"
    doc = f"{d.spec.doc}; {builtins(d)}" if d.spec.merge == "overlay" else d.spec.doc  # the long lists: docs/config.md
    return f"{text:<36} # {doc}"
