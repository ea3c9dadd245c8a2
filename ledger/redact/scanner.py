"""The one redaction API: a `Redactor` every byte bound for git or the DVC cache goes through.

    r = Redactor(known=secret_values, extra_names=cfg.secrets.names)
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

import functools
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from ledger.redact import engine, rules
from ledger.redact.blocks import Block, block_after, block_head, block_scalar_spans, pem_after, pem_step, pem_text_spans
from ledger.redact.catalogue import CatalogueRule, catalogue
from ledger.redact.engine import Engine as _Engine
from ledger.redact.engine import Pattern, hyperscan_compiles
from ledger.redact.names import KNOWN_VALUE, MASK, MASK_BYTES, SECRET_IN_NAME, Redactions, is_secret_name, keeps_value, plain_label
from ledger.redact.rules import NameTest
from ledger.redact.spans import Span, line_span, literal_spans, mask_spans, merge
from ledger.redact.triggers import TRIGGERS
from ledger.redact.variants import MIN_LENGTH, variants, wrapped_piece_spans, wrapped_spans
from ledger.redact.view import View, content_end

WINDOW = 1 << 20
OVERLAP = 64 << 10
MAX_FOUND = 10000  # values remembered from rule hits, to find them again in other forms
BLOCK = 4 << 20
# the process's and the user's database caches, which their tests reach through this module
_COMPILED, _database, _db_file, _load_db_file = engine._COMPILED, engine._database, engine._db_file, engine._load_db_file


def trigger_patterns(
    extra_names: Iterable[str] = (), literals: Iterable[bytes] = (), rules_on: bool = True, wrapped: Iterable[bytes] = ()
) -> list[Pattern]:
    """The trigger set: the built-in patterns with the configured name words, plus literals, plus
    the pieces of the `wrapped` values at a line end or a line start."""
    out = _rule_triggers(extra_names) if rules_on else []
    out += [(re.escape(lit), False) for lit in sorted(set(literals))]
    # a superset: a head holds the value's first characters, a tail its last ones
    ends = {piece for value in wrapped for piece in (value[:MIN_LENGTH], value[-MIN_LENGTH:])}
    return out + [(re.escape(piece), False) for piece in sorted(ends - set(literals))]


def _rule_triggers(extra_names: Iterable[str]) -> list[Pattern]:
    """The rules' triggers: ours with the configured name words, our own shapes (their named
    groups made plain), the catalogue's."""
    words = b"".join(b"|" + re.escape(w.lower().encode()) for w in extra_names)
    out = [(p.replace(b"%s", words), c) for p, c in TRIGGERS]
    out += [(re.sub(rb"\(\?P<\w+>", b"(?:", p), False) for _, p in rules.OWN_SHAPES]
    return out + [(trigger, r.caseless) for r, trigger, _ in _triggers() if trigger is not None]


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


def secret_kinds_in_name(name: str, extra_names: Iterable[str] = ()) -> list[str]:
    """What a run name holds that the rules would hide (empty: the name is clean). A secret has
    no business in a name: the name goes raw into the commit message and the reflog."""
    acc = Redactions()
    Redactor(extra_names=extra_names).redact_text(name, acc)
    return acc.as_list()


