"""Entry point: run the command line, turn every LedgerError into one line and its exit code."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from ledger.errors import LedgerError
from ledger.termstyle import printable


def entry() -> NoReturn:
    """The `ledger` console script and `python -m ledger`."""
    sys.exit(main())


def main(argv: list[str] | None = None) -> int:
    """The command line: the exit code of `ledger ARGV` (also run in-process by tests)."""
    args = sys.argv[1:] if argv is None else argv
    return _answered(args)


def _answered(argv: list[str]) -> int:
    """click's command line; every error one line and its exit code."""
    try:
        from ledger.cli import run_app

        return run_app(argv)
    except LedgerError as exc:
        print(f"ledger: error: {printable(exc.one_line())}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("ledger: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug in ledger: one line, the traceback only on request
        if os.environ.get("LEDGER_DEBUG"):
            raise
        print(
            f"ledger: internal error: {type(exc).__name__}: {printable(str(exc))} (set LEDGER_DEBUG=1 for the traceback; "
            "staged runs are kept, `ledger recover` commits them)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    entry()
