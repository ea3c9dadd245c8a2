"""What the ledger looks like right now, as one short string, and the pages made for it.

A page depends on two things only: the branch tip (every run, tag, note and archive is a commit)
and the staging area (runs in progress: their staged manifest, output so far, heat log, whether
their `ledger run` is alive); and, for the ages it shows, the minute. `version` reads them cheaply
(one ref, one folder listing, a few `stat`s: ~1 ms); `PageMemo` keeps pages by (version, page), so a page is made again only once the
ledger changed, however often a browser asks.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import msgspec

from ledger.opening import open_branch
from ledger.storage import staging

STAGED_FILES = ("manifest.json", staging.RAW_OUTPUT, "run/heat.log")


def _stamp(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return "-"
    return f"{st.st_size}.{st.st_mtime_ns}"


def staging_signature(root: Path) -> str:
    """Each staged run, its files' sizes and times, and whether its `ledger run` is alive."""
    parts = []
    for staged in staging.list_staged(root):
        stamps = ",".join(_stamp(staged.dir / name) for name in STAGED_FILES)
        parts.append(f"{staged.id}:{stamps}:{int(staged.owner_alive())}")
    return ";".join(parts)


def version(start: Path, now: float) -> str:
    """The ledger's state as a short string: it changes when the tip or the staging area does,
    and each minute (`now`, unix seconds), so the pages' ages ("5 min") stay true."""
    repo, _cfg, tip = open_branch(start)
    text = f"{tip}|{staging_signature(repo.root)}|{int(now // 60)}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Made(msgspec.Struct, frozen=True):
    """A page as it was made: HTTP status and body (an error page has its status)."""

    status: int
    body: str


class PageMemo:
    """The last `size` pages made, by (version, page key); one page is made at a time (ledger's
    readers open git and the listing cache, which are not shared between threads)."""

    def __init__(self, size: int = 64):
        self._size = size
        self._made: OrderedDict[tuple[str, str], Made] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, at: str, key: str, make: Callable[[], Made]) -> Made:
        with self._lock:
            found = self._made.get((at, key))
            if found is not None:
                self._made.move_to_end((at, key))
                return found
            made = make()
            self._made[(at, key)] = made
            while len(self._made) > self._size:
                self._made.popitem(last=False)
            return made
