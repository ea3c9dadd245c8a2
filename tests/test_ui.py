"""`ledger ui` as a person uses it: a real server, a real headless Chromium, real runs.

One repository for the module (toy runs `base`, `lr2` (lr changed) and `two` (lr and num-rollout
changed), a hostile note on `base`, a tag on `lr2`, one damaged run folder), ONE server started as
`ledger ui --no-browser --port N` (a subprocess, stopped by its pid) and one browser driven over
its DevTools pipe (tests/devtools.py). The tests read what the page shows (innerText, the SVG's
own point counts), click and type with real input events, and wait for conditions, never for a
time. A run still running is a job that logs one step, then waits for a file the test writes.
Screenshots go to $LEDGER_UI_SHOTS when set (else the test's tmp folder).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import CHROMIUM, needs_chromium
from conftest import LEDGER, git, ledger, module_home, toy_repo, toy_train
from devtools import DEADLINE_S, Browser

TRAIN = toy_train(rollout_batch_size=4, n_samples_per_prompt=2, num_rollout=4, seed=3)
NOTE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
BROKEN = "20260101-000000-abcd"
# a job that logs a step the way Miles does, then waits: step N+1 once `go-N+1` exists, the end at `done`
SLOW = textwrap.dedent(
    """
    import pathlib, sys, time
    here = pathlib.Path(sys.argv[1])
    def log(kind, n, payload):
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
        print(f"[{stamp}] slow.py:9 - {kind} {n}: {payload!r}", flush=True)
    step = 0
    while True:
        log("perf", step, {"perf/rollout_time": 1.0 + step})
        log("step", step, {"train/loss": 2.0 / (step + 1)})
        step += 1
        while not (here / f"go-{step}").exists() and not (here / "done").exists():
            time.sleep(0.05)
        if (here / "done").exists():
            break
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _damaged_run(repo: Path) -> None:
    """A run folder whose summary.json is not JSON, committed on the branch by hand."""
    env = {**os.environ, "GIT_INDEX_FILE": str(repo / ".git" / "ui-test-index")}
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=b"{not json", capture_output=True, check=True)
    tip = git(repo, "rev-parse", "experiments").strip()
    path = f"runs/{BROKEN[-4:-2]}/{BROKEN}/summary.json"
    subprocess.run(["git", "read-tree", tip], cwd=repo, env=env, check=True)
    subprocess.run(
        ["git", "update-index", "--add", "--cacheinfo", f"100644,{blob.stdout.decode().strip()},{path}"], cwd=repo, env=env, check=True
    )
    tree = subprocess.run(["git", "write-tree"], cwd=repo, env=env, capture_output=True, check=True).stdout.decode().strip()
    commit = git(repo, "commit-tree", tree, "-p", tip, "-m", f"a damaged run\n\nRun-Id: {BROKEN}").strip()
    git(repo, "update-ref", "refs/heads/experiments", commit, tip)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with module_home(tmp_path_factory, "home-ui"):
        # GPU 0 runs hot for a moment: each run has a heat log and one pause (scripted sensor)
        files = {
            "README.md": "x\n",
            "slow.py": SLOW,
            "heat.timeline": "0 0 60\n0 1 55\n0.3 0 90\n0.6 0 70\n",
            ".ledger.yaml": "heat_guard:\n  interval_s: 0.05\n  pause_at: 85\n  resume_at: 75\n  resume_after: 0.1\n"
            "  max_pause: 600\n  sensor: {timeline: heat.timeline}\n",
        }
        repo = toy_repo(tmp_path_factory.mktemp("ui") / "proj", files, init=False)
        for name, extra in (("base", ["--lr", "0.05"]), ("lr2", ["--lr", "0.02"]), ("two", ["--lr", "0.02", "--num-rollout", "3"])):
            r = ledger(repo, "run", "--name", name, "--", *TRAIN, *extra)
            assert r.returncode == 0, r.stderr
            if name == "base":
                _damaged_run(repo)
        for args in (("note", "base", NOTE), ("tag", "lr2", "candidate")):
            r = ledger(repo, *args)
            assert r.returncode == 0, r.stderr
        return repo


