"""`Rx`: a bytes regex compiled on first use and run only where a literal it needs is present.

The redaction rules are many and most texts never reach most of them, so none is compiled at
import (every `ledger run` would pay for all of them) and each is skipped by a cheap `in` test
where the literal every match holds is absent.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator


class Rx:
    """A bytes regex compiled when first run, and run only where `needs` is: a literal every
    match holds (a cheap `in` test; tests check each against the regex itself)."""

    __slots__ = ("source", "needs", "_rx")

    def __init__(self, source: bytes, needs: bytes = b""):
        self.source = source
        self.needs = needs
        self._rx: re.Pattern[bytes] | None = None

    @property
    def rx(self) -> re.Pattern[bytes]:
        """The compiled pattern."""
        if self._rx is None:
            self._rx = re.compile(self.source)
        return self._rx

    def search(self, data: bytes, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[bytes] | None:
        if self.needs and data.find(self.needs, pos, endpos) < 0:
            return None
        return self.rx.search(data, pos, endpos)

    def match(self, data: bytes) -> re.Match[bytes] | None:
        if self.needs and self.needs not in data:
            return None
        return self.rx.match(data)

    def finditer(self, data: bytes, pos: int = 0, endpos: int = sys.maxsize) -> Iterator[re.Match[bytes]]:
        if self.needs and data.find(self.needs, pos, endpos) < 0:
            return iter(())
        return self.rx.finditer(data, pos, endpos)
