"""The one redaction API: a `Redactor` every byte bound for git or the DVC cache goes through.

    r = Redactor(known=secret_values, extra_names=cfg.secret_names)
    clean = r.redact_line(line)            # one line, in order (a streaming filter)
    spans = r.flagged(body)                # which lines of a block need `redact_line` (fast)
    r.flush()                              # end of stream: closes an open PEM block
    r.redact_text(text) / r.redact_obj(manifest) / r.redact_file(src, dest)

Redaction never changes the number or order of lines: a PEM/OpenSSH private key printed over
several lines has each line's content replaced by ``***``. One Redactor holds per-stream state
(an open PEM block), so each stream (and each thread) uses its own.

Speed: almost no line of a training log holds a secret, so a block of lines is first scanned for
TRIGGERS, patterns that every secret the rules would hide also matches (tested on the corpus in
tests/test_secret_corpus.py), and only the lines they hit run the Python rules. Triggers run in
Hyperscan (one pass for all patterns, several GB/s, `bench/bench_redact.py`), or, where the
hyperscan wheel cannot be installed, in one combined Python regex (same result, slower). The
rules' triggers (ours, and the provider catalogue's, `ledger.redact.catalogue`) are one
database compiled once per process and kept; a run's known values are a second, literal-only
database (quick to compile, so each Redactor with its own values does not recompile the rules).
Rules run on the text without ANSI colour/cursor sequences and NUL bytes (`View`), and masks are
applied to the original bytes.

Bounded memory on long lines: a line longer than `WINDOW` + `OVERLAP` bytes is redacted in
windows. Each window is `WINDOW` + `OVERLAP` bytes; the rules run on the whole window, the output
is committed up to `WINDOW` (extended to the end of any secret that starts before it), and the
next window starts there, so a secret up to `OVERLAP` bytes long is found whatever window
boundary it straddles. A line fed in pieces (`redact_part`) keeps at most one window back.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import os
import platform
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from ledger.cache import user_cache_dir
from ledger.fsutil import write_atomic
from ledger.redact import rules
from ledger.redact.catalogue import CatalogueRule, catalogue
from ledger.redact.names import KNOWN_VALUE, MASK, SECRET_IN_NAME, Redactions, is_secret_name, keeps_value, plain_label
from ledger.redact.variants import MIN_LENGTH, variants

Span = tuple[int, int]
WINDOW = 1 << 20
OVERLAP = 64 << 10
MAX_FOUND = 10000  # values remembered from rule hits, to find them again in other forms
BLOCK = 4 << 20

_W = rb"(?:key|token|auth|pat|pass|pwd|secrets?|passwords?|passwd|passphrase|credentials?|private|apikey"
_N = rb"[\w.-]*"
# (pattern, caseless): every secret a rule hides is matched by one of these (see the module doc)
_TRIGGERS: tuple[tuple[bytes, bool], ...] = (
    # one pattern for the named forms: fewer engines woken by the common word "token"
    (
        _W + b"%s)" + _N + rb"(?:\\?[\"']\s{0,8}[:,]"  # "name": v   ['--name', v]
        rb"|[ \t]*[:=][ \t]*(?:[\"'\\]|\d{0,9}[^\d\s,;'\"\\})\]]|\d{10})"  # name=v, name: v (not a count)
        rb"| \.\.\.)",
        True,
    ),  # Megatron's argument dump
    (rb"-" + _N + _W + b"%s)" + _N + rb"(?:[ \t]|\\\n){1,8}[^\s-]", True),  # --name value
    (rb"\bhf_[A-Za-z0-9]{30}", False),
    (rb"\b(?:gh[pousr]_[A-Za-z0-9]{20}|github_pat_[A-Za-z0-9_]{20})", False),
    (rb"\bglpat-[A-Za-z0-9_-]{20}", False),
    (rb"\bsk-[A-Za-z0-9_-]{20}", False),
    (rb"\b(?:AKIA|ASIA)[A-Z0-9]{16}", False),
    (rb"\bxox[abposr]-[A-Za-z0-9-]{10}", False),
    (rb"\bAIza[A-Za-z0-9_-]{35}", False),
    (rb"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8}", False),
    (rb"\b(?:bearer\s+[A-Za-z0-9._~+/=-]{8}|basic\s+[A-Za-z0-9+/]{6})", True),
    (rb"://[^/\s:@'\"]{0,256}:[^/\s@'\"]{1,256}@", False),
    (rb"\bhttps?://[A-Za-z0-9_.~-]{16,256}@", False),
    (rb"-----(?:BEGIN|END) [A-Z0-9 ]{0,40}PRIVATE KEY", False),
    # name => v, name := v, name -> v; <password>v</password>; password%3Dv; netrc; commands
    (_W + b"%s)" + _N + rb"\\?[\"']?[ \t]*(?:=>|:=|->)", True),
    (_W + b"%s)" + rb"[\w.-]*(?:\s[^<>\n]*)?>[^<\n]", True),
    (_W + b"%s)" + _N + rb"%3D[^&\s]", True),
    (rb"%3A%2F%2F[^%\s/@]{0,256}%3A", True),
    (rb"password[ \t]+[^\s]", False),
    (rb"\b(?:docker|podman|nerdctl|sshpass|mysql|mysqldump|mysqladmin|mariadb)\b[^\n]*[ \t]-p", False),
    (rb"\b(?:curl|wget)\b[^\n]*[ \t](?:-u|--user|--proxy-user)", False),
    (rb"cookie\\?[\"']?[ \t]*[:=]", True),
)


def wrap_pieces(value: bytes) -> list[tuple[bytes, bytes]]:
    """The (head, tail) pairs a known value splits into when wrapped over two lines (each piece at
    least `MIN_LENGTH` long: a shorter piece is no secret by itself)."""
    return [(value[:k], value[k:]) for k in range(MIN_LENGTH, len(value) - MIN_LENGTH + 1)]


def trigger_patterns(
    extra_names: Iterable[str] = (), literals: Iterable[bytes] = (), rules_on: bool = True, wrapped: Iterable[bytes] = ()
) -> list[tuple[bytes, bool]]:
    """The trigger set: the built-in patterns with the configured name words, plus literals, plus
    the pieces of the `wrapped` values at a line end or a line start."""
    words = b"".join(b"|" + re.escape(w.lower().encode()) for w in extra_names)
    out = [(p.replace(b"%s", words), c) for p, c in _TRIGGERS] if rules_on else []
    if rules_on:
        out += [(re.sub(rb"\(\?P<\w+>", b"(?:", p), False) for _, p in rules.OWN_SHAPES]
        out += [(trigger, r.caseless) for r, trigger, _ in _triggers() if trigger is not None]
    out += [(re.escape(lit), False) for lit in sorted(set(literals))]
    # a superset: a head holds the value's first characters, a tail its last ones
    ends = {piece for value in wrapped for piece in (value[:MIN_LENGTH], value[-MIN_LENGTH:])}
    return out + [(re.escape(piece), False) for piece in sorted(ends - set(literals))]


# What a terminal draws but a rule must not see: colour/cursor sequences (CSI, OSC, two-byte
# escapes) and NUL bytes (UTF-16/32 text of ASCII characters). The rules scan the text without
# them (`visible`) and the mask is applied to the original bytes.
_HIDDEN = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|[@-Z\\-_])|\x00+")


class View:
    """`data` without `_HIDDEN` sequences, and the map of its offsets back to `data`."""

    def __init__(self, data: bytes):
        self.data = data
        self.segments: list[tuple[int, int]] = []  # (offset in the view, offset in data)
        if b"\x1b" not in data and b"\x00" not in data:
            self.text = data
            return
        parts: list[bytes] = []
        pos = at = 0
        for m in _HIDDEN.finditer(data):
            if m.start() > pos:
                self.segments.append((at, pos))
                parts.append(data[pos : m.start()])
                at += m.start() - pos
            pos = m.end()
        if pos < len(data):
            self.segments.append((at, pos))
            parts.append(data[pos:])
        self.text = b"".join(parts)

    @property
    def same(self) -> bool:
        """True when nothing was hidden (offsets are the same)."""
        return self.text is self.data

    def at(self, i: int) -> int:
        """The offset in `data` of the view's byte `i`."""
        if self.same or not self.segments:
            return i
        k = bisect.bisect_right(self.segments, (i, len(self.data) + 1)) - 1
        view_at, data_at = self.segments[max(k, 0)]
        return data_at + i - view_at

    def span(self, start: int, end: int) -> Span:
        """A span of the view as a span of `data`."""
        if self.same:
            return start, end
        if end <= start:
            return self.at(start), self.at(start)
        return self.at(start), self.at(end - 1) + 1


