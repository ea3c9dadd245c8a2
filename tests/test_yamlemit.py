"""ledger's own YAML emitter writes what the ruamel dumper writes, byte for byte (or hands over)."""

from __future__ import annotations

import random
import string
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import git, ledger, toy_repo, toy_train

from ledger import yamlemit, yamlio

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


def test_generated_documents_are_written_as_ruamel_writes_them() -> None:
    rng = random.Random(20)
    ours = 0
    for _ in range(3000):
        doc = {"top": _doc(rng)} if rng.random() < 0.7 else [_doc(rng)]
        want = yamlio.ruamel_dumps(doc)
        try:
            got = yamlemit.dumps(doc)
        except yamlemit.Unsupported:
            continue
        ours += 1
        assert got == want, doc
    assert ours > 1500  # most documents are written by the emitter itself, not handed over


def test_every_tricky_word_as_a_value_a_key_and_an_item() -> None:
    for word in TRICKY:
        for doc in ({"k": word}, {word: 1}, {"k": [word, {word: [word]}]}, [[word]]):
            try:
                got = yamlemit.dumps(doc)
            except yamlemit.Unsupported:
                continue
            assert got == yamlio.ruamel_dumps(doc), doc


def test_what_the_emitter_hands_over_is_still_written_by_dumps() -> None:
    shared: list[int] = []
    for doc in ({"k": "é"}, {"k": "x" * 5000}, {1: "int key"}, {"a": shared, "b": shared}, {"t": (1, 2)}, "scalar", {"": 1}):
        with pytest.raises(yamlemit.Unsupported):
            yamlemit.dumps(doc)
    assert yamlio.dumps({"k": "é", "a": shared, "b": shared}) == yamlio.ruamel_dumps({"k": "é", "a": shared, "b": shared})
    assert yamlio.dumps({}) == "{}\n" == yamlio.ruamel_dumps({})


def test_a_recorded_manifest_is_the_text_ruamel_writes(repo: Path) -> None:
    """A real run's manifest (secrets, odd argv, a note with quotes) as committed, against ruamel
    writing the same data."""
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
    assert text == yamlio.ruamel_dumps(yamlio.loads(text))
    assert text == yamlemit.dumps(yamlio.loads(text))


def test_every_yaml_document_of_recorded_runs_is_the_text_ruamel_writes(tmp_path: Path) -> None:
    """What the suite-wide check (every document compared as it was written, inside ledger) did,
    from outside: every manifest and `.dvc` file a DVC-tracked toy run and its replay committed."""
    repo = toy_repo(tmp_path / "proj")
    for args in (
        ["run", "--name", "base", "--", *toy_train(rollout_batch_size=4, n_samples_per_prompt=2, num_rollout=2)],
        ["replay", "base", "--name", "again"],
    ):
        r = ledger(repo, *args)
        assert r.returncode == 0, r.stderr
    files = [
        p
        for p in git(repo, "ls-tree", "-r", "--name-only", "experiments").split()
        if p.startswith("runs/") and p.endswith((".yaml", ".dvc"))
    ]
    assert sum(p.endswith(".dvc") for p in files) >= 2 and sum(p.endswith("manifest.yaml") for p in files) == 2
    for name in files:
        text = git(repo, "show", f"experiments:{name}")
        assert text == yamlio.ruamel_dumps(yamlio.loads(text)), name
