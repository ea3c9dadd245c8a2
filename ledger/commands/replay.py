"""`ledger replay`: see ledger.replay.replay."""

from ledger.replay.replay import ReplayOptions, replay_run

__all__ = ["ReplayOptions", "replay_run"]