def hyperscan_compiles(pattern: bytes, caseless: bool) -> bool:
    """Whether Hyperscan takes `pattern` (True where no Hyperscan is installed: `re` takes any)."""
    try:
        import hyperscan
    except ImportError:
        return True
    try:
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        db.compile(expressions=[pattern], flags=[hyperscan.HS_FLAG_CASELESS if caseless else 0])
    except Exception:
        return False
    return True


# Set when Hyperscan refused the rules' trigger set: from then on each catalogue trigger is tried
# on its own first (`catalogue_triggers(checked=True)`), so one refused form costs only its rule.
_REFUSED: list[bool] = []


@functools.lru_cache(maxsize=2)
def catalogue_triggers(checked: bool = False) -> tuple[tuple[CatalogueRule, bytes | None, str], ...]:
    """Each catalogue rule with its Hyperscan trigger and how it got it: ``as-is``, ``translated``
    (lookarounds dropped), ``keywords`` (gitleaks' keywords: a literal scan), or ``fallback`` (no
    trigger: its regex scans each block in `re`).

    Unchecked (the usual case, `checked` false) each rule's first form is taken: compiling the
    whole trigger set is the check, one compile instead of one per rule (~1 s for the ~260 rules).
    Checked, after Hyperscan refused the set, each form is compiled on its own first."""
    out = []
    for rule in catalogue():
        if checked:
            pick = next(((path, p) for path, p in rule.candidates if hyperscan_compiles(p, rule.caseless)), None)
        else:
            pick = next(((path, p) for path, p in rule.candidates), None)
        out.append((rule, pick[1], pick[0]) if pick else (rule, None, "fallback"))
    return tuple(out)


