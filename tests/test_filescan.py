"""The scan of the data files ledger tracks with DVC (ledger/redact/filescan.py): streamed, with the
window overlap holding a secret that straddles a boundary, inside zip members (torch.save's layout,
stored or deflated), and quiet on what rollout data ordinarily holds."""

from __future__ import annotations

import pickle
import random
import zipfile
from pathlib import Path

from secret_corpus import ORDINARY, rand, round_three_tokens

from ledger.redact.filescan import CHUNK, OVERLAP, scan_file, scan_output
from ledger.redact.scanner import Redactor


def _pt(path: Path, obj: object, deflate: bool) -> None:
    """A file in torch.save's zip layout: `archive/data.pkl` (the object), `archive/data/0` (a storage)."""
    how = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(zipfile.ZipInfo("archive/data.pkl"), pickle.dumps(obj), compress_type=how)
        z.writestr(zipfile.ZipInfo("archive/data/0"), random.Random(1).randbytes(1 << 16), compress_type=how)


def test_a_secret_across_a_window_boundary_is_found(tmp_path: Path) -> None:
    token = round_three_tokens()["linear"]
    noise = random.Random(2).randbytes(CHUNK + OVERLAP)
    for at in (CHUNK - len(token) // 2, CHUNK + OVERLAP - 10, 2 * CHUNK - 3):
        path = tmp_path / f"blob-{at}.bin"
        path.write_bytes(noise[:at] + b" " + token.encode() + b" " + noise[: CHUNK // 2])
        assert [h.rule for h in scan_file(Redactor(), path, path.name)] == ["gitleaks:linear-api-key"], at


def test_zip_members_are_scanned_stored_or_deflated(tmp_path: Path) -> None:
    known = "kv-" + rand(24)
    r = Redactor(known=[known])
    for deflate in (False, True):
        path = tmp_path / f"rollout-{deflate}.pt"
        _pt(path, {"response": f"the key is {known}", "tokens": list(range(100))}, deflate)
        hits = scan_file(r, path, "3.pt")
        assert {(h.file, h.rule) for h in hits} >= {("3.pt!archive/data.pkl", "known-value")}
        assert all(known not in h.file + h.rule for h in hits)
    # the archive's own bytes outside its members (here its comment) are scanned too
    commented = tmp_path / "commented.pt"
    _pt(commented, {"response": "fine"}, False)
    with zipfile.ZipFile(commented, "a") as z:
        z.comment = f"built with {round_three_tokens()['groq']}".encode()
    assert [(h.file, h.rule) for h in scan_file(r, commented, "c.pt")] == [("c.pt", "groq-key")]
    named = tmp_path / "cert.p12"
    named.write_bytes(b"\x30\x82")
    assert [h.rule for h in scan_file(r, named, "cert.p12")] == ["file-name:gitleaks:pkcs12-file"]


def test_ordinary_rollout_data_is_clean(tmp_path: Path) -> None:
    """Pickled Miles-shaped rollouts (responses, token ids, rewards, log lines) and raw tensor bytes
    hold nothing: a rollout is held back only for a secret."""
    folder = tmp_path / "rollout"
    folder.mkdir()
    for rid in range(3):
        sample = {"tokens": list(range(rid, 4000)), "response_length": 812, "reward": 0.41, "loss_mask": [1] * 812, "text": ORDINARY}
        _pt(folder / f"{rid}.pt", sample, deflate=rid % 2 == 1)
    (folder / "weights.bin").write_bytes(random.Random(3).randbytes(3 << 20))
    assert scan_output(Redactor(known=["not-in-the-data-value"]), folder) == []
