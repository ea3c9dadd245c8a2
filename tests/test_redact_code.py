"""Code is not a secret (issue 33, item 5): a launcher copy showed `{key: ***}` for
`{key: value for key, value in os.environ.items()}`. A secret-named word followed by code in the
value's place (a loop variable, a type annotation, an attribute named like the secret, a call or
subscript) is kept; a value of any other shape after the same names is still hidden.

The launcher lines are in the shapes of radixark/miles' Python launchers (31f1ca96):
`examples/retool_v2/run_retool_multi_turn.py` (`WANDB_API_KEY = os.environ.get(...)`),
`examples/geo3k_vlm/multi_turn/run_geo3k_vlm_multi_turn.py` (`os.environ["WANDB_API_KEY"]` in a
dict), `examples/experimental/openenv/run-openenv-tbench2.py` (`wandb_key: str = os.environ.get(...)`).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import ledger, make_repo

from ledger.redact.names import Redactions
from ledger.redact.scanner import Redactor

CODE = [
    "env = {key: value for key, value in os.environ.items()}",
    "    WANDB_API_KEY = os.environ.get('WANDB_API_KEY')",
    '    extra_env_vars=({"WANDB_API_KEY": os.environ["WANDB_API_KEY"]} if os.environ.get("WANDB_API_KEY") else {}),',
    '    wandb_key: str = os.environ.get("WANDB_KEY", "")',
    "    run(api_key=args.api_key, token=self.token)",
]


@pytest.mark.parametrize("line", CODE)
def test_code_after_a_secret_name_is_kept(line: str) -> None:
    acc = Redactions()
    assert Redactor(set(), ()).redact_text(line, acc) == line and not acc


@pytest.mark.parametrize(
    ("line", "hidden"),
    [
        ("password: changeme", "password: ***"),  # a lower-case word: still a password
        ("api_key=args.other_key", "api_key=***"),  # an attribute, but not named like the secret
        ("--wandb-key abc.def", "--wandb-key ***"),
        ("WANDB_API_KEY=k", "WANDB_API_KEY=***"),
        ("token: sk_live_abcdef1234567890", "token: ***"),
    ],
)
def test_other_values_after_the_same_names_stay_hidden(line: str, hidden: str) -> None:
    assert Redactor(set(), ()).redact_text(line) == hidden


LAUNCHER = """\
import os
import subprocess

env = {key: value for key, value in os.environ.items()}
WANDB_API_KEY = os.environ.get("WANDB_API_KEY")
HF_TOKEN = "hf_abcdefghijklmnopqrstuvwxyz0123456789"
subprocess.run(["python3", "train.py", "--lr", "0.1"], env=env, check=True)
"""


def test_a_launcher_copy_keeps_its_code_and_hides_its_secret(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "proj", {"run.py": LAUNCHER, "train.py": "print('the value of lr is 0.1', flush=True)\n"})
    ledger(repo, "init")
    r = ledger(repo, "run", "--no-debug-data", "--", "python3", "run.py")
    assert r.returncode == 0, r.stderr
    m = json.loads(ledger(repo, "show", "latest", "--json").stdout)
    folder = f"runs/{m['id'][-4:-2]}/{m['id']}"

    def show(rel: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), "show", f"experiments:{folder}/{rel}"], capture_output=True, text=True, check=True
        ).stdout

    copy = show("launcher/run.py")
    assert "env = {key: value for key, value in os.environ.items()}" in copy
    assert 'WANDB_API_KEY = os.environ.get("WANDB_API_KEY")' in copy
    assert "hf_abcdefghijklmnopqrstuvwxyz" not in copy and "HF_TOKEN = " in copy
    assert "the value of lr is 0.1" in show("trainer.log")  # `value` never became a known secret value
