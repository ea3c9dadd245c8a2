"""The signal guard while the main thread waits on an import another thread is running.

Found under load (two test workers on two cores): `ledger run` of a job that ignores SIGTERM ended
in `internal error: KeyError: <thread id>` instead of a record. The SIGTERM arrived while the main
thread waited for a module the end-of-run import thread was importing; the handler's `say`
imported a module there, and CPython 3.11's import bookkeeping (`_blocking_on`, keyed by thread)
lost the main thread's entry. The script below makes that moment happen every time: no sleep
decides it, a helper thread sends the signal once the main thread is seen waiting on the lock.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import importlib, importlib._bootstrap as bootstrap, os, signal, sys, threading, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from ledger.capture.runner import Job, SignalGuard

    gate = threading.Event()     # slowmod's import waits on it
    inside = threading.Event()   # slowmod's import has begun (its module lock is held)
    sys.modules["__main__"].gate, sys.modules["__main__"].inside = gate, inside
    said = []

    def say(text):
        importlib.import_module("freshmod")  # a module not imported yet, as `say`'s termstyle was
        said.append(text)

    def main_waits_on_the_lock():
        return threading.main_thread().ident in bootstrap._blocking_on

    def sender():
        inside.wait()
        while not main_waits_on_the_lock():
            time.sleep(0.001)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # the handler has run by now (it runs at the main thread's next check)
        gate.set()

    with SignalGuard(say) as guard:
        job = Job(["sleep", "30"], Path.cwd(), dict(os.environ), stop_grace_s=30)
        guard.attach(job, lambda: None)
        threading.Thread(target=lambda: importlib.import_module("slowmod"), daemon=True).start()
        threading.Thread(target=sender, daemon=True).start()
        inside.wait()
        import slowmod  # waits for the other thread's import: the signal arrives meanwhile
        result = job.wait()
    print(result.signal_name, result.forwarded, said)
    """
)


def test_a_signal_while_the_main_thread_waits_on_an_import_is_forwarded(tmp_path: Path) -> None:
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "slowmod.py").write_text("import __main__\n__main__.inside.set()\n__main__.gate.wait()\n")
    (mods / "freshmod.py").write_text("VALUE = 1\n")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(mods)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr  # was: KeyError: <the main thread's id> out of `import slowmod`
    assert proc.stdout.split()[:2] == ["SIGTERM", "SIGTERM"]  # the job got the SIGTERM ledger got
    assert "forwarded SIGTERM to the job" in proc.stdout


def test_a_failure_to_forward_is_said_and_the_next_signal_still_served(tmp_path: Path) -> None:
    import os
    import signal
    import threading

    from ledger.capture.runner import Job, SignalGuard

    said: list[str] = []
    heard = threading.Event()

    def say(text: str) -> None:
        said.append(text)
        heard.set()

    def broken() -> None:
        raise RuntimeError("the heat guard's lock is gone")

    with SignalGuard(say) as guard:
        job = Job(["sleep", "30"], tmp_path, dict(os.environ), stop_grace_s=30)
        guard.attach(job, broken)
        os.kill(os.getpid(), signal.SIGTERM)
        assert heard.wait(10)
        guard.before_forward = lambda: None
        heard.clear()
        os.kill(os.getpid(), signal.SIGTERM)  # served still: this one reaches the job
        result = job.wait()
    assert said[0] == "ledger: could not forward SIGTERM: the heat guard's lock is gone"
    assert result.signal_name == "SIGTERM"
