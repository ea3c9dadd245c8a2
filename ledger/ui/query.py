"""The runs table's query string, read with `ledger list`'s own grammar.

`/?where=lr=1e-6&where=train/loss<1&tag=baseline&since=3d&name=lr-*&state=running&metric=eval/*
&archived=1&sort=name&desc=1`: each `where`, `tag`, `since`, `name`, `state` is exactly the
`ledger list` option of that name (`ledger.compare.runfilter` parses them), `metric` is
`--metric`, `archived=1` is `--archived`. A condition that does not parse is left out and named in
a warning; the rest of the query still applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlencode

import msgspec

from ledger.compare.runfilter import RunFilter, Where, check_states, parse_since
from ledger.errors import UsageError

Pairs = Sequence[tuple[str, str]]
SORT_KEYS = ("id", "name", "state", "age", "changed", "tags", "note")
METRIC_SORT = "metric:"  # sort=metric:train/loss
FILTER_KEYS = ("where", "tag", "since", "name", "state", "metric", "archived")


class TableQuery(msgspec.Struct, frozen=True):
    """What the runs table shows: the filter, the metric columns, the sort, and what was refused."""

    flt: RunFilter = msgspec.field(default_factory=RunFilter)
    metric_globs: tuple[str, ...] = ()
    sort: str = "age"
    desc: bool = False  # age ascending is newest first, as `ledger list`
    warnings: tuple[str, ...] = ()
    pairs: tuple[tuple[str, str], ...] = ()  # the filter's own query pairs, for links that keep it


def values(pairs: Pairs, key: str) -> list[str]:
    """Every non-blank value a query string gives `key`, in order."""
    return [v.strip() for k, v in pairs if k == key and v.strip()]


def last(pairs: Pairs, key: str) -> str | None:
    """The last non-blank value of `key` (a repeated parameter: the last one counts), or None."""
    found = values(pairs, key)
    return found[-1] if found else None


def _parsed_where(texts: list[str], warnings: list[str]) -> tuple[Where, ...]:
    out = []
    for text in texts:
        try:
            out.append(Where.parse(text))
        except UsageError as exc:
            warnings.append(f"left out: {exc.one_line()}")
    return tuple(out)


def _since(text: str | None, warnings: list[str]) -> str | None:
    if text is None:
        return None
    try:
        return parse_since(text)
    except UsageError as exc:
        warnings.append(f"left out: {exc.one_line()}")
        return None


def _states(texts: list[str], warnings: list[str]) -> tuple[str, ...]:
    try:
        return check_states(texts)
    except UsageError as exc:
        warnings.append(f"left out: {exc.one_line()}")
        return ()


def _sort(text: str | None, warnings: list[str]) -> str:
    if text is None or text in SORT_KEYS or (text.startswith(METRIC_SORT) and len(text) > len(METRIC_SORT)):
        return text or "age"
    warnings.append(f"left out: sort={text!r} is not a column (sort by {', '.join(SORT_KEYS)} or metric:NAME)")
    return "age"


def read_query(pairs: Pairs) -> TableQuery:
    """The table's query from the URL's pairs (repeated keys kept in order)."""
    warnings: list[str] = []
    flt = RunFilter(
        where=_parsed_where(values(pairs, "where"), warnings),
        name=last(pairs, "name"),
        states=_states(values(pairs, "state"), warnings),
        tags=tuple(values(pairs, "tag")),
        since=_since(last(pairs, "since"), warnings),
        archived=last(pairs, "archived") in ("1", "on", "true", "yes"),
    )
    kept = tuple((k, v.strip()) for k, v in pairs if k in FILTER_KEYS and v.strip())
    return TableQuery(
        flt=flt,
        metric_globs=tuple(values(pairs, "metric")),
        sort=_sort(last(pairs, "sort"), warnings),
        desc=last(pairs, "desc") == "1",
        warnings=tuple(warnings),
        pairs=kept,
    )


def sort_link(query: TableQuery, column: str) -> str:
    """The table's URL sorted by `column`: the same filter; a second click reverses the order."""
    desc = not query.desc if query.sort == column else False
    pairs = [*query.pairs, ("sort", column)] + ([("desc", "1")] if desc else [])
    return "/?" + urlencode(pairs)


def without_where(query: TableQuery) -> TableQuery:
    """The query without its `where` conditions (one named a key no run has)."""
    flt = RunFilter((), query.flt.name, query.flt.states, query.flt.tags, query.flt.since, query.flt.archived)
    pairs = tuple((k, v) for k, v in query.pairs if k != "where")
    return TableQuery(flt, query.metric_globs, query.sort, query.desc, query.warnings, pairs)
