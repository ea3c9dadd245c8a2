"""Entry point: run the command line, turn every LedgerError into one line and its exit code."""

from __future__ import annotations

import sys

from ledger.errors import LedgerError


def main(argv: list[str] | None = None) -> int:
    """`ledger` console script."""
    from ledger.cli import run_app

    try:
        return run_app(argv)
    except LedgerError as exc:
        print(f"ledger: error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("ledger: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
