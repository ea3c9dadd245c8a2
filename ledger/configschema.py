"""The schema of `.ledger.yaml` (pydantic models built from `ledger.config`'s declaration), and its one-line errors.

Imported only to validate a file `ledger.configload.load_config` has not seen before (pydantic costs
~120 ms of start-up). Nothing here names a key: the models, the checks and the mapping onto
`Config` are all derived from `ledger.configkeys.declared()`.
"""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator

from ledger.config import CONFIG_NAME, DEFAULTS, SECTIONS, Config
from ledger.configkeys import Declared, declared
from ledger.errors import LedgerError


def _regex(pattern: str) -> str:
    try:
        re.compile(pattern.removeprefix("^").encode("utf-8", "surrogateescape"))
    except re.error as exc:
        raise ValueError(f"regex {pattern!r} does not compile ({exc})") from exc
    return pattern


def _branch(name: str) -> str:
    from ledger.storage.git import valid_branch_name  # lazily: the heat modules import this one

    if not valid_branch_name(name):
        raise ValueError(f"{name!r} is not a branch name git accepts")
    return name


_CHECKS: dict[str, Callable[[str], str]] = {"regex": _regex, "branch": _branch}  # `key(each=...)`


class _Section(BaseModel):
    # strict: `debug_data: "no"` is an error, not True; frozen: the values are facts of the run
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _file_type(d: Declared) -> Any:
    """The key's type as the file writes it (a list for a tuple), with its checks and bounds attached."""
    spec, ann = d.spec, d.type
    optional = ann == (str | None)
    if optional:
        ann = str
    if spec.choices:
        ann = Literal[spec.choices]
    if typing.get_origin(ann) is tuple:
        item: Any = typing.get_args(ann)[0]
        if spec.each:
            item = Annotated[item, AfterValidator(_CHECKS[spec.each])]
        ann = list[item]  # type: ignore[valid-type]
    elif spec.each:
        ann = Annotated[ann, AfterValidator(_CHECKS[spec.each])]
    if typing.get_origin(ann) is dict and spec.values is not None:
        ann = dict[str, spec.values]  # type: ignore[name-defined]
    if spec.gt is not None or spec.ge is not None:
        ann = Annotated[ann, Field(gt=spec.gt, ge=spec.ge)]
    return ann | None if optional else ann


def _field(d: Declared) -> tuple[Any, Any]:
    default = d.file_default
    if isinstance(default, list | dict):
        return _file_type(d), Field(default_factory=type(default), description=d.spec.doc)
    return _file_type(d), Field(default=default, description=d.spec.doc)


def _above(pairs: list[tuple[str, str]]) -> Callable[[BaseModel], BaseModel]:
    """The section's `key(above=...)` rules: `pause_at` must be above `resume_at`."""

    def check(self: BaseModel) -> BaseModel:
        for high, low in pairs:
            a, b = getattr(self, high), getattr(self, low)
            if a <= b:
                raise ValueError(f"{high} ({a:g}) must be above {low} ({b:g})")
        return self

    return check


def _models() -> type[_Section]:
    """The model of the whole file, and one per section, from the declaration."""
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    above: dict[str, list[tuple[str, str]]] = {}
    for d in declared():
        section, name = d.spec.section, d.spec.name
        (sections.setdefault(section, {}) if section else top)[name] = _field(d)
        if section and section not in top:
            top[section] = None  # keeps the file's order; the model comes below
        if d.spec.above:
            above.setdefault(section, []).append((name, d.spec.above))
    for section, fields in sections.items():
        validators: dict[str, Any] = {"above": model_validator(mode="after")(_above(above[section]))} if section in above else {}
        model = create_model(  # type: ignore[call-overload]
            f"{section.title().replace('_', '')}Section", __base__=_Section, __doc__=SECTIONS[section], __validators__=validators, **fields
        )
        top[section] = (model, Field(default_factory=model, description=SECTIONS[section]))
    return create_model("ConfigFile", __base__=_Section, __doc__="The whole `.ledger.yaml` as written (every key optional).", **top)  # type: ignore[call-overload, no-any-return]


ConfigFile = _models()


def _from_file(f: BaseModel) -> Config:
    """The `Config` the code reads: each declared key's value at its attribute, merged as declared."""
    flat: dict[str, Any] = {}
    grouped: dict[str, dict[str, Any]] = {}  # `Config.heat`: a dataclass of its own keys
    for d in declared():
        value: Any = f
        for part in d.path.split("."):
            value = getattr(value, part)
        if d.spec.merge == "extend":
            value = tuple(d.default) + tuple(value)
        elif d.spec.merge == "overlay":
            merged = {**d.default, **{k: None if v is None else str(v) for k, v in value.items()}}
            value = {k: v for k, v in merged.items() if v is not None}
        elif isinstance(value, list):
            value = tuple(value)
        elif isinstance(value, dict):
            value = dict(value)
        if len(d.attr) == 1:
            flat[d.attr[0]] = value
        else:
            grouped.setdefault(d.attr[0], {})[d.attr[1]] = value
    return Config(**flat, **{name: type(getattr(DEFAULTS, name))(**values) for name, values in grouped.items()})


def _drop_nulls(data: dict[str, Any]) -> dict[str, Any]:
    """`key:` with nothing after it means "the default", at the top level and in sections."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if value is None:
            continue
        if isinstance(value, dict) and key in SECTIONS:
            value = {k: v for k, v in value.items() if v is not None}
        out[key] = value
    return out


def _known_keys(loc: tuple[Any, ...]) -> list[str]:
    model: type[BaseModel] = ConfigFile
    for part in loc[:-1]:
        info = model.model_fields.get(str(part))
        ann = info.annotation if info else None
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return []
        model = ann
    return list(model.model_fields)


def explain(exc: ValidationError) -> LedgerError:
    """The first schema error as one line: the key path, what is wrong, how to fix it."""
    err = exc.errors()[0]
    loc = tuple(err["loc"])
    path = ".".join(str(p) for p in loc) or "(top level)"
    kind = err["type"]
    if kind == "extra_forbidden":
        known = _known_keys(loc)
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        fix = f"did you mean '{close[0]}'?" if close else f"known keys here: {', '.join(known)}"
        return LedgerError(f"{CONFIG_NAME}: unknown key '{path}'", f"{fix} Fix or remove it in {CONFIG_NAME}")
    msg = "Input should be a section: a mapping of keys" if kind == "model_type" else str(err["msg"]).removeprefix("Value error, ")
    given = err.get("input")
    shown = "" if isinstance(given, dict | list) or kind == "value_error" else f" (got {given!r})"
    return LedgerError(
        f"{CONFIG_NAME}: {path}: {msg}{shown}", f"fix '{path}' in {CONFIG_NAME}; `ledger init` in an empty repo writes an example"
    )


def parse_config(data: Any) -> Config:
    """Validate the parsed YAML of `.ledger.yaml` (None: an empty file) into a `Config`."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise LedgerError(f"{CONFIG_NAME} must be a mapping of keys", f"see `ledger init` for an example {CONFIG_NAME}")
    try:
        return _from_file(ConfigFile.model_validate(_drop_nulls(data)))
    except ValidationError as exc:
        raise explain(exc) from None
