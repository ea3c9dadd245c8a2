"""`.ledger.yaml` is declared once (`ledger/config.py`, msgspec Structs), and everything else follows.

These tests fail when something derived from the declaration drifts from it, or the declaration from
what the code reads: validation, the defaults, the properties the code reads, `ledger init`'s file,
docs/config.md, the cache of validated files.
"""

from __future__ import annotations

import datetime
import json
import sys
import typing
from pathlib import Path
from typing import Any

import msgspec
import pytest
from conftest import ledger

from ledger import cache, yamlio
from ledger.config import (
    DEFAULT_ENGINE_PATTERNS,
    DEFAULT_ENV_PATTERNS,
    DEFAULT_TRAINING_PATTERNS,
    DEFAULTS,
    CaptureSection,
    CodeSection,
    Config,
    Declared,
    DiffSection,
    HeatConfig,
    JobSection,
    LogsSection,
    SecretsSection,
    declared,
    default_text,
    sections,
)
from ledger.configload import load_config, parse_config
from ledger.errors import LedgerError

ROOT = Path(__file__).resolve().parent.parent
KEYS = declared()

# Every key of the file, each with a value unlike its default, written by hand (not from the
# declaration): a key declared but missing here, or read into the wrong attribute, fails below.
FULL = """\
branch: runs/main
image: radixark/miles:v1
ignore: [wandb-*]
code:
  ignore: [notes/]
  max_file_mb: 16
logs:
  engine_patterns: ['^\\[engine\\]']
  extra: [ray-logs/*.log]
  git_max_mb: 8
capture:
  debug_data: false
  debug_framework: slime
  env_patterns: [MY_*]
  training_patterns: ['^mytrainer\\.']
  job_env: {RAY_DEDUP_LOGS: null, OMP_NUM_THREADS: 4}
host_checkouts: {miles: /src/miles}
heat_guard:
  enabled: false
  interval_s: 0.5
  pause_at: 90
  resume_at: 80
  resume_after: 10
  max_pause: 60
  sensor: {timeline: heat.timeline}
job:
  stop_grace_s: 5
diff:
  max_age_hours: 48
  replica_keys: [data-seed]
dvc_remote: myremote
secrets:
  names: [SIGNATURE]
image_probes: {cuda: nvcc --version}
"""

FULL_CONFIG = Config(
    branch="runs/main",
    image="radixark/miles:v1",
    ignore=("wandb-*",),
    code=CodeSection(ignore=("notes/",), max_file_mb=16.0),
    logs=LogsSection(engine_patterns=(r"^\[engine\]",), extra=("ray-logs/*.log",), git_max_mb=8.0),
    capture=CaptureSection(
        debug_data=False,
        debug_framework="slime",
        env_patterns=("MY_*",),
        training_patterns=(r"^mytrainer\.",),
        job_env={"RAY_DEDUP_LOGS": None, "OMP_NUM_THREADS": 4},
    ),
    host_checkouts={"miles": "/src/miles"},
    heat=HeatConfig(
        enabled=False,
        interval_s=0.5,
        pause_at=90.0,
        resume_at=80.0,
        resume_after=10.0,
        max_pause=60.0,
        sensor={"timeline": "heat.timeline"},
    ),
    job=JobSection(stop_grace_s=5.0),
    diff=DiffSection(max_age_hours=48.0, replica_keys=("data-seed",)),
    dvc_remote="myremote",
    secrets=SecretsSection(names=("SIGNATURE",)),
    image_probes={"cuda": "nvcc --version"},
)

# The properties the code reads (`cfg.engine_patterns`): a list or table key marked `adds_to`, with
# ledger's built-ins, and the secret names as matched; written by hand: a property that reads the
# wrong key, or a new one without a line here, fails below.
FLAT = {
    "engine_patterns": "logs.engine_patterns",
    "env_patterns": "capture.env_patterns",
    "training_patterns": "capture.training_patterns",
    "job_env": "capture.job_env",
    "secret_env_names": "secrets.names",
}