def _triggers() -> tuple[tuple[CatalogueRule, bytes | None, str], ...]:
    return catalogue_triggers(checked=bool(_REFUSED))


_COMPILED: dict[tuple[tuple[bytes, bool], ...], bytes] = {}


def _database(hyperscan: Any, patterns: list[tuple[bytes, bool]], persist: bool = False) -> Any:
    """A Hyperscan block database of `patterns` with its own scratch (one per stream, so one per
    thread): compiled once per process (~0.1-0.4 s), then loaded from its serialized copy (~1 ms).
    With `persist` (the rules' triggers: no secret in them, never a run's known values) the
    serialized copy is also kept in the per-user cache (`_db_file`), so a new process loads it."""
    key = tuple(patterns)
    if key not in _COMPILED:
        serialized = _load_db_file(hyperscan, patterns) if persist else None
        if serialized is None:
            db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            db.compile(
                expressions=[p for p, _ in patterns],
                ids=list(range(len(patterns))),
                elements=len(patterns),
                flags=[hyperscan.HS_FLAG_CASELESS if c else 0 for _, c in patterns],
            )
            serialized = hyperscan.dumpb(db)
            if persist:
                _save_db_file(hyperscan, patterns, serialized)
        if len(_COMPILED) >= 8:  # the rules' set, and each Redactor's literals
            del _COMPILED[next(iter(_COMPILED))]  # the least recently used
        _COMPILED[key] = serialized
    _COMPILED[key] = _COMPILED.pop(key)  # most recently used last
    db = hyperscan.loadb(_COMPILED[key], hyperscan.HS_MODE_BLOCK)
    db.scratch = hyperscan.Scratch(db)
    return db


def _db_digest(hyperscan: Any, patterns: list[tuple[bytes, bool]]) -> bytes:
    """What names a serialized database: every pattern and its flag, the Hyperscan binding's
    version and the machine's architecture (sha256)."""
    h = hashlib.sha256(f"{getattr(hyperscan, '__version__', '?')}\0{platform.machine()}\0".encode())
    for pattern, caseless in patterns:
        h.update(len(pattern).to_bytes(8, "little") + pattern + (b"i" if caseless else b"-"))
    return h.digest()


