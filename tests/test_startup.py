"""What `ledger run` does before and after the job, kept off its start-up (no timings here:
`bench/bench_store.py` measures them): modules it never imports, and how its process ends."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_ledger_run_imports_no_yaml_before_the_job_and_never_gitpython(repo: Path) -> None:
    """ruamel.yaml writes the manifest after the job; before it, nothing of it is imported (an audit
    hook sees each import and the job's start in order)."""
    code = (
        "import sys\n"
        "seen = []\n"
        "def hook(event, args):\n"
        "    if event == 'import' and args[0].split('.')[0] in ('ruamel', 'git'):\n"
        "        seen.append(args[0].split('.')[0])\n"
        "    elif event == 'subprocess.Popen' and list(args[1] or [])[-1:] == ['true']:\n"
        "        seen.append('job')\n"
        "sys.addaudithook(hook)\n"
        "sys.argv = ['ledger', 'run', '--no-debug-data', '--', 'true']\n"
        "from ledger.main import main\n"
        "rc = main()\n"
        "print(rc, ' '.join(dict.fromkeys(seen)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["0", "job", "ruamel"]


def test_a_run_ends_its_process_with_the_exit_code_atexit_handlers_and_output(repo: Path, tmp_path: Path) -> None:
    """`ledger run` ends as a normal exit does: the job's exit code, Python's atexit handlers
    (coverage's), flushed output."""
    mark = tmp_path / "atexit-ran"
    code = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(mark)!r}, 'w').write('ran'))\n"
        "sys.stdout.write('buffered, never flushed by hand')\n"
        "sys.argv = ['ledger', 'run', '--no-debug-data', '--', 'sh', '-c', 'exit 3']\n"
        "from ledger.main import entry\n"
        "entry()\n"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
    assert res.returncode == 3
    assert res.stdout == "buffered, never flushed by hand"
    assert "ledger: recorded run" in res.stderr and "exit 3" in res.stderr
    assert mark.read_text() == "ran"