@pytest.fixture(scope="module")
def server(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`ledger ui` on a free port, as a subprocess; stopped by its pid."""
    port = _free_port()
    logs = tmp_path_factory.mktemp("ui-server")
    with module_home(tmp_path_factory, "home-ui-server"), open(logs / "out", "w") as out, open(logs / "err", "w") as err:
        proc = subprocess.Popen([*LEDGER, "ui", "--no-browser", "--port", str(port)], cwd=repo, stdout=out, stderr=err)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            assert proc.poll() is None, (logs / "err").read_text()
            try:
                if _request(url, "GET", "/api/version")[0] == 200:
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert (logs / "out").read_text() == f"{url}/\n"  # stdout is the address served, alone
        yield url
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        assert "Traceback" not in (logs / "err").read_text()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH (`make system-deps` installs it as root)")
    b = Browser(tmp_path_factory.mktemp("ui-browser") / "profile")
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("LEDGER_UI_SHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _request(url: str, method: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One raw request: the path is sent as it is (no `..` folding by a client)."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=DEADLINE_S)
    try:
        conn.putrequest(method, path, skip_host=bool(headers and "Host" in headers))
        for key, value in (headers or {}).items():
            conn.putheader(key, value)
        conn.endheaders()
        answer = conn.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        conn.close()


def _rows(browser: Browser) -> list[str]:
    """The names in the runs table, top to bottom, as shown."""
    names = browser.evaluate("Array.from(document.querySelectorAll('table.runs tr[data-run] td[data-column=name]')).map(c => c.innerText)")
    return list(names)


def _cell_js(name: str, column: str) -> str:
    """A JavaScript expression: the text of the `column` cell in the row named `name` ('' without one)."""
    return (
        "((Array.from(document.querySelectorAll('table.runs tr[data-run]'))"
        f".find(r => r.querySelector('td[data-column=name]').innerText === {json.dumps(name)})"
        f" || {{querySelector: () => ({{innerText: ''}})}}).querySelector('td[data-column={column}]').innerText)"
    )


def test_api_answers_as_the_cli_and_the_server_is_read_only(repo: Path, server: str) -> None:
    """/api/runs is `ledger list --json`, /api/runs/RUN is `ledger show RUN --json`; anything but
    GET is 405, a path that climbs out is 404, a page asked for under another host name is 400."""
    status, headers, body = _request(server, "GET", "/api/runs")
    assert status == 200 and headers["content-type"] == "application/json"
    assert json.loads(body) == json.loads(ledger(repo, "list", "--json").stdout)
    status, _headers, body = _request(server, "GET", "/api/runs/base")
    assert status == 200 and json.loads(body) == json.loads(ledger(repo, "show", "base", "--json").stdout)
    for method, path in (("POST", "/"), ("PUT", "/api/runs"), ("DELETE", "/api/runs/base"), ("POST", "/nowhere")):
        status, headers, _body = _request(server, method, path)
        assert status == 405 and headers["allow"] == "GET, HEAD", (method, path)
    for path in ("/runs/../../etc/passwd", "/runs/..%2F..%2Fetc%2Fpasswd", "/static/../web.py", "/api/runs/..%2F..%2Fetc%2Fpasswd"):
        status, _headers, body = _request(server, "GET", path)
        assert status == 404 and b"root:" not in body, path
    status, _headers, body = _request(server, "GET", "/runs/nope")
    assert status == 404 and b"no run named &#x27;nope&#x27;" in body
    status, _headers, body = _request(server, "GET", f"/runs/{BROKEN}")  # a damaged run: one warning
    assert status == 500 and body.count(b'data-kind="warning"') == 1 and BROKEN.encode() in body
    assert _request(server, "GET", "/", {"Host": "evil.example"})[0] == 400  # DNS rebinding
    status, headers, _body = _request(server, "GET", "/")
    csp = headers["content-security-policy"]
    assert status == 200 and "script-src 'self';" in csp and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    assert headers["x-frame-options"] == "DENY" and headers["x-content-type-options"] == "nosniff"


@needs_chromium
def test_the_table_lists_the_runs_and_a_filter_narrows_it(repo: Path, server: str, browser: Browser, shots: Path) -> None:
    browser.goto(f"{server}/")
    assert _rows(browser) == ["two", "lr2", "base"]  # newest first, as `ledger list`
    assert f"run {BROKEN} skipped" in browser.text("#live")  # one warning; the rest works
    changed = [browser.evaluate(_cell_js(name, "changed")) for name in ("base", "lr2", "two")]
    assert changed == ["(first run)", "lr: 0.05 -> 0.02", "num-rollout: 4 -> 3"]
    assert browser.evaluate(_cell_js("lr2", "tags")) == "candidate" and browser.evaluate(_cell_js("base", "note")) == "✎"
    browser.screenshot(shots / "ui-table.png")
    browser.type_into("#filter input[name=where]", "lr=0.02")
    browser.click("#apply")
    browser.wait_for("location.search.includes('where=lr%3D0.02')", "the filtered address")
    browser.wait_for("document.readyState === 'complete'", "the filtered page")
    assert sorted(_rows(browser)) == ["lr2", "two"]
    browser.type_into("#filter input[name=tag]", "candidate")
    browser.click("#apply")
    browser.wait_for("location.search.includes('tag=candidate')", "the address with the tag")
    browser.wait_for("document.readyState === 'complete'", "the page with the tag")
    assert _rows(browser) == ["lr2"]
    browser.goto(f"{server}/")
    browser.click("th[data-column=name] a")  # sort by name
    browser.wait_for("location.search.includes('sort=name')", "the sorted address")
    browser.wait_for("document.readyState === 'complete'", "the sorted page")
    assert _rows(browser) == ["base", "lr2", "two"]
    # archived runs leave the table (it sees the new tip without a reload) unless it shows them
    browser.evaluate("window.__kept = 'no reload'")
    assert ledger(repo, "archive", "two").returncode == 0
    browser.wait_for(f"{_cell_js('two', 'name')} === '' && {_cell_js('lr2', 'name')} === 'lr2'", "the archived run to leave")
    assert browser.evaluate("window.__kept") == "no reload"
    browser.goto(f"{server}/?archived=1")
    assert sorted(_rows(browser)) == ["base", "lr2", "two"]
    assert ledger(repo, "unarchive", "two").returncode == 0
    assert browser.problems() == []


@needs_chromium
def test_two_runs_picked_in_the_table_open_the_compare_page_and_the_diff(server: str, browser: Browser, shots: Path) -> None:
    for button, path in (("#compare", "/compare"), ("#diff", "/diff")):
        browser.goto(f"{server}/")
        for name in ("base", "lr2"):
            browser.click(f"input[aria-label='pick {name}']")
        browser.click(button)
        browser.wait_for(f"location.pathname === '{path}' && document.readyState === 'complete'", f"the {path} page")
        if path == "/compare":
            assert sorted(browser.text("h1").removeprefix("ledger compare: ").split(", ")) == ["base", "lr2"]
            assert browser.evaluate("document.querySelectorAll('svg.chart polyline[data-series]').length") >= 10
            assert "lr" in browser.text("table.settings")
            browser.screenshot(shots / "ui-compare.png", whole=False)
        else:
            assert "lr: 0.02 -> 0.05" in browser.text("h1") or "lr: 0.05 -> 0.02" in browser.text("h1")
    browser.goto(f"{server}/diff?a=base&b=two")
    assert browser.text("h1").startswith("refused: 2 settings differ")
    assert browser.problems() == []


@needs_chromium
def test_a_hostile_note_is_text(server: str, browser: Browser) -> None:
    browser.goto(f"{server}/")
    assert browser.evaluate("document.querySelector('[data-note]').getAttribute('title')") == NOTE
    browser.goto(f"{server}/runs/base")
    assert browser.text(".note-text") == NOTE
    assert browser.evaluate("typeof window.pwned") == "undefined"
    assert browser.evaluate("document.querySelectorAll('img').length") == 0
    # the rest of the run's page: settings, a chart per metric, the heat plot, the log tail
    assert browser.evaluate("document.querySelector('tr[data-setting=lr] td').innerText") == "0.05"
    assert browser.evaluate("document.querySelector('svg[aria-label=\"train/loss\"] polyline').dataset.n") == "4"
    assert browser.evaluate("document.querySelectorAll('svg.chart polyline[data-series^=\"GPU\"]').length") == 2
    assert "perf 3:" in browser.text("pre.log") and "heat pauses: 1" in browser.text("#live")
    assert browser.problems() == []


@needs_chromium
def test_a_running_run_advances_on_its_page_and_the_table_sees_it_end(
    repo: Path, server: str, browser: Browser, shots: Path, tmp_path: Path
) -> None:
    browser.goto(f"{server}/")
    browser.evaluate("window.__kept = 'no reload'")
    job = subprocess.Popen(
        [*LEDGER, "run", "--name", "slow", "--", "python3", "slow.py", str(tmp_path)],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    state = "document.querySelector('[data-fact=state]').innerText"
    points = "(document.querySelector('svg[aria-label=\"perf/rollout_time\"] polyline') || {dataset: {}}).dataset.n"
    try:
        # the table picks the new run up, running at step 0, without a reload
        browser.wait_for(f"{_cell_js('slow', 'state')} === 'running: step 0'", "the new run at step 0 in the table")
        assert browser.evaluate("window.__kept") == "no reload"
        browser.goto(f"{server}/runs/slow")
        browser.evaluate("window.__kept = 'no reload'")
        browser.wait_for(f"{state}.startsWith('running: step 0') && {points} === '1'", "its page at step 0, one point")
        (tmp_path / "go-1").write_text("")
        browser.wait_for(f"{state}.startsWith('running: step 1') && {points} === '2'", "its page at step 1, two points")
        browser.wait_for("document.querySelector('pre.log').innerText.includes('perf 1:')", "the log tail's new line")
        assert browser.evaluate("window.__kept") == "no reload"
        browser.screenshot(shots / "ui-running.png")
        browser.goto(f"{server}/")
        browser.evaluate("window.__kept = 'no reload'")
        (tmp_path / "done").write_text("")
        assert job.wait(timeout=120) == 0, job.stderr.read().decode() if job.stderr else ""
        browser.wait_for(f"{_cell_js('slow', 'state')} === 'finished'", "the run finished in the table")
        assert browser.evaluate("window.__kept") == "no reload"
        assert browser.problems() == []
    finally:
        (tmp_path / "done").write_text("")
        job.wait(timeout=120)


def test_a_port_in_use_is_one_error_line(repo: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = subprocess.run([*LEDGER, "ui", "--no-browser", "--port", str(port)], cwd=repo, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == f"ledger: error: port {port} is in use (pick another --port, or leave it out for a free one)\n"


def test_another_host_is_named_in_one_warning_and_only_its_name_is_answered() -> None:
    from ledger.ui.address import allowed_hosts, exposure_warning, host_of, url_for

    for loopback in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        assert exposure_warning(loopback, 8000) is None
    warning = exposure_warning("0.0.0.0", 8000)
    assert warning is not None and warning.count("\n") == 0 and "anyone who can reach it can read this ledger" in warning
    assert "192.168.1.5" in (exposure_warning("192.168.1.5", 8000) or "")
    assert allowed_hosts("0.0.0.0") is None and allowed_hosts("192.168.1.5") == {"192.168.1.5"}
    assert {"127.0.0.1", "localhost", "::1"} <= (allowed_hosts("127.0.0.1") or set())
    assert [host_of(h) for h in ("127.0.0.1:80", "[::1]:8080", "Localhost", "evil.example:1")] == [
        "127.0.0.1",
        "::1",
        "localhost",
        "evil.example",
    ]
    assert url_for("::1", 80) == "http://[::1]:80/" and url_for("0.0.0.0", 80) == "http://127.0.0.1:80/"


def test_ledger_run_never_imports_the_web_server(tmp_path: Path) -> None:
    """The web framework and server are `ledger ui`'s alone: never on `ledger run`'s path."""
    from repos import make_repo

    repo = make_repo(tmp_path / "proj", {"README.md": "x\n"})
    code = (
        "import sys\n"
        "sys.argv = ['ledger', 'run', '--no-debug-data', '--', 'true']\n"
        "from ledger.main import main\n"
        "rc = main()\n"
        "print(rc, 'starlette' in sys.modules, 'uvicorn' in sys.modules, 'ledger.ui' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["0", "False", "False", "False"]
