"""Whether a name matches any of a list of fnmatch globs, the question settings, metrics and
environment filters all ask.

The globs are joined into one regular expression with `fnmatch.translate` (the standard library's
own translation, so the answer is `any(fnmatch.fnmatchcase(name, g) for g in globs)` exactly) and
compiled once per list: a search over thousands of runs asks it for every setting of every run.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable
from functools import lru_cache


@lru_cache(maxsize=256)
def _compiled(globs: tuple[str, ...]) -> Callable[[str], object]:
    if not globs:
        return lambda name: None
    return re.compile("|".join(fnmatch.translate(g) for g in globs)).match


def matches_any(name: str, globs: Iterable[str]) -> bool:
    """Whether `name` matches one of `globs` (case-sensitive fnmatch, as `fnmatchcase`)."""
    return _compiled(tuple(globs))(name) is not None


def matcher(globs: Iterable[str]) -> Callable[[str], bool]:
    """`matches_any` with the globs bound once, for a loop over many names."""
    match = _compiled(tuple(globs))
    return lambda name: match(name) is not None