def _paths(tree: dict[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for k, v in tree.items():
        if isinstance(v, dict) and k in sections():
            out |= _paths(v, f"{prefix}{k}.")
        else:
            out.add(prefix + k)
    return out


def _at(cfg: Config, d: Declared) -> Any:
    return d.value(cfg)


def _as_written(value: Any) -> Any:
    """A default as the parsed YAML holds it (a list for a tuple)."""
    return list(value) if isinstance(value, tuple) else value


def _nested(path: str, value: Any) -> dict[str, Any]:
    section, _, name = path.rpartition(".")
    return {section: {name: value}} if section else {name: value}


def _refusal(data: dict[str, Any]) -> str:
    with pytest.raises(LedgerError) as info:
        parse_config(data)
    line = f"{info.value}"
    assert "\n" not in line and line.startswith(".ledger.yaml"), line
    return line


def test_a_fully_specified_file_validates_and_every_key_reaches_its_attribute() -> None:
    assert _paths(yamlio.loads(FULL, "FULL")) == {d.path for d in KEYS}  # FULL names every declared key, once
    cfg = parse_config(yamlio.loads(FULL, "FULL"))
    assert cfg == FULL_CONFIG
    for d in KEYS:  # and each one changed its attribute: no key is read into another's
        assert _at(cfg, d) != d.default, d.path
    # what the code reads: the pattern lists and the job's environment are the built-ins plus the file's
    assert cfg.engine_patterns == (*DEFAULT_ENGINE_PATTERNS, r"^\[engine\]")
    assert cfg.env_patterns == (*DEFAULT_ENV_PATTERNS, "MY_*")
    assert cfg.training_patterns == (*DEFAULT_TRAINING_PATTERNS, r"^mytrainer\.")
    assert cfg.job_env == {"OMP_NUM_THREADS": "4"}  # the built-in RAY_DEDUP_LOGS removed by its null, the number as text


def test_every_flat_name_the_code_reads_is_its_key() -> None:
    by_path = {d.path: d for d in KEYS}
    properties = {name for name, v in vars(Config).items() if isinstance(v, property)}
    assert properties == set(FLAT)
    for cfg in (FULL_CONFIG, DEFAULTS):
        for name, path in FLAT.items():
            d = by_path[path]
            flat, value, added = getattr(cfg, name), _at(cfg, d), d.extra("adds_to")
            if name == "secret_env_names":
                assert flat == {n.upper() for n in value}
            elif isinstance(added, tuple):
                assert flat == added + value, name
            elif isinstance(added, dict):
                merged = {**added, **{k: None if v is None else str(v) for k, v in value.items()}}
                assert flat == {k: v for k, v in merged.items() if v is not None}, name
            else:
                raise AssertionError(f"{name}: a property that adds nothing to {path} (read the key where it is declared)")


def test_every_default_in_the_declaration_is_what_config_gives() -> None:
    """`Config()`, an empty file, `ledger init`'s file and the declared defaults are one and the same."""
    assert parse_config(None) == parse_config({}) == Config() == DEFAULTS
    assert parse_config(yamlio.loads(default_text(), "init")) == Config()
    for d in KEYS:
        assert _at(Config(), d) == d.default, d.path
        # the file's default, written explicitly, gives the same attribute
        assert _at(parse_config(_nested(d.path, _as_written(d.default))), d) == d.default, d.path


def test_every_declared_field_is_a_key_and_every_section_is_described() -> None:
    attrs = {d.attr for d in KEYS}
    found = set()
    for f in msgspec.structs.fields(Config):
        if f.encode_name in sections():
            cls, doc = sections()[f.encode_name]
            assert doc and "\n" not in doc, f.name
            found |= {(f.name, g.name) for g in msgspec.structs.fields(cls)}
        else:
            found.add((f.name,))
    assert found == attrs
    assert {d.section for d in KEYS} - {""} == set(sections())
    assert all(d.doc and "\n" not in d.doc for d in KEYS)


def test_ledger_init_writes_every_key_with_its_meaning() -> None:
    text = default_text()
    for d in KEYS:
        name = d.path.rpartition(".")[2]
        line = next((line for line in text.splitlines() if line.lstrip("# ").startswith(f"{name}:") and d.doc in line), None)
        assert line is not None, d.path
        assert line.lstrip().startswith("#") == (d.extra("example") is not None), line  # commented exactly when it has an example
    commented = "\n".join(line.split(" # ")[0].replace("# ", "", 1) for line in text.splitlines()[1:])
    examples = parse_config(yamlio.loads(commented, "examples"))  # the examples, uncommented, validate too
    assert examples.image == "radixark/miles:latest" and examples.secrets.names == ("SIGNATURE",)


def test_ledger_init_writes_the_derived_file_and_the_run_reads_it(repo: Path) -> None:
    assert ledger(repo, "init").returncode == 0
    assert (repo / ".ledger.yaml").read_text() == default_text()
    assert load_config(repo, repo / ".git") == Config() == load_config(repo, repo / ".git")  # validated, then cached


def test_the_reference_documents_every_key_and_is_current() -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from gen_docs import config_reference
    finally:
        sys.path.remove(str(ROOT / "tools"))
    text = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    assert text == config_reference(), "docs/config.md is out of date: run `make docs`"
    rows = {line.split(" | ")[0].strip("| `"): line for line in text.splitlines() if line.startswith("| `")}
    for d in KEYS:
        row = rows[d.path]
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert len(cells) == 4 and all(cells), row  # a type, a default and a meaning
        assert d.doc in cells[3].replace("\\|", "|"), row


def test_every_key_refuses_a_value_of_the_wrong_type_naming_its_path() -> None:
    for d in KEYS:
        wrong = 3 if d.type in (str, str | None) else "text"
        line = _refusal(_nested(d.path, wrong))
        assert f"{d.path}:" in line, line


def test_every_declared_constraint_is_enforced() -> None:
    checked = 0
    for d in KEYS:
        bad: list[Any] = []
        if d.meta.gt is not None:
            bad.append(d.meta.gt)
        if d.meta.ge is not None:
            bad.append(d.meta.ge - 1)
        if any(typing.get_origin(m) is typing.Literal for m in typing.get_args(d.type)):
            bad.append("bogus")
        if d.extra("check") == "regex":
            bad.append(["ok", "(unclosed"])
        if d.extra("check") == "branch":
            bad.append("exp..bad")
        for value in bad:
            assert d.path in _refusal(_nested(d.path, value))
            checked += 1
        if d.extra("above"):
            line = _refusal({d.section: {d.name: 70, d.extra("above"): 75}})
            assert line.endswith(f"{d.section}: pause_at (70) must be above resume_at (75)"), line
            checked += 1
    assert checked >= 10  # interval, sizes, times, the two regex lists, the branch, the framework, the hysteresis


# ---- the cache of validated files: plain JSON, named by the file's bytes and the code's version ----
def _entries(repo: Path) -> list[Path]:
    return sorted((repo / ".git" / "ledger" / "config").glob("*.json"))


def test_a_validated_file_is_cached_as_plain_data_and_decoded_through_config_again(repo: Path) -> None:
    (repo / ".ledger.yaml").write_text("heat_guard: {pause_at: 90}\n")
    assert load_config(repo, repo / ".git").heat.pause_at == 90
    (entry,) = _entries(repo)
    plain = json.loads(entry.read_text())
    assert plain == json.loads(msgspec.json.encode(load_config(repo)))  # the validated file, every key, as plain data
    # a hit comes from the entry: one that says otherwise (and validates) is what the next load gives
    entry.write_text(json.dumps({**plain, "heat_guard": {**plain["heat_guard"], "pause_at": 91}}))
    assert load_config(repo, repo / ".git").heat.pause_at == 91
    # an entry that does not validate through the same types and checks is a miss: the file is read
    for bad in ({**plain, "heat_guard": {"pause_at": 60}}, {**plain, "bogus": 1}, {**plain, "branch": "exp..bad"}):
        entry.write_text(json.dumps(bad))
        assert load_config(repo, repo / ".git").heat.pause_at == 90, bad
    entry.write_text("{not json")
    assert load_config(repo, repo / ".git").heat.pause_at == 90
    assert json.loads(entry.read_text()) == plain  # and the entry is written again


def test_a_changed_file_or_a_changed_code_version_is_a_miss(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / ".ledger.yaml").write_text("heat_guard: {pause_at: 90}\n")
    load_config(repo, repo / ".git")
    (entry,) = _entries(repo)
    poisoned = json.loads(entry.read_text())
    poisoned["heat_guard"]["pause_at"] = 91
    entry.write_text(json.dumps(poisoned))  # from here, a hit on this entry reads 91
    assert load_config(repo, repo / ".git").heat.pause_at == 91
    (repo / ".ledger.yaml").write_text("heat_guard: {pause_at: 88}\n")  # other bytes: another entry
    assert load_config(repo, repo / ".git").heat.pause_at == 88
    (repo / ".ledger.yaml").write_text("heat_guard: {pause_at: 90}\n")  # the first bytes again: the hit
    assert load_config(repo, repo / ".git").heat.pause_at == 91
    monkeypatch.setattr(cache, "code_version", lambda *modules: "0123456789ab")  # another ledger: every entry a miss
    assert load_config(repo, repo / ".git").heat.pause_at == 90
    assert len(_entries(repo)) == 3


@pytest.mark.parametrize(
    ("text", "probes"), [("{built: 2026-12-03}", {"built": datetime.date(2026, 12, 3)}), ("{cuda: {1: x}}", {"cuda": {1: "x"}})]
)
def test_a_file_plain_json_cannot_hold_is_validated_every_time(repo: Path, text: str, probes: dict[str, Any]) -> None:
    """A YAML date, or a number as a key, in a free mapping (`image_probes`) would come back from JSON as text: not cached."""
    (repo / ".ledger.yaml").write_text(f"image_probes: {text}\n")
    for _ in range(2):
        assert load_config(repo, repo / ".git").image_probes == probes
    assert _entries(repo) == []
