"""ledger: a git-backed experiment ledger for RL training runs."""

__version__ = "0.1.0"