class _Engines:
    """The rules' triggers (the same for every run: compiled once per process and kept) and the
    run's own literals (its known values: quick to compile) as two databases; a block is scanned
    by each (the literal one is a pure literal matcher, many GB/s)."""

    def __init__(self, static: list[Pattern], literals: list[Pattern]):
        self.parts = [e for e in (_Engine(static, persist=True), _Engine(literals)) if e.kind != "none"]
        self.kind = self.parts[0].kind if self.parts else "none"
        self.refused = any(e.refused for e in self.parts)

    def ends(self, data: bytes) -> list[int]:
        """End offsets of the matches of both databases."""
        if len(self.parts) == 1:
            return self.parts[0].ends(data)
        return [end for part in self.parts for end in part.ends(data)]


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
        self._block: Block | None = None  # an open YAML block scalar (`ledger.redact.blocks.block_after`)

    # --- the scan --------------------------------------------------------------------------
    def _secret(self, name: str) -> bool:
        return is_secret_name(name, self.extra)

    @property
    def _block_secret(self) -> NameTest | None:
        """The name test that opens a YAML block scalar (None: the rules are off)."""
        return self._secret if self.rules_on else None

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
        if self._pem_left == 0 and self._block is None and not any(b"PRIVATE KEY" in body[s:e] or block_head(body[s:e]) for s, e in hits):
            return hits
        return self._flagged_with_blocks(body, start, hits)

    def _flagged_with_blocks(self, body: bytes, start: int, hits: list[Span]) -> list[Span]:
        """`flagged` where a PEM block or a YAML block scalar is open or may open: the hit lines,
        and every line from where a block opens to where it closes."""
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
                s, e = pos, body.find(b"\n", pos)
                e = len(body) if e < 0 else e
            out.append((s, e))
            line = body[s:e]
            content = View(line[: content_end(line)]).text
            _, open_after = pem_step(content, left > 0, scratch)
            left = pem_after(left, left > 0, open_after)
            block = block_after(content, block, self._block_secret)[0]
            pos = e + 1
        return out

    # --- lines ---------------------------------------------------------------------------------
    def _spans(self, data: bytes, acc: Redactions, pem_open: bool) -> tuple[list[Span], bool]:
        """Spans of `data` to mask: the rules run on its visible text (`View`), mapped back."""
        view = View(data)
        text = view.text
        spans, pem_open = pem_step(text, pem_open, acc)
        if self.rules_on:
            spans += rules.rule_spans(text, acc, self._secret, self.found if len(self.found) < MAX_FOUND else None)
        if self.needles:
            hits = literal_spans(text, self.needles) + wrapped_piece_spans(text, self.wrapped)
            if hits:
                acc.add_kind(KNOWN_VALUE)
                spans += hits
        return [view.span(s, e) for s, e in spans], pem_open

    def redact_line(self, line: bytes, acc: Redactions | None = None) -> bytes:
        """One line (with or without its line end); returns it unchanged when nothing is secret."""
        acc = acc if acc is not None else Redactions()
        if len(line) > WINDOW + OVERLAP:
            self._carry = b""
            return self.redact_part(line, True, acc)
        end = content_end(line)
        content = line[:end]
        open_before = self._pem_left > 0
        spans, open_after = self._spans(content, acc, open_before)
        self._pem_left = pem_after(self._pem_left, open_before, open_after)
        if self.rules_on and (self._block is not None or b"|" in content or b">" in content):
            self._block, inside = block_after(View(content).text, self._block, self._block_secret)
            if inside:
                acc.add_kind("yaml-block-scalar")
                body = len(content) - len(content.lstrip(b" \t\x00"))
                spans.append((body, len(content)))
        if not spans:
            return line
        return mask_spans(content, spans) + line[end:]

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
        while last or len(data) - pos >= WINDOW + OVERLAP:
            final = len(data) - pos <= WINDOW + OVERLAP
            win = data[pos:] if final else data[pos : pos + WINDOW + OVERLAP]
            if final:
                win = win[: content_end(win)]
            clean, cut = self._window(win, final, pem_open, acc)
            out.append(clean)
            _, pem_open = pem_step(win[:cut], pem_open, Redactions())
            if final:
                out.append(data[pos + len(win) :])  # the line end
                pos = len(data)
                break
            pos += cut
        self._carry = data[pos:]
        self._pem_open_in_line = pem_open
        if last:
            self._carry = b""
            self._pem_left = pem_after(self._pem_left, open_before, pem_open)
        return b"".join(out)

    def _window(self, win: bytes, final: bool, pem_open: bool, acc: Redactions) -> tuple[bytes, int]:
        """One window of a long line redacted, and how much of it is committed: up to `WINDOW`
        (all of a final one), extended to the end of a secret that starts before that."""
        # the rules only where the trigger scan hits: a clean 200 MB line costs one fast pass
        hit = pem_open or bool(self._get_engine().ends(win))
        spans = self._spans(win, acc, pem_open)[0] if hit else []
        cut = len(win) if final else WINDOW
        for s, e in merge(spans):
            if s < cut:
                cut = max(cut, e)
        return mask_spans(win[:cut], [(s, min(e, cut)) for s, e in spans if s < cut]), cut

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
        return {v for v in self.found if MIN_LENGTH <= len(v) <= 4096 and MASK_BYTES not in v}

    # --- texts, objects, files -------------------------------------------------------------------
    def redact_text(self, text: str, acc: Redactions | None = None) -> str:
        """A whole text (launcher script, a dirty tracked file, a note): rules may span lines."""
        acc = acc if acc is not None else Redactions()
        data = text.encode("utf-8", "surrogateescape")
        view = View(data)
        vis = view.text
        spans = pem_text_spans(vis, acc)
        if self.rules_on:
            spans += rules.rule_spans(vis, acc, self._secret, self.found if len(self.found) < MAX_FOUND else None)
            spans += block_scalar_spans(vis, acc, self._secret)
        if self.needles and (hits := literal_spans(vis, self.needles) + wrapped_spans(vis, self.needles)):
            acc.add_kind(KNOWN_VALUE)
            spans += hits
        if not spans:
            return text
        return mask_spans(data, [view.span(s, e) for s, e in spans]).decode("utf-8", "surrogateescape")

    def redact_obj(self, obj: Any, acc: Redactions, skip: frozenset[str] = frozenset()) -> Any:
        """A JSON-like object (the manifest): values under secret-named keys, every string, and
        every key (`redact_label`: a key is written too)."""
        if isinstance(obj, dict):
            return self._redact_mapping(obj, acc, skip)
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.redact_obj(v, acc) for v in obj)
        if isinstance(obj, str):
            return self.redact_text(obj, acc)
        return obj

    def _redact_mapping(self, obj: dict[Any, Any], acc: Redactions, skip: frozenset[str]) -> dict[Any, Any]:
        """`redact_obj` of a mapping: each key redacted as a label, a string under a secret (or
        hidden) name masked whole, every other value redacted in turn; `skip`'s keys kept as is."""
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
