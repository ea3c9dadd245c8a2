"""Issue 20, part 3: `.ledger.yaml` is declared once (`ledger/config.py`), and everything else follows.

These tests fail when something derived from the declaration drifts from it, or the declaration from
what the code reads: the schema, the defaults, `ledger init`'s file, docs/config.md, the cache key.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ledger

from ledger import yamlio
from ledger.config import DEFAULTS, SECTIONS, Config, HeatConfig
from ledger.configkeys import Declared, declared, default_text
from ledger.configschema import parse_config
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
    code_ignore=("notes/",),
    code_max_file_mb=16.0,
    engine_patterns=(*DEFAULTS.engine_patterns, r"^\[engine\]"),
    extra_logs=("ray-logs/*.log",),
    log_git_max_mb=8.0,
    debug_data=False,
    debug_framework="slime",
    env_patterns=(*DEFAULTS.env_patterns, "MY_*"),
    training_patterns=(*DEFAULTS.training_patterns, r"^mytrainer\."),
    job_env={"OMP_NUM_THREADS": "4"},  # the built-in RAY_DEDUP_LOGS removed by its null
    host_checkouts={"miles": "/src/miles"},
    heat=HeatConfig(False, 0.5, 90.0, 80.0, 10.0, 60.0, {"timeline": "heat.timeline"}),
    stop_grace_s=5.0,
    max_age_hours=48.0,
    replica_keys=("data-seed",),
    dvc_remote="myremote",
    secret_names=("SIGNATURE",),
    image_probes={"cuda": "nvcc --version"},
)


def _paths(tree: dict[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for k, v in tree.items():
        if isinstance(v, dict) and k in SECTIONS:
            out |= _paths(v, f"{prefix}{k}.")
        else:
            out.add(prefix + k)
    return out


def _at(cfg: Config, d: Declared) -> Any:
    value: Any = cfg
    for part in d.attr:
        value = getattr(value, part)
    return value


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


def test_every_default_in_the_declaration_is_what_config_gives() -> None:
    """`Config()`, an empty file, `ledger init`'s file and the declared defaults are one and the same."""
    assert parse_config(None) == parse_config({}) == Config() == DEFAULTS
    assert parse_config(yamlio.loads(default_text(), "init")) == Config()
    for d in KEYS:
        assert _at(Config(), d) == d.default, d.path
        # the file's default, written explicitly, gives the same attribute
        assert _at(parse_config(_nested(d.path, d.file_default)), d) == d.default, d.path


def test_every_declared_field_is_a_key_and_every_section_is_described() -> None:
    attrs = {d.attr for d in KEYS}
    for f in dataclasses.fields(Config):
        if f.name != "heat":
            assert (f.name,) in attrs and f.metadata["path"], f.name
    assert {("heat", f.name) for f in dataclasses.fields(HeatConfig)} <= attrs
    assert {d.path.rpartition(".")[0] for d in KEYS} - {""} == set(SECTIONS)
    assert all(d.spec.doc and "\n" not in d.spec.doc for d in KEYS)


def test_ledger_init_writes_every_key_with_its_meaning() -> None:
    text = default_text()
    for d in KEYS:
        name = d.path.rpartition(".")[2]
        line = next((line for line in text.splitlines() if line.lstrip("# ").startswith(f"{name}:") and d.spec.doc in line), None)
        assert line is not None, d.path
        assert line.lstrip().startswith("#") == (d.spec.example is not None), line  # commented exactly when it has an example
    commented = "\n".join(line.split(" # ")[0].replace("# ", "", 1) for line in text.splitlines()[1:])
    examples = parse_config(yamlio.loads(commented, "examples"))  # the examples, uncommented, validate too
    assert examples.image == "radixark/miles:latest" and examples.secret_names == ("SIGNATURE",)


def test_ledger_init_writes_the_derived_file_and_the_run_reads_it(repo: Path) -> None:
    assert ledger(repo, "init").returncode == 0
    assert (repo / ".ledger.yaml").read_text() == default_text()
    from ledger.configload import load_config

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
        assert d.spec.doc in cells[3].replace("\\|", "|"), row


def test_every_key_refuses_a_value_of_the_wrong_type_naming_its_path() -> None:
    for d in KEYS:
        wrong = 3 if d.type in (str, str | None) else "text"
        line = _refusal(_nested(d.path, wrong))
        assert f"{d.path}:" in line, line


def test_every_declared_constraint_is_enforced() -> None:
    checked = 0
    for d in KEYS:
        s = d.spec
        bad: list[Any] = []
        if s.gt is not None:
            bad.append(s.gt)
        if s.ge is not None:
            bad.append(s.ge - 1)
        if s.choices:
            bad.append("bogus")
        if s.each == "regex":
            bad.append(["ok", "(unclosed"])
        if s.each == "branch":
            bad.append("exp..bad")
        for value in bad:
            assert d.path in _refusal(_nested(d.path, value))
            checked += 1
        if s.above:
            section = d.path.rpartition(".")[0]
            line = _refusal({section: {d.path.rpartition(".")[2]: 70, s.above: 75}})
            assert line.endswith(f"{section}: pause_at (70) must be above resume_at (75)"), line
            checked += 1
    assert checked >= 10  # interval, sizes, times, the two regex lists, the branch, the framework, the hysteresis
