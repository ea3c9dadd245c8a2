"""Naming runs: full id, unique id prefix, `--name`, `latest`, `latest~N`. Parsed in one place."""

from __future__ import annotations

import re

import msgspec

from ledger.errors import RunNotFound, UsageError
from ledger.manifest import RUN_ID_RE
from ledger.storage.git import Repo
from ledger.storage.listing import Listing, load_listing
from ledger.storage.store import RunEntry, find_run, run_commits
from ledger.textfmt import plural

LATEST_RE = re.compile(r"^latest(?:~(\d+))?$")
BACK_RE = re.compile(r"^(.+)~(\d+)$")  # NAME~N: the Nth older run of that name
# what could be the start of a run id (20261201-102332-94d6): never a name, it would shadow ids
ID_PREFIX_RE = re.compile(r"^\d{1,8}(?:-\d{0,6}(?:-[0-9a-f]{0,4})?)?$")
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
NAME_PUNCTUATION = "._-+@:"  # besides letters and digits, what a run name may hold (the fix below says so)


def _name_char(c: str) -> bool:
    # a byte that is not UTF-8 arrives as a surrogate (U+DC80-U+DCFF): a name in another encoding,
    # stored losslessly (manifest `raw_bytes`), so it counts as a letter
    return c.isalnum() or c in NAME_PUNCTUATION or "\udc80" <= c <= "\udcff"


def check_run_name(name: str) -> None:
    """Refuse a `--name` that would break commit messages, shadow ids or `latest`, look like an
    option, or hold anything but letters, digits and `NAME_PUNCTUATION` (a quote, `<`, `=`, a
    space: a name is a word a shell, a page and a spreadsheet take as it is)."""
    fix = "pick a name of letters, digits and . _ - + @ :, e.g. --name lr-3e-6"
    shown = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if not name.strip():
        raise UsageError("--name is empty", fix)
    if CONTROL_RE.search(name):
        raise UsageError(f"--name {shown!r} holds a newline or control character", fix)
    if "/" in name or "~" in name:
        raise UsageError(f"--name {shown!r} holds '/' or '~' (they name paths and older runs)", fix)
    if name.startswith("-"):
        raise UsageError(f"--name {shown!r} starts with '-' (it would read as an option)", fix)
    if LATEST_RE.match(name):
        raise UsageError(f"--name {shown!r} is reserved (latest, latest~N name the newest runs)", fix)
    if RUN_ID_RE.match(name) or ID_PREFIX_RE.match(name):
        raise UsageError(f"--name {shown!r} looks like a run id or the start of one", fix)
    bad = sorted({c for c in name if not _name_char(c)})
    if bad:
        raise UsageError(f"--name {shown!r} holds {' '.join(repr(c) for c in bad)}, which a name cannot", fix)


class RunRef(msgspec.Struct, frozen=True):
    """A user's name for a run, classified."""

    text: str
    kind: str  # "id" | "latest" | "other"
    back: int = 0

    @classmethod
    def parse(cls, text: str) -> RunRef:
        if not text or CONTROL_RE.search(text) or "/" in text:
            raise UsageError(f"{text!r} is not a run name", "name a run by id, id prefix, --name, NAME~N, latest or latest~N")
        if RUN_ID_RE.match(text):
            return cls(text, "id")
        m = LATEST_RE.match(text)
        if m:
            return cls(text, "latest", int(m.group(1) or 0))
        m = BACK_RE.match(text)
        if m:
            return cls(m.group(1), "other", int(m.group(2)))
        return cls(text, "other")


def _text(name: str) -> str:
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def runs_named(listing: Listing, name: str, repo: Repo | None = None, tip: str | None = None) -> list[str]:
    """Ids of the runs called `name`, oldest first (a name with bad bytes matches its stored text).

    With `repo` and `tip`, "oldest" is by the branch's first-parent history, never by the
    `started:` time a record claims (a pulled run saying 2099 must not become what a name means);
    a run folder no run commit of that history added counts as the oldest of all."""
    want = _text(name)
    found = [f.id for f in listing.named((name, want))]
    if repo is None or tip is None or len(found) < 2:
        return found
    position = {rid: -i for i, (rid, _c) in enumerate(run_commits(repo, tip))}  # newest first: 0, -1, ...
    unlisted = -len(position) - 1
    return sorted(found, key=lambda rid: position.get(rid, unlisted))


def own_runs(repo: Repo, branch: str) -> set[str]:
    """The ids of the runs this clone recorded: the branch's reflog (local to the clone, never
    pushed or pulled) has a `ledger: record run <id>` entry for each."""
    prefix = "ledger: record run "
    return {m.strip()[len(prefix) :] for m in repo.reflog_messages(f"refs/heads/{branch}") if m.startswith(prefix)}


