"""Naming runs: full id, unique id prefix, `--name`, `latest`, `latest~N`. Parsed in one place."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from ledger.errors import RunNotFound, UsageError
from ledger.manifest import RUN_ID_RE
from ledger.storage.git import Repo
from ledger.storage.listing import Listing, load_listing
from ledger.storage.store import RunEntry, find_run, run_commits
from ledger.textfmt import plural

LATEST_RE = re.compile(r"^latest(?:~(\d+))?$")
SAFE_RE = re.compile(r"^[A-Za-z0-9._~:+-][A-Za-z0-9._~:+@-]*$")


@dataclass(frozen=True)
class RunRef:
    """A user's name for a run, classified."""

    text: str
    kind: str  # "id" | "latest" | "other"
    back: int = 0

    @classmethod
    def parse(cls, text: str) -> RunRef:
        if not text or not SAFE_RE.match(text) or ".." in text or "/" in text:
            raise UsageError(f"'{text}' is not a run name", "name a run by id, id prefix, --name, latest or latest~N")
        if RUN_ID_RE.match(text):
            return cls(text, "id")
        m = LATEST_RE.match(text)
        if m:
            return cls(text, "latest", int(m.group(1) or 0))
        return cls(text, "other")


def resolve(repo: Repo, tip: str | None, text: str, listing: Listing | None = None) -> RunEntry:
    """The run a name refers to at `tip`; unknown or ambiguous names list the candidates."""
    ref = RunRef.parse(text)
    if tip is None:
        raise RunNotFound(f"no run named '{text}': no runs recorded yet", "record one with `ledger run -- CMD`")
    if ref.kind == "id":
        entry = find_run(repo, tip, ref.text)
        if entry is None:
            raise RunNotFound(f"no run with id '{text}'", "`ledger list` shows the runs")
        return entry
    if ref.kind == "latest":
        runs = run_commits(repo, tip, ref.back + 1)
        if len(runs) <= ref.back:
            raise RunNotFound(f"'{text}': only {plural(len(runs), 'run')} recorded", "`ledger list` shows the runs")
        entry = find_run(repo, tip, runs[ref.back][0])
        if entry is None:
            raise RunNotFound(f"'{text}' points at run {runs[ref.back][0]} which has no folder", "the branch is damaged")
        return entry
    listing = listing or load_listing(repo, tip)
    by_name = [m["id"] for m in listing.ordered() if m.get("name") == text]
    if len(by_name) == 1:
        return listing.entries[by_name[0]]
    if len(by_name) > 1:
        raise RunNotFound(f"run name '{text}' is ambiguous: {', '.join(by_name)}",
                          "name one of these ids (or a unique prefix) instead")
    by_prefix = sorted(rid for rid in listing.entries if rid.startswith(text))
    if len(by_prefix) == 1:
        return listing.entries[by_prefix[0]]
    if len(by_prefix) > 1:
        shown = ", ".join(by_prefix[:10]) + (" ..." if len(by_prefix) > 10 else "")
        raise RunNotFound(f"run prefix '{text}' is ambiguous: {shown}", "give more characters of the id")
    names = sorted({m["name"] for m in listing.manifests.values() if m.get("name")})
    close = difflib.get_close_matches(text, names, n=3, cutoff=0.6)
    if close:
        raise RunNotFound(f"no run named '{text}'", f"did you mean {' or '.join(close)}? `ledger list` shows the runs")
    recent = [m["id"] + (f" ({m['name']})" if m.get("name") else "") for m in listing.ordered()[-5:]]
    hint = "recent runs: " + ", ".join(recent) if recent else "`ledger list` shows the runs"
    raise RunNotFound(f"no run named '{text}'", hint)
