"""The one error root of ledger, and the documented exit codes.

Every failure a user can cause is a `LedgerError` carrying a one-line message that names the
problem and a hint that names the fix. `ledger.main` turns it into `error: ... (hint)` on stderr
and the exit code below; nothing else prints tracebacks.
"""

from __future__ import annotations

# The exit-code table (also in README.md).
EXIT_OK = 0
EXIT_ERROR = 1  # a ledger command failed (bad repository, corrupt record, git failure)
EXIT_USAGE = 2  # bad command-line usage; replaying another clone's run without a terminal needs --yes
EXIT_REFUSED = 3  # `ledger diff` refused: not exactly one setting differs
EXIT_NOT_FOUND = 4  # unknown or ambiguous run name
EXIT_DATA = 5  # run data missing, incomplete or tampered (replay, pull); pulled data refused (docs/trust.md)
EXIT_NOT_RECORDED = 75  # `ledger run`: the job ended but ledger could not record it (staged; `ledger recover`)
EXIT_RUN_FAILED_TO_START = 125  # `ledger run` failed before the job started
EXIT_CANNOT_EXECUTE = 126  # the command exists but cannot be executed
EXIT_COMMAND_NOT_FOUND = 127  # the command was not found


class LedgerError(Exception):
    """A failure with a one-line message, a hint naming the fix, and an exit code."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, hint: str | None = None, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def one_line(self) -> str:
        """The message and its hint on one line (a pulled run's name in either may hold a newline)."""
        text = self.message + (f" ({self.hint})" if self.hint else "")
        return text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


class UsageError(LedgerError):
    exit_code = EXIT_USAGE


class RunNotFound(LedgerError):
    exit_code = EXIT_NOT_FOUND


class DataError(LedgerError):
    exit_code = EXIT_DATA


class NotRecorded(LedgerError):
    """`ledger run`: the job ran, its record could not be committed (it stays staged for `ledger recover`)."""

    exit_code = EXIT_NOT_RECORDED


class StartError(LedgerError):
    """`ledger run` could not start the job."""

    exit_code = EXIT_RUN_FAILED_TO_START
