"""The command-line search of the splitter's bodies (`ledger.redact.lines`): every line that starts
with "+" is found, whether the body holds no "+" mid-line, a few, or many (Megatron prints
"1.25E+00" in every loss line, and the search changes its way past some number of those)."""

from __future__ import annotations

import random

import pytest

from ledger.redact.lines import _plus_line_starts, suspect_spans
from ledger.redact.scanner import Redactor


def _by_line(body: bytes) -> list[int]:
    """The offsets of a line-starting "+", one line at a time."""
    return [i for i in range(1, len(body)) if body[i] == ord("+") and body[i - 1] == ord("\n")]


@pytest.mark.parametrize("seed", range(5))
def test_every_plus_at_a_line_start_is_found_however_many_are_mid_line(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(400):
        alphabet = rng.choice([b"ab\n", b"+\nab", b"++++a\n", b"E+0\n"])
        body = b"\n" + bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 2000)))
        assert list(_plus_line_starts(body)) == _by_line(body)


def test_a_command_after_many_mid_line_pluses_is_still_a_suspect_line() -> None:
    loss = b"[2026-11-29 00:00:00] iteration 1 | lm loss: 1.250000E+00 | grad norm: 3.5E+00 |\n"
    body = b"\n" + loss * 200 + b"+ python3 train.py --lr 1\n" + loss
    start = body.index(b"+ python3")
    assert (start, body.index(b"\n", start)) in suspect_spans(body, Redactor())
