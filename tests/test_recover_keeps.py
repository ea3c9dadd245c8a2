"""`ledger recover` never deletes a file a job wrote (issue 21, item 3)."""

from __future__ import annotations

from pathlib import Path

from conftest import ledger


def test_recover_moves_a_jobs_files_from_a_folder_with_no_record(repo: Path) -> None:
    """A job that ran on after its run was committed wrote into the staging folder again: no
    record to commit, but its files go to .ledger/untracked/<run id>/, as the README promises."""
    rid = "20261202-000000-abcd"
    staged = repo / ".ledger" / "staging" / rid
    (staged / "data" / "rollout").mkdir(parents=True)
    for n in range(3):
        (staged / "data" / "rollout" / f"{n}.pt").write_bytes(f"rollout {n}".encode())
    r = ledger(repo, "recover")
    assert r.returncode == 0, r.stderr
    kept = repo / ".ledger" / "untracked" / rid / "rollout"
    assert sorted(p.name for p in kept.iterdir()) == ["0.pt", "1.pt", "2.pt"]
    assert (kept / "2.pt").read_bytes() == b"rollout 2"
    assert "moved the 3 file(s) the job wrote to" in r.stderr and "nothing to recover" not in r.stderr
    assert not staged.exists()


def test_an_owner_recorded_by_an_older_ledger_is_still_known_alive() -> None:
    """owner.json written before December 2026 holds the start in clock ticks since boot (field 22
    of /proc/PID/stat): the running ledger it names is alive, a start that is not its is not."""
    import os

    from ledger.storage.staging import pid_alive, proc_start

    stat = open(f"/proc/{os.getpid()}/stat").read()
    ticks = stat[stat.rfind(")") + 2 :].split()[19]
    assert pid_alive(os.getpid(), ticks) and pid_alive(os.getpid(), proc_start(os.getpid()))
    assert not pid_alive(os.getpid(), str(int(ticks) - 500)) and not pid_alive(os.getpid(), "12.5")
