"""A teammate's pushed runs are data, never code (issue 19): a hostile remote, end to end.

An attacker clone records a real run with the toy trainer and pushes it, then commits crafted run
folders with git plumbing (a temporary index, `commit-tree`, `update-ref`) and writes crafted DVC
objects straight into the shared local DVC remote, as anyone with push access could. A victim
clone pulls and runs every verb on them. Every command runs as a real subprocess under a memory
limit (RLIMIT_AS) and a timeout (the guard, not an assertion on time); nothing outside the victim's
checkout may be created or changed (the world folder is listed and hashed before and after).
"""

from __future__ import annotations

import hashlib
import json
import os
import pty
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import LEDGER, git, make_repo, module_home, toy_repo, toy_train
from repos import git_env

from ledger import yamlio
from ledger.data.dvcops import _dir_md5

TRAIN = toy_train(rollout_batch_size=4, n_samples_per_prompt=2, seed=3, num_rollout=2)
MEMORY = 3 << 30  # bytes of address space a ledger command may use
TIMEOUT = 90  # seconds: a guard against a hang, far above what any command here needs
ESC_NAME = "evil-run\x1b]52;c;cHduZWQ=\x07\x1b[2J"
ESC_NOTE = "\x1b]0;owned title\x07note"
ESC_LOG = b"\x1b]52;c;cHduZWQ=\x07step 1 \x1b[2J\xc2\x9b31m \x9b31m done\n"  # C1 CSI as UTF-8, and bare


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def run(cwd: Path, *args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    """The real CLI with bounded memory; stdin is no terminal."""
    return subprocess.run(
        [*LEDGER, *args],
        cwd=cwd,
        text=True,
        capture_output=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        preexec_fn=_limit,
        errors="surrogateescape",
    )


def run_pty(cwd: Path, *args: str, answer: bytes) -> tuple[int, str]:
    """The CLI with a terminal as stdin, answering its question."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*LEDGER, *args], cwd=cwd, stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_limit
    )
    os.close(slave)
    os.write(master, answer)
    try:
        _out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        os.close(master)
    return proc.returncode, err


def snapshot(root: Path, skip: Path) -> dict[str, str]:
    """Every path under `root` but `skip`, with a hash of its content (or link target)."""
    out: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = [d for d in dirs if here / d != skip]
        for name in dirs + files:
            path = here / name
            if path.is_symlink():
                out[str(path)] = "link:" + os.readlink(path)
            elif path.is_file():
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                out[str(path)] = "dir"
    return out


def run_path(rid: str) -> str:
    return f"runs/{rid[-4:-2]}/{rid}"


@dataclass
class World:
    root: Path
    bare: Path
    storage: Path
    attacker: Path
    victim: Path
    seed: str  # the attacker's real run
    evil: dict[str, str] = field(default_factory=dict)  # case -> crafted run id
    own: str = ""  # the victim's own run, named `base`
    before: dict[str, str] = field(default_factory=dict)
    first_pull: subprocess.CompletedProcess[str] | None = None


def _dvc_object(storage: Path, md5: str, data: bytes) -> None:
    path = storage / "files" / "md5" / md5[:2] / md5[2:]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _listing(storage: Path, entries: dict[str, str]) -> tuple[str, int]:
    """A `.dir` listing of relpath -> md5 stored on the DVC remote; its md5 (as DVC computes it)."""
    md5 = _dir_md5(entries)
    rows = [{"md5": m, "relpath": r} for r, m in sorted(entries.items())]
    _dvc_object(storage, md5, json.dumps(rows).encode())
    return md5, len(entries)


def _dvc_text(md5: str, nfiles: int) -> bytes:
    return (f"outs:\n- md5: {md5}\n  size: 1\n  nfiles: {nfiles}\n  hash: md5\n  path: rollout\n").encode()


def _git_bytes(cwd: Path, *args: str, data: bytes | None = None, env: dict[str, str] | None = None) -> bytes:
    proc = subprocess.run(["git", *args], cwd=cwd, input=data, capture_output=True, env=env or git_env())
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def craft(
    repo: Path,
    seed: str,
    rid: str,
    files: dict[str, bytes | None],
    *,
    message: str | None = None,
    extra_paths: dict[str, bytes] | None = None,
) -> str:
    """Commit a run folder `rid` made from `seed`'s (its id replaced) with `files` changed, as a
    ledger run commit on `experiments`, with git plumbing only. Returns the commit."""
    tip = git(repo, "rev-parse", "experiments").strip()
    code = git(repo, "rev-list", "--parents", "-n1", "experiments").split()[-1]  # the code commit, last parent
    src = run_path(seed)
    content: dict[str, bytes] = {}
    for rel in git(repo, "ls-tree", "-r", "--name-only", "experiments", src).split():
        blob = _git_bytes(repo, "show", f"experiments:{rel}")
        content[rel[len(src) + 1 :]] = blob.replace(seed.encode(), rid.encode())
    for rel, data in files.items():
        if data is None:
            content.pop(rel, None)
        else:
            content[rel] = data
    env = {**git_env(), "GIT_INDEX_FILE": str(repo / ".git" / "craft-index")}
    _git_bytes(repo, "read-tree", tip, env=env)
    paths = {f"{run_path(rid)}/{rel}": data for rel, data in content.items()} | (extra_paths or {})
    for path, data in paths.items():
        blob = _git_bytes(repo, "hash-object", "-w", "--stdin", data=data).decode().strip()
        _git_bytes(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
    tree = _git_bytes(repo, "write-tree", env=env).decode().strip()
    msg = message if message is not None else f"run {rid} (x): exit 0, 1.0s\n\nRun-Id: {rid}\nCode-Commit: {code}\n"
    who = {f"GIT_{k}_{f}": v for k in ("AUTHOR", "COMMITTER") for f, v in (("NAME", "Mallory"), ("EMAIL", "mallory@evil.example"))}
    commit = _git_bytes(repo, "commit-tree", tree, "-p", tip, "-p", code, "-m", msg, env={**git_env(), **who}).decode().strip()
    git(repo, "update-ref", "refs/heads/experiments", commit, tip)
    return commit


def _manifest(repo: Path, seed: str, rid: str, **changes: object) -> bytes:
    raw = _git_bytes(repo, "show", f"experiments:{run_path(seed)}/manifest.yaml").replace(seed.encode(), rid.encode())
    m = yamlio.loads(raw)
    for key, value in changes.items():
        if key == "runtime_env":
            m["command"]["runtime_env"] = value
        elif key == "command":
            m["command"].update(value)  # type: ignore[call-overload]
        elif key == "settings":
            m["settings"].update(value)  # type: ignore[call-overload]
        else:
            m[key] = value
    return yamlio.dumps(m).encode()


def _summary(repo: Path, seed: str, rid: str, **changes: object) -> bytes:
    raw = _git_bytes(repo, "show", f"experiments:{run_path(seed)}/summary.json").replace(seed.encode(), rid.encode())
    return json.dumps({**json.loads(raw), **changes}).encode()


BOMB = (
    "\n".join(
        [
            "schema: 1",
            "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]",
            *(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)),
            "id: X",
            "settings: {}",
            "status: {}",
            "started: x",
        ]
    )
    + "\n"
)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("world")
    with module_home(tmp_path_factory, "home-hostile") as home:
        (home / ".gitconfig").write_text("[user]\n\tname = Mallory\n\temail = mallory@evil.example\n[init]\n\tdefaultBranch = main\n")
        storage = root / "dvc-storage"
        storage.mkdir()
        seed_repo = toy_repo(root / "seed", {"README.md": "seed\n"})
        subprocess.run(
            [sys.executable, "-m", "dvc", "remote", "add", "-d", "storage", str(storage)], cwd=seed_repo, check=True, capture_output=True
        )
        git(seed_repo, "commit", "-q", "-am", "the DVC remote")
        bare = root / "origin.git"
        git(root, "init", "-q", "--bare", str(bare))
        git(seed_repo, "push", "-q", str(bare), "HEAD:refs/heads/main")
        shutil.rmtree(seed_repo)
        attacker = root / "attacker"
        git(root, "clone", "-q", str(bare), str(attacker))
        r = run(attacker, "run", "--name", "seed", "--", *TRAIN)
        assert r.returncode == 0, r.stderr
        seed = json.loads(run(attacker, "show", "seed", "--json").stdout)["id"]
        assert run(attacker, "push").returncode == 0
        victim = root / "victim"
        w = World(root, bare, storage, attacker, victim, seed)
        real = {e["relpath"]: e["md5"] for e in json.loads(_real_listing(attacker, seed).read_text())}
        ids = iter(f"20260101-0000{n:02d}-{n:02x}{n:02x}" for n in range(10, 40))

        # 1. a listing that writes outside its folder: .git/config (a core.fsmonitor command) and ../pwned
        config = f"[core]\n\trepositoryformatversion = 0\n\tfsmonitor = touch {root}/fsmonitor-ran\n".encode()
        pwn = b"pwned\n"
        for data in (config, pwn):
            _dvc_object(storage, hashlib.md5(data).hexdigest(), data)
        md5, n = _listing(
            storage,
            {**real, "../../../../.git/config": hashlib.md5(config).hexdigest(), "../../../../../pwned": hashlib.md5(pwn).hexdigest()},
        )
        w.evil["traversal"] = rid = next(ids)
        craft(
            attacker,
            seed,
            rid,
            {
                "data/rollout.dvc": _dvc_text(md5, n),
                "manifest.yaml": _manifest(attacker, seed, rid, name="traversal"),
                "summary.json": _summary(attacker, seed, rid, name="traversal"),
            },
        )

        # 2. a recorded environment that loads code from the run's own pulled data
        site = f"open({str(root / 'site-ran')!r}, 'w').write('ran')\n".encode()
        _dvc_object(storage, hashlib.md5(site).hexdigest(), site)
        md5, n = _listing(storage, {**real, "sitecustomize.py": hashlib.md5(site).hexdigest()})
        w.evil["env"] = rid = next(ids)
        pulled = victim / ".ledger" / "replay-data" / rid / "rollout"
        env_vars = {
            "PYTHONPATH": str(pulled),
            "LD_PRELOAD": f"{pulled}/x.so",
            "BASH_ENV": f"{pulled}/sitecustomize.py",
            "PYTHONSTARTUP": f"{pulled}/sitecustomize.py",
            "NODE_OPTIONS": "--require /x",
            "NCCL_DEBUG": "WARN",
        }
        craft(
            attacker,
            seed,
            rid,
            {
                "data/rollout.dvc": _dvc_text(md5, n),
                "manifest.yaml": _manifest(attacker, seed, rid, name="env", runtime_env={"env_vars": env_vars}),
                "summary.json": _summary(attacker, seed, rid, name="env"),
            },
        )

        # 2b. a run whose recorded working directory is its own pulled data, which ships the script
        # (`python3 train.py`) or the module (`python3 -m train`) the command names
        for case, marker in (("cwdscript", "script-ran"), ("cwdmodule", "module-ran")):
            code = f"open({str(root / marker)!r}, 'w').write('ran')\n".encode()
            _dvc_object(storage, hashlib.md5(code).hexdigest(), code)
            md5, n = _listing(storage, {**real, "train.py": hashlib.md5(code).hexdigest()})
            w.evil[case] = rid = next(ids)
            flags = TRAIN[2:]
            program = ["python3", "train.py"] if case == "cwdscript" else ["python3", "-m", "train"]
            command = {"cwd_in_repo": f".ledger/replay-data/{rid}/rollout", "training_argv": [*program, *flags]}
            craft(
                attacker,
                seed,
                rid,
                {
                    "data/rollout.dvc": _dvc_text(md5, n),
                    "manifest.yaml": _manifest(attacker, seed, rid, name=case, command=command),
                    "summary.json": _summary(attacker, seed, rid, name=case),
                },
            )

        # 3. a run named like the victim's, claiming to start in 2099 (pushed before the victim's `base`)
        w.evil["takeover"] = rid = next(ids)
        craft(
            attacker,
            seed,
            rid,
            {
                "manifest.yaml": _manifest(attacker, seed, rid, name="base", started="2099-01-01T00:00:00.000Z"),
                "summary.json": _summary(attacker, seed, rid, name="base", started="2099-01-01T00:00:00.000Z"),
            },
        )

        # 4. denial of service: billion laughs, a 200,000-deep summary.json, a summary naming another run
        w.evil["bomb"] = rid = next(ids)
        craft(attacker, seed, rid, {"manifest.yaml": BOMB.encode(), "summary.json": None, "settings.json": None})
        w.evil["deep"] = rid = next(ids)
        craft(attacker, seed, rid, {"summary.json": b"[" * 200_000 + b"]" * 200_000})
        w.evil["idmismatch"] = rid = next(ids)
        craft(attacker, seed, rid, {"summary.json": _summary(attacker, seed, rid, id=seed)})

        # 5. control sequences in a name, a note, a setting value and a log line
        w.evil["controls"] = rid = next(ids)
        settings = json.loads(_git_bytes(attacker, "show", f"experiments:{run_path(seed)}/settings.json"))
        settings["seed"] = "\x1b]52;c;cHduZWQ=\x073"
        craft(
            attacker,
            seed,
            rid,
            {
                "manifest.yaml": _manifest(attacker, seed, rid, name=ESC_NAME, note=ESC_NOTE, settings={"seed": settings["seed"]}),
                "summary.json": _summary(attacker, seed, rid, name=ESC_NAME, note=ESC_NOTE),
                "settings.json": json.dumps(settings).encode(),
                "trainer.log": b"ok\n" + ESC_LOG,
            },
        )
        git(attacker, "push", "-q", "origin", "experiments")

        # the victim: a clone that pulls all of this, then records its own `base`
        git(root, "clone", "-q", str(bare), str(victim))
        (root / "planted").mkdir()
        w.before = snapshot(root, victim)
        w.first_pull = run(victim, "pull")
        if w.first_pull.returncode != 0:  # checked by its own test; the other cases still get the runs
            git(victim, "fetch", "-q", "origin", "experiments:experiments")
        r = run(victim, "run", "--name", "base", "--", *TRAIN)
        assert r.returncode == 0, r.stderr
        w.own = git(victim, "log", "-1", "--format=%(trailers:key=Run-Id,valueonly)", "experiments").strip()
        yield w


def _real_listing(repo: Path, rid: str) -> Path:
    """The seed run's rollout listing in the attacker's DVC cache."""
    text = _git_bytes(repo, "show", f"experiments:{run_path(rid)}/data/rollout.dvc").decode()
    md5 = yamlio.loads(text)["outs"][0]["md5"]
    return repo / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]


def _one_line(err: str) -> bool:
    lines = [line for line in err.splitlines() if line.startswith("ledger: error:")]
    return len(lines) == 1 and "Traceback" not in err


def test_a_listing_writing_outside_its_folder_writes_nothing(world: World) -> None:
    rid, v = world.evil["traversal"], world.victim
    config = (v / ".git" / "config").read_bytes()
    r = run(v, "pull", "origin", rid)
    assert r.returncode == 5, r.stderr
    assert "leaves its folder" in r.stderr and "Traceback" not in r.stderr
    code, err = run_pty(v, "replay", rid, "--step", "0", answer=b"n\n")
    assert code == 5 and "leaves its folder" in err, err
    r = run(v, "replay", rid, "--dry-run", "--yes")
    assert r.returncode == 5 and _one_line(r.stderr), r.stderr
    git(v, "status", "--short")  # what would run a planted core.fsmonitor
    assert (v / ".git" / "config").read_bytes() == config
    assert not (world.root / "pwned").exists() and not (world.root / "fsmonitor-ran").exists()
    assert not (v / ".ledger" / "replay-data" / rid).exists()


def test_replay_of_a_pulled_run_without_a_terminal_needs_yes_and_filters_its_env(world: World) -> None:
    rid, v = world.evil["env"], world.victim
    assert run(v, "pull", "origin", rid).returncode == 0
    r = run(v, "replay", rid, "--step", "0")
    assert r.returncode == 2 and _one_line(r.stderr), r.stderr
    assert "recorded in another clone" in r.stderr and "Mallory <mallory@evil.example>" in r.stderr
    assert "--yes" in r.stderr
    assert not (v / ".ledger" / "replay-data" / rid).exists()  # nothing written before the yes
    code, err = run_pty(v, "replay", rid, "--step", "0", answer=b"n\n")
    assert code == 0 and "not replayed" in err, err
    # every variable shown; those that load code are left out, PYTHONPATH into pulled data always
    assert "NCCL_DEBUG=WARN" in err
    for name in ("PYTHONPATH", "LD_PRELOAD", "BASH_ENV", "PYTHONSTARTUP", "NODE_OPTIONS"):
        assert f"{name} (" in err, name
    assert not (v / ".ledger" / "replay-data" / rid).exists()
    r = run(v, "replay", rid, "--step", "0", "--yes", "--name", "env-replay", "--trust-env")
    assert r.returncode == 0, r.stderr
    assert not (world.root / "site-ran").exists()  # the pulled sitecustomize.py never ran
    show = json.loads(run(v, "show", "env-replay", "--json").stdout)
    assert show["replay_of"] == rid


@pytest.mark.parametrize("case", ["cwdscript", "cwdmodule"])
def test_a_replay_never_runs_a_script_or_module_that_came_with_pulled_data(world: World, case: str) -> None:
    rid, v = world.evil[case], world.victim
    assert run(v, "pull", "origin", rid).returncode == 0  # its data (with train.py) is in the DVC cache
    for args in (["--step", "0", "--yes"], ["--yes"], ["--dry-run"], ["--rollout-only", "--yes"]):
        r = run(v, "replay", rid, *args)
        assert r.returncode == 5 and _one_line(r.stderr), (args, r.stderr)
        assert "inside pulled data" in r.stderr and ".ledger/replay-data" in r.stderr, r.stderr
    assert not (world.root / "script-ran").exists() and not (world.root / "module-ran").exists()
    assert not (v / ".ledger" / "replay-data" / rid).exists()


def test_a_pulled_runs_question_shows_what_runs_and_defaults_to_no(world: World) -> None:
    v = world.victim
    assert run(v, "pull", "origin", world.seed).returncode == 0
    code, err = run_pty(v, "replay", world.seed, "--step", "0", answer=b"\n")  # Enter: the default
    assert code == 0 and "not replayed" in err, err
    assert "[y/N]" in err, err
    assert f"runs in {v}" in err and f"the script {v / 'examples' / 'toy_grpo' / 'train.py'}" in err, err
    r = run(v, "replay", "base", "--dry-run")  # the victim's own run: shown the same way
    assert r.returncode == 0 and f"the script {v / 'examples' / 'toy_grpo' / 'train.py'}" in r.stderr, r.stderr


def test_a_name_means_the_newest_run_of_the_branch_not_the_newest_claimed_start(world: World) -> None:
    v = world.victim
    r = run(v, "show", "base", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["id"] == world.own, r.stderr
    r = run(v, "show", "base")
    assert "another clone" in r.stderr and world.evil["takeover"] in r.stderr and "Mallory" in r.stderr
    r = run(v, "replay", "base", "--dry-run")
    assert r.returncode == 0 and world.own in r.stdout and "another clone" in r.stderr, r.stderr
    r = run(v, "show", "base~1", "--json")
    assert json.loads(r.stdout)["id"] == world.evil["takeover"]


def test_one_crafted_run_is_skipped_and_every_other_keeps_working(world: World) -> None:
    v = world.victim
    bad = [world.evil[k] for k in ("bomb", "deep", "idmismatch")]
    assert world.first_pull is not None
    assert world.first_pull.returncode == 0 and "internal error" not in world.first_pull.stderr, world.first_pull.stderr
    r = run(v, "list", "--json")
    assert r.returncode == 0, r.stderr
    listed = {row["id"] for row in json.loads(r.stdout)}
    assert {world.seed, world.own, world.evil["traversal"]} <= listed and not set(bad) & listed
    for rid in bad:
        assert f"run {rid} skipped" in r.stderr
    assert "nests deeper" in r.stderr and "alias" in r.stderr
    for args in (
        ["log"],
        ["list", "--changed"],
        ["report", "--html", str(v / "page.html")],
        ["diff", "seed", "base", "--force"],
        ["tail", "base"],
        ["replay", "base", "--dry-run"],
    ):
        r = run(v, *args)
        assert r.returncode in (0, 3) and "internal error" not in r.stderr, (args, r.stderr)
    for rid in bad:  # by id: what of the record can be read is shown, the rest refused in one line
        for args in (["show", rid],):
            r = run(v, *args)
            assert rid != world.evil["bomb"] or (r.returncode == 1 and "alias" in r.stderr), r.stderr
            assert r.returncode in (0, 1, 4, 5) and "internal error" not in r.stderr, (args, r.stderr)
            assert r.returncode == 0 or _one_line(r.stderr), (args, r.stderr)


def _push_to(world: World, name: str, build: object) -> Path:
    """A second bare remote holding the attacker's branch plus what `build(clone)` commits."""
    bare = world.root / f"{name}.git"
    clone = world.root / f"{name}-clone"
    git(world.root, "clone", "-q", str(world.bare), str(clone))
    git(clone, "fetch", "-q", "origin", "experiments:experiments")
    assert callable(build)
    build(clone)
    git(world.root, "init", "-q", "--bare", str(bare))
    git(clone, "push", "-q", str(bare), "experiments", "main")
    return bare


def test_pull_refuses_a_branch_tip_that_is_not_ledgers(world: World) -> None:
    v = world.victim

    def plain(clone: Path) -> None:
        git(clone, "switch", "-q", "experiments")
        (clone / "x.txt").write_text("x\n")
        git(clone, "add", "x.txt")
        git(clone, "commit", "-q", "-m", "an ordinary commit")
        git(clone, "switch", "-q", "main")

    def rewrite(clone: Path) -> None:  # a run commit that also rewrites another run's manifest
        craft(clone, world.seed, "20260102-000000-7777", {}, extra_paths={f"{run_path(world.seed)}/manifest.yaml": b"schema: 1\n"})

    for name, build, why in (("plain", plain, "no Run-Id trailer"), ("rewrite", rewrite, "another run's folder")):
        bare = _push_to(world, name, build)
        git(v, "remote", "add", name, str(bare))
        tip = git(v, "rev-parse", "experiments")
        offender = git(world.root / f"{name}-clone", "rev-parse", "experiments").strip()
        r = run(v, "pull", name)
        assert r.returncode == 5 and _one_line(r.stderr) and why in r.stderr, r.stderr
        assert offender[:10] in r.stderr
        assert git(v, "rev-parse", "experiments") == tip
        shutil.rmtree(world.root / f"{name}-clone")
        shutil.rmtree(bare)
        git(v, "remote", "remove", name)


def test_control_sequences_from_a_record_are_shown_escaped(world: World) -> None:
    v, rid = world.victim, world.evil["controls"]
    outputs = {
        "list": run(v, "list"),
        "log": run(v, "log"),
        "show": run(v, "show", rid),
        "tail": run(v, "tail", rid),
        "diff": run(v, "diff", "seed", rid, "--force", "--no-git-diff"),
        "hint": run(v, "show", "evil-run"),
    }
    for verb, r in outputs.items():
        both = r.stdout + r.stderr
        assert "\x1b" not in both and "\x07" not in both and "\x9b" not in both, (verb, both)
    assert "\\x1b]52" in outputs["list"].stdout and "\\x1b]52" in outputs["tail"].stdout
    assert "\\x9b31m \\x9b31m" in outputs["tail"].stdout and "\\x1b]52" in outputs["hint"].stderr
    assert "\\x1b]52" in outputs["diff"].stdout
    raw = subprocess.run([*LEDGER, "tail", rid, "--raw"], cwd=v, capture_output=True, timeout=TIMEOUT)
    assert ESC_LOG in raw.stdout  # --raw: the bytes as they are
    rows = json.loads(run(v, "list", "--json").stdout)
    assert [row["name"] for row in rows if row["id"] == rid] == [ESC_NAME]  # --json stays exact


def test_replay_data_is_never_written_through_a_planted_link(world: World) -> None:
    v = world.victim
    assert run(v, "pull", "origin", world.seed).returncode == 0
    data = v / ".ledger" / "replay-data"
    kept = data.with_name("replay-data.kept")
    if data.exists():
        data.rename(kept)
    data.symlink_to(world.root / "planted")
    try:
        r = run(v, "replay", world.seed, "--step", "0", "--yes")
        assert r.returncode == 5 and _one_line(r.stderr) and "symbolic link" in r.stderr, r.stderr
        assert list((world.root / "planted").iterdir()) == []
    finally:
        data.unlink()
        if kept.exists():
            kept.rename(data)
    r = run(v, "replay", "base", "--step", "1", "--name", "own-replay")  # the victim's own: no --yes needed
    assert r.returncode == 0, r.stderr


def test_zz_nothing_outside_the_victims_checkout_changed(world: World) -> None:
    assert snapshot(world.root, world.victim) == world.before


@pytest.mark.parametrize(
    ("relpaths", "why"),
    [
        (["../x"], "leaves its folder"),
        (["a/../../x"], "leaves its folder"),
        (["/etc/passwd"], "not relative"),
        (["a//b"], "leaves its folder"),
        (["./a"], "leaves its folder"),
        (["a\\..\\b"], "not plain"),
        (["a\x1b[2J"], "not plain"),
        (["a", "a"], "twice"),
        (["a", "a/b"], "as a file and a folder"),
    ],
)
def test_listing_paths_are_checked_before_anything_is_written(relpaths: list[str], why: str) -> None:
    from ledger.data.dirpaths import check_listing
    from ledger.errors import DataError

    raw = json.dumps([{"md5": "0" * 32, "relpath": r} for r in relpaths]).encode()
    with pytest.raises(DataError, match=why):
        check_listing(raw, "data/rollout")
    assert check_listing(json.dumps([{"md5": "0" * 32, "relpath": "a/b.pt"}]).encode(), "x") == [("a/b.pt", "0" * 32)]


def test_a_replays_runtime_env_loads_code_only_from_this_checkout(tmp_path: Path) -> None:
    """Issue 33: a replay submitted to Ray runs the code of its runtime env's working_dir (this
    checkout unless the record names one) and py_modules: a recorded one inside pulled data or
    outside the checkout is refused; the upload leaves out pulled data and git's objects."""
    from ledger.errors import DataError
    from ledger.replay.trust import check_runtime_paths, upload_excludes
    from ledger.storage.git import Repo

    repo = Repo(make_repo(tmp_path / "r"))
    root = repo.root
    check_runtime_paths(repo, {"working_dir": str(root), "py_modules": ["src"]}, root, "r1")
    check_runtime_paths(repo, {"working_dir": "s3://bucket/code.zip"}, root, "r1")  # a remote package: Ray fetches it
    for bad in ({"working_dir": ".ledger/replay-data/x/rollout"}, {"py_modules": [str(root / "runs" / "ab")]}, {"working_dir": "/tmp"}):
        with pytest.raises(DataError) as caught:
            check_runtime_paths(repo, bad, root, "r1")
        assert caught.value.hint == "ledger never runs code that came with a record; refusing to replay it"
    assert upload_excludes(repo, root) == ["/.dvc", "/.git", "/.ledger", "/runs"]
    assert upload_excludes(repo, root / "sub") == []  # nothing pulled sits inside it


def test_the_miles_runtime_env_is_kept_and_code_loading_variables_are_not(tmp_path: Path) -> None:
    """The variables Miles' launchers pass in their Ray runtime env (../shared/miles-facts.md) are
    what a trainer needs: all kept. Those that load code are left out; into pulled data, never."""
    from ledger.replay.trust import choose_env
    from ledger.storage.git import Repo

    repo = Repo(make_repo(tmp_path / "r"))
    miles = {
        "PYTHONPATH": "/root/Megatron-LM",
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",
        "NCCL_NVLS_ENABLE": "0",
        "NCCL_ALGO": "Ring",
        "NVTE_ALLOW_NONDETERMINISTIC_ALGO": "0",
        "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
        "PYTHONUNBUFFERED": "1",
    }
    assert choose_env(repo, miles, trust=False).taken == miles
    pulled = str(repo.root / ".ledger" / "replay-data" / "x")
    hostile = {
        "LD_PRELOAD": "/tmp/x.so",
        "PYTHONSTARTUP": "/tmp/s.py",
        "BASH_ENV": "/tmp/e",
        "PYTHONPATH": pulled,
        "NCCL_NET_PLUGIN": "/tmp/p.so",
        "PATH": "/tmp/bin",
        "NCCL_DEBUG": pulled,
    }
    choice = choose_env(repo, hostile, trust=False)
    assert choice.taken == {} and set(choice.dropped) == set(hostile)
    trusted = choose_env(repo, hostile, trust=True)
    assert set(trusted.dropped) == {"PYTHONPATH", "NCCL_DEBUG"}  # inside pulled data: never
    assert choose_env(repo, {"PYTHONPATH": "rel/dir"}, trust=True).taken == {}
