"""YAML out and back: what ledger writes reads back as the same data, tricky words included."""

from __future__ import annotations

import random
import string
import sys
from pathlib import Path
from typing import Any

from conftest import git, ledger

from ledger import yamlio

# words ruamel's resolver or analyzer treats specially, and their neighbours
TRICKY = [
    "", "true", "True", "FALSE", "yes", "no", "on", "off", "y", "n", "null", "Null", "~", "<<", "=", "!", "&", "*",
    "0", "-1", "+1", "01", "0o17", "0x1F", "0b101", "1_000", "1.5", ".5", "1e5", "1E-5", "-.inf", ".NaN", "12:30",
    "2026-01-01", "2026-01-01T10:00:00Z", "2026-1-1 1:00:00", "---", "...", "--- a", "-", "- a", "-a", "?", "? a",
    "?a", ":", ": a", ":a", "a:", "a: b", "a:b", "#", "# a", "a #b", "a#b", "it's", 'x"y', "a\\b", "a'b\\c\"d",
    " a", "a ", "a  b", "@x", "%x", "`x", "|", ">", "[a", "a]", "{a}", "a,b", "a, b", "/usr/bin:/bin",
    "https://user:pw@host/x?y=1#z", "sk-***", "runs/ab/20261202-054354-fad4", "exit 0 (killed, SIGTERM)",
    "é", "tab\there", "line\nbreak", "\x1b[31mred", "nul\x00", "\ufeff", "x" * 999, "x " * 600,
]  # fmt: skip


def _scalar(rng: random.Random) -> Any:
    pick = rng.random()
    if pick < 0.35:
        return rng.choice(TRICKY)
    if pick < 0.6:
        alphabet = string.printable[:95] if rng.random() < 0.9 else string.printable + "é€\u2028"
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
    if pick < 0.7:
        return rng.choice([None, True, False])
    if pick < 0.8:
        return rng.randint(-(10**12), 10**12)
    if pick < 0.9:
        return rng.choice([0.0, -0.0, 1e-6, 1e17, 3.14159, -2.5e-300, float("inf"), float("-inf"), float("nan"), rng.random()])
    return rng.choice([{}, []])


def _doc(rng: random.Random, depth: int = 0) -> Any:
    if depth > 4 or rng.random() < 0.3:
        return _scalar(rng)
    if rng.random() < 0.5:
        return [_doc(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = [k for k in (_scalar(rng) for _ in range(rng.randint(0, 5))) if isinstance(k, str)]
    return {k: _doc(rng, depth + 1) for k in keys}


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN and -0.0 told from 0.0 (what a round trip must keep)."""
    if isinstance(a, float) and isinstance(b, float):
        return (a != a and b != b) or (a == b and str(a) == str(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def test_generated_documents_read_back_as_written() -> None:
    rng = random.Random(20)
    for _ in range(1000):
        doc = {"top": _doc(rng)} if rng.random() < 0.7 else [_doc(rng)]
        assert _same(yamlio.loads(yamlio.dumps(doc)), doc), doc


def test_every_tricky_word_as_a_value_a_key_and_an_item() -> None:
    for word in TRICKY:
        for doc in ({"k": word}, {word: 1}, {"k": [word, {word: [word]}]}, [[word]]):
            assert _same(yamlio.loads(yamlio.dumps(doc)), doc), doc
    assert yamlio.dumps({}) == "{}\n"


def test_a_recorded_manifest_reads_back_and_rewrites_to_the_same_text(repo: Path) -> None:
    """A real run's manifest (secrets, odd argv, a note with quotes) as committed: reading and
    writing it again gives the same text."""
    res = ledger(
        repo,
        "run",
        "--name",
        "lr-3e-6",
        "--note",
        'it\'s a "test": #1',
        "--",
        sys.executable,
        "-c",
        "print('step 1 loss: 0.5')",
        "--lr=3e-6",
        "--api-key",
        "hunter2hunter2",
        "yes",
        "",
    )
    assert res.returncode == 0, res.stderr
    path = git(repo, "ls-tree", "-r", "--name-only", "experiments").split()
    manifest = next(p for p in path if p.endswith("manifest.yaml"))
    text = git(repo, "show", f"experiments:{manifest}")
    assert text == yamlio.dumps(yamlio.loads(text))  # keys in the order written, nothing lost
