"""Opening the ledger for a command: the repository, its configuration and the tip of its runs branch."""

from __future__ import annotations

from pathlib import Path

from ledger.config import Config
from ledger.configload import load_config
from ledger.storage.git import Repo
from ledger.storage.listing import Listing, load_listing
from ledger.storage.store import check_ledger_branch


def open_branch(start: Path) -> tuple[Repo, Config, str | None]:
    """The repository, its configuration and the tip of its ledger branch (None before any run)."""
    repo = Repo(start)
    cfg = load_config(repo.root, repo.common_dir)
    tip = check_ledger_branch(repo, cfg.branch)
    return repo, cfg, tip


def listing_for(start: Path, with_settings: bool = False) -> tuple[Repo, Config, str | None, Listing]:
    """`open_branch` plus the runs listed at its tip."""
    repo, cfg, tip = open_branch(start)
    return repo, cfg, tip, load_listing(repo, tip, with_settings)