def _db_file(hyperscan: Any, patterns: list[tuple[bytes, bool]]) -> Path:
    """Where the serialized database of `patterns` is kept for this user."""
    return user_cache_dir("hyperscan") / f"{_db_digest(hyperscan, patterns).hex()[:32]}.db"


def _load_db_file(hyperscan: Any, patterns: list[tuple[bytes, bool]]) -> bytes | None:
    """The cached serialized database, or None: absent, unreadable, damaged, made for other patterns
    (its first bytes are the digest of the patterns it was compiled from) or for another platform
    (Hyperscan refuses to load it) are all a miss, never an error."""
    path = _db_file(hyperscan, patterns)
    try:
        data = path.read_bytes()
        if data[:32] != _db_digest(hyperscan, patterns):
            return None
        hyperscan.loadb(data[32:], hyperscan.HS_MODE_BLOCK)  # checks its own header, version and platform
    except Exception:  # noqa: BLE001 - any failure is a miss: the database is compiled again
        return None
    return data[32:]


def _save_db_file(hyperscan: Any, patterns: list[tuple[bytes, bool]], data: bytes) -> None:
    """Keep the serialized database for the next process (an unwritable cache is only a miss)."""
    path = _db_file(hyperscan, patterns)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, _db_digest(hyperscan, patterns) + data)
    except OSError:
        pass


def _combined(patterns: list[tuple[bytes, bool]]) -> re.Pattern[bytes]:
    """`patterns` as one Python regex (where Hyperscan is missing or refused them)."""
    return re.compile(b"|".join((b"(?i:" if c else b"(?:") + p + b")" for p, c in patterns))


