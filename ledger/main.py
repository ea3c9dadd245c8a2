"""Entry point: run the command line, turn every LedgerError into one line and its exit code."""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading
from collections.abc import Callable
from typing import NoReturn

from ledger.errors import LedgerError

# Verbs whose process ends without the interpreter's teardown (`entry`): `ledger run` has
# committed its record (or said why not) when `main` returns, and closes every file it writes.
QUICK_EXIT_VERBS = frozenset({"run"})
GC_PAUSE_S = 1.0


def entry() -> NoReturn:
    """The `ledger` console script and `python -m ledger`: `main`, then the process ends.

    After `ledger run`, the interpreter's own teardown would cost more than the record's commit:
    ~30 ms freeing pygit2/libgit2 and OpenSSL, whose memory the kernel takes back anyway. So
    once no other thread is left to wait for, the `atexit` handlers run (coverage, logging) and
    the standard streams are flushed as at a normal exit, and the process ends there.
    """
    quick = sys.argv[1:2] != [] and sys.argv[1] in QUICK_EXIT_VERBS
    if quick:
        _pause_collector(GC_PAUSE_S)
    code = main()
    if quick and not _threads_to_wait_for():
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass  # a closed pipe: nothing more to say
        os._exit(code)
    sys.exit(code)


def _pause_collector(seconds: float) -> None:
    """No cyclic garbage collection for the first `seconds`: importing ledger's modules and
    recording a short run allocate ~25,000 long-lived objects and almost no cycles, and the
    collector's ~50 passes over them cost ~10 ms of `ledger run -- true`. A job that runs
    longer has the collector back, from a timer, while it runs."""
    gc.disable()
    timer = threading.Timer(seconds, gc.enable)
    timer.daemon = True
    timer.start()


def _threads_to_wait_for() -> bool:
    """Whether a normal exit would wait for a thread (one that is not a daemon)."""
    main = threading.main_thread()
    return any(t is not main and t.is_alive() and not t.daemon for t in threading.enumerate())


def main(argv: list[str] | None = None) -> int:
    """The command line: the exit code of `ledger ARGV` (also run in-process by tests)."""
    args = sys.argv[1:] if argv is None else argv
    return _answered(lambda: _run_plain(args[1:]) if args[:1] == ["run"] else None, args)


def _run_plain(args: list[str]) -> int | None:
    """`ledger run` with a plain command line (`ledger.record.options.plain_args`), without
    click; None when click is to read it."""
    from ledger.record.options import plain_args

    parsed = plain_args(args)
    if parsed is None:
        return None
    from ledger.commands.run import run_args
    from ledger.termstyle import say

    return run_args(parsed, say)


def _answered(fast: Callable[[], int | None], argv: list[str]) -> int:
    """`fast()`, or click's command line when that gives None; every error one line and its code."""
    try:
        code = fast()
        if code is not None:
            return code
        from ledger.cli import run_app

        return run_app(argv)
    except LedgerError as exc:
        from ledger.termstyle import printable

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
            f"ledger: internal error: {type(exc).__name__}: {_printable(str(exc))} (set LEDGER_DEBUG=1 for the traceback; "
            "staged runs are kept, `ledger recover` commits them)",
            file=sys.stderr,
        )
        return 1


def _printable(text: str) -> str:
    from ledger.termstyle import printable

    return printable(text)


if __name__ == "__main__":
    entry()