def run_commit_map(repo: Repo, tip: str) -> dict[str, str]:
    """run id -> the first-parent commit that recorded it."""
    out: dict[str, str] = {}
    for rid, commit in run_commits(repo, tip):
        out.setdefault(rid, commit)
    return out


def shared_name_note(repo: Repo, tip: str, listing: Listing, entry: RunEntry, own: set[str]) -> str | None:
    """When the run's name is also another run's and one of them was recorded in another clone
    (not in `own`, this clone's runs), who made each: the author of each run commit."""
    name = listing.name_of(entry.id)
    if not name:
        return None
    same = runs_named(listing, name, repo, tip)
    if len(same) < 2 or all(rid in own for rid in same):
        return None
    commits = run_commit_map(repo, tip)

    def who(rid: str) -> str:
        commit = commits.get(rid)
        where = "here" if rid in own else "in another clone"
        return f"{rid} ({where}, by {repo.commit_identity(commit)[0] if commit else 'no run commit'})"

    return (
        f"the name '{name}' is shared by {len(same)} runs, not all recorded here: "
        + ", ".join(who(rid) for rid in same[::-1][:5])
        + f"; '{name}' means {entry.id}, the newest on the branch"
    )


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
        return _latest(repo, tip, ref, text)
    listing = listing or load_listing(repo, tip)
    entry = _named(repo, tip, listing, ref, text)
    if entry is None:
        raise _not_found(listing, ref)
    return entry


def _latest(repo: Repo, tip: str, ref: RunRef, text: str) -> RunEntry:
    """`latest` / `latest~N`: the newest run on the branch, or the Nth before it."""
    runs = run_commits(repo, tip, ref.back + 1)
    if len(runs) <= ref.back:
        raise RunNotFound(f"'{text}': only {plural(len(runs), 'run')} recorded", "`ledger list` shows the runs")
    entry = find_run(repo, tip, runs[ref.back][0])
    if entry is None:
        raise RunNotFound(f"'{text}' points at run {runs[ref.back][0]} which has no folder", "the branch is damaged")
    return entry


def _named(repo: Repo, tip: str, listing: Listing, ref: RunRef, text: str) -> RunEntry | None:
    """NAME / NAME~N (the newest unarchived run of that name, `ledger archive`), else a unique id
    prefix; None when neither names a run."""
    by_name = runs_named(listing, ref.text, repo, tip)
    archived = {f.id for f in listing.named((ref.text, _text(ref.text))) if f.archived}
    by_name = [rid for rid in by_name if rid not in archived] or by_name
    if by_name:  # a reused name means the newest run of that name; NAME~N reaches older ones
        if ref.back >= len(by_name):
            raise RunNotFound(f"'{text}': only {plural(len(by_name), 'run')} named '{ref.text}'", "`ledger list` shows the runs")
        return _entry(listing, by_name[-1 - ref.back])
    if ref.back:
        return None
    by_prefix = listing.with_prefix(text)
    if len(by_prefix) > 1:
        shown = ", ".join(by_prefix[:10]) + (" ..." if len(by_prefix) > 10 else "")
        raise RunNotFound(f"run prefix '{text}' is ambiguous: {shown}", "give more characters of the id")
    if not by_prefix:
        return None
    # a run the listing could not read is looked up as its full id is: its folder checked again
    return find_run(repo, tip, by_prefix[0]) if by_prefix[0] in listing.broken else _entry(listing, by_prefix[0])


def _entry(listing: Listing, run_id: str) -> RunEntry:
    found = listing.entry(run_id)
    assert found is not None  # the listing named it
    return found


def _not_found(listing: Listing, ref: RunRef) -> RunNotFound:
    """No run of that name: the closest names (a typo), else the most recent runs."""
    shown = listing.shown()
    names = sorted({f.name for f in shown if f.name})
    import difflib  # only for a run not found

    # the same name but for case first (`cfga-s1` for `CfgA-s1`), then a typo's nearest (NAME~N too),
    # compared without case: difflib alone ranks `cfga-s2` above `CfgA-s1`
    by_case: dict[str, list[str]] = {}
    for n in names:
        by_case.setdefault(n.lower(), []).append(n)
    wanted = ref.text.lower()
    nearest = [wanted] if wanted in by_case else []
    nearest += [n for n in difflib.get_close_matches(wanted, list(by_case), n=3, cutoff=0.6) if n != wanted]
    close = [name for n in nearest for name in by_case[n]][:3]
    if close:
        return RunNotFound(f"no run named '{ref.text}'", f"did you mean {' or '.join(close)}? `ledger list` shows the runs")
    recent = [f.id + (f" ({f.name})" if f.name else "") for f in shown[-5:]]
    hint = "recent runs: " + ", ".join(recent) if recent else "`ledger list` shows the runs"
    return RunNotFound(f"no run named '{ref.text}'", hint)