class _Engine:
    """Finds the end offsets of trigger matches in a block (Hyperscan, or Python's re)."""

    def __init__(self, patterns: list[tuple[bytes, bool]], persist: bool = False):
        self._db: Any = None
        self._re: re.Pattern[bytes] | None = None
        self.kind = "none"
        self.refused = False  # Hyperscan is there but refused a pattern
        if not patterns:
            return
        try:
            import hyperscan
        except ImportError:  # no wheel for this platform: the same result in re
            self._re, self.kind = _combined(patterns), "re"
            return
        try:
            self._db, self.kind = _database(hyperscan, patterns, persist), "hyperscan"
        except Exception:  # a pattern it refuses (`Redactor._get_engine` then checks each form): re meanwhile
            self._re, self.kind, self.refused = _combined(patterns), "re", True

    def ends(self, data: bytes) -> list[int]:
        """End offsets (exclusive) of the matches in `data`, in no particular order."""
        if self._db is not None:
            found: list[int] = []

            def hit(_id: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
                found.append(end)

            self._db.scan(data, match_event_handler=hit)
            return found
        if self._re is not None:
            return [m.end() for m in self._re.finditer(data)]
        return []


def secret_kinds_in_name(name: str, extra_names: Iterable[str] = ()) -> list[str]:
    """What a run name holds that the rules would hide (empty: the name is clean). A secret has
    no business in a name: the name goes raw into the commit message and the reflog."""
    acc = Redactions()
    Redactor(extra_names=extra_names).redact_text(name, acc)
    return acc.as_list()


def _block_head(line: bytes) -> re.Match[bytes] | None:
    """A YAML block-scalar header line (``password: |``), cheaply refused for most lines."""
    if b"|" not in line and b">" not in line:
        return None
    return rules.BLOCK_HEAD.match(View(line).text.rstrip(b"\r"))


class _Engines:
    """The rules' triggers (the same for every run: compiled once per process and kept) and the
    run's own literals (its known values: quick to compile) as two databases; a block is scanned
    by each (the literal one is a pure literal matcher, many GB/s)."""

    def __init__(self, static: list[tuple[bytes, bool]], literals: list[tuple[bytes, bool]]):
        self.parts = [e for e in (_Engine(static, persist=True), _Engine(literals)) if e.kind != "none"]
        self.kind = self.parts[0].kind if self.parts else "none"
        self.refused = any(e.refused for e in self.parts)

    def ends(self, data: bytes) -> list[int]:
        """End offsets of the matches of both databases."""
        if len(self.parts) == 1:
            return self.parts[0].ends(data)
        return [end for part in self.parts for end in part.ends(data)]


def line_span(body: bytes, i: int) -> Span:
    """``(start, end)`` of the line holding offset `i`, without the newlines."""
    start = body.rfind(b"\n", 0, i) + 1
    end = body.find(b"\n", i)
    return start, end if end >= 0 else len(body)


def _content_end(line: bytes) -> int:
    if line.endswith(b"\r\n"):
        return len(line) - 2
    return len(line) - 1 if line.endswith((b"\n", b"\r")) else len(line)


def _pem_after(left: int, open_before: bool, open_after: bool) -> int:
    """Lines a PEM block may still hold after one line (0: closed)."""
    if not open_after:
        return 0
    return left - 1 if open_before else rules.PEM_MAX_LINES


class Redactor:
    """Redacts lines, blocks, texts, files and manifests with the rules and the run's known values."""

    def __init__(self, known: Iterable[str | bytes] = (), extra_names: Iterable[str] = (), rules_on: bool = True):
        self.extra = frozenset(n.upper() for n in extra_names)
        self.rules_on = rules_on
        needles: set[bytes] = set()
        for value in known:
            needles.update(variants(value))
        self.needles = sorted(needles, key=len, reverse=True)
        # values long enough to be found in two pieces, one at a line's end and one at the next's start
        self.wrapped = sorted({v if isinstance(v, bytes) else v.encode("utf-8", "surrogateescape") for v in known} - {b""})
        self.wrapped = [v for v in self.wrapped if len(v) >= 2 * MIN_LENGTH and b"\n" not in v and len(v) <= 256]
        self.found: set[bytes] = set()  # values the rules removed (memory only, never written)
        self._engine: _Engines | None = None
        self._pem_left = 0
        self._carry = b""  # a long line fed in pieces: the part not yet committed
        self._pem_open_in_line = False
        self._block: tuple[int, int] | None = None  # an open YAML block scalar (see `_block_after`)

    # --- the scan --------------------------------------------------------------------------
    def _secret(self, name: str) -> bool:
        return is_secret_name(name, self.extra)

    @property
    def engine(self) -> str:
        """``hyperscan`` or ``re``: what finds the trigger matches."""
        return self._get_engine().kind

    def _get_engine(self) -> _Engines:
        if self._engine is None:  # compiled on first use: a one-line redaction never pays for it
            literals = trigger_patterns(literals=self.needles, rules_on=False, wrapped=self.wrapped)
            self._engine = _Engines(trigger_patterns(self.extra, rules_on=self.rules_on), literals)
            if self._engine.refused and not _REFUSED:  # a catalogue form Hyperscan refuses: each tried alone
                _REFUSED.append(True)
                self._engine = _Engines(trigger_patterns(self.extra, rules_on=self.rules_on), literals)
        return self._engine

    def trigger_ends(self, data: bytes) -> list[int]:
        """End offsets of every trigger match in `data`, in no order: where a secret the rules or
        the known values would hide may end (no match: nothing in `data` is hidden)."""
        ends = self._get_engine().ends(data)
        if self.rules_on:
            ends += [m.end() for r, trigger, _ in _triggers() if trigger is None for m in r.pattern.finditer(data)]
        return ends

    def flagged(self, body: bytes, start: int = 0) -> list[Span]:
        """Sorted spans of the lines of `body[start:]` that `redact_line` must see, in order.

        Lines are separated by ``\\n``. Includes every line inside a PEM block (open at the start,
        or opened here). Does not change the state: call `redact_line` on each span in order.
        """
        view = View(body)
        ends = self.trigger_ends(view.text)
        hits = sorted({line_span(body, max(view.at(max(end - 1, 0)), start)) for end in ends if view.at(max(end - 1, 0)) >= start})
        if self._pem_left == 0 and self._block is None and not any(b"PRIVATE KEY" in body[s:e] or _block_head(body[s:e]) for s, e in hits):
            return hits
        out: list[Span] = []
        left, pos, k = self._pem_left, start, 0
        block = self._block
        scratch = Redactions()
        while pos < len(body):
            if left == 0 and block is None:
                while k < len(hits) and hits[k][0] < pos:
                    k += 1
                if k == len(hits):
                    break
                s, e = hits[k]
            else:
                s = pos
                e = body.find(b"\n", pos)
                e = len(body) if e < 0 else e
            out.append((s, e))
            line = body[s:e]
            content = View(line[: _content_end(line)]).text
            _, open_after = rules.pem_step(content, left > 0, scratch)
            left = _pem_after(left, left > 0, open_after)
            block = self._block_after(content, block)[0]
            pos = e + 1
        return out

    def _block_after(self, content: bytes, block: tuple[int, int] | None) -> tuple[tuple[int, int] | None, bool]:
        """The YAML block-scalar state after one line's visible content, and whether the line is
        inside the block (its value is masked whole). A block is (indent of its key, lines left)."""
        if block is not None:
            body = content.lstrip(b" \t")
            if not body:
                return block, False
            if len(content) - len(body) > block[0] and block[1] > 0:
                return (block[0], block[1] - 1), True
        m = _block_head(content) if self.rules_on else None
        if m is not None and self._secret(m.group("name").decode("ascii")):
            return (len(m.group("ind")), rules.BLOCK_MAX_LINES), False
        return None, False

    # --- lines ---------------------------------------------------------------------------------
    def _spans(self, data: bytes, acc: Redactions, pem_open: bool) -> tuple[list[Span], bool]:
        """Spans of `data` to mask: the rules run on its visible text (`View`), mapped back."""
        view = View(data)
        text = view.text
        spans, pem_open = rules.pem_step(text, pem_open, acc)
        if self.rules_on:
            spans += rules.rule_spans(text, acc, self._secret, self.found if len(self.found) < MAX_FOUND else None)
        if self.needles:
            hits = rules.literal_spans(text, self.needles) + self._pieces(text)
            if hits:
                acc.add_kind(KNOWN_VALUE)
                spans += hits
        return [view.span(s, e) for s, e in spans], pem_open

    def _pieces(self, line: bytes) -> list[Span]:
        """A known value's head at the end of this line or its tail at the start (wrapped): each
        piece at least `MIN_LENGTH` long and shorter than the value (`wrap_pieces`). A head holds
        the value's first `MIN_LENGTH` bytes and a tail its last ones, so only where those are is
        a piece compared (a line costs a few finds per value, not one per split of it)."""
        out: list[Span] = []
        if not self.wrapped or len(line) < MIN_LENGTH:
            return out
        stripped = line.lstrip(b" \t")
        lead = len(line) - len(stripped)
        for value in self.wrapped:
            n = len(value)
            i = line.find(value[:MIN_LENGTH], max(0, len(line) - (n - MIN_LENGTH)))
            while i >= 0:  # the line ends with value[:k], MIN_LENGTH <= k <= n - MIN_LENGTH
                if len(line) - i >= MIN_LENGTH and value.startswith(line[i:]):
                    out.append((i, len(line)))
                i = line.find(value[:MIN_LENGTH], i + 1)
            j = stripped.find(value[-MIN_LENGTH:], 0, n - MIN_LENGTH)
            while j >= 0:  # the line starts with value[n - t:], MIN_LENGTH <= t <= n - MIN_LENGTH
                if value.endswith(stripped[: j + MIN_LENGTH]):
                    out.append((lead, lead + j + MIN_LENGTH))
                j = stripped.find(value[-MIN_LENGTH:], j + 1, n - MIN_LENGTH)
        return out

    def redact_line(self, line: bytes, acc: Redactions | None = None) -> bytes:
        """One line (with or without its line end); returns it unchanged when nothing is secret."""
        acc = acc if acc is not None else Redactions()
        if len(line) > WINDOW + OVERLAP:
            self._carry = b""
            return self.redact_part(line, True, acc)
        end = _content_end(line)
        content = line[:end]
        open_before = self._pem_left > 0
        spans, open_after = self._spans(content, acc, open_before)
        self._pem_left = _pem_after(self._pem_left, open_before, open_after)
        if self.rules_on and (self._block is not None or b"|" in content or b">" in content):
            self._block, inside = self._block_after(View(content).text, self._block)
            if inside:
                acc.add_kind("yaml-block-scalar")
                body = len(content) - len(content.lstrip(b" \t\x00"))
                spans.append((body, len(content)))
        if not spans:
            return line
        return rules.mask_spans(content, spans) + line[end:]

    def redact_part(self, piece: bytes, last: bool, acc: Redactions | None = None) -> bytes:
        """The next piece of one long line; returns the bytes ready to write (see the module doc).

        Call with ``last=True`` for the piece that ends the line (it may be empty).
        """
        acc = acc if acc is not None else Redactions()
        data = self._carry + piece if self._carry else piece
        if not self._carry:
            self._pem_open_in_line = self._pem_left > 0
        open_before = self._pem_left > 0
        pem_open = self._pem_open_in_line
        out: list[bytes] = []
        pos = 0
        while True:
            rest = len(data) - pos
            if rest < WINDOW + OVERLAP and not last:
                break
            final = rest <= WINDOW + OVERLAP
            win = data[pos:] if final else data[pos : pos + WINDOW + OVERLAP]
            if final:
                win = win[: _content_end(win)]
            # the rules only where the trigger scan hits: a clean 200 MB line costs one fast pass
            hit = pem_open or bool(self._get_engine().ends(win))
            spans = self._spans(win, acc, pem_open)[0] if hit else []
            cut = len(win) if final else WINDOW
            for s, e in rules.merge(spans):
                if s < cut:
                    cut = max(cut, e)
            out.append(rules.mask_spans(win[:cut], [(s, min(e, cut)) for s, e in spans if s < cut]))
            _, pem_open = rules.pem_step(win[:cut], pem_open, Redactions())
            if final:
                out.append(data[pos + len(win) :])  # the line end
                pos = len(data)
                break
            pos += cut
        self._carry = data[pos:]
        self._pem_open_in_line = pem_open
        if last:
            self._carry = b""
            self._pem_left = _pem_after(self._pem_left, open_before, pem_open)
        return b"".join(out)

    def redact_lines(self, block: bytes, acc: Redactions | None = None) -> bytes:
        """A block of whole lines (the last may lack its newline): the fast path for throughput."""
        acc = acc if acc is not None else Redactions()
        spans = self.flagged(block)
        if not spans:
            return block
        parts: list[bytes] = []
        pos = 0
        for s, e in spans:
            parts.append(block[pos:s])
            parts.append(self.redact_line(block[s:e], acc))
            pos = e
        parts.append(block[pos:])
        return b"".join(parts)

    def flush(self) -> bool:
        """End of the stream: forget an open PEM block; True when one was open (it was masked)."""
        was_open = self._pem_left > 0
        self._pem_left = 0
        self._carry = b""
        return was_open

    def found_values(self) -> set[bytes]:
        """Values the rules removed that are worth looking for again in other forms."""
        return {v for v in self.found if MIN_LENGTH <= len(v) <= 4096 and MASK.encode() not in v}

    # --- texts, objects, files -------------------------------------------------------------------
    def redact_text(self, text: str, acc: Redactions | None = None) -> str:
        """A whole text (launcher script, a dirty tracked file, a note): rules may span lines."""
        acc = acc if acc is not None else Redactions()
        data = text.encode("utf-8", "surrogateescape")
        view = View(data)
        vis = view.text
        spans = rules.pem_text_spans(vis, acc)
        if self.rules_on:
            spans += rules.rule_spans(vis, acc, self._secret, self.found if len(self.found) < MAX_FOUND else None)
            spans += rules.block_scalar_spans(vis, acc, self._secret)
        if self.needles and (hits := rules.literal_spans(vis, self.needles) + self._wrapped(vis)):
            acc.add_kind(KNOWN_VALUE)
            spans += hits
        if not spans:
            return text
        return rules.mask_spans(data, [view.span(s, e) for s, e in spans]).decode("utf-8", "surrogateescape")

    def _wrapped(self, text: bytes) -> list[Span]:
        """Known values wrapped over lines (a line break, and the next line's indent, inside
        them): one span per piece (`mask_spans` masks each line's part)."""
        if b"\n" not in text:
            return []
        joined = View(text.replace(b"\r\n", b"\x00\x00").replace(b"\n", b"\x00"))  # breaks: hidden bytes
        out: list[Span] = []
        for needle in self.needles:
            if len(needle) < 2 * MIN_LENGTH:
                continue
            i = joined.text.find(needle)
            while i >= 0:
                out.append(joined.span(i, i + len(needle)))
                i = joined.text.find(needle, i + 1)
        return out

    def redact_obj(self, obj: Any, acc: Redactions, skip: frozenset[str] = frozenset()) -> Any:
        """A JSON-like object (the manifest): values under secret-named keys, every string, and
        every key (`redact_label`: a key is written too)."""
        if isinstance(obj, dict):
            out: dict[Any, Any] = {}
            for key, value in obj.items():
                if key in skip:
                    out[key] = value
                    continue
                name = self.redact_label(key, acc) if isinstance(key, str) else key
                while name in out:  # two keys hidden alike stay two
                    name = f"{name} #{len(out)}"
                hidden = name != key
                if isinstance(key, str) and isinstance(value, str) and (hidden or self._secret(key)) and not keeps_value(key, value):
                    acc.add_name(name)
                    out[name] = MASK
                else:
                    out[name] = self.redact_obj(value, acc)
            return out
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.redact_obj(v, acc) for v in obj)
        if isinstance(obj, str):
            return self.redact_text(obj, acc)
        return obj

    def redact_label(self, label: str, acc: Redactions | None = None) -> str:
        """A name ledger writes (a key, a setting's name, a file's place in `redacted`): one that
        cannot be a name is `HIDDEN_LABEL`, one holding a secret shape or known value is masked
        (recorded as ``secret-in-a-name``). The rules see the label alone, so a name that only
        reads as secret (``secrets.yaml``) is kept."""
        acc = acc if acc is not None else Redactions()
        plain = plain_label(label)
        found = Redactions()
        clean = self.redact_text(plain, found) if plain == label else plain
        if clean != label:
            acc.add_kind(SECRET_IN_NAME)
        return clean

    def redact_file(self, src: Path, dest: Path | None = None, acc: Redactions | None = None) -> bool:
        """Redact a file into `dest` (default: in place, atomically); True when anything changed.

        Reads whole lines in blocks of about `BLOCK` bytes; a longer line goes through
        `redact_part`, so memory stays bounded whatever the file holds.
        """
        acc = acc if acc is not None else Redactions()
        dest = dest if dest is not None else src
        tmp = dest.with_name(f".{dest.name}.redact")
        changed = False
        with open(src, "rb") as f, open(tmp, "wb") as out:
            for data, kind in _chunks(f):
                if kind == "lines":
                    clean = self.redact_lines(data, acc)
                else:
                    clean = self.redact_part(data, kind == "end", acc)
                changed |= clean != data
                out.write(clean)
        self.flush()
        if changed or dest != src:
            os.replace(tmp, dest)
        else:
            tmp.unlink()
        return changed


def _chunks(f: BinaryIO) -> Iterator[tuple[bytes, str]]:
    """A file as ("lines", whole lines) blocks and, for a line longer than `BLOCK`, its pieces
    ("part", then "end" for the piece holding its line end)."""
    pending = b""
    in_long = False
    while data := f.read(BLOCK):
        if pending:
            data, pending = pending + data, b""
        if in_long:
            nl = data.find(b"\n")
            if nl < 0:
                yield data, "part"
                continue
            yield data[: nl + 1], "end"
            in_long, data = False, data[nl + 1 :]
        cut = data.rfind(b"\n") + 1
        if cut:
            yield data[:cut], "lines"
        rest = data[cut:]
        if len(rest) >= BLOCK:
            yield rest, "part"
            in_long = True
        else:
            pending = rest
    if in_long:
        yield pending, "end"
    elif pending:
        yield pending, "lines"
