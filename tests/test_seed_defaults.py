"""Seeds a launcher does not pass (issue 33, item 4): every Miles launcher relies on the parser's
`--seed` 1234 and `--rollout-seed` 42 (miles-facts.md). They are recorded, marked as defaults:
read from the framework's parser where its source is here, else from the training script's own
parser, else from ledger's table.

The parser files below are written in the shape of radixark/miles' `miles/utils/arguments.py`
(31f1ca96) and THUDM/slime's `slime/utils/arguments.py` (624b824a): `add_argument` calls inside
nested `add_*_arguments(parser)` functions with multi-line help, and `reset_arg(parser, "--seed",
type=int, default=1234)` overriding Megatron's own default near the end. None is copied.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import ledger, make_repo

from ledger.understand.seeddefaults import parser_defaults, seed_defaults

# a fork's defaults (7 and 9, not 1234 and 42): the record must show the parser's, not the table's
ARGUMENTS = """\
import argparse


def reset_arg(parser, name, **kwargs):
    for action in parser._actions:
        if name in action.option_strings:
            if "default" in kwargs:
                action.default = kwargs["default"]
            break
    else:
        parser.add_argument(name, **kwargs)


def get_miles_extra_args_provider():
    def add_miles_arguments(parser):
        def add_rollout_arguments(parser):
            parser.add_argument(
                "--rollout-seed",
                type=int,
                default=9,
                help=(
                    "The seed for the random number generator during rollout. "
                    "This is used to shuffle the prompts and also for the random sampling of the prompts."
                ),
            )
            parser.add_argument("--num-rollout", type=int, default=2)
            parser.add_argument("--lr", type=float, default=1e-6)
            return parser

        def add_debug_arguments(parser):
            parser.add_argument("--save-debug-rollout-data", type=str, default=None)
            parser.add_argument("--save-debug-event-data", type=str, default=None)
            parser.add_argument("--load-debug-rollout-data", type=str, default=None)
            parser.add_argument("--debug-train-only", action="store_true", default=False)
            return parser

        parser.add_argument("--seed", type=int, default=None)  # Megatron's, before Miles resets it
        add_rollout_arguments(parser)
        add_debug_arguments(parser)
        reset_arg(parser, "--seed", type=int, default=7)
        return parser

    return add_miles_arguments


def parse_args():
    parser = argparse.ArgumentParser()
    get_miles_extra_args_provider()(parser)
    return parser.parse_args()
"""

TRAIN = """\
from miles.utils.arguments import parse_args

args = parse_args()
print("trained with seed", args.seed, "rollout seed", args.rollout_seed, flush=True)
"""


def _seeds(repo: Path, *argv: str) -> dict:
    r = ledger(repo, "run", "--", "python3", "train.py", *argv)
    assert r.returncode == 0, r.stderr
    return json.loads(ledger(repo, "show", "latest", "--json").stdout)["seeds"]


def test_parser_defaults_read_the_last_call_of_each_flag_without_running_the_file(tmp_path: Path) -> None:
    path = tmp_path / "arguments.py"
    path.write_text(ARGUMENTS + "\nraise SystemExit('never run')\nparser.add_argument('--lr', default=compute())\n")
    assert parser_defaults(path, ["--seed", "--rollout-seed", "--lr", "--absent"]) == {"--seed": 7, "--rollout-seed": 9}
    (tmp_path / "broken.py").write_text("def (:\n")
    assert parser_defaults(tmp_path / "broken.py", ["--seed"]) == {}
    table = seed_defaults("slime", None, ["seed", "rollout_seed"])  # no slime parser here: the table
    assert table.values == {"seed": 1234, "rollout_seed": 42}
    assert table.sources["seed"] == "slime's default (ledger's table: slime has no parser here)"
    assert seed_defaults("unknown", None, ["seed"]).values == {}


def test_seeds_the_launcher_does_not_pass_are_the_frameworks_defaults(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "proj",
        {"train.py": TRAIN, "miles/__init__.py": "", "miles/utils/__init__.py": "", "miles/utils/arguments.py": ARGUMENTS},
    )
    ledger(repo, "init")
    seeds = _seeds(repo, "--lr", "0.1")
    where = "miles's parser (miles/utils/arguments.py)"
    assert seeds == {"seed": 7, "rollout_seed": 9, "defaults": {"seed": where, "rollout_seed": where}}
    # a seed the command passes is its own, not a default
    assert _seeds(repo, "--seed", "3") == {"seed": 3, "rollout_seed": 9, "defaults": {"rollout_seed": where}}
    # no parser source beside the script, none importable here: ledger's table of Miles' defaults
    (repo / "miles" / "utils" / "arguments.py").unlink()
    (repo / "train.py").write_text("import miles  # noqa: F401\nprint('trained', flush=True)\n")
    seeds = _seeds(repo)
    assert seeds["seed"] == 1234 and seeds["rollout_seed"] == 42
    assert seeds["defaults"]["seed"] == "miles's default (ledger's table: miles has no parser here)"


def test_a_trainer_of_its_own_records_its_parsers_seed_default(tmp_path: Path) -> None:
    own = "import argparse\np = argparse.ArgumentParser()\np.add_argument('--seed', type=int, default=5)\nprint(p.parse_args().seed)\n"
    repo = make_repo(tmp_path / "proj", {"train.py": own})
    ledger(repo, "init")
    seeds = _seeds(repo)
    assert seeds == {"seed": 5, "rollout_seed": None, "defaults": {"seed": "the training script's parser (train.py)"}}
